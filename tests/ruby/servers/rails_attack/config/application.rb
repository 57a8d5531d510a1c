# frozen_string_literal: true

# A Rails 6.1 app that swapped the rack-attack gem for ratekeeper: its
# initializer (config/initializers/rack_attack.rb) is seed 001's kind, kept as
# it was. The one line that changed is the require below, which an app's
# Gemfile makes as `gem "ratekeeper", require: "ratekeeper/rack_attack"`
# (Bundler.require) where it said `gem "rack-attack"`; ratekeeper's Railtie
# then adds Rack::Attack to the middleware as rack-attack's does.
#
# RATEKEEPER_STORE (a Redis URL) is the cache store's Redis, RATEKEEPER_PREFIX its prefix.
require_relative "../../rails_app"
require "ratekeeper/rack_attack"

module RailsAttack
  # The app: no database, no assets; what rack-attack sees of a request.
  class Application < Rails::Application
    TestRailsApp.configure(config)
  end
end
