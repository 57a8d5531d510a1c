# A Rack app behind the ratekeeper middleware:
#
#   RATEKEEPER_STORE=redis://127.0.0.1:6379/0 puma examples/config.ru
require "ratekeeper"

use Ratekeeper::Rack::Middleware, store: ENV.fetch("RATEKEEPER_STORE", "memory://"),
                                  prefix: ENV.fetch("RATEKEEPER_PREFIX", "example") do |rk|
  rk.trusted_proxies = ["127.0.0.1"]
  rk.exempt "/health"
  rk.blocklist("php probes") { |req| req.path.end_with?(".php") }
  rk.throttle "req/ip", rules: "5/second; 20/minute"
  # the posted e-mail (form or JSON), trimmed and lower-cased; none: not limited by this throttle
  rk.throttle("login/email", rules: "3/5min", methods: "POST", paths: "/login") { |req| req.identity("email") }
end

run lambda { |env|
  [200, { "Content-Type" => "text/plain" }, ["hello from #{env["PATH_INFO"]}\n"]]
}
