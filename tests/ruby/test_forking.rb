# frozen_string_literal: true

require_relative "test_helper"
require "net/http"

# A limiter built (and used) before a fork keeps limiting in every child: puma
# with two workers, with and without preload_app!, over real HTTP, and
# Process.fork. No check fails open, and a key's quota is exact across all the
# processes.
class TestForking < Minitest::Test
  include TestSupport

  SERVERS = File.join(ROOT, "tests/ruby/servers")

  def test_puma_preloaded_workers_limit_exactly
    serve_and_count(File.join(SERVERS, "puma_preload.rb"))
  end

  def test_puma_workers_without_preload_limit_exactly
    serve_and_count(File.join(SERVERS, "puma_workers.rb"))
  end

  def test_process_fork_children_share_the_quota_exactly
    limiter = Ratekeeper::Limiter.new("30/minute", store: redis_url, prefix: unique_prefix)
    refute limiter.check("parent").degraded?, "the parent opens its connections before forking"
    readers = Array.new(4) do
      reader, writer = IO.pipe
      Process.fork do
        reader.close
        outcomes = Array.new(25) { limiter.check("shared") }
        writer.write(JSON.generate(allowed: outcomes.count(&:allowed?), degraded: outcomes.count(&:degraded?)))
        writer.close
        exit!(0)
      end
      writer.close
      reader
    end
    results = readers.map { |r| JSON.parse(r.read).tap { r.close } }
    Process.waitall.each { |_, status| assert status.success? }
    assert_equal 0, results.sum { |r| r["degraded"] }, results.inspect
    assert_equal 30, results.sum { |r| r["allowed"] }, results.inspect
    refute limiter.check("parent").degraded?, "the parent's own connections still answer it"
    assert_equal 0, limiter.peek("shared").remaining
  end

  private

  def serve_and_count(config)
    port = free_port
    env = { "RK_STORE" => redis_url, "RK_PREFIX" => unique_prefix, "RK_RULES" => "50/minute" }
    env["RUBYLIB"] = File.join(ROOT, "ruby/lib") if ENV["RATEKEEPER_DEV"] == "1"
    log = File.join(Dir.tmpdir, "puma-#{port}.log")
    pid = spawn(env, "puma", "-C", config, "-b", "tcp://127.0.0.1:#{port}", File.join(SERVERS, "preforked.ru"),
                out: log, err: log)
    wait_for(port, pid)
    paths = (["/hot"] * 200) + Array.new(400) { |i| "/key-#{i}" }
    queue = Queue.new
    paths.each_with_index { |p, i| queue << [p, i] }
    answers = Array.new(paths.size)
    Array.new(8) do
      Thread.new do
        loop do
          path, i = queue.pop(true)
          answers[i] = JSON.parse(Net::HTTP.get("127.0.0.1", path, port))
        rescue ThreadError
          break
        end
      end
    end.each(&:join)
    degraded = answers.count { |a| a["degraded"] }
    assert_equal 0, degraded, "#{degraded} of #{answers.size} checks failed open: #{File.read(log)}"
    assert_equal 50, answers.first(200).count { |a| a["allowed"] }, "a 50/minute key admits exactly 50"
    assert(answers.drop(200).all? { |a| a["allowed"] }, "every other key has its own quota")
    assert_equal 2, answers.map { |a| a["pid"] }.uniq.size, "both workers should have answered"
  ensure
    stop_server(pid)
  end

  def wait_for(port, pid)
    200.times do
      flunk "puma exited" if Process.waitpid(pid, Process::WNOHANG)
      Net::HTTP.get_response("127.0.0.1", "/warm", port)
      return
    rescue Errno::ECONNREFUSED, EOFError, Errno::ECONNRESET
      sleep 0.1
    end
    flunk "puma did not start on port #{port}"
  end
end
