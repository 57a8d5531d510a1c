# frozen_string_literal: true

# A Rails 6.1 app limited by every door's policy file: the one line that
# names ratekeeper is `config.ratekeeper.policy`, and ratekeeper's Railtie
# adds its Rack middleware. EDGE_POLICY is the file's path (as for the edge
# tests' Rack app, tests/python/servers/edge_rack.ru).
require_relative "../../rails_app"
require "ratekeeper"

module RailsPolicy
  # The app: no database, no assets; every path answers "ok".
  class Application < Rails::Application
    TestRailsApp.configure(config)
    config.ratekeeper.policy = ENV.fetch("EDGE_POLICY")
  end
end
