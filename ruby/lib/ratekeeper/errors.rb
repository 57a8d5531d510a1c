# frozen_string_literal: true

module Ratekeeper
  # Base class of every error ratekeeper raises. ConfigurationError is an
  # ArgumentError (Ruby has single inheritance), yet `rescue Ratekeeper::Error`
  # catches it too.
  class Error < StandardError
    def self.===(other)
      super || (equal?(Error) && other.is_a?(ConfigurationError))
    end
  end

  # Bad rules, store URL, option or argument; the message names the offending text.
  class ConfigurationError < ArgumentError
  end

  # The store could not answer (unreachable, timed out) and on_error is :raise.
  class StorageError < Error
  end

  # No slot: a wait (Limiter#acquire, #within_limit) timed out, or the cost
  # can never pass; #decision is the last denial.
  class RateLimitExceeded < Error
    attr_reader :decision

    def initialize(message = "rate limited", decision = nil)
      super(message)
      @decision = decision
    end
  end
end
