//! Hooks for the test helpers of an application's own test suite (Python's
//! `ratekeeper.testing`, Ruby's `Ratekeeper::Testing`), process-wide:
//!
//! - a frozen clock: every check that gives no `now` is taken at it (and
//!   never answered from the denial cache), so a test moves time by hand;
//! - a switch that admits every check without asking any store, in this
//!   process only (the store's own `disable` switch reaches every process);
//! - a reset that empties every memory store at its next use, so counts
//!   never leak from one test into the next.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The frozen time in ms ([`REAL_CLOCK`]: the real clock; the epoch itself can be frozen at).
static FROZEN_MS: AtomicU64 = AtomicU64::new(REAL_CLOCK);
const REAL_CLOCK: u64 = u64::MAX;
static DISABLED: AtomicBool = AtomicBool::new(false);
static RESETS: AtomicU64 = AtomicU64::new(0);

/// Freezes the clock of checks at `ms` since the epoch (`None`: the real clock again).
pub fn freeze(ms: Option<u64>) {
    let stored = match ms {
        Some(ms) => ms.min(REAL_CLOCK - 1),
        None => REAL_CLOCK,
    };
    FROZEN_MS.store(stored, Ordering::Release);
}

/// The frozen time, if the clock is frozen.
pub fn frozen() -> Option<u64> {
    match FROZEN_MS.load(Ordering::Acquire) {
        REAL_CLOCK => None,
        ms => Some(ms),
    }
}

/// Admits every check without asking a store (`true`), or limits again.
pub fn set_disabled(disabled: bool) {
    DISABLED.store(disabled, Ordering::Release);
}

/// Whether limiting is switched off in this process.
pub fn disabled() -> bool {
    DISABLED.load(Ordering::Acquire)
}

/// Empties every memory store of this process at its next use.
pub fn reset() {
    RESETS.fetch_add(1, Ordering::AcqRel);
}

/// How many resets were asked for (a memory store compares it with the last it saw).
pub fn resets() -> u64 {
    RESETS.load(Ordering::Acquire)
}
