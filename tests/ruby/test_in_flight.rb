# frozen_string_literal: true

require_relative "test_helper"

# In-flight rules from Ruby: holds that take a lease on every store, released
# by a block's end (an exception included), by Lease#release or by lapsing;
# a hold that waits for the slot a release frees; and one key's slots shared
# with Python processes.
class TestInFlight < Minitest::Test
  include TestSupport

  def every_store
    stores.merge("redis-module" => ENV.fetch("RATEKEEPER_TEST_REDIS_MODULE", nil),
                 "cluster" => ENV.fetch("RATEKEEPER_TEST_CLUSTER", nil)).compact
  end

  def test_slots_are_held_and_released_on_every_store
    every_store.each do |name, url|
      export = Ratekeeper::Limiter.new("2 concurrent; 100/minute", store: url, prefix: unique_prefix, on_error: :raise)
      assert_equal 2, export.in_flight
      answer = export.hold("user:1") do |lease|
        assert lease.allowed? && lease.id, name
        other = export.hold("user:1")
        assert_equal [2, 0], [other.decision.in_flight, other.decision.remaining], name
        refused = assert_raises(Ratekeeper::RateLimitExceeded) { export.hold("user:1") { flunk "ran" } }
        assert_includes refused.message, "every slot is held"
        assert_equal 2, export.leases("user:1").size, name
        assert_equal [true, false], [other.release, other.release], "#{name}: a second release is harmless"
        assert_nil other.extend_lease, "#{name}: released"
        :done
      end
      assert_equal :done, answer
      assert_equal 0, export.peek("user:1").in_flight, "#{name}: the block's end released it"
      assert_raises(KeyError) { export.hold("user:1") { raise KeyError, "boom" } }
      assert_equal 0, export.peek("user:1").in_flight, "#{name}: an exception released it too"
      assert_raises(Ratekeeper::ConfigurationError) { export.check("user:1") }
      assert_raises(Ratekeeper::ConfigurationError) { export.hold("user:1", lease: 0) }
    end
  end

  def test_a_lease_lapses_and_a_waiting_hold_takes_a_released_slot
    one = Ratekeeper::Limiter.new("1 in flight", store: redis_url, prefix: unique_prefix, on_error: :raise)
    one.hold("job", lease: 0.2) # never released: it lapses
    refute one.hold("job").allowed?
    sleep 0.3
    held = one.hold("job", lease: 60)
    assert held.allowed?
    assert_in_delta Time.now.to_f + 5, held.extend_lease(5), 1.0
    releaser = Thread.new { sleep 0.2; held.release }
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    waited = one.hold("job", wait: true, timeout: 5)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    releaser.join
    assert waited.allowed?
    assert_operator took, :<, 1.5, "the release was heard, not the 60 s lease"
    waited.release
  end

  def test_within_limit_holds_a_slot_for_the_block
    one = Ratekeeper::Limiter.new("1 concurrent", store: redis_url, prefix: unique_prefix, on_error: :raise)
    inside = one.within_limit("partner") { one.peek("partner").in_flight }
    assert_equal [1, 0], [inside, one.peek("partner").in_flight]
    one.hold("partner") do
      assert_raises(Ratekeeper::RateLimitExceeded) { one.within_limit("partner", wait: false) { flunk "ran" } }
      assert_raises(Ratekeeper::RateLimitExceeded) { one.within_limit("partner", wait: 0.2) { flunk "ran" } }
    end
  end

  PYTHON = <<~PY
    import sys
    import ratekeeper
    url, prefix = sys.argv[1:3]
    export = ratekeeper.Limiter("2 concurrent", url, prefix=prefix)
    lease = export.hold("shared")
    print(lease.allowed, lease.decision.in_flight, export.hold("shared").allowed)
  PY

  # The Rack door: a throttle of "1 concurrent" holds its slot until the
  # server closes the body (a BodyProxy), and gives it back when the app
  # raises; the DSL and a throttle's tiers or count say what cannot be held.
  def test_the_rack_door_holds_a_slot_until_the_body_is_closed
    app = Ratekeeper::Rack::Middleware.new(->(env) { env["PATH_INFO"] == "/boom" ? raise("boom") : [200, {}, ["ok"]] },
                                           store: "memory://", prefix: unique_prefix) do |rk|
      rk.log_level = nil
      rk.throttle("exports", rules: "1 concurrent; 100/minute") { |req| req.ip }
    end
    env = ->(path) { Rack::MockRequest.env_for(path, "REMOTE_ADDR" => "203.0.113.9") }
    status, _headers, body = app.call(env.call("/export"))
    assert_equal [200, 429], [status, app.call(env.call("/export")).first]
    body.close
    assert_equal 200, app.call(env.call("/export")).first, "closing the body gave the slot back"
    app = Ratekeeper::Rack::Middleware.new(->(env) { env["PATH_INFO"] == "/boom" ? raise("boom") : [200, {}, ["ok"]] },
                                           store: "memory://", prefix: unique_prefix) do |rk|
      rk.throttle("exports", rules: "1 concurrent") { |req| req.ip }
    end
    2.times { assert_raises(RuntimeError) { app.call(env.call("/boom")) } }
    assert_equal 200, app.call(env.call("/export")).first, "a raising app gave its slot back"
    error = assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Rack::Middleware.new(->(_) {}, store: "memory://") do |rk|
        rk.throttle("logins", rules: "1 concurrent", count: :failures) { |req| req.ip }
      end.call(env.call("/"))
    end
    assert_includes error.message, "counts every request while it is under way"
  end

  def test_python_and_ruby_share_the_slots
    prefix = unique_prefix
    export = Ratekeeper::Limiter.new("2 concurrent", store: redis_url, prefix: prefix, on_error: :raise)
    mine = export.hold("shared")
    out = IO.popen(["python3", "-c", PYTHON, redis_url, prefix], &:read)
    assert_equal "True 2 False", out.strip, "Python sees Ruby's slot, takes the last, and is refused the next"
    mine.release
  end
end
