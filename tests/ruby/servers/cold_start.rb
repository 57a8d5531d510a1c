# frozen_string_literal: true

# One cold process for tests/ruby/test_cold_start.rb: busy Ruby threads
# beside it, THREADS threads released at once into their first use of every
# native class (Limiter, Decision, RuleState, Rule, Admin, Responses, Answer,
# TrustedProxies, Fail2Ban) and every error class. Prints "ok <n>" when every
# thread finished; a process that hangs is killed by the test.
$LOAD_PATH.unshift(File.expand_path("../../../ruby/lib", __dir__)) if ENV["RATEKEEPER_DEV"] == "1"
require "ratekeeper"

url = ARGV.fetch(0)
threads = Integer(ARGV.fetch(1, "12"))
dead = ARGV.fetch(2) # a loopback port nothing listens on

stop = false
busy = Array.new(2) { Thread.new { x = 0; x += 1 until stop } }
gate = Queue.new
done = Queue.new
workers = Array.new(threads) do |i|
  Thread.new do
    gate.pop
    case i % 6
    when 0
      limiter = Ratekeeper::Limiter.new("5/second; 100/minute", store: url, prefix: "cold-#{Process.pid}")
      limiter.check("k#{i}").rules.each(&:remaining)
      limiter.peek("k#{i}")
    when 1
      limiter = Ratekeeper::Limiter.new("5/second", store: "memory://")
      limiter.check_many(%w[a b c]).each(&:allowed?)
      limiter.rules.map(&:window_name)
    when 2
      Ratekeeper::Admin.new(store: url, prefix: "cold-#{Process.pid}").entries
    when 3
      responses = Ratekeeper::Responses.new
      decision = Ratekeeper::Limiter.new("1/second").check("x")
      responses.answer(decision).status
      Ratekeeper::TrustedProxies.new(["10.0.0.0/8"]).client_ip("10.0.0.1", "203.0.113.7")
    when 4
      begin
        Ratekeeper::Limiter.new("5/fortnight")
      rescue Ratekeeper::ConfigurationError
        nil
      end
      Ratekeeper::Fail2Ban.new("cold", maxretry: 3)
    when 5
      begin
        Ratekeeper::Limiter.new("5/second", store: "redis://127.0.0.1:#{dead}/0", on_error: :raise,
                                            timeout: 0.2, connect_timeout: 0.2).check("x")
      rescue Ratekeeper::StorageError
        nil
      end
    end
    done << i
  end
end
threads.times { gate << true }
workers.each(&:join)
stop = true
busy.each(&:join)
puts "ok #{done.size}"
