# frozen_string_literal: true

# Policies end to end through the Rack middleware against the test Redis:
# address, range and key blocks and their expiry, safelists, an override
# set by a Python process, fail2ban and allow2ban, shadow mode, tiers, and
# the Ratekeeper::Admin API.

require "test_helper"
require "json"
require "open3"
require "rack/mock"

class TestRackPolicies < Minitest::Test
  include TestSupport

  def setup
    @prefix = unique_prefix
    @admin = Ratekeeper::Admin.new(store: redis_url, prefix: @prefix)
    @app = Ratekeeper::Rack::Middleware.new(->(_env) { [200, {}, ["ok"]] },
                                            store: redis_url, prefix: @prefix, controls_refresh: 0.1) do |rk|
      rk.throttle "req/ip", rules: "3/minute", tiers: { "pro" => "10/minute" },
                            tier: ->(req) { req.get_header("HTTP_X_PLAN") }
      rk.throttle("req/user", rules: "100/minute") { |req| req.get_header("HTTP_X_USER") }
      rk.fail2ban("scanners", maxretry: 2, findtime: 60, bantime: 1) { |req| req.path.end_with?(".php") }
      rk.allow2ban("logins", maxretry: 3, findtime: 60, bantime: 60) { |req| req.post? && req.path == "/login" }
    end
  end

  def get(ip, path = "/", **headers)
    env = Rack::MockRequest.env_for(path, "REMOTE_ADDR" => ip, **headers.transform_keys { |k| "HTTP_#{k.to_s.upcase}" })
    @app.call(env)[0]
  end

  def settle
    sleep 0.25 # past controls_refresh: address lists are held in-process that long
  end

  def test_an_address_block_gives_403_and_lapses_after_its_ttl
    assert_equal 200, get("203.0.113.40")
    @admin.block("203.0.113.40", ttl: 1, reason: "scanner")
    settle
    assert_equal 403, get("203.0.113.40")
    assert_equal 200, get("203.0.113.41")
    sleep 1.0
    assert_equal 200, get("203.0.113.40"), "the block lapsed"
    assert_equal 1, @app.stats[:blocked]
  end

  def test_a_cidr_block_a_safelist_and_a_key_block
    @admin.block("198.51.100.0/24", reason: "hosting range")
    @admin.safelist("198.51.100.7")
    settle
    assert_equal 403, get("198.51.100.200")
    assert_equal [200] * 6, Array.new(6) { get("198.51.100.7") }, "safelisted: never limited"
    # an exact key is read in the check's own round trip: no wait
    @admin.block("mallory")
    assert_equal 403, get("192.0.2.9", x_user: "mallory")
    assert_equal 200, get("192.0.2.9", x_user: "alice")
    assert @admin.unblock("mallory")
    assert_equal 200, get("192.0.2.10", x_user: "mallory")
    refute @admin.unblock("mallory")
  end

  def test_an_override_set_by_a_python_process_is_obeyed_on_the_next_request
    assert_equal [200, 200, 200, 429], Array.new(4) { get("203.0.113.60") }
    python = <<~PY
      import sys, ratekeeper
      ratekeeper.Admin(sys.argv[1], prefix=sys.argv[2]).set_override("203.0.113.60", "50/minute")
    PY
    _out, err, status = Open3.capture3("python3", "-c", python, redis_url, @prefix)
    assert status.success?, err
    sleep 1.1 # this process remembers its last denial for at most the denial cache's cap (1 s)
    assert_equal 200, get("203.0.113.60")
    @admin.set_override("203.0.113.60", nil)
    assert_equal 429, get("203.0.113.60"), "removing it restores 3/minute"
  end

  def test_fail2ban_bans_the_address_and_the_ban_lapses
    assert_equal 403, get("203.0.113.70", "/x.php"), "the bad request itself is refused"
    assert_equal 200, get("203.0.113.70")
    assert_equal 403, get("203.0.113.70", "/y.php")
    assert_equal 403, get("203.0.113.70"), "banned after maxretry strikes"
    assert(@admin.entries.any? { |e| e[:target] == "203.0.113.70/32" && e[:detail] == "fail2ban scanners" })
    sleep 1.1
    settle
    assert_equal 200, get("203.0.113.70"), "the ban lapsed after bantime"
  end

  def test_allow2ban_lets_requests_through_until_the_ban
    env = -> { Rack::MockRequest.env_for("/login", method: "POST", "REMOTE_ADDR" => "203.0.113.80") }
    assert_equal [200, 200, 403], Array.new(3) { @app.call(env.call)[0] }, "let through until the strike that bans"
    assert_equal 403, get("203.0.113.80"), "and banned for what follows"
  end

  def test_a_typed_key_that_reads_as_a_range_bans_only_that_key
    limiter = Ratekeeper::Limiter.new("100/minute", store: redis_url, prefix: @prefix)
    ["0.0.0.0/0", "::/0", "203.0.113.9"].each do |typed|
      assert_equal [false, true], Array.new(2) { limiter.penalize(typed, maxretry: 2, findtime: 60, bantime: 60) }
      assert limiter.check(typed).blocked?
    end
    settle
    assert_nil limiter.screen("203.0.113.9"), "a typed text banned an address"
    assert_nil limiter.screen("198.51.100.1"), "a typed range banned every client"
    assert_equal 200, get("198.51.100.1")
    refute(@admin.entries.any? { |e| e[:network] }, "no address or range is listed")
    assert_raises(TypeError) { limiter.penalize("k", ip: "203.0.113.9") }
    assert_raises(Ratekeeper::ConfigurationError) { limiter.penalize(ip: "0.0.0.0/0") }
  end

  def test_fail2ban_and_allow2ban_fail_open_while_redis_is_down
    app = Ratekeeper::Rack::Middleware.new(->(_env) { [200, {}, ["ok"]] },
                                           store: "redis://127.0.0.1:1/0", on_error: :allow) do |rk|
      rk.throttle "req/ip", rules: "3/minute"
      rk.fail2ban("scanners", maxretry: 2, findtime: 60, bantime: 1) { |req| req.path.end_with?(".php") }
      rk.allow2ban("logins", maxretry: 3, findtime: 60, bantime: 60) { |req| req.post? && req.path == "/login" }
    end
    probe = app.call(Rack::MockRequest.env_for("/x.php", "REMOTE_ADDR" => "203.0.113.71"))
    assert_equal 403, probe[0], "a fail2ban probe is refused as ever, not a 500"
    login = app.call(Rack::MockRequest.env_for("/login", method: "POST", "REMOTE_ADDR" => "203.0.113.71"))
    assert_equal 200, login[0], "login stays up"
    refute login[1].key?("X-RateLimit-Remaining"), "a degraded answer claims no quota"
    assert login[1].key?("RateLimit-Policy")
    refute Ratekeeper::Limiter.new("1/s", store: "redis://127.0.0.1:1/0", on_error: :allow).penalize("k")
    assert Ratekeeper::Limiter.new("1/s", store: "redis://127.0.0.1:1/0", on_error: :deny).penalize("k")
    assert_raises(Ratekeeper::StorageError) do
      Ratekeeper::Limiter.new("1/s", store: "redis://127.0.0.1:1/0", on_error: :raise).penalize("k")
    end
  end

  def test_admin_targets_say_what_they_are
    ["300.1.2.3", "1.2.3.4 ", "1.2.3", "/24", "fe80::1%eth0"].each do |typo|
      error = assert_raises(Ratekeeper::ConfigurationError) { @admin.block(typo) }
      assert_includes error.message, "key: true"
      refute @admin.block(typo, key: true)[:network]
      assert @admin.unblock(typo, key: true)
    end
    error = assert_raises(Ratekeeper::ConfigurationError) { @admin.block("0.0.0.0/0") }
    assert_includes error.message, "force: true"
    assert @admin.safelist("10.0.0.0/7", ttl: 1, force: true)[:network]
    assert @admin.unsafelist("10.0.0.0/7")
  end

  def test_shadow_mode_reports_but_never_denies
    @admin.set_switches(shadow: true)
    settle
    assert_equal [200] * 6, Array.new(6) { get("203.0.113.90") }
    @admin.set_switches(shadow: false)
    settle
    assert_equal 429, get("203.0.113.90")
    assert_equal({ enabled: true, shadow: false, multiplier: 1.0 }, @admin.switches)
  end

  def test_tiers_from_the_request_and_from_the_store
    assert_equal [200] * 5, Array.new(5) { get("203.0.113.100", x_plan: "pro") }, "the pro tier: 10/minute"
    assert_equal [200, 200, 200, 429], Array.new(4) { get("203.0.113.101") }
    @admin.set_tier("203.0.113.101", "pro")
    sleep 1.1 # past the denial cache's cap
    assert_equal 200, get("203.0.113.101"), "the stored tier wins"
    assert_equal "pro", @admin.inspect_key("203.0.113.101")[:tier]
  end

  def test_every_admin_change_is_in_the_audit_trail_with_who_and_why
    ops = Ratekeeper::Admin.new(store: redis_url, prefix: @prefix, actor: "ops-ann")
    ops.block("203.0.113.60", ttl: 600, reason: "scraper")
    ops.unblock("203.0.113.60", reason: "false alarm")
    ops.set_tier("user:3", "pro", reason: "paid")
    ops.set_override("user:3", "5/minute")
    ops.set_switches(shadow: true, reason: "trial")
    # a Python process (the command line's Admin, another operator) writes to the same trail
    script = 'import sys, ratekeeper; ratekeeper.Admin(sys.argv[1], prefix=sys.argv[2], actor="py-bob")' \
             '.unsafelist("user:4", key=True, reason="<b>\\r\\n")'
    _out, err, status = Open3.capture3("python3", "-c", script, redis_url, @prefix)
    assert status.success?, err
    seen = @admin.history(limit: 10).map { |c| c.values_at(:actor, :action, :target, :detail, :reason) }
    assert_equal [["py-bob", "unsafelist", "user:4", "was not listed", "<b>\r\n"],
                  ["ops-ann", "switches", "", "shadow=1", "trial"],
                  ["ops-ann", "override", "user:3", "5/1m", ""],
                  ["ops-ann", "tier", "user:3", "pro", "paid"],
                  ["ops-ann", "unblock", "203.0.113.60/32", "lifted", "false alarm"],
                  ["ops-ann", "block", "203.0.113.60/32", "for 10m", "scraper"]], seen
    assert_in_delta Time.now.to_f, @admin.history(limit: 1).first[:at], 30
    assert_nil @admin.history(limit: 1).first[:scope]
    assert_raises(Ratekeeper::ConfigurationError) { @admin.history(limit: 0) }
    # a limiter's admin, named
    Ratekeeper::Limiter.new("1/s", store: redis_url, prefix: @prefix).admin(actor: "app").set_tier("user:5", nil)
    assert_equal %w[app tier cleared], @admin.history(limit: 1).first.values_at(:actor, :action, :detail)
  ensure
    @admin.set_switches(shadow: false)
  end

  def test_who_is_limited_now_through_the_rack_middleware
    app = Ratekeeper::Rack::Middleware.new(->(_env) { [200, {}, ["ok"]] },
                                           store: redis_url, prefix: @prefix, controls_refresh: 0.1) do |rk|
      rk.throttle "req/ip", rules: "2/minute"
    end
    (1..3).each { |host| 4.times { app.call(Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "192.0.2.#{host}")) } }
    deadline = Time.now + 5
    # (a reader may have written part of the burst: wait for all of it)
    sleep 0.05 while Time.now < deadline && @admin.top_denied(window: 60)[:networks].sum { |n| n[:count] } < 6
    top = @admin.top_denied(window: 60)
    assert_equal [{ scope: "req/ip", network: "192.0.2.0/24", count: 6 }], top[:networks]
    assert_equal 3, top[:addresses].size
    assert_equal 6, top[:per_minute].sum { |m| m[:count] }
    assert_raises(Ratekeeper::ConfigurationError) { @admin.top_denied(window: 0) }
  end

  def test_admin_errors_name_the_problem
    error = assert_raises(Ratekeeper::ConfigurationError) { @admin.block("10.0.0.0/99") }
    assert_includes error.message, "10.0.0.0/99"
    assert_raises(Ratekeeper::ConfigurationError) { @admin.block("k", ttl: -1) }
    assert_raises(Ratekeeper::ConfigurationError) { @admin.set_switches(multiplier: 0) }
    assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new("1/s").penalize("k", maxretry: 0) }
    assert_raises(Ratekeeper::StorageError) { Ratekeeper::Admin.new(store: "redis://127.0.0.1:1/0").entries }
  end
