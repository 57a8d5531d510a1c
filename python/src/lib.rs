//! `ratekeeper._ratekeeper`: the PyO3 glue over ratekeeper-core. It converts
//! arguments, releases the GIL around store I/O, calls the core and maps its
//! errors; every decision is made in the core.

mod admin;
mod aio;
mod call;
mod convert;
mod errors;
mod gate;
mod http;
mod lease;
mod limiter;
mod net;
mod plain;
mod replay;
mod reservation;
mod settings;
mod twin;
mod types;

use pyo3::prelude::*;

/// Panics inside the core's guard, without the GIL as a check against Redis
/// would: tests prove a panic surfaces as `RateKeeperError`, never as a crash.
#[pyfunction]
fn _panic_for_tests(py: Python<'_>) -> PyResult<()> {
    let outcome = py.detach(|| {
        call::guard_free(|| -> ratekeeper_core::Result<()> { panic!("deliberate panic for tests") })
    });
    errors::guard(py, || outcome)
}

#[pymodule]
fn _ratekeeper(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<limiter::Limiter>()?;
    m.add_class::<reservation::Reservation>()?;
    m.add_class::<lease::Lease>()?;
    m.add_class::<admin::Admin>()?;
    m.add_class::<types::Rule>()?;
    m.add_class::<types::RuleState>()?;
    m.add_class::<types::Decision>()?;
    m.add_class::<types::Fail2Ban>()?;
    m.add_class::<http::Responses>()?;
    m.add_class::<http::Answer>()?;
    m.add_class::<http::AsgiSend>()?;
    m.add_class::<gate::Gate>()?;
    m.add_class::<gate::Verdict>()?;
    m.add_class::<net::TrustedProxies>()?;
    m.add("DEFAULTS", settings::defaults(m.py())?)?;
    m.add("CONSOLE_STYLE", ratekeeper_core::admin::CONSOLE_STYLE)?;
    m.add("CONSOLE_CSP", ratekeeper_core::admin::CONSOLE_CSP)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(limiter::check_all, m)?)?;
    m.add_function(wrap_pyfunction!(limiter::acheck_all, m)?)?;
    m.add_function(wrap_pyfunction!(identity, m)?)?;
    m.add_function(wrap_pyfunction!(scope_name, m)?)?;
    m.add_function(wrap_pyfunction!(flush_denials, m)?)?;
    m.add_function(wrap_pyfunction!(_flush_denials_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(_readable_length, m)?)?;
    m.add("_MAX_BODY", ratekeeper_core::gate::MAX_BODY)?;
    m.add_function(wrap_pyfunction!(_testing_freeze, m)?)?;
    m.add_function(wrap_pyfunction!(_testing_frozen, m)?)?;
    m.add_function(wrap_pyfunction!(_testing_disable, m)?)?;
    m.add_function(wrap_pyfunction!(_testing_reset, m)?)?;
    m.add_function(wrap_pyfunction!(convert::parse_rules, m)?)?;
    m.add_function(wrap_pyfunction!(replay::replay_log, m)?)?;
    m.add_function(wrap_pyfunction!(settings::check_option, m)?)?;
    Ok(())
}

/// A key that names a person (an e-mail address, a user name typed into a
/// form): trimmed and lower-cased; None when blank, so an absent field is not
/// limited by it rather than sharing one key with every such request.
#[pyfunction]
fn identity(text: &str) -> Option<String> {
    ratekeeper_core::identity(text)
}

/// Writes this process's record of denials (what `Admin.top_denied` reads)
/// now, within one `timeout` (without the GIL); the package writes it as
/// the process exits, a forked child's exit included, so that a script's
/// or a recycled worker's denials since the last periodic write are kept.
#[pyfunction]
fn flush_denials(py: Python<'_>) {
    py.detach(ratekeeper_core::flush_denials);
}

/// How much of a request's body a door reads for a field (the core's one
/// cap): the length, 0 for no body, None for a body it may not read.
#[pyfunction]
#[pyo3(signature = (content_length, transfer_encoding = None))]
fn _readable_length(
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> Option<usize> {
    ratekeeper_core::gate::readable_length(content_length, transfer_encoding)
}

/// `flush_denials` as the process exits: once, whichever of its exit hooks
/// (`atexit`, a `multiprocessing` child's end) calls it first.
#[pyfunction]
fn _flush_denials_at_exit(py: Python<'_>) {
    py.detach(ratekeeper_core::flush_denials_at_exit);
}

/// A limiter scope from a name (a path, a view, a throttle): characters
/// outside printable ASCII, and spaces, become `_`; at most 128 are kept.
#[pyfunction]
fn scope_name(name: &str) -> String {
    ratekeeper_core::scope_name(name)
}

/// The test helpers' hooks (see `ratekeeper.testing`): freezes the
/// process's clock (what every limiter reads unless given another) at `now`
/// seconds (None: the store's clock again).
#[pyfunction]
fn _testing_freeze(py: Python<'_>, now: Option<f64>) -> PyResult<()> {
    let ms = now
        .map(|now| errors::guard(py, || ratekeeper_core::time::now_to_ms(now)))
        .transpose()?;
    ratekeeper_core::Clock::process().freeze(ms);
    Ok(())
}

/// The process's clock's frozen time, in seconds, or None.
#[pyfunction]
fn _testing_frozen() -> Option<f64> {
    ratekeeper_core::Clock::process()
        .frozen()
        .map(ratekeeper_core::time::seconds)
}

/// Admits every check of the limiters on the process's clock without asking
/// a store (True), or limits again.
#[pyfunction]
fn _testing_disable(disabled: bool) {
    ratekeeper_core::Clock::process().set_limiting(!disabled);
}

/// Empties every memory store of this process at its next use.
#[pyfunction]
fn _testing_reset() {
    ratekeeper_core::testing::reset();
}
