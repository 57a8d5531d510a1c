//! What a request holds while it is under way and settles when its
//! response ends: the slot a throttle with an in-flight rule ("3
//! concurrent") holds, whatever the response; the unit a throttle that
//! counts only some responses (`count`) counted, given back when the
//! response is not one it counts; and the estimates a throttle with meters
//! reserved, settled to what the response's `usage` headers say. A door
//! tells the gate the end ([`Gate::finish`]) when `verdict.awaits_end`:
//! after the body's last byte, when the client hung up, or (no status)
//! when the application raised; a request the gate refuses gives back its
//! slots and what `count` counted at once.

use super::{units_of, Checked, Counted, Ending, Gate, Header, Plan, Selected, Verdict};
use crate::decision::{Decision, Outcome};
use crate::error::{Error, Result};
use crate::in_flight::Lease;
use crate::limiter::{CheckOptions, Limiter, Reservation};
use std::sync::Arc;

/// A check's decision, the lease it took (a throttle with an in-flight
/// rule) and its reservation (a throttle with meters).
pub(super) type Taken = (Decision, Option<Lease>, Option<Arc<Reservation>>);

/// A reservation as the gate takes it: its decision, and itself.
fn reserved(reservation: Reservation) -> Taken {
    (
        reservation.decision.clone(),
        None,
        Some(Arc::new(reservation)),
    )
}

impl Gate {
    /// Whether throttle `i` holds a slot while its requests are under way.
    fn holds(&self, i: usize) -> bool {
        self.throttles[i].rules().in_flight().is_some()
    }

    /// Whether throttle `i`'s checks go in the one round trip of rates
    /// alone (it holds no slot and has no meters).
    fn batched(&self, i: usize) -> bool {
        !self.holds(i) && self.spec.throttles[i].meters.is_empty()
    }

    /// Throttle `i`'s estimate per meter, in its meters' order; `None`
    /// for a throttle without meters.
    fn meter_costs(&self, i: usize) -> Option<Vec<u64>> {
        let meters = &self.spec.throttles[i].meters;
        (!meters.is_empty()).then(|| meters.iter().map(|m| m.cost).collect())
    }

