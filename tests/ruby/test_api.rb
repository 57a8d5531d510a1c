# frozen_string_literal: true

require_relative "test_helper"

# The Ruby surface: errors, conversions, decisions, headers.
class TestApi < Minitest::Test
  include TestSupport

  def test_the_version_is_the_cargo_workspaces
    cargo = File.read(File.join(ROOT, "Cargo.toml"))
    version = cargo[/^\[workspace\.package\]\n(?:.*\n)*?version = "([^"]+)"/, 1]
    refute_nil version
    assert_equal version, Ratekeeper::VERSION
    assert_equal version, Gem::Specification.find_by_name("ratekeeper").version.to_s, "the installed gem's"
  end

  def test_exception_hierarchy
    assert_operator Ratekeeper::StorageError, :<, Ratekeeper::Error
    assert_operator Ratekeeper::Error, :<, StandardError
    assert_operator Ratekeeper::ConfigurationError, :<, ArgumentError
    error = assert_raises(Ratekeeper::Error) { Ratekeeper::Limiter.new("0/minute") }
    assert_kind_of Ratekeeper::ConfigurationError, error
    refute Ratekeeper::StorageError === error
  end

  def test_bad_rules_name_the_problem
    {
      "0/minute" => "0/minute", "5/fortnight" => "fortnight", "" => "empty", "10/s;20/s" => "same window",
      "-1/h" => "-1/h", "99999999999999999999/s" => "99999999999999999999/s", "1/400d" => "366 days"
    }.each do |rules, needle|
      error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new(rules) }
      assert_includes error.message, needle
    end
    assert_includes assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new([[0, 1.0]]) }.message, "limit"
  end

  def test_bad_options_name_the_problem
    { { store: "mysql://x" } => "mysql://x", { on_error: :maybe } => "maybe", { prefix: "a{b" } => "prefix",
      { timeout: 0 } => "timeout", { pool_size: 0 } => "pool_size", { max_keys: 0 } => "max_keys",
      { pool_size: 2**64 } => "invalid pool_size 18446744073709551616: give 1 to 1024",
      { timeout: 1e300 } => "invalid timeout 1e300" }.each do |opts, needle|
      error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new("1/s", **opts) }
      assert_includes error.message, needle
    end
  end

  def test_wrong_types_raise_type_error
    limiter = Ratekeeper::Limiter.new("1/s")
    assert_equal "key must be a String, not Integer", assert_raises(TypeError) { limiter.check(42) }.message
    assert_equal "key must be a String, not NilClass", assert_raises(TypeError) { limiter.check(nil) }.message
    assert_includes assert_raises(TypeError) { limiter.check("k", cost: "1") }.message, "cost must be an Integer"
    assert_includes assert_raises(TypeError) { limiter.check("k", cost: 1.5) }.message, "cost must be an Integer"
    assert_includes assert_raises(TypeError) { limiter.check("k", now: "now") }.message, "now must be a Float"
    assert_includes assert_raises(TypeError) { Ratekeeper::Limiter.new(12) }.message, "rules must be a String"
    assert_includes assert_raises(TypeError) { Ratekeeper::Limiter.new([Object.new]) }.message, "each rule must be"
    assert_includes assert_raises(TypeError) { Ratekeeper::Limiter.new("1/s", store: 5) }.message, "store must be a string, not Integer"
  end

  def test_bad_values_raise_configuration_error
    limiter = Ratekeeper::Limiter.new("1/s")
    assert_includes assert_raises(Ratekeeper::ConfigurationError) { limiter.check("k", cost: 0) }.message, "cost 0"
    assert_includes assert_raises(Ratekeeper::ConfigurationError) { limiter.check("k", now: -1.0) }.message, "now"
  end

  def test_rule_forms
    expected = Ratekeeper::Limiter.new("1/s; 20/min, 800/day").rules
    assert_equal expected, Ratekeeper::Limiter.new(["800/day", [20, 60], "1/second"]).rules
    assert_equal [1, 20, 800], expected.map(&:limit)
    assert_equal [1.0, 60.0, 86_400.0], expected.map(&:window)
    assert_equal "1/1s", expected.first.to_s
  end

  def test_decision_fields_and_inspect
    limiter = Ratekeeper::Limiter.new("1/second; 20/minute")
    d = limiter.check("user:42", now: 1000.0)
    assert d.allowed?
    assert_equal [0.0, 1, 0, 1.0, 1.0], [d.retry_after, d.limit, d.remaining, d.reset_after, d.window]
    assert_equal [[1, 1.0, 0, 1, 1.0], [20, 60.0, 19, 1, 60.0]],
                 d.rules.map { |r| [r.limit, r.window, r.remaining, r.used, r.reset_after] }
    assert_equal "#<Ratekeeper::Decision allowed=true retry_after=0.0 limit=1 remaining=0 reset_after=1.0 rule=1/1s>", d.inspect
    denied = limiter.check(:"user:42", now: 1000.25)
    refute denied.allowed?
    assert_equal 0.75, denied.retry_after
    assert_equal 1000.25, denied.now
  end

  def test_headers_match_python
    limiter = Ratekeeper::Limiter.new("1/second; 20/minute")
    limiter.check("k", now: 1_700_000_000.0)
    d = limiter.check("k", now: 1_700_000_000.5)
    assert_equal({ "X-RateLimit-Limit" => "1", "X-RateLimit-Remaining" => "0", "X-RateLimit-Used" => "1",
                   "X-RateLimit-Reset" => "1700000001", "RateLimit-Policy" => '"1s";q=1;w=1, "1m";q=20;w=60',
                   "RateLimit" => '"1s";r=0;t=1', "Retry-After" => "1" }, d.headers)
    answer = Ratekeeper::Responses.new.answer(d)
    assert_equal 429, answer.status
    assert_equal({ "error" => "rate_limited", "retry_after" => 1 }, JSON.parse(answer.body))
  end

  def test_cost_above_every_limit_never_passes
    d = Ratekeeper::Limiter.new("2/s").check("k", cost: 3)
    refute d.allowed?
    assert_nil d.retry_after
  end

  # a cost a request may choose never switches limiting off, on either store
  def test_hostile_cost_is_a_denial_on_every_store
    ["memory://", redis_url].each do |store|
      limiter = Ratekeeper::Limiter.new("5/s; 10/min", store: store, prefix: "hostile-cost-#{rand(1 << 30)}")
      [6, 2**40, 2**63 - 1, 2**63, 2**64, 2**200].each do |cost|
        d = limiter.check("k", cost: cost)
        refute d.allowed?, "#{store} cost #{cost}"
        assert_nil d.retry_after, "#{store} cost #{cost}"
      end
      assert limiter.check("k", cost: 5).allowed?, store
    end
    [-1, -(2**64), -(2**200)].each do |cost|
      error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new("1/s").check("k", cost: cost) }
      assert_includes error.message, "cost"
    end
  end

  def test_binary_and_hostile_keys
    limiter = Ratekeeper::Limiter.new("1/minute")
    ["caf\u00e9", "\xff\x00\n{}".b, "", "x" * 1_000_000].each do |key|
      assert limiter.check(key, now: 1.0).allowed?, key[0, 10].inspect
      refute limiter.check(key, now: 2.0).allowed?, key[0, 10].inspect
    end
    refute limiter.check("caf\u00e9".b, now: 3.0).allowed?, "UTF-8 and binary spellings are one key"
  end

  def test_peek_reset_and_with_rules
    limiter = Ratekeeper::Limiter.new("2/minute")
    assert_equal 2, limiter.peek("k", now: 1.0).remaining
    limiter.check("k", now: 1.0)
    assert_equal 1, limiter.peek("k", now: 2.0).remaining
    limiter.reset("k")
    assert_equal 2, limiter.peek("k", now: 3.0).remaining
    other = limiter.with_rules("1/hour")
    assert other.check("k", now: 4.0).allowed?
    refute other.check("k", now: 5.0).allowed?
  end

  def test_on_error_outcomes_when_redis_is_unreachable
    dead = "redis://127.0.0.1:1/0"
    allow = Ratekeeper::Limiter.new("1/s", store: dead, on_error: :allow)
    d = allow.check("k")
    assert d.allowed? && d.degraded?
    assert_equal 1, allow.error_count
    d = Ratekeeper::Limiter.new("1/s", store: dead, on_error: :deny).check("k")
    refute d.allowed?
    assert_raises(Ratekeeper::StorageError) { Ratekeeper::Limiter.new("1/s", store: dead, on_error: :raise).check("k") }
  end

  def test_trusted_proxies
    proxies = Ratekeeper::TrustedProxies.new(["10.0.0.0/8"])
    assert_equal "198.51.100.7", proxies.client_ip("10.0.0.2", "6.6.6.6, 198.51.100.7")
    assert_equal "203.0.113.9", proxies.client_ip("203.0.113.9", "1.1.1.1")
    assert proxies.trusts?("10.1.2.3")
    refute proxies.trusts?("banana")
    assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::TrustedProxies.new(["10.0.0.0/99"]) }
  end
