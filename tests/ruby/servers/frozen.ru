# frozen_string_literal: true

# A Rack app behind ratekeeper's middleware on RK_STORE with a timeout of
# RK_TIMEOUT seconds (on_error :allow); each answer carries X-Took-Ms, the
# time the middleware took to decide it.
require "ratekeeper"

timeout = Float(ENV.fetch("RK_TIMEOUT"))
timed = Class.new do
  def initialize(app)
    @app = app
  end

  def call(env)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    status, headers, body = @app.call(env)
    took = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000
    [status, headers.merge("X-Took-Ms" => format("%.1f", took)), body]
  end
end
use timed
use Ratekeeper::Rack::Middleware, store: ENV.fetch("RK_STORE"), prefix: ENV.fetch("RK_PREFIX"),
                                  timeout: timeout, connect_timeout: timeout, on_error: :allow do |rk|
  rk.exempt "/health" # a worker is warmed without asking the store
  rk.throttle "frozen", rules: "100000/second"
end
run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello"]] }
