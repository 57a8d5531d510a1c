# frozen_string_literal: true

module Ratekeeper
  # A check admitted (or refused) for an estimate, as Limiter#reserve
  # returns it: settle it to what the work cost. Never settled, it keeps its
  # estimate.
  class Reservation
    # Settles the reservation to +actual+, the units the work cost, in one
    # round trip: below the estimate the difference goes back to every
    # rule's window, as if never spent; above it the overrun is counted now
    # (#over), never refused. A metered limiter's reservation settles per
    # meter: <tt>settle(tokens: 1234)</tt> or <tt>settle({ tokens: 1234 })</tt>
    # (a meter not named keeps its estimate). Returns the rules' state after
    # it (a Decision), or nil when nothing was asked of the store (the work
    # cost the estimate, or the reservation was not logged). A reservation
    # settles once: again raises Ratekeeper::ConfigurationError.
    def settle(actual = nil, now: nil, **meters)
      _settle(actual, now, meters)
    end

    # Settles the reservation at 0: the work did not happen, every unit (of
    # every meter) goes back.
    def cancel
      _cancel
    end
  end
end
