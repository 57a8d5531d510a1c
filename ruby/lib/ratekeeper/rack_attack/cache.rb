# frozen_string_literal: true

require "uri"

module Rack
  # (rack-attack's API on ratekeeper: see ratekeeper/rack_attack.rb)
  class Attack
    # rack-attack's errors.
    class Error < StandardError; end
    # A cache store that cannot hold ratekeeper's windows.
    class MisconfiguredStoreError < Error; end
    # No cache store was given, and there is no Rails.cache to use.
    class MissingStoreError < Error; end

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

      # Whether the cache store given can hold ratekeeper's windows (#url
      # raises MisconfiguredStoreError for one that cannot).
      def usable?
        @refused.nil?
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
  end
end
