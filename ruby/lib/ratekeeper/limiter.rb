# frozen_string_literal: true

module Ratekeeper
  # Checks keys against a rule set on a store. The native half (converting,
  # releasing the GVL, calling the core) is in ext/ratekeeper; this half takes
  # Ruby keyword arguments and passes them on positionally.
  class Limiter
    ON_ERROR = %w[allow deny raise].freeze

    # Limiter.new(rules, store: "memory://", prefix: "rk", on_error: :allow,
    #             timeout: 0.25, connect_timeout: 0.25, pool_size: 16, max_keys: 1_000_000,
    #             denial_cache: 1.0, scope: "", tiers: nil, policy_refresh: 2.0, policies: true)
    #
    # rules: "1/second; 20/minute", or an Array of rule Strings and
    # [limit, window_seconds] pairs. denial_cache: seconds a denial is
    # remembered in-process at most (0 turns it off; Redis stores only).
    # scope: keeps this limiter's logs apart from others' for the same keys.
    # tiers: { "free" => "100/hour", "pro" => "10000/hour" }, named by a
    # check's tier: or stored per key (Admin#set_tier). policy_refresh: seconds
    # between reads of the switches and address lists. policies: false skips
    # reading each key's listings, tier and override.
    def self.new(rules, store: "memory://", prefix: "rk", on_error: :allow, timeout: 0.25,
                 connect_timeout: 0.25, pool_size: 16, max_keys: 1_000_000, denial_cache: 1.0,
                 scope: "", tiers: nil, policy_refresh: 2.0, policies: true)
      _new(
        Limiter.normalize_rules(rules),
        Limiter.string_option(:store, store),
        Limiter.string_option(:prefix, prefix),
        Limiter.string_option(:on_error, on_error),
        Limiter.number_option(:timeout, timeout),
        Limiter.number_option(:connect_timeout, connect_timeout),
        Limiter.integer_option(:pool_size, pool_size),
        Limiter.integer_option(:max_keys, max_keys),
        Limiter.number_option(:denial_cache, denial_cache),
        Limiter.string_option(:scope, scope),
        Limiter.tier_pairs(tiers),
        Limiter.number_option(:policy_refresh, policy_refresh),
        policies ? true : false
      )
    end

    # Checks +key+ (a String, binary or not; a Symbol is taken by name) for
    # +cost+ units at +now+ (seconds; the store's clock when nil), logging them
    # when every rule admits them. +tier+ names one of the limiter's tiers (a
    # tier stored for the key wins); +ip+ is the client address, matched
    # against listed addresses. Returns a Decision.
    def check(key, cost: 1, now: nil, tier: nil, ip: nil)
      _check(key.is_a?(Symbol) ? key.name : key, cost, now, tier&.to_s, ip&.to_s)
    end

    # What a check of +cost+ would decide now, without logging anything.
    def peek(key, cost: 1, now: nil, tier: nil, ip: nil)
      _peek(key.is_a?(Symbol) ? key.name : key, cost, now, tier&.to_s, ip&.to_s)
    end

    # Counts one fail2ban strike against +key+ (a bad request, a failed
    # login), or against the client address +ip+ (what a middleware saw): the
    # strike that makes +maxretry+ within +findtime+ seconds blocks that exact
    # key, or that address, for +bantime+ seconds. Returns true when this
    # strike banned it. A store failure follows on_error.
    def penalize(key = nil, ip: nil, maxretry: 5, findtime: 600, bantime: 3600, name: "default", now: nil)
      _penalize(key.is_a?(Symbol) ? key.name : key, ip, Limiter.integer_option(:maxretry, maxretry),
                Limiter.number_option(:findtime, findtime), Limiter.number_option(:bantime, bantime),
                Limiter.string_option(:name, name), now)
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

    # A limiter for other rules on the same store (its Redis pool or memory),
    # with its own +scope+ (logs kept apart) and +tiers+.
    def with_rules(rules, scope: "", tiers: nil)
      _with_rules(Limiter.normalize_rules(rules), Limiter.string_option(:scope, scope), Limiter.tier_pairs(tiers))
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

      # Tiers as the native layer takes them: [[name, rules], ...].
      def tier_pairs(tiers)
        return [] if tiers.nil?
        raise TypeError, "tiers must be a Hash of tier name to rules, not #{tiers.class}" unless tiers.is_a?(Hash)

        tiers.map { |name, rules| [name.to_s, normalize_rules(rules)] }
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
