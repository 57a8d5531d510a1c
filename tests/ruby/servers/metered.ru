# frozen_string_literal: true

# A metered API behind ratekeeper's Rack middleware, its throttle in the
# DSL: meters of requests and tokens, each call reserving 300 tokens and
# settled to its response's X-Tokens-Used (the query's `used`), on RK_STORE
# with RK_PREFIX.
require "ratekeeper"

use Ratekeeper::Rack::Middleware, store: ENV.fetch("RK_STORE"), prefix: ENV.fetch("RK_PREFIX") do |rk|
  rk.exempt "/health"
  rk.throttle(:llm, meters: { requests: "100/minute", tokens: "3000/minute" }, cost: { tokens: 300 },
                    usage: { tokens: "X-Tokens-Used" }, paths: "/v1/") do |req|
    req.get_header("HTTP_X_API_KEY")
  end
end
run lambda { |env|
  used = Rack::Request.new(env).GET["used"] || "0"
  [200, { "Content-Type" => "text/plain", "X-Tokens-Used" => used }, ["answer"]]
}
