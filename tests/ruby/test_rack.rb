# frozen_string_literal: true

require_relative "test_helper"
require "rack/test"
require "rack/builder"
require "tmpdir"

# The Rack middleware with Rack::Test against the test Redis.
class TestRack < Minitest::Test
  include TestSupport
  include Rack::Test::Methods

  HELLO = ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello"]] }

  def setup
    @prefix = unique_prefix
    @events = []
  end

  def app
    prefix = @prefix
    url = redis_url
    Rack::Builder.new do
      use Ratekeeper::Rack::Middleware, store: url, prefix: prefix do |rk|
        rk.trusted_proxies = ["10.0.0.0/8"]
        rk.exempt "/health"
        rk.safelist("office") { |req| req.client_ip == "198.51.100.10" }
        rk.blocklist("php") { |req| req.path.end_with?(".php") }
        rk.throttle "req/ip", rules: "5/second; 20/minute"
        rk.throttle("login/email", rules: "3/5min", methods: "POST", paths: "/login") do |req|
          req.params["email"].to_s.downcase.strip.then { |e| e.empty? ? nil : e }
        end
      end
      run HELLO
    end
  end

  def test_headers_then_429_with_json_body
    5.times do |i|
      get "/", {}, "REMOTE_ADDR" => "203.0.113.5"
      assert_equal 200, last_response.status, "request #{i}"
      assert_equal "5", last_response.headers["X-RateLimit-Limit"]
      assert_equal (4 - i).to_s, last_response.headers["X-RateLimit-Remaining"]
      assert_equal '"1s";q=5;w=1, "1m";q=20;w=60', last_response.headers["RateLimit-Policy"]
    end
    get "/", {}, "REMOTE_ADDR" => "203.0.113.5"
    assert_equal 429, last_response.status
    assert_equal "application/json", last_response.headers["Content-Type"]
    assert_equal "1", last_response.headers["Retry-After"]
    assert_equal({ "error" => "rate_limited", "retry_after" => 1 }, JSON.parse(last_response.body))
    get "/", {}, "REMOTE_ADDR" => "203.0.113.6"
    assert_equal 200, last_response.status, "another client has its own quota"
  end

  # The rate-limit headers go onto a copy of the app's headers, and never over
  # one the app set itself, whatever its case in a case-insensitive header
  # hash (Rack 2's HeaderHash, Rack 3's Headers); an exempt request's headers
  # are the app's own object.
  def test_the_apps_own_headers_win_and_are_never_changed_in_place
    header_hash = defined?(::Rack::Headers) ? ::Rack::Headers : ::Rack::Utils::HeaderHash
    given = {
      plain: { "Content-Type" => "text/plain", "X-RateLimit-Limit" => "the app's" },
      cased: header_hash.new.merge!("content-type" => "text/plain", "x-ratelimit-limit" => "the app's")
    }
    given.each do |kind, headers|
      headers.freeze
      answer = ->(_env) { [200, headers, ["ok"]] }
      middleware = Ratekeeper::Rack::Middleware.new(answer, store: "memory://", prefix: @prefix) do |rk|
        rk.exempt "/health"
        rk.throttle "req/ip", rules: "5/second"
      end
      env = ::Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "203.0.113.7")
      _, out, = middleware.call(env)
      refute_same headers, out, kind
      assert_instance_of headers.class, out, kind
      assert_equal "the app's", out["X-RateLimit-Limit"], kind
      assert_equal 1, out.keys.count { |name| name.casecmp?("X-RateLimit-Limit") }, kind
      assert_equal "4", out["X-RateLimit-Remaining"], kind
      assert_equal '"1s";q=5;w=1', out["RateLimit-Policy"], kind
      _, exempt, = middleware.call(::Rack::MockRequest.env_for("/health", "REMOTE_ADDR" => "203.0.113.7"))
      assert_same headers, exempt, "#{kind}: nothing to add"
    end
  end

  # The header values that repeat (a count below 1,000, a rule set's limit
  # and policy) are frozen Strings made once and kept for the process; any
  # other (a reset time, a count of 1,000 or more) is a new String each time.
  def test_header_values_that_repeat_are_made_once
    answer = ->(_env) { [200, {}, ["ok"]] }
    middleware = Ratekeeper::Rack::Middleware.new(answer, store: "memory://", prefix: @prefix) do |rk|
      rk.throttle "req/ip", rules: "5000/minute"
    end
    first, second = Array.new(2) do
      middleware.call(::Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "203.0.113.8"))[1]
    end
    assert_equal %w[5000 4999 4998 1 2],
                 [first["X-RateLimit-Limit"], first["X-RateLimit-Remaining"], second["X-RateLimit-Remaining"],
                  first["X-RateLimit-Used"], second["X-RateLimit-Used"]]
    assert_same first["X-RateLimit-Limit"], second["X-RateLimit-Limit"]
    assert_same first["RateLimit-Policy"], second["RateLimit-Policy"]
    assert first["RateLimit-Policy"].frozen?
    assert first["X-RateLimit-Used"].frozen?, "a small count"
    refute first["X-RateLimit-Remaining"].frozen?, "4,999 is made for the response"
    refute first["X-RateLimit-Reset"].frozen?, "a time is made for the response"
  end

  def test_login_is_throttled_per_posted_email
    3.times { |i| post "/login", { "email" => "Victim@Example.com " }, "REMOTE_ADDR" => "192.0.2.#{i}" }
    assert_equal 200, last_response.status
    post "/login", { "email" => "victim@example.com" }, "REMOTE_ADDR" => "192.0.2.99"
    assert_equal 429, last_response.status, "a fourth try from yet another IP is still denied"
    assert_equal "3", last_response.headers["X-RateLimit-Limit"]
    post "/login", { "email" => "other@example.com" }, "REMOTE_ADDR" => "192.0.2.100"
    assert_equal 200, last_response.status
  end

  def test_exempt_safelist_and_blocklist
    12.times do
      get "/health", {}, "REMOTE_ADDR" => "203.0.113.7"
      assert_equal 200, last_response.status
      assert_nil last_response.headers["X-RateLimit-Limit"]
    end
    12.times do
      get "/", {}, "REMOTE_ADDR" => "198.51.100.10"
      assert_equal 200, last_response.status
    end
    get "/wp-login.php", {}, "REMOTE_ADDR" => "203.0.113.8"
    assert_equal 403, last_response.status
    assert_equal({ "error" => "blocked" }, JSON.parse(last_response.body))
  end

  def test_spoofed_forwarded_for_is_ignored_unless_from_a_trusted_proxy
    5.times { |i| get "/", {}, "REMOTE_ADDR" => "203.0.113.20", "HTTP_X_FORWARDED_FOR" => "1.1.1.#{i}" }
    get "/", {}, "REMOTE_ADDR" => "203.0.113.20", "HTTP_X_FORWARDED_FOR" => "9.9.9.9"
    assert_equal 429, last_response.status
    5.times { get "/", {}, "REMOTE_ADDR" => "10.0.0.1", "HTTP_X_FORWARDED_FOR" => "198.51.100.7" }
    assert_equal 200, last_response.status
    get "/", {}, "REMOTE_ADDR" => "10.0.0.1", "HTTP_X_FORWARDED_FOR" => "198.51.100.7"
    assert_equal 429, last_response.status
    get "/", {}, "REMOTE_ADDR" => "10.0.0.1", "HTTP_X_FORWARDED_FOR" => "garbage, 198.51.100.8"
    assert_equal 200, last_response.status
  end

  def test_replaceable_responder_and_status
    limiter_app = Ratekeeper::Rack::Middleware.new(HELLO, store: redis_url, prefix: unique_prefix, status: 503,
                                                          responder: nil) do |rk|
      rk.throttle "all", rules: "1/minute"
    end
    env = Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "192.0.2.1")
    assert_equal 200, limiter_app.call(env.dup)[0]
    assert_equal 503, limiter_app.call(env.dup)[0]
    teapot = Ratekeeper::Rack::Middleware.new(HELLO, store: "memory://") do |rk|
      rk.throttle "all", rules: "1/minute"
      rk.responder = ->(_env, decision) { [418, { "X-Wait" => decision.retry_after.to_s }, ["slow down"]] }
    end
    teapot.call(env.dup)
    status, headers, body = teapot.call(env.dup)
    assert_equal [418, ["slow down"]], [status, body]
    assert_operator headers["X-Wait"].to_f, :>, 0
  end

  def test_notifications_when_active_support_is_loaded
    require "active_support/notifications"
    events = []
    subscriber = ActiveSupport::Notifications.subscribe(/ratekeeper/) { |name, *, payload| events << [name, payload[:name]] }
    mw = Ratekeeper::Rack::Middleware.new(HELLO, store: "memory://") { |rk| rk.throttle "one", rules: "1/minute" }
    env = Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "192.0.2.2")
    2.times { mw.call(env.dup) }
    assert_equal [["throttle.ratekeeper", "one"]], events
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber) if subscriber
  end

  # The request object is made only where something uses it: a policy's
  # callables (called with it), a body field (read through it), and every
  # request that is not simply passed on (the notifications carry it).
  def test_the_request_object_is_made_where_it_is_used
    require "active_support/notifications"
    requests = []
    subscriber = ActiveSupport::Notifications.subscribe(/ratekeeper/) { |*, payload| requests << payload[:request] }
    lean = Ratekeeper::Rack::Middleware.new(HELLO, store: "memory://") { |rk| rk.throttle "one", rules: "1/minute" }
    refute lean.config.gate.reads_body?
    env = Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "192.0.2.5")
    assert_equal [200, 429], Array.new(2) { lean.call(env.dup).first }
    assert_equal [Ratekeeper::Rack::Request], requests.map(&:class)
    assert_equal "192.0.2.5", requests.first.client_ip
    given = []
    keyed = Ratekeeper::Rack::Middleware.new(HELLO, store: "memory://") do |rk|
      rk.throttle("by-ip", rules: "5/minute") { |req| given << req.class && req.ip }
    end
    assert_equal 200, keyed.call(env.dup).first
    assert_equal [Ratekeeper::Rack::Request], given
    login = { "throttle" => [{ "scope" => "login", "rules" => "5/minute", "key" => "identity:email" }] }
    assert Ratekeeper::Gate.new(login).reads_body?
    refute Ratekeeper::Gate.new({ "throttle" => [{ "scope" => "ip", "rules" => "5/minute", "key" => "ip" }] }).reads_body?
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber) if subscriber
  end

  def test_a_throttle_in_shadow_mode_is_logged_and_reported_but_refuses_nothing
    require "active_support/notifications"
    events = []
    subscriber = ActiveSupport::Notifications.subscribe(/ratekeeper/) { |name, *, payload| events << [name, payload[:name]] }
    logged = StringIO.new
    Ratekeeper.logger = Logger.new(logged)
    mw = Ratekeeper::Rack::Middleware.new(HELLO, store: redis_url, prefix: unique_prefix) do |rk|
      rk.throttle "trial", rules: "1/minute", shadow: true
      rk.throttle "enforced", rules: "3/minute"
    end
    answers = Array.new(4) { mw.call(Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "192.0.2.3")) }
    assert_equal [200, 200, 200, 429], answers.map(&:first)
    assert_equal %w[3 3 3], answers.first(3).map { |_, headers, _| headers["X-RateLimit-Limit"] }, "never the trial's"
    assert_equal [["shadow.ratekeeper", "trial"], ["shadow.ratekeeper", "trial"], ["throttle.ratekeeper", "enforced"]], events
    lines = logged.string.lines.grep(/rate_limited/)
    assert_equal [true, true, false], lines.map { |line| line.include?('scope="trial"') && line.strip.end_with?("shadow=true") }
    gate = Ratekeeper::Gate.new({ "throttle" => [{ "scope" => "trial", "rules" => "1/minute", "key" => "ip", "shadow" => true }] })
    verdicts = Array.new(2) { gate.decide(method: "GET", path: "/", host: "example.com", peer: "192.0.2.4", headers: {}) }
    assert_equal [%w[pass admitted], %w[pass shadowed]], verdicts.map { |v| [v.ending, v.reason] }
    assert_equal [nil, "trial"], verdicts.map(&:shadow)
    assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Rack::Middleware.new(HELLO) { |rk| rk.throttle "x", rules: "1/s", shadow: "yes" }
    end
  ensure
    Ratekeeper.logger = nil
    ActiveSupport::Notifications.unsubscribe(subscriber) if subscriber
  end

  def test_bad_configuration_is_refused
    assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Rack::Middleware.new(HELLO) { |rk| rk.throttle "x", rules: "5/fortnight" }
    end
    assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Rack::Middleware.new(HELLO, colour: "blue") }
    assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Rack::Middleware.new(HELLO) { |rk| rk.trusted_proxies = ["10.0.0.0/99"] }
    end
  end
