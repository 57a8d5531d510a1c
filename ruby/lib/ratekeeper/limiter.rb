# frozen_string_literal: true

module Ratekeeper
  # Checks keys against a rule set on a store. The native half (converting,
  # releasing the GVL, calling the core) is in ext/ratekeeper; this half takes
  # Ruby keyword arguments and passes them on.
  class Limiter
    # Limiter.new(rules, store: "memory://", **options)
    #
    # rules: "1/second; 20/minute", a Ratekeeper::Rule, or an Array of rule
    # Strings, Rules and [limit, window_seconds] pairs. The options and their
    # defaults are Ratekeeper::DEFAULTS (from the core, as docs/ruby.md lists them);
    # each is checked by the core, and an unknown one is a ConfigurationError.
    def self.new(rules, **options)
      _new(rules, options)
    end

    # Checks +key+ (a String, binary or not; a Symbol is taken by name) for
    # +cost+ units at +now+ (seconds; the store's clock when nil), logging them
    # when every rule admits them. +tier+ names one of the limiter's tiers (a
    # tier stored for the key wins); +ip+ is the client address, matched
    # against listed addresses. Returns a Decision.
    def check(key, cost: 1, now: nil, tier: nil, ip: nil)
      _check(Limiter.key_text(key), cost, now, tier, ip)
    end

    # Reserves +cost+ units, an estimate of what some work will cost (the
    # tokens a call may use): a check that, when admitted, holds them until
    # the Reservation is settled to what the work cost
    # (+reservation.settle(actual)+; never settled, it keeps the estimate).
    # With a block, yields the reservation when admitted and returns the
    # block's value (a refused one raises Ratekeeper::RateLimitExceeded, with
    # #decision); without one, returns the Reservation.
    # +wait+ true waits for the reservation as #acquire waits for a check
    # (at most +timeout+ seconds; nil: as long as it takes).
    def reserve(key, cost: 1, now: nil, tier: nil, ip: nil, wait: false, timeout: nil)
      reservation = _reserve(Limiter.key_text(key), cost, now, tier, ip, wait, timeout)
      return reservation unless block_given?

      refusal = reservation._refusal
      raise RateLimitExceeded.new(refusal, reservation.decision) if refusal

      yield reservation
    end

    # Holds a slot of +key+ under the limiter's in-flight rule ("10
    # concurrent"): when a slot is free and every rate admits +cost+, logs
    # it and takes a lease that lapses after +lease+ seconds (the limiter's,
    # 60 by default) unless released first. With a block, yields the Lease
    # when admitted, releases it when the block ends (an exception
    # included) and returns the block's value (a refused hold raises
    # Ratekeeper::RateLimitExceeded, with #decision); without one, returns
    # the Lease (release it with Lease#release). +wait+ true waits for a slot
    # (at most +timeout+ seconds; nil: as long as it takes), trying again
    # when one is released in this process, when the soonest lease lapses,
    # and at least every 0.1 s.
    def hold(key, cost: 1, now: nil, lease: nil, wait: false, timeout: nil)
      held = _hold(Limiter.key_text(key), cost, now, lease, wait, timeout)
      return held unless block_given?

      refusal = held._refusal
      raise RateLimitExceeded.new(refusal, held.decision) if refusal

      begin
        yield held
      ensure
        held.release
      end
    end

    # The live leases of +key+: [id, lapse time (seconds since the epoch)]
    # pairs, for an operator.
    def leases(key)
      _leases(Limiter.key_text(key))
    end

    # What a check of +cost+ would decide now, without logging anything.
    def peek(key, cost: 1, now: nil, tier: nil, ip: nil)
      _peek(Limiter.key_text(key), cost, now, tier, ip)
    end

    # Counts one fail2ban strike against +key+ (a bad request, a failed
    # login), or against the client address +ip+ (what a middleware saw): the
    # strike that makes +maxretry+ within +findtime+ seconds blocks that exact
    # key, or that address, for +bantime+ seconds. The parameters come as
    # +ban+ (a Ratekeeper::Fail2Ban) or one by one (each not given takes its
    # default). Returns true when this strike banned it. A store failure
    # follows on_error.
    def penalize(key = nil, ip: nil, ban: nil, maxretry: nil, findtime: nil, bantime: nil, name: nil, now: nil)
      _penalize(key && Limiter.key_text(key), ip, ban, maxretry, Ratekeeper.seconds(findtime),
                Ratekeeper.seconds(bantime), name, now)
    end

    # Waits until a check of +key+ is admitted and returns its Decision: each
    # denial's exact retry_after is slept (with a little jitter), without the
    # GVL. Raises Ratekeeper::RateLimitExceeded (with #decision) when the next
    # wait would end past +timeout+ seconds (nil: no limit), and at once when
    # the cost can never pass.
    def acquire(key, cost: 1, timeout: nil, tier: nil, ip: nil)
      decision, refusal = _acquire(Limiter.key_text(key), cost, timeout, tier, ip)
      raise RateLimitExceeded.new(refusal, decision) if refusal

      decision
    end

    # Runs the block within the limit for +key+: +wait+ true waits for a slot
    # as long as it takes, a number waits at most that many seconds, false
    # checks once; a call with no slot raises Ratekeeper::RateLimitExceeded.
    # With an in-flight rule, the block holds a slot for its whole run (#hold),
    # released when it ends. Returns the block's value.
    def within_limit(key, cost: 1, wait: true, &block)
      timeout = if wait == true then nil elsif wait then wait else 0 end # no wait: a timeout of 0
      return hold(key, cost: cost, wait: wait != false, timeout: timeout, &block) if in_flight

      acquire(key, cost: cost, timeout: timeout)
      yield
    end

    # Checks several keys against these rules in one Redis round trip (a
    # pipeline); each key is checked atomically on its own. Returns Decisions.
    def check_many(keys, cost: 1, now: nil)
      raise TypeError, "keys must be an Array, not #{keys.class}" unless keys.is_a?(Array)

      _check_many(keys.map { |key| Limiter.key_text(key) }, cost, now)
    end

    # The admin interface to this limiter's store (its Redis or its memory),
    # its changes recorded in the audit trail as +actor+'s.
    def admin(actor: nil)
      _admin(actor&.to_s)
    end

    # Forgets everything logged for +key+ (and a denial remembered for it here).
    def reset(key)
      _reset(Limiter.key_text(key))
    end

    # A limiter for other rules on the same store (its Redis pool or memory),
    # with its own +scope+ (logs kept apart) and +tiers+.
    def with_rules(rules, scope: nil, tiers: nil)
      _with_rules(rules, { scope: scope, tiers: tiers }.compact)
    end

    # A key as the native layer takes it: a Symbol by its name.
    def self.key_text(key)
      key.is_a?(Symbol) ? key.name : key
    end
  end

  # Fail2ban parameters, checked when made: +maxretry+ strikes within
  # +findtime+ seconds ban for +bantime+ seconds; +name+ keeps the strikes of
  # different bans apart. Each not given takes its default (from the core).
  class Fail2Ban
    def self.new(name = nil, maxretry: nil, findtime: nil, bantime: nil)
      _new(name, maxretry, Ratekeeper.seconds(findtime), Ratekeeper.seconds(bantime))
    end
  end

  # Who a request's client is: the +ranges+ of proxies whose X-Forwarded-For
  # is believed, and how much of the client's address names it:
  # +ipv4_prefix+ (16 to 32, default 32) and +ipv6_prefix+ (48 to 128,
  # default 64: an IPv6 client usually holds a whole /64). #client_ip is the
  # address; #client_key the client as keys of kind ip and address bans name
  # it ("2001:db8:1:2::/64").
  class TrustedProxies
    def self.new(ranges = [], ipv4_prefix: nil, ipv6_prefix: nil)
      _new(Array(ranges).map(&:to_s), ipv4_prefix, ipv6_prefix)
    end
  end

  # How an adapter answers (see Responses#answer): +status+ of a denial
  # (429), +blocked_status+ of a blocked client (403), which rate-limit
  # +headers+ to send (:all, :draft, :legacy or :none), and whether denial
  # log lines show keys as they are (+log_keys+) rather than hashed. The
  # defaults come from the core.
  class Responses
    def self.new(status: nil, blocked_status: nil, headers: nil, log_keys: false)
      _new(status, blocked_status, headers, log_keys ? true : false)
    end

    # The log line of a denial of +key+ under +scope+: [text, fields].
    def denial_log(decision, scope, key, method: "", path: "")
      _denial_log(decision, scope.to_s, Limiter.key_text(key), method.to_s, path.to_s)
    end
  end
end
