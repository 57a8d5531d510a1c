//! The [`Limiter`]: a rule set, with its scope and tiers, over a
//! [`Warden`] (the store, the shared controls, the failure policy, the
//! clock); what every binding wraps. Its options are in [`options`], the
//! view of the controls each process holds in `view`, the warden in [`warden`], one
//! check's way from arguments to decision in `pipeline`, batches in
//! [`batch`], waiting for a slot in [`wait`], and reservations, checked for
//! an estimate and settled to what the work cost, in `reserve`.

pub mod batch;
mod hold;
mod metered_reserve;
mod meters;
pub mod options;
mod pipeline;
mod reserve;
mod view;
pub mod wait;
pub mod warden;

#[cfg(feature = "async")]
pub use batch::check_batch_async;
pub use batch::{check_batch, BatchItem};
pub use hold::Hold;
pub use meters::Meter;
pub use options::{actual_cost_from, cost_from, Asked, CheckOptions, Offender, OnError};
pub use reserve::{MeterSettled, Reservation, Settled};
pub use view::{flush_denials, flush_denials_at_exit, DEFAULT_CONTROLS_REFRESH};
pub use wait::Acquired;
pub use warden::{check_controls_refresh, Listed, Warden};

use self::pipeline::denial_key;
use crate::clock::Clock;
use crate::controls::{self, Fail2Ban, Strike};
use crate::decision::Decision;
use crate::denial_cache::DenialCache;
use crate::error::Result;
use crate::keys::{check_scope, key_tag};
use crate::metrics::{Metrics, Stats};
use crate::process::ProcessLocal;
use crate::rule::RuleSet;
use crate::store::{self, Mode, Store, StoreOptions};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

/// What a limiter keeps per process: rebuilt, empty, in a forked child.
pub(crate) struct ProcessState {
    pub(crate) denials: DenialCache,
    pub(crate) metrics: Metrics,
    /// Whether the store was failing at the last check (one warning per outage).
    pub(crate) in_outage: AtomicBool,
    pub(crate) epoch_seen: AtomicU64,
}

/// A limiter's per-process state, its peaks kept for these windows.
fn process_state(cap: Duration, windows: Vec<u64>) -> ProcessLocal<ProcessState> {
    ProcessLocal::new(move || ProcessState {
        denials: DenialCache::new(cap),
        metrics: Metrics::new(windows.clone()),
        in_outage: AtomicBool::new(false),
        epoch_seen: AtomicU64::new(controls::epoch()),
    })
}

/// A rule set checked against a store, with its scope and tiers, over the
/// [`Warden`] of that store.
pub struct Limiter {
    pub(crate) rules: RuleSet,
    pub(crate) scope: String,
    pub(crate) tiers: Vec<(String, RuleSet)>,
    /// Its meters, when it has several named rule sets (see [`crate::meter`]).
    pub(crate) meters: Vec<Meter>,
    /// The time a hold's lease lapses after, unless the hold gives one (ms).
    pub(crate) lease_ms: u64,
    pub(crate) warden: Warden,
    local: ProcessLocal<ProcessState>,
}

