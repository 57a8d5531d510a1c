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
  #   admin.history(limit: 20) # who changed what, when and why
  #
  # Limiter#admin gives one on a limiter's own store (the memory store too).
  # Every change is appended to the store's audit trail with +actor+ (who
  # makes it: the signed-in user of an admin page, the OS user of a script).
  class Admin
    # An admin for the store a URL names, with the limiters' +prefix+ and
    # +redis_module+ ("auto", "off" or "require"; nil: auto); its changes are
    # recorded as +actor+'s.
    def self.new(store: "memory://", prefix: "rk", redis_module: nil, actor: nil)
      _open(store.to_s, prefix.to_s, redis_module&.to_s, actor&.to_s)
    end

    # Blocks +target+ (a key, an IP address or a CIDR range) for +ttl+ seconds
    # (default one week), with a reason. Returns the entry as a Hash.
    # +key: true+ lists +target+ as an exact key even when it reads as an
    # address; +force: true+ allows a range wider than a /8 (IPv6: /32);
    # +scope+ blocks a key for the limiters (throttles) of that scope only;
    # +tag: true+ reads +target+ as a key's stored form (the :tag of a row of
    # top_denied or entries): the very key, hashed or not UTF-8.
    def block(target, ttl: nil, reason: "", now: nil, key: false, force: false, scope: nil, tag: false)
      _add("block", target, ttl, reason.to_s, now, key ? true : false, force ? true : false, scope&.to_s,
           tag ? true : false)
    end

    # Safelists +target+ (checks skip limiting) for +ttl+ seconds (default
    # one week); +tag: true+ reads it as a key's stored form.
    def safelist(target, ttl: nil, reason: "", now: nil, key: false, force: false, tag: false)
      _add("safe", target, ttl, reason.to_s, now, key ? true : false, force ? true : false, nil, tag ? true : false)
    end

    # Removes +target+ from the blocklist (+scope+: a key's ban in that
    # scope; +tag: true+: a key's stored form), saying why; true when it was on it.
    def unblock(target, key: false, scope: nil, reason: "", tag: false)
      _remove("block", target, key ? true : false, scope&.to_s, reason.to_s, tag ? true : false)
    end

    # Removes +target+ from the safelist (+tag: true+: a key's stored form),
    # saying why; true when it was on it.
    def unsafelist(target, key: false, reason: "", tag: false)
      _remove("safe", target, key ? true : false, nil, reason.to_s, tag ? true : false)
    end

    # The newest +limit+ changes operators made (1 to 1,000), newest first:
    # Hashes with :at (epoch seconds), :actor (nil when nobody was named),
    # :action ("block", "safelist", "unblock", "unsafelist", "tier",
    # "override" or "switches"), :target, :scope, :detail and :reason.
    def history(limit: 50)
      _history(Integer(limit))
    end

    # Who was limited over the last +window+ seconds (1 to 3600), by every
    # process on this store: {keys: [{scope:, key:, tag:, count:}] (+key+ as
    # text, +tag+ its stored form: block(tag, tag: true) acts on the very
    # key), addresses:
    # [{scope:, address:, count:}], networks: [{scope:, network:, count:}]
    # (an IPv4 /24, an IPv6 /64), each most denied first, per_minute: [{at:,
    # count:}] (oldest first), window:}. A process's denials reach the store
    # within its controls_refresh.
    def top_denied(window: 300)
      _top_denied(Integer(window))
    end

    # Every standing listing, tier and override: Hashes with :kind
    # ("safelist", "blocklist", "tier", "override"), :target, :tag (a key's
    # stored form; nil for an address or range), :network,
    # :expires_at (epoch seconds; nil for a tier or override), :detail and
    # :scope (the scope a key's ban holds in; nil: everywhere).
    def entries(now: nil)
      _entries(now)
    end

    # What is stored for +key+: {safelist:, blocklist:, tier:, override:,
    # address:, scope:, scope_blocklist:, leases:, now:}; +scope+ asks for the
    # key's ban and its leases ({id:, since:, lapse_at:}) in that scope;
    # +tag: true+ reads +key+ as a key's stored form.
    def inspect_key(key, now: nil, scope: nil, tag: false)
      _inspect(key, now, scope&.to_s, tag ? true : false)
    end

    # Releases +key+'s lease +lease_id+ in +scope+ (a limiter's scope; nil:
    # none), for a holder that hangs, saying why: true when it was held. The
    # release is recorded in the audit trail (+release+).
    def release_lease(key, lease_id, scope: nil, reason: "")
      _release_lease(key, lease_id.to_s, scope&.to_s, reason.to_s)
    end

    # What +key+ has used of each of +rules+ in +scope+, as a limiter of those
    # rules sees its log now, whatever its listings, tier or override: a
    # Decision (logging nothing). +tag: true+ reads +key+ as a key's stored form.
    def usage(key, rules, scope: nil, tag: false)
      _usage(key, rules, scope&.to_s, tag ? true : false)
    end

    # Stores +tier+ for +key+ (nil removes it), saying why.
    def set_tier(key, tier, reason: "")
      _set_tier(key, tier&.to_s, reason.to_s)
    end

    # Stores +rules+ as +key+'s own (nil restores the configured rules), saying why.
    def set_override(key, rules, reason: "")
      _set_override(key, rules, reason.to_s)
    end

    # Changes the switches given (nil leaves one as it is), saying why;
    # returns them all.
    def set_switches(enabled: nil, shadow: nil, multiplier: nil, reason: "")
      _set_switches(enabled.nil? ? nil : enabled == true, shadow.nil? ? nil : shadow == true, multiplier, reason.to_s)
    end
  end
end
