//! Reservations: a check for an estimate of what some work will cost (the
//! tokens an LLM call may use), settled once the work is done to what it
//! really cost, in one round trip each (see [`crate::engine::log::Settle`]
//! for what a settle does to the log).

use super::pipeline::{finish, Prepared};
use super::{CheckOptions, Limiter};
use crate::controls::Shared;
use crate::decision::{Decision, Observation, Outcome};
use crate::error::{Error, Result};
use crate::rule::{Rule, RuleSet};
use crate::store::{Mode, Request};
use crate::time::now_to_ms;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A check admitted for an estimate ([`Limiter::reserve`]), to be settled
/// to what the work cost ([`Limiter::settle`]). Never settled, the log keeps
/// its estimate. A reservation the store did not log (denied, safelisted,
/// limiting switched off, the store failing) settles to nothing: there is
/// nothing to give back, and nothing is charged. A reservation settles
/// once.
#[derive(Debug)]
pub struct Reservation {
    /// The reserve's decision.
    pub decision: Decision,
    /// The units reserved (a metered limiter's: their sum; see `estimates`).
    pub estimate: u64,
    /// A metered limiter's units reserved per meter, by name, in its
    /// meters' order (none for a limiter of one rule set).
    pub estimates: Vec<(String, u64)>,
    /// Where the estimate was logged; none when it was not.
    pub(crate) logged: Option<Logged>,
    pub(crate) settled: AtomicBool,
}

/// Where a reservation's estimate was logged: the key's tag, and each log's
/// part (one, or one per meter charged).
#[derive(Debug)]
pub(crate) struct Logged {
    pub(crate) tag: Vec<u8>,
    pub(crate) parts: Vec<Part>,
}

/// One log's part of a reservation: the meter (none for a limiter of one
/// rule set), the rules it was checked by, its time (ms) and its units.
#[derive(Debug)]
pub(crate) struct Part {
    pub(crate) meter: Option<usize>,
    pub(crate) rules: RuleSet,
    pub(crate) at_ms: u64,
    pub(crate) estimate: u64,
}

/// What a settle did.
#[derive(Debug, Clone)]
pub struct Settled {
    /// The rules' state after the settle (always admitted: an overrun is
    /// counted, never refused); `None` when the reservation was not logged
    /// or the settle changed nothing.
    pub decision: Option<Decision>,
    /// Units charged over the estimate (the real cost less the estimate;
    /// a metered limiter's: the sum over its meters).
    pub over: u64,
    /// Units given back (the estimate less the real cost; a metered
    /// limiter's: the sum over its meters).
    pub refunded: u64,
    /// A metered limiter's settle per meter it changed, in its meters' order.
    pub meters: Vec<MeterSettled>,
}

/// What a settle did to one meter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterSettled {
    /// The meter's name.
    pub name: String,
    /// Units charged over its estimate.
    pub over: u64,
    /// Units given back to it.
    pub refunded: u64,
}

impl Reservation {
    /// Whether the store logged the estimate (so that a settle changes it).
    pub fn logged(&self) -> bool {
        self.logged.is_some()
    }

    /// Why the work may not go on (the reservation was refused), for the
    /// bindings' exception; `None` when it may.
    pub fn refusal(&self) -> Option<String> {
        if self.decision.allowed() {
            return None;
        }
        let what = self.estimate_text();
        Some(match self.decision.retry_after_ms {
            Some(wait) => format!(
                "rate limited: a reservation of {what} refused (retry in {} s)",
                crate::time::seconds(wait)
            ),
            None => format!("rate limited: a reservation of {what} refused"),
        })
    }

    /// The units reserved as the bindings show them: `80`, or a metered
    /// limiter's `1 requests and 80 tokens`.
    pub fn estimate_text(&self) -> String {
        match self.estimates.is_empty() {
            true => self.estimate.to_string(),
            false => self
                .estimates
                .iter()
                .map(|(name, units)| format!("{units} {name}"))
                .collect::<Vec<_>>()
                .join(" and "),
        }
    }

    /// Whether it was settled (or cancelled).
    pub fn settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    /// Marks it settled; a configuration error when it was already.
    pub(crate) fn settle_once(&self) -> Result<()> {
        if self.settled.swap(true, Ordering::AcqRel) {
            return Err(Error::config(
                "this reservation was settled already: a reservation settles once",
            ));
        }
        Ok(())
    }

    fn of(decision: Decision, estimate: u64, logged: Option<Logged>) -> Self {
        Reservation {
            decision,
            estimate,
            estimates: Vec::new(),
            logged,
            settled: AtomicBool::new(false),
        }
    }
}

/// A reservation's check, made ready.
enum Reserving<'l> {
    Decided(Reservation),
    Ask(Ask<'l>),
}

