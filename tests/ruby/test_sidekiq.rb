# frozen_string_literal: true

require_relative "test_helper"
require "fileutils"
require "tmpdir"

# A real Sidekiq process (Debian's ruby-sidekiq) with 10 threads running 200
# jobs limited to 20/second by Ratekeeper::Sidekiq::Middleware: every job
# completes, none fails or is retried, never more than 20 run in any second
# (by the Redis clock).
class TestSidekiq < Minitest::Test
  include TestSupport

  def setup
    skip "sidekiq is not installed" unless system("which sidekiq > /dev/null 2>&1")
    require "sidekiq"
    @port = free_port
    @dir = Dir.mktmpdir("rk-sidekiq")
    system("redis-server", "--port", @port.to_s, "--bind", "127.0.0.1", "--save", "", "--daemonize", "yes",
           "--pidfile", "#{@dir}/redis.pid", "--dir", @dir, exception: true)
    wait_for_redis(@port)
    @url = "redis://127.0.0.1:#{@port}/0"
  end

  def teardown
    stop_server(@sidekiq) if @sidekiq
    Process.kill(:TERM, File.read("#{@dir}/redis.pid").to_i) if @dir && File.exist?("#{@dir}/redis.pid")
    FileUtils.rm_rf(@dir) if @dir
  end

  def test_200_jobs_at_20_per_second
    require "sidekiq/api"
    env = { "REDIS_URL" => @url, "RK_PREFIX" => unique_prefix, "RK_RULES" => "20/second", "RK_RUNS" => "runs" }
    Sidekiq.configure_client { |config| config.redis = { url: @url } }
    jobs = File.expand_path("../../examples/jobs/partner_sidekiq.rb", __dir__)
    log = File.open("#{@dir}/sidekiq.log", "w")
    @sidekiq = Process.spawn(env, "sidekiq", "-r", jobs, "-c", "10", "-q", "default", out: log, err: log)
    Sidekiq::Client.push_bulk("class" => "PartnerJob", "args" => Array.new(200) { |n| [n] })
    redis = Redis.new(url: @url)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
    sleep 0.2 while redis.llen("runs") < 200 && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    runs = redis.lrange("runs", 0, -1).map { |r| r.split(":").map(&:to_i) }
    assert_equal 200, runs.size, "every job ran (#{File.read("#{@dir}/sidekiq.log")[-2000..]})"
    assert_equal (0...200).to_a, runs.map(&:last).sort, "each job once"
    times = runs.map(&:first).sort
    times.each_cons(21) { |w| assert_operator w.last - w.first, :>=, 1000, "21 jobs within a second: #{w}" }
    stats = Sidekiq::Stats.new
    assert_equal 0, stats.failed
    assert_equal 0, stats.retry_size
    spread = (times.last - times.first) / 1000.0
    puts "200 jobs at 20/second: the last ran #{spread} s after the first (ideal 9.0 s)"
  end

  # 40 jobs of 100 ms holding a slot of "2 concurrent", on 10 threads: each
  # runs once, none fails or is retried, never more than 2 at once.
  def test_jobs_hold_at_most_two_slots
    require "sidekiq/api"
    env = { "REDIS_URL" => @url, "RK_PREFIX" => unique_prefix, "RK_RULES" => "2 concurrent; 6000/minute",
            "RK_NOW" => "now", "RK_MOST" => "most", "RK_RUNS" => "runs" }
    Sidekiq.configure_client { |config| config.redis = { url: @url } }
    jobs = File.expand_path("servers/in_flight_sidekiq.rb", __dir__)
    log = File.open("#{@dir}/sidekiq.log", "w")
    @sidekiq = Process.spawn(env, "sidekiq", "-r", jobs, "-c", "10", "-q", "default", out: log, err: log)
    Sidekiq::Client.push_bulk("class" => "SlowCallJob", "args" => Array.new(40) { |n| [n] })
    redis = Redis.new(url: @url)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
    sleep 0.2 while redis.llen("runs") < 40 && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    runs = redis.lrange("runs", 0, -1).map(&:to_i)
    assert_equal (0...40).to_a, runs.sort, "each job once (#{File.read("#{@dir}/sidekiq.log")[-2000..]})"
    assert_equal 2, redis.get("most").to_i
    stats = Sidekiq::Stats.new
    assert_equal 0, stats.failed
    assert_equal 0, stats.retry_size
  end
end
