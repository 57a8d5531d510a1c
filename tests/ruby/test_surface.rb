# frozen_string_literal: true

require_relative "test_helper"
require "json"

# Ruby offers the surface tests/cases/surface.json lists, as Python does
# (tests/python/test_surface.py walks the same list): every function and
# class, every member, every parameter by name (where Ruby knows the names),
# and nothing public beyond it.
class TestSurface < Minitest::Test
  SURFACE = JSON.parse(File.read(File.expand_path("../cases/surface.json", __dir__)))
  # What every object answers, whoever defines it: not part of the surface.
  OBJECT = %i[inspect to_s == === eql? hash].freeze

  def test_functions
    SURFACE["functions"].each do |name, spec|
      assert Ratekeeper.respond_to?(name), "Ratekeeper.#{name} is missing"
      assert_params Ratekeeper.method(name), spec["params"], "Ratekeeper.#{name}"
    end
    SURFACE["constants"].each { |name| assert Ratekeeper.const_defined?(name), name }
  end

  def test_classes
    SURFACE["classes"].each do |name, spec|
      klass = Ratekeeper.const_get(name)
      expected = spec["members"].map { |member, about| (about["ruby"] || member).to_sym } +
                 (spec["ruby_only"] || []).map(&:to_sym)
      public = klass.public_instance_methods(false).reject { |m| m.start_with?("_") || OBJECT.include?(m) }
      assert_equal expected.sort, public.sort, "#{name}: members differ from surface.json"
      spec["members"].each do |member, about|
        next unless about["params"]

        assert_params klass.instance_method((about["ruby"] || member).to_sym), about["params"], "#{name}##{member}"
      end
      assert_params klass.method(:new), spec["new"]["params"], "#{name}.new" if spec["new"]
    end
  end

  def test_limiter_options_are_the_cores
    assert_equal %w[store prefix on_error timeout connect_timeout pool_size max_keys denial_cache scope tiers
                    controls_refresh controls redis_module lease], Ratekeeper::DEFAULTS.keys.map(&:to_s)
    assert_equal({ policy_refresh: :controls_refresh, policies: :controls }, Ratekeeper::RENAMED_OPTIONS)
  end

  private

  # Parameter names agree; a native method that does not name its
  # parameters says nothing more; **options stands for the core's options
  # (any other ** is a parameter by its name, as **meters).
  def assert_params(method, expected, label)
    params = method.parameters
    return if params.any? { |_, name| name.nil? } || params.any? { |type, name| type == :rest && name == :args }

    named = params.reject { |type, name| type == :keyrest && name == :options }.map { |_, name| name.to_s }
    if params.any? { |type, name| type == :keyrest && name == :options }
      options = Ratekeeper::DEFAULTS.keys + Ratekeeper::RENAMED_OPTIONS.keys
      assert_equal options.map(&:to_s).sort, (expected - named).sort, "#{label}: **options"
      assert_empty named - expected, label
    else
      assert_equal expected.sort, named.sort, label
    end
  end
end
