# frozen_string_literal: true

require "ipaddr"
require "uri"
require "ratekeeper"
require "ratekeeper/rack/middleware"
require "ratekeeper/testing"

module Rack
  # rack-attack's API on ratekeeper, for an app that removed the rack-attack
  # gem: +require "ratekeeper/rack_attack"+ and keep
  # config/initializers/rack_attack.rb as it is.
  #
  #   Rack::Attack.cache.store = ActiveSupport::Cache::RedisCacheStore.new(url: "redis://127.0.0.1:6379/0")
  #   Rack::Attack.throttle("req/ip", limit: 300, period: 5.minutes) { |req| req.ip }
  #   Rack::Attack.blocklist("fail2ban") do |req|
  #     Rack::Attack::Fail2Ban.filter("pentest-#{req.ip}", maxretry: 3, findtime: 600, bantime: 3600) do
  #       req.path.include?("/etc/passwd")
  #     end
  #   end
  #
  # The configuration builds one policy (Ratekeeper::Gate): the safelists
  # and blocklists, then every throttle whose block gives a discriminator,
  # each an exact sliding window checked in ONE round trip with the others
  # (a throttle "req/ip" is the quota of any ratekeeper door's throttle of
  # that name). What rack-attack's middleware tells the app is told the
  # same way: the rack.attack.* env keys, the responders, the
  # ActiveSupport notifications.
  class Attack
    # rack-attack's errors.
    class Error < StandardError; end
    # A cache store that cannot hold ratekeeper's windows.
    class MisconfiguredStoreError < Error; end
    # No cache store was given, and there is no Rails.cache to use.
    class MissingStoreError < Error; end

    # rack-attack's path normalizers: Rails' where it is loaded (a trailing
    # slash, a repeated one, are one path), else the path as it came.
    module FallbackPathNormalizer
      # The path as it came.
      def self.normalize_path(path)
        path
      end
    end

    PathNormalizer = defined?(::ActionDispatch::Journey::Router::Utils) ? ::ActionDispatch::Journey::Router::Utils : FallbackPathNormalizer

    # The request the blocks are given: reopen it to add helpers, as with rack-attack.
    class Request < ::Rack::Request
    end

    # Where the counts are kept: +store=+ takes a Redis-backed ActiveSupport
    # cache (RedisCacheStore), a Redis client or a ConnectionPool of them
    # (its Redis, TLS and password included, is the ratekeeper store), or a
    # MemoryStore (the process's memory). +prefix+ is ratekeeper's key prefix.
    class Cache
      attr_reader :store, :prefix

      def initialize
        @store = nil
        @url = "memory://"
        @prefix = nil
      end

      # A store ratekeeper cannot use is warned about here, as rack-attack
      # warns (in its words for a store without its cache methods), and
      # refused by the first request (MisconfiguredStoreError): nothing is
      # ever counted in it, nor let through uncounted.
      def store=(store)
        @refused = nil
        begin
          @url = Cache.url_of(store)
        rescue MisconfiguredStoreError => e
          @refused = e
          warn Cache.warning(store, e)
        end
        @store = store
        Attack.changed!
      end

      def prefix=(prefix)
        @prefix = prefix
        Attack.changed!
      end

      # The ratekeeper store URL the cache store names (Rails.cache's when
      # none was given).
      def url
        raise @refused if @refused
        return @url if @store

        rails = defined?(::Rails) && ::Rails.respond_to?(:cache) && ::Rails.cache
        raise MissingStoreError, "Rack::Attack.cache.store is not set: give a Redis (RedisCacheStore, a Redis " \
                                 "client or a ConnectionPool) or a MemoryStore" unless rails

        Cache.url_of(rails)
      end

      # Forgets every count and ban under the prefix (a Redis client's keys
      # are deleted; the memory store is replaced).
      def reset!
        redis = Cache.redis_of(@store)
        if redis
          pattern = "#{@prefix || Ratekeeper::DEFAULTS[:prefix]}:*"
          Cache.with(redis) { |r| r.scan_each(match: pattern) { |key| r.del(key) } }
        end
        Attack.changed!
      end

      # The store URL of what +store=+ is given.
      def self.url_of(store)
        return "memory://" if store.nil?

        name = store.class.name.to_s
        return "memory://" if name.end_with?("MemoryStore")

        redis = redis_of(store)
        raise MisconfiguredStoreError, "Rack::Attack.cache.store: #{name.empty? ? store.class.inspect : name} cannot " \
                                       "hold exact windows: give a Redis (RedisCacheStore, a Redis client or a " \
                                       "ConnectionPool) or a MemoryStore" unless redis

        with(redis) { |r| url_of_client(r) }
      end

      # What +store=+ warns of a store it cannot use: rack-attack's words for
      # one that is no Redis and lacks the cache methods rack-attack calls,
      # else the refusal's.
      def self.warning(store, refusal)
        missing = %i[read write delete increment].reject { |m| store.respond_to?(m) }.map { |m| "##{m}" }
        if missing.any? && !redis_of(store)
          return "[rack-attack] Configured store #{store.class.name} doesn't respond to #{missing.join(", ")}"
        end

        "[ratekeeper] #{refusal.message}; requests raise Rack::Attack::MisconfiguredStoreError"
      end

      # The Redis client (or pool) behind a cache store, or nil.
      def self.redis_of(store)
        return nil if store.nil?
        return store if store.class.name.to_s.start_with?("Redis", "ConnectionPool")
        return store.redis if store.respond_to?(:redis)

        nil
      end

      def self.with(redis, &block)
        redis.respond_to?(:with) && !redis.is_a?(::Redis) ? redis.with(&block) : block.call(redis)
      end

      # The store URL of a Redis client: its URL, or its host, port, db,
      # ACL user and password (escaped), TLS, and the CA file and
      # verification of its ssl_params as the URL's TLS parameters.
      def self.url_of_client(client)
        options = client._client.options
        url = options[:url] || begin
          scheme = options[:ssl] ? "rediss" : "redis"
          user, password = options.values_at(:username, :password).map { |v| v && URI.encode_www_form_component(v) }
          auth = password ? "#{user}:#{password}@" : ""
          "#{scheme}://#{auth}#{options[:host]}:#{options[:port]}/#{options[:db] || 0}"
        end
        tls = tls_query(options[:ssl_params] || {})
        tls.empty? ? url : "#{url}#{url.include?("?") ? "&" : "?"}#{URI.encode_www_form(tls)}"
      end

      # A client's ssl_params as the store URL's TLS parameters.
      def self.tls_query(ssl)
        if ssl[:cert] || ssl[:key]
          raise MisconfiguredStoreError, "Rack::Attack.cache.store: a client certificate given as ssl_params cert/key " \
                                         "cannot reach ratekeeper: give the store's URL with ssl_certfile and ssl_keyfile"
        end
        query = {}
        query["ssl_ca_certs"] = ssl[:ca_file] if ssl[:ca_file]
        query["ssl_cert_reqs"] = "none" if defined?(OpenSSL::SSL::VERIFY_NONE) && ssl[:verify_mode] == OpenSSL::SSL::VERIFY_NONE
        query
      end
    end

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

    # Distinct rates a throttle's limit and period procs may give (each is a tier of its throttle).
    MAX_RATES = 64

    @cache = Cache.new
    @lock = Mutex.new

    class << self
      attr_reader :throttles, :safelists, :blocklists, :tracks, :anonymous_safelists, :anonymous_blocklists,
                  :throttled_response, :blocklisted_response
      attr_accessor :enabled, :throttled_responder, :blocklisted_responder, :throttled_response_retry_after_header,
                    :notifier, :throttle_discriminator_normalizer

      # Where the counts are kept (see Cache).
      def cache
        @cache ||= Cache.new
      end

      # rack-attack 5's responder, taking the env (deprecated there too).
      def throttled_response=(responder)
        @throttled_response = responder
      end

      # rack-attack 5's responder, taking the env (deprecated there too).
      def blocklisted_response=(responder)
        @blocklisted_response = responder
      end

      # Limits requests per discriminator (see Throttle).
      def throttle(name, options, &block)
        @throttles[name.to_s] = Throttle.new(name, limit: options.fetch(:limit), period: options.fetch(:period), &block)
        changed!
      end

      # Requests the block is true for skip every throttle and blocklist
      # (one without a name is kept among the anonymous ones).
      def safelist(name = nil, &block)
        check = Check.new(name&.to_s, block)
        name ? @safelists[name.to_s] = check : @anonymous_safelists << check
        changed!
      end

      # Requests the block is true for are refused (the blocklisted
      # responder; one without a name is kept among the anonymous ones).
      def blocklist(name = nil, &block)
        check = Check.new(name&.to_s, block)
        name ? @blocklists[name.to_s] = check : @anonymous_blocklists << check
        changed!
      end

      # Requests from the address or range are safelisted.
      def safelist_ip(range)
        net = IPAddr.new(range)
        safelist("safelist_ip #{range}") { |req| within?(net, req.ip) }
      end

      # Requests from the address or range are refused.
      def blocklist_ip(range)
        net = IPAddr.new(range)
        blocklist("blocklist_ip #{range}") { |req| within?(net, req.ip) }
      end

      # Requests the block gives a discriminator for are reported
      # (track.rack_attack); with +limit+ and +period+, only those over it.
      def track(name, options = {}, &block)
        limit = options[:limit]
        @tracks[name.to_s] = [block, limit && Throttle.new("track:#{name}", limit: limit, period: options.fetch(:period),
                                                                              &block)]
        changed!
      end

      # Forgets every count and ban (see Cache#reset!).
      def reset!
        cache.reset!
      end

      # Forgets the throttles, lists, tracks and responders.
      def clear_configuration
        @throttles = {}
        @safelists = {}
        @blocklists = {}
        @anonymous_safelists = []
        @anonymous_blocklists = []
        @tracks = {}
        @throttled_response_retry_after_header = false
        @throttled_responder = default_throttled_responder
        @blocklisted_responder = ->(_request) { [403, { "content-type" => "text/plain" }, ["Forbidden\n"]] }
        @throttled_response = nil
        @blocklisted_response = nil
        changed!
      end

      # rack-attack 5's name of clear_configuration.
      def clear!
        clear_configuration
      end

      # Says that the configuration changed: the next request builds the policy again.
      def changed!
        @lock.synchronize do
          @gate = nil
          @strikes = nil
          @track_limiters = {}
        end
      end

      # Under Timecop (an app's tests), the clock of every check is
      # Timecop's, as rack-attack's windows follow Time.now: each request
      # freezes ratekeeper's test clock (Ratekeeper::Testing) at Time.now,
      # and the real clock is back once Timecop returns.
      def follow_timecop
        return unless defined?(::Timecop)

        if ::Timecop.top_stack_item
          Ratekeeper::Testing.freeze_time(Time.now.to_f)
          @timecop = true
        elsif @timecop
          Ratekeeper::Testing.unfreeze
          @timecop = false
        end
      end

      # The limiter counting a track's requests at +limit+ per +ms+.
      def track_limiter(throttle, limit, ms)
        @lock.synchronize do
          @track_limiters[[throttle.name, limit, ms]] ||=
            Ratekeeper::Limiter.new("#{limit}/#{ms}ms", **store_options(counting: true),
                                    scope: Ratekeeper.scope_name(throttle.name))
        end
      end

      # The limiter Fail2Ban and Allow2Ban count strikes with (its rules unused).
      def strikes
        @lock.synchronize do
          @strikes ||= Ratekeeper::Limiter.new("1/second", **store_options(counting: true), scope: "rack-attack")
        end
      end

      # The gate of the current configuration, with a tier for each rate a
      # dynamic throttle gave so far (built again when a new one comes).
      def gate(rates = {})
        @lock.synchronize do
          fresh = rates.any? { |name, rate| !@rates[name].include?(rate) }
          rates.each do |name, rate|
            next if @rates[name].include?(rate) || @rates[name].size < MAX_RATES

            raise Error, "throttle #{name.inspect}: its limit and period procs gave more than #{MAX_RATES} rates"
          end
          rates.each { |name, rate| @rates[name] << rate } if fresh
          @gate = nil if fresh
          @gate ||= Ratekeeper::Gate.new(policy)
        end
      end

      # What the configuration says, as a ratekeeper policy (the anonymous
      # lists after the named ones, as rack-attack checks them).
      def policy
        {
          "store" => store_options.to_h { |k, v| [k == :store ? "url" : k.to_s, v] },
          "safelist" => list_policy(all_safelists, "safelist"),
          "blocklist" => list_policy(all_blocklists, "blocklist"),
          "throttle" => @throttles.values.map { |t| throttle_policy(t) },
          "log_denials" => false
        }
      end

      # The safelist entries in the policy's order.
      def all_safelists
        @safelists.values + @anonymous_safelists
      end

      # The blocklist entries in the policy's order.
      def all_blocklists
        @blocklists.values + @anonymous_blocklists
      end

      # The names of the scopes, back to the throttles'.
      def throttle_named(scope)
        @throttles.values.find { |t| Ratekeeper.scope_name(t.name) == scope }
      end

      # The default answers, rack-attack's.
      def default_throttled_responder
        ->(request) { throttled_default(request) }
      end

      private

      def throttled_default(request)
        headers = { "content-type" => "text/plain" }
        data = request.env["rack.attack.match_data"] || {}
        if throttled_response_retry_after_header && data[:retry_after]
          headers["retry-after"] = data[:retry_after].ceil.to_s
        end
        [429, headers, ["Retry later\n"]]
      end

      # The store options; a policy that counts nothing (no throttle, no
      # track with a limit) needs no store, and runs without one.
      def store_options(counting: !@throttles.empty? || @tracks.values.any?(&:last))
        options = { store: counting || cache.store ? cache.url : "memory://" }
        options[:prefix] = cache.prefix if cache.prefix
        options
      end

      def list_policy(checks, kind)
        checks.each_with_index.map { |c, i| { "name" => "#{kind} #{i}", "match" => c.block } }
      end

      def throttle_policy(throttle)
        entry = { "scope" => Ratekeeper.scope_name(throttle.name),
                  "key" => ->(request) { discriminator(throttle, request) } }
        if throttle.dynamic?
          tiers = @rates[throttle.name].to_h { |limit, ms| ["r#{limit}-#{ms}", "#{limit}/#{ms}ms"] }
          first = tiers.values.first || "1/1s"
          entry.merge("rules" => first, "tiers" => tiers,
                      "tier" => ->(request) { request.env["rack.attack.rates"]&.dig(throttle.name)&.then { |l, ms| "r#{l}-#{ms}" } })
        else
          limit, ms = throttle.rate(nil)
          entry.merge("rules" => "#{limit}/#{ms}ms")
        end
      end

      def discriminator(throttle, request)
        value = throttle.block.call(request)
        return nil if value.nil? || value == false

        normalize = throttle_discriminator_normalizer
        normalize ? normalize.call(value) : value.to_s
      end

      def within?(net, ip)
        ip && net.include?(IPAddr.new(ip))
      rescue IPAddr::InvalidAddressError
        false
      end
    end

    @rates = Hash.new { |h, name| h[name] = [] }
    clear_configuration
    @enabled = true
    @notifier = ::ActiveSupport::Notifications if defined?(::ActiveSupport::Notifications)
    @throttle_discriminator_normalizer = ->(discriminator) { discriminator.to_s.strip.downcase }

    def initialize(app)
      @app = app
    end

    def call(env)
      return @app.call(env) unless Attack.enabled && !env["rack.attack.called"]

      env["rack.attack.called"] = true
      Attack.follow_timecop
      env["PATH_INFO"] = PathNormalizer.normalize_path(env["PATH_INFO"])
      request = Attack::Request.new(env)
      rates = dynamic_rates(request)
      verdict = Attack.gate(rates).decide(method: request.request_method, path: request.path_info.to_s,
                                          host: env["HTTP_HOST"] || env["SERVER_NAME"].to_s,
                                          peer: env["REMOTE_ADDR"].to_s, headers: env,
                                          query: env["QUERY_STRING"].to_s, context: request)
      throttle_data(env, verdict)
      if verdict.safelist
        matched(request, entry_name(Attack.all_safelists, verdict.safelist), :safelist)
        @app.call(env)
      elsif verdict.blocklist || verdict.ending == "block"
        matched(request, verdict.blocklist ? entry_name(Attack.all_blocklists, verdict.blocklist) : "ratekeeper", :blocklist)
        Attack.blocklisted_response ? Attack.blocklisted_response.call(env) : Attack.blocklisted_responder.call(request)
      elsif verdict.ending == "deny"
        throttled(request, verdict)
      else
        tracked(request)
        @app.call(env)
      end
    end

    private

    # The name a safelist or blocklist entry was given (nil: anonymous), from its policy name.
    def entry_name(checks, policy_name)
      checks[policy_name.split.last.to_i]&.name
    end

    # The rates of the throttles whose limit or period is a callable, for this request.
    def dynamic_rates(request)
      rates = Attack.throttles.values.select(&:dynamic?).to_h { |t| [t.name, t.rate(request)] }
      request.env["rack.attack.rates"] = rates unless rates.empty?
      rates
    end

    # rack.attack.throttle_data: what each throttle checked holds.
    def throttle_data(env, verdict)
      verdict.checked.each do |scope, key, decision|
        throttle = Attack.throttle_named(scope)
        next unless throttle

        (env["rack.attack.throttle_data"] ||= {})[throttle.name] = data(key, decision)
      end
    end

    def data(key, decision)
      { discriminator: key, count: decision.limit - decision.remaining + (decision.allowed? ? 0 : 1),
        period: decision.window, limit: decision.limit, epoch_time: decision.now.to_i,
        retry_after: decision.allowed? ? nil : decision.retry_after }
    end

    def throttled(request, verdict)
      env = request.env
      throttle = Attack.throttle_named(verdict.scope)
      name = throttle ? throttle.name : verdict.scope
      data = env.dig("rack.attack.throttle_data", name) || {}
      env["rack.attack.match_discriminator"] = data[:discriminator]
      env["rack.attack.match_data"] = data
      matched(request, name, :throttle)
      Attack.throttled_response ? Attack.throttled_response.call(env) : Attack.throttled_responder.call(request)
    end

    def tracked(request)
      Attack.tracks.each do |name, (block, limit)|
        value = block.call(request)
        next if value.nil? || value == false
        next if limit && !over?(limit, value, request)

        request.env["rack.attack.match_discriminator"] = value.to_s
        matched(request, name, :track)
      end
    end

    # Whether a track with a limit is over it (its count is kept as a throttle's).
    def over?(throttle, value, request)
      !Attack.track_limiter(throttle, *throttle.rate(request)).check(value.to_s).allowed?
    end

    # Tells the env and the notifier (the event, then rack-attack 5's "rack.attack") what matched.
    def matched(request, name, type)
      request.env["rack.attack.matched"] = name
      request.env["rack.attack.match_type"] = type
      notifier = Attack.notifier
      return unless notifier

      notifier.instrument("#{type}.rack_attack", request: request)
      notifier.instrument("rack.attack", request: request)
    end
  end
end

if defined?(Rails::Railtie)
  module Rack
    class Attack
      # Inserts the middleware, as rack-attack's Railtie does.
      class Railtie < ::Rails::Railtie
        initializer "rack-attack.middleware" do |app|
          app.middleware.use(Rack::Attack)
        end
      end
    end
  end
elsif defined?(ActiveSupport.on_load)
  # Rails loaded after this file: each application class gets the middleware
  # as it is defined.
  ActiveSupport.on_load(:before_configuration) { config.middleware.use(Rack::Attack) }
end
