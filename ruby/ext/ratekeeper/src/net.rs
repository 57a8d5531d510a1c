//! `Ratekeeper::TrustedProxies`: the client IP of a request, from the core's rules.

use crate::errors::guard;
use magnus::{Error, RArray, Ruby};
use ratekeeper_core as core;

#[magnus::wrap(class = "Ratekeeper::TrustedProxies", free_immediately, size)]
pub struct TrustedProxies {
    inner: core::TrustedProxies,
}

impl TrustedProxies {
    /// `TrustedProxies.new(["10.0.0.0/8", ...])`.
    pub fn new(ruby: &Ruby, ranges: RArray) -> Result<TrustedProxies, Error> {
        let ranges: Vec<String> = ranges.to_vec()?;
        Ok(TrustedProxies {
            inner: guard(ruby, || core::TrustedProxies::parse(&ranges))?,
        })
    }

    /// `client_ip(peer, forwarded_for)`.
    pub fn client_ip(&self, peer: String, forwarded_for: Option<String>) -> String {
        self.inner.client_ip(&peer, forwarded_for.as_deref())
    }

    /// `trusts?(ip)`.
    pub fn trusts(&self, ip: String) -> bool {
        core::net::parse_hop(&ip).is_some_and(|ip| self.inner.trusts(ip))
    }
}
