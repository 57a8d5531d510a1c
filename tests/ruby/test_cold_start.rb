# frozen_string_literal: true

require_relative "test_helper"
require "timeout"

# A threaded process whose threads all make their first checks at once (a
# Puma worker receiving requests as it boots) never hangs: every class the
# extension wraps and every exception class is resolved in its init, so no
# thread calls into Ruby inside a once-lock (the hang: one thread inside the
# lock waiting for the GVL, another holding the GVL and waiting for the lock).
class TestColdStart < Minitest::Test
  include TestSupport

  SCRIPT = File.expand_path("servers/cold_start.rb", __dir__)
  PROCESSES = 120
  AT_ONCE = 4
  THREADS = 16
  # far longer than a process takes (well under a second), short enough to
  # count a hang instead of waiting for it
  LIMIT = 20

  def run_one(url, dead)
    out = IO.pipe
    pid = Process.spawn(RbConfig.ruby, SCRIPT, url, THREADS.to_s, dead.to_s, out: out[1], err: out[1])
    out[1].close
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + LIMIT
    status = nil
    until (status = Process.wait2(pid, Process::WNOHANG)&.last)
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        Process.kill(:KILL, pid)
        Process.wait(pid)
        out[0].close
        return :hung
      end
      sleep 0.02
    end
    text = out[0].read
    out[0].close
    status.success? && text.include?("ok #{THREADS}") ? :ok : text
  end

  def test_cold_processes_releasing_threads_at_once_never_hang
    url = redis_url
    dead = free_port
    # the CPU kept busy beside the processes, as on a loaded machine
    burners = Array.new(2) { Process.spawn(RbConfig.ruby, "-e", "loop { }") }
    results = []
    begin
      PROCESSES.times.each_slice(AT_ONCE) do |slice|
        results.concat(slice.map { Thread.new { run_one(url, dead) } }.map(&:value))
      end
    ensure
      burners.each { |pid| Process.kill(:KILL, pid) }
      burners.each { |pid| Process.wait(pid) }
    end
    hung = results.count(:hung)
    failed = results.reject { |r| %i[ok hung].include?(r) }
    assert_empty failed, "processes that failed: #{failed.first(3).inspect}"
    assert_equal 0, hung, "#{hung} of #{PROCESSES} cold processes hung (killed after #{LIMIT} s)"
  end

  # Every class the extension wraps is resolved in init (lib.rs resolve_lazy):
  # a class added later without being listed there fails this test.
  def test_every_wrapped_class_is_resolved_in_init
    src = File.join(ROOT, "ruby/ext/ratekeeper/src")
    wrapped = Dir[File.join(src, "*.rs")].flat_map do |file|
      File.read(file).scan(/#\[magnus::wrap\(class = "Ratekeeper::(\w+)".*?\]\s*(?:#\[[^\]]*\]\s*)*pub struct (\w+)/m)
                     .map { |_class, struct| struct }
    end
    refute_empty wrapped
    resolved = File.read(File.join(src, "lib.rs"))[/fn resolve_lazy.*?^}/m]
    wrapped.each { |struct| assert_match(/::#{struct}::class\(ruby\)/, resolved, "#{struct} is not resolved in init") }
    lazies = Dir[File.join(src, "*.rs")].sum { |file| File.read(file).scan(/static \w+: Lazy</).size }
    forced = File.read(File.join(src, "errors.rs"))[/pub fn init.*?^}/m].to_s
    assert_equal lazies, forced.scan(/&[A-Z_]{2,}\b/).size, "every Lazy static is forced in errors::init"
  end
end
