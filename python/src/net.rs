//! `TrustedProxies`: the client IP of a request, and the client a key of
//! kind `ip` names (an IPv6 address's /64), from the core's rules.

use crate::errors::guard;
use pyo3::prelude::*;
use ratekeeper_core as core;

/// Who a request's client is: the proxies whose X-Forwarded-For is believed,
/// e.g. `TrustedProxies(["10.0.0.0/8"])`, and how much of the client's
/// address names it (`ipv4_prefix`, default 32; `ipv6_prefix`, default 64).
#[pyclass(frozen, module = "ratekeeper")]
pub struct TrustedProxies {
    inner: core::TrustedProxies,
}

impl TrustedProxies {
    /// The core's proxies, for Python (a gate's, as its policy gives them).
    pub fn of(inner: core::TrustedProxies) -> TrustedProxies {
        TrustedProxies { inner }
    }
}

#[pymethods]
impl TrustedProxies {
    #[new]
    #[pyo3(signature = (ranges = Vec::new(), *, ipv4_prefix = None, ipv6_prefix = None))]
    fn new(
        py: Python<'_>,
        ranges: Vec<String>,
        ipv4_prefix: Option<i64>,
        ipv6_prefix: Option<i64>,
    ) -> PyResult<TrustedProxies> {
        Ok(TrustedProxies {
            inner: guard(py, || {
                Ok(core::TrustedProxies::parse(&ranges)?
                    .with_prefixes(core::ClientPrefixes::new(ipv4_prefix, ipv6_prefix)?))
            })?,
        })
    }

    /// The client as a key of kind `ip` names it: found as `client_ip` finds
    /// the address, then taken as its network (an IPv6 client as its /64,
    /// so every address it rotates through shares one quota and one ban).
    #[pyo3(signature = (peer, forwarded_for = None))]
    fn client_key(&self, peer: &str, forwarded_for: Option<&str>) -> String {
        self.inner.client_key(peer, forwarded_for)
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
