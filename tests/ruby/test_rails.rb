# frozen_string_literal: true

require_relative "test_helper"
require "logger"
require "rails"
require "action_controller/railtie"
require "ratekeeper/railtie"
require "rack/test"

PREFIX = "minitest-rails-#{Process.pid}-#{Time.now.to_f}"

# A minimal Rails app (Debian's Rails 6.1) configured through config.ratekeeper.
class RatekeeperRailsApp < Rails::Application
  config.eager_load = false
  config.secret_key_base = "test-only"
  config.logger = Logger.new(nil)
  config.hosts.clear
  config.ratekeeper.store = TestSupport::REDIS_URL
  config.ratekeeper.prefix = PREFIX
  config.ratekeeper.exempt "/up"
  config.ratekeeper.throttle "req/ip", rules: "2/minute"
end

class HomeController < ActionController::Base
  def index
    render plain: "home"
  end
end

RatekeeperRailsApp.initialize!
RatekeeperRailsApp.routes.draw do
  get "/" => "home#index"
  get "/up" => "home#index"
end

class TestRails < Minitest::Test
  include TestSupport
  include Rack::Test::Methods

  def app
    RatekeeperRailsApp
  end

  def test_the_railtie_inserts_the_middleware
    assert_includes RatekeeperRailsApp.middleware.map(&:klass), Ratekeeper::Rack::Middleware
  end

  def test_rails_app_answers_429_after_the_configured_requests
    redis_url
    events = []
    subscriber = ActiveSupport::Notifications.subscribe("throttle.ratekeeper") { |*, payload| events << payload[:name] }
    2.times do |i|
      get "/", {}, "REMOTE_ADDR" => "203.0.113.77"
      assert_equal 200, last_response.status, "request #{i}"
      assert_equal "home", last_response.body
      assert_equal (1 - i).to_s, last_response.headers["X-RateLimit-Remaining"]
    end
    get "/", {}, "REMOTE_ADDR" => "203.0.113.77"
    assert_equal 429, last_response.status
    assert_equal "application/json", last_response.headers["Content-Type"]
    assert_operator last_response.headers["Retry-After"].to_i, :>=, 1
    assert_equal "rate_limited", JSON.parse(last_response.body)["error"]
    assert_equal ["req/ip"], events
    get "/up", {}, "REMOTE_ADDR" => "203.0.113.77"
    assert_equal 200, last_response.status
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber) if subscriber
  end
end