end

# Metrics through a Rack request cycle: the middleware's stats and the log line per denial.
class TestRackMetrics < Minitest::Test
  include TestSupport

  def test_stats_and_denial_log
    logged = StringIO.new
    Ratekeeper.logger = Logger.new(logged)
    app = Ratekeeper::Rack::Middleware.new(->(_env) { [200, {}, ["ok"]] }, store: redis_url, prefix: unique_prefix) do |rk|
      rk.blocklist("php") { |req| req.path.end_with?(".php") }
      rk.throttle "req/ip", rules: "3/minute; 10/hour"
    end
    statuses = Array.new(5) { app.call(Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "198.51.100.9"))[0] }
    app.call(Rack::MockRequest.env_for("/x.php", "REMOTE_ADDR" => "198.51.100.9"))
    assert_equal [200, 200, 200, 429, 429], statuses
    stats = app.stats
    assert_equal 1, stats[:blocked]
    throttle = stats[:throttles]["req/ip"]
    assert_equal [3, 2, 0], [throttle[:allowed], throttle[:denied], throttle[:errors]]
    assert_equal({ 60.0 => 3, 3600.0 => 3 }, throttle[:peak_used])
    lines = logged.string.lines.grep(/rate_limited/)
    assert_equal 2, lines.size
    assert_includes lines.first, 'scope="req/ip"'
    assert_includes lines.first, 'key="sha256:'
    refute_includes lines.first, "198.51.100.9"
  ensure
    Ratekeeper.logger = nil
  end
