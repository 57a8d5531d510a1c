//! A checked policy file bound to a store: one limiter per throttle, all on
//! ONE store (one connection, the throttles of a request in one round
//! trip), and a base limiter that screens addresses and counts strikes.
//! A reload binds the new file reusing what did not change: the store when
//! its settings are the same, a throttle's limiter (its counters and denial
//! cache) when its scope, rules and tiers are.

use crate::config::{EnvoySpec, Spec, ThrottleSpec};
use crate::error::ServerError;
use crate::original::Original;
use ratekeeper_core::{store, Limiter, RuleSet, Settings};
use std::sync::Arc;

/// A throttle with its limiter.
pub struct Throttle {
    /// What the file says.
    pub spec: ThrottleSpec,
    /// Its limiter (scope, rules, tiers) on the policy's store.
    pub limiter: Arc<Limiter>,
}

/// The policy in force.
pub struct Policy {
    /// The checked file.
    pub spec: Spec,
    /// Screens client addresses and counts fail2ban strikes.
    pub base: Arc<Limiter>,
    /// The throttles, in file order.
    pub throttles: Vec<Throttle>,
}

/// The settings a store is opened with (the rest are per throttle).
fn store_part(settings: &Settings) -> Settings {
    Settings {
        scope: String::new(),
        tiers: Vec::new(),
        ..settings.clone()
    }
}

impl Policy {
    /// Binds `spec` to its store, reusing `previous`'s store and limiters
    /// where nothing they depend on changed. Opening a Redis store may wait
    /// up to its connect timeout: call it off the async workers.
    pub fn bind(spec: Spec, previous: Option<&Policy>) -> Result<Policy, ServerError> {
        let same_store =
            previous.filter(|p| store_part(&p.spec.settings) == store_part(&spec.settings));
        let base = match same_store {
            Some(p) => p.base.clone(),
            None => {
                let opened = store::open(&spec.settings.store, &spec.settings.store_options())?;
                Arc::new(Limiter::on_store(
                    RuleSet::parse("1/second")?,
                    &store_part(&spec.settings),
                    opened,
                )?)
            }
        };
        let mut throttles = Vec::with_capacity(spec.throttles.len());
        for t in &spec.throttles {
            let kept = same_store.and_then(|p| {
                p.throttles.iter().find(|o| {
                    o.spec.scope == t.scope && o.spec.rules == t.rules && o.spec.tiers == t.tiers
                })
            });
            let limiter = match kept {
                Some(o) => o.limiter.clone(),
                None => Arc::new(
                    base.with_rules(t.rules.clone())
                        .with_scope(&t.scope)?
                        .with_tiers(t.tiers.clone())?,
                ),
            };
            throttles.push(Throttle {
                spec: t.clone(),
                limiter,
            });
        }
        Ok(Policy {
            spec,
            base,
            throttles,
        })
    }

    /// Whether `path` is exempt from limiting.
    pub fn exempt(&self, path: &str) -> bool {
        self.spec
            .exempt_paths
            .iter()
            .any(|p| path.starts_with(p.as_str()))
    }

    /// The throttle an Envoy descriptor selects in `domain`, and the key it
    /// names: the first, in file order, whose domain is `domain`, whose
    /// `match` entries the descriptor holds, and whose key entry it holds.
    pub fn envoy_throttle<'p>(
        &'p self,
        domain: &str,
        entries: &[(String, String)],
    ) -> Option<(&'p Throttle, &'p EnvoySpec, Vec<u8>)> {
        let find = |name: &str| entries.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        self.throttles.iter().find_map(|t| {
            let envoy = t.spec.envoy.as_ref().filter(|e| e.domain == domain)?;
            let all_match = envoy
                .matches
                .iter()
                .all(|(k, want)| find(k).is_some_and(|v| want == "*" || v == want));
            let key = find(&envoy.key).filter(|v| !v.is_empty())?;
            // the client's address, named as forward auth names it (an IPv6 client's /64)
            let key = match ratekeeper_core::net::parse_hop(key) {
                Some(ip) if envoy.key == "remote_address" => {
                    self.spec.proxies.prefixes().client_of(ip)
                }
                _ => key.clone(),
            };
            all_match.then(|| (t, envoy, key.into_bytes()))
        })
    }
}

impl Throttle {
    /// Whether it counts this forward-auth request: its key source is set,
    /// and its hosts, paths, methods and required headers admit it.
    pub fn applies_to(&self, request: &Original) -> bool {
        let spec = &self.spec;
        spec.key.is_some()
            && (spec.hosts.is_empty() || spec.hosts.iter().any(|h| host_matches(h, &request.host)))
            && (spec.paths.is_empty()
                || spec
                    .paths
                    .iter()
                    .any(|p| request.path.starts_with(p.as_str())))
            && (spec.methods.is_empty() || spec.methods.contains(&request.method))
            && spec
                .headers
                .iter()
                .all(|h| request.headers.contains_key(h.as_str()))
    }

    /// The tier a request names, when it is one of the throttle's tiers.
    pub fn tier_of(&self, request: &Original) -> Option<String> {
        let value = request.value(self.spec.tier.as_ref()?)?;
        let name = String::from_utf8(value).ok()?;
        self.spec
            .tiers
            .iter()
            .any(|(tier, _)| *tier == name)
            .then_some(name)
    }
}

/// `api.example.com` matches itself; `*.example.com` matches its subdomains.
fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
        None => pattern == host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_exactly_or_by_wildcard() {
        assert!(host_matches("api.example.com", "api.example.com"));
        assert!(host_matches("*.example.com", "a.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("*.example.com", "aexample.com"));
    }

    #[test]
    fn a_reload_keeps_what_did_not_change() {
        let first = crate::config::parse(
            "[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"\n[[throttle]]\nscope = \"b\"\nrules = \"5/s\"\nkey = \"ip\"",
        )
        .unwrap();
        let old = Policy::bind(first, None).unwrap();
        let second = crate::config::parse(
            "[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"\n[[throttle]]\nscope = \"b\"\nrules = \"6/s\"\nkey = \"ip\"",
        )
        .unwrap();
        let new = Policy::bind(second, Some(&old)).unwrap();
        assert!(Arc::ptr_eq(&old.base, &new.base));
        assert!(Arc::ptr_eq(
            &old.throttles[0].limiter,
            &new.throttles[0].limiter
        ));
        assert!(!Arc::ptr_eq(
            &old.throttles[1].limiter,
            &new.throttles[1].limiter
        ));
        let moved = crate::config::parse("[store]\nprefix = \"other\"\n").unwrap();
        assert!(!Arc::ptr_eq(
            &old.base,
            &Policy::bind(moved, Some(&old)).unwrap().base
        ));
    }
}
