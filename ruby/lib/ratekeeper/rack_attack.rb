# frozen_string_literal: true

require "ipaddr"
require "ratekeeper"
require "ratekeeper/rack/middleware"
require "ratekeeper/testing"
require "ratekeeper/rack_attack/cache"
require "ratekeeper/rack_attack/rules"

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
  #
  # Its parts: the store (rack_attack/cache.rb, with rack-attack's errors)
  # and the throttles, lists and bans (rack_attack/rules.rb).
  class Attack
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

    # Distinct rates a throttle's limit and period procs may give (each is a tier of its throttle).
    MAX_RATES = 64

    # What the cache store is extended with: its #clear (an app's test
    # setup) forgets the counts, as it forgets rack-attack's, which are
    # entries of the store (see Attack.forget_on_clear).
    module ForgetOnClear
      # The store's own #clear, then Attack.changed!.
      def clear(*)
        result = super
        ::Rack::Attack.changed!
        result
      end
    end

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

      # rack-attack's counts are entries of the cache store, so
      # +Rack::Attack.cache.store.clear+ (an app's test setup) forgets them.
      # Here the store in use (the one given, else Rails.cache) is extended
      # with ForgetOnClear: its #clear also forgets what the process keeps
      # (changed!: the next request builds the gate afresh), which with a
      # MemoryStore are the counts, strikes and bans themselves (a memory
      # store of the gate's own), and with a RedisCacheStore the denials
      # cached in the process, its #clear emptying the database (FLUSHDB),
      # ratekeeper's keys with it. (One with a namespace deletes only that
      # namespace's entries: reset! forgets ratekeeper's.)
      def forget_on_clear(store)
        return if !store.respond_to?(:clear) || store.is_a?(ForgetOnClear) || store.frozen?

        store.extend(ForgetOnClear)
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
      # track with a limit) needs no store, and runs without one: a store
      # given that cannot be used fails only the rules that count in it, as
      # in rack-attack.
      def store_options(counting: !@throttles.empty? || @tracks.values.any?(&:last))
        forget_on_clear(cache.store || (defined?(::Rails) && ::Rails.respond_to?(:cache) && ::Rails.cache))
        options = { store: counting || (cache.store && cache.usable?) ? cache.url : "memory://" }
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
      verdict = Attack.gate(rates).decide(method: request.request_method,
                                          path: Ratekeeper::Gate._decoded_path(request.path_info),
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
