//! A settle of a reservation: what it asks of a log, and how the log gives
//! back its refund (see [`Settle`]).

use crate::band::{Band, Stored};
use crate::layout::Damaged;
use crate::layout::SPAN;

/// A settle of a reservation: the units a check logged at `at` (its
/// estimate) become what the work really cost. The entry that holds them
/// gives back `refund` units (the estimate less the real cost), as if never
/// spent, and the check's `cost` (the real cost less the estimate, or 0) is
/// logged at the settle's time whatever the limits say: an overrun is
/// counted, never refused. A log of the settle's rules gives its refund
/// back in place: only that entry and the newer ones of its band are
/// written again, so a settle costs about what a check does. A log written
/// for other rules (or in the previous format) is rebuilt for these,
/// giving the refund back on the way.
///
/// The entry that holds the reservation's units is the oldest with a time
/// from `at` on (a merge stamps an entry with its newest time, so it is
/// never older than any unit it holds); one that left the longest window
/// gives nothing back (its units already left every window), and an entry
/// left with no units is taken out of its band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    /// The time the reservation was logged at (ms): its check's `now`.
    pub at: i64,
    /// Units to give back (0 to the estimate).
    pub refund: i64,
}

impl Settle {
    /// Gives the refund back in place, in `bands` as read from `log` (of
    /// these rules, nothing added yet): true when any unit went back.
    pub(crate) fn give_back(self, bands: &mut [Band], log: Stored<'_>) -> Result<bool, Damaged> {
        let longest = bands.last().map_or(0, |b| b.window);
        if self.refund <= 0 || self.at <= log.newest - longest {
            return Ok(false);
        }
        // (older bands hold older entries: the oldest band whose back is
        // from `at` on holds the entry)
        let Some(band) = bands
            .iter_mut()
            .rev()
            .find(|b| b.len > 0 && b.back >= self.at)
        else {
            return Ok(false);
        };
        let at = band.first_from(self.at, log)?;
        band.give_back(at, self.refund, log)
    }
}

impl Band {
    /// The first of its entries (from the front) whose time is from `at`
    /// on; its back's is.
    fn first_from(&self, at: i64, log: Stored<'_>) -> Result<i64, Damaged> {
        if self.front >= at {
            return Ok(0);
        }
        // entry `older` is older than `at`, entry `from` is not; a
        // reservation is most often settled soon, its entry among the
        // newest: galloping from the back (entries len - 2, len - 3,
        // len - 5, ...), then a binary search of what is left
        let (mut older, mut from) = (0, self.len - 1);
        let mut step = 1;
        while from - step > older {
            let probe = from - step;
            if self.entry(probe, log)?.0 < at {
                older = probe;
                break;
            }
            (from, step) = (probe, 2 * step);
        }
        while from - older > 1 {
            let mid = (older + from) / 2;
            if self.entry(mid, log)?.0 >= at {
                from = mid;
            } else {
                older = mid;
            }
        }
        Ok(from)
    }

    /// Gives back up to `refund` units of entry `at`: it and every newer
    /// entry are rewritten from here (as added ones), their running totals
    /// less what it gave, and it is taken out when it is left with none.
    /// Only before this check added anything. True when any unit went back.
    fn give_back(&mut self, at: i64, refund: i64, log: Stored<'_>) -> Result<bool, Damaged> {
        debug_assert!(self.stored == self.len && self.pending.is_empty());
        let before = match at {
            0 => self.out,
            _ => self.entry(at - 1, log)?.1,
        };
        let units = (self.entry(at, log)?.1 - before).rem_euclid(SPAN);
        let given = refund.min(units);
        if given <= 0 {
            return Ok(false);
        }
        let mut newer = Vec::with_capacity((self.len - at) as usize);
        for i in at..self.len {
            let (t, total) = self.entry(i, log)?;
            if i > at || given < units {
                newer.push((t, (total - given).rem_euclid(SPAN)));
            }
        }
        self.stored = at;
        self.len = at + newer.len() as i64;
        self.pending = newer;
        self.pending_from = 0;
        self.back_total = (self.back_total - given).rem_euclid(SPAN);
        if self.len > 0 {
            if at == 0 {
                self.front = self.entry(0, log)?.0;
            }
            self.back = self.entry(self.len - 1, log)?.0;
        }
        self.touched = true;
        Ok(true)
    }
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
