# frozen_string_literal: true

# A Rack login form behind ratekeeper's middleware: "5 failed logins per 5
# minutes per e-mail address" (count: :failures) on RK_STORE with RK_PREFIX;
# a login with the password "right" is 200, any other 401.
require "ratekeeper"

use Ratekeeper::Rack::Middleware, store: ENV.fetch("RK_STORE"), prefix: ENV.fetch("RK_PREFIX") do |rk|
  rk.exempt "/health"
  rk.throttle("logins/email", rules: "5/5min", methods: "POST", paths: "/login", count: :failures) do |req|
    req.POST["email"]
  end
end
run lambda { |env|
  right = Rack::Request.new(env).POST["password"] == "right"
  [right ? 200 : 401, { "Content-Type" => "text/plain" }, [right ? "welcome" : "no"]]
}