end

# A key ban earned by penalize in a scoped limiter holds in that scope only;
# Admin shows, inspects and unblocks it by scope (Ruby, on every store).
class TestScopedBans < Minitest::Test
  include TestSupport

  def test_a_key_ban_holds_in_the_scope_that_earned_it
    stores.each do |name, url|
      prefix = unique_prefix
      login = Ratekeeper::Limiter.new("100/minute", store: url, prefix: prefix, scope: "login")
      api = login.with_rules("100/minute", scope: "api")
      plain = login.with_rules("100/minute")
      assert_equal [false, true], Array.new(2) { login.penalize("user:42", maxretry: 2, findtime: 60, bantime: 60) }
      assert login.check("user:42").blocked?, name
      assert api.check("user:42").allowed?, "#{name}: another scope"
      assert plain.check("user:42").allowed?, "#{name}: no scope"
      admin = login.admin
      assert_equal [["blocklist", "login"]], admin.entries.map { |e| [e[:kind], e[:scope]] }, name
      assert_equal "fail2ban default", admin.inspect_key("user:42", scope: "login")[:scope_blocklist][:reason]
      refute admin.unblock("user:42", key: true, scope: "api")
      assert admin.unblock("user:42", key: true, scope: :login)
      assert login.check("user:42").allowed?, name
      error = assert_raises(Ratekeeper::ConfigurationError) { admin.block("203.0.113.9", scope: "api") }
      assert_match(/holds only/, error.message)
    end
  end
end
