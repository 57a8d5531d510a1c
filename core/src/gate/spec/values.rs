//! The values every kind of entry is made of, checked: the store's
//! settings, listening addresses, rules, path prefixes, methods and header
//! names, the patterns and callables that name requests. A problem is
//! worded for the caller to say where it is.

use crate::error::{Error, Result};
use crate::gate::source::Source;
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
/// `on_error`, `timeout`...), each checked by [`Settings`]; an option's old
/// name is still read (a file has no one to warn).
pub(super) fn store_settings(table: &toml::Table) -> Result<Settings> {
    let mut given = Vec::new();
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
        given.push((option, converted));
    }
    let mut settings = Settings::default();
    settings
        .set_all(given)
        .map_err(|e| Error::config(format!("[store]: {e}")))?;
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
