# frozen_string_literal: true

# Jobs for a real Sidekiq process (tests/ruby/test_sidekiq.rb): PartnerJob
# records when its check admitted it (the Redis clock, ms) in the list RK_RUNS; the
# middleware limits it to RK_RULES across every Sidekiq thread and process.
require "sidekiq"
require "ratekeeper/sidekiq"

class PartnerJob
  include Sidekiq::Worker
  attr_accessor :ratekeeper_decision

  def perform(n)
    admitted_ms = (ratekeeper_decision.now * 1000).round # the Redis clock, when the check admitted it
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
