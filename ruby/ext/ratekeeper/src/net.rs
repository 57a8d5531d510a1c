//! `Ratekeeper::TrustedProxies`: the client IP of a request, and the client
//! a key of kind `ip` names (an IPv6 address's /64), from the core's rules.

use crate::convert;
use crate::errors::guard;
use magnus::{function, method, prelude::*, Error, RArray, RModule, Ruby, Value};
use ratekeeper_core as core;

#[magnus::wrap(class = "Ratekeeper::TrustedProxies", free_immediately, size)]
pub struct TrustedProxies {
    inner: core::TrustedProxies,
}

impl TrustedProxies {
    /// `TrustedProxies._new(["10.0.0.0/8", ...], ipv4_prefix, ipv6_prefix)`
    /// (nil: the default, /32 and /64); lib/ratekeeper/limiter.rb gives the
    /// keyword form.
    fn new(
        ruby: &Ruby,
        ranges: RArray,
        ipv4_prefix: Value,
        ipv6_prefix: Value,
    ) -> Result<TrustedProxies, Error> {
        let ranges: Vec<String> = ranges.to_vec()?;
        let v4 = convert::whole(ruby, "ipv4_prefix", ipv4_prefix)?;
        let v6 = convert::whole(ruby, "ipv6_prefix", ipv6_prefix)?;
        Ok(TrustedProxies {
            inner: guard(ruby, || {
                Ok(core::TrustedProxies::parse(&ranges)?
                    .with_prefixes(core::ClientPrefixes::new(v4, v6)?))
            })?,
        })
    }

    /// `client_key(peer, forwarded_for)`: the client as a key of kind `ip`
    /// names it (an IPv6 client as its /64).
    fn client_key(&self, peer: String, forwarded_for: Option<String>) -> String {
        self.inner.client_key(&peer, forwarded_for.as_deref())
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
    class.define_singleton_method("_new", function!(TrustedProxies::new, 3))?;
    class.define_method("client_ip", method!(TrustedProxies::client_ip, 2))?;
    class.define_method("client_key", method!(TrustedProxies::client_key, 2))?;
    class.define_method("trusts?", method!(TrustedProxies::trusts, 1))?;
    Ok(())
}
