//! A limiter's options, in one place: their names, their kinds, their
//! defaults and their checks. Python's `Limiter(rules, store, **options)`,
//! Ruby's `Limiter.new(rules, **options)` (passed on as one Hash), Django's
//! `RATEKEEPER` settings and the Rack middleware's options all land here;
//! a binding only turns its language's values into an [`OptionValue`] of
//! the [`Kind`] the option has.

use crate::error::{Error, Result};
use crate::limiter::{Limiter, OnError, Warden};
use crate::meter::Limits;
use crate::plain::{Key, Plain};
use crate::rule::RuleSet;
use crate::store::{self, ModuleUse, Store, StoreOptions, DEFAULT_TIMEOUT};
use crate::time::option_seconds;
use std::sync::Arc;
use std::time::Duration;

/// What kind of value an option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Text (`store`, `prefix`, `on_error`, `scope`).
    Text,
    /// Seconds, a number.
    Seconds,
    /// A whole number.
    Count,
    /// True or false.
    Flag,
    /// Named rule sets.
    Tiers,
}

impl Kind {
    /// How a message names what the kind takes.
    pub fn expected(self) -> &'static str {
        match self {
            Kind::Text => "a string",
            Kind::Seconds => "a number of seconds",
            Kind::Count => "an integer",
            Kind::Flag => "true or false",
            Kind::Tiers => "a mapping of tier name to rules",
        }
    }
}

/// An option's value, as a binding converted it.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    /// For [`Kind::Text`].
    Text(String),
    /// For [`Kind::Seconds`].
    Seconds(f64),
    /// For [`Kind::Count`] (wide, so that a huge number is quoted, not wrapped).
    Count(i128),
    /// For [`Kind::Flag`].
    Flag(bool),
    /// For [`Kind::Tiers`].
    Tiers(Vec<(String, RuleSet)>),
}

/// Every option, with its kind, in the order the docs list them (docs/python.md).
pub const OPTIONS: [(&str, Kind); 14] = [
    ("store", Kind::Text),
    ("prefix", Kind::Text),
    ("on_error", Kind::Text),
    ("timeout", Kind::Seconds),
    ("connect_timeout", Kind::Seconds),
    ("pool_size", Kind::Count),
    ("max_keys", Kind::Count),
    ("denial_cache", Kind::Seconds),
    ("scope", Kind::Text),
    ("tiers", Kind::Tiers),
    ("controls_refresh", Kind::Seconds),
    ("controls", Kind::Flag),
    ("redis_module", Kind::Text),
    ("lease", Kind::Seconds),
];

/// Options renamed, each old name with the name it goes by now: the old
/// one is still taken, and the bindings show [`renamed`]'s warning in their
/// language's way (a `DeprecationWarning`, a `:deprecated` warning).
pub const RENAMED: [(&str, &str); 2] = [
    ("policy_refresh", "controls_refresh"),
    ("policies", "controls"),
];

/// The name the option `name` goes by now (itself, unless renamed).
pub fn current_name(name: &str) -> &str {
    RENAMED
        .iter()
        .find(|(old, _)| *old == name)
        .map_or(name, |(_, now)| now)
}

/// For an option's old name, the warning to show where it is given.
pub fn renamed(name: &str) -> Option<String> {
    let now = current_name(name);
    (now != name).then(|| {
        format!("the option {name} is now called {now}; {name} still works and will be removed in a later release")
    })
}

