//! `Ratekeeper::Reservation`: a check for an estimate, settled to what the
//! work cost (see `ratekeeper_core::Reservation`), as `Limiter#reserve`
//! returns it.

use crate::call::{deliver, run_core};
use crate::types::Decision;
use magnus::{method, prelude::*, Error, RModule, Ruby, Value};
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

    fn estimate(&self) -> u64 {
        self.inner.estimate
    }

    fn settled_p(&self) -> bool {
        self.inner.settled()
    }

    fn over(&self) -> u64 {
        self.done().map_or(0, |s| s.over)
    }

    fn refunded(&self) -> u64 {
        self.done().map_or(0, |s| s.refunded)
    }

    /// `_refusal`: why the work may not go on, or nil.
    fn refusal(&self) -> Option<String> {
        self.inner.refusal()
    }

    /// `_settle(actual, now)`: the rules' state after the settle, or nil
    /// when it asked nothing of the store.
    fn settle(
        ruby: &Ruby,
        rb_self: &Self,
        actual: Value,
        now: Value,
    ) -> Result<Option<Decision>, Error> {
        let actual = crate::convert::actual_cost(ruby, actual)?;
        let now = crate::convert::now(ruby, now)?;
        let limiter = &rb_self.limiter;
        let settled = run_core(ruby, limiter.waits_on_io(), || {
            limiter.settle(&rb_self.inner, actual, now)
        })?;
        let decision = settled.decision.clone();
        *rb_self.settled.lock().unwrap_or_else(|p| p.into_inner()) = Some(settled);
        decision.map(|inner| deliver(ruby, inner)).transpose()
    }

    fn inspect(&self) -> String {
        format!(
            "#<Ratekeeper::Reservation of {} {} settled={}>",
            self.inner.estimate,
            if self.inner.decision.allowed() {
                "allowed"
            } else {
                "refused"
            },
            self.inner.settled()
        )
    }
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
    class.define_method("_settle", method!(Reservation::settle, 2))?;
    class.define_method("inspect", method!(Reservation::inspect, 0))?;
    Ok(())
}