end

# Every throttle of a request is checked in one Redis round trip.
class TestRackRoundTrips < Minitest::Test
  include TestSupport

  def test_three_throttles_one_round_trip
    app = Ratekeeper::Rack::Middleware.new(->(_env) { [200, {}, ["ok"]] }, store: redis_url, prefix: unique_prefix) do |rk|
      rk.throttle "req/ip", rules: "100/minute"
      rk.throttle("req/path", rules: "100/minute") { |req| req.path }
      rk.throttle("req/agent", rules: "2/minute") { |req| req.user_agent.to_s }
    end
    # the first request also reads the shared policies (switches, address
    # lists), as every process does once per controls_refresh (2 s)
    app.call(Rack::MockRequest.env_for("/warm-up", "REMOTE_ADDR" => "192.0.2.78"))
    before = app.stats[:store][:attempts]
    statuses = Array.new(4) { app.call(Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "192.0.2.77", "HTTP_USER_AGENT" => "bot"))[0] }
    assert_equal [200, 200, 429, 429], statuses
    stats = app.stats
    assert_equal 4, stats[:store][:attempts] - before, "one store call per request, not one per throttle"
    assert_equal [5, 5], [stats[:throttles]["req/ip"][:allowed], stats[:throttles]["req/path"][:allowed]]
  end
