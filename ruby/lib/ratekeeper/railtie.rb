# frozen_string_literal: true

require "rails/railtie"

module Ratekeeper
  # In a Rails app, `config.ratekeeper` is a Ratekeeper::Rack::Config; when it
  # holds any throttle, safelist or blocklist the middleware is inserted:
  #
  #   # config/application.rb
  #   config.ratekeeper.store = "redis://127.0.0.1:6379/0"
  #   config.ratekeeper.throttle "req/ip", rules: "5/second; 300/5min"
  class Railtie < Rails::Railtie
    config.ratekeeper = Ratekeeper::Rack::Config.new

    initializer "ratekeeper.middleware" do |app|
      rk = app.config.ratekeeper
      if rk.throttles.any? || rk.safelists.any? || rk.blocklists.any?
        app.middleware.use Ratekeeper::Rack::Middleware, rk
      end
    end
  end
end
