# frozen_string_literal: true

module Ratekeeper
  # Checks keys against a rule set on a store. The native half (converting,
  # releasing the GVL, calling the core) is in ext/ratekeeper; this half takes
  # Ruby keyword arguments and passes them on positionally.
  class Limiter
    ON_ERROR = %w[allow deny raise].freeze

    # Limiter.new(rules, store: "memory://", prefix: "rk", on_error: :allow,
    #             timeout: 0.05, connect_timeout: 0.05, pool_size: 16, max_keys: 1_000_000,
    #             denial_cache: 1.0)
    #
    # rules: "1/second; 20/minute", or an Array of rule Strings and
    # [limit, window_seconds] pairs. denial_cache: seconds a denial is
    # remembered in-process at most (0 turns it off; Redis stores only).
    def self.new(rules, store: "memory://", prefix: "rk", on_error: :allow, timeout: 0.05,
                 connect_timeout: 0.05, pool_size: 16, max_keys: 1_000_000, denial_cache: 1.0)
      _new(
        Limiter.normalize_rules(rules),
        Limiter.string_option(:store, store),
        Limiter.string_option(:prefix, prefix),
        Limiter.string_option(:on_error, on_error),
        Limiter.number_option(:timeout, timeout),
        Limiter.number_option(:connect_timeout, connect_timeout),
        Limiter.integer_option(:pool_size, pool_size),
        Limiter.integer_option(:max_keys, max_keys),
        Limiter.number_option(:denial_cache, denial_cache)
      )
    end

    # Checks +key+ (a String, binary or not; a Symbol is taken by name) for
    # +cost+ units at +now+ (seconds; the store's clock when nil), logging them
    # when every rule admits them. Returns a Decision.
    def check(key, cost: 1, now: nil)
      _check(key.is_a?(Symbol) ? key.name : key, cost, now)
    end

    # What a check of +cost+ would decide now, without logging anything.
    def peek(key, cost: 1, now: nil)
      _peek(key.is_a?(Symbol) ? key.name : key, cost, now)
    end

    # Checks several keys against these rules in one Redis round trip (a
    # pipeline); each key is checked atomically on its own. Returns Decisions.
    def check_many(keys, cost: 1, now: nil)
      raise TypeError, "keys must be an Array, not #{keys.class}" unless keys.is_a?(Array)

      _check_many(keys.map { |key| key.is_a?(Symbol) ? key.name : key }, cost, now)
    end

    # Forgets everything logged for +key+ (and a denial remembered for it here).
    def reset(key)
      _reset(key.is_a?(Symbol) ? key.name : key)
    end

    # A limiter for other rules on the same store (its Redis pool or memory).
    def with_rules(rules)
      _with_rules(Limiter.normalize_rules(rules))
    end

    class << self
      # Rules as the native layer takes them: a String or an Array of Strings and pairs.
      def normalize_rules(rules)
        case rules
        when String then rules
        when Rule then [rules.to_s]
        when Array then rules.map { |r| r.is_a?(Rule) ? r.to_s : r }
        else
          raise TypeError, "rules must be a String such as \"10/minute\" or an Array of them, not #{rules.class}"
        end
      end

      def string_option(name, value)
        return value.to_s if value.is_a?(String) || value.is_a?(Symbol)

        raise TypeError, "#{name} must be a String, not #{value.class}"
      end

      def number_option(name, value)
        return value.to_f if value.is_a?(Numeric)

        raise TypeError, "#{name} must be a number of seconds, not #{value.class}"
      end

      def integer_option(name, value)
        return value if value.is_a?(Integer)

        raise TypeError, "#{name} must be an Integer, not #{value.class}"
      end
    end
  end
end
