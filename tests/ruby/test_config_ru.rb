# frozen_string_literal: true

require_relative "test_helper"
require "net/http"

# examples/config.ru served by puma answers 429 with the headers after the configured requests.
class TestConfigRu < Minitest::Test
  include TestSupport

  def test_puma_serves_the_example_with_limits
    port = free_port
    env = { "RATEKEEPER_STORE" => redis_url, "RATEKEEPER_PREFIX" => unique_prefix }
    env["RUBYLIB"] = File.join(ROOT, "ruby/lib") if ENV["RATEKEEPER_DEV"] == "1"
    pid = spawn(env, "puma", "-q", "-t", "2:2", "-b", "tcp://127.0.0.1:#{port}", File.join(ROOT, "examples/config.ru"),
                out: File::NULL, err: File::NULL)
    http = wait_for(port)
    statuses = Array.new(5) do
      response = http.get("/")
      assert_equal "5", response["X-RateLimit-Limit"]
      response.code
    end
    assert_equal ["200"] * 5, statuses
    denied = http.get("/")
    assert_equal "429", denied.code
    assert_equal "1", denied["Retry-After"]
    assert_equal({ "error" => "rate_limited", "retry_after" => 1 }, JSON.parse(denied.body))
    assert_equal "200", http.get("/health").code
    assert_equal "403", http.get("/index.php").code
  ensure
    stop_server(pid)
  end

  private

  def wait_for(port)
    100.times do
      http = Net::HTTP.new("127.0.0.1", port)
      http.start
      return http
    rescue Errno::ECONNREFUSED
      sleep 0.1
    end
    flunk "puma did not start on port #{port}"
  end
end
