//! One check, from the arguments to the decision: what is decided
//! in-process (switched off, a listed address, a remembered denial), the
//! request sent to the store, and the decision from what it observed (or the
//! `on_error` fallback).

use super::view::current_controls;
use super::{CheckOptions, Limiter, OnError};
use crate::controls::{self, Applied, DecidedBy, Shared};
use crate::decision::{Decision, Observation, Outcome};
use crate::error::{Error, Result};
use crate::keys::tag_of;
use crate::rule::RuleSet;
use crate::store::{Mode, Request};
use crate::time::{now_to_ms, system_now_ms};
use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A check made ready to send to the store, or already decided in-process.
pub(crate) enum Prepared<'l> {
    Decided(Decision),
    Ask {
        tag: Cow<'l, [u8]>,
        rules: Cow<'l, RuleSet>,
        tiers: Cow<'l, [(String, RuleSet)]>,
        shared: Arc<Shared>,
    },
}

impl Limiter {
    pub(crate) fn decide(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        mode: Mode,
    ) -> Result<Decision> {
        if !self.meters.is_empty() || options.meter_costs.is_some() {
            return self.decide_metered(key, options, mode);
        }
        if self.rules.in_flight().is_some() {
            self.refuse_in_flight_check(mode)?;
            return self.peek_held(key, options);
        }
        crate::store::one_wait::within(|| {
            let now_ms = self.check_time(options.cost, options.now)?;
            match self.prepare(key, options, now_ms, mode)? {
                Prepared::Decided(decision) => Ok(decision),
                Prepared::Ask {
                    tag,
                    rules,
                    tiers,
                    shared,
                } => {
                    let request = self.request(&tag, &rules, &tiers, options.cost, now_ms, mode);
                    let outcome = self.warden.store.apply(&request);
                    let decision = finish(self.conclude(&request, options.tier, outcome)?, &shared);
                    self.noted(&decision, mode, &tag, options.ip);
                    Ok(decision)
                }
            }
        })
    }

