# frozen_string_literal: true

require "rack"
require "ratekeeper/rack/config"

module Ratekeeper
  module Rack
    # A Rack request that knows its client IP by the configured trusted proxies.
    class Request < ::Rack::Request
      def initialize(env, proxies)
        super(env)
        @proxies = proxies
      end

      # The client's IP: X-Forwarded-For counts only when REMOTE_ADDR is a trusted proxy.
      def client_ip
        @client_ip ||= @proxies.client_ip(get_header("REMOTE_ADDR").to_s, get_header("HTTP_X_FORWARDED_FOR"))
      end
    end

    # Rack middleware: safelists, blocklists and throttles, with rate-limit
    # headers on every limited response and a 429 JSON answer on denial.
    #
    # A request runs through the throttles in order; the first denial answers
    # it (later throttles are not charged). Each throttle costs one Redis
    # round trip.
    class Middleware
      attr_reader :config

      def initialize(app, config = nil, **options)
        @app = app
        @config = config || Config.new(**options)
        yield @config if block_given?
        @proxies = TrustedProxies.new(@config.trusted_proxies)
        base = Limiter.new("1/second", store: @config.store, prefix: @config.prefix, on_error: @config.on_error,
                                       timeout: @config.timeout, connect_timeout: @config.connect_timeout,
                                       pool_size: @config.pool_size)
        @throttles = @config.throttles.map do |t|
          t.dup.tap { |copy| copy.limiter = base.with_rules(t.rules) }
        end
      end

      def call(env)
        return @app.call(env) unless @config.enabled

        request = Request.new(env, @proxies)
        path = request.path_info.to_s
        return @app.call(env) if @config.exempt_paths.any? { |prefix| path.start_with?(prefix) }

        if (rule = @config.safelists.find { |s| s.block.call(request) })
          instrument("safelist", request, rule.name)
          return @app.call(env)
        end
        if (rule = @config.blocklists.find { |b| b.block.call(request) })
          instrument("blocklist", request, rule.name)
          return blocked(env)
        end

        shown = nil
        @throttles.each do |throttle|
          decision = check(throttle, request, path)
          next if decision.nil?

          unless decision.allowed?
            env["ratekeeper.decision"] = decision
            env["ratekeeper.throttle"] = throttle.name
            instrument("throttle", request, throttle.name, decision)
            return denied(env, decision)
          end
          shown = decision if shown.nil? || decision.remaining < shown.remaining
        end
        env["ratekeeper.decision"] = shown if shown
        status, headers, body = @app.call(env)
        [status, shown ? with_headers(headers, shown.headers) : headers, body]
      end

      private

      def check(throttle, request, path)
        return nil if throttle.methods && !throttle.methods.include?(request.request_method)
        return nil if throttle.paths && throttle.paths.none? { |prefix| path.start_with?(prefix) }

        key = throttle.key ? throttle.key.call(request) : request.client_ip
        return nil if key.nil?

        key = key.to_s
        throttle.limiter.check("#{throttle.name}:#{key}".b)
      end

      def with_headers(headers, extra)
        out = headers.dup
        extra.each { |name, value| out[name] = value unless out.key?(name) }
        out
      end

      def denied(env, decision)
        return @config.responder.call(env, decision) if @config.responder

        body = decision.denial_body
        headers = decision.denial_headers
        headers["Content-Length"] = body.bytesize.to_s
        [@config.status, headers, [body]]
      end

      def blocked(env)
        return @config.blocked_responder.call(env) if @config.blocked_responder

        body = JSON.generate({ "error" => "blocked" })
        [@config.blocked_status, { "Content-Type" => "application/json", "Content-Length" => body.bytesize.to_s }, [body]]
      end

      def instrument(event, request, name, decision = nil)
        return unless defined?(ActiveSupport::Notifications)

        ActiveSupport::Notifications.instrument("#{event}.ratekeeper",
                                                request: request, name: name, decision: decision)
      end
    end
  end
end
