# frozen_string_literal: true

require_relative "test_helper"
require "timeout"

# Waiting for a slot from Ruby: acquire (the GVL released while it sleeps),
# within_limit, and RateLimitExceeded carrying the last decision.
class TestWaiting < Minitest::Test
  include TestSupport

  def test_acquire_sleeps_the_exact_wait_and_lets_other_threads_run
    limiter = Ratekeeper::Limiter.new("2/300ms", store: redis_url, prefix: unique_prefix)
    ticks = 0
    ticker = Thread.new { loop { ticks += 1; sleep 0.01 } }
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    decisions = Array.new(5) { limiter.acquire("k") }
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    ticker.kill
    assert decisions.all?(&:allowed?)
    assert_operator took, :>=, 0.6
    assert_operator took, :<, 0.75
    assert_operator ticks, :>, 30, "other threads ran while acquire slept"
  end

  def test_a_wait_past_the_timeout_raises_with_the_decision
    limiter = Ratekeeper::Limiter.new("1/minute", store: redis_url, prefix: unique_prefix)
    assert limiter.acquire(:k).allowed?
    error = assert_raises(Ratekeeper::RateLimitExceeded) { limiter.acquire(:k, timeout: 0.5) }
    refute error.decision.allowed?
    assert_operator error.decision.retry_after, :>, 50
    assert_kind_of Ratekeeper::Error, error
    assert_match(/never/, assert_raises(Ratekeeper::RateLimitExceeded) { limiter.acquire(:k, cost: 2) }.message)
    assert_raises(Ratekeeper::ConfigurationError) { limiter.acquire(:k, timeout: -1) }
  end

  def test_within_limit
    limiter = Ratekeeper::Limiter.new("2/minute", store: redis_url, prefix: unique_prefix)
    assert_equal [1, 2], [1, 2].map { |n| limiter.within_limit("job", wait: false) { n } }
    error = assert_raises(Ratekeeper::RateLimitExceeded) { limiter.within_limit("job", wait: false) { :never_run } }
    refute error.decision.allowed?
    assert_raises(Ratekeeper::RateLimitExceeded) { limiter.within_limit("job", wait: 0.2) { :never_run } }
    quick = Ratekeeper::Limiter.new("2/300ms", store: redis_url, prefix: unique_prefix)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert_equal [0, 1, 2], Array.new(3) { |n| quick.within_limit("partner") { n } }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :>=, 0.3
  end

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # A wait is interrupted at once by Timeout, Thread#raise and Ctrl-C, as a
  # sleep is: the thread is woken and the exception raised in it.
  def test_a_wait_ends_at_once_when_ruby_interrupts_the_thread
    limiter = Ratekeeper::Limiter.new("1/minute", store: redis_url, prefix: unique_prefix)
    assert limiter.check("k").allowed?
    started = monotonic
    assert_raises(Timeout::Error) { Timeout.timeout(0.2) { limiter.acquire("k") } }
    assert_raises(Timeout::Error) { Timeout.timeout(0.2) { limiter.within_limit("k") { flunk "no slot" } } }
    assert_operator monotonic - started, :<, 5, "Timeout ended neither wait (each is about a minute)"

    waiter = Thread.new { limiter.acquire("k") }
    sleep 0.1 until waiter.status == "sleep"
    started = monotonic
    waiter.raise(RuntimeError, "stop waiting")
    error = assert_raises(RuntimeError) { waiter.join(10) }
    assert_equal "stop waiting", error.message
    assert_operator monotonic - started, :<, 5

    # a signal whose trap raises nothing: the wait goes on and still times out as asked
    trapped = 0
    previous = Signal.trap("USR1") { trapped += 1 }
    begin
      killer = Thread.new { sleep 0.1; Process.kill("USR1", Process.pid) }
      assert_raises(Ratekeeper::RateLimitExceeded) { limiter.acquire("k", timeout: 0.5) }
      killer.join
      assert_equal 1, trapped
    ensure
      Signal.trap("USR1", previous || "DEFAULT")
    end
  end

  def test_ctrl_c_ends_a_wait_in_a_script
    code = <<~RUBY
      require "ratekeeper"
      limiter = Ratekeeper::Limiter.new("1/minute")
      limiter.check("k")
      $stdout.puts "waiting"
      $stdout.flush
      begin
        limiter.acquire("k")
      rescue Interrupt
        puts "interrupted"
      end
    RUBY
    lib = ENV["RATEKEEPER_DEV"] == "1" ? ["-I", File.join(ROOT, "ruby/lib")] : []
    IO.popen([RbConfig.ruby, *lib, "-e", code], err: %i[child out]) do |io|
      assert_equal "waiting", io.gets&.chomp
      sleep 0.2
      started = monotonic
      Process.kill("INT", io.pid)
      out = Timeout.timeout(10) { io.read }
      assert_includes out, "interrupted"
      assert_operator monotonic - started, :<, 5
    end
  end
end
