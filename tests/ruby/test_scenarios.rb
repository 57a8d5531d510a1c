# frozen_string_literal: true

require_relative "test_helper"

# The shared scenario table (tests/cases/scenarios.json) through the Ruby API, on both stores.
class TestScenarios < Minitest::Test
  include TestSupport

  CASES = JSON.parse(File.read(File.join(TestSupport::ROOT, "tests/cases/scenarios.json")))["cases"]

  def test_the_table_is_large_enough
    assert_operator CASES.size, :>=, 25
  end

  MODULE_STORES = { "redis_module" => "RATEKEEPER_TEST_REDIS_MODULE", "cluster_module" => "RATEKEEPER_TEST_CLUSTER_MODULE" }.freeze

  %w[memory redis].each do |store_name|
    CASES.each do |kase|
      define_method("test_#{store_name}_#{kase["name"].tr("-", "_")}") do
        run_case(kase, stores.fetch(store_name))
      end
    end
  end

  # through the ratekeeper Redis module (and only through it)
  MODULE_STORES.each do |store_name, var|
    CASES.each do |kase|
      define_method("test_#{store_name}_#{kase["name"].tr("-", "_")}") do
        limiter = run_case(kase, configured(var), redis_module: "require")
        stats = limiter.store_stats
        assert_equal ["module", 0], [stats[:path], stats[:script_calls]], stats.inspect
      end
    end
  end

  private

  def run_case(kase, store, **options)
    limiter = Ratekeeper::Limiter.new(kase["rules"], store: store, prefix: unique_prefix, on_error: :raise, timeout: 5,
                                                     **options)
    kase["steps"].each_with_index do |step, i|
      where = "#{kase["name"]} step #{i}: #{step}"
      if step["op"] == "reset"
        limiter.reset(step["key"])
        next
      end
      call = step["op"] == "check" ? :check : :peek
      d = limiter.public_send(call, step["key"], cost: step.fetch("cost", 1), now: step["now"])
      expect = step["expect"]
      assert_equal expect["allowed"], d.allowed?, where if expect.key?("allowed")
      if expect.key?("retry_after")
        if expect["retry_after"].nil?
          assert_nil d.retry_after, where
        else
          assert_in_delta expect["retry_after"], d.retry_after, 1e-6, where
        end
      end
      assert_equal expect["remaining"], d.rules.map(&:remaining), where if expect.key?("remaining")
      if expect.key?("reset_after")
        expect["reset_after"].zip(d.rules.map(&:reset_after)).each { |want, got| assert_in_delta want, got, 1e-6, where }
      end
      assert_equal expect["limit"], d.limit, where if expect.key?("limit")
      if expect.key?("binding")
        bound = d.rules[expect["binding"]]
        assert_equal [bound.limit, bound.remaining, bound.reset_after], [d.limit, d.remaining, d.reset_after], where
      end
    end
    limiter
  end
end
