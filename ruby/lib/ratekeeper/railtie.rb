# frozen_string_literal: true

require "rails/railtie"

module Ratekeeper
  # In a Rails app, `config.ratekeeper` is a Ratekeeper::Rack::Config, set in
  # config/application.rb or in config/initializers/:
  #
  #   config.ratekeeper.store = "redis://127.0.0.1:6379/0"
  #   config.ratekeeper.throttle "req/ip", rules: "5/second; 300/5min"
  #
  # The middleware is always inserted: it reads the config when Rails builds
  # the middleware stack, after every initializer has run (an app whose
  # config/initializers/ratekeeper.rb set the throttles used to run without
  # them, since this initializer runs before those files).
  class Railtie < Rails::Railtie
    config.ratekeeper = Ratekeeper::Rack::Config.new

    initializer "ratekeeper.middleware" do |app|
      app.middleware.use Ratekeeper::Rack::Middleware, app.config.ratekeeper
    end
  end
end