/// What a reservation's check asks the store.
struct Ask<'l> {
    tag: Cow<'l, [u8]>,
    rules: Cow<'l, RuleSet>,
    tiers: Cow<'l, [(String, RuleSet)]>,
    shared: Arc<Shared>,
    now_ms: Option<u64>,
}

impl Ask<'_> {
    fn request<'r>(&'r self, limiter: &'r Limiter, cost: u64) -> Request<'r> {
        limiter.request(
            &self.tag,
            &self.rules,
            &self.tiers,
            cost,
            self.now_ms,
            Mode::Check,
        )
    }
}

/// A settle, made ready.
enum Settling<'r> {
    /// Nothing to ask the store.
    Nothing(Settled),
    /// What to ask it.
    Ask(Asking<'r>),
}

/// What a settle asks the store, when it asks anything: of the reservation
/// logged at `at_ms` under `tag` by `rules`.
struct Asking<'r> {
    over: u64,
    refunded: u64,
    now_ms: Option<u64>,
    tag: &'r [u8],
    rules: &'r RuleSet,
    at_ms: u64,
}

impl Limiter {
    /// A check of `options.cost` units, the estimate, that when admitted
    /// holds them until [`Limiter::settle`] says what the work cost.
    pub fn reserve(&self, key: &[u8], options: &CheckOptions<'_>) -> Result<Reservation> {
        self.refuse_in_flight("reserve()")?;
        if !self.meters.is_empty() || options.meter_costs.is_some() {
            return self.reserve_metered(key, options);
        }
        crate::store::one_wait::within(|| {
            let ask = match self.reserving(key, options)? {
                Reserving::Decided(reservation) => return Ok(reservation),
                Reserving::Ask(ask) => ask,
            };
            let request = ask.request(self, options.cost);
            let outcome = self.warden.store.apply(&request);
            self.reserved(&request, options, outcome, &ask.shared)
        })
    }