end

# Hostile input through Ruby: binary keys on Redis, and a panic in the core.
class TestHostile < Minitest::Test
  include TestSupport

  def test_binary_and_awkward_keys_on_redis
    limiter = Ratekeeper::Limiter.new("1/hour", store: redis_url, prefix: unique_prefix, on_error: :raise)
    ["", "x" * 1_000_000, "nul\0inside", "line\nbreak", "{brace}", "\xff\xfe\x00{".b, (0..255).map(&:chr).join.b].each do |key|
      assert limiter.check(key).allowed?, key[0, 12].inspect
      refute limiter.check(key).allowed?, key[0, 12].inspect
    end
  end

  def test_a_panic_in_the_core_is_an_exception
    error = assert_raises(Ratekeeper::Error) { Ratekeeper._panic_for_tests }
    assert_includes error.message, "deliberate panic"
    assert Ratekeeper::Limiter.new("1/s").check("k").allowed?
  end
end

# Batches and the denial cache through Ruby.
class TestBatches < Minitest::Test
  include TestSupport

  def test_check_many_and_check_all
    limiter = Ratekeeper::Limiter.new("2/hour", store: redis_url, prefix: unique_prefix)
    assert_equal [true, true, false, true], limiter.check_many(["a", "a", :a, "b"]).map(&:allowed?)
    per_user = limiter.with_rules("1/hour; 5/day")
    first = Ratekeeper.check_all([[limiter, "ip:1"], [per_user, "user:1", 1]])
    second = Ratekeeper.check_all([[limiter, "ip:1"], [per_user, "user:1"]])
    assert_equal [true, true], first.map(&:allowed?)
    assert_equal [true, false], second.map(&:allowed?)
    assert_raises(TypeError) { Ratekeeper.check_all([["not a limiter", "k"]]) }
  end

  def test_denial_cache_spares_redis
    limiter = Ratekeeper::Limiter.new("1/hour", store: redis_url, prefix: unique_prefix)
    assert limiter.check("k").allowed?
    refute limiter.check("k").cached?
    attempts = limiter.store_stats[:attempts]
    assert(200.times.all? { d = limiter.check("k"); !d.allowed? && d.cached? })
    assert_equal attempts, limiter.store_stats[:attempts]
    limiter.reset("k")
    assert limiter.check("k").allowed?
    assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new("1/s", denial_cache: -1) }
  end

  def test_an_outage_is_logged_once
    logged = StringIO.new
    Ratekeeper.logger = Logger.new(logged)
    limiter = Ratekeeper::Limiter.new("1/s", store: "redis://127.0.0.1:1/0", on_error: :allow)
    5.times { assert limiter.check("k").degraded? }
    assert_equal 1, logged.string.scan("checks are allowed").size
  ensure
    Ratekeeper.logger = nil
  end
end