/// The windows of a rule set, whose peaks a limiter's stats keep.
fn windows(rules: &RuleSet) -> Vec<u64> {
    rules.rules().iter().map(|r| r.window_ms).collect()
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
        Limiter::over(rules, Warden::new(store, on_error))
    }

    /// A limiter for `rules` over `warden` (what [`Warden::limiter`] makes).
    pub(crate) fn over(rules: RuleSet, warden: Warden) -> Limiter {
        let local = process_state(warden.denial_cap, windows(&rules));
        Limiter {
            rules,
            scope: String::new(),
            tiers: Vec::new(),
            meters: Vec::new(),
            lease_ms: crate::in_flight::DEFAULT_LEASE_MS,
            warden,
            local,
        }
    }

    /// This process's denial cache, counters and outage flag.
    pub(crate) fn state(&self) -> &ProcessState {
        self.local.get()
    }

    /// The warden this limiter checks over: its store, failure policy,
    /// shared controls and clock (a gate's throttles share their gate's).
    pub fn warden(&self) -> &Warden {
        &self.warden
    }

    /// This limiter, remembering a denial in-process for at most `cap` (zero
    /// turns it off). A `reset` in this process forgets at once; one made
    /// elsewhere is seen within `cap`.
    pub fn with_denial_cache(mut self, cap: Duration) -> Limiter {
        self.warden.denial_cap = cap;
        let every = match self.meters.is_empty() {
            true => windows(&self.rules),
            false => self.meters.iter().flat_map(|m| windows(&m.rules)).collect(),
        };
        self.local = process_state(cap, every);
        self
    }

    /// This limiter, keeping its logs apart from other limiters' under
    /// `scope` (say `"api"`) while sharing the keys' records.
    pub fn with_scope(mut self, scope: &str) -> Result<Limiter> {
        check_scope(scope)?;
        self.scope = scope.to_owned();
        for meter in &mut self.meters {
            meter.scope = crate::meter::meter_scope(scope, &meter.name);
        }
        Ok(self)
    }

    /// This limiter with named tiers: a check may name one, and a tier stored
    /// for a key (by `Admin::set_tier`) selects one.
    pub fn with_tiers(mut self, tiers: Vec<(String, RuleSet)>) -> Result<Limiter> {
        controls::check_tiers(&tiers)?;
        for (name, rules) in &tiers {
            rules.without_in_flight(&format!("the tier '{name}'"))?;
        }
        if !tiers.is_empty() && self.rules.in_flight().is_some() {
            return Err(crate::error::Error::config(
                "a limiter with an in-flight rule has no tiers: give each tier a limiter of its own",
            ));
        }
        if !tiers.is_empty() && !self.meters.is_empty() {
            return Err(crate::error::Error::config(
                "a limiter has meters or tiers, not both: give each tier a limiter of its own",
            ));
        }
        self.tiers = tiers;
        Ok(self)
    }

    /// This limiter reading the shared controls (switches, address lists)
    /// again every `refresh` (0.1 to 60 seconds).
    pub fn with_controls_refresh(mut self, refresh: Duration) -> Result<Limiter> {
        self.warden = self.warden.with_controls_refresh(refresh)?;
        Ok(self)
    }

    /// This limiter reading (`true`, the default) or ignoring each key's
    /// record (listings, tier, override) in its check. Ignoring it
    /// spares Redis one hash read per check.
    pub fn with_records(mut self, read: bool) -> Limiter {
        self.warden.read_records = read;
        self
    }

    /// A limiter for other rules on the same warden: the same store,
    /// `on_error`, denial cache, controls refresh and clock, and the same
    /// lease (and no scope or tiers until given).
    pub fn with_rules(&self, rules: RuleSet) -> Limiter {
        self.warden.limiter(rules).with_lease(self.lease_ms)
    }

    /// This limiter on `clock` instead of the process's (see [`Clock`]):
    /// its time for checks that give none, and its switch.
    pub fn with_clock(mut self, clock: Clock) -> Limiter {
        self.warden.clock = clock;
        self
    }

    /// The clock this limiter reads.
    pub fn clock(&self) -> &Clock {
        &self.warden.clock
    }

    /// The rule set, shortest window first.
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// The scope ("" for none).
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The tiers, by name.
    pub fn tiers(&self) -> &[(String, RuleSet)] {
        &self.tiers
    }

    /// The store this limiter checks against.
    pub fn store(&self) -> Arc<dyn Store> {
        self.warden.store()
    }

    /// Whether a check may wait on the network (see [`crate::store::StoreAccess::waits_on_io`]).
    pub fn waits_on_io(&self) -> bool {
        self.warden.waits_on_io()
    }

    /// How often the store was called, failed, and was spared by its circuit breaker.
    pub fn store_stats(&self) -> crate::store::StoreStats {
        self.warden.store_stats()
    }

    /// How many checks found the store failing (and fell back to `on_error`).
    pub fn error_count(&self) -> u64 {
        self.state().metrics.snapshot().errors
    }

    /// What this limiter decided so far: outcomes and the peak use of each window.
    pub fn stats(&self) -> Stats {
        self.state().metrics.snapshot()
    }

    /// Checks `key` for `cost` units at `now` (seconds; the store's clock when
    /// `None`), logging them when every rule admits them.
    pub fn check(&self, key: &[u8], cost: u64, now: Option<f64>) -> Result<Decision> {
        self.check_with(
            key,
            &CheckOptions {
                cost,
                now,
                ..CheckOptions::default()
            },
        )
    }

    /// Checks `key` as `options` say (cost, time, tier, client address).
    pub fn check_with(&self, key: &[u8], options: &CheckOptions<'_>) -> Result<Decision> {
        self.decide(key, options, Mode::Check)
    }

    /// What a check of `cost` would decide now, without logging anything.
    pub fn peek(&self, key: &[u8], cost: u64, now: Option<f64>) -> Result<Decision> {
        self.peek_with(
            key,
            &CheckOptions {
                cost,
                now,
                ..CheckOptions::default()
            },
        )
    }

    /// What a check as `options` say would decide now, without logging anything.
    pub fn peek_with(&self, key: &[u8], options: &CheckOptions<'_>) -> Result<Decision> {
        self.decide(key, options, Mode::Peek)
    }

    /// [`Limiter::check_with`], awaiting the store instead of blocking a
    /// thread on it (Redis: the process's one multiplexed connection; the
    /// memory store answers at once). Dropped before it ends, a check has
    /// either logged once or not at all.
    #[cfg(feature = "async")]
    pub async fn check_async(&self, key: &[u8], options: &CheckOptions<'_>) -> Result<Decision> {
        self.decide_async(key, options, Mode::Check).await
    }

    /// [`Limiter::peek_with`], awaited.
    #[cfg(feature = "async")]
    pub async fn peek_async(&self, key: &[u8], options: &CheckOptions<'_>) -> Result<Decision> {
        self.decide_async(key, options, Mode::Peek).await
    }

    /// [`Limiter::reset`], awaited.
    #[cfg(feature = "async")]
    pub async fn reset_async(&self, key: &[u8]) -> Result<()> {
        let tag = self.forget_denials(key);
        let store = &self.warden.store;
        for scope in self.log_scopes() {
            match store.as_async() {
                Some(log) => log.reset_async(&tag, scope).await?,
                None => store.reset(&tag, scope)?,
            }
        }
        Ok(())
    }

    /// Forgets the denials remembered for `key` here (under every tier); its tag.
    fn forget_denials(&self, key: &[u8]) -> Vec<u8> {
        let tag = key_tag(key);
        let denials = &self.state().denials;
        denials.forget(&tag);
        for (name, _) in &self.tiers {
            denials.forget(&denial_key(&tag, Some(name)));
        }
        tag
    }

    /// Whether the shared controls (switches, address lists) are held in this
    /// process as of its last change: [`Limiter::screen`] then answers from
    /// memory without waiting on the store.
    pub fn controls_ready(&self) -> bool {
        self.warden.controls_ready()
    }

    /// Forgets everything logged for `key` by this limiter (its scope; each
    /// of its meters).
    pub fn reset(&self, key: &[u8]) -> Result<()> {
        let tag = self.forget_denials(key);
        for scope in self.log_scopes() {
            self.warden.store.reset(&tag, scope)?;
        }
        Ok(())
    }

    /// The scopes its logs are kept under: its own, or each meter's.
    fn log_scopes(&self) -> Vec<&str> {
        match self.meters.is_empty() {
            true => vec![self.scope.as_str()],
            false => self.meters.iter().map(|m| m.scope.as_str()).collect(),
        }
    }

    /// Counts one fail2ban strike against `offender` (a bad request, a failed
    /// login); the strike that makes `rule.maxretry` within `rule.findtime`
    /// blocks it for `rule.bantime`, with the reason `fail2ban <name>`. A key
    /// is banned as that exact key, even when its text reads as an address or
    /// a range (it may be what a client typed), in this limiter's scope; only
    /// [`Offender::Address`], the client a middleware saw, bans an address
    /// (everywhere): its client's network (an IPv6 address as its /64; a
    /// middleware naming clients by other prefixes gives the network, at
    /// most an IPv4 /16 or IPv6 /48 wide). When the store fails, `on_error`
    /// applies as to a check: `raise` returns the error, `allow` counts
    /// nothing and bans nothing, `deny` reports a ban (the request is
    /// refused) without storing one. The outage's one warning is left to the
    /// first check, which carries it to the binding's logger.
    pub fn penalize(
        &self,
        offender: Offender<'_>,
        rule: &Fail2Ban,
        now: Option<f64>,
    ) -> Result<Strike> {
        self.warden.penalize(offender, rule, &self.scope, now)
    }

    /// [`Limiter::penalize`], awaited.
    #[cfg(feature = "async")]
    pub async fn penalize_async(
        &self,
        offender: Offender<'_>,
        rule: &Fail2Ban,
        now: Option<f64>,
    ) -> Result<Strike> {
        self.warden
            .penalize_async(offender, rule, &self.scope, now)
            .await
    }

    /// How the address lists judge the client address `ip` now: a blocked or
    /// safelisted decision over this limiter's rules (shadow mode applied),
    /// or `None` when it is not listed. Asks no store (the lists are held
    /// in-process): middlewares call it for every request, limited or not.
    pub fn screen(&self, ip: &str) -> Option<Decision> {
        Some(self.warden.screen(ip)?.decision(&self.rules))
    }

    /// [`Limiter::screen`], awaiting the store when the controls must be
    /// read first (the process's first screen, or the first after a change
    /// it made).
    #[cfg(feature = "async")]
    pub async fn screen_async(&self, ip: &str) -> Option<Decision> {
        Some(self.warden.screen_async(ip).await?.decision(&self.rules))
    }
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
    fn a_cost_past_every_limit_is_a_denial_that_never_passes() {
        let limiter = Limiter::open(
            RuleSet::parse("5/s; 10/m").unwrap(),
            "memory://",
            &StoreOptions::default(),
            OnError::Raise,
        )
        .unwrap();
        for cost in [6, 1 << 40, 1 << 63, u64::MAX] {
            let denied = limiter.check(b"k", cost, None).unwrap();
            assert!(!denied.allowed(), "cost {cost}");
            assert_eq!(denied.retry_after_ms, None, "cost {cost}");
        }
        assert!(limiter.check(b"k", 5, None).unwrap().allowed());
        assert_eq!(cost_from(i128::MAX).unwrap(), u64::MAX);
        assert_eq!(cost_from(7).unwrap(), 7);
        for wrong in [0, -1, i128::MIN] {
            assert!(cost_from(wrong).unwrap_err().to_string().contains("cost"));
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