    /// [`Limiter::decide`], awaiting the store's answer where it has an
    /// awaitable log (Redis), asking it at once where it answers in-process.
    #[cfg(feature = "async")]
    pub(crate) async fn decide_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        mode: Mode,
    ) -> Result<Decision> {
        if !self.meters.is_empty() || options.meter_costs.is_some() {
            return self.decide_metered_async(key, options, mode).await;
        }
        if self.rules.in_flight().is_some() {
            self.refuse_in_flight_check(mode)?;
            return self.peek_held_async(key, options).await;
        }
        crate::store::one_wait::within_async(async {
            self.controls_due_async().await;
            let now_ms = self.check_time(options.cost, options.now)?;
            match self.prepare(key, options, now_ms, mode)? {
                Prepared::Decided(decision) => Ok(decision),
                Prepared::Ask {
                    tag,
                    rules,
                    tiers,
                    shared,
                } => {
                    let request = self.request(&tag, &rules, &tiers, options.cost, now_ms, mode);
                    let outcome = match self.warden.store.as_async() {
                        Some(log) => log.apply_async(&request).await,
                        None => self.warden.store.apply(&request),
                    };
                    let decision = finish(self.conclude(&request, options.tier, outcome)?, &shared);
                    self.noted(&decision, mode, &tag, options.ip);
                    Ok(decision)
                }
            }
        })
        .await
    }

    /// What can be decided without the store (switched off, a listed address,
    /// a remembered denial), or the rules and tiers to send it.
    /// (Counted, for a check decided here.)
    pub(crate) fn prepare<'l>(
        &'l self,
        key: &'l [u8],
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
        let shared = current_controls(&self.warden.shared, &self.warden.store);
        let epoch = controls::epoch();
        if self.state().epoch_seen.swap(epoch, Ordering::AcqRel) != epoch {
            self.state().denials.clear();
        }
        let rules = self.rules_for(options.tier, &shared)?;
        if !shared.switches.enabled || !self.warden.clock.limiting() {
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
        let tag = tag_of(key);
        if let Some(remembered) =
            self.remembered(&denial_key(&tag, options.tier), options.cost, now_ms)
        {
            if mode == Mode::Check {
                self.state().metrics.record(&remembered);
            }
            let decision = finish(remembered, &shared);
            self.noted(&decision, mode, &tag, options.ip);
            return Ok(Prepared::Decided(decision));
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
    pub(crate) fn rules_for(
        &self,
        tier: Option<&str>,
        shared: &Shared,
    ) -> Result<Cow<'_, RuleSet>> {
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

    pub(crate) fn request<'r>(
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
            read_record: self.warden.read_records,
            cost,
            now_ms,
            mode,
        }
    }

    /// A denial remembered for this check; never for a check at an explicit
    /// time, which is arithmetic on that time.
    pub(crate) fn remembered(
        &self,
        tag: &[u8],
        cost: u64,
        now_ms: Option<u64>,
    ) -> Option<Decision> {
        if now_ms.is_some() {
            return None;
        }
        self.state().denials.lookup(tag, cost)
    }

    /// The decision from what the store answered (counted, for a check).
    pub(crate) fn conclude(
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
                let check = request.mode.writes();
                let decision = match &obs.decided_by {
                    DecidedBy::Listed(list, listing) => {
                        Decision::listed(request.rules, obs.now_ms, *list, listing)
                    }
                    DecidedBy::Limited(applied) => {
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
                // (a slot may free at any moment: a hold's denial is not remembered)
                if request.now_ms.is_none()
                    && !decision.allowed()
                    && request.rules.in_flight().is_none()
                {
                    let key = denial_key(request.tag, tier);
                    self.state().denials.remember(&key, request.cost, &decision);
                }
                Ok(decision)
            }
            Err(err) => self.on_failure(err, |allowed| {
                let at = request.now_ms.unwrap_or_else(system_now_ms);
                Decision::fallback(request.rules, at, allowed)
            }),
        }
    }

    /// When the store failed: its error (a configuration error, or
    /// `on_error` `raise`), else the `on_error` fallback `fallback(allowed)`
    /// makes, carrying the outage's one warning.
    pub(crate) fn on_failure(
        &self,
        err: Error,
        fallback: impl FnOnce(bool) -> Decision,
    ) -> Result<Decision> {
        if matches!(err, Error::Config(_)) || self.warden.on_error == OnError::Raise {
            return Err(err);
        }
        let allowed = self.warden.on_error == OnError::Allow;
        let mut decision = fallback(allowed);
        if !self.state().in_outage.swap(true, Ordering::Relaxed) {
            let action = if allowed { "allowed" } else { "denied" };
            let warning =
                format!("the store is failing ({err}); checks are {action} until it answers again");
            log::warn!("{warning}");
            decision.warning = Some(warning);
        }
        Ok(decision)
    }
}
impl Limiter {
    /// Counts a check's denial by the rules (in shadow mode too) in this
    /// process's record of denials, against its key and client address; the
    /// controls reader writes it to the store within `controls_refresh` (on a
    /// memory store, whose controls need no reader, it starts with the first
    /// denial).
    pub(crate) fn noted(&self, decision: &Decision, mode: Mode, tag: &[u8], ip: Option<&str>) {
        let denied = matches!(
            decision.outcome,
            Outcome::Denied | Outcome::Shadowed { blocked: false }
        );
        if !denied || mode != Mode::Check {
            return;
        }
        let (view, store) = (&self.warden.shared, &self.warden.store);
        let local = view.get();
        local.tally.note(&self.scope, tag, ip, decision.now_ms);
        if !store.waits_on_io() {
            super::view::start_reader(view, store, local);
        }
    }
}

/// Where a denial is remembered: per key and the tier the caller named (a
/// denial under one tier says nothing of another).
pub(crate) fn denial_key<'t>(tag: &'t [u8], tier: Option<&str>) -> Cow<'t, [u8]> {
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
pub(crate) fn client_address(key: &[u8], ip: Option<&str>) -> Option<IpAddr> {
    match ip {
        Some(ip) => crate::net::parse_hop(ip),
        None => std::str::from_utf8(key).ok()?.parse().ok(),
    }
}

/// Shadow mode: a denial is reported (`shadowed`) but the check is allowed.
pub(crate) fn finish(decision: Decision, shared: &Shared) -> Decision {
    if shared.switches.shadow {
        decision.shadow()
    } else {
        decision
    }
}

impl Limiter {
    /// The time of a check in ms (`now`, else this limiter's frozen clock;
    /// `None`: the store's), after checking its cost and time.
    pub(crate) fn check_time(&self, cost: u64, now: Option<f64>) -> Result<Option<u64>> {
        if cost == 0 {
            return Err(Error::config("invalid cost 0: a check costs at least 1"));
        }
        match now {
            Some(now) => now_to_ms(now).map(Some),
            None => Ok(self.warden.clock.frozen()),
        }
    }
}
