# frozen_string_literal: true

module Rack
  # (rack-attack's API on ratekeeper: see ratekeeper/rack_attack.rb)
  class Attack
    # A throttle: +limit+ requests per +period+ seconds (each a number or a
    # callable taking the request) per discriminator (the block's value; nil:
    # not counted).
    class Throttle
      attr_reader :name, :limit, :period, :block

      def initialize(name, limit:, period:, &block)
        raise ArgumentError, "throttle #{name.inspect} needs a block giving the discriminator" unless block

        @name = name.to_s
        @limit = limit
        @period = period
        @block = block
        rate(nil) unless dynamic? # a bad number fails here
      end

      # Whether the limit or the period is a callable.
      def dynamic?
        @limit.respond_to?(:call) || @period.respond_to?(:call)
      end

      # [limit, period in ms] for a request.
      def rate(request)
        limit = @limit.respond_to?(:call) ? @limit.call(request) : @limit
        period = @period.respond_to?(:call) ? @period.call(request) : @period
        limit = Integer(limit)
        period_ms = (Float(period) * 1000).round
        raise ArgumentError, "throttle #{@name.inspect}: limit must be at least 1, not #{limit}" if limit < 1
        raise ArgumentError, "throttle #{@name.inspect}: period must be at least 1 ms" if period_ms < 1

        [limit, period_ms]
      end
    end

    # A safelist or blocklist entry: a block taking the request.
    Check = Struct.new(:name, :block)

    # rack-attack's fail2ban: inside a blocklist block, +filter+ counts a
    # strike for +discriminator+ whenever the block is true; +maxretry+
    # strikes within +findtime+ seconds ban it for +bantime+ seconds. True
    # (block the request) while banned, and for each request the block is
    # true for.
    class Fail2Ban
      class << self
        def filter(discriminator, bantime:, findtime:, maxretry:)
          Attack.follow_timecop
          limiter = Attack.strikes
          key = "#{name.split("::").last.downcase}:#{discriminator}"
          return true if limiter.peek(key).blocked?
          return false unless yield

          banned = limiter.penalize(key, maxretry: maxretry, findtime: findtime, bantime: bantime)
          struck(banned)
        end

        private

        def struck(_banned)
          true
        end
      end
    end

    # rack-attack's allow2ban: like Fail2Ban, but the requests the block is
    # true for pass (the one that bans too); the ban refuses the next ones.
    class Allow2Ban < Fail2Ban
      class << self
        private

        def struck(_banned)
          false
        end
      end
    end
  end
end
