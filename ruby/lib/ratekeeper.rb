# frozen_string_literal: true

# ratekeeper: exact multi-rule rate limiting over a sliding log, in memory or
# Redis, shared with Python processes. Every decision is made by the Rust core
# (ratekeeper/ratekeeper.so); this gem adds the Ruby API, the Rack
# middleware and the Railtie.
#
#   limiter = Ratekeeper::Limiter.new("1/second; 20/minute", store: "redis://127.0.0.1:6379/0")
#   limiter.check("user:42").allowed?
# (loaded now: the first warning of an outage comes while a request waits)
require "logger"

module Ratekeeper
  class << self
    # Where warnings go (once per store outage): Rails.logger in a Rails app,
    # else $stderr. Assign any Logger.
    attr_writer :logger

    def logger
      @logger ||= defined?(Rails) && Rails.respond_to?(:logger) && Rails.logger ? Rails.logger : default_logger
    end

    # Checks [limiter, key] or [limiter, key, cost] items at once: limiters
    # sharing a store (see Limiter#with_rules) are asked in one round trip.
    # +ip+, the client address, is matched against listed addresses for every item.
    def check_all(items, now: nil, ip: nil)
      raise TypeError, "items must be an Array, not #{items.class}" unless items.is_a?(Array)

      _check_all(items.map { |item| item.is_a?(Array) && item[1].is_a?(Symbol) ? [item[0], item[1].name, *item[2..]] : item },
                 now, ip&.to_s)
    end

    # A number of seconds as the native layer takes it: an
    # ActiveSupport::Duration (10.minutes), a Rational or a BigDecimal as a
    # Float; anything else as it is (a wrong kind is refused there, named).
    def seconds(value)
      case value # (a Duration says is_a?(Integer); === asks its class)
      when nil, Integer, Float, String then value
      else value.respond_to?(:to_f) ? value.to_f : value
      end
    end

    # Called by the native layer with the first warning of an outage.
    def log_warning(message)
      logger.warn(message)
      nil
    end

    private

    def default_logger
      Logger.new($stderr, progname: "ratekeeper")
    end
  end
end

require "ratekeeper/version"
require "ratekeeper/errors"
require "ratekeeper/ratekeeper"
require "ratekeeper/limiter"
require "ratekeeper/reservation"
require "ratekeeper/lease"
require "ratekeeper/admin"
require "ratekeeper/gate"
require "ratekeeper/rack/middleware"
# The record of denials is written every controls_refresh: a script's, a job's
# or a recycled worker's last denials are written as it exits (one timeout at
# most; a forked child inherits the hook).
at_exit { Ratekeeper._flush_denials_at_exit }
if defined?(Rails::Railtie)
  require "ratekeeper/railtie"
else
  # Required before Rails: load the Railtie the moment Rails defines
  # Rails::Railtie (at the end of its class body), so `config.ratekeeper`
  # exists whatever the order of the requires.
  module Ratekeeper
    RAILS_WATCH = TracePoint.new(:end) do |tp|
      if tp.self.is_a?(Class) && tp.self.name == "Rails::Railtie"
        RAILS_WATCH.disable
        require "ratekeeper/railtie"
      end
    end
    RAILS_WATCH.enable
  end
end
