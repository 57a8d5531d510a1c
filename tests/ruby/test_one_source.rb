# frozen_string_literal: true

require_relative "test_helper"
require "digest"
require "rack"
require "rack/mock"

# What the core owns, seen from Ruby: the options and their defaults (the
# same Hash Python has), their checks, rules and fail2ban parameters, the
# outcome of a decision, and the one HTTP answer the Rack middleware renders.
class TestOneSource < Minitest::Test
  include TestSupport

  def test_defaults_are_the_cores
    assert_equal({ store: "memory://", prefix: "rk", on_error: "allow", timeout: 0.25, connect_timeout: 0.25,
                   pool_size: 16, max_keys: 1_000_000, denial_cache: 1.0, scope: "", tiers: {},
                   controls_refresh: 2.0, controls: true, redis_module: "auto", lease: 60.0 }, Ratekeeper::DEFAULTS)
    assert Ratekeeper::DEFAULTS.frozen?
  end

  def test_an_old_option_name_still_works_and_warns
    was = Warning[:deprecated]
    Warning[:deprecated] = true
    _, said = capture_io do
      limiter = Ratekeeper::Limiter.new("1/s", policies: false, policy_refresh: 5)
      assert limiter.check("k").allowed?
      assert_equal limiter.controls_ready?, limiter.policies_ready?
      config = Ratekeeper::Rack::Config.new(policy_refresh: 3)
      assert_equal 3, config.controls_refresh
      assert_equal({ controls_refresh: 3 }, config.limiter_options)
    end
    Warning[:deprecated] = was
    ["policies is now called controls", "policy_refresh is now called controls_refresh",
     "policies_ready? is now called controls_ready?"].each { |needle| assert_includes said, needle }
    error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new("1/s", policies: false, controls: true) }
    assert_includes error.message, "not both"
  end

  def test_check_option_names_the_problem
    { [:timeout, 0] => [Ratekeeper::ConfigurationError, "invalid timeout 0"],
      [:timeout, "fast"] => [TypeError, "timeout must be a number of seconds, not String"],
      [:pool_size, 2**200] => [Ratekeeper::ConfigurationError, "invalid pool_size"],
      [:on_error, :explode] => [Ratekeeper::ConfigurationError, "'explode'"],
      [:colour, "blue"] => [Ratekeeper::ConfigurationError, "unknown option 'colour'"],
      ["store", "redis://u:hunter2@h:1/0?ssl_certfile=/x"] => [Ratekeeper::ConfigurationError, "***"] }
      .each do |(name, value), (error, needle)|
      message = assert_raises(error) { Ratekeeper.check_option(name, value) }.message
      assert_includes message, needle
      refute_includes message, "hunter2"
    end
    Ratekeeper::DEFAULTS.each { |name, value| assert_nil Ratekeeper.check_option(name, value) }
    assert_nil Ratekeeper.check_option(:controls, nil), "nil is the default, as None in Python"
    assert Ratekeeper::Limiter.new("1/s", timeout: nil, store: nil).check("k").allowed?, "nil options take the defaults"
    assert_match(/controls must be true or false/,
                 assert_raises(TypeError) { Ratekeeper::Limiter.new("1/s", controls: "false") }.message)
    error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new("1/s", colour: "blue") }
    assert_includes error.message, "unknown option 'colour'"
  end

  def test_rules_fail2ban_and_outcomes
    assert_equal %w[1/1s 20/1m], Ratekeeper.parse_rules("20/minute; 1/s").map(&:to_s)
    assert_equal "5m", Ratekeeper::Rule.new("5/5min").window_name
    assert_equal "500ms", Ratekeeper::Rule.new(2, 0.5).window_name
    assert_equal Ratekeeper::Rule.new("1/s"), Ratekeeper::Rule.new(1, 1)
    assert_equal "20/1m", Ratekeeper::Limiter.new(Ratekeeper::Rule.new("20/m")).rules.first.to_s
    ban = Ratekeeper::Fail2Ban.new("logins", maxretry: 2, findtime: 60, bantime: 60)
    assert_equal ["logins", 2, 60.0, 60.0], [ban.name, ban.maxretry, ban.findtime, ban.bantime]
    assert_equal ["default", 5, 600.0, 3600.0], Ratekeeper::Fail2Ban.new.then { |b| [b.name, b.maxretry, b.findtime, b.bantime] }
    assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Fail2Ban.new("x", maxretry: 0) }

    limiter = Ratekeeper::Limiter.new("1/minute")
    assert_equal "admitted", limiter.check("a", now: 1000.0).outcome
    assert_equal "denied", limiter.check("a", now: 1001.0).outcome
    refute limiter.penalize("email=a@b.c", ban: ban, now: 1000.0)
    assert limiter.penalize("email=a@b.c", ban: ban, now: 1001.0)
    assert_equal "blocked", limiter.check("email=a@b.c", now: 1002.0).outcome
    assert_raises(TypeError) { limiter.penalize("k", ban: ban, maxretry: 3) }
    limiter.admin.safelist("c", now: 1000.0)
    assert_equal "safelisted", limiter.check("c", now: 1001.0).to_h[:outcome]
    degraded = Ratekeeper::Limiter.new("1/minute", store: "redis://127.0.0.1:1/0", on_error: :deny).check("a")
    assert_equal ["degraded", false], [degraded.outcome, degraded.allowed?]
  end

  def test_responses_render_one_answer
    limiter = Ratekeeper::Limiter.new("1/minute")
    admitted = limiter.check("k", now: 1000.0)
    denied = limiter.check("k", now: 1001.0)
    responses = Ratekeeper::Responses.new
    assert_equal [429, 403, "all", false], [responses.status, responses.blocked_status, responses.headers, responses.log_keys?]
    assert responses.answer(admitted).passes?
    answer = responses.answer(denied)
    assert_equal 429, answer.status
    assert_equal '{"error":"rate_limited","retry_after":59}', answer.body
    assert_equal "59", answer.headers["Retry-After"]
    draft = Ratekeeper::Responses.new(headers: :draft).answer(denied)
    refute draft.headers.key?("X-RateLimit-Limit")
    assert_equal '{"error":"blocked"}', responses.blocked.body
    assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Responses.new(headers: :loud) }
    assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Responses.new(status: 200) }
    text, fields = responses.denial_log(denied, "api", "k", method: "GET", path: "/x")
    digest = "sha256:#{Digest::SHA256.hexdigest("k")[0, 16]}"
    assert_equal "rate_limited scope=\"api\" key=\"#{digest}\" limit=1 window=60.0 retry_after=59.0 " \
                 "method=\"GET\" path=\"/x\"", text
    assert_equal digest, fields[:key]
  end

  def test_rack_renders_the_cores_answer_in_the_chosen_style
    app = Ratekeeper::Rack::Middleware.new(->(_env) { [200, {}, ["ok"]] }, headers: :legacy) do |rk|
      rk.throttle "one", rules: "1/minute"
    end
    env = -> { Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "192.0.2.50") }
    status, headers, = app.call(env.call)
    assert_equal 200, status
    assert_equal "1", headers["X-RateLimit-Limit"]
    refute headers.key?("RateLimit-Policy")
    status, headers, body = app.call(env.call)
    assert_equal [429, '{"error":"rate_limited","retry_after":60}'], [status, body.join]
    assert_equal %w[Content-Length Content-Type Retry-After X-RateLimit-Limit X-RateLimit-Remaining X-RateLimit-Reset
                    X-RateLimit-Used], headers.keys.sort
  end

  def test_a_tier_a_client_names_but_the_throttle_lacks_is_ignored
    app = Ratekeeper::Rack::Middleware.new(->(_env) { [200, {}, ["ok"]] }) do |rk|
      rk.throttle "api", rules: "2/minute", tiers: { "pro" => "5/minute" }, tier: ->(req) { req.get_header("HTTP_X_PLAN") }
    end
    statuses = %w[enterprise pro pro].map do |plan|
      app.call(Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "192.0.2.60", "HTTP_X_PLAN" => plan)).first
    end
    assert_equal [200, 200, 200], statuses, "an unknown tier is the default rules, not a 500"
  end

  def test_rack_rules_are_checked_where_declared
    config = Ratekeeper::Rack::Config.new
    assert_raises(Ratekeeper::ConfigurationError) { config.fail2ban("x", maxretry: 0, findtime: 1, bantime: 1) { true } }
    assert_raises(Ratekeeper::ConfigurationError) { config.throttle("y", rules: "5/fortnight") }
    assert_raises(Ratekeeper::ConfigurationError) { config.timeout = 0 }
    assert_raises(Ratekeeper::ConfigurationError) { config.headers = :loud }
    assert_raises(Ratekeeper::ConfigurationError) { config.trusted_proxies = ["10.0.0.0/99"] }
    config.pool_size = 4
    assert_equal({ pool_size: 4 }, config.limiter_options)
    assert_equal 0.25, config.timeout, "an option not set reads the core's default"
    # the DSL builds the policy the core's gate applies
    throttle = Ratekeeper::Rack::Throttle.new("api", rules: "1/s", methods: "POST", paths: "/api/")
    assert_equal({ "scope" => "api", "rules" => "1/s", "key" => "ip", "methods" => ["POST"], "paths" => ["/api/"] },
                 throttle.to_policy)
    gate = Ratekeeper::Gate.new("throttle" => [throttle.to_policy],
                                "blocklist" => [Ratekeeper::Rack::Blocklist.new("all") { |req| req.path == "/x" }.to_policy])
    decide = lambda do |method, path|
      env = Rack::MockRequest.env_for(path, method: method, "REMOTE_ADDR" => "192.0.2.61")
      gate.decide(method: method, path: path, host: "", peer: "192.0.2.61", headers: env,
                  context: Ratekeeper::Rack::Request.new(env, Ratekeeper::TrustedProxies.new([])))
    end
    assert_equal ["api"], decide.call("POST", "/api/x").checked.map(&:first)
    assert_empty decide.call("GET", "/api/x").checked, "POST only"
    assert_equal "all", decide.call("GET", "/x").blocklist
  end
end
