//! Holds: a check of a rule set with an in-flight rule ("10 concurrent",
//! see [`crate::in_flight`]) that, admitted by every rule, takes a lease,
//! released by its holder when the work ends or lapsing when the holder
//! died. A bare check of such a limiter is refused (it would take a slot
//! nobody gives back); a peek answers as a hold would, taking nothing.
//!
//! A hold that waits ([`Limiter::hold_pausing`]) tries again when the
//! soonest lease lapses, when a lease of this process is released (seen
//! within 10 ms), and at least every 100 ms (for a release in another
//! process), until the timeout.

use super::pipeline::{finish, Prepared};
use super::wait::Acquired;
use super::{CheckOptions, Limiter};
use crate::controls::Shared;
use crate::decision::{Decision, Observation};
use crate::error::{Error, Result};
use crate::in_flight::{Held, Lease, LeaseCall};
use crate::store::{Mode, Request};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Releases made in this process: a waiting hold looks for a new one.
static RELEASES: AtomicU64 = AtomicU64::new(0);
/// The longest a waiting hold sleeps before it asks the store again.
const MOST_BETWEEN_TRIES: Duration = Duration::from_millis(100);
/// How often a waiting hold looks for a release in this process.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// What a hold came to: its decision, and its lease when it took one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The hold's decision.
    pub decision: Decision,
    /// The lease it took; `None` when refused, or admitted without one
    /// (limiting switched off, a safelisted key, the store failing with
    /// `on_error` `allow`, shadow mode).
    pub lease: Option<Lease>,
}

impl Hold {
    /// Why the hold was refused (what a binding's `RateLimitExceeded` says),
    /// or `None` when it was admitted.
    pub fn refusal(&self) -> Option<String> {
        if self.decision.allowed() {
            return None;
        }
        let full = self.decision.in_flight.is_some_and(|f| f.remaining() == 0);
        Some(match self.decision.retry_after_ms {
            None => "rate limited: the cost exceeds a limit and can never pass".to_owned(),
            Some(ms) if full => format!(
                "rate limited: every slot is held (a slot frees at the latest in {} s)",
                crate::time::seconds(ms)
            ),
            Some(ms) => format!("rate limited: retry after {} s", crate::time::seconds(ms)),
        })
    }
}

impl Limiter {
    /// This limiter, its holds' leases lapsing after `lease_ms` unless a
    /// hold gives its own (the default is 60 s).
    pub fn with_lease(mut self, lease_ms: u64) -> Limiter {
        self.lease_ms = lease_ms;
        self
    }

    /// The time a hold's lease lapses after, unless it gives its own (ms).
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// Refuses a call that would count a slot it never gives back (a bare
    /// check, a reservation, a batch) on a limiter with an in-flight rule.
    pub(crate) fn refuse_in_flight(&self, call: &str) -> Result<()> {
        match self.rules.in_flight() {
            None => Ok(()),
            Some(limit) => Err(Error::config(format!(
                "{call} cannot take a slot of this limiter's in-flight rule \
                 ('{limit} concurrent'): hold() takes one and gives it back when \
                 released; peek() asks without taking one"
            ))),
        }
    }

    /// A check of a limiter with an in-flight rule: refused (a peek is not).
    pub(crate) fn refuse_in_flight_check(&self, mode: Mode) -> Result<()> {
        match mode {
            Mode::Peek => Ok(()),
            _ => self.refuse_in_flight("a check"),
        }
    }

    /// Holds a slot of `key`: when a slot is free and every rate admits
    /// `options.cost`, logs the cost and takes a lease lapsing after
    /// `lease_ms` (the limiter's when `None`), in one atomic step.
    pub fn hold(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        lease_ms: Option<u64>,
    ) -> Result<Hold> {
        self.holding(key, options, lease_ms, Mode::Check)
    }

