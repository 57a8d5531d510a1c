//! `Ratekeeper::Lease`: a slot of an in-flight rule taken by `Limiter#hold`
//! (see `ratekeeper_core::in_flight`), released by its holder or lapsing.

use crate::call::run_core;
use crate::errors::guard;
use crate::types::Decision;
use magnus::{method, prelude::*, Error, RModule, Ruby, Value};
use ratekeeper_core as core;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[magnus::wrap(class = "Ratekeeper::Lease", free_immediately, size)]
pub struct Lease {
    limiter: Arc<core::Limiter>,
    inner: core::Hold,
    released: AtomicBool,
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

impl Lease {
    /// The hold `inner` that `limiter` made.
    pub fn wrap(limiter: Arc<core::Limiter>, inner: core::Hold) -> Lease {
        Lease {
            limiter,
            inner,
            released: AtomicBool::new(false),
        }
    }

    fn decision(&self) -> Decision {
        Decision {
            inner: self.inner.decision.clone(),
        }
    }

    fn allowed(&self) -> bool {
        self.inner.decision.allowed()
    }

    fn id(&self) -> Option<String> {
        self.inner.lease.as_ref().map(|l| l.id.clone())
    }

    fn lapse_at(&self) -> Option<f64> {
        self.inner.lease.as_ref().map(|l| seconds(l.lapse_at_ms))
    }

    fn taken_at(&self) -> Option<f64> {
        self.inner.lease.as_ref().map(|l| seconds(l.taken_at_ms))
    }

    fn released_p(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// `_refusal`: why the work may not go on, or nil.
    fn refusal(&self) -> Option<String> {
        self.inner.refusal()
    }

    /// `release`: whether the slot was still held (false when it lapsed,
    /// was released already, here or elsewhere, or the hold took none).
    fn release(ruby: &Ruby, rb_self: &Self) -> Result<bool, Error> {
        let Some(lease) = &rb_self.inner.lease else {
            return Ok(false);
        };
        if rb_self.released.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        let limiter = &rb_self.limiter;
        run_core(ruby, limiter.waits_on_io(), || limiter.release(lease))
    }

    /// `_extend(lease)`: the new lapse time (seconds), or nil when it lapsed.
    fn extend(ruby: &Ruby, rb_self: &Self, lease: Value) -> Result<Option<f64>, Error> {
        let Some(held) = &rb_self.inner.lease else {
            return Ok(None);
        };
        let limiter = &rb_self.limiter;
        let lease_ms = match crate::convert::seconds(ruby, "lease", lease)? {
            Some(seconds) => guard(ruby, || core::in_flight::lease_ms_from(seconds))?,
            None => limiter.lease_ms(),
        };
        let lapse = run_core(ruby, limiter.waits_on_io(), || {
            limiter.extend(held, Some(lease_ms))
        })?;
        Ok(lapse.map(seconds))
    }

    fn inspect(&self) -> String {
        match &self.inner.lease {
            Some(lease) => format!(
                "#<Ratekeeper::Lease {} lapse_at={} released={}>",
                lease.id,
                seconds(lease.lapse_at_ms),
                self.released_p()
            ),
            None if self.inner.decision.allowed() => {
                "#<Ratekeeper::Lease allowed, no slot taken>".to_owned()
            }
            None => "#<Ratekeeper::Lease refused>".to_owned(),
        }
    }
}

/// Defines `Ratekeeper::Lease`'s methods.
pub fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let class = module.define_class("Lease", ruby.class_object())?;
    class.define_method("decision", method!(Lease::decision, 0))?;
    class.define_method("allowed?", method!(Lease::allowed, 0))?;
    class.define_method("id", method!(Lease::id, 0))?;
    class.define_method("lapse_at", method!(Lease::lapse_at, 0))?;
    class.define_method("taken_at", method!(Lease::taken_at, 0))?;
    class.define_method("released?", method!(Lease::released_p, 0))?;
    class.define_method("release", method!(Lease::release, 0))?;
    class.define_method("_extend", method!(Lease::extend, 1))?;
    class.define_method("_refusal", method!(Lease::refusal, 0))?;
    class.define_method("inspect", method!(Lease::inspect, 0))?;
    Ok(())
}
