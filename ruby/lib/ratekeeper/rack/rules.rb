# frozen_string_literal: true

module Ratekeeper
  module Rack
    # A named rule of the middleware that a block decides: the gate calls the
    # block with the Request, and the rule applies when it is true.
    class Matcher
      attr_reader :name

      def initialize(name, &block)
        raise ArgumentError, "#{self.class.name.split("::").last.downcase} #{name.inspect} needs a block" unless block

        @name = name.to_s
        @block = block
      end

      # This rule as a policy entry (the gate calls the block).
      def to_policy
        { "name" => @name, "match" => @block }
      end
    end

    # Requests it matches skip every throttle.
    class Safelist < Matcher
    end

    # Requests it matches are refused (403).
    class Blocklist < Matcher
    end

    # Fail2ban (named apart from Ratekeeper::Fail2Ban, the ban parameters it
    # holds): a request it matches is refused (403) and counts a strike
    # against the client IP; +ban+ (a Ratekeeper::Fail2Ban, checked when the
    # rule is declared) says how many strikes within how long ban it, and for
    # how long.
    class Fail2BanFilter < Matcher
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

      # This ban as a policy entry (the gate calls the block).
      def to_policy
        { "name" => @ban.name, "match" => @block, "maxretry" => @ban.maxretry, "findtime" => @ban.findtime,
          "bantime" => @ban.bantime }
      end
    end

    # Allow2ban: like Fail2BanFilter, but the requests it matches go on until the
    # client IP has made +maxretry+ of them within +findtime+ seconds.
    class Allow2BanFilter < Fail2BanFilter
      def allow?
        true
      end
    end

    # Limits the requests it matches by +rules+ per the key its block returns
    # (default: the client IP); nil from the block lets a request through.
    # +methods+ and +paths+ (prefixes) narrow which requests it matches;
    # +tiers+ names other rule sets and +tier+ (a callable taking the request)
    # picks one per request (a tier stored for the key wins). +shadow: true+
    # tries it in production: it counts and reports, and refuses nothing.
    # +count:+ counts only some responses: :failures (a status of 400 or
    # more) or a list of statuses (a request is counted before the app runs,
    # and given back when its response is not one counted). +meters:+ in
    # place of +rules:+ names rule sets a request charges together, all or
    # nothing (+{ requests: "600/minute", tokens: "30000/minute" }+);
    # +cost:+ the units a request reserves of each (1 when not named), and
    # +usage:+ the response header that says what a meter really cost
    # (+{ tokens: "X-Tokens-Used" }+), which the reservation is settled to
    # when the response ends.
    class Throttle
      attr_reader :name, :rules, :tiers

      def initialize(name, rules: nil, meters: nil, cost: nil, usage: nil, methods: nil, paths: nil, tiers: nil,
                     tier: nil, shadow: nil, count: nil, &key)
        raise ConfigurationError, "throttle #{name.to_s.inspect}: tier must be callable" unless tier.nil? || tier.respond_to?(:call)

        Ratekeeper.parse_rules(rules) unless rules.nil? # a bad rule fails here, naming the text
        @name = name.to_s
        @rules = rules
        @meters = Throttle.named(name, "meters", meters) { |given| Throttle.rules_text(given) }
        @cost = Throttle.named(name, "cost", cost) { |units| units }
        @usage = Throttle.named(name, "usage", usage, &:to_s)
        @methods = methods && Array(methods).map { |m| m.to_s.upcase }
        @paths = paths && Array(paths).map(&:to_s)
        @tiers = tiers
        @tier = tier
        @shadow = shadow
        @count = count.is_a?(Symbol) ? count.to_s : count
        @key = key
      end

      # This throttle as a policy entry: its scope (the name, as a scope),
      # rules, tiers, the requests it counts, and its key (the block, else the
      # client IP) and tier callables, which the gate calls.
      def to_policy
        entry = { "scope" => Ratekeeper.scope_name(name), "key" => @key ? ->(request) { @key.call(request) } : "ip" }
        entry["rules"] = Throttle.rules_text(rules) unless rules.nil? # (the core asks for rules or meters)
        { "meters" => @meters, "cost" => @cost, "usage" => @usage }.each { |k, v| entry[k] = v if v }
        entry["methods"] = @methods if @methods
        entry["paths"] = @paths if @paths
        entry["tiers"] = @tiers.to_h { |tier, given| [tier.to_s, Throttle.rules_text(given)] } if @tiers
        entry["tier"] = @tier if @tier
        entry["shadow"] = @shadow unless @shadow.nil? # (the core checks it is true or false)
        entry["count"] = @count unless @count.nil? # (the core checks "failures" or the statuses)
        entry
      end

      # A Hash of meter names (Symbols or Strings) to values, with String
      # names and each value as the block makes it (the core checks both);
      # nil when not given.
      def self.named(name, what, given)
        return nil if given.nil?
        raise ConfigurationError, "throttle #{name.to_s.inspect}: #{what} must be a Hash of meter names" unless given.is_a?(Hash)

        given.to_h { |meter, value| [meter.to_s, yield(value)] }
      end

      # Rules as the policy writes them: the text, or each rule's.
      def self.rules_text(given)
        given.is_a?(String) ? given : Ratekeeper.parse_rules(given).map(&:to_s).join("; ")
      end
    end
  end
end
