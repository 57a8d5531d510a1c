# frozen_string_literal: true

# A Sidekiq job limited by ratekeeper: PartnerJob runs at most RK_RULES
# (say "20/second") across every Sidekiq thread and process, on the Redis
# Sidekiq uses; it records when its check admitted it (the Redis clock, ms)
# in the list RK_RUNS. Run: REDIS_URL=... RK_RULES=20/second RK_RUNS=runs
# RK_PREFIX=jobs sidekiq -r ./examples/jobs/partner_sidekiq.rb
require "sidekiq"
require "ratekeeper/sidekiq"

class PartnerJob
  include Sidekiq::Worker
  attr_accessor :ratekeeper_decision

  def perform(n)
    admitted_ms = (ratekeeper_decision.now * 1000).round
    Sidekiq.redis { |redis| redis.rpush(ENV.fetch("RK_RUNS"), "#{admitted_ms}:#{n}") }
  end
end

Sidekiq.configure_server do |config|
  config.average_scheduled_poll_interval = 0.2
  config.server_middleware do |chain|
    chain.add Ratekeeper::Sidekiq::Middleware, store: ENV.fetch("REDIS_URL"), prefix: ENV.fetch("RK_PREFIX"),
                                                 limits: { "PartnerJob" => { rules: ENV.fetch("RK_RULES"),
                                                                             key: ->(_args) { "partner" } } }
  end
end
