# frozen_string_literal: true

require "logger"
require "rails"
require "action_controller/railtie"

# What every test Rails app (rails_attack, rails_policy, rails_console)
# shares: Rails 6.1's defaults, eager loading, no database, assets or log,
# any host, production's error pages.
module TestRailsApp
  def self.configure(config)
    config.load_defaults 6.1
    config.eager_load = true
    config.secret_key_base = "test-only-#{"x" * 32}"
    config.logger = Logger.new(nil)
    config.hosts.clear
    config.consider_all_requests_local = false
  end
end
