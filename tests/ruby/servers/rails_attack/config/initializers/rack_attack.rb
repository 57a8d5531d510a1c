# frozen_string_literal: true

# Seed 001's kind of rack-attack initializer, as the app had it with the
# rack-attack gem: throttles by IP and by login email, a fail2ban blocklist,
# a JSON throttled responder; and a throttle "api" (5/minute per X-Api-Key on
# /api/) that a Django view decorated the django-ratelimit way shares
# (tests/python/test_compat_django_ratelimit.py).
require "json"

Rack::Attack.cache.store = ActiveSupport::Cache::RedisCacheStore.new(url: ENV.fetch("RATEKEEPER_STORE"))
Rack::Attack.cache.prefix = ENV.fetch("RATEKEEPER_PREFIX")

Rack::Attack.throttle("req/ip", limit: 20, period: 1.minute) { |req| req.ip unless req.path.start_with?("/assets") }
Rack::Attack.throttle("logins/email", limit: 5, period: 60) do |req|
  req.params["email"].to_s.downcase.strip.then { |e| e.empty? ? nil : e } if req.path == "/login" && req.post?
end
Rack::Attack.throttle("api", limit: 5, period: 60) { |req| req.get_header("HTTP_X_API_KEY") if req.path.start_with?("/api/") }
Rack::Attack.blocklist("fail2ban pentesters") do |req|
  Rack::Attack::Fail2Ban.filter("pentesters-#{req.ip}", maxretry: 2, findtime: 10.minutes, bantime: 10.minutes) do
    req.path.include?("/etc/passwd") || req.path.include?("wp-admin")
  end
end
Rack::Attack.throttled_responder = lambda do |request|
  data = request.env["rack.attack.match_data"]
  [429, { "content-type" => "application/json" },
   [JSON.generate(error: "throttled", throttle: request.env["rack.attack.matched"], limit: data[:limit],
                  pid: Process.pid)]]
end
