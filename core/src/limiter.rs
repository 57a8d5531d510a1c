//! The [`Limiter`]: a rule set, a store and a failure policy; what every binding wraps.

use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::keys::key_tag;
use crate::rule::RuleSet;
use crate::store::{self, system_now_ms, Mode, Store, StoreOptions};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Latest `now` accepted, in seconds since the epoch (year 6429): timestamps
/// are kept in 47 bits of milliseconds.
pub const MAX_NOW_SECONDS: f64 = 140_737_488_355.0;

/// What a check returns when the store cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Admit the request (fail open), log a warning once per outage, count it.
    #[default]
    Allow,
    /// Deny the request (fail closed), log a warning once per outage, count it.
    Deny,
    /// Return the storage error to the caller.
    Raise,
}

impl FromStr for OnError {
    type Err = Error;

    fn from_str(text: &str) -> Result<OnError> {
        match text {
            "allow" => Ok(OnError::Allow),
            "deny" => Ok(OnError::Deny),
            "raise" => Ok(OnError::Raise),
            other => Err(Error::config(format!(
                "invalid on_error '{other}': use 'allow', 'deny' or 'raise'"
            ))),
        }
    }
}

/// A rule set checked against a store.
pub struct Limiter {
    rules: RuleSet,
    store: Arc<dyn Store>,
    on_error: OnError,
    errors: AtomicU64,
    in_outage: AtomicBool,
}

impl Limiter {
    /// A limiter for `rules` on the store `url` names (see [`store::open`]).
    pub fn open(
        rules: RuleSet,
        url: &str,
        options: &StoreOptions,
        on_error: OnError,
    ) -> Result<Limiter> {
        Ok(Limiter::with_store(
            rules,
            store::open(url, options)?,
            on_error,
        ))
    }

    /// A limiter for `rules` on an existing store (several limiters may share one).
    pub fn with_store(rules: RuleSet, store: Arc<dyn Store>, on_error: OnError) -> Limiter {
        Limiter {
            rules,
            store,
            on_error,
            errors: AtomicU64::new(0),
            in_outage: AtomicBool::new(false),
        }
    }

    /// A limiter for other rules on the same store, with the same `on_error`.
    pub fn with_rules(&self, rules: RuleSet) -> Limiter {
        Limiter::with_store(rules, self.store.clone(), self.on_error)
    }

    /// The rule set, shortest window first.
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// Whether a check may wait on the network (see [`Store::waits_on_io`]).
    pub fn waits_on_io(&self) -> bool {
        self.store.waits_on_io()
    }

    /// How often the store was called, failed, and was spared by its circuit breaker.
    pub fn store_stats(&self) -> crate::store::StoreStats {
        self.store.stats()
    }

    /// How many checks found the store failing (and fell back to `on_error`).
    pub fn error_count(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Checks `key` for `cost` units at `now` (seconds; the store's clock when
    /// `None`), logging them when every rule admits them.
    pub fn check(&self, key: &[u8], cost: u64, now: Option<f64>) -> Result<Decision> {
        self.decide(key, cost, now, Mode::Check)
    }

    /// What a check of `cost` would decide now, without logging anything.
    pub fn peek(&self, key: &[u8], cost: u64, now: Option<f64>) -> Result<Decision> {
        self.decide(key, cost, now, Mode::Peek)
    }

    /// Forgets everything logged for `key`.
    pub fn reset(&self, key: &[u8]) -> Result<()> {
        self.store.reset(&key_tag(key))
    }

    fn decide(&self, key: &[u8], cost: u64, now: Option<f64>, mode: Mode) -> Result<Decision> {
        if cost == 0 {
            return Err(Error::config("invalid cost 0: a check costs at least 1"));
        }
        let now_ms = now.map(now_to_ms).transpose()?;
        match self
            .store
            .apply(&key_tag(key), &self.rules, cost, now_ms, mode)
        {
            Ok(obs) => {
                self.in_outage.store(false, Ordering::Relaxed);
                Ok(Decision::from_observation(
                    &self.rules,
                    cost,
                    &obs,
                    mode == Mode::Check,
                ))
            }
            Err(err @ Error::Config(_)) => Err(err),
            Err(err) if self.on_error == OnError::Raise => Err(err),
            Err(err) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                let at = now_ms.unwrap_or_else(system_now_ms);
                let allowed = self.on_error == OnError::Allow;
                let mut decision = Decision::fallback(&self.rules, at, allowed);
                if !self.in_outage.swap(true, Ordering::Relaxed) {
                    let action = if allowed { "allowed" } else { "denied" };
                    let warning =
                        format!("ratekeeper: the store is failing ({err}); checks are {action} until it answers again");
                    log::warn!("{warning}");
                    decision.warning = Some(warning);
                }
                Ok(decision)
            }
        }
    }
}

/// Seconds (float) to whole milliseconds, rounded to the nearest.
pub fn now_to_ms(now: f64) -> Result<u64> {
    if !(0.0..=MAX_NOW_SECONDS).contains(&now) {
        return Err(Error::config(format!(
            "invalid now {now}: give seconds since the epoch, from 0 to {MAX_NOW_SECONDS}"
        )));
    }
    Ok((now * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_error_parses() {
        assert_eq!("deny".parse::<OnError>().unwrap(), OnError::Deny);
        assert!("maybe"
            .parse::<OnError>()
            .unwrap_err()
            .to_string()
            .contains("'maybe'"));
    }

    #[test]
    fn now_is_rounded_and_checked() {
        assert_eq!(now_to_ms(1.0005).unwrap(), 1001);
        assert_eq!(now_to_ms(1700000000.1234).unwrap(), 1_700_000_000_123);
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e12] {
            assert!(now_to_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cost_zero_is_refused() {
        let limiter = Limiter::open(
            RuleSet::parse("1/s").unwrap(),
            "memory://",
            &StoreOptions::default(),
            OnError::Allow,
        )
        .unwrap();
        assert!(limiter
            .check(b"k", 0, None)
            .unwrap_err()
            .to_string()
            .contains("cost"));
    }
}
