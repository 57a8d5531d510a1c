# frozen_string_literal: true

require "json"

module Ratekeeper
  # The answer to a check (native; these helpers shape HTTP answers from it).
  class Decision
    alias allowed allowed?

    # Retry-After in whole seconds, rounded up (1 when the cost can never pass).
    def retry_after_seconds
      wait = retry_after
      wait.nil? ? 1 : wait.ceil
    end

    # The JSON body of a denial: {"error":"rate_limited","retry_after":N}.
    def denial_body
      JSON.generate({ "error" => "rate_limited", "retry_after" => retry_after_seconds })
    end

    # Headers of a denial: the decision's, Retry-After and the JSON content type.
    def denial_headers
      out = headers
      out["Retry-After"] ||= retry_after_seconds.to_s
      out["Content-Type"] = "application/json"
      out
    end

    def to_h
      { allowed: allowed?, retry_after: retry_after, limit: limit, remaining: remaining,
        reset_after: reset_after, degraded: degraded?, blocked: blocked?, safelisted: safelisted?,
        shadowed: shadowed?, tier: tier, overridden: overridden?, reason: reason }
    end
  end
end