    /// The reserve options of check `s`: its meters' estimates, and the
    /// client's address.
    fn meter_options<'s>(s: &'s Selected, costs: &'s [u64]) -> CheckOptions<'s> {
        CheckOptions {
            ip: s.ip.as_deref(),
            meter_costs: Some(costs),
            ..CheckOptions::default()
        }
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
    /// one round trip, then a hold for each that has an in-flight rule and
    /// a reservation for each that has meters; each atomically on its own,
    /// in the plan's order.
    pub(super) fn taken(&self, plan: &Plan) -> Result<Vec<Taken>> {
        let items = self.items(plan, |i| self.batched(i));
        let mut batch = if items.is_empty() {
            Vec::new()
        } else {
            crate::limiter::check_batch(&items, None)?
        }
        .into_iter();
        let mut taken = Vec::with_capacity(plan.checks.len());
        for s in &plan.checks {
            let limiter = &self.throttles[s.throttle];
            let one = if self.holds(s.throttle) {
                (limiter.hold(&s.key, &Gate::hold_options(s), None))
                    .map(|hold| (hold.decision, hold.lease, None))
            } else if let Some(costs) = self.meter_costs(s.throttle) {
                (limiter.reserve(&s.key, &Gate::meter_options(s, &costs))).map(reserved)
            } else {
                Ok((batch.next().ok_or_else(short_batch)?, None, None))
            };
            match one {
                Ok(one) => taken.push(one),
                Err(e) => return Err(self.let_go(plan, &taken, e)),
            }
        }
        Ok(taken)
    }

    /// [`Gate::taken`], awaiting the store where it has an awaitable form.
    #[cfg(feature = "async")]
    pub(super) async fn taken_async(&self, plan: &Plan) -> Result<Vec<Taken>> {
        let items = self.items(plan, |i| self.batched(i));
        let mut batch = if items.is_empty() {
            Vec::new()
        } else {
            crate::limiter::check_batch_async(&items, None).await?
        }
        .into_iter();
        let mut taken = Vec::with_capacity(plan.checks.len());
        for s in &plan.checks {
            let limiter = &self.throttles[s.throttle];
            let one = if self.holds(s.throttle) {
                (limiter
                    .hold_async(&s.key, &Gate::hold_options(s), None)
                    .await)
                    .map(|hold| (hold.decision, hold.lease, None))
            } else if let Some(costs) = self.meter_costs(s.throttle) {
                let options = Gate::meter_options(s, &costs);
                (limiter.reserve_async(&s.key, &options).await).map(reserved)
            } else {
                Ok((batch.next().ok_or_else(short_batch)?, None, None))
            };
            match one {
                Ok(one) => taken.push(one),
                Err(e) => return Err(self.let_go(plan, &taken, e)),
            }
        }
        Ok(taken)
    }

    /// A hold or a reservation failed (the store, with `on_error` "raise"):
    /// the leases and reservations the request took before it are let go,
    /// as far as the store answers (a lease it does not take back lapses),
    /// and the failure is the answer.
    fn let_go(&self, plan: &Plan, taken: &[Taken], failure: Error) -> Error {
        for (s, (_, lease, reservation)) in plan.checks.iter().zip(taken) {
            let limiter = &self.throttles[s.throttle];
            if let Some(lease) = lease {
                let _ = limiter.release(lease);
            }
            if let Some(reservation) = reservation {
                let _ = limiter.cancel(reservation);
            }
        }
        failure
    }

    /// Whether check `c` holds something until the response ends: a slot
    /// (its lease), a unit its throttle may give back once the status is
    /// known (its `count`), or a reservation of meters its throttle
    /// settles by the response (its `count`, a meter's `usage`).
    pub(super) fn held_for_now(&self, c: &Checked) -> bool {
        let t = &self.spec.throttles[c.throttle];
        c.lease.is_some()
            || self.counted_for_now(c)
            || (c.reservation.as_ref()).is_some_and(|r| {
                r.logged() && (t.count.is_some() || t.meters.iter().any(|m| m.usage.is_some()))
            })
    }

    /// Whether check `c` logged a unit its throttle (of rules, not meters)
    /// may give back once the response's status is known (its `count`).
    fn counted_for_now(&self, c: &Checked) -> bool {
        self.spec.throttles[c.throttle].count.is_some()
            && c.reservation.is_none()
            && c.decision.outcome == Outcome::Admitted
    }

    /// The leases a verdict's checks took, each with its throttle's limiter.
    fn leases_of<'v>(&'v self, verdict: &'v Verdict) -> Vec<(&'v Limiter, &'v Lease)> {
        (verdict.checked.iter())
            .filter_map(|c| Some((self.throttles[c.throttle].as_ref(), c.lease.as_ref()?)))
            .collect()
    }

