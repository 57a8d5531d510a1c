# The quick start: three requests a second, five a minute, on the embedded store.
#
#   ruby examples/quickstart.rb
require "ratekeeper"

limiter = Ratekeeper::Limiter.new("3/second; 5/minute") # store: "redis://127.0.0.1:6379/0" in production

(1..7).each do |i|
  d = limiter.check("user:42")
  puts "request #{i}: allowed=#{d.allowed?} remaining=#{d.remaining}/#{d.limit} retry_after=#{d.retry_after}"
end
puts "headers of the last answer: #{limiter.check("user:42").headers}"
puts "another user is not affected: #{limiter.check("user:43").inspect}"
