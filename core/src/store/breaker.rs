//! A circuit breaker: after a store fails to answer, stop calling it for a
//! short back-off, so an outage adds no latency to every request.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// First back-off after a failure; it doubles with each failure in a row.
pub const FIRST_BACKOFF_MS: u64 = 200;
/// Longest back-off.
pub const MAX_BACKOFF_MS: u64 = 2_000;

/// How often a store was called, failed, and was spared by the breaker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Calls that reached the store (or tried to).
    pub attempts: u64,
    /// Attempts that failed to get an answer (connection refused, timed out...).
    pub failures: u64,
    /// Calls answered at once with an error because the circuit was open.
    pub short_circuits: u64,
}

impl StoreStats {
    /// The counts by name, as the bindings expose them.
    pub fn counts(&self) -> [(&'static str, u64); 3] {
        [
            ("attempts", self.attempts),
            ("failures", self.failures),
            ("short_circuits", self.short_circuits),
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
        let row = self.failures_in_row.load(Ordering::Relaxed).clamp(1, 16);
        (FIRST_BACKOFF_MS << (row - 1)).min(MAX_BACKOFF_MS)
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

    /// Records an answer from the store: the circuit closes.
    pub fn succeeded(&self) {
        if self.open_until.load(Ordering::Relaxed) != 0
            || self.failures_in_row.load(Ordering::Relaxed) != 0
        {
            self.failures_in_row.store(0, Ordering::Relaxed);
            self.open_until.store(0, Ordering::Release);
        }
    }

    /// Records a failure to get an answer (`why`): the circuit opens for the next back-off.
    pub fn failed(&self, why: &str) {
        if let Ok(mut last) = self.last_failure.lock() {
            why.clone_into(&mut last);
        }
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.failures_in_row.fetch_add(1, Ordering::Relaxed);
        self.open_until
            .store(self.now_ms() + self.backoff_ms(), Ordering::Release);
    }

    /// The counters so far.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            attempts: self.attempts.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            short_circuits: self.short_circuits.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_on_failure_and_closes_on_success() {
        let breaker = Breaker::default();
        assert!(breaker.allow().is_ok());
        breaker.failed("refused");
        let refused = breaker.allow().unwrap_err().to_string();
        assert!(refused.contains("not called again"), "{refused}");
        assert_eq!(
            breaker.stats(),
            StoreStats {
                attempts: 1,
                failures: 1,
                short_circuits: 1
            }
        );
        std::thread::sleep(std::time::Duration::from_millis(FIRST_BACKOFF_MS + 20));
        assert!(breaker.allow().is_ok(), "half-open: one probe goes through");
        assert!(breaker.allow().is_err(), "others wait while it probes");
        breaker.succeeded();
        assert!(breaker.allow().is_ok());
        assert!(breaker.allow().is_ok());
    }

    #[test]
    fn backoff_doubles_up_to_a_cap() {
        let breaker = Breaker::default();
        for _ in 0..10 {
            breaker.failed("refused");
        }
        assert_eq!(breaker.backoff_ms(), MAX_BACKOFF_MS);
        breaker.succeeded();
        breaker.failed("refused");
        assert_eq!(breaker.backoff_ms(), FIRST_BACKOFF_MS);
    }
}
