//! A circuit breaker: after a store has failed to answer for a while, stop
//! calling it for a short back-off, so an outage adds no latency to every
//! request.
//!
//! It opens on an outage only: [`TRIP_MIN_FAILURES`] failures in a row with
//! no answer between, the last of them a refused or reset connection (nothing
//! listens: Redis is down, not slow), or the first of them at least
//! [`TRIP_AFTER_MS`] before the last (timeouts that went on that long). One
//! slow reply (a fork or fsync stall of a busy Redis) fails the checks in
//! flight during it and nothing more: the next check asks Redis again. Once open, one caller probes after each back-off
//! ([`FIRST_BACKOFF_MS`], doubling to [`MAX_BACKOFF_MS`]); its answer closes it.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// How a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No answer in time: Redis may only be slow.
    Slow,
    /// Refused or reset: nothing answers there now.
    Down,
}

/// The failures in a row that can open the circuit.
pub const TRIP_MIN_FAILURES: u32 = 5;
/// How long failures must have gone on, with no answer between, to open it.
pub const TRIP_AFTER_MS: u64 = 1_000;
/// First back-off once open; it doubles with each failed probe.
pub const FIRST_BACKOFF_MS: u64 = 100;
/// Longest back-off: how late, at most, a recovered store is noticed.
pub const MAX_BACKOFF_MS: u64 = 1_000;

/// How often a store was called, failed, and was spared by the breaker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Calls that reached the store (or tried to).
    pub attempts: u64,
    /// Attempts that failed to get an answer (connection refused, timed out...).
    pub failures: u64,
    /// Calls answered at once with an error because the circuit was open.
    pub short_circuits: u64,
    /// Checks and changes of the controls Redis answered through the ratekeeper module.
    pub module_calls: u64,
    /// Those it answered through the Lua script.
    pub script_calls: u64,
    /// The way the next check goes: "module", "script" or "memory".
    pub path: &'static str,
}

impl StoreStats {
    /// The counts by name, as the bindings expose them.
    pub fn counts(&self) -> [(&'static str, u64); 5] {
        [
            ("attempts", self.attempts),
            ("failures", self.failures),
            ("short_circuits", self.short_circuits),
            ("module_calls", self.module_calls),
            ("script_calls", self.script_calls),
        ]
    }
}

/// Closed (calls go through), open (calls fail at once until `open_until`),
/// then half-open: one caller probes; its success closes the circuit.
#[derive(Debug)]
pub struct Breaker {
    epoch: Instant,
    /// 0 when closed; else ms since `epoch` until which calls fail at once.
    open_until: AtomicU64,
    failures_in_row: AtomicU32,
    /// ms since `epoch` of the first failure of the current run (0: none).
    failing_since: AtomicU64,
    /// Probes that failed since the circuit opened: the back-off doubles with each.
    failed_probes: AtomicU32,
    attempts: AtomicU64,
    failures: AtomicU64,
    short_circuits: AtomicU64,
    /// What the last failure said, for the errors of calls spared meanwhile.
    last_failure: std::sync::Mutex<String>,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            epoch: Instant::now(),
            open_until: AtomicU64::new(0),
            failures_in_row: AtomicU32::new(0),
            failing_since: AtomicU64::new(0),
            failed_probes: AtomicU32::new(0),
            attempts: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            short_circuits: AtomicU64::new(0),
            last_failure: std::sync::Mutex::new(String::new()),
        }
    }
}

impl Breaker {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn backoff_ms(&self) -> u64 {
        let probes = self.failed_probes.load(Ordering::Relaxed).min(16);
        (FIRST_BACKOFF_MS << probes).min(MAX_BACKOFF_MS)
    }

