# frozen_string_literal: true

require_relative "test_helper"

# Python and Ruby processes share one quota on one Redis: the same key, the same
# Redis keys, and together they admit exactly the limit.
class TestCrossLanguage < Minitest::Test
  include TestSupport

  PYTHON = <<~PY
    import sys, threading, ratekeeper
    url, prefix, mode = sys.argv[1:4]
    limiter = ratekeeper.Limiter("150/hour", url, prefix=prefix, on_error="raise", timeout=5)
    if mode == "peek":
        print(limiter.peek("probe:caf\\u00e9").remaining)
        sys.exit(0)
    print("ready", flush=True)
    sys.stdin.readline()
    admitted = 0
    lock = threading.Lock()
    def work():
        global admitted
        for _ in range(100):
            if limiter.check("shared"):
                with lock:
                    admitted += 1
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(admitted, flush=True)
  PY

  def python(*args)
    IO.popen(["python3", "-c", PYTHON, redis_url, *args], "r+")
  end

  def test_ruby_and_python_build_the_same_keys
    prefix = unique_prefix
    limiter = Ratekeeper::Limiter.new("150/hour", store: redis_url, prefix: prefix, on_error: :raise)
    3.times { limiter.check("probe:caf\u00e9") }
    assert_equal "147", python(prefix, "peek").read.strip
  end

  def test_python_and_ruby_together_admit_exactly_the_limit
    prefix = unique_prefix
    limiter = Ratekeeper::Limiter.new("150/hour", store: redis_url, prefix: prefix, on_error: :raise, timeout: 5)
    child = python(prefix, "check")
    assert_equal "ready", child.gets.to_s.strip
    child.puts "go"
    child.flush
    ruby_admitted = Array.new(4) { Thread.new { 100.times.count { limiter.check("shared").allowed? } } }.sum(&:value)
    python_admitted = Integer(child.read.strip)
    child.close
    assert_equal 150, ruby_admitted + python_admitted,
                 "ruby admitted #{ruby_admitted}, python #{python_admitted} of 800 tries on 150/hour"
    refute limiter.check("shared").allowed?
  end
end
