//! The [`Clock`] a limiter holds: the time of a check that gives none, and
//! whether the limiter limits at all.
//!
//! A clock runs on the store's own time (the Redis server's `TIME` inside
//! the check, the system clock for the memory store) until it is frozen at a
//! time moved by hand; it can also be switched off, and then every check is
//! admitted without asking a store. Every limiter (and so every gate) holds
//! [`Clock::process`] unless given another by [`crate::Limiter::with_clock`]:
//! the test helpers of an application's suite (Python's
//! `ratekeeper.testing`, Ruby's `Ratekeeper::Testing`) freeze and switch
//! that one, which reaches the limiters a middleware made for itself. A test
//! of the core gives a limiter a clock of its own instead, which no other
//! limiter sees.

use crate::time::system_now_ms;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// A time source shared by the limiters that hold it (clones share it).
#[derive(Debug, Clone)]
pub struct Clock(Arc<Hands>);

#[derive(Debug)]
struct Hands {
    /// The frozen time in ms ([`RUNNING`]: not frozen; the epoch itself can be frozen at).
    frozen_ms: AtomicU64,
    /// Whether checks are admitted without asking a store.
    off: AtomicBool,
}

const RUNNING: u64 = u64::MAX;

impl Default for Clock {
    /// The process's clock ([`Clock::process`]).
    fn default() -> Clock {
        Clock::process()
    }
}

impl Clock {
    /// The process's clock: what every limiter holds unless given another,
    /// and what the test helpers freeze and switch.
    pub fn process() -> Clock {
        static PROCESS: OnceLock<Clock> = OnceLock::new();
        PROCESS.get_or_init(Clock::running).clone()
    }

    /// A clock of its own, on the store's time and switched on.
    pub fn running() -> Clock {
        Clock(Arc::new(Hands {
            frozen_ms: AtomicU64::new(RUNNING),
            off: AtomicBool::new(false),
        }))
    }

    /// A clock of its own, frozen at `ms` since the epoch.
    pub fn frozen_at(ms: u64) -> Clock {
        let clock = Clock::running();
        clock.freeze(Some(ms));
        clock
    }

    /// Freezes this clock at `ms` since the epoch (`None`: the store's time again).
    pub fn freeze(&self, ms: Option<u64>) {
        let stored = ms.map_or(RUNNING, |ms| ms.min(RUNNING - 1));
        self.0.frozen_ms.store(stored, Ordering::Release);
    }

    /// The frozen time (ms), if this clock is frozen. A check that gives no
    /// time is taken at it (and never answered from the denial cache); when
    /// `None`, the store reads its own clock.
    pub fn frozen(&self) -> Option<u64> {
        match self.0.frozen_ms.load(Ordering::Acquire) {
            RUNNING => None,
            ms => Some(ms),
        }
    }

    /// The time (ms) here: the frozen time, else the system clock (what a
    /// decision made without the store, such as a listed address, is dated).
    pub fn now_ms(&self) -> u64 {
        self.frozen().unwrap_or_else(system_now_ms)
    }

    /// Switches limiting off (`false`: every check is admitted without
    /// asking a store) or on again, for every limiter holding this clock
    /// (the store's own `disable` switch reaches every process instead).
    pub fn set_limiting(&self, limiting: bool) {
        self.0.off.store(!limiting, Ordering::Release);
    }

    /// Whether the limiters holding this clock limit.
    pub fn limiting(&self) -> bool {
        !self.0.off.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_their_hands_and_fresh_clocks_do_not() {
        let clock = Clock::running();
        let held = clock.clone();
        clock.freeze(Some(0));
        assert_eq!(held.frozen(), Some(0), "the epoch itself can be frozen at");
        clock.set_limiting(false);
        assert!(!held.limiting());
        let other = Clock::running();
        assert_eq!(other.frozen(), None);
        assert!(other.limiting());
        clock.freeze(None);
        assert_eq!(held.frozen(), None);
        assert_eq!(Clock::frozen_at(5).now_ms(), 5);
    }
}
