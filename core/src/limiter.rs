//! The [`Limiter`]: a rule set, a store and a failure policy; what every binding wraps.

use crate::decision::{Decision, Observation};
use crate::denial_cache::{DenialCache, DEFAULT_CAP};
use crate::error::{Error, Result};
use crate::keys::{check_scope, key_tag};
use crate::metrics::{Metrics, Stats};
use crate::net::Cidr;
use crate::policy::{self, Applied, Fail2Ban, List, Shared, SharedHash, Strike, Target, Verdict};
use crate::process::ProcessLocal;
use crate::rule::RuleSet;
use crate::store::{self, system_now_ms, Mode, Request, Store, StoreOptions};
use std::borrow::Cow;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

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

/// How often a process reads the shared policies (switches, address lists) again by default.
pub const DEFAULT_POLICY_REFRESH: Duration = Duration::from_secs(2);

/// The shared policies (switches, address lists) as this process holds them.
///
/// On a remote store a request never waits on their periodic read: when one
/// is due, a background thread reads them while every caller goes on with the
/// view held. Only the first read in a process, and the first after a change
/// made in this process, are made by the caller (without the GIL or GVL).
pub(crate) struct SharedView {
    refresh: Duration,
    held: RwLock<Arc<Shared>>,
    /// When to read next, and the policy epoch last seen (`u64::MAX`: never read).
    next: Mutex<(Instant, u64)>,
    /// Whether a background read is under way.
    reading: AtomicBool,
}

/// The policy view of each process, shared by the limiters of one store.
type Policies = Arc<ProcessLocal<SharedView>>;

fn policies(refresh: Duration) -> Policies {
    Arc::new(ProcessLocal::new(move || SharedView {
        refresh,
        held: RwLock::new(Arc::new(Shared {
            version: u64::MAX,
            ..Shared::default()
        })),
        next: Mutex::new((Instant::now(), u64::MAX)),
        reading: AtomicBool::new(false),
    }))
}

impl SharedView {
    fn held(&self) -> Arc<Shared> {
        self.held.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the policies now when their version moved (a failure keeps what is held).
    fn read(&self, store: &dyn Store) -> Arc<Shared> {
        let held = self.held();
        match store.policy_version() {
            Ok(version) if version != held.version => match load_shared(store, version) {
                Ok(fresh) => {
                    let fresh = Arc::new(fresh);
                    *self.held.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
                    fresh
                }
                Err(_) => held,
            },
            _ => held,
        }
    }
}

/// The policies now (see [`SharedView`]).
fn current_policies(view: &Policies, store: &Arc<dyn Store>) -> Arc<Shared> {
    let local = view.get();
    if !store.waits_on_io() {
        return local.read(&**store);
    }
    let held = local.held();
    let Ok(mut next) = local.next.try_lock() else {
        return held;
    };
    let (now, epoch) = (Instant::now(), policy::epoch());
    if now < next.0 && next.1 == epoch {
        return held;
    }
    let first_or_changed_here = next.1 != epoch;
    *next = (now + local.refresh, epoch);
    drop(next);
    if first_or_changed_here {
        return local.read(&**store);
    }
    if !local.reading.swap(true, Ordering::AcqRel) {
        let (view, store) = (view.clone(), store.clone());
        let spawned = std::thread::Builder::new()
            .name("ratekeeper-policies".into())
            .spawn(move || {
                let local = view.get();
                local.read(&*store);
                local.reading.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            local.reading.store(false, Ordering::Release);
        }
    }
    held
}

/// Reads the shared policies at `version`.
pub(crate) fn load_shared(store: &dyn Store, version: u64) -> Result<Shared> {
    Ok(Shared::from_hashes(
        version,
        &store.shared(SharedHash::Nets)?,
        &store.shared(SharedHash::Switches)?,
    ))
}

/// How one check is asked for: its cost and time, the tier the caller names,
/// the client address.
#[derive(Debug, Clone, Copy)]
pub struct CheckOptions<'a> {
    /// Units the check costs (at least 1).
    pub cost: u64,
    /// Seconds since the epoch; the store's clock when `None`.
    pub now: Option<f64>,
    /// The tier whose rules apply (one of the limiter's tiers), unless the
    /// key's record stores another tier or an override.
    pub tier: Option<&'a str>,
    /// The client address, matched against listed addresses and ranges (a key
    /// that is itself an address is matched without it).
    pub ip: Option<&'a str>,
}

impl Default for CheckOptions<'_> {
    fn default() -> Self {
        CheckOptions {
            cost: 1,
            now: None,
            tier: None,
            ip: None,
        }
    }
}