    /// [`Limiter::hold`], awaiting the store where it has an awaitable log.
    #[cfg(feature = "async")]
    pub async fn hold_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        lease_ms: Option<u64>,
    ) -> Result<Hold> {
        self.holding_async(key, options, lease_ms, Mode::Check)
            .await
    }

    /// What a hold would decide now, taking nothing (a limiter's peek).
    pub(crate) fn peek_held(&self, key: &[u8], options: &CheckOptions<'_>) -> Result<Decision> {
        Ok(self.holding(key, options, None, Mode::Peek)?.decision)
    }

    /// [`Limiter::peek_held`], awaited.
    #[cfg(feature = "async")]
    pub(crate) async fn peek_held_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
    ) -> Result<Decision> {
        Ok(self
            .holding_async(key, options, None, Mode::Peek)
            .await?
            .decision)
    }

    /// A hold ([`Mode::Check`]) or a peek of one ([`Mode::Peek`], which
    /// takes nothing), blocking on the store.
    fn holding(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        lease_ms: Option<u64>,
        mode: Mode,
    ) -> Result<Hold> {
        let (id, lease_ms) = (new_lease_id(), lease_ms.unwrap_or(self.lease_ms));
        crate::store::one_wait::within(|| {
            let now_ms = self.holding_time(options)?;
            match self.prepare(key, options, now_ms, mode)? {
                Prepared::Decided(decision) => Ok(Hold {
                    decision,
                    lease: None,
                }),
                Prepared::Ask {
                    tag, rules, shared, ..
                } => {
                    let request = self.request(&tag, &rules, &[], options.cost, now_ms, mode);
                    let outcome = self.warden.store.hold(&request, &id, lease_ms);
                    self.hold_of(&request, options, outcome, &shared, &id, lease_ms)
                }
            }
        })
    }

    /// [`Limiter::holding`], awaiting the store where it has an awaitable log.
    #[cfg(feature = "async")]
    async fn holding_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        lease_ms: Option<u64>,
        mode: Mode,
    ) -> Result<Hold> {
        let (id, lease_ms) = (new_lease_id(), lease_ms.unwrap_or(self.lease_ms));
        crate::store::one_wait::within_async(async {
            self.controls_due_async().await;
            let now_ms = self.holding_time(options)?;
            match self.prepare(key, options, now_ms, mode)? {
                Prepared::Decided(decision) => Ok(Hold {
                    decision,
                    lease: None,
                }),
                Prepared::Ask {
                    tag, rules, shared, ..
                } => {
                    let request = self.request(&tag, &rules, &[], options.cost, now_ms, mode);
                    let outcome = match self.warden.store.as_async() {
                        Some(log) => log.hold_async(&request, &id, lease_ms).await,
                        None => self.warden.store.hold(&request, &id, lease_ms),
                    };
                    self.hold_of(&request, options, outcome, &shared, &id, lease_ms)
                }
            }
        })
        .await
    }

    /// The hold the store's answer to `request` comes to (counted and
    /// noted as a check is, a hold's but not a peek's), with its lease when
    /// the store took one.
    fn hold_of(
        &self,
        request: &Request<'_>,
        options: &CheckOptions<'_>,
        outcome: Result<Observation>,
        shared: &Shared,
        id: &str,
        lease_ms: u64,
    ) -> Result<Hold> {
        let taken = leased(&outcome);
        let decision = finish(self.conclude(request, options.tier, outcome)?, shared);
        self.noted(&decision, request.mode, request.tag, options.ip);
        Ok(self.held(decision, taken, request.tag, id, lease_ms))
    }

    /// A hold's time (see [`Limiter::check_time`]), on a limiter with an
    /// in-flight rule and without a tier (tiers hold none).
    fn holding_time(&self, options: &CheckOptions<'_>) -> Result<Option<u64>> {
        if self.rules.in_flight().is_none() {
            return Err(Error::config(
                "hold() takes a slot of an in-flight rule, and this limiter has none: \
                 give one, such as '10 concurrent; 100/minute'",
            ));
        }
        if options.tier.is_some() || options.meter_costs.is_some() {
            return Err(Error::config(
                "a hold takes no tier and no meter costs: an in-flight limiter has neither",
            ));
        }
        self.check_time(options.cost, options.now)
    }

    /// The hold of a decision, with its lease when the store took one.
    fn held(
        &self,
        decision: Decision,
        taken: Option<u64>,
        tag: &[u8],
        id: &str,
        lease_ms: u64,
    ) -> Hold {
        let lease = taken
            .filter(|_| decision.allowed())
            .map(|taken_at_ms| Lease {
                id: crate::in_flight::lease_id(taken_at_ms, id),
                lapse_at_ms: taken_at_ms + lease_ms,
                taken_at_ms,
                tag: tag.to_vec(),
                scope: self.scope.clone(),
            });
        Hold { decision, lease }
    }

    /// Gives back `lease`'s slot; whether it was still held (a lease that
    /// lapsed, or was released already, here or in another process, is
    /// harmless: `false`).
    pub fn release(&self, lease: &Lease) -> Result<bool> {
        let gone = self.lease_call(lease, LeaseCall::Release(&lease.id))?;
        RELEASES.fetch_add(1, Ordering::Release);
        Ok(!gone.is_empty())
    }

    /// Makes `lease` lapse `lease_ms` from now (the limiter's lease when
    /// `None`): its new lapse time, or `None` when it lapsed or was released.
    pub fn extend(&self, lease: &Lease, lease_ms: Option<u64>) -> Result<Option<u64>> {
        let lease_ms = lease_ms.unwrap_or(self.lease_ms);
        let held = self.lease_call(lease, LeaseCall::Extend(&lease.id, lease_ms))?;
        Ok(held.first().map(|(_, lapse)| *lapse))
    }

    /// [`Limiter::release`], awaited.
    #[cfg(feature = "async")]
    pub async fn release_async(&self, lease: &Lease) -> Result<bool> {
        let gone = self
            .lease_call_async(lease, LeaseCall::Release(&lease.id))
            .await?;
        RELEASES.fetch_add(1, Ordering::Release);
        Ok(!gone.is_empty())
    }

    /// [`Limiter::extend`], awaited.
    #[cfg(feature = "async")]
    pub async fn extend_async(&self, lease: &Lease, lease_ms: Option<u64>) -> Result<Option<u64>> {
        let lease_ms = lease_ms.unwrap_or(self.lease_ms);
        let held = self
            .lease_call_async(lease, LeaseCall::Extend(&lease.id, lease_ms))
            .await?;
        Ok(held.first().map(|(_, lapse)| *lapse))
    }

    /// The live leases of `key` (id, lapse time in ms), for an operator.
    pub fn leases(&self, key: &[u8]) -> Result<Vec<Held>> {
        let tag = crate::keys::key_tag(key);
        self.warden.store.leases(
            &tag,
            &self.scope,
            LeaseCall::List,
            self.warden.clock.frozen(),
        )
    }

    /// An operator's release of `key`'s lease `id` (a holder that hangs):
    /// whether it was held.
    pub fn release_id(&self, key: &[u8], id: &str) -> Result<bool> {
        let tag = crate::keys::key_tag(key);
        let gone = self.warden.store.leases(
            &tag,
            &self.scope,
            LeaseCall::Release(id),
            self.warden.clock.frozen(),
        )?;
        RELEASES.fetch_add(1, Ordering::Release);
        Ok(!gone.is_empty())
    }

    fn lease_call(&self, lease: &Lease, call: LeaseCall<'_>) -> Result<Vec<Held>> {
        let now = self.warden.clock.frozen();
        crate::store::one_wait::within(|| {
            self.warden
                .store
                .leases(&lease.tag, &lease.scope, call, now)
        })
    }

    #[cfg(feature = "async")]
    async fn lease_call_async(&self, lease: &Lease, call: LeaseCall<'_>) -> Result<Vec<Held>> {
        let now = self.warden.clock.frozen();
        let store = &self.warden.store;
        crate::store::one_wait::within_async(async {
            match store.as_async() {
                Some(log) => log.leases_async(&lease.tag, &lease.scope, call, now).await,
                None => store.leases(&lease.tag, &lease.scope, call, now),
            }
        })
        .await
    }

    /// A hold made as [`Limiter::acquire`] makes a check: tried again until
    /// it takes a slot or the next try would come past `timeout` (see the
    /// module's docs for when it tries); each wait made by `pause`.
    pub fn hold_pausing(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        lease_ms: Option<u64>,
        timeout: Option<Duration>,
        pause: &mut dyn FnMut(Duration) -> Result<()>,
    ) -> Result<(Acquired, Hold)> {
        let attempt = &mut || {
            let hold = self.hold(key, options, lease_ms)?;
            Ok((hold.decision.clone(), hold))
        };
        let sleep = &mut |until: Duration| {
            let seen = RELEASES.load(Ordering::Acquire);
            let started = Instant::now();
            while started.elapsed() < until && RELEASES.load(Ordering::Acquire) == seen {
                pause(LOOK_EVERY.min(until.saturating_sub(started.elapsed())))?;
            }
            Ok(())
        };
        self.waiting_bounded(options, timeout, MOST_BETWEEN_TRIES, sleep, attempt)
    }

    /// [`Limiter::hold_pausing`], awaited: the waits are timers.
    #[cfg(feature = "async")]
    pub async fn hold_waiting_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
        lease_ms: Option<u64>,
        timeout: Option<Duration>,
    ) -> Result<(Acquired, Hold)> {
        let attempt = || async {
            let hold = self.hold_async(key, options, lease_ms).await?;
            Ok((hold.decision.clone(), hold))
        };
        let sleep = |until: Duration| async move {
            let seen = RELEASES.load(Ordering::Acquire);
            let started = Instant::now();
            while started.elapsed() < until && RELEASES.load(Ordering::Acquire) == seen {
                tokio::time::sleep(LOOK_EVERY.min(until.saturating_sub(started.elapsed()))).await;
            }
        };
        self.waiting_bounded_async(options, timeout, MOST_BETWEEN_TRIES, sleep, attempt)
            .await
    }
}

/// A new lease id's random part (the store puts the time it is taken at
/// before it): 64 bits mixed of a per-thread random number, a count of
/// this process's ids and its pid, in hex.
fn new_lease_id() -> String {
    static TAKEN: AtomicU64 = AtomicU64::new(0);
    let count = TAKEN.fetch_add(1, Ordering::Relaxed);
    let mixed = super::wait::random() ^ count.rotate_left(32) ^ u64::from(std::process::id());
    format!("{mixed:016x}")
}

/// When the store took the hold's lease, the time it took it at.
fn leased(outcome: &Result<Observation>) -> Option<u64> {
    match outcome {
        Ok(seen) if seen.leases.is_some_and(|l| l.taken) => Some(seen.now_ms),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lease_ids_differ() {
        let ids: std::collections::HashSet<String> =
            (0..1000).map(|_| super::new_lease_id()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