/// Everything a limiter is built from besides its rules, each value checked
/// when it is set. [`Settings::default`] holds the defaults every binding
/// and adapter uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The store URL (`memory://`).
    pub store: String,
    /// First part of every Redis key (`rk`).
    pub prefix: String,
    /// What a check returns when the store fails (`allow`).
    pub on_error: OnError,
    /// Longest wait for one Redis command; a call waits that long once on a
    /// Redis that does not answer (see [`DEFAULT_TIMEOUT`] and
    /// [`crate::store::one_wait`]).
    pub timeout: Duration,
    /// Longest wait for a new Redis connection.
    pub connect_timeout: Duration,
    /// Redis connections kept by each process (16).
    pub pool_size: u32,
    /// Keys the memory store holds at most (1,000,000).
    pub max_keys: usize,
    /// How long a denial is remembered in-process at most (1 s; zero: off;
    /// remote stores only).
    pub denial_cache: Duration,
    /// Keeps this limiter's logs apart from other limiters' ("" for none).
    pub scope: String,
    /// Named rule sets a check may name, or a key's stored tier select.
    pub tiers: Vec<(String, RuleSet)>,
    /// How often the shared controls (switches, address lists) are read again (2 s).
    pub controls_refresh: Duration,
    /// Whether each check reads the key's record (listings, tier, override).
    pub controls: bool,
    /// Whether Redis checks use the ratekeeper module (`auto`: when loaded).
    pub redis_module: ModuleUse,
    /// How long a hold's lease lasts unless released or extended (60 s; see
    /// [`crate::in_flight`]).
    pub lease: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            store: "memory://".to_owned(),
            prefix: "rk".to_owned(),
            on_error: OnError::Allow,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_TIMEOUT,
            pool_size: 16,
            max_keys: 1_000_000,
            denial_cache: crate::denial_cache::DEFAULT_CAP,
            scope: String::new(),
            tiers: Vec::new(),
            controls_refresh: crate::limiter::DEFAULT_CONTROLS_REFRESH,
            controls: true,
            redis_module: ModuleUse::Auto,
            lease: Duration::from_millis(crate::in_flight::DEFAULT_LEASE_MS),
        }
    }
}

impl Settings {
    /// The kind of value the option `name` takes; an unknown name is a
    /// configuration error listing the known ones.
    pub fn kind(name: &str) -> Result<Kind> {
        let name = current_name(name);
        OPTIONS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, kind)| *kind)
            .ok_or_else(|| {
                let known: Vec<&str> = OPTIONS.iter().map(|(n, _)| *n).collect();
                Error::config(format!(
                    "unknown option '{}': the options are {}",
                    name.escape_debug(),
                    known.join(", ")
                ))
            })
    }

    /// Sets the option `name` after checking `value`; the error names the
    /// option and quotes the value (never a store password).
    pub fn set(&mut self, name: &str, value: OptionValue) -> Result<()> {
        let name = current_name(name);
        let kind = Settings::kind(name)?;
        let mismatch = || Error::config(format!("{name} must be {}", kind.expected()));
        match (name, value) {
            ("store", OptionValue::Text(url)) => {
                store::check_url(&url)?;
                self.store = url;
            }
            ("prefix", OptionValue::Text(prefix)) => {
                store::check_prefix(&prefix)?;
                self.prefix = prefix;
            }
            ("on_error", OptionValue::Text(text)) => self.on_error = text.parse()?,
            ("redis_module", OptionValue::Text(text)) => self.redis_module = text.parse()?,
            ("scope", OptionValue::Text(scope)) => {
                crate::keys::check_scope(&scope)?;
                self.scope = scope;
            }
            ("timeout", OptionValue::Seconds(s)) => self.timeout = option_seconds(name, s, false)?,
            ("connect_timeout", OptionValue::Seconds(s)) => {
                self.connect_timeout = option_seconds(name, s, false)?
            }
            ("denial_cache", OptionValue::Seconds(s)) => {
                self.denial_cache = option_seconds(name, s, true)?
            }
            ("controls_refresh", OptionValue::Seconds(s)) => {
                self.controls_refresh =
                    crate::limiter::check_controls_refresh(option_seconds(name, s, false)?)?
            }
            ("pool_size", OptionValue::Count(n)) => {
                self.pool_size = crate::store::check_pool_size(n)?
            }
            ("max_keys", OptionValue::Count(n)) => self.max_keys = crate::store::check_max_keys(n)?,
            ("controls", OptionValue::Flag(on)) => self.controls = on,
            ("lease", OptionValue::Seconds(s)) => {
                self.lease = Duration::from_millis(crate::in_flight::lease_ms_from(s)?)
            }
            ("tiers", OptionValue::Tiers(tiers)) => {
                crate::controls::check_tiers(&tiers)?;
                self.tiers = tiers;
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    /// Sets every option of `given` (as [`Settings::set`]), refusing one
    /// given twice under its old and new name; returns the warnings for old
    /// names (see [`renamed`]) for the binding to show.
    pub fn set_all(&mut self, given: Vec<(&str, OptionValue)>) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        for (i, (name, _)) in given.iter().enumerate() {
            if let Some((twice, _)) = given[..i]
                .iter()
                .find(|(seen, _)| current_name(seen) == current_name(name))
            {
                return Err(Error::config(format!(
                    "give {twice} or {name}, not both: they are one option, {}",
                    current_name(name)
                )));
            }
            warnings.extend(renamed(name));
        }
        for (name, value) in given {
            self.set(name, value)?;
        }
        Ok(warnings)
    }

    /// The options that shape the store.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            prefix: self.prefix.clone(),
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            pool_size: self.pool_size,
            max_keys: self.max_keys,
            redis_module: self.redis_module,
        }
    }

    /// The defaults, by option name, as the bindings show them
    /// (`ratekeeper.DEFAULTS`, `Ratekeeper::DEFAULTS`): seconds as numbers,
    /// `on_error` as its name, tiers as an empty mapping.
    pub fn defaults() -> Plain {
        let d = Settings::default();
        Plain::Map(vec![
            (Key::Name("store"), Plain::Text(d.store)),
            (Key::Name("prefix"), Plain::Text(d.prefix)),
            (Key::Name("on_error"), Plain::Text(d.on_error.name().into())),
            (Key::Name("timeout"), d.timeout.as_secs_f64().into()),
            (
                Key::Name("connect_timeout"),
                d.connect_timeout.as_secs_f64().into(),
            ),
            (Key::Name("pool_size"), u64::from(d.pool_size).into()),
            (Key::Name("max_keys"), (d.max_keys as u64).into()),
            (
                Key::Name("denial_cache"),
                d.denial_cache.as_secs_f64().into(),
            ),
            (Key::Name("scope"), Plain::Text(d.scope)),
            (Key::Name("tiers"), Plain::Map(Vec::new())),
            (
                Key::Name("controls_refresh"),
                d.controls_refresh.as_secs_f64().into(),
            ),
            (Key::Name("controls"), Plain::Bool(d.controls)),
            (
                Key::Name("redis_module"),
                Plain::Text(d.redis_module.name().into()),
            ),
            (Key::Name("lease"), d.lease.as_secs_f64().into()),
        ])
    }
}

