# frozen_string_literal: true

require_relative "test_helper"

# The ratekeeper Redis module from Ruby: the option redis_module (Limiter,
# Admin, the Rack middleware's config) and what store_stats says.
class TestModule < Minitest::Test
  include TestSupport

  def test_checks_policies_and_bans_go_through_the_module
    url = configured("RATEKEEPER_TEST_REDIS_MODULE")
    prefix = unique_prefix
    limiter = Ratekeeper::Limiter.new("2/minute", store: url, prefix: prefix, tiers: { "pro" => "5/minute" },
                                                  redis_module: :require)
    admin = Ratekeeper::Admin.new(store: url, prefix: prefix, redis_module: "require")
    admin.set_tier("user:pro", "pro")
    admin.block("user:bad", ttl: 60, reason: "abuse")
    assert_equal 5, 7.times.count { limiter.check("user:pro").allowed? }
    assert limiter.check("user:bad").blocked?
    3.times { limiter.penalize("login:eve", maxretry: 3, findtime: 60, bantime: 60) }
    assert limiter.check("login:eve").blocked?
    stats = limiter.store_stats
    assert_equal ["module", 0], [stats[:path], stats[:script_calls]], stats.inspect
    assert_operator stats[:module_calls], :>=, 10
  end

  def test_off_and_require
    url = configured("RATEKEEPER_TEST_REDIS_MODULE")
    off = Ratekeeper::Limiter.new("2/minute", store: url, prefix: unique_prefix, redis_module: "off")
    assert_equal [true, true, false], Array.new(3) { off.check("k").allowed? }
    assert_equal "script", off.store_stats[:path]
    required = Ratekeeper::Limiter.new("2/minute", store: redis_url, prefix: unique_prefix, redis_module: "require",
                                                   on_error: :raise)
    error = assert_raises(Ratekeeper::StorageError) { required.check("k") }
    assert_match(/no ratekeeper module loaded.*--loadmodule/, error.message)
    error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new("1/s", redis_module: "maybe") }
    assert_match(/invalid redis_module 'maybe'/, error.message)
  end

  def test_the_rack_config_passes_it_on
    config = Ratekeeper::Rack::Config.new(redis_module: "off")
    assert_equal({ redis_module: "off" }, config.limiter_options)
    assert_equal "auto", Ratekeeper::Rack::Config.new.redis_module
    assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Rack::Config.new(redis_module: "sometimes") }
  end
end
