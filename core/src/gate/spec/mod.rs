//! The policy every door applies, checked once: read from a policy file
//! (TOML), a Python dict (Django's settings) or a Ruby Hash (what the Rack
//! DSL builds), each turned into the same [`toml::Table`] first. Every
//! problem is reported with where it is (`throttle[1] ("api")`) and what is
//! wrong; a store URL is never quoted (it may hold a password).
//!
//! Each kind of entry is a file of its own, holding it as written, its
//! model and its checks: `throttle` (with its per-request step; `meters`,
//! a throttle's meters), `list` (safelists and blocklists) and `ban`
//! (fail2ban and allow2ban); `file`
//! holds the policy as written, which lists the kinds, and `values` the
//! checks of the values every kind is made of.

mod ban;
mod file;
mod list;
mod meters;
mod throttle;
mod values;

pub use self::ban::{striking, BanSpec};
pub use self::list::{first_naming, ListSpec};
pub use self::meters::{units_of, MeterSpec};
pub use self::throttle::{Counted, EnvoySpec, ThrottleSpec};
pub use self::values::{address, header_name, method};

use self::ban::ban;
use self::file::File;
use self::list::list;
use self::throttle::throttle;
use self::values::{matcher, methods, path_prefix, patterns, store_settings};
use super::source::{Facts, Source};
use crate::error::{Error, Result};
use crate::http::{Responses, DEFAULT_BLOCKED_STATUS, DEFAULT_STATUS};
use crate::limiter::Limiter;
use crate::net::ClientPrefixes;
use crate::net::TrustedProxies;
use crate::settings::Settings;
use regex::Regex;
use std::net::SocketAddr;

/// A policy as a table and its values, for a binding to build from its
/// language's dict or Hash.
pub use toml::{Table, Value};

/// A checked policy.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The edge server's HTTP door (forward auth, `/healthz`, `/metrics`);
    /// the apps ignore it.
    pub listen: Option<SocketAddr>,
    /// The edge server's gRPC door (Envoy's rate limit service); the apps ignore it.
    pub grpc: Option<SocketAddr>,
    /// Whether the doors limit at all (false: every request passes, unmarked).
    pub enabled: bool,
    /// The store and the limiter options (`[store]`), as the core checked them.
    pub settings: Settings,
    /// Statuses, header style and how keys are logged.
    pub responses: Responses,
    /// Whether each denial is logged (one line).
    pub log_denials: bool,
    /// Proxies whose `X-Forwarded-For` is believed, and the client prefixes.
    pub proxies: TrustedProxies,
    /// Path prefixes never limited.
    pub exempt_paths: Vec<String>,
    /// A predicate the door holds: requests it is true for are never limited.
    pub exempt_call: Option<usize>,
    /// The throttles, in order: each that applies counts the request, the
    /// first denial answers.
    pub throttles: Vec<ThrottleSpec>,
    /// Requests never limited, by what they are (paths, methods, a
    /// predicate the door holds), in order.
    pub safelists: Vec<ListSpec>,
    /// Requests always refused (403), by what they are, in order.
    pub blocklists: Vec<ListSpec>,
    /// Fail2ban and allow2ban entries, in order (fail2ban first).
    pub bans: Vec<BanSpec>,
}

/// The requests a safelist, blocklist or ban entry names.
#[derive(Debug, Clone)]
pub struct RequestMatch {
    /// Path patterns (regular expressions); empty: any.
    pub paths: Vec<Regex>,
    /// Methods (upper case); empty: any.
    pub methods: Vec<String>,
    /// A predicate the door holds (a Ruby block, a Python callable): the
    /// entry names a request only when it is true.
    pub matcher: Option<usize>,
}

impl RequestMatch {
    /// Whether a request with this method and path is named, before the
    /// door's predicate is asked.
    pub fn matches_request(&self, method: &str, path: &str) -> bool {
        (self.methods.is_empty() || self.methods.iter().any(|m| m == method))
            && (self.paths.is_empty() || self.paths.iter().any(|p| p.is_match(path)))
    }

