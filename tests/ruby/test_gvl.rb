# frozen_string_literal: true

require_relative "test_helper"
require "tmpdir"

# The GVL is released while the core waits on Redis: with Redis frozen
# (SIGSTOP), four threads wait inside check at the same time while the main
# thread keeps running Ruby code, and their waits overlap.
class TestGvl < Minitest::Test
  include TestSupport

  def with_own_redis
    Dir.mktmpdir do |dir|
      port = free_port
      pidfile = File.join(dir, "redis.pid")
      system("redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--save", "", "--daemonize", "yes",
             "--pidfile", pidfile, "--dir", dir, exception: true)
      wait_for_redis(port)
      pid = File.read(pidfile).to_i
      begin
        yield port, pid
      ensure
        Process.kill(:CONT, pid)
        Process.kill(:TERM, pid)
      end
    end
  end

  def test_threads_wait_on_a_frozen_redis_without_the_gvl
    with_own_redis do |port, pid|
      limiter = Ratekeeper::Limiter.new("1000/second", store: "redis://127.0.0.1:#{port}/0", timeout: 1.0,
                                                       connect_timeout: 1.0, on_error: :allow)
      3.times { refute limiter.check("warm").degraded? }
      Process.kill(:STOP, pid)
      start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      threads = Array.new(4) { Thread.new { limiter.check("k") } }
      spins = 0
      spins += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - start < 0.5
      all_waiting = threads.all?(&:alive?)
      results = threads.map(&:value)
      elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
      Process.kill(:CONT, pid)

      assert all_waiting, "the threads should still be waiting on the frozen Redis half a second in"
      assert_operator spins, :>, 10_000, "the main thread ran only #{spins} loop turns while the others waited"
      assert(results.all? { |d| d.allowed? && d.degraded? })
      assert_operator elapsed, :<, 3.5, "waits did not overlap: four 1 s waits one after the other take 4 s"
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      sleep 0.05 while limiter.check("after").degraded? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      refute limiter.check("after").degraded?, "checks reach Redis again once it is back (after the breaker's back-off)"
    end
  end
end
