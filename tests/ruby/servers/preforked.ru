# frozen_string_literal: true

# A Rack app whose limiter is built, and used, when the app loads: under puma
# with preload_app! that happens in the master, before it forks the workers,
# so they inherit a limiter with an open Redis connection.
#
# GET /<key> checks <key> (RK_RULES, default 50/minute) and answers the
# decision as JSON, with the pid of the worker that made it.
require "json"
require "ratekeeper"

LIMITER = Ratekeeper::Limiter.new(ENV.fetch("RK_RULES", "50/minute"), store: ENV.fetch("RK_STORE"),
                                                                       prefix: ENV.fetch("RK_PREFIX"))
raise "Redis did not answer at load" if LIMITER.check("load-time").degraded?

run lambda { |env|
  key = env["PATH_INFO"].delete_prefix("/")
  decision = LIMITER.check(key.empty? ? "default" : key)
  body = JSON.generate(allowed: decision.allowed?, degraded: decision.degraded?, pid: Process.pid)
  [200, { "Content-Type" => "application/json" }, [body]]
}
