//! A settle of a reservation: what it asks of a log, and what the log's
//! rebuild gives back on the way (see [`Settle`]).

/// A settle of a reservation: the units a check logged at `at` (its
/// estimate) become what the work really cost. The entry that holds them
/// gives back `refund` units (the estimate less the real cost), as if never
/// spent, and the check's `cost` (the real cost less the estimate, or 0) is
/// logged at the settle's time whatever the limits say: an overrun is
/// counted, never refused. The log is rebuilt whole (as for new rules), so a
/// settle costs about what a check of a log written for other rules does.
///
/// The entry that holds the reservation's units is the oldest with a time
/// from `at` on (a merge stamps an entry with its newest time, so it is
/// never older than any unit it holds); one that left the longest window
/// gives nothing back (its units already left every window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    /// The time the reservation was logged at (ms): its check's `now`.
    pub at: i64,
    /// Units to give back (0 to the estimate).
    pub refund: i64,
}

/// What a settle gives back as a log is rebuilt: `refund` units of the
/// first entry (oldest first) with a time from `at` on, once.
pub(crate) struct Refund {
    at: i64,
    left: i64,
}

impl Refund {
    /// A settle's refund, or none.
    pub(crate) fn of(settle: Option<Settle>) -> Refund {
        settle.map_or(Refund { at: 0, left: 0 }, |s| Refund {
            at: s.at,
            left: s.refund.max(0),
        })
    }

    /// The units of an entry of time `t` (of the log whose newest entry is
    /// `newest`, `longest` its longest window) once the refund is taken.
    pub(crate) fn taken(&mut self, t: i64, units: i64, newest: i64, longest: i64) -> i64 {
        if self.left == 0 || t < self.at {
            return units;
        }
        let left = std::mem::take(&mut self.left);
        if self.at <= newest - longest {
            return units; // (the reservation left every window)
        }
        units - left.min(units)
    }
}
