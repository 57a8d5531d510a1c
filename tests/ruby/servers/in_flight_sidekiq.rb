# frozen_string_literal: true

# A Sidekiq job that holds a slot of RK_RULES ("2 concurrent; ...") while it
# runs for 100 ms, across every Sidekiq thread and process, counting in
# Redis the jobs running now (RK_NOW), the most at once (RK_MOST) and the
# jobs done (RK_RUNS). Run: REDIS_URL=... RK_RULES=... RK_PREFIX=...
# sidekiq -r ./tests/ruby/servers/in_flight_sidekiq.rb
require "sidekiq"
require "ratekeeper/sidekiq"

class SlowCallJob
  include Sidekiq::Worker

  # the count of running jobs, and the most seen, in one step
  COUNT = "local n = redis.call('INCR', KEYS[1]) " \
          "if n > tonumber(redis.call('GET', KEYS[2]) or 0) then redis.call('SET', KEYS[2], n) end return n"

  def perform(n)
    Sidekiq.redis { |redis| redis.call("EVAL", COUNT, 2, ENV.fetch("RK_NOW"), ENV.fetch("RK_MOST")) }
    sleep 0.1
    Sidekiq.redis do |redis|
      redis.call("DECR", ENV.fetch("RK_NOW"))
      redis.call("RPUSH", ENV.fetch("RK_RUNS"), n)
    end
  end
end

Sidekiq.configure_server do |config|
  config.average_scheduled_poll_interval = 0.2
  config.server_middleware do |chain|
    chain.add Ratekeeper::Sidekiq::Middleware, store: ENV.fetch("REDIS_URL"), prefix: ENV.fetch("RK_PREFIX"),
                                                 limits: { "SlowCallJob" => { rules: ENV.fetch("RK_RULES"), lease: 10,
                                                                              key: ->(_args) { "upstream" } } }
  end
end