    /// Whether the request `facts` make is named: its method and path,
    /// then the door's predicate (asked only when they match).
    pub fn names(&self, facts: &dyn Facts) -> bool {
        self.matches_request(facts.method(), facts.path())
            && self.matcher.is_none_or(|i| facts.call(i).is_some())
    }

    fn read(
        paths: &[String],
        given_methods: &[String],
        given_matcher: Option<&str>,
        callables: usize,
    ) -> std::result::Result<RequestMatch, String> {
        Ok(RequestMatch {
            paths: patterns(paths)?,
            methods: methods(given_methods)?,
            matcher: matcher(given_matcher, callables)?,
        })
    }
}

impl Spec {
    /// Reads and checks the policy file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Spec> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::config(format!(
                "cannot read the policy file {}: {e}",
                path.display()
            ))
        })?;
        Spec::parse(&text)
    }

    /// Checks that a door that never sees the response (the edge server's
    /// forward auth and Envoy, a FastAPI dependency) can hold this policy:
    /// no throttle counts only some responses (`count`), which such a door
    /// could not give back, or settles a meter to a response header
    /// (`usage`), which it could not read, and none holds a slot while a request is under
    /// way (an in-flight rule), which such a door could not release.
    pub fn check_unanswered(&self) -> Result<()> {
        let door = "give it to a door that does (Django, Rack, or the WSGI or ASGI middleware)";
        for t in &self.throttles {
            if let Some(meter) = t.meters.iter().find(|m| m.usage.is_some()) {
                return Err(Error::config(format!(
                    "throttle '{}' settles its meter '{}' to a response header (usage), but this door never sees the response: {door}",
                    t.scope, meter.name
                )));
            }
            if t.count.is_some() {
                return Err(Error::config(format!(
                    "throttle '{}' counts only some responses (count), but this door never sees the response: {door}",
                    t.scope
                )));
            }
            if let Some(limit) = t.rules.in_flight() {
                return Err(Error::config(format!(
                    "throttle '{}' holds a slot while a request is under way ('{limit} concurrent'), \
                     but this door never sees the response end to give it back: {door}",
                    t.scope
                )));
            }
        }
        Ok(())
    }

    /// Checks a policy file's text.
    pub fn parse(text: &str) -> Result<Spec> {
        Spec::read(text, 0, None)
    }

    /// Checks a policy given as text, with `callables` the door holds.
    fn read(text: &str, callables: usize, limiter: Option<&Limiter>) -> Result<Spec> {
        let file: File = toml::from_str(text)
            .map_err(|e| Error::config(format!("the policy is not valid: {e}")))?;
        Spec::check(file, callables, limiter)
    }

    /// Checks a policy given as a table (a Python dict or a Ruby Hash,
    /// converted). A key, tier or ban match may be `call:N` for a callable
    /// the door holds, N below `callables`.
    pub fn from_table(table: toml::Table, callables: usize) -> Result<Spec> {
        Spec::read(&Spec::written(&table)?, callables, None)
    }

    /// [`Spec::from_table`] for a gate made beside `base`'s (a view's own
    /// throttle beside the settings' gate): who the client is, each of
    /// `trusted_proxies`, `ipv4_prefix` and `ipv6_prefix`, is `base`'s
    /// unless the table names it.
    pub fn beside(table: toml::Table, callables: usize, base: &Spec) -> Result<Spec> {
        let named = |name: &str| table.contains_key(name);
        let given = (
            named("trusted_proxies"),
            named("ipv4_prefix"),
            named("ipv6_prefix"),
        );
        let mut spec = Spec::from_table(table, callables)?;
        spec.proxies = spec.proxies.or_from(&base.proxies, given);
        Ok(spec)
    }

    /// [`Spec::from_table`] for a door given a limiter (see
    /// [`super::Gate::on_limiter`]): a throttle that gives no rules has the
    /// limiter's rules and tiers, and its scope unless it gives one.
    pub fn on_limiter(table: toml::Table, callables: usize, limiter: &Limiter) -> Result<Spec> {
        Spec::read(&Spec::written(&table)?, callables, Some(limiter))
    }

    /// A table written out, to be read back so that a problem is shown where
    /// it is (`listen = 5`), as in a file.
    fn written(table: &toml::Table) -> Result<String> {
        toml::to_string(table).map_err(|e| Error::config(format!("the policy is not valid: {e}")))
    }

    fn check(file: File, callables: usize, limiter: Option<&Limiter>) -> Result<Spec> {
        let in_ = |place: String| move |e: String| Error::config(format!("{place}: {e}"));
        let listen = file
            .listen
            .as_deref()
            .map(|a| address("listen", a))
            .transpose()?;
        let grpc = file
            .grpc
            .as_deref()
            .map(|a| address("grpc", a))
            .transpose()?;
        let settings = store_settings(&file.store)?;
        let responses = Responses::new(
            file.status.unwrap_or(i64::from(DEFAULT_STATUS)),
            file.blocked_status
                .unwrap_or(i64::from(DEFAULT_BLOCKED_STATUS)),
            file.headers.as_deref().unwrap_or("all"),
            file.log_keys.unwrap_or(false),
        )?;
        let proxies = TrustedProxies::parse(&file.trusted_proxies)
            .map_err(|e| in_("trusted_proxies".into())(e.to_string()))?
            .with_prefixes(ClientPrefixes::new(file.ipv4_prefix, file.ipv6_prefix)?);
        for prefix in &file.exempt_paths {
            path_prefix("exempt_paths", prefix).map_err(Error::config)?;
        }
        let exempt_call = match file.exempt.as_deref() {
            None => None,
            Some(text) => match Source::parse(text, callables) {
                Ok(Source::Call(n)) => Some(n),
                _ => {
                    return Err(Error::config(format!(
                        "exempt: '{}' is not a callable the door holds (give exempt_paths for path prefixes)",
                        text.escape_debug()
                    )))
                }
            },
        };
        let mut throttles: Vec<ThrottleSpec> = Vec::new();
        for (i, t) in file.throttle.into_iter().enumerate() {
            let place = match &t.scope {
                Some(scope) => format!("throttle[{i}] (\"{}\")", scope.escape_debug()),
                None => format!("throttle[{i}]"),
            };
            let spec = throttle(t, callables, limiter).map_err(in_(place.clone()))?;
            if let Some(j) = throttles.iter().position(|o| o.scope == spec.scope) {
                return Err(Error::config(format!(
                    "{place}: throttle[{j}] has the same scope; give each throttle a scope of its own"
                )));
            }
            throttles.push(spec);
        }
        let mut lists = [Vec::new(), Vec::new()];
        for (n, (kind, given)) in [("safelist", file.safelist), ("blocklist", file.blocklist)]
            .into_iter()
            .enumerate()
        {
            for (i, l) in given.into_iter().enumerate() {
                lists[n].push(list(l, callables).map_err(in_(format!("{kind}[{i}]")))?);
            }
        }
        let [safelists, blocklists] = lists;
        let mut bans = Vec::new();
        for (kind, list, allow) in [
            ("fail2ban", file.fail2ban, false),
            ("allow2ban", file.allow2ban, true),
        ] {
            for (i, b) in list.into_iter().enumerate() {
                bans.push(ban(b, allow, callables).map_err(in_(format!("{kind}[{i}]")))?);
            }
        }
        Ok(Spec {
            listen,
            grpc,
            enabled: file.enabled.unwrap_or(true),
            settings,
            responses,
            log_denials: file.log_denials.unwrap_or(true),
            proxies,
            exempt_paths: file.exempt_paths,
            exempt_call,
            throttles,
            safelists,
            blocklists,
            bans,
        })
    }

    /// Whether a throttle keys requests by a field of their body
    /// (`identity:FIELD`): a door that must read a body ahead of the app
    /// (ASGI) reads it only then.
    pub fn reads_body(&self) -> bool {
        self.throttles
            .iter()
            .any(|t| matches!(t.key, Some(Source::Identity(_))))
    }

    /// Whether `path` is exempt from limiting.
    pub fn exempt(&self, path: &str) -> bool {
        self.exempt_paths
            .iter()
            .any(|p| path.starts_with(p.as_str()))
    }
}

#[cfg(test)]
mod tests;
