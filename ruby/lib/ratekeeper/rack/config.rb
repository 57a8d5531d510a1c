# frozen_string_literal: true

require "ratekeeper/rack/rules"

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
    #     rk.headers = :draft   # which rate-limit headers: :all (default), :draft, :legacy, :none
    #     rk.allow2ban("logins", maxretry: 20, findtime: 60, bantime: 3600) { |req| req.post? && req.path == "/login" }
    #   end
    #
    # Blocklisted and safelisted keys, addresses and ranges (Ratekeeper::Admin,
    # the `ratekeeper` command) apply to every request through the store.
    class Config
      # Limiter options the middleware passes on (Ratekeeper::DEFAULTS has
      # their defaults; scope and tiers belong to each throttle).
      LIMITER_OPTIONS = (Ratekeeper::DEFAULTS.keys - %i[scope tiers]).freeze

      attr_accessor :responder, :blocked_responder, :enabled, :log_level
      # A policy file (TOML, as the edge server and the Django and WSGI doors
      # read it) to apply instead of what this DSL says (the responders and
      # log_level still apply).
      attr_accessor :policy
      attr_reader :throttles, :safelists, :blocklists, :bans, :exempt_paths, :trusted_proxies,
                  :ipv4_prefix, :ipv6_prefix

      LIMITER_OPTIONS.each do |name|
        define_method(name) { @limiter_options.fetch(name) { Ratekeeper::DEFAULTS[name] } }
        define_method("#{name}=") do |value|
          Ratekeeper.check_option(name, value)
          @limiter_options[name] = value
        end
      end

      # An option's old name (Ratekeeper::RENAMED_OPTIONS) still works, with
      # a deprecation warning.
      Ratekeeper::RENAMED_OPTIONS.each do |old, now|
        define_method(old) { public_send(now) }
        define_method("#{old}=") do |value|
          Ratekeeper.check_option(old, value)
          @limiter_options[now] = value
        end
      end

      def initialize(**options)
        @limiter_options = {}
        @responses = Ratekeeper::Responses.new
        @enabled = true
        @log_level = :info # one line per denial on Ratekeeper.logger; nil: off
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

      # The options given for the middleware's limiters.
      def limiter_options
        @limiter_options.dup
      end

      # How the middleware answers (statuses, header style, log keys).
      attr_reader :responses

      # The status of a denial (429).
      def status=(value)
        @responses = responses_with(status: value)
      end

      # The status of a blocked client's answer (403).
      def blocked_status=(value)
        @responses = responses_with(blocked_status: value)
      end

      # Which rate-limit headers to send: :all (default), :draft, :legacy or :none.
      def headers=(value)
        @responses = responses_with(headers: value)
      end

      # Log keys as they are, not hashed.
      def log_keys=(value)
        @responses = responses_with(log_keys: value)
      end

      %i[status blocked_status headers].each do |name|
        define_method(name) { @responses.public_send(name) }
      end

      def log_keys
        @responses.log_keys?
      end

      # Address ranges whose X-Forwarded-For is believed (checked now).
      def trusted_proxies=(ranges)
        ranges = Array(ranges).map(&:to_s)
        TrustedProxies.new(ranges)
        @trusted_proxies = ranges
      end

      # How much of an IPv4 client's address names it (16 to 32, default 32):
      # the client IP keys and address bans (checked now).
      def ipv4_prefix=(prefix)
        TrustedProxies.new(ipv4_prefix: prefix)
        @ipv4_prefix = prefix
      end

      # How much of an IPv6 client's address names it (48 to 128, default
      # 64: a client usually holds a whole /64 and can send each request from
      # a new address in it).
      def ipv6_prefix=(prefix)
        TrustedProxies.new(ipv6_prefix: prefix)
        @ipv6_prefix = prefix
      end

      # Who a request's client is, as these options say.
      def proxies
        TrustedProxies.new(@trusted_proxies, ipv4_prefix: @ipv4_prefix, ipv6_prefix: @ipv6_prefix)
      end

      # Limits requests by +rules+ per the key the block returns (default: the
      # client IP); nil from the block lets the request through. +methods+ and
      # +paths+ (prefixes) narrow which requests the throttle sees. +tiers+
      # names other rule sets; +tier+ (a callable taking the request) picks
      # one per request, and a tier stored for the key (Admin#set_tier) wins.
      # +shadow: true+: the throttle counts, logs and reports what it would
      # deny, and lets it through (a new throttle tried in production).
      # +count:+ counts only some responses (:failures, or statuses).
      # +meters:+ (in place of +rules:+), +cost:+ and +usage:+: named rule
      # sets a request charges together, the units it reserves of each, and
      # the response header that settles a meter to what it cost (see
      # Throttle).
      def throttle(name, rules: nil, meters: nil, cost: nil, usage: nil, methods: nil, paths: nil, tiers: nil, tier: nil,
                   shadow: nil, count: nil, &key)
        raise ConfigurationError, "throttle #{name.to_s.inspect} is defined twice" if @throttles.any? { |t| t.name == name.to_s }

        @throttles << Throttle.new(name, rules: rules, meters: meters, cost: cost, usage: usage, methods: methods,
                                         paths: paths, tiers: tiers, tier: tier, shadow: shadow, count: count, &key)
        self
      end

      # Fail2ban: a request the block is true for is refused (403) and counts
      # a strike against the client IP; +maxretry+ strikes within +findtime+
      # seconds block the IP for +bantime+ seconds, in every process. The
      # numbers are checked here.
      def fail2ban(name, maxretry:, findtime:, bantime:, &block)
        @bans << Fail2BanFilter.new(name, maxretry: maxretry, findtime: findtime, bantime: bantime, &block)
        self
      end

      # Allow2ban: like fail2ban, but the requests the block is true for are
      # let through until the client IP makes +maxretry+ of them within
      # +findtime+ seconds; then the IP is blocked for +bantime+ seconds.
      def allow2ban(name, maxretry:, findtime:, bantime:, &block)
        @bans << Allow2BanFilter.new(name, maxretry: maxretry, findtime: findtime, bantime: bantime, &block)
        self
      end

      # Requests the block is true for skip every throttle.
      def safelist(name, &block)
        @safelists << Safelist.new(name, &block)
        self
      end

      # Requests the block is true for are refused (403).
      def blocklist(name, &block)
        @blocklists << Blocklist.new(name, &block)
        self
      end

      # Path prefixes never limited.
      def exempt(*paths)
        @exempt_paths.concat(paths.flatten.map(&:to_s))
        self
      end

      # What this DSL says, as a policy (the model every door applies): the
      # store and limiter options under "store", then the requests, the
      # responses, the lists, the throttles and the bans.
      def to_policy
        store = @limiter_options.to_h { |name, value| [name == :store ? "url" : name.to_s, value] }
        {
          "enabled" => @enabled ? true : false, "store" => store, "trusted_proxies" => @trusted_proxies,
          "ipv4_prefix" => @ipv4_prefix, "ipv6_prefix" => @ipv6_prefix, "exempt_paths" => @exempt_paths,
          "status" => status, "blocked_status" => blocked_status, "headers" => headers.to_s, "log_keys" => log_keys,
          "log_denials" => !@log_level.nil?,
          "safelist" => @safelists.map(&:to_policy), "blocklist" => @blocklists.map(&:to_policy),
          "throttle" => @throttles.map(&:to_policy),
          "fail2ban" => @bans.reject(&:allow?).map(&:to_policy), "allow2ban" => @bans.select(&:allow?).map(&:to_policy)
        }
      end

      # The gate this configuration decides by: the policy file's when one is
      # given, else the DSL's.
      def gate
        Ratekeeper::Gate.new(@policy ? @policy.to_s : to_policy)
      end

      private

      def responses_with(**changed)
        current = { status: @responses.status, blocked_status: @responses.blocked_status,
                    headers: @responses.headers, log_keys: @responses.log_keys? }
        Ratekeeper::Responses.new(**current, **changed)
      end
    end
  end
end
