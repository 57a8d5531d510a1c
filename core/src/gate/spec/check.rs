//! Each part of a policy as written, checked into the model: the store's
//! settings, a throttle, its Envoy table, methods and header names, the
//! patterns and callables that name requests, lists and bans. A problem is
//! worded for the caller to say where it is.

use super::file::{BanFile, EnvoyFile, ListFile, ThrottleFile};
use super::{BanSpec, EnvoySpec, ListSpec, RequestMatch, ThrottleSpec};
use crate::error::{Error, Result};
use crate::gate::source::Source;
use crate::limiter::Limiter;
use crate::policy::Fail2Ban;
use crate::rule::RuleSet;
use crate::settings::{Kind, OptionValue, Settings};
use regex::Regex;
use std::net::SocketAddr;

/// A listening address, or an error naming `name` (a key or a flag).
pub fn address(name: &str, text: &str) -> Result<SocketAddr> {
    text.parse().map_err(|_| {
        Error::config(format!(
            "invalid {name} '{}': give an address and a port, as 127.0.0.1:8070",
            text.escape_debug()
        ))
    })
}

/// The `[store]` table: `url` and the limiter options (`prefix`,
/// `on_error`, `timeout`...), each checked by [`Settings`].
pub(super) fn store_settings(table: &toml::Table) -> Result<Settings> {
    let mut settings = Settings::default();
    for (name, value) in table {
        let option = if name == "url" {
            "store"
        } else {
            name.as_str()
        };
        if matches!(option, "scope" | "tiers") {
            return Err(Error::config(format!(
                "[store]: '{option}' is given per throttle, not for the store"
            )));
        }
        let kind = Settings::kind(option).map_err(|e| {
            Error::config(format!(
                "[store]: {}",
                e.to_string().replace("'store'", "'url'")
            ))
        })?;
        let converted = match (kind, value) {
            (Kind::Text, toml::Value::String(s)) => Some(OptionValue::Text(s.clone())),
            (Kind::Seconds, toml::Value::Float(f)) => Some(OptionValue::Seconds(*f)),
            (Kind::Seconds, toml::Value::Integer(n)) => Some(OptionValue::Seconds(*n as f64)),
            (Kind::Count, toml::Value::Integer(n)) => Some(OptionValue::Count(i128::from(*n))),
            (Kind::Flag, toml::Value::Boolean(b)) => Some(OptionValue::Flag(*b)),
            _ => None,
        };
        let converted = converted
            .ok_or_else(|| Error::config(format!("[store]: {name} must be {}", kind.expected())))?;
        settings
            .set(option, converted)
            .map_err(|e| Error::config(format!("[store]: {e}")))?;
    }
    Ok(settings)
}

pub(super) fn rules(what: &str, text: &str) -> std::result::Result<RuleSet, String> {
    RuleSet::parse(text).map_err(|e| format!("{what}: {e}"))
}

pub(super) fn path_prefix(what: &str, path: &str) -> std::result::Result<(), String> {
    if path.starts_with('/') {
        Ok(())
    } else {
        Err(format!(
            "{what}: '{}' is not a path: give a prefix starting with '/'",
            path.escape_debug()
        ))
    }
}

pub(super) fn throttle(
    t: ThrottleFile,
    callables: usize,
    limiter: Option<&Limiter>,
) -> std::result::Result<ThrottleSpec, String> {
    let scope = match (t.scope, limiter) {
        (Some(scope), _) => scope,
        (None, Some(limiter)) if t.rules.is_none() => limiter.scope().to_owned(),
        (None, _) => {
            return Err("give the throttle a scope: the name its quotas are kept under".into())
        }
    };
    crate::keys::check_scope(&scope).map_err(|e| e.to_string())?;
    let (main, mut tiers) = match (t.rules.as_deref(), limiter) {
        (Some(text), _) => (rules("rules", text)?, Vec::new()),
        (None, Some(limiter)) => (limiter.rules().clone(), limiter.tiers().to_vec()),
        (None, None) => return Err("give rules, as \"10/second; 100/minute\"".into()),
    };
    for (name, value) in &t.tiers {
        let text = value
            .as_str()
            .ok_or_else(|| format!("tiers.{name}: give rules as a string, as \"100/minute\""))?;
        tiers.retain(|(given, _)| given != name);
        tiers.push((name.clone(), rules(&format!("tiers.{name}"), text)?));
    }
    crate::policy::check_tiers(&tiers).map_err(|e| e.to_string())?;
    let key = t
        .key
        .as_deref()
        .map(|k| Source::parse(k, callables))
        .transpose()?;
    let tier = t
        .tier
        .as_deref()
        .map(|k| Source::parse(k, callables))
        .transpose()?;
    if let Some(source) = &tier {
        if matches!(source, Source::Ip | Source::User | Source::Identity(_)) {
            return Err("tier: give 'header:NAME', 'query:FIELD' or a callable".into());
        }
        if tiers.is_empty() {
            return Err("tier is given but no tiers are".into());
        }
    }
    let envoy = t.envoy.map(envoy).transpose()?;
    if key.is_none() && envoy.is_none() {
        return Err(
            "give a key (for the HTTP doors), an [envoy] table (for Envoy), or both".into(),
        );
    }
    for path in &t.paths {
        path_prefix("paths", path)?;
    }
    Ok(ThrottleSpec {
        scope,
        rules: main,
        tiers,
        tier,
        key,
        hosts: t
            .hosts
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect(),
        paths: t.paths,
        methods: methods(&t.methods)?,
        headers: header_names("headers", &t.headers)?,
        matcher: matcher(t.matcher.as_deref(), callables)?,
        envoy,
        shadow: t.shadow.unwrap_or(false),
    })
}

