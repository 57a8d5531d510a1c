# frozen_string_literal: true

require_relative "test_helper"
require "tmpdir"

# The GVL is released while the core waits on Redis: with Redis frozen
# (SIGSTOP), four threads wait inside check at the same time while the main
# thread keeps running Ruby code, and their waits overlap. And signals the
# process takes meanwhile fail none of those waits.
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

  # A signal that lands on a thread blocked in a Redis read used to end the
  # read with EINTR, and the check with a storage error that on_error
  # admitted: the process's own trap (and a child's SIGCHLD) failed checks
  # open. Two processes send SIGUSR1 as fast as they can (30,000 each at
  # most, for 20 s at most) while four threads make 20,000 checks. (The
  # timeout is 2 s: an interrupted read fails at once whatever it is, while
  # the default 250 ms can run out on a machine the senders keep busy.)
  def test_signals_taken_while_checks_wait_on_redis_fail_none
    limiter = Ratekeeper::Limiter.new("1000000/second", store: redis_url, prefix: unique_prefix, on_error: :allow,
                                                       timeout: 2.0)
    taken = 0
    previous = trap("USR1") { taken += 1 }
    senders = Array.new(2) do
      spawn("bash", "-c", "for i in $(seq 30000); do kill -USR1 #{Process.pid} 2>/dev/null || exit 0; done",
            pgroup: true)
    end
    degraded = Array.new(4) do |t|
      Thread.new { Array.new(5000) { |i| limiter.check("k#{t}-#{i % 50}") }.count(&:degraded?) }
    end.sum(&:value)
    assert_equal 0, degraded, "checks failed while the process took signals"
    assert_equal 0, limiter.error_count
    assert_operator taken, :>, 0, "no signal arrived during the checks: the test proved nothing"
  ensure
    senders&.each do |pid|
      Process.kill(:TERM, -pid)
    rescue Errno::ESRCH
      nil
    end
    senders&.each do |pid|
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
      sleep 0.05 until Process.wait(pid, Process::WNOHANG) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    rescue Errno::ECHILD
      nil
    end
    trap("USR1", previous || "DEFAULT")
  end
end
