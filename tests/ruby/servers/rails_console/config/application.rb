# frozen_string_literal: true

# A Rails 6.1 app that mounts ratekeeper's operations console
# (Ratekeeper::Web) behind its own sign-in, as an app mounts Sidekiq's web
# UI: a session cookie says who is signed in, and only staff reach the
# console. Its middleware limits every other path by client address
# (X-Forwarded-For believed from loopback, as behind a proxy) on the store
# RATEKEEPER_STORE names, with prefix RATEKEEPER_PREFIX.
require_relative "../../rails_app"
require "ratekeeper"
require "ratekeeper/web"

module RailsConsole
  # The app: no database, no assets.
  class Application < Rails::Application
    TestRailsApp.configure(config)
    config.time_zone = "America/Chicago"
    config.session_store :cookie_store, key: "_console_session"

    config.ratekeeper.store = ENV.fetch("RATEKEEPER_STORE")
    config.ratekeeper.prefix = ENV.fetch("RATEKEEPER_PREFIX")
    config.ratekeeper.controls_refresh = 1
    config.ratekeeper.trusted_proxies = ["127.0.0.1/32"]
    config.ratekeeper.exempt("/ratekeeper", "/login", "/health")
    config.ratekeeper.throttle("req/ip", rules: "5/second") { |request| request.client_ip }
  end
end
