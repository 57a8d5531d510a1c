# frozen_string_literal: true

require "json"
require "rack"
require "ratekeeper/rack/config"

module Ratekeeper
  module Rack
    # A Rack request that knows its client by the configured trusted proxies
    # and client prefixes.
    class Request < ::Rack::Request
      def initialize(env, proxies)
        super(env)
        @proxies = proxies
      end

      # The client's IP: X-Forwarded-For counts only when REMOTE_ADDR is a trusted proxy.
      def client_ip
        @client_ip ||= @proxies.client_ip(get_header("REMOTE_ADDR").to_s, get_header("HTTP_X_FORWARDED_FOR"))
      end

      # The client as throttles keyed by IP and address bans name it: the
      # client IP's network by the configured prefixes (an IPv6 client as its
      # /64: every address it rotates through is the same client).
      def client_key
        @client_key ||= @proxies.client_key(get_header("REMOTE_ADDR").to_s, get_header("HTTP_X_FORWARDED_FOR"))
      end

      # Field +name+ of a posted form or a JSON object body that names a
      # person (an e-mail address, a user name), trimmed and lower-cased
      # (Ratekeeper.identity), as "name=value" ("email=alice@example.com":
      # no address, "ip:" or "user:" key can equal it, so a fail2ban ban of
      # what a client typed never bans an address or a user); nil when absent
      # or blank, so a request without it is not limited by the throttle
      # rather than sharing one key.
      def identity(name)
        value = form_data? || get? ? params[name.to_s] : nil
        value = json_body[name.to_s] if value.nil? && media_type == "application/json"
        found = value.is_a?(String) ? Ratekeeper.identity(value) : nil
        found && "#{name}=#{found}"
      rescue ::Rack::Utils::ParameterTypeError, ::Rack::Utils::InvalidParameterError, EOFError
        nil
      end

      private

      def json_body
        @json_body ||= begin
          input = body
          raw = input ? input.read.tap { input.rewind } : ""
          parsed = raw.empty? ? nil : JSON.parse(raw)
          parsed.is_a?(Hash) ? parsed : {}
        rescue JSON::ParserError
          {}
        end
      end
    end

    # Rack middleware: safelists, blocklists and throttles, with rate-limit
    # headers on every limited response and a 429 JSON answer on denial,
    # every answer rendered by the core (Ratekeeper::Responses).
    #
    # All throttles that apply to a request are checked in ONE Redis round
    # trip (a pipeline; each atomically on its own); each one that admits the
    # request counts it, and the first denial, in throttle order, answers.
    class Middleware
      attr_reader :config

      def initialize(app, config = nil, **options)
        @app = app
        @config = config || Config.new(**options)
        yield @config if block_given?
        @proxies = @config.proxies
        @responses = @config.responses
        @base = Limiter.new("1/second", **@config.limiter_options)
        @throttles = @config.throttles.map { |throttle| throttle.bind(@base) }
        @counts = Hash.new(0)
        @counts_lock = Mutex.new
      end

      # What the middleware decided so far: per throttle its limiter's stats
      # (allowed, denied, cached_denials, errors, fail_open, fail_closed,
      # peak_used), the requests blocked and safelisted, and the calls made to
      # the store the throttles share (attempts, failures, short_circuits).
      def stats
        counts = @counts_lock.synchronize { @counts.dup }
        { throttles: @throttles.to_h { |t| [t.name, t.limiter.stats] },
          blocked: counts[:blocked], safelisted: counts[:safelisted],
          store: @base.store_stats }
      end

      def call(env)
        return @app.call(env) unless @config.enabled

        request = Request.new(env, @proxies)
        path = request.path_info.to_s
        return @app.call(env) if @config.exempt_paths.any? { |prefix| path.start_with?(prefix) }

        if (rule = @config.safelists.find { |s| s.matched_by?(request) })
          count(:safelisted)
          instrument("safelist", request, rule.name)
          return @app.call(env)
        end
        if (rule = @config.blocklists.find { |b| b.matched_by?(request) })
          count(:blocked)
          instrument("blocklist", request, rule.name)
          return blocked(env)
        end
        # addresses and ranges listed in the store (held in-process: no round trip)
        if (listed = @base.screen(request.client_ip))
          env["ratekeeper.decision"] = listed
          return listed_answer(env, request, listed) || @app.call(env)
        end
        if (banned = strike(request))
          return banned
        end

        matched = @throttles.filter_map do |throttle|
          key = throttle.key_for(request)
          [throttle, key] unless key.nil?
        end
        shown = nil
        items = matched.map { |t, key| [t.limiter, key.b, 1, t.tier_for(request)] }
        decisions = matched.empty? ? [] : Ratekeeper.check_all(items)
        matched.zip(decisions).each do |(throttle, key), decision|
          if decision.blocked? || decision.safelisted?
            env["ratekeeper.decision"] = decision
            return listed_answer(env, request, decision) || @app.call(env)
          end
          unless decision.allowed?
            log_denial(throttle.name, key, decision, request)
            env["ratekeeper.decision"] = decision
            env["ratekeeper.throttle"] = throttle.name
            instrument("throttle", request, throttle.name, decision)
            return denied(env, decision)
          end
          shown = decision if shown.nil? || decision.remaining < shown.remaining
        end
        env["ratekeeper.decision"] = shown if shown
        status, headers, body = @app.call(env)
        [status, shown ? with_headers(headers, @responses.pass_headers(shown)) : headers, body]
      end

      private

      # The answer to a listed request: 403 when blocked (not in shadow
      # mode), nil to let it through (safelisted, or a shadowed block).
      def listed_answer(env, request, decision)
        if decision.safelisted?
          count(:safelisted)
          instrument("safelist", request, "store", decision)
          return nil
        end
        count(:blocked)
        instrument("blocklist", request, "store", decision)
        decision.allowed? ? nil : blocked(env)
      end

      # Fail2ban and allow2ban: a request a ban matches counts a strike
      # against the client (its IP's network: an IPv6 client's /64). Returns a 403 for a fail2ban request (the bad
      # request itself is refused) and for the strike that bans, else nil.
      def strike(request)
        @config.bans.each do |rule|
          next unless rule.matched_by?(request)

          banned = @base.penalize(ip: request.client_key, ban: rule.ban)
          instrument("ban", request, rule.name) if banned
          next if rule.allow? && !banned

          count(:blocked)
          instrument("fail2ban", request, rule.name)
          return blocked(request.env)
        end
        nil
      end

      def count(what)
        @counts_lock.synchronize { @counts[what] += 1 }
      end

      # One logfmt line per denial on Ratekeeper.logger (the core writes it;
      # the key hashed unless log_keys).
      def log_denial(scope, key, decision, request)
        return if @config.log_level.nil?

        text, = @responses.denial_log(decision, scope, key, method: request.request_method, path: request.path)
        Ratekeeper.logger.public_send(@config.log_level, text)
      end

      def with_headers(headers, extra)
        out = headers.dup
        extra.each { |name, value| out[name] = value unless out.key?(name) }
        out
      end

      def denied(env, decision)
        return @config.responder.call(env, decision) if @config.responder

        rendered(@responses.answer(decision))
      end

      def blocked(env)
        return @config.blocked_responder.call(env) if @config.blocked_responder

        rendered(@responses.blocked)
      end

      def rendered(answer)
        [answer.status, answer.headers, [answer.body]]
      end

      def instrument(event, request, name, decision = nil)
        return unless defined?(ActiveSupport::Notifications)

        ActiveSupport::Notifications.instrument("#{event}.ratekeeper",
                                                request: request, name: name, decision: decision)
      end
    end
  end
end