    /// What a verdict's checks settle when its request ends, by their
    /// throttles' limiters: each unit a throttle that counts only some
    /// responses does not count (`counts` says, of the throttle's `count`)
    /// goes back; each reservation of meters is settled, wholly back when
    /// its throttle does not count the response, else each meter with a
    /// `usage` to the units the response's header (`header` reads it) says
    /// (a meter without one, or a response that says nothing readable,
    /// keeps its estimate).
    fn due<'v>(
        &'v self,
        verdict: &'v Verdict,
        counts: impl Fn(&Counted) -> bool,
        header: impl Fn(&str) -> Option<&'v [u8]>,
    ) -> Result<Vec<(&'v Limiter, Due<'v>)>> {
        let mut out = Vec::new();
        for c in &verdict.checked {
            let t = &self.spec.throttles[c.throttle];
            let limiter = self.throttles[c.throttle].as_ref();
            let counted = t.count.as_ref().is_none_or(&counts);
            if let Some(reservation) = c.reservation.as_deref().filter(|r| r.logged()) {
                let actual: Vec<Option<u64>> = (t.meters.iter())
                    .map(|m| match counted {
                        false => Some(0),
                        true => m.usage.as_deref().and_then(&header).and_then(units_of),
                    })
                    .collect();
                if actual.iter().any(Option::is_some) {
                    out.push((limiter, Due::Meters(reservation, actual)));
                }
            } else if !counted && self.counted_for_now(c) {
                let reservation = limiter.reservation_of(&c.key, c.decision.clone(), c.cost)?;
                out.push((limiter, Due::Nothing(Box::new(reservation))));
            }
        }
        Ok(out)
    }

    /// Tells the gate that the response to a request it let through ended,
    /// with `status` (`None`: the application raised, and there is no
    /// response) and `headers` (name and value pairs; a name in any case):
    /// each slot the request held is released, each throttle that does
    /// not count that response (its `count`, say "failures" and a 200)
    /// gives back what it counted (a request the application raised on
    /// stays counted), and each reservation of meters is settled to what
    /// the response's `usage` headers say, one round trip each. A door
    /// calls it once, when `verdict.awaits_end` (else it does nothing):
    /// after the body's last byte or when the client hung up. Every slot is
    /// released even when one release fails; the first failure is returned.
    pub fn finish(&self, verdict: &Verdict, status: Option<u16>, headers: &[Header]) -> Result<()> {
        if !verdict.awaits_end {
            return Ok(());
        }
        let header = |name: &str| header_in(headers, name);
        self.end(verdict, |c| status.is_none_or(|s| c.counts(s)), header)
    }

    /// A request the gate refuses never reaches the application: the slots
    /// it took and what a throttle that counts only some responses counted
    /// of it (before another throttle or a listing refused it) are given
    /// back at once (a reservation of meters keeps its estimates, as a
    /// throttle of rules keeps its unit, unless its throttle has a
    /// `count`). The refusal stands when the store fails to take them
    /// back; the verdict then carries a warning (a slot lapses with its
    /// lease).
    pub(super) fn given_back(&self, verdict: &mut Verdict) {
        if verdict.ending != Ending::Pass {
            let outcome = self.end(verdict, |_| false, |_| None);
            not_given_back(verdict, outcome);
        }
    }

    /// Releases a verdict's leases and settles what is [`Gate::due`].
    fn end<'v>(
        &'v self,
        verdict: &'v Verdict,
        counts: impl Fn(&Counted) -> bool,
        header: impl Fn(&str) -> Option<&'v [u8]>,
    ) -> Result<()> {
        let mut failed = None;
        for (limiter, lease) in self.leases_of(verdict) {
            if let Err(e) = limiter.release(lease) {
                failed.get_or_insert(e);
            }
        }
        for (limiter, due) in self.due(verdict, counts, header)? {
            match due {
                Due::Nothing(reservation) => limiter.settle(&reservation, 0, None)?,
                Due::Meters(reservation, actual) => {
                    limiter.settle_meters(reservation, &actual, None)?
                }
            };
        }
        failed.map_or(Ok(()), Err)
    }

    /// [`Gate::finish`], awaiting the store where it has an awaitable form.
    #[cfg(feature = "async")]
    pub async fn finish_async(
        &self,
        verdict: &Verdict,
        status: Option<u16>,
        headers: &[Header],
    ) -> Result<()> {
        if !verdict.awaits_end {
            return Ok(());
        }
        let header = |name: &str| header_in(headers, name);
        self.end_async(verdict, |c| status.is_none_or(|s| c.counts(s)), header)
            .await
    }

    /// [`Gate::given_back`], awaited.
    #[cfg(feature = "async")]
    pub(super) async fn given_back_async(&self, verdict: &mut Verdict) {
        if verdict.ending != Ending::Pass {
            let outcome = self.end_async(verdict, |_| false, |_| None).await;
            not_given_back(verdict, outcome);
        }
    }

    /// [`Gate::end`], awaited.
    #[cfg(feature = "async")]
    async fn end_async<'v>(
        &'v self,
        verdict: &'v Verdict,
        counts: impl Fn(&Counted) -> bool,
        header: impl Fn(&str) -> Option<&'v [u8]>,
    ) -> Result<()> {
        let mut failed = None;
        for (limiter, lease) in self.leases_of(verdict) {
            if let Err(e) = limiter.release_async(lease).await {
                failed.get_or_insert(e);
            }
        }
        for (limiter, due) in self.due(verdict, counts, header)? {
            match due {
                Due::Nothing(reservation) => limiter.settle_async(&reservation, 0, None).await?,
                Due::Meters(reservation, actual) => {
                    (limiter.settle_meters_async(reservation, &actual, None)).await?
                }
            };
        }
        failed.map_or(Ok(()), Err)
    }
}

/// What one check settles when its request ends.
enum Due<'v> {
    /// A throttle of rules that does not count the response: its unit
    /// (the reservation made of the check) goes back.
    Nothing(Box<Reservation>),
    /// A throttle with meters: its reservation, settled to each meter's
    /// units (`None`: the meter keeps its estimate).
    Meters(&'v Reservation, Vec<Option<u64>>),
}

/// The value of header `name` (lower case) in a response's `headers`, its
/// name in any case: the first such header's.
fn header_in<'h>(headers: &'h [Header], name: &str) -> Option<&'h [u8]> {
    (headers.iter())
        .find(|(given, _)| given.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, value)| value.as_slice())
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