    /// [`Limiter::reserve`], awaiting the store's answer where it has an
    /// awaitable log (Redis).
    #[cfg(feature = "async")]
    pub async fn reserve_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
    ) -> Result<Reservation> {
        self.refuse_in_flight("reserve()")?;
        if !self.meters.is_empty() || options.meter_costs.is_some() {
            return self.reserve_metered_async(key, options).await;
        }
        crate::store::one_wait::within_async(async {
            self.controls_due_async().await;
            let ask = match self.reserving(key, options)? {
                Reserving::Decided(reservation) => return Ok(reservation),
                Reserving::Ask(ask) => ask,
            };
            let request = ask.request(self, options.cost);
            let outcome = match self.warden.store.as_async() {
                Some(log) => log.apply_async(&request).await,
                None => self.warden.store.apply(&request),
            };
            self.reserved(&request, options, outcome, &ask.shared)
        })
        .await
    }

    /// A reservation's check made ready: what to ask the store, or decided
    /// in-process (switched off, a listed address, a remembered denial).
    fn reserving<'l>(&'l self, key: &'l [u8], options: &CheckOptions<'_>) -> Result<Reserving<'l>> {
        let now_ms = self.check_time(options.cost, options.now)?;
        Ok(match self.prepare(key, options, now_ms, Mode::Check)? {
            Prepared::Decided(decision) => {
                Reserving::Decided(Reservation::of(decision, options.cost, None))
            }
            Prepared::Ask {
                tag,
                rules,
                tiers,
                shared,
            } => Reserving::Ask(Ask {
                tag,
                rules,
                tiers,
                shared,
                now_ms,
            }),
        })
    }

    fn reserved(
        &self,
        request: &Request<'_>,
        options: &CheckOptions<'_>,
        outcome: Result<Observation>,
        shared: &Shared,
    ) -> Result<Reservation> {
        let logged = matches!(&outcome, Ok(seen) if seen.allowed);
        let decision = finish(self.conclude(request, options.tier, outcome)?, shared);
        self.noted(&decision, Mode::Check, request.tag, options.ip);
        let logged = match logged && decision.outcome == Outcome::Admitted {
            true => Some(Logged {
                tag: request.tag.to_vec(),
                parts: vec![Part {
                    meter: None,
                    rules: checked_by(&decision, request.rules.exact())?,
                    at_ms: decision.now_ms,
                    estimate: options.cost,
                }],
            }),
            false => None,
        };
        Ok(Reservation::of(decision, options.cost, logged))
    }

    /// The reservation a check's admitting `decision` holds: its `cost`
    /// units of `key`, logged at the decision's time by the rules it shows
    /// (what a door gives back, by a settle at 0, when a response is not one
    /// its throttle counts). A decision that logged nothing holds nothing.
    pub fn reservation_of(&self, key: &[u8], decision: Decision, cost: u64) -> Result<Reservation> {
        let logged = match decision.outcome == Outcome::Admitted {
            true => Some(Logged {
                tag: crate::keys::key_tag(key),
                parts: vec![Part {
                    meter: None,
                    rules: checked_by(&decision, self.rules.exact())?,
                    at_ms: decision.now_ms,
                    estimate: cost,
                }],
            }),
            false => None,
        };
        Ok(Reservation::of(decision, cost, logged))
    }

    /// Settles `reservation` to `actual`, the units the work cost, in one
    /// round trip: below the estimate the difference goes back to every
    /// rule's window, as if never spent; above it the overrun is logged now,
    /// whatever the limits say (counted, never refused). At the estimate, or
    /// for a reservation the store did not log, nothing is asked of the
    /// store. A settle after the reservation left the longest window gives
    /// nothing back (its units left every window). A reservation settles
    /// once: settling it again is a configuration error. `now` (seconds) is
    /// the settle's time, as a check's (`None`: the store's clock).
    pub fn settle(
        &self,
        reservation: &Reservation,
        actual: u64,
        now: Option<f64>,
    ) -> Result<Settled> {
        let asking = match self.settling(reservation, actual, now)? {
            Settling::Nothing(settled) => return Ok(settled),
            Settling::Ask(asking) => asking,
        };
        crate::store::one_wait::within(|| {
            let request = settle_request(self, &asking);
            let outcome = self.warden.store.apply(&request);
            self.settled(&request, &asking, outcome)
        })
    }

    /// [`Limiter::settle`], awaiting the store's answer where it has an
    /// awaitable log (Redis).
    #[cfg(feature = "async")]
    pub async fn settle_async(
        &self,
        reservation: &Reservation,
        actual: u64,
        now: Option<f64>,
    ) -> Result<Settled> {
        let asking = match self.settling(reservation, actual, now)? {
            Settling::Nothing(settled) => return Ok(settled),
            Settling::Ask(asking) => asking,
        };
        crate::store::one_wait::within_async(async {
            let request = settle_request(self, &asking);
            let outcome = match self.warden.store.as_async() {
                Some(log) => log.apply_async(&request).await,
                None => self.warden.store.apply(&request),
            };
            self.settled(&request, &asking, outcome)
        })
        .await
    }

    /// Marks `reservation` settled; what to ask the store, or what the
    /// settle came to without it (the work cost the estimate, or the
    /// reservation was not logged: nothing to give back or charge).
    fn settling<'r>(
        &self,
        reservation: &'r Reservation,
        actual: u64,
        now: Option<f64>,
    ) -> Result<Settling<'r>> {
        if !self.meters.is_empty() {
            return Err(wrong_settle());
        }
        let now_ms = match now {
            Some(now) => Some(now_to_ms(now)?),
            None => self.warden.clock.frozen(),
        };
        reservation.settle_once()?;
        let over = actual.saturating_sub(reservation.estimate);
        let refunded = reservation.estimate.saturating_sub(actual);
        Ok(match &reservation.logged {
            Some(Logged { tag, parts }) if over > 0 || refunded > 0 => Settling::Ask(Asking {
                over,
                refunded,
                now_ms,
                tag,
                rules: &parts[0].rules,
                at_ms: parts[0].at_ms,
            }),
            _ => Settling::Nothing(Settled {
                decision: None,
                over: 0,
                refunded: 0,
                meters: Vec::new(),
            }),
        })
    }

    fn settled(
        &self,
        request: &Request<'_>,
        asking: &Asking<'_>,
        outcome: Result<Observation>,
    ) -> Result<Settled> {
        Ok(Settled {
            decision: Some(self.conclude(request, None, outcome)?),
            over: asking.over,
            refunded: asking.refunded,
            meters: Vec::new(),
        })
    }
}

/// The error of a settle given the other way: per meter for a limiter of
/// one rule set, or as a whole number for a metered one.
pub(crate) fn wrong_settle() -> Error {
    Error::config(
        "settle a reservation of a limiter with meters per meter, of one without as a whole number",
    )
}

/// The store's request of a settle: against the rules the reservation was
/// checked by alone (no record read, no tier).
fn settle_request<'r>(limiter: &'r Limiter, asking: &Asking<'r>) -> Request<'r> {
    let mode = Mode::Settle {
        at_ms: asking.at_ms,
        refund: asking.refunded,
    };
    let (tag, rules) = (asking.tag, asking.rules);
    let mut request = limiter.request(tag, rules, &[], asking.over, asking.now_ms, mode);
    request.read_record = false;
    request
}

/// The rules a decision was made by (a stored tier's or override's, when
/// the key's record selected them), as the log holds them.
fn checked_by(decision: &Decision, exact: bool) -> Result<RuleSet> {
    let rules = decision
        .rules
        .iter()
        .map(|state| Rule::new(state.limit, state.window_ms))
        .collect::<Result<Vec<Rule>>>()?;
    Ok(RuleSet::new(rules)?.keeping_every_entry(exact))
}
