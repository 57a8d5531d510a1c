# frozen_string_literal: true

require "ratekeeper"

module Ratekeeper
  # A Sidekiq server middleware that limits jobs by class (and a key from
  # their arguments), with the same rules, keys and Redis as the web apps:
  #
  #   require "ratekeeper/sidekiq"
  #
  #   Sidekiq.configure_server do |config|
  #     config.server_middleware do |chain|
  #       chain.add Ratekeeper::Sidekiq::Middleware, store: "redis://127.0.0.1:6379/0", limits: {
  #         "PartnerSyncJob" => { rules: "20/second; 10000/day", key: ->(args) { "partner:#{args.first}" } }
  #       }
  #     end
  #   end
  #
  # A job whose check is denied is not run now: it is scheduled again at its
  # retry_after (plus a little jitter), the same job (class, arguments, jid),
  # without counting a failure or a retry. Jobs of other classes run as usual.
  # A job class with `attr_accessor :ratekeeper_decision` gets the admitting
  # decision.
  #
  # A limit's +cost:+ is what a job costs: an Integer or, for rules with
  # meters, units per meter (<tt>{ requests: 1, tokens: 2000 }</tt>), or a
  # callable of the job's arguments giving it (default 1). When a job's cost
  # is known only from what +perform+ returns (the tokens an LLM call used),
  # +settle:+ is a callable of that result giving what it cost: +cost:+ is
  # then an estimate, reserved before the job runs and settled after it (a
  # job that raises keeps its estimate):
  #
  #   "CompletionJob" => { rules: { requests: "3500/minute", tokens: "90000/minute" },
  #                        key: ->(_args) { "openai" }, cost: { requests: 1, tokens: 2000 },
  #                        settle: ->(reply) { { tokens: reply["usage"]["total_tokens"] } } }
  #
  # Rules with an in-flight rule (<tt>"5 concurrent; 100/minute"</tt>) make a
  # job hold a slot while it runs: the lease is released when +perform+ ends
  # (raising or not), or lapses after +lease:+ seconds (the limit's, else the
  # limiter's, 60 by default) when the process died. As Sidekiq Enterprise's
  # concurrent limiter does, a job waits for a slot up to +wait_timeout:+
  # seconds (default 5; 0: not at all), then is scheduled again as a denied
  # one is, after its retry_after but at most 1 s.
  module Sidekiq
    # The server middleware (see Ratekeeper::Sidekiq).
    class Middleware
      BUILT = {} # rubocop:disable Style/MutableConstant
      BUILT_LOCK = Mutex.new
      private_constant :BUILT, :BUILT_LOCK

      # +limits+: class name => { rules:, key: (a callable of the job's
      # arguments; default the class name), scope: (default "sidekiq:<class>"),
      # cost:, settle:, lease:, wait_timeout: (see Ratekeeper::Sidekiq) };
      # the other options are the limiter's (store:, prefix:, on_error:, ...).
      # (Sidekiq makes a middleware per job, passing the options as a Hash:
      # the limiters are made once per set of options and shared.)
      def initialize(options = {}, **keywords)
        options = options.transform_keys(&:to_sym).merge(keywords)
        @limits = BUILT_LOCK.synchronize { BUILT[options] ||= Middleware.build(options) }
      end

      # The limiters of a set of options, by job class name, with their key functions.
      def self.build(options)
        options = options.dup
        limits = options.delete(:limits) or raise ConfigurationError, "Ratekeeper::Sidekiq::Middleware needs limits:"
        first = nil # the first limiter made: the others share its store
        limits.to_h do |name, spec|
          spec = spec.transform_keys(&:to_sym)
          scope = Ratekeeper.scope_name(spec.fetch(:scope, "sidekiq:#{name}"))
          key, settle = spec[:key], spec[:settle]
          raise ConfigurationError, "the key of #{name}'s limit must be callable" unless key.nil? || key.respond_to?(:call)
          raise ConfigurationError, "the settle: of #{name}'s limit must be callable" unless settle.nil? || settle.respond_to?(:call)

          rules = spec.fetch(:rules)
          limiter = first ? first.with_rules(rules, scope: scope) : (first = Limiter.new(rules, **options, scope: scope))
          slot = { lease: spec[:lease], wait_timeout: spec.fetch(:wait_timeout, 5) }
          [name.to_s, [limiter, key, spec.fetch(:cost, 1), settle, slot]]
        end
      end

      def call(worker, job, _queue)
        name = job["wrapped"] || job["class"]
        limiter, key_of, cost, settle, slot = @limits[name]
        return yield unless limiter

        key = (key_of ? key_of.call(job["args"]) : name).to_s
        cost = cost.call(job["args"]) if cost.respond_to?(:call)
        if limiter.in_flight
          wait = slot[:wait_timeout].to_f.positive?
          lease = limiter.hold(key, cost: cost, lease: slot[:lease], wait: wait, timeout: slot[:wait_timeout])
          return holding(worker, job, lease) { yield }
        end

        reservation = limiter.reserve(key, cost: cost) if settle
        decision = reservation ? reservation.decision : limiter.check(key, cost: cost)
        if decision.allowed?
          worker.ratekeeper_decision = decision if worker.respond_to?(:ratekeeper_decision=)
          return yield unless reservation

          result = yield
          reservation.settle(settle.call(result))
          return result
        end

        later(job, decision)
      end

      private

      # Runs the job holding its lease (released when it ends), or sends it again later.
      def holding(worker, job, lease)
        return later(job, lease.decision) unless lease.allowed?

        worker.ratekeeper_decision = lease.decision if worker.respond_to?(:ratekeeper_decision=)
        begin
          yield
        ensure
          lease.release
        end
      end

      # Schedules the job again after the decision's retry_after (plus a
      # little jitter; a refused slot: at most 1 s), the same job.
      def later(job, decision)
        wait = decision.retry_after || 1.0
        wait = [wait, 1.0].min if decision.in_flight
        wait += rand * [wait / 10, 0.025].min + 0.001
        ::Sidekiq::Client.push(job.merge("at" => Time.now.to_f + wait))
        nil
      end
    end
  end
end
