# frozen_string_literal: true

# Loads the installed ratekeeper gem (scripts/test builds and installs it), or
# ruby/lib when RATEKEEPER_DEV=1 (with ratekeeper.so copied there by hand).
$LOAD_PATH.unshift(File.expand_path("../../ruby/lib", __dir__)) if ENV["RATEKEEPER_DEV"] == "1"
require "minitest/autorun"
require "json"
require "socket"
require "io/wait"
require "ratekeeper"
require "logger"
require "stringio"

module TestSupport
  ROOT = File.expand_path("../..", __dir__)
  REDIS_URL = ENV.fetch("RATEKEEPER_TEST_REDIS", "redis://127.0.0.1:6379/0")

  @counter = 0
  class << self
    attr_accessor :counter
  end

  def unique_prefix
    TestSupport.counter += 1
    "minitest-#{Process.pid}-#{Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)}-#{TestSupport.counter}"
  end

  # The test Redis, once it answered a peek.
  def redis_url
    @redis_url ||= begin
      Ratekeeper::Limiter.new("1/s", store: REDIS_URL, on_error: :raise, timeout: 2, connect_timeout: 2).peek("ping")
      REDIS_URL
    rescue Ratekeeper::StorageError => e
      flunk "no Redis at #{REDIS_URL} (#{e.message}): run `bash scripts/test`, which starts one"
    end
  end

  def stores
    { "memory" => "memory://", "redis" => redis_url }
  end

  # The URL scripts/test puts in +var+; skips the test when it is not set
  # (and fails it under CI, where it always is).
  def configured(var)
    url = ENV.fetch(var, nil)
    return url if url

    flunk "#{var} is not set (scripts/test sets it)" if ENV["CI"]
    skip "#{var} is not set (scripts/test sets it)"
  end

  # Stops a server this test spawned, by its pid, and reaps it.
  def stop_server(pid)
    return unless pid

    Process.kill(:TERM, pid)
    Process.wait(pid)
  end

  # Waits (20 s at most) until the Redis a test started on +port+ answers
  # PING with PONG: up, and done loading its data (until then: LOADING).
  def wait_for_redis(port)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      begin
        Socket.tcp("127.0.0.1", port, connect_timeout: 1) do |sock|
          sock.write("PING\r\n")
          return if sock.wait_readable(1) && sock.readpartial(64).start_with?("+PONG", "-NOAUTH")
        end
      rescue SystemCallError, IOError
        nil
      end
      sleep 0.05
    end
    flunk "the Redis on port #{port} did not answer PING within 20 s"
  end

  def free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end
end
