//! What a request holds while it is under way and gives back when its
//! response ends: the slot a throttle with an in-flight rule ("3
//! concurrent") holds, whatever the response, and the unit a throttle that
//! counts only some responses (`count`) counted, when the response is not
//! one it counts. A door tells the gate the end ([`Gate::finish`]) when
//! `verdict.awaits_end`: after the body's last byte, when the client hung
//! up, or (no status) when the application raised; a request the gate
//! refuses gives both back at once.

use super::{Checked, Counted, Ending, Gate, Plan, Selected, Verdict};
use crate::decision::{Decision, Outcome};
use crate::error::{Error, Result};
use crate::in_flight::Lease;
use crate::limiter::{CheckOptions, Limiter, Reservation};

/// A check's decision, and the lease it took (a throttle with an in-flight rule).
pub(super) type Taken = (Decision, Option<Lease>);

impl Gate {
    /// Whether throttle `i` holds a slot while its requests are under way.
    fn holds(&self, i: usize) -> bool {
        self.throttles[i].rules().in_flight().is_some()
    }

    /// The hold options of check `s`: its cost, and the client's address.
    fn hold_options(s: &Selected) -> CheckOptions<'_> {
        CheckOptions {
            cost: s.cost,
            ip: s.ip.as_deref(),
            ..CheckOptions::default()
        }
    }

    /// Makes the plan's checks (blocking): the throttles of rates alone in
    /// one round trip, then a hold for each that has an in-flight rule;
    /// each atomically on its own, in the plan's order.
    pub(super) fn taken(&self, plan: &Plan) -> Result<Vec<Taken>> {
        let items = self.items(plan, |i| !self.holds(i));
        let mut batch = if items.is_empty() {
            Vec::new()
        } else {
            crate::limiter::check_batch(&items, None)?
        }
        .into_iter();
        let mut taken = Vec::with_capacity(plan.checks.len());
        for s in &plan.checks {
            taken.push(if self.holds(s.throttle) {
                let hold = self.throttles[s.throttle].hold(&s.key, &Gate::hold_options(s), None);
                match hold {
                    Ok(hold) => (hold.decision, hold.lease),
                    Err(e) => return Err(self.let_go(plan, &taken, e)),
                }
            } else {
                (batch.next().ok_or_else(short_batch)?, None)
            });
        }
        Ok(taken)
    }

    /// [`Gate::taken`], awaiting the store where it has an awaitable form.
    #[cfg(feature = "async")]
    pub(super) async fn taken_async(&self, plan: &Plan) -> Result<Vec<Taken>> {
        let items = self.items(plan, |i| !self.holds(i));
        let mut batch = if items.is_empty() {
            Vec::new()
        } else {
            crate::limiter::check_batch_async(&items, None).await?
        }
        .into_iter();
        let mut taken = Vec::with_capacity(plan.checks.len());
        for s in &plan.checks {
            taken.push(if self.holds(s.throttle) {
                let limiter = &self.throttles[s.throttle];
                match limiter
                    .hold_async(&s.key, &Gate::hold_options(s), None)
                    .await
                {
                    Ok(hold) => (hold.decision, hold.lease),
                    Err(e) => return Err(self.let_go(plan, &taken, e)),
                }
            } else {
                (batch.next().ok_or_else(short_batch)?, None)
            });
        }
        Ok(taken)
    }

    /// A hold failed (the store, with `on_error` "raise"): the leases the
    /// request took before it are let go, as far as the store answers (a
    /// lease it does not take back lapses), and the failure is the answer.
    fn let_go(&self, plan: &Plan, taken: &[Taken], failure: Error) -> Error {
        for (s, (_, lease)) in plan.checks.iter().zip(taken) {
            if let Some(lease) = lease {
                let _ = self.throttles[s.throttle].release(lease);
            }
        }
        failure
    }

    /// Whether check `c` holds something until the response ends: a slot
    /// (its lease), or a unit its throttle may give back once the status is
    /// known (its `count`).
    pub(super) fn held_for_now(&self, c: &Checked) -> bool {
        c.lease.is_some() || self.counted_for_now(c)
    }

    /// Whether check `c` logged a unit its throttle may give back once the
    /// response's status is known (its `count`).
    fn counted_for_now(&self, c: &Checked) -> bool {
        self.spec.throttles[c.throttle].count.is_some() && c.decision.outcome == Outcome::Admitted
    }

    /// The leases a verdict's checks took, each with its throttle's limiter.
    fn leases_of<'v>(&'v self, verdict: &'v Verdict) -> Vec<(&'v Limiter, &'v Lease)> {
        (verdict.checked.iter())
            .filter_map(|c| Some((self.throttles[c.throttle].as_ref(), c.lease.as_ref()?)))
            .collect()
    }

    /// The reservations a verdict's checks give back: each whose throttle
    /// counts only some responses (its `count`) and does not count this one
    /// (`counts` says, of the throttle's `count`), by the throttle's limiter.
    fn uncounted(
        &self,
        verdict: &Verdict,
        counts: impl Fn(&Counted) -> bool,
    ) -> Result<Vec<(&Limiter, Reservation)>> {
        let mut out = Vec::new();
        for c in verdict.checked.iter().filter(|c| self.counted_for_now(c)) {
            let counted = self.spec.throttles[c.throttle].count.as_ref();
            if counted.is_some_and(|counted| !counts(counted)) {
                let limiter = &self.throttles[c.throttle];
                out.push((
                    limiter.as_ref(),
                    limiter.reservation_of(&c.key, c.decision.clone(), c.cost)?,
                ));
            }
        }
        Ok(out)
    }

    /// Tells the gate that the response to a request it let through ended,
    /// with `status` (`None`: the application raised, and there is no
    /// response): each slot the request held is released, and each
    /// throttle that does not count that response (its `count`, say
    /// "failures" and a 200) gives back the unit it counted (a request the
    /// application raised on stays counted), one round trip each. A door
    /// calls it once, when `verdict.awaits_end` (else it does nothing):
    /// after the body's last byte or when the client hung up. Every slot is
    /// released even when one release fails; the first failure is returned.
    pub fn finish(&self, verdict: &Verdict, status: Option<u16>) -> Result<()> {
        if !verdict.awaits_end {
            return Ok(());
        }
        self.end(verdict, |c| status.is_none_or(|s| c.counts(s)))
    }

    /// A request the gate refuses never reaches the application: the slots
    /// it took and what a throttle that counts only some responses counted
    /// of it (before another throttle or a listing refused it) are given
    /// back at once. The refusal stands when the store fails to take them
    /// back; the verdict then carries a warning (a slot lapses with its
    /// lease).
    pub(super) fn given_back(&self, verdict: &mut Verdict) {
        if verdict.ending != Ending::Pass {
            let outcome = self.end(verdict, |_| false);
            not_given_back(verdict, outcome);
        }
    }

    /// Releases a verdict's leases and gives back what `counts` does not count.
    fn end(&self, verdict: &Verdict, counts: impl Fn(&Counted) -> bool) -> Result<()> {
        let mut failed = None;
        for (limiter, lease) in self.leases_of(verdict) {
            if let Err(e) = limiter.release(lease) {
                failed.get_or_insert(e);
            }
        }
        for (limiter, reservation) in self.uncounted(verdict, counts)? {
            limiter.settle(&reservation, 0, None)?;
        }
        failed.map_or(Ok(()), Err)
    }

    /// [`Gate::finish`], awaiting the store where it has an awaitable form.
    #[cfg(feature = "async")]
    pub async fn finish_async(&self, verdict: &Verdict, status: Option<u16>) -> Result<()> {
        if !verdict.awaits_end {
            return Ok(());
        }
        self.end_async(verdict, |c| status.is_none_or(|s| c.counts(s)))
            .await
    }

    /// [`Gate::given_back`], awaited.
    #[cfg(feature = "async")]
    pub(super) async fn given_back_async(&self, verdict: &mut Verdict) {
        if verdict.ending != Ending::Pass {
            let outcome = self.end_async(verdict, |_| false).await;
            not_given_back(verdict, outcome);
        }
    }

    /// [`Gate::end`], awaited.
    #[cfg(feature = "async")]
    async fn end_async(&self, verdict: &Verdict, counts: impl Fn(&Counted) -> bool) -> Result<()> {
        let mut failed = None;
        for (limiter, lease) in self.leases_of(verdict) {
            if let Err(e) = limiter.release_async(lease).await {
                failed.get_or_insert(e);
            }
        }
        for (limiter, reservation) in self.uncounted(verdict, counts)? {
            limiter.settle_async(&reservation, 0, None).await?;
        }
        failed.map_or(Ok(()), Err)
    }
}

/// Notes on a refused verdict what its store did not give back.
fn not_given_back(verdict: &mut Verdict, outcome: Result<()>) {
    if let Err(e) = outcome {
        verdict.warnings.push(format!(
            "ratekeeper: a refused request's slot or unit was not given back \
             (a slot lapses with its lease): {e}"
        ));
    }
}

/// The store answered fewer checks than the batch asked (a batch answers
/// each item, or fails whole).
fn short_batch() -> Error {
    Error::storage("the store answered fewer checks than the gate asked")
}
