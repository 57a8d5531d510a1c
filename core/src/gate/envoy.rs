//! Envoy's rate limit service on the gate: a request's descriptors select
//! the policy's throttles, and the gate decides as for any door.
//!
//! Each descriptor selects the first throttle (policy order) whose
//! `envoy.domain` is the request's domain, whose `envoy.match` entries it
//! holds, and which holds the throttle's `envoy.key` entry: that entry's
//! value is the key (a `remote_address` one named as the HTTP doors name
//! the client: an IPv6 client's /64). A descriptor no throttle selects is
//! unlimited. The cost is the descriptor's `hits_addend`, else the
//! request's, else 1. The client is the first `remote_address` entry; a
//! `method` and a `path` entry (say from `request_headers` actions on
//! `:method` and `:path`) are what fail2ban and allow2ban entries match.

use super::source::Client;
use super::{Gate, Plan, Selected, Step, Verdict};

/// One descriptor: its entries, and its own cost if it gives one.
#[derive(Debug, Clone, Default)]
pub struct Descriptor {
    /// Its entries, `(key, value)`, in order.
    pub entries: Vec<(String, String)>,
    /// Its `hits_addend`, when above zero.
    pub hits: Option<u64>,
}

fn entry<'d>(entries: &'d [(String, String)], name: &str) -> Option<&'d str> {
    entries
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn any_entry<'d>(all: &'d [Descriptor], names: &[&str]) -> Option<&'d str> {
    all.iter()
        .find_map(|d| names.iter().find_map(|n| entry(&d.entries, n)))
}

impl Gate {
    /// Everything about an Envoy request that needs no store: a verdict,
    /// or the store calls to make. `hits` is the request's `hits_addend`
    /// (0: none).
    pub fn prepare_envoy(&self, domain: &str, descriptors: &[Descriptor], hits: u64) -> Step {
        if !self.spec.enabled || crate::testing::disabled() {
            return Step::Done(Box::new(Verdict::unmarked()));
        }
        let method = any_entry(descriptors, &["method", ":method"])
            .unwrap_or("")
            .to_ascii_uppercase();
        let path = any_entry(descriptors, &["path", ":path"]).unwrap_or("");
        let prefixes = self.spec.proxies.prefixes();
        let client_of = |text: &str| {
            crate::net::parse_hop(text).map(|ip| Client {
                ip: crate::net::canonical(ip).to_string(),
                key: prefixes.client_of(ip),
            })
        };
        let client = any_entry(descriptors, &["remote_address"]).and_then(client_of);
        if let Some(done) = client.as_ref().and_then(|c| self.screen(&c.ip)) {
            return Step::Done(Box::new(done));
        }
        let strikes = match &client {
            Some(_) if !path.is_empty() => self
                .spec
                .bans
                .iter()
                .enumerate()
                .filter(|(_, b)| b.when.matcher.is_none() && b.when.matches_request(&method, path))
                .map(|(i, _)| i)
                .collect(),
            _ => Vec::new(),
        };
        let checks = descriptors
            .iter()
            .enumerate()
            .filter_map(|(origin, d)| {
                let (throttle, key) = self.envoy_throttle(domain, &d.entries)?;
                let own = entry(&d.entries, "remote_address").and_then(client_of);
                let key = match own.as_ref() {
                    Some(c)
                        if self.spec.throttles[throttle].envoy.as_ref()?.key
                            == "remote_address" =>
                    {
                        c.key.clone()
                    }
                    _ => key.to_owned(),
                };
                Some(Selected {
                    throttle,
                    origin,
                    key: key.into_bytes(),
                    cost: d.hits.filter(|n| *n > 0).unwrap_or(hits.max(1)),
                    tier: None,
                    ip: own.or_else(|| client.clone()).map(|c| c.ip),
                })
            })
            .collect();
        Step::Ask(Plan {
            client: client.unwrap_or(Client {
                ip: String::new(),
                key: String::new(),
            }),
            method,
            path: path.to_owned(),
            strikes,
            checks,
        })
    }

    /// The throttle a descriptor's entries select in `domain`, and the key
    /// entry's value.
    fn envoy_throttle<'e>(
        &self,
        domain: &str,
        entries: &'e [(String, String)],
    ) -> Option<(usize, &'e str)> {
        self.spec.throttles.iter().enumerate().find_map(|(i, t)| {
            let envoy = t.envoy.as_ref().filter(|e| e.domain == domain)?;
            let all_match = envoy
                .matches
                .iter()
                .all(|(k, want)| entry(entries, k).is_some_and(|v| want == "*" || v == want));
            let key = entry(entries, &envoy.key).filter(|v| !v.is_empty())?;
            all_match.then_some((i, key))
        })
    }
}
