# frozen_string_literal: true

require_relative "test_helper"

# Meters from Ruby: a limiter of several named rule sets whose check charges
# each its own units and logs on all of them or on none; reservations settled
# per meter; one quota shared with Python processes.
class TestMeters < Minitest::Test
  include TestSupport

  T = 1_800_000_000.0
  METERS = { requests: "3/minute", tokens: "100/minute; 1000/day" }.freeze

  def left(limiter, key, now: T)
    d = limiter.peek(key, cost: { requests: 1, tokens: 1 }, now: now)
    [d.meters[:requests][0].remaining, d.meters[:tokens][0].remaining]
  end

  def every_store
    stores.merge("redis-module" => ENV.fetch("RATEKEEPER_TEST_REDIS_MODULE", nil),
                 "cluster" => ENV.fetch("RATEKEEPER_TEST_CLUSTER", nil)).compact
  end

  def test_a_check_is_all_or_nothing_across_the_meters
    every_store.each do |name, url|
      limiter = Ratekeeper::Limiter.new(METERS, store: url, prefix: unique_prefix)
      assert_equal %i[requests tokens], limiter.meters.keys, name
      2.times { |i| assert limiter.check("llm", cost: { requests: 1, tokens: 40 }, now: T + i).allowed?, name }
      refused = limiter.check("llm", cost: { requests: 1, "tokens" => 40 }, now: T + 2)
      refute refused.allowed?, name
      assert_equal [:tokens, 58.0], [refused.meter, refused.retry_after], name
      assert_equal [1, 20], left(limiter, "llm", now: T + 2), "#{name}: a request refused for tokens is not spent"
      assert_equal '"requests-1m";q=3;w=60, "tokens-1m";q=100;w=60, "tokens-1d";q=1000;w=86400',
                   refused.headers["RateLimit-Policy"], name
      assert_includes refused.inspect, "rule=tokens 100/1m"
      assert limiter.check("llm", cost: { requests: 1, tokens: 10 }, now: T + 3).allowed?, name
      no_request = limiter.check("llm", cost: { requests: 1, tokens: 1 }, now: T + 4)
      assert_equal [false, :requests], [no_request.allowed?, no_request.meter], name
      assert_equal [0, 10], left(limiter, "llm", now: T + 4), name
      limiter.reset("llm")
      assert_equal [3, 100], left(limiter, "llm"), name
    end
  end

  def test_reservations_settle_per_meter_in_both_forms
    every_store.each do |name, url|
      limiter = Ratekeeper::Limiter.new(METERS, store: url, prefix: unique_prefix)
      value = limiter.reserve("job", cost: { requests: 1, tokens: 80 }, now: T) do |r|
        assert_equal({ requests: 1, tokens: 80 }, r.estimate, name)
        r.settle(tokens: 15, now: T + 1)
        assert_equal [{ tokens: 65 }, { tokens: 0 }], [r.refunded, r.over], name
        :done
      end
      assert_equal :done, value
      assert_equal [2, 85], left(limiter, "job", now: T + 1), name
      second = limiter.reserve("job", cost: { requests: 1, tokens: 80 }, now: T + 2)
      second.settle({ tokens: 100 }, requests: 2, now: T + 2)
      assert_equal({ requests: 1, tokens: 20 }, second.over, "#{name}: overruns are charged, never refused")
      error = assert_raises(Ratekeeper::RateLimitExceeded) do
        limiter.reserve("job", cost: { requests: 1, tokens: 80 }, now: T + 2) { flunk "refused work ran" }
      end
      assert_includes error.message, "1 requests and 80 tokens"
      gone = limiter.reserve("other", cost: { tokens: 30 }, now: T)
      gone.cancel
      assert_equal [{ tokens: 30 }, [3, 100]], [gone.refunded, left(limiter, "other")], name
    end
  end

  def test_bad_meters_and_costs_are_named
    limiter = Ratekeeper::Limiter.new(METERS)
    [
      [1, Ratekeeper::ConfigurationError, "has meters (requests, tokens)"],
      [{ token: 1 }, Ratekeeper::ConfigurationError, "unknown meter 'token'"],
      [{ tokens: -1 }, Ratekeeper::ConfigurationError, "invalid cost -1 for meter 'tokens'"],
      [{ tokens: 0 }, Ratekeeper::ConfigurationError, "at least one meter at least 1 unit"],
      [{ tokens: 1.5 }, TypeError, "the cost of meter 'tokens' must be an Integer"],
      [{ 1 => 1 }, TypeError, "a meter's name must be a Symbol or String"],
      [{ "tok\0ens\r\n" => 1 }, Ratekeeper::ConfigurationError, "unknown meter"]
    ].each do |cost, error, message|
      raised = assert_raises(error) { limiter.check("k", cost: cost) }
      assert_includes raised.message, message
    end
    assert_nil limiter.check("k", cost: { tokens: 2**200 }).retry_after
    [[{}, "at least one"], [{ "a b" => "1/s" }, "invalid meter name 'a b'"]].each do |rules, message|
      raised = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new(rules) }
      assert_includes raised.message, message
    end
    raised = assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Limiter.new({ x: "1/s" }, tiers: { pro: "5/s" })
    end
    assert_includes raised.message, "meters or tiers"
    r = limiter.reserve("k", cost: { requests: 1, tokens: 1 })
    assert_raises(TypeError) { r.settle(3, tokens: 1) }
    assert_raises(TypeError) { r.settle }
    refute r.settled?
  end

  PYTHON = <<~PY
    import sys, ratekeeper
    url, prefix = sys.argv[1:3]
    limiter = ratekeeper.Limiter({"requests": "3/minute", "tokens": "100/minute; 1000/day"}, url, prefix=prefix)
    d = limiter.check("shared", {"requests": 1, "tokens": 30})
    print(d.allowed, d.meters["requests"][0].remaining, d.meters["tokens"][0].remaining)
  PY

  def test_python_and_ruby_share_each_meter
    prefix = unique_prefix
    limiter = Ratekeeper::Limiter.new(METERS, store: redis_url, prefix: prefix, on_error: :raise)
    assert limiter.check("shared", cost: { requests: 1, tokens: 50 }).allowed?
    out = IO.popen(["python3", "-c", PYTHON, redis_url, prefix], &:read)
    assert_equal "True 1 20", out.strip, "Python sees Ruby's request and tokens"
    refute limiter.check("shared", cost: { requests: 1, tokens: 30 }).allowed?
    assert_equal [1, 20], left(limiter, "shared", now: nil)
  end
