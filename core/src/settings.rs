//! A limiter's options as the bindings receive them (seconds as floats,
//! counts as signed integers, `on_error` as text), checked in one place.

use crate::error::{Error, Result};
use crate::limiter::{Limiter, OnError};
use crate::rule::RuleSet;
use crate::store::StoreOptions;
use std::time::Duration;

/// Everything `Limiter(rules, store, ...)` takes in Python and Ruby.
#[derive(Debug, Clone)]
pub struct Settings<'a> {
    /// The store URL.
    pub store: &'a str,
    /// First part of every Redis key.
    pub prefix: &'a str,
    /// `allow`, `deny` or `raise`.
    pub on_error: &'a str,
    /// Seconds to wait for one Redis command.
    pub timeout: f64,
    /// Seconds to wait for a new Redis connection.
    pub connect_timeout: f64,
    /// Redis connections kept by this process.
    pub pool_size: i128,
    /// Keys the memory store holds at most.
    pub max_keys: i128,
    /// Seconds a denial is remembered in-process at most (0: off).
    pub denial_cache: f64,
    /// Keeps this limiter's logs apart from other limiters' ("" for none).
    pub scope: &'a str,
    /// Named rule sets a check may name, or a key's stored tier select.
    pub tiers: Vec<(String, RuleSet)>,
    /// Seconds between reads of the shared policies (switches, address lists).
    pub policy_refresh: f64,
    /// Whether each check reads the key's policy record (listings, tier, override).
    pub policies: bool,
}

/// Seconds within (0, 60], or [0, 60] when `zero_ok`, as a duration.
fn seconds(name: &str, value: f64, zero_ok: bool) -> Result<Duration> {
    let low_ok = if zero_ok { value >= 0.0 } else { value > 0.0 };
    if !(value.is_finite() && low_ok && value <= 60.0) {
        let low = if zero_ok { "0 (off)" } else { "more than 0" };
        return Err(Error::config(format!(
            "invalid {name} {}: give seconds, {low} and at most 60",
            crate::error::shown(value)
        )));
    }
    Ok(Duration::from_secs_f64(value))
}

impl Limiter {
    /// A limiter from the options a binding received, naming the first bad one.
    pub fn from_settings(rules: RuleSet, settings: &Settings<'_>) -> Result<Limiter> {
        let on_error: OnError = settings.on_error.parse()?;
        if !(1..=1024).contains(&settings.pool_size) {
            return Err(Error::config(format!(
                "invalid pool_size {}: give 1 to 1024",
                settings.pool_size
            )));
        }
        if settings.max_keys < 1 {
            return Err(Error::config(format!(
                "invalid max_keys {}: give at least 1",
                settings.max_keys
            )));
        }
        let options = StoreOptions {
            prefix: settings.prefix.to_owned(),
            timeout: seconds("timeout", settings.timeout, false)?,
            connect_timeout: seconds("connect_timeout", settings.connect_timeout, false)?,
            pool_size: settings.pool_size as u32,
            max_keys: settings.max_keys as usize,
        };
        let cache = seconds("denial_cache", settings.denial_cache, true)?;
        let refresh = seconds("policy_refresh", settings.policy_refresh, false)?;
        let limiter = Limiter::open(rules, settings.store, &options, on_error)?
            .with_scope(settings.scope)?
            .with_tiers(settings.tiers.clone())?
            .with_policy_refresh(refresh)?
            .with_records(settings.policies);
        // the memory store answers in-process already: nothing to spare it
        Ok(if limiter.waits_on_io() {
            limiter.with_denial_cache(cache)
        } else {
            limiter
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings<'static> {
        Settings {
            store: "memory://",
            prefix: "rk",
            on_error: "allow",
            timeout: 0.05,
            connect_timeout: 0.05,
            pool_size: 16,
            max_keys: 1_000_000,
            denial_cache: 1.0,
            scope: "",
            tiers: Vec::new(),
            policy_refresh: 2.0,
            policies: true,
        }
    }

    #[test]
    fn names_the_bad_option() {
        let rules = || RuleSet::parse("1/s").unwrap();
        assert!(Limiter::from_settings(rules(), &settings()).is_ok());
        for (bad, name) in [
            (
                Settings {
                    timeout: 0.0,
                    ..settings()
                },
                "timeout",
            ),
            (
                Settings {
                    connect_timeout: f64::NAN,
                    ..settings()
                },
                "connect_timeout",
            ),
            (
                Settings {
                    pool_size: 0,
                    ..settings()
                },
                "pool_size",
            ),
            (
                Settings {
                    max_keys: -5,
                    ..settings()
                },
                "max_keys",
            ),
            (
                Settings {
                    denial_cache: -1.0,
                    ..settings()
                },
                "denial_cache",
            ),
            (
                Settings {
                    on_error: "explode",
                    ..settings()
                },
                "explode",
            ),
            (
                Settings {
                    prefix: "a{b",
                    ..settings()
                },
                "prefix",
            ),
        ] {
            let message = Limiter::from_settings(rules(), &bad)
                .err()
                .unwrap()
                .to_string();
            assert!(message.contains(name), "{message}");
        }
        assert!(Limiter::from_settings(
            rules(),
            &Settings {
                denial_cache: 0.0,
                ..settings()
            }
        )
        .is_ok());
    }
}