/// A check made ready to send to the store, or already decided in-process.
enum Prepared<'l> {
    Decided(Decision),
    Ask {
        tag: Vec<u8>,
        rules: Cow<'l, RuleSet>,
        tiers: Cow<'l, [(String, RuleSet)]>,
        shared: Arc<Shared>,
    },
}

/// What a limiter keeps per process: rebuilt, empty, in a forked child.
struct ProcessState {
    denials: DenialCache,
    metrics: Metrics,
    /// Whether the store was failing at the last check (one warning per outage).
    in_outage: AtomicBool,
    epoch_seen: AtomicU64,
}

fn process_state(cap: Duration, windows: Vec<u64>) -> ProcessLocal<ProcessState> {
    ProcessLocal::new(move || ProcessState {
        denials: DenialCache::new(cap),
        metrics: Metrics::new(windows.clone()),
        in_outage: AtomicBool::new(false),
        epoch_seen: AtomicU64::new(policy::epoch()),
    })
}

/// A rule set checked against a store, with its tiers and the policies.
pub struct Limiter {
    rules: RuleSet,
    scope: String,
    tiers: Vec<(String, RuleSet)>,
    read_records: bool,
    store: Arc<dyn Store>,
    shared: Policies,
    on_error: OnError,
    denial_cap: Duration,
    local: ProcessLocal<ProcessState>,
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
        let cap = if store.waits_on_io() {
            DEFAULT_CAP
        } else {
            Duration::ZERO
        };
        Limiter::build(
            rules,
            store,
            policies(DEFAULT_POLICY_REFRESH),
            on_error,
            cap,
        )
    }

    fn build(
        rules: RuleSet,
        store: Arc<dyn Store>,
        shared: Policies,
        on_error: OnError,
        cap: Duration,
    ) -> Limiter {
        let windows = rules.rules().iter().map(|r| r.window_ms).collect();
        Limiter {
            rules,
            scope: String::new(),
            tiers: Vec::new(),
            read_records: true,
            store,
            shared,
            on_error,
            denial_cap: cap,
            local: process_state(cap, windows),
        }
    }

    /// This process's denial cache, counters and outage flag.
    fn state(&self) -> &ProcessState {
        self.local.get()
    }

    /// This limiter, remembering a denial in-process for at most `cap` (zero
    /// turns it off). A `reset` in this process forgets at once; one made
    /// elsewhere is seen within `cap`.
    pub fn with_denial_cache(mut self, cap: Duration) -> Limiter {
        let windows = self.rules.rules().iter().map(|r| r.window_ms).collect();
        self.denial_cap = cap;
        self.local = process_state(cap, windows);
        self
    }

    /// This limiter, keeping its logs apart from other limiters' under
    /// `scope` (say `"api"`) while sharing the keys' policy records.
    pub fn with_scope(mut self, scope: &str) -> Result<Limiter> {
        check_scope(scope)?;
        self.scope = scope.to_owned();
        Ok(self)
    }

    /// This limiter with named tiers: a check may name one, and a tier stored
    /// for a key (see [`crate::admin::Admin::set_tier`]) selects one.
    pub fn with_tiers(mut self, tiers: Vec<(String, RuleSet)>) -> Result<Limiter> {
        for (i, (name, _)) in tiers.iter().enumerate() {
            policy::check_tier_name(name)?;
            if tiers[..i].iter().any(|(other, _)| other == name) {
                return Err(Error::config(format!("tier '{name}' is given twice")));
            }
        }
        self.tiers = tiers;
        Ok(self)
    }

    /// This limiter reading the shared policies (switches, address lists)
    /// again every `refresh` (0.1 to 60 seconds).
    pub fn with_policy_refresh(mut self, refresh: Duration) -> Result<Limiter> {
        if refresh < Duration::from_millis(100) || refresh > Duration::from_secs(60) {
            return Err(Error::config(format!(
                "invalid policy_refresh {}: give 0.1 to 60 seconds",
                crate::error::shown(refresh.as_secs_f64())
            )));
        }
        self.shared = policies(refresh);
        Ok(self)
    }

    /// This limiter reading (`true`, the default) or ignoring each key's
    /// policy record (listings, tier, override) in its check. Ignoring it
    /// spares Redis one hash read per check.
    pub fn with_records(mut self, read: bool) -> Limiter {
        self.read_records = read;
        self
    }

    /// A limiter for other rules on the same store, with the same `on_error`,
    /// denial cache and policy refresh (and no scope or tiers until given).
    pub fn with_rules(&self, rules: RuleSet) -> Limiter {
        Limiter::build(
            rules,
            self.store.clone(),
            self.shared.clone(),
            self.on_error,
            self.denial_cap,
        )
        .with_records(self.read_records)
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
        self.store.clone()
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

    /// Forgets everything logged for `key` by this limiter (its scope).
    pub fn reset(&self, key: &[u8]) -> Result<()> {
        let tag = key_tag(key);
        let denials = &self.state().denials;
        denials.forget(&tag);
        for (name, _) in &self.tiers {
            denials.forget(&denial_key(&tag, Some(name)));
        }
        self.store.reset(&tag, &self.scope)
    }

    /// Counts one fail2ban strike against `offender` (a bad request, a failed
    /// login); the strike that makes `rule.maxretry` within `rule.findtime`
    /// blocks it for `rule.bantime`, with the reason `fail2ban <name>`. A key
    /// is banned as that exact key, even when its text reads as an address or
    /// a range (it may be what a client typed); only [`Offender::Address`],
    /// the client address a middleware saw, bans an address (never a range).
    /// When the store fails, `on_error` applies as to a check: `raise`
    /// returns the error, `allow` counts nothing and bans nothing, `deny`
    /// reports a ban (the request is refused) without storing one. The
    /// outage's one warning is left to the first check, which carries it to
    /// the binding's logger.
    pub fn penalize(
        &self,
        offender: Offender<'_>,
        rule: &Fail2Ban,
        now: Option<f64>,
    ) -> Result<Strike> {
        let now_ms = now.map(now_to_ms).transpose()?;
        let (tag, target) = match offender {
            Offender::Key(key) => {
                if key.is_empty() {
                    return Err(Error::config("the key is empty"));
                }
                (key_tag(key), Target::Key(key.to_vec()))
            }
            Offender::Address(ip) => {
                let addr = crate::net::parse_hop(ip).ok_or_else(|| {
                    Error::config(format!(
                        "invalid client address '{}': give one IPv4 or IPv6 address",
                        ip.escape_debug()
                    ))
                })?;
                let text = crate::net::canonical(addr).to_string();
                (key_tag(text.as_bytes()), Target::Net(Cidr::parse(&text)?))
            }
        };
        let outcome = self.store.strike(&tag, rule, now_ms).and_then(|strike| {
            if let Some(until_ms) = strike.until_ms {
                let admin = crate::admin::Admin::new(self.store.clone());
                let reason = format!("fail2ban {}", rule.name);
                admin.put_target(List::Block, target, until_ms, &reason, now_ms)?;
            }
            Ok(strike)
        });
        match outcome {
            Err(Error::Storage(_)) if self.on_error != OnError::Raise => Ok(Strike {
                strikes: 0,
                banned: self.on_error == OnError::Deny,
                until_ms: None,
            }),
            other => other,
        }
    }

    /// How the address lists judge the client address `ip` now: a blocked or
    /// safelisted decision (shadow mode applied), or `None` when it is not
    /// listed. Asks no store (the lists are held in-process): middlewares
    /// call it for every request, limited or not.
    pub fn screen(&self, ip: &str) -> Option<Decision> {
        let shared = current_policies(&self.shared, &self.store);
        if !shared.switches.enabled || !shared.has_nets() {
            return None;
        }
        let now_ms = system_now_ms();
        let (list, listing) = shared.judge_ip(crate::net::parse_hop(ip)?, now_ms)?;
        Some(finish(
            Decision::listed(&self.rules, now_ms, list, listing),
            &shared,
        ))
    }

    fn decide(&self, key: &[u8], options: &CheckOptions<'_>, mode: Mode) -> Result<Decision> {
        let now_ms = check_arguments(options.cost, options.now)?;
        let (tag, rules, tiers, shared) = match self.prepare(key, options, now_ms, mode)? {
            Prepared::Decided(decision) => return Ok(decision),
            Prepared::Ask {
                tag,
                rules,
                tiers,
                shared,
            } => (tag, rules, tiers, shared),
        };
        let request = self.request(&tag, &rules, &tiers, options.cost, now_ms, mode);
        let outcome = self.store.apply(&request);
        let decision = self.conclude(&request, options.tier, outcome)?;
        Ok(finish(decision, &shared))
    }

    /// What can be decided without the store (switched off, a listed address,
    /// a remembered denial), or the rules and tiers to send it.
    /// (Counted, for a check decided here.)
    fn prepare<'l>(
        &'l self,
        key: &[u8],
        options: &CheckOptions<'_>,
        now_ms: Option<u64>,
        mode: Mode,
    ) -> Result<Prepared<'l>> {
        let decided = |decision: Decision, shared: &Shared| {
            if mode == Mode::Check {
                self.state().metrics.record(&decision);
            }
            Ok(Prepared::Decided(finish(decision, shared)))
        };
        let shared = current_policies(&self.shared, &self.store);
        let epoch = policy::epoch();
        if self.state().epoch_seen.swap(epoch, Ordering::AcqRel) != epoch {
            self.state().denials.clear();
        }
        let rules = self.rules_for(options.tier, &shared)?;
        if !shared.switches.enabled {
            let at = now_ms.unwrap_or_else(system_now_ms);
            return decided(Decision::unlimited(&rules, at), &shared);
        }
        if shared.has_nets() {
            let at = now_ms.unwrap_or_else(system_now_ms);
            if let Some((list, listing)) =
                client_address(key, options.ip).and_then(|ip| shared.judge_ip(ip, at))
            {
                return decided(Decision::listed(&rules, at, list, listing), &shared);
            }
        }
        let tag = key_tag(key);
        if let Some(remembered) =
            self.remembered(&denial_key(&tag, options.tier), options.cost, now_ms)
        {
            return decided(remembered, &shared);
        }
        let tiers = if shared.switches.multiplier == 1.0 {
            Cow::Borrowed(self.tiers.as_slice())
        } else {
            Cow::Owned(
                self.tiers
                    .iter()
                    .map(|(name, rules)| (name.clone(), shared.switches.scale(rules)))
                    .collect(),
            )
        };
        Ok(Prepared::Ask {
            tag,
            rules,
            tiers,
            shared,
        })
    }

    /// The rules a check uses unless the key's record selects others: the
    /// named tier's or the limiter's, times the multiplier.
    fn rules_for(&self, tier: Option<&str>, shared: &Shared) -> Result<Cow<'_, RuleSet>> {
        let base = match tier {
            None => &self.rules,
            Some(name) => match self.tiers.iter().find(|(n, _)| n == name) {
                Some((_, rules)) => rules,
                None => {
                    let known: Vec<&str> = self.tiers.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(Error::config(format!(
                        "unknown tier '{name}': this limiter's tiers are [{}]",
                        known.join(", ")
                    )));
                }
            },
        };
        Ok(if shared.switches.multiplier == 1.0 {
            Cow::Borrowed(base)
        } else {
            Cow::Owned(shared.switches.scale(base))
        })
    }

    fn request<'r>(
        &'r self,
        tag: &'r [u8],
        rules: &'r RuleSet,
        tiers: &'r [(String, RuleSet)],
        cost: u64,
        now_ms: Option<u64>,
        mode: Mode,
    ) -> Request<'r> {
        Request {
            tag,
            scope: &self.scope,
            rules,
            tiers,
            policy: self.read_records,
            cost,
            now_ms,
            mode,
        }
    }

    /// A denial remembered for this check; never for a check at an explicit
    /// time, which is arithmetic on that time.
    fn remembered(&self, tag: &[u8], cost: u64, now_ms: Option<u64>) -> Option<Decision> {
        if now_ms.is_some() {
            return None;
        }
        self.state().denials.lookup(tag, cost)
    }

    /// The decision from what the store answered (counted, for a check).
    fn conclude(
        &self,
        request: &Request<'_>,
        tier: Option<&str>,
        outcome: Result<Observation>,
    ) -> Result<Decision> {
        let store_failed = outcome.is_err();
        let decided = self.decision_from(request, tier, outcome);
        if request.mode == Mode::Check {
            match &decided {
                Ok(decision) => self.state().metrics.record(decision),
                Err(_) if store_failed => self.state().metrics.record_raised_error(),
                Err(_) => {}
            }
        }
        decided
    }

    /// The decision from what the store answered: its observation, or the
    /// `on_error` fallback (with one warning per outage) when it failed.
    fn decision_from(
        &self,
        request: &Request<'_>,
        tier: Option<&str>,
        outcome: Result<Observation>,
    ) -> Result<Decision> {
        match outcome {
            Ok(obs) => {
                self.state().in_outage.store(false, Ordering::Relaxed);
                let check = request.mode == Mode::Check;
                let decision = match &obs.verdict {
                    Verdict::Listed(list, listing) => {
                        Decision::listed(request.rules, obs.now_ms, *list, listing)
                    }
                    Verdict::Limited(applied) => {
                        let rules = match applied {
                            Applied::Given => request.rules,
                            Applied::Tier(name) => request
                                .tiers
                                .iter()
                                .find(|(n, _)| n == name)
                                .map_or(request.rules, |(_, r)| r),
                            Applied::Override(rules) => rules,
                        };
                        Decision::from_observation(rules, request.cost, &obs, check)
                            .with_applied(applied, tier)
                    }
                };
                if request.now_ms.is_none() && !decision.allowed {
                    let key = denial_key(request.tag, tier);
                    self.state().denials.remember(&key, request.cost, &decision);
                }
                Ok(decision)
            }
            Err(err @ Error::Config(_)) => Err(err),
            Err(err) if self.on_error == OnError::Raise => Err(err),
            Err(err) => {
                let at = request.now_ms.unwrap_or_else(system_now_ms);
                let allowed = self.on_error == OnError::Allow;
                let mut decision = Decision::fallback(request.rules, at, allowed);
                if !self.state().in_outage.swap(true, Ordering::Relaxed) {
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
        let items: Vec<BatchItem<'_>> = keys
            .iter()
            .map(|&key| BatchItem {
                limiter: self,
                key,
                cost,
                tier: None,
                ip: None,
            })
            .collect();
        check_batch(&items, now)
    }
}

/// What a fail2ban strike is counted against (see [`Limiter::penalize`]).
#[derive(Debug, Clone, Copy)]
pub enum Offender<'a> {
    /// An exact key (a user, an e-mail address typed into a form...).
    Key(&'a [u8]),
    /// The client address the request came from, as text.
    Address(&'a str),
}

/// Where a denial is remembered: per key and the tier the caller named (a
/// denial under one tier says nothing of another).
fn denial_key<'t>(tag: &'t [u8], tier: Option<&str>) -> Cow<'t, [u8]> {
    match tier {
        None => Cow::Borrowed(tag),
        Some(tier) => {
            let mut key = tag.to_vec();
            key.push(0);
            key.extend_from_slice(tier.as_bytes());
            Cow::Owned(key)
        }
    }
}

/// The address a check is about: the one given, else the key when it is one.
fn client_address(key: &[u8], ip: Option<&str>) -> Option<IpAddr> {
    match ip {
        Some(ip) => crate::net::parse_hop(ip),
        None => std::str::from_utf8(key).ok()?.parse().ok(),
    }
}

/// Shadow mode: a denial is reported (`shadowed`) but the check is allowed.
fn finish(mut decision: Decision, shared: &Shared) -> Decision {
    if shared.switches.shadow && !decision.allowed {
        decision.allowed = true;
        decision.shadowed = true;
    }
    decision
}

/// The time of a check in ms, after checking its cost and time.
fn check_arguments(cost: u64, now: Option<f64>) -> Result<Option<u64>> {
    if cost == 0 {
        return Err(Error::config("invalid cost 0: a check costs at least 1"));
    }
    now.map(now_to_ms).transpose()
}

/// One check of a batch (see [`check_batch`]).
#[derive(Clone, Copy)]
pub struct BatchItem<'a> {
    /// The limiter whose rules apply.
    pub limiter: &'a Limiter,
    /// The key.
    pub key: &'a [u8],
    /// Units the check costs.
    pub cost: u64,
    /// The tier the caller names, if any.
    pub tier: Option<&'a str>,
    /// The client address, if known.
    pub ip: Option<&'a str>,
}

