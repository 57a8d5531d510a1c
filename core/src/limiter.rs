//! The [`Limiter`]: a rule set, a store and a failure policy; what every binding wraps.

use crate::decision::{Decision, Observation};
use crate::denial_cache::{DenialCache, DEFAULT_CAP};
use crate::error::{Error, Result};
use crate::keys::key_tag;
use crate::metrics::{Metrics, Stats};
use crate::rule::RuleSet;
use crate::store::{self, system_now_ms, Mode, Request, Store, StoreOptions};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    in_outage: AtomicBool,
    denials: DenialCache,
    metrics: Metrics,
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
    /// Denials are remembered for up to [`crate::denial_cache::DEFAULT_CAP`] when the
    /// store is remote (see [`Limiter::with_denial_cache`]).
    pub fn with_store(rules: RuleSet, store: Arc<dyn Store>, on_error: OnError) -> Limiter {
        let windows = rules.rules().iter().map(|r| r.window_ms).collect();
        let cap = if store.waits_on_io() {
            DEFAULT_CAP
        } else {
            Duration::ZERO
        };
        Limiter {
            rules,
            store,
            on_error,
            in_outage: AtomicBool::new(false),
            metrics: Metrics::new(windows),
            denials: DenialCache::new(cap),
        }
    }

    /// This limiter, remembering a denial in-process for at most `cap` (zero
    /// turns it off). A `reset` in this process forgets at once; one made
    /// elsewhere is seen within `cap`.
    pub fn with_denial_cache(mut self, cap: Duration) -> Limiter {
        self.denials = DenialCache::new(cap);
        self
    }

    /// A limiter for other rules on the same store, with the same `on_error`.
    pub fn with_rules(&self, rules: RuleSet) -> Limiter {
        Limiter::with_store(rules, self.store.clone(), self.on_error)
            .with_denial_cache(self.denials.cap())
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
        self.metrics.snapshot().errors
    }

    /// What this limiter decided so far: outcomes and the peak use of each window.
    pub fn stats(&self) -> Stats {
        self.metrics.snapshot()
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
        let tag = key_tag(key);
        self.denials.forget(&tag);
        self.store.reset(&tag)
    }

    fn decide(&self, key: &[u8], cost: u64, now: Option<f64>, mode: Mode) -> Result<Decision> {
        let now_ms = check_arguments(cost, now)?;
        let tag = key_tag(key);
        if let Some(remembered) = self.remembered(&tag, cost, now_ms) {
            self.metrics.record(&remembered);
            return Ok(remembered);
        }
        let outcome = self.store.apply(&tag, &self.rules, cost, now_ms, mode);
        self.conclude(&tag, cost, now_ms, mode, outcome)
    }

    /// A denial remembered for this check; never for a check at an explicit
    /// time, which is arithmetic on that time.
    fn remembered(&self, tag: &[u8], cost: u64, now_ms: Option<u64>) -> Option<Decision> {
        if now_ms.is_some() {
            return None;
        }
        self.denials.lookup(tag, cost)
    }

    /// The decision from what the store answered (counted, for a check).
    fn conclude(
        &self,
        tag: &[u8],
        cost: u64,
        now_ms: Option<u64>,
        mode: Mode,
        outcome: Result<Observation>,
    ) -> Result<Decision> {
        let store_failed = outcome.is_err();
        let decided = self.decision_from(tag, cost, now_ms, mode, outcome);
        if mode == Mode::Check {
            match &decided {
                Ok(decision) => self.metrics.record(decision),
                Err(_) if store_failed => self.metrics.record_raised_error(),
                Err(_) => {}
            }
        }
        decided
    }

    /// The decision from what the store answered: its observation, or the
    /// `on_error` fallback (with one warning per outage) when it failed.
    fn decision_from(
        &self,
        tag: &[u8],
        cost: u64,
        now_ms: Option<u64>,
        mode: Mode,
        outcome: Result<Observation>,
    ) -> Result<Decision> {
        match outcome {
            Ok(obs) => {
                self.in_outage.store(false, Ordering::Relaxed);
                let decision =
                    Decision::from_observation(&self.rules, cost, &obs, mode == Mode::Check);
                if now_ms.is_none() && !decision.allowed {
                    self.denials.remember(tag, cost, &decision);
                }
                Ok(decision)
            }
            Err(err @ Error::Config(_)) => Err(err),
            Err(err) if self.on_error == OnError::Raise => Err(err),
            Err(err) => {
                let at = now_ms.unwrap_or_else(system_now_ms);
                let allowed = self.on_error == OnError::Allow;
                let mut decision = Decision::fallback(&self.rules, at, allowed);
                if !self.in_outage.swap(true, Ordering::Relaxed) {
                    let action = if allowed { "allowed" } else { "denied" };
                    let warning = format!(
                        "the store is failing ({err}); checks are {action} until it answers again"
                    );
                    log::warn!("{warning}");
                    decision.warning = Some(warning);
                }
                Ok(decision)
            }
        }
    }

    /// Checks several keys against this limiter's rules, in one round trip
    /// where the store allows it (a Redis pipeline). Each key is checked
    /// atomically on its own; the decisions come back in order.
    pub fn check_many(&self, keys: &[&[u8]], cost: u64, now: Option<f64>) -> Result<Vec<Decision>> {
        let items: Vec<(&Limiter, &[u8], u64)> =
            keys.iter().map(|&key| (self, key, cost)).collect();
        check_batch(&items, now)
    }
}

