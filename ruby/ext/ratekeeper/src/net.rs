//! `Ratekeeper::TrustedProxies`: the client IP of a request, from the core's rules.

use crate::errors::guard;
use magnus::{function, method, prelude::*, Error, RArray, RModule, Ruby};
use ratekeeper_core as core;

#[magnus::wrap(class = "Ratekeeper::TrustedProxies", free_immediately, size)]
pub struct TrustedProxies {
    inner: core::TrustedProxies,
}

impl TrustedProxies {
    /// `TrustedProxies.new(["10.0.0.0/8", ...])`.
    fn new(ruby: &Ruby, ranges: RArray) -> Result<TrustedProxies, Error> {
        let ranges: Vec<String> = ranges.to_vec()?;
        Ok(TrustedProxies {
            inner: guard(ruby, || core::TrustedProxies::parse(&ranges))?,
        })
    }

    /// `client_ip(peer, forwarded_for)`.
    fn client_ip(&self, peer: String, forwarded_for: Option<String>) -> String {
        self.inner.client_ip(&peer, forwarded_for.as_deref())
    }

    /// `trusts?(ip)`.
    fn trusts(&self, ip: String) -> bool {
        core::net::parse_hop(&ip).is_some_and(|ip| self.inner.trusts(ip))
    }
}

/// Defines `Ratekeeper::TrustedProxies`.
pub fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let class = module.define_class("TrustedProxies", ruby.class_object())?;
    class.define_singleton_method("new", function!(TrustedProxies::new, 1))?;
    class.define_method("client_ip", method!(TrustedProxies::client_ip, 2))?;
    class.define_method("trusts?", method!(TrustedProxies::trusts, 1))?;
    Ok(())
}
