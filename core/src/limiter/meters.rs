//! A metered limiter's checks (see [`crate::meter`]): the costs a caller
//! gives per meter, what is decided in-process (limiting switched off, a
//! listed address), the meters' requests asked of the store together, and
//! one decision made of each meter's.

use super::pipeline::{client_address, finish};
use super::view::current_controls;
use super::{process_state, CheckOptions, Limiter};
use crate::controls::Shared;
use crate::decision::{Decision, Observation};
use crate::error::{Error, Result};
use crate::keys::tag_of;
use crate::meter::{check_meter_name, meter_scope};
use crate::rule::RuleSet;
use crate::store::{Mode, Request};
use crate::time::{now_to_ms, system_now_ms};
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One meter of a metered limiter: its name, its rules, and the scope its
/// logs are kept under ([`meter_scope`]).
#[derive(Debug, Clone)]
pub struct Meter {
    /// Its name.
    pub name: String,
    /// Its rules, shortest window first.
    pub rules: RuleSet,
    pub(crate) scope: String,
}

/// A metered check made ready: decided in-process, or what to ask the store.
pub(crate) enum Metering<'l> {
    Decided(Decision),
    Ask(MeteredAsk<'l>),
}

/// What a metered check (or settle) asks the store: each meter it
/// charges, at one time.
pub(crate) struct MeteredAsk<'l> {
    pub(crate) tag: Cow<'l, [u8]>,
    pub(crate) charged: Vec<Charge<'l>>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) now_ms: Option<u64>,
    /// A check's, a peek's (a settle's charges each have their own).
    pub(crate) mode: Mode,
}

/// One meter's part of a metered call: its index, its cost, its rules (as
/// the multiplier scales them, or as a reservation was checked by) and
/// what the call does to its log.
pub(crate) struct Charge<'l> {
    pub(crate) meter: usize,
    pub(crate) cost: u64,
    pub(crate) rules: Cow<'l, RuleSet>,
    pub(crate) mode: Mode,
}

impl MeteredAsk<'_> {
    /// What the store observed of each charged meter, asked together.
    pub(crate) fn asked(&self, limiter: &Limiter) -> Result<Vec<Observation>> {
        limiter.warden.store.apply_together(&self.requests(limiter))
    }

    /// [`MeteredAsk::asked`], awaited where the store has an awaitable
    /// log (Redis), asked at once where it answers in-process.
    #[cfg(feature = "async")]
    pub(crate) async fn asked_async(&self, limiter: &Limiter) -> Result<Vec<Observation>> {
        let requests = self.requests(limiter);
        match limiter.warden.store.as_async() {
            Some(log) => log.apply_together_async(&requests).await,
            None => limiter.warden.store.apply_together(&requests),
        }
    }

    /// The store's requests, one per charged meter.
    pub(crate) fn requests<'r>(&'r self, limiter: &'r Limiter) -> Vec<Request<'r>> {
        self.charged
            .iter()
            .map(|charge| Request {
                tag: &self.tag,
                scope: &limiter.meters[charge.meter].scope,
                rules: &charge.rules,
                tiers: &[],
                read_record: false,
                cost: charge.cost,
                now_ms: self.now_ms,
                mode: charge.mode,
            })
            .collect()
    }
}

