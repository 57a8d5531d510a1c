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
    #       req.params["email"].to_s.downcase.strip
    #     end
    #   end
    class Config
      Throttle = Struct.new(:name, :rules, :key, :methods, :paths, :limiter, keyword_init: true)
      Rule = Struct.new(:name, :block)

      attr_accessor :store, :prefix, :on_error, :timeout, :connect_timeout, :pool_size,
                    :status, :blocked_status, :responder, :blocked_responder, :enabled,
                    :log_level, :log_keys
      attr_reader :throttles, :safelists, :blocklists, :exempt_paths, :trusted_proxies

      def initialize(**options)
        @store = "memory://"
        @prefix = "rk"
        @on_error = :allow
        @timeout = 0.05
        @connect_timeout = 0.05
        @pool_size = 16
        @status = 429
        @blocked_status = 403
        @enabled = true
        @log_level = :info # one line per denial on Ratekeeper.logger; nil: off
        @log_keys = false  # log keys as they are, not hashed
        @throttles = []
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
      # +paths+ (prefixes) narrow which requests the throttle sees.
      def throttle(name, rules:, methods: nil, paths: nil, &key)
        name = name.to_s
        raise ConfigurationError, "throttle #{name.inspect} is defined twice" if @throttles.any? { |t| t.name == name }

        Limiter.normalize_rules(rules)
        @throttles << Throttle.new(name: name, rules: rules, key: key,
                                   methods: methods && Array(methods).map { |m| m.to_s.upcase },
                                   paths: paths && Array(paths).map(&:to_s))
        self
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

      # Path prefixes never limited.
      def exempt(*paths)
        @exempt_paths.concat(paths.flatten.map(&:to_s))
        self
      end
    end
  end
end
