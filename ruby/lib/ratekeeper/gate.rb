# frozen_string_literal: true

module Ratekeeper
  # The policy every door applies, bound to its store: the core decides each
  # request (exempt paths, safelists and blocklists, listed addresses, bans,
  # every throttle that applies in one round trip, the answer). Built from a
  # policy file's path or a Hash of the same shape, where a key, a tier, a
  # ban's, safelist's or blocklist's +match+ and +exempt+ may be a callable
  # (called with the request object the door passes as +context+).
  #
  #   gate = Ratekeeper::Gate.new("policy.toml")
  #   verdict = gate.decide(method: "GET", path: "/", host: "example.com", peer: "203.0.113.9", headers: env)
  #   verdict.ending # => "pass", "deny" or "block"
  class Gate
    # The policy's callables, in the order their "call:N" name them.
    attr_reader :callables

    def self.new(policy)
      callables = []
      given = policy.is_a?(Hash) ? named_callables(policy, callables) : policy.to_s
      _new(given, callables.length).tap { |gate| gate.instance_variable_set(:@callables, callables.freeze) }
    end

    # A copy of +value+ with each callable replaced by "call:N" (N its index in +into+).
    def self.named_callables(value, into)
      case value
      when Hash then value.to_h { |k, v| [k, named_callables(v, into)] }
      when Array then value.map { |v| named_callables(v, into) }
      else
        if value.respond_to?(:call) && !value.is_a?(String) && !value.is_a?(Symbol)
          into << value
          "call:#{into.length - 1}"
        else
          value
        end
      end
    end
    private_class_method :named_callables

    # The verdict on a request: its +method+, decoded +path+, +host+, +peer+
    # (REMOTE_ADDR), +headers+ (the Rack env: its HTTP_ keys), the +query+ string;
    # +context+ is what the callables are called with; +body+ (a callable
    # taking a field name: a String, an Array of them for a repeated field,
    # nil when absent, false when the door cannot read the body, which
    # counts the client) and +user+ (a callable) are called only when a
    # throttle that applies needs them; +cost+ (default 1).
    def decide(method:, path:, host:, peer:, headers:, query: "", context: nil, body: nil, user: nil, cost: nil)
      _decide(method, path, host, peer, headers, query, context, @callables || [], body, user, cost)
    end

    # The admin interface to this gate's store (its Redis or its memory),
    # its changes recorded in the audit trail as +actor+'s.
    def admin(actor: nil)
      _admin(actor&.to_s)
    end

    # Counts a strike of the fail2ban or allow2ban entry +name+ against the
    # client of a request from +peer+ (REMOTE_ADDR) with +headers+ (the Rack
    # env; its X-Forwarded-For believed from the policy's trusted proxies),
    # as an app does after a failed login; true when the strike banned the
    # client. A name no entry has raises ConfigurationError.
    def penalize(name, peer:, headers:)
      _penalize(name.to_s, peer.to_s, headers)
    end
  end
end