/// The time of a check in ms, after checking its cost and time.
fn check_arguments(cost: u64, now: Option<f64>) -> Result<Option<u64>> {
    if cost == 0 {
        return Err(Error::config("invalid cost 0: a check costs at least 1"));
    }
    now.map(now_to_ms).transpose()
}

/// Checks several `(limiter, key, cost)` at once, say the per-IP and the
/// per-user rules of one request: limiters sharing one store (see
/// [`Limiter::with_rules`]) are asked in one round trip. Each check is atomic
/// on its own and logs when its own rules admit it, whatever the others
/// decide; the decisions come back in order.
pub fn check_batch(items: &[(&Limiter, &[u8], u64)], now: Option<f64>) -> Result<Vec<Decision>> {
    let mut now_ms = None;
    for &(_, _, cost) in items {
        now_ms = check_arguments(cost, now)?;
    }
    let tags: Vec<Vec<u8>> = items.iter().map(|&(_, key, _)| key_tag(key)).collect();
    let mut decisions: Vec<Option<Decision>> = items
        .iter()
        .zip(&tags)
        .map(|(&(limiter, _, cost), tag)| {
            let remembered = limiter.remembered(tag, cost, now_ms);
            if let Some(decision) = &remembered {
                limiter.metrics.record(decision);
            }
            remembered
        })
        .collect();
    let pending: Vec<usize> = (0..items.len())
        .filter(|&i| decisions[i].is_none())
        .collect();
    let shared = pending
        .windows(2)
        .all(|pair| Arc::ptr_eq(&items[pair[0]].0.store, &items[pair[1]].0.store));
    let outcomes: Vec<Result<Observation>> = match pending.first() {
        Some(&first) if shared => {
            let requests: Vec<Request<'_>> = pending
                .iter()
                .map(|&i| Request {
                    tag: &tags[i],
                    rules: &items[i].0.rules,
                    cost: items[i].2,
                    now_ms,
                    mode: Mode::Check,
                })
                .collect();
            items[first].0.store.apply_many(&requests)
        }
        _ => pending
            .iter()
            .map(|&i| {
                items[i]
                    .0
                    .store
                    .apply(&tags[i], &items[i].0.rules, items[i].2, now_ms, Mode::Check)
            })
            .collect(),
    };
    for (&i, outcome) in pending.iter().zip(outcomes) {
        let (limiter, _, cost) = items[i];
        decisions[i] = Some(limiter.conclude(&tags[i], cost, now_ms, Mode::Check, outcome)?);
    }
    Ok(decisions.into_iter().flatten().collect())
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
