//! A metered limiter's reservations: an estimate per meter, checked
//! together, and settled per meter to what the work cost, each in one
//! round trip (see [`super::reserve`] for a limiter of one rule set).

use super::meters::{Charge, MeteredAsk, Metering};
use super::reserve::{Logged, MeterSettled, Part, Reservation, Settled};
use super::{CheckOptions, Limiter};
use crate::decision::{Observation, Outcome};
use crate::error::{Error, Result};
use crate::store::Mode;
use crate::time::now_to_ms;
use std::borrow::Cow;
use std::sync::atomic::AtomicBool;

impl Limiter {
    /// The units a settle says each meter's work cost, in the meters' order,
    /// from the caller's (name, units) pairs: each name one of the meters,
    /// given once, with 0 or more; `None` for a meter not named (it keeps
    /// its estimate).
    pub fn meter_actuals(&self, given: &[(String, i128)]) -> Result<Vec<Option<u64>>> {
        let mut actual = vec![None; self.meters.len()];
        for (name, units) in given {
            let i = self.meter_index(name)?;
            if actual[i].is_some() {
                return Err(Error::config(format!("meter '{name}' is given twice")));
            }
            actual[i] = Some(super::actual_cost_from(*units).map_err(|_| {
                Error::config(format!(
                    "invalid cost {units} for meter '{name}': what the work cost is 0 or more"
                ))
            })?);
        }
        Ok(actual)
    }

    /// A metered reservation: [`Limiter::reserve`] of a cost per meter.
    pub(crate) fn reserve_metered(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
    ) -> Result<Reservation> {
        crate::store::one_wait::within(|| match self.metering(key, options, Mode::Check)? {
            Metering::Decided(decision) => Ok(self.reservation(options, decision, None)),
            Metering::Ask(ask) => {
                let outcome = ask.asked(self);
                self.reserved_metered(&ask, options, outcome)
            }
        })
    }

    /// [`Limiter::reserve_metered`], awaited.
    #[cfg(feature = "async")]
    pub(crate) async fn reserve_metered_async(
        &self,
        key: &[u8],
        options: &CheckOptions<'_>,
    ) -> Result<Reservation> {
        crate::store::one_wait::within_async(async {
            self.controls_due_async().await;
            match self.metering(key, options, Mode::Check)? {
                Metering::Decided(decision) => Ok(self.reservation(options, decision, None)),
                Metering::Ask(ask) => {
                    let outcome = ask.asked_async(self).await;
                    self.reserved_metered(&ask, options, outcome)
                }
            }
        })
        .await
    }

    fn reserved_metered(
        &self,
        ask: &MeteredAsk<'_>,
        options: &CheckOptions<'_>,
        outcome: Result<Vec<Observation>>,
    ) -> Result<Reservation> {
        // each meter's log holds its units at its own check's time
        let times: Option<Vec<u64>> = match &outcome {
            Ok(seen) if seen.iter().all(|obs| obs.allowed) => {
                Some(seen.iter().map(|obs| obs.now_ms).collect())
            }
            _ => None,
        };
        let decision = self.metered_decision(ask, options.ip, outcome)?;
        let logged = match (times, decision.outcome == Outcome::Admitted) {
            (Some(times), true) => Some(Logged {
                tag: ask.tag.to_vec(),
                parts: ask
                    .charged
                    .iter()
                    .zip(times)
                    .map(|(charge, at_ms)| Part {
                        meter: Some(charge.meter),
                        rules: charge.rules.clone().into_owned(),
                        at_ms,
                        estimate: charge.cost,
                    })
                    .collect(),
            }),
            _ => None,
        };
        Ok(self.reservation(options, decision, logged))
    }

    /// A metered reservation of `options`' costs per meter.
    fn reservation(
        &self,
        options: &CheckOptions<'_>,
        decision: crate::decision::Decision,
        logged: Option<Logged>,
    ) -> Reservation {
        let costs = options.meter_costs.unwrap_or_default();
        let estimates: Vec<(String, u64)> = self
            .meters
            .iter()
            .zip(costs)
            .filter(|(_, &cost)| cost > 0)
            .map(|(meter, &cost)| (meter.name.clone(), cost))
            .collect();
        Reservation {
            decision,
            estimate: estimates
                .iter()
                .map(|(_, c)| *c)
                .fold(0, u64::saturating_add),
            estimates,
            logged,
            settled: AtomicBool::new(false),
        }
    }

    /// Settles `reservation` at 0: the work did not happen, every unit
    /// (every meter's) goes back.
    pub fn cancel(&self, reservation: &Reservation) -> Result<Settled> {
        match self.meters.len() {
            0 => self.settle(reservation, 0, None),
            n => self.settle_meters(reservation, &vec![Some(0); n], None),
        }
    }

