# frozen_string_literal: true

require_relative "test_helper"
require "logger"
require "rails"
require "action_controller/railtie"
require "ratekeeper/railtie"
require "rack/test"
require "open3"
require "tmpdir"
require "fileutils"

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
      assert_equal 200, last_response.status, "request #{i}: #{last_response.headers} #{last_response.body}"
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

# Rails apps as users write them: the throttles in config/initializers/, and
# ratekeeper required before rails.
class TestRailsBoot < Minitest::Test
  include TestSupport

  def run_ruby(script, dir)
    env = { "RK_STORE" => redis_url, "RK_PREFIX" => unique_prefix }
    env["RUBYLIB"] = File.join(ROOT, "ruby/lib") if ENV["RATEKEEPER_DEV"] == "1"
    out, status = Open3.capture2e(env, "ruby", "-e", script, chdir: dir)
    [out, status]
  end

  APP = <<~RUBY
    require "logger"
    require "rails"
    require "action_controller/railtie"
    require "rack/mock"
    class BootApp < Rails::Application
      config.root = Dir.pwd
      config.eager_load = false
      config.secret_key_base = "test-only"
      config.logger = Logger.new(nil)
      config.hosts.clear
    end
    BootApp.initialize!
    BootApp.routes.draw { get "/" => proc { [200, {}, ["home"]] } }
    codes = Array.new(3) { Rack::MockRequest.new(BootApp).get("/", "REMOTE_ADDR" => "203.0.113.5").status }
    puts codes.join(",")
  RUBY

  def test_throttles_set_in_config_initializers_limit
    Dir.mktmpdir do |dir|
      FileUtils.mkdir_p(File.join(dir, "config/initializers"))
      File.write(File.join(dir, "config/initializers/ratekeeper.rb"), <<~RUBY)
        Rails.application.config.ratekeeper.store = ENV.fetch("RK_STORE")
        Rails.application.config.ratekeeper.prefix = ENV.fetch("RK_PREFIX")
        Rails.application.config.ratekeeper.throttle "req/ip", rules: "2/minute"
      RUBY
      out, status = run_ruby(APP.sub(%(require "rack/mock"), %(require "rack/mock"\nrequire "ratekeeper")), dir)
      assert status.success?, out
      assert_equal "200,200,429", out.lines.last.strip, "the initializer's throttle was ignored"
    end
  end

  def test_ratekeeper_required_before_rails
    Dir.mktmpdir do |dir|
      script = "require 'ratekeeper'\n" + APP.sub("BootApp.initialize!", <<~RUBY.chomp)
        BootApp.config.ratekeeper.store = ENV.fetch("RK_STORE")
        BootApp.config.ratekeeper.prefix = ENV.fetch("RK_PREFIX")
        BootApp.config.ratekeeper.throttle "req/ip", rules: "1/minute"
        BootApp.initialize!
      RUBY
      out, status = run_ruby(script, dir)
      assert status.success?, out
      assert_equal "200,429,429", out.lines.last.strip
    end
  end
end
