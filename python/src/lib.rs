//! `ratekeeper._ratekeeper`: the PyO3 glue over ratekeeper-core. It converts
//! arguments, releases the GIL around store I/O, calls the core and maps its
//! errors; every decision is made in the core.

mod convert;
mod errors;
mod limiter;
mod net;
mod types;

use pyo3::prelude::*;

#[pymodule]
fn _ratekeeper(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<limiter::Limiter>()?;
    m.add_class::<types::Rule>()?;
    m.add_class::<types::RuleState>()?;
    m.add_class::<types::Decision>()?;
    m.add_class::<net::TrustedProxies>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
