# frozen_string_literal: true

module Ratekeeper
  # What operators change while the application runs, and read back: safelist
  # and blocklist entries (keys, IP addresses, CIDR ranges) with a TTL and a
  # reason, a key's tier or override, and the global switches. The native
  # half is in ext/ratekeeper (admin.rs); every rule of it lives in the core.
  #
  #   admin = Ratekeeper::Admin.new(store: "redis://127.0.0.1:6379/0")
  #   admin.block("203.0.113.7", ttl: 3600, reason: "scanner")
  #   admin.set_override("customer:acme", "100/second; 100000/day")
  #   admin.set_switches(shadow: true)
  #
  # Limiter#admin gives one on a limiter's own store (the memory store too).
  class Admin
    # An admin for the store a URL names, with the limiters' +prefix+ and
    # +redis_module+ ("auto", "off" or "require"; nil: auto).
    def self.new(store: "memory://", prefix: "rk", redis_module: nil)
      _open(store.to_s, prefix.to_s, redis_module&.to_s)
    end

    # Blocks +target+ (a key, an IP address or a CIDR range) for +ttl+ seconds
    # (default one week), with a reason. Returns the entry as a Hash.
    # +key: true+ lists +target+ as an exact key even when it reads as an
    # address; +force: true+ allows a range wider than a /8 (IPv6: /32);
    # +scope+ blocks a key for the limiters (throttles) of that scope only.
    def block(target, ttl: nil, reason: "", now: nil, key: false, force: false, scope: nil)
      _add("block", target, ttl, reason.to_s, now, key ? true : false, force ? true : false, scope&.to_s)
    end

    # Safelists +target+ (checks skip limiting) for +ttl+ seconds (default one week).
    def safelist(target, ttl: nil, reason: "", now: nil, key: false, force: false)
      _add("safe", target, ttl, reason.to_s, now, key ? true : false, force ? true : false, nil)
    end

    # Removes +target+ from the blocklist (+scope+: a key's ban in that
    # scope); true when it was on it.
    def unblock(target, key: false, scope: nil)
      _remove("block", target, key ? true : false, scope&.to_s)
    end

    # Removes +target+ from the safelist; true when it was on it.
    def unsafelist(target, key: false)
      _remove("safe", target, key ? true : false, nil)
    end

    # Every standing listing, tier and override: Hashes with :kind
    # ("safelist", "blocklist", "tier", "override"), :target, :network,
    # :expires_at (epoch seconds; nil for a tier or override), :detail and
    # :scope (the scope a key's ban holds in; nil: everywhere).
    def entries(now: nil)
      _entries(now)
    end

    # What is stored for +key+: {safelist:, blocklist:, tier:, override:,
    # address:, scope:, scope_blocklist:, now:}; +scope+ asks for the key's
    # ban in that scope.
    def inspect_key(key, now: nil, scope: nil)
      _inspect(key, now, scope&.to_s)
    end

    # Stores +tier+ for +key+ (nil removes it).
    def set_tier(key, tier)
      _set_tier(key, tier&.to_s)
    end

    # Stores +rules+ as +key+'s own (nil restores the configured rules).
    def set_override(key, rules)
      _set_override(key, rules)
    end

    # Changes the switches given (nil leaves one as it is); returns them all.
    def set_switches(enabled: nil, shadow: nil, multiplier: nil)
      _set_switches(enabled.nil? ? nil : enabled == true, shadow.nil? ? nil : shadow == true, multiplier)
    end
  end
end
