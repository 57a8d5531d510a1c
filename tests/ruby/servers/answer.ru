# frozen_string_literal: true

# A Rack app behind ratekeeper's middleware: 5/second; 20/minute per client
# IP (throttle "answers"), on RK_STORE with RK_PREFIX, headers in the style
# RK_HEADERS. Every request that gets through is answered "hello".
require "ratekeeper"

use Ratekeeper::Rack::Middleware, store: ENV.fetch("RK_STORE"), prefix: ENV.fetch("RK_PREFIX"),
                                  headers: ENV.fetch("RK_HEADERS", "all") do |rk|
  rk.throttle "answers", rules: "5/second; 20/minute"
end
run ->(_env) { [200, { "Content-Type" => "text/plain" }, ["hello"]] }
