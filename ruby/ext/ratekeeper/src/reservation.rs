//! `Ratekeeper::Reservation`: a check for an estimate, settled to what the
//! work cost (see `ratekeeper_core::Reservation`), as `Limiter#reserve`
//! returns it.

use crate::call::{deliver, run_core};
use crate::errors::{guard, type_error};
use crate::types::Decision;
use magnus::{method, prelude::*, Error, RHash, RModule, Ruby, Value};
use ratekeeper_core as core;
use std::sync::{Arc, Mutex};

#[magnus::wrap(class = "Ratekeeper::Reservation", free_immediately, size)]
pub struct Reservation {
    limiter: Arc<core::Limiter>,
    inner: core::Reservation,
    settled: Mutex<Option<core::Settled>>,
}

impl Reservation {
    /// The reservation `inner` that `limiter` made.
    pub fn wrap(limiter: Arc<core::Limiter>, inner: core::Reservation) -> Reservation {
        Reservation {
            limiter,
            inner,
            settled: Mutex::new(None),
        }
    }

    fn done(&self) -> Option<core::Settled> {
        self.settled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn decision(&self) -> Decision {
        Decision {
            inner: self.inner.decision.clone(),
        }
    }

    fn allowed(&self) -> bool {
        self.inner.decision.allowed()
    }

    /// The units reserved: an Integer, or a metered limiter's Hash by meter.
    fn estimate(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        let inner = &rb_self.inner;
        match inner.estimates.is_empty() {
            true => Ok(ruby.integer_from_u64(inner.estimate).as_value()),
            false => by_meter(ruby, inner.estimates.iter().map(|(n, u)| (n.as_str(), *u))),
        }
    }

    fn settled_p(&self) -> bool {
        self.inner.settled()
    }

    /// Units the settle charged over the estimate (0 before it); a metered
    /// limiter's Hash by the meters it changed.
    fn over(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        rb_self.settled_by(ruby, |s| s.over, |m| m.over)
    }

    /// Units the settle gave back (0 before it); a metered limiter's Hash
    /// by the meters it changed.
    fn refunded(ruby: &Ruby, rb_self: &Self) -> Result<Value, Error> {
        rb_self.settled_by(ruby, |s| s.refunded, |m| m.refunded)
    }

    /// What the settle did, as `whole` and `each` meter's read it.
    fn settled_by(
        &self,
        ruby: &Ruby,
        whole: impl Fn(&core::Settled) -> u64,
        each: impl Fn(&core::MeterSettled) -> u64,
    ) -> Result<Value, Error> {
        let done = self.done();
        if self.inner.estimates.is_empty() {
            return Ok(ruby
                .integer_from_u64(done.as_ref().map_or(0, whole))
                .as_value());
        }
        let meters = done
            .as_ref()
            .map(|s| s.meters.as_slice())
            .unwrap_or_default();
        by_meter(ruby, meters.iter().map(|m| (m.name.as_str(), each(m))))
    }

    /// `_refusal`: why the work may not go on, or nil.
    fn refusal(&self) -> Option<String> {
        self.inner.refusal()
    }

    /// `_settle(actual, now, meters)`: the rules' state after the settle,
    /// or nil when it asked nothing of the store. `actual` an Integer, or for
    /// a metered limiter a Hash of meters to units and/or `meters` (the
    /// keywords given).
    fn settle(
        ruby: &Ruby,
        rb_self: &Self,
        actual: Value,
        now: Value,
        meters: RHash,
    ) -> Result<Option<Decision>, Error> {
        let now = crate::convert::now(ruby, now)?;
        let named = crate::convert::meter_units(ruby, actual)?;
        let keywords = crate::convert::meter_units(ruby, meters.as_value())?.unwrap_or_default();
        let limiter = &rb_self.limiter;
        let settle: Box<dyn Fn() -> core::Result<core::Settled> + '_> =
            match (actual.is_nil(), named, keywords.is_empty()) {
                (false, None, true) => {
                    let units = crate::convert::actual_cost(ruby, actual)?;
                    Box::new(move || limiter.settle(&rb_self.inner, units, now))
                }
                (true, None, true) => {
                    return Err(type_error(
                        ruby,
                        "settle takes what the work cost: an Integer, or units per meter",
                    ))
                }
                (false, None, false) => {
                    return Err(type_error(
                        ruby,
                        "settle takes an Integer or units per meter, not both",
                    ))
                }
                (_, named, _) => {
                    let mut units = named.unwrap_or_default();
                    units.extend(keywords);
                    let actual = guard(ruby, || limiter.meter_actuals(&units))?;
                    Box::new(move || limiter.settle_meters(&rb_self.inner, &actual, now))
                }
            };
        rb_self.finish(ruby, run_core(ruby, limiter.waits_on_io(), settle)?)
    }

    /// `_cancel`: settles at 0 (every meter's units back).
    fn cancel(ruby: &Ruby, rb_self: &Self) -> Result<Option<Decision>, Error> {
        let limiter = &rb_self.limiter;
        let settled = run_core(ruby, limiter.waits_on_io(), || {
            limiter.cancel(&rb_self.inner)
        })?;
        rb_self.finish(ruby, settled)
    }

    /// Keeps what a settle did; the rules' state after it, or nil.
    fn finish(&self, ruby: &Ruby, settled: core::Settled) -> Result<Option<Decision>, Error> {
        let decision = settled.decision.clone();
        *self.settled.lock().unwrap_or_else(|p| p.into_inner()) = Some(settled);
        decision.map(|inner| deliver(ruby, inner)).transpose()
    }

    fn inspect(&self) -> String {
        let estimate = self.inner.estimate_text();
        format!(
            "#<Ratekeeper::Reservation of {} {} settled={}>",
            estimate,
            if self.inner.decision.allowed() {
                "allowed"
            } else {
                "refused"
            },
            self.inner.settled()
        )
    }
}

/// Units by meter as a Hash of Symbols.
fn by_meter<'a>(ruby: &Ruby, meters: impl Iterator<Item = (&'a str, u64)>) -> Result<Value, Error> {
    let out = ruby.hash_new();
    for (name, units) in meters {
        out.aset(ruby.to_symbol(name), units)?;
    }
    Ok(out.as_value())
}

/// Defines `Ratekeeper::Reservation`'s methods.
pub fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let class = module.define_class("Reservation", ruby.class_object())?;
    class.define_method("decision", method!(Reservation::decision, 0))?;
    class.define_method("allowed?", method!(Reservation::allowed, 0))?;
    class.define_method("estimate", method!(Reservation::estimate, 0))?;
    class.define_method("settled?", method!(Reservation::settled_p, 0))?;
    class.define_method("over", method!(Reservation::over, 0))?;
    class.define_method("refunded", method!(Reservation::refunded, 0))?;
    class.define_method("_refusal", method!(Reservation::refusal, 0))?;
    class.define_method("_settle", method!(Reservation::settle, 3))?;
    class.define_method("_cancel", method!(Reservation::cancel, 0))?;
    class.define_method("inspect", method!(Reservation::inspect, 0))?;
    Ok(())
}
