//! `ratekeeper._ratekeeper`: the PyO3 glue over ratekeeper-core. It converts
//! arguments, releases the GIL around store I/O, calls the core and maps its
//! errors; every decision is made in the core.

mod admin;
mod convert;
mod errors;
mod limiter;
mod net;
mod types;

use pyo3::prelude::*;

/// Panics inside the core's guard, without the GIL as a check against Redis
/// would: tests prove a panic surfaces as `RateKeeperError`, never as a crash.
#[pyfunction]
fn _panic_for_tests(py: Python<'_>) -> PyResult<()> {
    let outcome = py.detach(|| {
        limiter::guard_free(|| -> ratekeeper_core::Result<()> {
            panic!("deliberate panic for tests")
        })
    });
    errors::guard(py, || outcome)
}

#[pymodule]
fn _ratekeeper(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<limiter::Limiter>()?;
    m.add_class::<admin::Admin>()?;
    m.add_class::<types::Rule>()?;
    m.add_class::<types::RuleState>()?;
    m.add_class::<types::Decision>()?;
    m.add_class::<net::TrustedProxies>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(limiter::check_all, m)?)?;
    Ok(())
}
