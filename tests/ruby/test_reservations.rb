# frozen_string_literal: true

require_relative "test_helper"

# Reservations from Ruby: a check for an estimate, settled to what the work
# cost, on every store; the block form and the object form.
class TestReservations < Minitest::Test
  include TestSupport

  T = 1_800_000_000.0

  def test_a_settle_gives_back_what_was_not_used_and_charges_an_overrun
    stores.merge("redis-module" => ENV.fetch("RATEKEEPER_TEST_REDIS_MODULE", nil)).compact.each do |name, url|
      limiter = Ratekeeper::Limiter.new("100/minute; 1000/hour", store: url, prefix: unique_prefix)
      first = limiter.reserve("tokens", cost: 60, now: T)
      assert first.allowed?, name
      assert_equal 40, first.decision.remaining, name
      refused = limiter.reserve("tokens", cost: 50, now: T + 1)
      refute refused.allowed?, name
      assert_nil refused.settle(0, now: T + 1), "#{name}: a refusal settles to nothing"

      after = first.settle(10, now: T + 2)
      assert_equal [50, 0, true], [first.refunded, first.over, first.settled?], name
      assert_equal [90, 990], after.rules.map(&:remaining), name
      error = assert_raises(Ratekeeper::ConfigurationError) { first.settle(10) }
      assert_includes error.message, "settles once"

      second = limiter.reserve("tokens", cost: 50, now: T + 3)
      assert second.allowed?, "#{name}: the units given back admit it"
      after = second.settle(120, now: T + 4)
      assert_equal [0, 70], [second.refunded, second.over], name
      assert after.allowed?, "#{name}: an overrun is counted, never refused"
      refute limiter.check("tokens", now: T + 5).allowed?, name
    end
  end

  def test_the_block_form_raises_on_refusal_and_returns_the_blocks_value
    limiter = Ratekeeper::Limiter.new("10/minute")
    value = limiter.reserve("k", cost: 8, now: T) do |r|
      r.settle(3, now: T)
      :done
    end
    assert_equal :done, value
    assert_equal 7, limiter.peek("k", now: T).remaining
    error = assert_raises(Ratekeeper::RateLimitExceeded) do
      limiter.reserve("k", cost: 9, now: T) { flunk "a refused reservation runs no work" }
    end
    refute error.decision.allowed?
    assert_includes error.message, "reservation of 9"
    kept = limiter.reserve("k", cost: 2, now: T)
    assert_equal 5, limiter.peek("k", now: T).remaining, "never settled, it keeps its estimate"
    assert_equal 7, kept.cancel.remaining
    assert_raises(Ratekeeper::ConfigurationError) { limiter.reserve("k", cost: 1, now: T).settle(-1) }
    assert_raises(TypeError) { limiter.reserve("k", cost: 1, now: T).settle("1") }
  end
end