impl<'a> BatchItem<'a> {
    /// A check of `key` for `cost` units by `limiter`, with no tier or address.
    pub fn new(limiter: &'a Limiter, key: &'a [u8], cost: u64) -> BatchItem<'a> {
        BatchItem {
            limiter,
            key,
            cost,
            tier: None,
            ip: None,
        }
    }
}

/// Checks several items at once, say the per-IP and the per-user rules of
/// one request: limiters sharing one store (see [`Limiter::with_rules`]) are
/// asked in one round trip. Each check is atomic on its own and logs when its
/// own rules admit it, whatever the others decide; the decisions come back in
/// order.
pub fn check_batch(items: &[BatchItem<'_>], now: Option<f64>) -> Result<Vec<Decision>> {
    let mut now_ms = None;
    for item in items {
        now_ms = check_arguments(item.cost, now)?;
    }
    let mut prepared = Vec::with_capacity(items.len());
    for item in items {
        let options = CheckOptions {
            cost: item.cost,
            now,
            tier: item.tier,
            ip: item.ip,
        };
        prepared.push(
            item.limiter
                .prepare(item.key, &options, now_ms, Mode::Check)?,
        );
    }
    let pending: Vec<usize> = (0..items.len())
        .filter(|&i| matches!(prepared[i], Prepared::Ask { .. }))
        .collect();
    let requests: Vec<Request<'_>> = pending
        .iter()
        .map(|&i| match &prepared[i] {
            Prepared::Ask {
                tag, rules, tiers, ..
            } => items[i]
                .limiter
                .request(tag, rules, tiers, items[i].cost, now_ms, Mode::Check),
            Prepared::Decided(_) => unreachable!("only pending checks"),
        })
        .collect();
    let shared_store = pending
        .windows(2)
        .all(|pair| Arc::ptr_eq(&items[pair[0]].limiter.store, &items[pair[1]].limiter.store));
    let outcomes: Vec<Result<Observation>> = match pending.first() {
        Some(&first) if shared_store => items[first].limiter.store.apply_many(&requests),
        _ => pending
            .iter()
            .zip(&requests)
            .map(|(&i, request)| items[i].limiter.store.apply(request))
            .collect(),
    };
    let mut concluded = Vec::with_capacity(pending.len());
    for ((&i, request), outcome) in pending.iter().zip(&requests).zip(outcomes) {
        concluded.push(items[i].limiter.conclude(request, items[i].tier, outcome)?);
    }
    let mut concluded = concluded.into_iter();
    Ok(prepared
        .into_iter()
        .map(|p| match p {
            Prepared::Decided(decision) => decision,
            Prepared::Ask { shared, .. } => finish(
                concluded.next().expect("one decision per pending check"),
                &shared,
            ),
        })
        .collect())
}

/// Seconds (float) to whole milliseconds, rounded to the nearest.
pub fn now_to_ms(now: f64) -> Result<u64> {
    if !(0.0..=MAX_NOW_SECONDS).contains(&now) {
        return Err(Error::config(format!(
            "invalid now {}: give seconds since the epoch, from 0 to {MAX_NOW_SECONDS}",
            crate::error::shown(now)
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