impl Limiter {
    /// This limiter made of several named rule sets, its meters, in order
    /// (see [`crate::meter`]): a check then gives a cost per meter
    /// ([`Limiter::meter_costs`]). Its tiers must be none. [`Limiter::rules`]
    /// answers the first meter's.
    pub fn with_meters(mut self, meters: Vec<(String, RuleSet)>) -> Result<Limiter> {
        let first = crate::meter::Limits::first(&meters)?;
        if !self.tiers.is_empty() {
            return Err(Error::config(
                "a limiter has meters or tiers, not both: give each tier a limiter of its own",
            ));
        }
        for (i, (name, rules)) in meters.iter().enumerate() {
            check_meter_name(name)?;
            rules.without_in_flight(&format!("the meter '{name}'"))?;
            if meters[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::config(format!("meter '{name}' is given twice")));
            }
        }
        let every: Vec<u64> = meters
            .iter()
            .flat_map(|(_, rules)| rules.rules().iter().map(|r| r.window_ms))
            .collect();
        self.rules = first;
        self.meters = meters
            .into_iter()
            .map(|(name, rules)| Meter {
                scope: meter_scope(&self.scope, &name),
                name,
                rules,
            })
            .collect();
        self.local = process_state(self.warden.denial_cap, every);
        Ok(self)
    }

    /// A limiter of `limits` on the same warden (see [`Limiter::with_rules`]).
    pub fn with_limits(&self, limits: crate::meter::Limits) -> Result<Limiter> {
        match limits {
            crate::meter::Limits::Rules(rules) => Ok(self.with_rules(rules)),
            crate::meter::Limits::Meters(meters) => {
                let first = crate::meter::Limits::first(&meters)?;
                self.with_rules(first).with_meters(meters)
            }
        }
    }

    /// The meters, in order (none for a limiter of one rule set).
    pub fn meters(&self) -> &[Meter] {
        &self.meters
    }

    /// The costs of a check per meter, in the meters' order, from the
    /// caller's (name, units) pairs: each name one of the meters, given
    /// once, with 0 units or more (a meter not named costs nothing; the
    /// binding's integers of any size, as [`super::cost_from`] takes them).
    pub fn meter_costs(&self, given: &[(String, i128)]) -> Result<Vec<u64>> {
        let mut costs = vec![0u64; self.meters.len()];
        let mut named = vec![false; self.meters.len()];
        for (name, units) in given {
            let i = self.meter_index(name)?;
            if std::mem::replace(&mut named[i], true) {
                return Err(Error::config(format!("meter '{name}' is given twice")));
            }
            if *units < 0 {
                return Err(Error::config(format!(
                    "invalid cost {units} for meter '{name}': give 0 or more"
                )));
            }
            costs[i] = u64::try_from(*units).unwrap_or(u64::MAX);
        }
        Ok(costs)
    }

    /// The index of the meter `name`, or the error that lists the meters.
    pub(crate) fn meter_index(&self, name: &str) -> Result<usize> {
        if self.meters.is_empty() {
            return Err(Error::config(
                "this limiter has no meters: give its cost as a whole number",
            ));
        }
        self.meters
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| {
                let known: Vec<&str> = self.meters.iter().map(|m| m.name.as_str()).collect();
                Error::config(format!(
                    "unknown meter '{}': this limiter's meters are [{}]",
                    name.escape_debug(),
                    known.join(", ")
                ))
            })
    }

    /// A metered check made ready: the costs checked, what limiting
    /// switched off or a listed address decide in-process, else each
    /// charged meter's request.
    pub(crate) fn metering<'l>(
        &'l self,
        key: &'l [u8],
        options: &CheckOptions<'_>,
        mode: Mode,
    ) -> Result<Metering<'l>> {
        if self.meters.is_empty() {
            return Err(Error::config(
                "this limiter has no meters: give its cost as a whole number",
            ));
        }
        let costs = match options.meter_costs {
            Some(costs) if costs.len() == self.meters.len() => costs,
            Some(_) => return Err(Error::config("give one cost per meter")),
            None => {
                let names: Vec<&str> = self.meters.iter().map(|m| m.name.as_str()).collect();
                return Err(Error::config(format!(
                    "this limiter has meters ({}): give its cost as units per meter",
                    names.join(", ")
                )));
            }
        };
        if costs.iter().all(|&c| c == 0) {
            return Err(Error::config(
                "invalid cost: a check charges at least one meter at least 1 unit",
            ));
        }
        if options.tier.is_some() {
            return Err(Error::config("a limiter with meters has no tiers"));
        }
        let now_ms = match options.now {
            Some(now) => Some(now_to_ms(now)?),
            None => self.warden.clock.frozen(),
        };
        let shared = current_controls(&self.warden.shared, &self.warden.store);
        let charged: Vec<Charge<'l>> = costs
            .iter()
            .enumerate()
            .filter(|(_, &cost)| cost > 0)
            .map(|(meter, &cost)| {
                let rules = &self.meters[meter].rules;
                let rules = match shared.switches.multiplier == 1.0 {
                    true => Cow::Borrowed(rules),
                    false => Cow::Owned(shared.switches.scale(rules)),
                };
                Charge {
                    meter,
                    cost,
                    rules,
                    mode,
                }
            })
            .collect();
        let at = || now_ms.unwrap_or_else(system_now_ms);
        let each = |made: &dyn Fn(&RuleSet) -> Decision| {
            let parts = charged
                .iter()
                .map(|c| (self.meters[c.meter].name.clone(), made(&c.rules)))
                .collect();
            Decision::metered(parts)
        };
        let decided = if !shared.switches.enabled || !self.warden.clock.limiting() {
            Some(each(&|rules| Decision::unlimited(rules, at())))
        } else if shared.has_nets() {
            client_address(key, options.ip)
                .and_then(|ip| shared.judge_ip(ip, at()))
                .map(|(list, listing)| each(&|rules| Decision::listed(rules, at(), list, listing)))
        } else {
            None
        };
        if let Some(decision) = decided {
            if mode == Mode::Check {
                self.state().metrics.record(&decision);
            }
            return Ok(Metering::Decided(finish(decision, &shared)));
        }
        Ok(Metering::Ask(MeteredAsk {
            tag: tag_of(key),
            charged,
            shared,
            now_ms,
            mode,
        }))
    }

    /// The decision from what the store answered for each meter (or the
    /// `on_error` fallback), counted and noted as a check's.
    pub(crate) fn metered_decision(
        &self,
        ask: &MeteredAsk<'_>,
        ip: Option<&str>,
        outcome: Result<Vec<Observation>>,
    ) -> Result<Decision> {
        let named = |i: usize| self.meters[i].name.clone();
        let decided = match outcome {
            Ok(seen) if seen.len() == ask.charged.len() => {
                self.state().in_outage.store(false, Ordering::Relaxed);
                let admitted = seen.iter().all(|obs| obs.allowed);
                let logged = admitted && ask.mode.writes();
                Ok(Decision::metered(
                    ask.charged
                        .iter()
                        .zip(&seen)
                        .map(|(c, obs)| {
                            let decision =
                                Decision::from_observation(&c.rules, c.cost, obs, logged);
                            (named(c.meter), decision)
                        })
                        .collect(),
                ))
            }
            Ok(_) => Err(Error::storage(
                "the store answered for other meters than asked",
            )),
            Err(err) => Err(err),
        };
        let decided = match decided {
            Ok(decision) => Ok(decision),
            Err(err) => {
                let failed = !matches!(err, Error::Config(_));
                let fell_back = self.on_failure(err, |allowed| {
                    let at = ask.now_ms.unwrap_or_else(system_now_ms);
                    Decision::metered(
                        ask.charged
                            .iter()
                            .map(|c| (named(c.meter), Decision::fallback(&c.rules, at, allowed)))
                            .collect(),
                    )
                });
                if ask.mode == Mode::Check && failed && fell_back.is_err() {
                    self.state().metrics.record_raised_error();
                }
                fell_back
            }
        };
        let decision = finish(decided?, &ask.shared);
        if ask.mode == Mode::Check {
            self.state().metrics.record(&decision);
        }
        self.noted(&decision, ask.mode, &ask.tag, ip);
        Ok(decision)
    }

    /// A metered check (or peek), asked of the store in one atomic step.
    pub(crate) fn decide_metered(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        mode: Mode,
    ) -> Result<Decision> {
        crate::store::one_wait::within(|| match self.metering(key, options, mode)? {
            Metering::Decided(decision) => Ok(decision),
            Metering::Ask(ask) => {
                let outcome = ask.asked(self);
                self.metered_decision(&ask, options.ip, outcome)
            }
        })
    }

    /// [`Limiter::decide_metered`], awaiting the store where it has an
    /// awaitable log (Redis).
    #[cfg(feature = "async")]
    pub(crate) async fn decide_metered_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        mode: Mode,
    ) -> Result<Decision> {
        crate::store::one_wait::within_async(async {
            self.controls_due_async().await;
            match self.metering(key, options, mode)? {
                Metering::Decided(decision) => Ok(decision),
                Metering::Ask(ask) => {
                    let outcome = ask.asked_async(self).await;
                    self.metered_decision(&ask, options.ip, outcome)
                }
            }
        })
        .await
    }
}
