# frozen_string_literal: true

module Ratekeeper
  module Rack
    # A named rule of the middleware that a block decides: the block is
    # called with the Request, and the rule applies when it is true.
    class Matcher
      attr_reader :name

      def initialize(name, &block)
        raise ArgumentError, "#{self.class.name.split("::").last.downcase} #{name.inspect} needs a block" unless block

        @name = name.to_s
        @block = block
      end

      # Whether this rule applies to the request.
      def matched_by?(request)
        @block.call(request) ? true : false
      end
    end

    # Requests it matches skip every throttle.
    class Safelist < Matcher
    end

    # Requests it matches are refused (403).
    class Blocklist < Matcher
    end

    # Fail2ban: a request it matches is refused (403) and counts a strike
    # against the client IP; +ban+ (a Ratekeeper::Fail2Ban, checked when the
    # rule is declared) says how many strikes within how long ban it, and for
    # how long.
    class Fail2Ban < Matcher
      attr_reader :ban

      def initialize(name, maxretry:, findtime:, bantime:, &block)
        super(name, &block)
        @ban = Ratekeeper::Fail2Ban.new(Ratekeeper.scope_name(name.to_s), maxretry: maxretry, findtime: findtime,
                                                                           bantime: bantime)
      end

      # Whether the requests it matches go on until the ban (allow2ban).
      def allow?
        false
      end
    end

    # Allow2ban: like Fail2Ban, but the requests it matches go on until the
    # client IP has made +maxretry+ of them within +findtime+ seconds.
    class Allow2Ban < Fail2Ban
      def allow?
        true
      end
    end

    # Limits the requests it matches by +rules+ per the key its block returns
    # (default: the client IP); nil from the block lets a request through.
    # +methods+ and +paths+ (prefixes) narrow which requests it matches;
    # +tiers+ names other rule sets and +tier+ (a callable taking the request)
    # picks one per request (a tier stored for the key wins).
    class Throttle
      attr_reader :name, :rules, :tiers, :limiter

      def initialize(name, rules:, methods: nil, paths: nil, tiers: nil, tier: nil, &key)
        raise ConfigurationError, "throttle #{name.to_s.inspect}: tier must be callable" unless tier.nil? || tier.respond_to?(:call)

        Ratekeeper.parse_rules(rules) # a bad rule fails here, naming the text
        @name = name.to_s
        @rules = rules
        @methods = methods && Array(methods).map { |m| m.to_s.upcase }
        @paths = paths && Array(paths).map(&:to_s)
        @tiers = tiers
        @tier = tier
        @key = key
        @limiter = nil
      end

      # This throttle with its limiter: +base+'s store, its logs kept under
      # the throttle's name.
      def bind(base)
        dup.tap do |copy|
          copy.instance_variable_set(:@limiter, base.with_rules(rules, scope: Ratekeeper.scope_name(name), tiers: tiers))
        end
      end

      # Whether the request's method and path are ones this throttle limits.
      def matched_by?(request)
        return false if @methods && !@methods.include?(request.request_method)

        path = request.path_info.to_s
        @paths.nil? || @paths.any? { |prefix| path.start_with?(prefix) }
      end

      # The request's key under this throttle, or nil when it does not apply.
      def key_for(request)
        return nil unless matched_by?(request)

        key = @key ? @key.call(request) : request.client_key
        key&.to_s
      end

      # The tier the request names, when it is one of the throttle's tiers
      # (a client may send any text: another is ignored, as in Django).
      def tier_for(request)
        name = @tier&.call(request)&.to_s
        name if name && @tiers && (@tiers.key?(name) || @tiers.key?(name.to_sym))
      end
    end
  end
end