    /// Whether a call may go to the store now; an error naming the outage if not.
    pub fn allow(&self) -> Result<()> {
        let until = self.open_until.load(Ordering::Acquire);
        if until != 0 {
            let now = self.now_ms();
            // half-open: the one caller that moves the window on probes the store
            let probe = now >= until
                && self
                    .open_until
                    .compare_exchange(
                        until,
                        now + self.backoff_ms(),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok();
            if !probe {
                self.short_circuits.fetch_add(1, Ordering::Relaxed);
                let last = self
                    .last_failure
                    .lock()
                    .map(|l| l.clone())
                    .unwrap_or_default();
                return Err(Error::storage(format!(
                    "Redis failed {} time(s) in a row (last: {last}); not called again for {} ms",
                    self.failures_in_row.load(Ordering::Relaxed),
                    until.saturating_sub(now)
                )));
            }
        }
        self.attempts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Records an answer from the store: the circuit closes, the run of failures ends.
    pub fn succeeded(&self) {
        if self.failures_in_row.load(Ordering::Relaxed) != 0
            || self.open_until.load(Ordering::Relaxed) != 0
        {
            self.failures_in_row.store(0, Ordering::Relaxed);
            self.failing_since.store(0, Ordering::Relaxed);
            self.failed_probes.store(0, Ordering::Relaxed);
            self.open_until.store(0, Ordering::Release);
        }
    }

    /// Records one call that got no answer (`why`). A failed probe opens the
    /// circuit again for a longer back-off; a run of failures long enough to
    /// be an outage opens it for the first.
    pub fn failed(&self, why: &str, kind: Failure) {
        if let Ok(mut last) = self.last_failure.lock() {
            why.clone_into(&mut last);
        }
        self.failures.fetch_add(1, Ordering::Relaxed);
        let now = self.now_ms();
        let in_row = self.failures_in_row.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = self
            .failing_since
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        let since = self.failing_since.load(Ordering::Relaxed);
        if self.open_until.load(Ordering::Acquire) != 0 {
            self.failed_probes.fetch_add(1, Ordering::Relaxed);
            self.open_until
                .store(now + self.backoff_ms(), Ordering::Release);
        } else if in_row >= TRIP_MIN_FAILURES
            && (kind == Failure::Down || now.saturating_sub(since) >= TRIP_AFTER_MS)
        {
            self.open_until
                .store(now + self.backoff_ms(), Ordering::Release);
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            attempts: self.attempts.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            short_circuits: self.short_circuits.load(Ordering::Relaxed),
            ..StoreStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_hiccup_never_opens_it() {
        let breaker = Breaker::default();
        for _ in 0..50 {
            assert!(breaker.allow().is_ok());
            breaker.failed("timed out", Failure::Slow);
        }
        assert!(
            breaker.allow().is_ok(),
            "50 quick failures are no outage yet"
        );
        breaker.succeeded();
        std::thread::sleep(Duration::from_millis(TRIP_AFTER_MS + 20));
        breaker.failed("timed out", Failure::Slow);
        assert!(
            breaker.allow().is_ok(),
            "an answer ended the last run: the clock starts again"
        );
        assert_eq!(breaker.stats().short_circuits, 0);
    }

    #[test]
    fn refused_connections_open_it_at_once() {
        let breaker = Breaker::default();
        for _ in 0..TRIP_MIN_FAILURES - 1 {
            breaker.failed("refused", Failure::Down);
        }
        assert!(breaker.allow().is_ok());
        breaker.failed("refused", Failure::Down);
        assert!(
            breaker.allow().is_err(),
            "nothing listens: no need to wait a second"
        );
    }

    #[test]
    fn a_sustained_outage_opens_it_and_an_answer_closes_it() {
        let breaker = Breaker::default();
        breaker.failed("refused", Failure::Slow);
        std::thread::sleep(Duration::from_millis(TRIP_AFTER_MS + 20));
        for _ in 1..TRIP_MIN_FAILURES - 1 {
            breaker.failed("refused", Failure::Slow);
        }
        assert!(breaker.allow().is_ok(), "too few failures yet");
        breaker.failed("refused", Failure::Slow);
        let refused = breaker.allow().unwrap_err().to_string();
        assert!(refused.contains("not called again"), "{refused}");
        assert!(refused.contains("refused"), "{refused}");
        std::thread::sleep(Duration::from_millis(FIRST_BACKOFF_MS + 20));
        assert!(breaker.allow().is_ok(), "half-open: one probe goes through");
        assert!(breaker.allow().is_err(), "others wait while it probes");
        breaker.succeeded();
        assert!(breaker.allow().is_ok());
        assert!(breaker.allow().is_ok());
        assert_eq!(breaker.open_until.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn backoff_doubles_with_failed_probes_up_to_a_cap() {
        let mut breaker = Breaker::default();
        breaker.failing_since.store(1, Ordering::Relaxed);
        breaker.epoch -= Duration::from_millis(TRIP_AFTER_MS + 10);
        for _ in 0..TRIP_MIN_FAILURES {
            breaker.failed("refused", Failure::Slow);
        }
        assert_ne!(breaker.open_until.load(Ordering::Relaxed), 0);
        assert_eq!(breaker.backoff_ms(), FIRST_BACKOFF_MS);
        breaker.failed("probe refused", Failure::Down);
        assert_eq!(breaker.backoff_ms(), 2 * FIRST_BACKOFF_MS);
        for _ in 0..10 {
            breaker.failed("probe refused", Failure::Down);
        }
        assert_eq!(breaker.backoff_ms(), MAX_BACKOFF_MS);
        breaker.succeeded();
        assert_eq!(breaker.backoff_ms(), FIRST_BACKOFF_MS);
    }
}
