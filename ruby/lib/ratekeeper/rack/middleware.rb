# frozen_string_literal: true

require "json"
require "rack"
require "ratekeeper/rack/config"

module Ratekeeper
  module Rack
    # Counts a strike of the fail2ban or allow2ban entry +name+ of the policy
    # that the Middleware in front of this request applies, against the
    # request's client, as an app does after a failed login (in a
    # controller: +Ratekeeper::Rack.penalize(request.env, "logins")+); true
    # when the strike banned the client.
    def self.penalize(env, name)
      gate = env["ratekeeper.gate"] or
        raise ConfigurationError, "no Ratekeeper::Rack::Middleware is in front of this request"
      gate.penalize(name, peer: env["REMOTE_ADDR"].to_s, headers: env)
    end

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
        value = field(name)
        value = value.last if value.is_a?(Array) # a repeated field: the value Rack serves
        found = value.is_a?(String) && Ratekeeper.identity(value)
        found && "#{name}=#{found}"
      end

      # The gate reads a body field through +call+ (see #field): the request
      # is its own reader, with no block made for each request.
      def call(name)
        field(name)
      end

      # Field +name+ of a posted form or a JSON object body, as it came (what
      # a policy's identity:FIELD reads): a String, an Array of them (a
      # repeated urlencoded field: each is counted), nil when absent or not a
      # string, false when the request has a body this door does not parse
      # while the app may (the throttle then counts the client).
      def field(name)
        name = name.to_s
        type = media_type.to_s.downcase
        # the core's one cap for every door: a body too long, or without a
        # length, is not read (the throttle counts the client)
        length = Ratekeeper._readable_length(get_header("CONTENT_LENGTH"), get_header("HTTP_TRANSFER_ENCODING"))
        return false if length.nil?
        return nil if length.zero?

        value =
          if JSON_TYPES.include?(type) || type.end_with?("+json")
            json_body[name].to_s if json_body[name].is_a?(String) # a string, as every door reads JSON
          elsif type == "application/x-www-form-urlencoded"
            ::Rack::Utils.parse_query(raw_body)[name]
          else
            return false # multipart, or a type the app may parse itself
          end
        value.is_a?(Array) ? value.grep(String) : (value if value.is_a?(String))
      rescue ::Rack::Utils::ParameterTypeError, ::Rack::Utils::InvalidParameterError, EOFError
        false
      end

      # The media types Rails reads as JSON (any +json too).
      JSON_TYPES = ["application/json", "text/x-json", "application/jsonrequest"].freeze

      private

      def raw_body
        @raw_body ||= begin
          input = body
          input ? input.read.tap { input.rewind }.to_s : ""
        end
      end

      def json_body
        @json_body ||= begin
          raw = raw_body
          parsed = raw.empty? ? nil : JSON.parse(raw)
          parsed.is_a?(Hash) ? parsed : {}
        rescue JSON::ParserError
          {}
        end
      end
    end

    # Rack middleware: the core's gate at a Rack door. The DSL (or a policy
    # file: +policy: "policy.toml"+) says the policy; the gate decides each
    # request (exempt paths, safelists and blocklists, listed addresses,
    # fail2ban and allow2ban, then every throttle that applies, checked in
    # ONE round trip: each that admits the request counts it, and the first
    # denial, in throttle order, answers); this middleware reads the request
    # and renders the verdict: rate-limit headers on every limited
    # response, the core's 429 JSON answer on denial, its 403 when blocked.
    class Middleware
      attr_reader :config

      def initialize(app, config = nil, **options)
        @app = app
        @config = config || Config.new(**options)
        yield @config if block_given?
        @proxies = @config.proxies
        @gate = @config.gate
        @callables = @gate.callables || []
        # the request object the gate calls the policy's callables with and
        # reads a body field through: made for each request only when the
        # policy has either, else when a request is not simply passed on
        @asks_request = !@callables.empty? || @gate.reads_body?
        @names = (@config.throttles + @config.bans).to_h do |rule|
          [rule.respond_to?(:ban) ? rule.ban.name : Ratekeeper.scope_name(rule.name), rule.name]
        end
        @counts = Hash.new(0)
        @counts_lock = Mutex.new
      end

      # What the middleware decided so far: per throttle its limiter's stats
      # (allowed, denied, cached_denials, errors, fail_open, fail_closed,
      # peak_used), the requests blocked and safelisted, and the calls made to
      # the store the throttles share (attempts, failures, short_circuits).
      def stats
        counts = @counts_lock.synchronize { @counts.dup }
        { throttles: @gate.stats.transform_keys { |scope| name(scope) },
          blocked: counts[:blocked], safelisted: counts[:safelisted],
          store: @gate.store_stats }
      end

      # The reasons of a request simply passed on (when its verdict passes):
      # nothing reports it, so it needs no request object.
      PASSED_ON = %w[admitted exempt degraded].freeze

      def call(env)
        env["ratekeeper.gate"] = @gate # Ratekeeper::Rack.penalize's
        request = Request.new(env, @proxies) if @asks_request
        # Gate#decide's arguments, in its order (its method, the path: PATH_INFO
        # as the request spelled it, which the gate takes decoded, as at every
        # door; the host, the peer, the env, the query, the callables' context,
        # their list, the body's reader, no user, the cost of one)
        verdict = @gate._decide(env["REQUEST_METHOD"], Ratekeeper::Gate._decoded_path(env["PATH_INFO"].to_s),
                                env["HTTP_HOST"] || env["SERVER_NAME"].to_s, env["REMOTE_ADDR"].to_s, env,
                                env["QUERY_STRING"].to_s, request, @callables, request, nil, nil)
        decision = verdict.decision
        env["ratekeeper.decision"] = decision if decision
        reason = verdict.reason
        return passed(env, verdict) if PASSED_ON.include?(reason) && verdict.ending == "pass"

        request ||= Request.new(env, @proxies)
        case reason
        when "safelisted" then safelisted(request, verdict.safelist || "store", decision)
        when "blocked" then refused(request, verdict, "blocklist", verdict.blocklist || "store", decision)
        when "banned" then banned(request, verdict)
        when "shadowed" then shadowed(env, request, verdict)
        else
          # throttled, or a store failure that on_error denies
          return throttled(env, request, verdict) if verdict.ending == "deny"

          passed(env, verdict)
        end
      end

      private

      # A throttle's or ban's name in this middleware's DSL (its scope otherwise).
      def name(scope)
        @names.fetch(scope, scope)
      end

      def safelisted(request, rule, decision)
        count(:safelisted)
        instrument("safelist", request, rule, decision)
        @app.call(request.env)
      end

      # On to the app, with the rate-limit headers of the throttle that has
      # least left. When the verdict awaits the response's end (a slot the
      # request holds, a throttle that counts only some responses, or a
      # reservation of meters settled by the response's headers), the gate
      # is told when the server closes the body (after its last byte, a
      # streamed one's too, or when the client hung up), or at once when
      # the app raises (a request the app raises on stays counted).
      def passed(env, verdict)
        return with_pass_headers(@app.call(env), verdict) unless verdict.awaits_end?

        begin
          status, headers, body = @app.call(env)
        rescue Exception # rubocop:disable Lint/RescueException
          told(verdict, nil)
          raise
        end
        body = ::Rack::BodyProxy.new(body) { told(verdict, status.to_i, headers) }
        with_pass_headers([status, headers, body], verdict)
      end

      def with_pass_headers(response, verdict)
        status, headers, body = response
        [status, verdict.with_headers(headers), body]
      end

      def told(verdict, status, headers = nil)
        verdict.finish(status, headers)
      rescue Ratekeeper::Error => e
        Ratekeeper.logger.warn("ratekeeper: a response's end was not told (#{e.message})")
      end

      def refused(request, verdict, event, rule, decision = nil)
        count(:blocked)
        instrument(event, request, rule, decision)
        return @config.blocked_responder.call(request.env) if @config.blocked_responder

        rendered(verdict.answer)
      end

      # Fail2ban and allow2ban: the request struck (the client banned when
      # +banned?+) and is refused.
      def banned(request, verdict)
        rule = name(verdict.ban)
        instrument("ban", request, rule) if verdict.banned?
        refused(request, verdict, "fail2ban", rule)
      end

      # What shadow mode let through: a throttle's own (+shadow: true+),
      # logged and reported as "shadow", or a listed client or key under the
      # operator's shadow switch, reported as blocked; on to the app either way.
      def shadowed(env, request, verdict)
        decision = verdict.decision
        if decision&.blocked?
          count(:blocked)
          instrument("blocklist", request, "store", decision)
          return @app.call(env)
        end
        log(verdict)
        instrument("shadow", request, name(verdict.shadow || verdict.scope.to_s), decision)
        passed(env, verdict)
      end

      def log(verdict)
        Ratekeeper.logger.public_send(@config.log_level, verdict.log) if @config.log_level && verdict.log
      end

      def throttled(env, request, verdict)
        throttle = name(verdict.scope)
        log(verdict)
        env["ratekeeper.throttle"] = throttle
        instrument("throttle", request, throttle, verdict.decision)
        return @config.responder.call(env, verdict.decision) if @config.responder

        rendered(verdict.answer)
      end

      def count(what)
        @counts_lock.synchronize { @counts[what] += 1 }
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