pub(super) fn envoy(e: EnvoyFile) -> std::result::Result<EnvoySpec, String> {
    if e.domain.is_empty() || e.key.is_empty() {
        return Err("envoy: give a domain and the key entry's name".into());
    }
    let mut matches = Vec::new();
    for (name, value) in &e.matches {
        let value = value.as_str().ok_or_else(|| {
            format!("envoy.match.{name}: give the entry's value as a string (\"*\": any value)")
        })?;
        matches.push((name.clone(), value.to_owned()));
    }
    Ok(EnvoySpec {
        domain: e.domain,
        key: e.key,
        matches,
    })
}

/// An HTTP method as every door compares it: a token of ASCII letters, in
/// upper case.
pub fn method(given: &str) -> std::result::Result<String, String> {
    let upper = given.to_ascii_uppercase();
    if upper.is_empty() || upper.len() > 32 || !upper.bytes().all(|b| b.is_ascii_alphabetic()) {
        Err(format!("'{}' is not an HTTP method", given.escape_debug()))
    } else {
        Ok(upper)
    }
}

pub(super) fn methods(given: &[String]) -> std::result::Result<Vec<String>, String> {
    given
        .iter()
        .map(|m| method(m).map_err(|e| format!("methods: {e}")))
        .collect()
}

/// A header name as every door compares it: an HTTP token, in lower case.
pub fn header_name(given: &str) -> Option<String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    (!given.is_empty() && given.bytes().all(token)).then(|| given.to_ascii_lowercase())
}

pub(super) fn header_names(
    what: &str,
    given: &[String],
) -> std::result::Result<Vec<String>, String> {
    given
        .iter()
        .map(|h| {
            header_name(h)
                .ok_or_else(|| format!("{what}: '{}' is not a header name", h.escape_debug()))
        })
        .collect()
}

/// A `match` that names a predicate the door holds.
pub(super) fn matcher(
    given: Option<&str>,
    callables: usize,
) -> std::result::Result<Option<usize>, String> {
    match given {
        None => Ok(None),
        Some(text) => match Source::parse(text, callables) {
            Ok(Source::Call(n)) => Ok(Some(n)),
            _ => Err(format!(
                "match: '{}' is not a callable the door holds",
                text.escape_debug()
            )),
        },
    }
}

pub(super) fn patterns(given: &[String]) -> std::result::Result<Vec<Regex>, String> {
    given
        .iter()
        .map(|p| {
            Regex::new(p)
                .map_err(|e| format!("paths: '{}' is not a pattern: {e}", p.escape_debug()))
        })
        .collect()
}

pub(super) fn list(l: ListFile, callables: usize) -> std::result::Result<ListSpec, String> {
    let when = RequestMatch::read(&l.paths, &l.methods, l.matcher.as_deref(), callables)?;
    if when.paths.is_empty() && when.methods.is_empty() && when.matcher.is_none() {
        return Err("give paths, methods or match: the requests it names".into());
    }
    Ok(ListSpec { name: l.name, when })
}

pub(super) fn ban(
    b: BanFile,
    allow: bool,
    callables: usize,
) -> std::result::Result<BanSpec, String> {
    let rule = Fail2Ban::given(b.name.as_deref(), b.maxretry, b.findtime, b.bantime)
        .map_err(|e| e.to_string())?;
    let when = RequestMatch::read(&b.paths, &b.methods, b.matcher.as_deref(), callables)?;
    if when.paths.is_empty() && when.matcher.is_none() {
        return Err("give paths: the patterns of the requests that strike".into());
    }
    Ok(BanSpec { rule, when, allow })
}