end

# README's login throttle: req.identity("email") is one quota per person
# however the address is typed, in a form or a JSON body; a request without
# it is not limited by the throttle (it used to share the key "" with every
# JSON login, so three bad posts locked every JSON login out).
class TestRackIdentity < Minitest::Test
  include TestSupport

  def test_the_login_example_keys_by_identity
    app = Ratekeeper::Rack::Middleware.new(->(_env) { [401, {}, ["wrong password"]] },
                                           store: redis_url, prefix: unique_prefix) do |rk|
      rk.throttle("login/email", rules: "3/5min", methods: "POST", paths: "/login") { |req| req.identity("email") }
    end
    form = ->(email) { app.call(Rack::MockRequest.env_for("/login", method: "POST", params: { "email" => email }))[0] }
    json = lambda do |body|
      env = Rack::MockRequest.env_for("/login", method: "POST", input: JSON.generate(body), "CONTENT_TYPE" => "application/json")
      app.call(env)[0]
    end
    assert_equal [401, 401, 401], ["alice@example.com", " Alice@Example.COM", "ALICE@EXAMPLE.COM\n"].map(&form)
    assert_equal 429, form.call("alice@example.com")
    assert_equal 429, json.call({ "email" => "Alice@example.com" })
    assert_equal 401, json.call({ "email" => "bob@example.com" })
    assert_equal [401] * 5, Array.new(5) { json.call({ "user" => "x" }) }, "JSON logins without an email share no key"
    assert_equal [401] * 5, Array.new(5) { form.call("   ") }
    assert_nil Ratekeeper.identity("  ")
    assert_equal "élise", Ratekeeper.identity(" ÉLISE ")
  end

  # A policy's identity:FIELD at the Rack door: every JSON type Rails parses,
  # a repeated form field counted against each value, look-alikes as one
  # person, and a body the door does not parse (another type, multipart,
  # over the core's 64 KiB cap) counted against the client (never skipped).
  def test_a_policys_identity_field_is_the_apps_and_never_skipped
    Dir.mktmpdir do |dir|
      policy = File.join(dir, "policy.toml")
      File.write(policy, <<~TOML)
        [store]
        url = "#{redis_url}"
        prefix = "#{unique_prefix}"
        [[throttle]]
        scope = "login"
        rules = "2/minute"
        key = "identity:email"
        paths = ["/login"]
      TOML
      mock = Rack::MockRequest.new(Ratekeeper::Rack::Middleware.new(HELLO_APP, policy: policy))
      post = lambda do |body, type, peer = "198.51.100.1"|
        mock.post("/login", input: body, "CONTENT_TYPE" => type, "REMOTE_ADDR" => peer).status
      end
      sent = [[JSON.generate("email" => "alice@example.com"), "text/x-json"],
              ["email=junk1%40example.com&email=alice%40example.com", "application/x-www-form-urlencoded"],
              [JSON.generate("email" => "\uFF41lice@example.com"), "application/jsonrequest"],
              ["email=alice%40example.com&email=junk2%40example.com", "application/x-www-form-urlencoded"],
              [JSON.generate("email" => "ALIC\uFF25@example.com"), "application/merge-patch+json"]]
      assert_equal [200, 200, 429, 429, 429], sent.map { |body, type| post.call(body, type) }
      # a body this door does not parse: the client's quota, not a skip
      assert_equal [200, 200, 429], Array.new(3) { post.call("email=zed@example.com", "text/plain", "198.51.100.9") }
      assert_equal 200, post.call("", "text/plain", "198.51.100.9"), "no body: the throttle does not apply"
      # the core's one cap, and multipart, as at every door: the client's quota
      big = "email=alice%40example.com&pad=#{"x" * (64 * 1024)}"
      multipart = "--b\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\nbob@example.com\r\n--b--\r\n"
      assert_equal [200, 200, 429], [[big, "application/x-www-form-urlencoded"],
                                     [multipart, "multipart/form-data; boundary=b"],
                                     [big, "application/x-www-form-urlencoded"]].map { |body, type| post.call(body, type, "198.51.100.10") }
      assert_equal 200, post.call(multipart, "multipart/form-data; boundary=b", "198.51.100.11"),
                   "a multipart body is not read as bob's, whose quota is whole"
      assert_equal 200, post.call("email=bob%40example.com", "application/x-www-form-urlencoded", "198.51.100.12")
    end
  end

  HELLO_APP = ->(_env) { [200, {}, ["ok"]] }

  # An X-Api-Key that is not UTF-8, holds NUL or CR/LF, or runs to 4 KB is
  # limited exactly on every Redis path (the module's and the script's, a
  # single Redis and the Cluster), each key the first check of a fresh store.
  def test_hostile_header_keys_are_limited_exactly
    stores = { "redis" => redis_url }
    { "cluster" => "RATEKEEPER_TEST_CLUSTER", "redis-module" => "RATEKEEPER_TEST_REDIS_MODULE",
      "cluster-module" => "RATEKEEPER_TEST_CLUSTER_MODULE" }.each { |name, var| stores[name] = configured(var) }
    keys = ["\xff".b, "\xff\xfe\x80 caf\xe9".b, "a\0b", "a\r\nb", ("\xff" * 4096).b]
    stores.each do |name, url|
      keys.each do |key|
        # (a fresh prefix: `rand` repeats itself under minitest's --seed)
        prefix = "hostile-#{unique_prefix}"
        limited = Rack::Builder.new do
          use Ratekeeper::Rack::Middleware, store: url, prefix: prefix, on_error: :raise do |rk|
            rk.throttle("api", rules: "3/minute") { |req| req.get_header("HTTP_X_API_KEY") }
          end
          run TestRack::HELLO
        end
        mock = Rack::MockRequest.new(limited)
        got = Array.new(5) { mock.get("/", "REMOTE_ADDR" => "203.0.113.1", "HTTP_X_API_KEY" => key.dup).status }
        assert_equal [200, 200, 200, 429, 429], got, "#{name}: #{key[0, 8].inspect}"
      end
    end
  end

  # A server hands Rack the request's bytes as they came (binary): a Host,
  # path or query that is not UTF-8 is limited like any other request, never
  # an exception (a 500) before the check.
  def test_a_head_that_is_not_utf8_is_limited_exactly
    limited = Rack::Builder.new do
      use Ratekeeper::Rack::Middleware, store: "memory://" do |rk|
        rk.throttle("all", rules: "3/minute") { |req| req.ip }
        rk.throttle("odd", rules: "1/minute", paths: "/caf\u00e9") { |req| req.ip }
      end
      run TestRack::HELLO
    end
    mock = Rack::MockRequest.new(limited.to_app) # (one app: a memory store is its own)
    hostile = { "PATH_INFO" => "/p\xff\xfe".b, "QUERY_STRING" => "q=\xff\r\n".b, "HTTP_HOST" => "h\xffst\0".b }
    hostile.each_with_index do |(name, value), i|
      got = Array.new(5) { mock.get("/", "REMOTE_ADDR" => "203.0.113.#{i + 10}", name => value.dup).status }
      assert_equal [200, 200, 200, 429, 429], got, name
    end
    # a path's escapes decoded as at every other door (Latin-1's \xe9 is no UTF-8: U+FFFD, another path)
    odd = Array.new(2) { mock.get("/", "REMOTE_ADDR" => "203.0.113.20", "PATH_INFO" => "/caf%C3%A9/x").status }
    assert_equal [200, 429], odd
    assert_equal 200, mock.get("/", "REMOTE_ADDR" => "203.0.113.21", "PATH_INFO" => "/caf%E9").status
  end

  # A path-scoped throttle holds however the path is spelled: its escapes
  # decoded (PATH_INFO comes as the request spelled it) and its slashes
  # single (Rails routes //login to /login), as at every door.
  def test_a_path_scoped_throttle_holds_for_every_spelling_of_the_path
    limited = Rack::Builder.new do
      use Ratekeeper::Rack::Middleware, store: "memory://" do |rk|
        rk.throttle("login", rules: "3/minute", paths: "/login") { |req| req.ip }
      end
      run TestRack::HELLO
    end
    mock = Rack::MockRequest.new(limited.to_app)
    got = ["/login", "//login", "/l%6Fgin", "/%2Flogin", "/login"].map do |path|
      mock.get("/", "REMOTE_ADDR" => "203.0.113.30", "PATH_INFO" => path).status
    end
    assert_equal [200, 200, 200, 429, 429], got
    assert_equal 200, mock.get("/", "REMOTE_ADDR" => "203.0.113.30", "PATH_INFO" => "/logout").status
  end

  # An IPv6 client is its /64: 100 requests from 100 addresses of one /64
  # share one quota; another /64 has its own; an IPv4-mapped address is its
  # IPv4 address; ipv6_prefix changes how much counts.
  # tests/cases/penalize.toml: an allow2ban entry only the app's penalize strikes
  def test_the_app_penalizes_the_client_of_a_policy_files_entry
    Dir.mktmpdir do |dir|
      policy = File.join(dir, "policy.toml")
      File.write(policy, File.read(File.join(ROOT, "tests/cases/penalize.toml")) +
                         %(\n[store]\nurl = "#{redis_url}"\nprefix = "#{unique_prefix}"\n))
      login = lambda do |env|
        # a failed login, as a controller reports it
        Ratekeeper::Rack.penalize(env, "logins") if env["PATH_INFO"] == "/login"
        [env["PATH_INFO"] == "/login" ? 401 : 200, {}, ["ok"]]
      end
      mock = Rack::MockRequest.new(Ratekeeper::Rack::Middleware.new(login, policy: policy))
      behind = { "REMOTE_ADDR" => "10.0.0.1", "HTTP_X_FORWARDED_FOR" => "198.51.100.23" }
      assert_equal [401, 401, 403], Array.new(3) { mock.post("/login", behind).status }
      assert_equal 403, mock.get("/", behind).status, "the client the proxy named is banned"
      assert_equal 200, mock.get("/", "REMOTE_ADDR" => "10.0.0.1").status, "not the proxy"
      gate = Ratekeeper::Gate.new(policy)
      error = assert_raises(Ratekeeper::ConfigurationError) { gate.penalize("nope", peer: "10.0.0.1", headers: {}) }
      assert_match(/no fail2ban or allow2ban entry is named 'nope'/, error.message)
      error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Rack.penalize({}, "logins") }
      assert_match(/no Ratekeeper::Rack::Middleware/, error.message)
    end
  end

  def test_an_ipv6_client_is_its_64
    prefix = @prefix
    url = redis_url
    build = lambda do |**options|
      Rack::Builder.new do
        use Ratekeeper::Rack::Middleware, store: url, prefix: "#{prefix}-#{options.hash}", **options do |rk|
          rk.throttle "req/ip", rules: "50/minute"
        end
        run TestRack::HELLO
      end
    end
    mock = Rack::MockRequest.new(build.call)
    got = (1..100).map { |i| mock.get("/", "REMOTE_ADDR" => "2001:db8:1:2::#{i.to_s(16)}").status }
    assert_equal [200] * 50 + [429] * 50, got
    assert_equal 200, mock.get("/", "REMOTE_ADDR" => "2001:db8:1:3::1").status, "another /64"
    50.times { mock.get("/", "REMOTE_ADDR" => "203.0.113.77") }
    assert_equal 429, mock.get("/", "REMOTE_ADDR" => "::ffff:203.0.113.77").status, "the mapped address is the IPv4 one"
    exact = Rack::MockRequest.new(build.call(ipv6_prefix: 128))
    assert_equal [200] * 100, (1..100).map { |i| exact.get("/", "REMOTE_ADDR" => "2001:db8:9::#{i.to_s(16)}").status }
    error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Rack::Middleware.new(TestRack::HELLO, ipv6_prefix: 40) }
    assert_match(/ipv6_prefix 40: give 48 to 128/, error.message)
  end
end
