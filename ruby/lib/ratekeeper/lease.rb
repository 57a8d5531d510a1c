# frozen_string_literal: true

module Ratekeeper
  # A slot of an in-flight rule held (or refused) by Limiter#hold: release
  # it when the work ends (#release); a holder that dies never does, and the
  # slot comes back when the lease lapses (#lapse_at).
  class Lease
    # Makes the lease lapse +lease+ seconds from now (the limiter's lease
    # when nil), for work that runs longer: its new lapse time (seconds
    # since the epoch), or nil when it lapsed or was released.
    def extend_lease(lease = nil)
      _extend(lease)
    end
  end
end
