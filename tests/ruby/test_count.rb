# frozen_string_literal: true

require_relative "test_helper"

# A Rack throttle that counts only some responses (count:): a request is
# counted before the app runs and given back when its response is not one
# counted.
class TestCountedResponses < Minitest::Test
  include TestSupport

  def login_app(count)
    right = lambda do |env|
      status = Rack::Request.new(env).POST["password"] == "right" ? 200 : Integer(Rack::Request.new(env).POST["status"] || 401)
      [status, {}, ["answer"]]
    end
    Ratekeeper::Rack::Middleware.new(right, store: redis_url, prefix: unique_prefix) do |rk|
      rk.throttle("logins/email", rules: "5/5min", methods: "POST", paths: "/login", count: count) { |req| req.POST["email"] }
    end
  end

  def login(app, email, password, status = nil)
    params = { "email" => email, "password" => password }
    params["status"] = status.to_s if status
    status, _headers, body = app.call(Rack::MockRequest.env_for("/login", method: "POST", params: params))
    body.close if body.respond_to?(:close) # (as a server does once the body is sent: the gate is told then)
    status
  end

  def test_good_logins_pass_and_the_sixth_failure_is_refused
    app = login_app(:failures)
    assert_equal [200] * 100, Array.new(100) { login(app, "ann@example.com", "right") }
    assert_equal [401] * 5 + [429], Array.new(6) { login(app, "ann@example.com", "wrong") }
    assert_equal 429, login(app, "ann@example.com", "right"), "over its failures, refused at once"
    assert_equal 401, login(app, "bob@example.com", "wrong")
  end

  def test_a_list_of_statuses_counts_those_alone
    app = login_app([403])
    assert_equal [500, 401, 404] * 3, Array.new(9) { |i| login(app, "k", "wrong", [500, 401, 404][i % 3]) }
    assert_equal [403] * 5 + [429], Array.new(6) { login(app, "k", "wrong", 403) }
  end

  def test_a_bad_count_is_named
    error = assert_raises(Ratekeeper::ConfigurationError) { login_app("errors") }
    assert_includes error.message, 'count: give "failures"'
  end
end
