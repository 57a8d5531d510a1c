# frozen_string_literal: true

# A Rails 6.1 app limited by every door's policy file: the one line that
# names ratekeeper is `config.ratekeeper.policy`, and ratekeeper's Railtie
# adds its Rack middleware. EDGE_POLICY is the file's path (as for the edge
# tests' Rack app, tests/python/servers/edge_rack.ru).
require "logger"
require "rails"
require "action_controller/railtie"
require "ratekeeper"

module RailsPolicy
  # The app: no database, no assets; every path answers "ok".
  class Application < Rails::Application
    config.load_defaults 6.1
    config.eager_load = true
    config.secret_key_base = "test-only-#{"x" * 32}"
    config.logger = Logger.new(nil)
    config.hosts.clear
    config.consider_all_requests_local = false
    config.ratekeeper.policy = ENV.fetch("EDGE_POLICY")
  end
end
