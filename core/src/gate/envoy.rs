//! Envoy's rate limit service on the gate: a request's descriptors select
//! the policy's throttles, and the gate decides as for any door.
//!
//! Each descriptor selects the first throttle (policy order) whose
//! `envoy.domain` is the request's domain, whose `envoy.match` entries it
//! holds, and which holds the throttle's `envoy.key` entry: that entry's
//! value is the key (a `remote_address` one named as the HTTP doors name
//! the client: an IPv6 client's /64). A descriptor no throttle selects is
//! unlimited. The cost is the descriptor's `hits_addend`, else the
//! request's, else 1.
//!
//! The entries also describe the request, as the HTTP doors read one: the
//! first `remote_address` entry is the peer, `method` (or `:method`),
//! `path` (or `:path`, with its query string) and `host` (or `:authority`)
//! its head, and any other entry a header of that name (say from
//! `request_headers` actions with `descriptor_key` the header's name). A
//! request whose entries give its path meets the whole policy as at any
//! door: exempt paths, safelists and blocklists, fail2ban and allow2ban,
//! and the throttles without an `envoy` table (their key, hosts, paths,
//! methods, headers and tier read from the entries), besides the ones its
//! descriptors select.

use super::source::{decoded_path, Client, Facts, Head};
use super::{Gate, Plan, Reason, Selected, Step, Verdict};

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

/// The request the entries of every descriptor describe.
struct Described<'d> {
    head: Head,
    all: &'d [Descriptor],
    cost: u64,
}

impl<'d> Described<'d> {
    fn new(all: &'d [Descriptor], cost: u64) -> Described<'d> {
        let first = |names: &[&str]| {
            all.iter()
                .find_map(|d| names.iter().find_map(|n| entry(&d.entries, n)))
                .unwrap_or("")
        };
        let (path, query) = first(&["path", ":path"])
            .split_once('?')
            .unwrap_or((first(&["path", ":path"]), ""));
        let path = decoded_path(path.as_bytes());
        let head = Head::new(
            first(&["method", ":method"]),
            path,
            first(&["host", ":authority"]),
            first(&["remote_address"]).to_owned(),
            query.to_owned(),
        );
        Described { head, all, cost }
    }

    /// The descriptor that gives the path (the one that describes the request).
    fn describing(&self) -> Option<usize> {
        self.all
            .iter()
            .position(|d| d.entries.iter().any(|(k, _)| k == "path" || k == ":path"))
    }
}

impl Facts for Described<'_> {
    fn head(&self) -> &Head {
        &self.head
    }

    fn header(&self, name: &str) -> Option<Vec<u8>> {
        self.all.iter().find_map(|d| {
            d.entries
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone().into_bytes())
        })
    }

    fn cost(&self) -> u64 {
        self.cost
    }
}

impl Gate {
    /// Everything about an Envoy request that needs no store: a verdict,
    /// or the store calls to make. `hits` is the request's `hits_addend`
    /// (0: none).
    pub fn prepare_envoy(&self, domain: &str, descriptors: &[Descriptor], hits: u64) -> Step {
        let facts = Described::new(descriptors, hits.max(1));
        let mut plan = match facts.describing() {
            Some(origin) => match self.admit(&facts, Some(origin), |t| t.envoy.is_none()) {
                Ok(plan) => plan,
                Err(done) => return Step::Done(done),
            },
            None => {
                if !self.spec.enabled || !self.warden.clock().limiting() {
                    return Step::Done(Box::new(Verdict::unmarked(Reason::Exempt)));
                }
                let client = (!facts.peer().is_empty())
                    .then(|| Client::of(&facts, &self.spec.proxies))
                    .filter(|c| crate::net::parse_hop(&c.ip).is_some());
                let screen = client.is_some() && !self.warden.controls_ready();
                if let Some(c) = client.as_ref().filter(|_| !screen) {
                    if let Some(done) = self.screened(self.warden.screen(&c.ip), None) {
                        return Step::Done(Box::new(done));
                    }
                }
                Plan {
                    screen,
                    shown: None,
                    client: client.unwrap_or(Client {
                        ip: String::new(),
                        key: String::new(),
                    }),
                    method: facts.method().to_owned(),
                    path: String::new(),
                    strikes: Vec::new(),
                    checks: Vec::new(),
                }
            }
        };
        let prefixes = self.spec.proxies.prefixes();
        let client_of = |text: &str| {
            crate::net::parse_hop(text).map(|ip| Client {
                ip: crate::net::canonical(ip).to_string(),
                key: prefixes.client_of(ip),
            })
        };
        let selected: Vec<Selected> = descriptors
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
                let ip = own
                    .map(|c| c.ip)
                    .or_else(|| (!plan.client.ip.is_empty()).then(|| plan.client.ip.clone()));
                Some(Selected {
                    throttle,
                    origin,
                    key: key.into_bytes(),
                    cost: d.hits.filter(|n| *n > 0).unwrap_or(hits.max(1)),
                    tier: None,
                    ip,
                })
            })
            .collect();
        plan.checks.extend(selected);
        Step::Ask(plan)
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
