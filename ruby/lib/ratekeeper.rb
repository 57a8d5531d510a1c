# frozen_string_literal: true

# ratekeeper: exact multi-rule rate limiting over a sliding log, in memory or
# Redis, shared with Python processes. Every decision is made by the Rust core
# (ratekeeper/ratekeeper.so); this gem adds the Ruby API, the Rack
# middleware and the Railtie.
#
#   limiter = Ratekeeper::Limiter.new("1/second; 20/minute", store: "redis://127.0.0.1:6379/0")
#   limiter.check("user:42").allowed?
module Ratekeeper
end

require "ratekeeper/version"
require "ratekeeper/errors"
require "ratekeeper/ratekeeper"
require "ratekeeper/limiter"
require "ratekeeper/decision"
require "ratekeeper/rack/middleware"
require "ratekeeper/railtie" if defined?(Rails::Railtie)
