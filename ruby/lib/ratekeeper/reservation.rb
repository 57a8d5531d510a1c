# frozen_string_literal: true

module Ratekeeper
  # A check admitted (or refused) for an estimate, as Limiter#reserve
  # returns it: settle it to what the work cost. Never settled, it keeps its
  # estimate.
  class Reservation
    # Settles the reservation to +actual+, the units the work cost, in one
    # round trip: below the estimate the difference goes back to every
    # rule's window, as if never spent; above it the overrun is counted now
    # (#over), never refused. Returns the rules' state after it (a Decision),
    # or nil when nothing was asked of the store (the work cost the estimate,
    # or the reservation was not logged). A reservation settles once: again
    # raises Ratekeeper::ConfigurationError.
    def settle(actual, now: nil)
      _settle(actual, now)
    end

    # Settles the reservation at 0: the work did not happen, every unit goes
    # back.
    def cancel
      _settle(0, nil)
    end
  end
end
