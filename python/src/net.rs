//! `TrustedProxies`: the client IP of a request, from the core's rules.

use crate::errors::guard;
use pyo3::prelude::*;
use ratekeeper_core as core;

/// The proxies whose X-Forwarded-For is believed, e.g. `TrustedProxies(["10.0.0.0/8"])`.
#[pyclass(frozen, module = "ratekeeper")]
pub struct TrustedProxies {
    inner: core::TrustedProxies,
}

#[pymethods]
impl TrustedProxies {
    #[new]
    #[pyo3(signature = (ranges = Vec::new()))]
    fn new(py: Python<'_>, ranges: Vec<String>) -> PyResult<TrustedProxies> {
        Ok(TrustedProxies {
            inner: guard(py, || core::TrustedProxies::parse(&ranges))?,
        })
    }

    /// The client's IP: `peer` unless it is a trusted proxy, else the first
    /// untrusted hop of `forwarded_for` read from the right.
    #[pyo3(signature = (peer, forwarded_for = None))]
    fn client_ip(&self, peer: &str, forwarded_for: Option<&str>) -> String {
        self.inner.client_ip(peer, forwarded_for)
    }

    /// Whether `ip` is a trusted proxy (False for anything that is not an IP).
    fn trusts(&self, ip: &str) -> bool {
        core::net::parse_hop(ip).is_some_and(|ip| self.inner.trusts(ip))
    }
}