impl Warden {
    /// The warden `settings` describe, on the store they name (opening a
    /// Redis store may wait up to its connect timeout). Their scope and
    /// tiers are a limiter's, not read here.
    pub fn open(settings: &Settings) -> Result<Warden> {
        let store = store::open(&settings.store, &settings.store_options())?;
        Warden::on_store(settings, store)
    }

    /// [`Warden::open`] on a store already open; `settings.store` and the
    /// store options are not read again.
    pub fn on_store(settings: &Settings, store: Arc<dyn Store>) -> Result<Warden> {
        let mut warden = Warden::new(store, settings.on_error)
            .with_controls_refresh(settings.controls_refresh)?
            .with_records(settings.controls);
        // the memory store answers in-process already: nothing to spare it
        if warden.store.waits_on_io() {
            warden.denial_cap = settings.denial_cache;
        }
        Ok(warden)
    }

    /// A limiter of `rules` on this warden, with the scope and tiers of `settings`.
    fn limiter_of(&self, rules: RuleSet, settings: &Settings) -> Result<Limiter> {
        self.limiter(rules)
            .with_lease(settings.lease.as_millis() as u64)
            .with_scope(&settings.scope)?
            .with_tiers(settings.tiers.clone())
    }
}

impl Limiter {
    /// A limiter for `rules` built from `settings` (see [`Settings`]).
    pub fn from_settings(rules: RuleSet, settings: &Settings) -> Result<Limiter> {
        Warden::open(settings)?.limiter_of(rules, settings)
    }

    /// A limiter of `limits` (one rule set, or several named ones: see
    /// [`crate::meter`]) on the store and with the options `settings` gives.
    pub fn from_limits(limits: Limits, settings: &Settings) -> Result<Limiter> {
        match limits {
            Limits::Rules(rules) => Limiter::from_settings(rules, settings),
            Limits::Meters(meters) => {
                Limiter::from_settings(Limits::first(&meters)?, settings)?.with_meters(meters)
            }
        }
    }

