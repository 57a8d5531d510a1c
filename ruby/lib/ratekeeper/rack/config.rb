# frozen_string_literal: true

module Ratekeeper
  module Rack
    # What the middleware does, said in a short DSL in the spirit of rack-attack:
    #
    #   use Ratekeeper::Rack::Middleware, store: "redis://127.0.0.1:6379/0" do |rk|
    #     rk.trusted_proxies = ["10.0.0.0/8"]
    #     rk.exempt "/health", "/assets/"
    #     rk.safelist("office") { |req| req.client_ip == "198.51.100.10" }
    #     rk.blocklist("scanners") { |req| req.path.end_with?(".php") }
    #     rk.throttle "req/ip", rules: "5/second; 300/5min"                 # keyed by client IP
    #     rk.throttle("login/email", rules: "5/5min", methods: "POST", paths: "/login") do |req|
    #       req.identity("email") # form or JSON field, trimmed, lower case; nil: not limited
    #     end
    #     rk.throttle "api", rules: "100/hour", tiers: { "pro" => "10000/hour" },
    #                        tier: ->(req) { req.get_header("HTTP_X_PLAN") }
    #     rk.fail2ban("scanners", maxretry: 3, findtime: 600, bantime: 3600) { |req| req.path.end_with?(".php") }
    #     rk.allow2ban("logins", maxretry: 20, findtime: 60, bantime: 3600) { |req| req.post? && req.path == "/login" }
    #   end
    #
    # Blocklisted and safelisted keys, addresses and ranges (Ratekeeper::Admin,
    # the `ratekeeper` command) apply to every request through the store.
    class Config
      Throttle = Struct.new(:name, :rules, :key, :methods, :paths, :tiers, :tier, :limiter, keyword_init: true)
      Rule = Struct.new(:name, :block)
      Ban = Struct.new(:name, :maxretry, :findtime, :bantime, :block, :allow, keyword_init: true)

      attr_accessor :store, :prefix, :on_error, :timeout, :connect_timeout, :pool_size,
                    :status, :blocked_status, :responder, :blocked_responder, :enabled,
                    :log_level, :log_keys, :policy_refresh
      attr_reader :throttles, :safelists, :blocklists, :bans, :exempt_paths, :trusted_proxies

      def initialize(**options)
        @store = "memory://"
        @prefix = "rk"
        @on_error = :allow
        @timeout = 0.25
        @connect_timeout = 0.25
        @pool_size = 16
        @status = 429
        @blocked_status = 403
        @enabled = true
        @log_level = :info # one line per denial on Ratekeeper.logger; nil: off
        @log_keys = false  # log keys as they are, not hashed
        @policy_refresh = 2.0 # seconds between reads of the switches and address lists
        @throttles = []
        @bans = []
        @safelists = []
        @blocklists = []
        @exempt_paths = []
        @trusted_proxies = []
        options.each do |name, value|
          raise ConfigurationError, "unknown Ratekeeper::Rack option #{name.inspect}" unless respond_to?("#{name}=")

          public_send("#{name}=", value)
        end
      end

      # Address ranges whose X-Forwarded-For is believed.
      def trusted_proxies=(ranges)
        @trusted_proxies = Array(ranges).map(&:to_s)
      end

      # Limits requests by +rules+ per the key the block returns (default: the
      # client IP); nil from the block lets the request through. +methods+ and
      # +paths+ (prefixes) narrow which requests the throttle sees. +tiers+
      # names other rule sets; +tier+ (a callable taking the request) picks
      # one per request, and a tier stored for the key (Admin#set_tier) wins.
      def throttle(name, rules:, methods: nil, paths: nil, tiers: nil, tier: nil, &key)
        name = name.to_s
        raise ConfigurationError, "throttle #{name.inspect} is defined twice" if @throttles.any? { |t| t.name == name }
        raise ConfigurationError, "throttle #{name.inspect}: tier must be callable" unless tier.nil? || tier.respond_to?(:call)

        Limiter.normalize_rules(rules)
        @throttles << Throttle.new(name: name, rules: rules, key: key, tiers: tiers, tier: tier,
                                   methods: methods && Array(methods).map { |m| m.to_s.upcase },
                                   paths: paths && Array(paths).map(&:to_s))
        self
      end

      # Fail2ban: a request the block is true for is refused (403) and counts
      # a strike against the client IP; +maxretry+ strikes within +findtime+
      # seconds block the IP for +bantime+ seconds, in every process.
      def fail2ban(name, maxretry:, findtime:, bantime:, &block)
        add_ban(name, maxretry, findtime, bantime, block, false)
      end

      # Allow2ban: like fail2ban, but the requests the block is true for are
      # let through until the client IP makes +maxretry+ of them within
      # +findtime+ seconds; then the IP is blocked for +bantime+ seconds.
      def allow2ban(name, maxretry:, findtime:, bantime:, &block)
        add_ban(name, maxretry, findtime, bantime, block, true)
      end

      # Requests the block is true for skip every throttle.
      def safelist(name, &block)
        raise ArgumentError, "safelist #{name.inspect} needs a block" unless block

        @safelists << Rule.new(name.to_s, block)
        self
      end

      # Requests the block is true for are refused (403).
      def blocklist(name, &block)
        raise ArgumentError, "blocklist #{name.inspect} needs a block" unless block

        @blocklists << Rule.new(name.to_s, block)
        self
      end

      private def add_ban(name, maxretry, findtime, bantime, block, allow)
        raise ArgumentError, "fail2ban/allow2ban #{name.inspect} needs a block" unless block

        @bans << Ban.new(name: name.to_s, maxretry: maxretry, findtime: findtime, bantime: bantime,
                         block: block, allow: allow)
        self
      end

      # Path prefixes never limited.
      def exempt(*paths)
        @exempt_paths.concat(paths.flatten.map(&:to_s))
        self
      end
    end
  end
end
