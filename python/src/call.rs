//! Calling the core: without the GIL when a call may wait on the store,
//! with panics and errors turned into Python exceptions, and a decision's
//! once-per-outage warning handed to the `ratekeeper` logger.

use crate::errors::{guard, panic_message};
use crate::types::Decision;
use pyo3::prelude::*;
use ratekeeper_core as core;

/// Catches a panic (without the GIL); `guard` turns the result into Python errors.
pub fn guard_free<T>(f: impl FnOnce() -> core::Result<T>) -> core::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(core::Error::storage(format!(
            "internal error: {}",
            panic_message(&panic)
        )))
    })
}

/// Runs core code that may wait on the store: without the GIL when it does.
pub fn run_core<T: Send>(
    py: Python<'_>,
    waits: bool,
    f: impl FnOnce() -> core::Result<T> + Send,
) -> PyResult<T> {
    let outcome = if waits {
        py.detach(|| guard_free(f))
    } else {
        guard_free(f)
    };
    guard(py, || outcome)
}

/// A core decision for Python, logging its once-per-outage warning on the `ratekeeper` logger.
pub fn deliver(py: Python<'_>, inner: core::Decision) -> PyResult<Decision> {
    if let Some(warning) = &inner.warning {
        log_warning(py, warning)?;
    }
    Ok(Decision { inner })
}

/// Logs a core warning (a store outage's first fallback) on the `ratekeeper` logger.
pub fn log_warning(py: Python<'_>, warning: &str) -> PyResult<()> {
    py.import("logging")?
        .call_method1("getLogger", ("ratekeeper",))?
        .call_method1("warning", (warning,))?;
    Ok(())
}