end

class TestMeteredJobs < Minitest::Test
  include TestSupport

  METERS = TestMeters::METERS

  def test_a_reservation_waits_for_its_slot_when_asked
    limiter = Ratekeeper::Limiter.new({ requests: "2/300ms", tokens: "100/minute" })
    2.times { assert limiter.reserve("w", cost: { requests: 1, tokens: 1 }).allowed? }
    refute limiter.reserve("w", cost: { requests: 1, tokens: 1 }).allowed?
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert limiter.reserve("w", cost: { requests: 1, tokens: 1 }, wait: true, timeout: 5).allowed?
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :>, 0.1
    refute limiter.reserve("w", cost: { requests: 2, tokens: 1 }, wait: true, timeout: 0.01).allowed?
  end

  def test_the_sidekiq_middleware_settles_a_job_to_what_perform_returned
    require "ratekeeper/sidekiq"
    prefix = unique_prefix
    middleware = Ratekeeper::Sidekiq::Middleware.new(
      store: redis_url, prefix: prefix,
      limits: { "CompletionJob" => { rules: METERS, key: ->(_args) { "openai" },
                                     cost: ->(args) { { requests: 1, tokens: args.first } },
                                     settle: ->(reply) { { tokens: reply[:tokens] } } } }
    )
    worker = Object.new
    result = middleware.call(worker, { "class" => "CompletionJob", "args" => [80] }, "default") { { tokens: 15 } }
    assert_equal({ tokens: 15 }, result)
    scoped = Ratekeeper::Limiter.new(METERS, store: redis_url, prefix: prefix, scope: "sidekiq:CompletionJob")
    d = scoped.peek("openai", cost: { requests: 1, tokens: 1 })
    assert_equal [2, 85], [d.meters[:requests][0].remaining, d.meters[:tokens][0].remaining]
    assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Sidekiq::Middleware.new(store: "memory://", limits: { "J" => { rules: "1/s", settle: 5 } })
    end
  end
end
