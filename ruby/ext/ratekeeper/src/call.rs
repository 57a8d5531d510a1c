//! Calling the core: without the GVL when a call may wait on the store,
//! with panics and errors turned into Ruby exceptions, and a decision's
//! once-per-outage warning handed to `Ratekeeper.log_warning`.

use crate::errors::settle;
use crate::gvl::without_gvl;
use crate::types::Decision;
use magnus::{prelude::*, Error, RModule, Ruby, Value};
use ratekeeper_core as core;

/// Runs core code that may wait on the store: without the GVL when it does.
pub fn run_core<T>(
    ruby: &Ruby,
    waits: bool,
    f: impl FnOnce() -> core::Result<T>,
) -> Result<T, Error> {
    let outcome = if waits {
        without_gvl(f)
    } else {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
    };
    settle(ruby, outcome)
}

/// A core decision for Ruby, handing its once-per-outage warning to `Ratekeeper.log_warning`.
pub fn deliver(ruby: &Ruby, inner: core::Decision) -> Result<Decision, Error> {
    if let Some(warning) = &inner.warning {
        log_warning(ruby, warning)?;
    }
    Ok(Decision { inner })
}

/// Hands a core warning (a store outage's first fallback) to `Ratekeeper.log_warning`.
pub fn log_warning(ruby: &Ruby, warning: &str) -> Result<(), Error> {
    let module: RModule = ruby.class_object().const_get("Ratekeeper")?;
    let _: Value = module.funcall("log_warning", (warning,))?;
    Ok(())
}