    /// [`Limiter::from_settings`] on a store already open (several limiters,
    /// say a server's throttles, sharing one connection and one round trip);
    /// `settings.store` and the store options are not read again.
    pub fn on_store(rules: RuleSet, settings: &Settings, store: Arc<dyn Store>) -> Result<Limiter> {
        Warden::on_store(settings, store)?.limiter_of(rules, settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: &str, value: OptionValue) -> Result<Settings> {
        let mut settings = Settings::default();
        settings.set(name, value).map(|_| settings)
    }

    #[test]
    fn every_option_has_a_default_and_a_kind() {
        let Plain::Map(defaults) = Settings::defaults() else {
            panic!("a map")
        };
        let names: Vec<&str> = defaults
            .iter()
            .map(|(key, _)| match key {
                Key::Name(n) => *n,
                Key::Seconds(_) => panic!("named"),
            })
            .collect();
        let options: Vec<&str> = OPTIONS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, options);
        assert_eq!(Settings::default().timeout, Duration::from_millis(250));
    }

    #[test]
    fn an_old_name_sets_the_option_it_became_and_says_so() {
        let old = with("policies", OptionValue::Flag(false)).unwrap();
        assert!(!old.controls);
        let old = with("policy_refresh", OptionValue::Seconds(5.0)).unwrap();
        assert_eq!(old.controls_refresh, Duration::from_secs(5));
        assert!(with("policy_refresh", OptionValue::Seconds(0.01))
            .unwrap_err()
            .to_string()
            .contains("controls_refresh"));
        assert_eq!(Settings::kind("policies").unwrap(), Kind::Flag);
        let said = renamed("policies").unwrap();
        assert!(
            said.contains("policies") && said.contains("controls"),
            "{said}"
        );
        assert_eq!(renamed("controls"), None);
        assert_eq!(renamed("colour"), None);
        let mut settings = Settings::default();
        let said = settings
            .set_all(vec![("policies", OptionValue::Flag(false))])
            .unwrap();
        assert_eq!(said.len(), 1);
        assert!(!settings.controls);
        let both = Settings::default()
            .set_all(vec![
                ("controls", OptionValue::Flag(true)),
                ("policies", OptionValue::Flag(false)),
            ])
            .unwrap_err()
            .to_string();
        assert!(both.contains("controls or policies, not both"), "{both}");
    }

    #[test]
    fn names_the_bad_option() {
        let rules = || RuleSet::parse("1/s").unwrap();
        assert!(Limiter::from_settings(rules(), &Settings::default()).is_ok());
        for (name, value, word) in [
            ("timeout", OptionValue::Seconds(0.0), "timeout"),
            (
                "connect_timeout",
                OptionValue::Seconds(f64::NAN),
                "connect_timeout",
            ),
            ("pool_size", OptionValue::Count(0), "pool_size"),
            ("max_keys", OptionValue::Count(-5), "max_keys"),
            ("denial_cache", OptionValue::Seconds(-1.0), "denial_cache"),
            (
                "controls_refresh",
                OptionValue::Seconds(0.05),
                "controls_refresh",
            ),
            ("on_error", OptionValue::Text("explode".into()), "explode"),
            (
                "redis_module",
                OptionValue::Text("on".into()),
                "invalid redis_module 'on'",
            ),
            ("prefix", OptionValue::Text("a{b".into()), "prefix"),
            ("scope", OptionValue::Text("a b".into()), "scope"),
            ("store", OptionValue::Text("mysql://h".into()), "mysql://h"),
            (
                "timeout",
                OptionValue::Text("fast".into()),
                "number of seconds",
            ),
            ("colour", OptionValue::Flag(true), "unknown option 'colour'"),
        ] {
            let message = with(name, value).unwrap_err().to_string();
            assert!(message.contains(word), "{name}: {message}");
        }
        let huge = with("max_keys", OptionValue::Count(i128::MAX)).unwrap();
        assert_eq!(huge.max_keys, usize::MAX);
        assert!(with("denial_cache", OptionValue::Seconds(0.0)).is_ok());
    }

    #[test]
    fn a_store_url_is_checked_without_connecting() {
        // nothing listens on port 1: checking must not try
        assert!(with("store", OptionValue::Text("redis://127.0.0.1:1/0".into())).is_ok());
        let message = with(
            "store",
            OptionValue::Text("redis://u:hunter2@h:1/0?ssl_certfile=x".into()),
        )
        .unwrap_err()
        .to_string();
        assert!(!message.contains("hunter2"), "{message}");
    }
}
