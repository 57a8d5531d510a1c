//! The reset hook of the test helpers of an application's own suite
//! (Python's `ratekeeper.testing`, Ruby's `Ratekeeper::Testing`): it empties
//! every memory store of the process at its next use, so counts never leak
//! from one test into the next. (Their frozen time and their switch are the
//! process's [`crate::Clock`].)

use std::sync::atomic::{AtomicU64, Ordering};

static RESETS: AtomicU64 = AtomicU64::new(0);

/// Empties every memory store of this process at its next use.
pub fn reset() {
    RESETS.fetch_add(1, Ordering::AcqRel);
}

/// How many resets were asked for (a memory store compares it with the last it saw).
pub fn resets() -> u64 {
    RESETS.load(Ordering::Acquire)
}
