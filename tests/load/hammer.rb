# A load worker, the Ruby twin of hammer.py: hammers keys from threads with a
# long- and a short-window limiter until a deadline, then prints every
# admitted check as JSON lines.
#
#   ruby hammer.rb URL PREFIX SECONDS THREADS KEY [KEY ...]
require "json"
require "ratekeeper"

url, prefix, seconds, threads, *keys = ARGV
limiters = {
  "long" => Ratekeeper::Limiter.new("40/hour", store: url, prefix: "#{prefix}-long", on_error: :raise, timeout: 5),
  "short" => Ratekeeper::Limiter.new("25/second", store: url, prefix: "#{prefix}-short", on_error: :raise, timeout: 5)
}
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(seconds)
admitted = Array.new(Integer(threads)) do |offset|
  Thread.new do
    mine = []
    i = offset
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      key = keys[i % keys.size]
      limiters.each do |name, limiter|
        d = limiter.check(key)
        mine << { "rule" => name, "key" => key, "now" => d.now } if d.allowed?
      end
      i += 1
    end
    mine
  end
end.flat_map(&:value)
admitted.each { |record| puts JSON.generate(record) }