    /// [`Limiter::cancel`], awaited.
    #[cfg(feature = "async")]
    pub async fn cancel_async(&self, reservation: &Reservation) -> Result<Settled> {
        match self.meters.len() {
            0 => self.settle_async(reservation, 0, None).await,
            n => {
                self.settle_meters_async(reservation, &vec![Some(0); n], None)
                    .await
            }
        }
    }

    /// Settles a metered reservation to what the work cost per meter
    /// (`actual`, from [`Limiter::meter_actuals`]: a meter not named keeps
    /// its estimate), in one round trip: each meter as [`Limiter::settle`]
    /// settles a limiter of one rule set. A meter the reservation did not
    /// charge is charged its whole cost, as an overrun.
    pub fn settle_meters(
        &self,
        reservation: &Reservation,
        actual: &[Option<u64>],
        now: Option<f64>,
    ) -> Result<Settled> {
        let (ask, settled) = match self.metered_settling(reservation, actual, now)? {
            Ok(ask) => ask,
            Err(nothing) => return Ok(nothing),
        };
        crate::store::one_wait::within(|| {
            let outcome = ask.asked(self);
            self.settled_metered(&ask, settled, outcome)
        })
    }

    /// [`Limiter::settle_meters`], awaited.
    #[cfg(feature = "async")]
    pub async fn settle_meters_async(
        &self,
        reservation: &Reservation,
        actual: &[Option<u64>],
        now: Option<f64>,
    ) -> Result<Settled> {
        crate::store::one_wait::within_async(async {
            self.controls_due_async().await;
            let (ask, settled) = match self.metered_settling(reservation, actual, now)? {
                Ok(ask) => ask,
                Err(nothing) => return Ok(nothing),
            };
            let outcome = ask.asked_async(self).await;
            self.settled_metered(&ask, settled, outcome)
        })
        .await
    }

    /// What a metered settle came to: `settled`, with the decision from
    /// what the store answered.
    fn settled_metered(
        &self,
        ask: &MeteredAsk<'_>,
        settled: Settled,
        outcome: Result<Vec<Observation>>,
    ) -> Result<Settled> {
        Ok(Settled {
            decision: Some(self.metered_decision(ask, None, outcome)?),
            ..settled
        })
    }

    /// Marks a metered reservation settled: what to ask the store (and the
    /// settle's sums), or, as `Err`, what it came to without the store.
    #[allow(clippy::type_complexity)]
    fn metered_settling<'r>(
        &'r self,
        reservation: &'r Reservation,
        actual: &[Option<u64>],
        now: Option<f64>,
    ) -> Result<std::result::Result<(MeteredAsk<'r>, Settled), Settled>> {
        if self.meters.is_empty() || actual.len() != self.meters.len() {
            return Err(super::reserve::wrong_settle());
        }
        let now_ms = match now {
            Some(now) => Some(now_to_ms(now)?),
            None => self.warden.clock.frozen(),
        };
        reservation.settle_once()?;
        let nothing = Settled {
            decision: None,
            over: 0,
            refunded: 0,
            meters: Vec::new(),
        };
        let Some(logged) = &reservation.logged else {
            return Ok(Err(nothing));
        };
        let Some(first_at) = logged.parts.first().map(|p| p.at_ms) else {
            return Ok(Err(nothing));
        };
        let mut charged = Vec::new();
        let mut meters = Vec::new();
        for (i, units) in actual.iter().enumerate() {
            let Some(units) = *units else { continue };
            let part = logged.parts.iter().find(|p| p.meter == Some(i));
            let estimate = part.map_or(0, |p| p.estimate);
            let (over, refunded) = (
                units.saturating_sub(estimate),
                estimate.saturating_sub(units),
            );
            if over == 0 && refunded == 0 {
                continue;
            }
            let rules = part.map_or(&self.meters[i].rules, |p| &p.rules);
            charged.push(Charge {
                meter: i,
                cost: over,
                rules: Cow::Borrowed(rules),
                mode: Mode::Settle {
                    at_ms: part.map_or(first_at, |p| p.at_ms),
                    refund: refunded,
                },
            });
            meters.push(MeterSettled {
                name: self.meters[i].name.clone(),
                over,
                refunded,
            });
        }
        if charged.is_empty() {
            return Ok(Err(nothing));
        }
        let settled = Settled {
            decision: None,
            over: meters.iter().map(|m| m.over).fold(0, u64::saturating_add),
            refunded: meters
                .iter()
                .map(|m| m.refunded)
                .fold(0, u64::saturating_add),
            meters,
        };
        let ask = MeteredAsk {
            tag: Cow::Borrowed(&logged.tag),
            charged,
            shared: super::view::current_controls(&self.warden.shared, &self.warden.store),
            now_ms,
            mode: Mode::Settle {
                at_ms: first_at,
                refund: 0,
            },
        };
        Ok(Ok((ask, settled)))
    }
}
