# frozen_string_literal: true

# A Rack app for the edge tests (puma servers/edge_rack.ru). EDGE_DOOR picks
# its part: "direct" limits /api/ per X-Api-Key with the throttle "api"
# (EDGE_RULES); "proxied" limits nothing itself; "policy" applies the policy
# file EDGE_POLICY. RATEKEEPER_STORE and RATEKEEPER_PREFIX name the store.
require "ratekeeper"

door = ENV.fetch("EDGE_DOOR", "direct")
if door == "direct"
  use Ratekeeper::Rack::Middleware, store: ENV.fetch("RATEKEEPER_STORE"), prefix: ENV.fetch("RATEKEEPER_PREFIX") do |rk|
    rk.throttle("api", rules: ENV.fetch("EDGE_RULES", "5/minute"), paths: "/api/") { |req| req.get_header("HTTP_X_API_KEY") }
  end
end
use Ratekeeper::Rack::Middleware, policy: ENV.fetch("EDGE_POLICY") if door == "policy"
run ->(env) { [200, { "content-type" => "text/plain" }, ["rack #{door} #{env["PATH_INFO"]}"]] }
