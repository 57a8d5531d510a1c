# frozen_string_literal: true

require_relative "test_helper"

# A Rack throttle with meters (meters:, cost:, usage:): a request reserves
# each meter's estimate before the app runs, all or nothing, and its
# response's usage header settles a meter to what it cost.
class TestMeteredThrottle < Minitest::Test
  include TestSupport

  def api(store, **given)
    answer = lambda do |env|
      used = Rack::Request.new(env).GET["used"]
      headers = { "content-type" => "text/plain" }
      headers["x-tokens-used"] = used if used
      [200, headers, ["answer"]]
    end
    meters = given.fetch(:meters, { requests: "5/minute", tokens: "100/minute" })
    Ratekeeper::Rack::Middleware.new(answer, store: store, prefix: unique_prefix) do |rk|
      rk.throttle(:llm, meters: meters, cost: given.fetch(:cost, { tokens: 40 }), usage: { tokens: "X-Tokens-Used" },
                        **given.slice(:count)) { |req| req.get_header("HTTP_X_API_KEY") }
    end
  end

  def call(app, key, used = nil)
    path = used ? "/v1/chat?used=#{used}" : "/v1/chat"
    status, headers, body = app.call(Rack::MockRequest.env_for(path, "HTTP_X_API_KEY" => key))
    body.close if body.respond_to?(:close) # (as a server does once the body is sent: the gate is told then)
    [status, headers]
  end

  def test_a_response_settles_the_tokens_it_used_on_every_store
    stores.each do |name, store|
      app = api(store)
      assert_equal [200] * 3, Array.new(3) { call(app, "ann", 10).first }, "#{name}: 3 x 10 tokens, not 3 x 40"
      assert_equal 200, call(app, "ann", 50).first, name # 30 + 40 fits; 80 held
      status, headers = call(app, "ann", 10)
      assert_equal 429, status, "#{name}: 80 + 40 > 100"
      assert_operator Integer(headers["Retry-After"] || headers["retry-after"]), :>, 0, name
      assert_equal 200, call(app, "bob", 10).first, "#{name}: another key"
    end
  end

  def test_a_response_without_usage_keeps_the_estimate
    app = api("memory://")
    assert_equal [200, 200, 429], Array.new(3) { call(app, "k").first }, "40 + 40 + 40 > 100"
  end

  def test_the_requests_meter_refuses_too_and_all_or_nothing
    app = api("memory://", meters: { requests: "2/minute", tokens: "100/minute" }, cost: { tokens: 1 })
    assert_equal [200, 200, 429], Array.new(3) { call(app, "k", 1).first }
  end

  def test_counting_failures_gives_a_success_back_whole
    app = api("memory://", count: :failures)
    assert_equal [200] * 10, Array.new(10) { call(app, "k", 90).first }, "successes cost nothing"
  end

  def test_the_console_reads_each_meters_usage_by_its_scope
    gate = Ratekeeper::Gate.new({ "store" => { "url" => "memory://" }, "throttle" => [
                                  { "scope" => "llm", "key" => "ip", "meters" => { "requests" => "5/minute", "tokens" => "100/minute" } },
                                  { "scope" => "plain", "key" => "ip", "rules" => "5/s" }
                                ] })
    assert_equal({ "llm@requests" => "5/1m", "llm@tokens" => "100/1m", "plain" => "5/1s" }, gate.throttle_rules)
  end

  def test_a_bad_meter_is_named
    error = assert_raises(Ratekeeper::ConfigurationError) { api("memory://", cost: { words: 1 }) }
    assert_includes error.message, "cost.words: no meter is named so (the meters: requests, tokens)"
    error = assert_raises(Ratekeeper::ConfigurationError) { api("memory://", meters: "5/minute") }
    assert_includes error.message, "meters must be a Hash of meter names"
    error = assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Rack::Middleware.new(->(_) { [200, {}, []] }, store: "memory://") do |rk|
        rk.throttle(:both, rules: "5/s", meters: { a: "5/s" })
      end
    end
    assert_includes error.message, "give rules or meters, not both"
  end
end
