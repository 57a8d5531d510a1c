//! `Ratekeeper::Limiter`'s native half and `Ratekeeper.check_all`: convert
//! arguments, release the GVL around store I/O, call the core, log its
//! once-per-outage warning. lib/ratekeeper/limiter.rb adds the
//! keyword-argument methods users call.

use crate::convert;
use crate::errors::{guard, settle, type_error};
use crate::gvl::without_gvl;
use crate::types::{Decision, Rule};
use magnus::{prelude::*, typed_data::Obj, Error, RArray, RHash, RModule, Ruby, Value};
use ratekeeper_core as core;

#[magnus::wrap(class = "Ratekeeper::Limiter", free_immediately, size)]
pub struct Limiter {
    inner: core::Limiter,
    /// The store URL as `inspect` shows it (no password).
    store: String,
}

/// Runs core code that may wait on the store: without the GVL when it does.
pub fn run_core<T>(
    ruby: &Ruby,
    waits: bool,
    f: impl FnOnce() -> core::Result<T>,
) -> Result<T, Error> {
    let outcome = if waits {
        without_gvl(f)
    } else {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
    };
    settle(ruby, outcome)
}

/// A core decision for Ruby, handing its once-per-outage warning to `Ratekeeper.log_warning`.
fn deliver(ruby: &Ruby, inner: core::Decision) -> Result<Decision, Error> {
    if let Some(warning) = &inner.warning {
        let module: RModule = ruby.class_object().const_get("Ratekeeper")?;
        let _: Value = module.funcall("log_warning", (warning.as_str(),))?;
    }
    Ok(Decision { inner })
}

/// Runs a batch of checks and delivers their decisions as an Array.
fn run_batch(
    ruby: &Ruby,
    items: &[core::BatchItem<'_>],
    now: Option<f64>,
) -> Result<RArray, Error> {
    let waits = items.iter().any(|item| item.limiter.waits_on_io());
    let decisions = run_core(ruby, waits, || core::check_batch(items, now))?;
    let out = ruby.ary_new_capa(decisions.len());
    for inner in decisions {
        out.push(deliver(ruby, inner)?)?;
    }
    Ok(out)
}

/// Tiers from an Array of [name, rules] pairs (lib/ratekeeper/limiter.rb
/// turns a Hash into one).
fn tiers(ruby: &Ruby, tiers: RArray) -> Result<Vec<(String, core::RuleSet)>, Error> {
    tiers
        .into_iter()
        .map(|pair| {
            let pair = RArray::from_value(pair)
                .filter(|p| p.len() == 2)
                .ok_or_else(|| type_error(ruby, "tiers must be a Hash of tier name to rules"))?;
            let name: String = pair.entry(0)?;
            Ok((name, convert::rule_set(ruby, pair.entry(1)?)?))
        })
        .collect()
}

/// An optional String argument (nil: none).
fn optional_text(value: Value) -> Result<Option<String>, Error> {
    if value.is_nil() {
        Ok(None)
    } else {
        Ok(Some(String::try_convert(value)?))
    }
}

impl Limiter {
    /// `Limiter._new(rules, store, prefix, on_error, timeout, connect_timeout,
    /// pool_size, max_keys, denial_cache, scope, tiers, policy_refresh, policies)`.
    #[allow(clippy::too_many_arguments)]
    pub fn native_new(
        ruby: &Ruby,
        rules: Value,
        store: String,
        prefix: String,
        on_error: String,
        timeout: f64,
        connect_timeout: f64,
        pool_size: i128,
        max_keys: i128,
        denial_cache: f64,
        scope: String,
        tier_pairs: RArray,
        policy_refresh: f64,
        policies: bool,
    ) -> Result<Limiter, Error> {
        let rules = convert::rule_set(ruby, rules)?;
        let settings = core::Settings {
            store: &store,
            prefix: &prefix,
            on_error: &on_error,
            timeout,
            connect_timeout,
            pool_size,
            max_keys,
            denial_cache,
            scope: &scope,
            tiers: tiers(ruby, tier_pairs)?,
            policy_refresh,
            policies,
        };
        let inner = guard(ruby, || core::Limiter::from_settings(rules, &settings))?;
        Ok(Limiter {
            inner,
            store: core::store::redact(&store),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn decide(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        cost: Value,
        now: Value,
        tier: Value,
        ip: Value,
        check: bool,
    ) -> Result<Decision, Error> {
        let key = convert::key_bytes(ruby, key)?;
        let tier = optional_text(tier)?;
        let ip = optional_text(ip)?;
        let options = core::CheckOptions {
            cost: convert::cost(ruby, cost)?,
            now: convert::now(ruby, now)?,
            tier: tier.as_deref(),
            ip: ip.as_deref(),
        };
        let limiter = &rb_self.inner;
        let inner = run_core(ruby, limiter.waits_on_io(), || {
            if check {
                limiter.check_with(&key, &options)
            } else {
                limiter.peek_with(&key, &options)
            }
        })?;
        deliver(ruby, inner)
    }

    /// `_check(key, cost, now, tier, ip)`.
    pub fn check(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<Decision, Error> {
        let [key, cost, now, tier, ip] = five(ruby, args)?;
        Limiter::decide(ruby, rb_self, key, cost, now, tier, ip, true)
    }

    /// `_peek(key, cost, now, tier, ip)`.
    pub fn peek(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<Decision, Error> {
        let [key, cost, now, tier, ip] = five(ruby, args)?;
        Limiter::decide(ruby, rb_self, key, cost, now, tier, ip, false)
    }

    /// `_penalize(key, ip, maxretry, findtime, bantime, name, now)`: one
    /// fail2ban strike against the key or (key nil) the client address `ip`;
    /// true when it banned it.
    pub fn penalize(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<bool, Error> {
        let [key, ip, maxretry, findtime, bantime, name, now] = <[Value; 7]>::try_from(args)
            .map_err(|_| type_error(ruby, "_penalize takes 7 arguments"))?;
        let key = if key.is_nil() {
            None
        } else {
            Some(convert::key_bytes(ruby, key)?)
        };
        let ip = optional_text(ip)?;
        let now = convert::now(ruby, now)?;
        let name: String = String::try_convert(name)?;
        let (maxretry, findtime, bantime) = (
            i64::try_convert(maxretry)?,
            f64::try_convert(findtime)?,
            f64::try_convert(bantime)?,
        );
        let rule = guard(ruby, || {
            core::Fail2Ban::new(&name, maxretry, findtime, bantime)
        })?;
        let offender = match (&key, &ip) {
            (Some(key), None) => core::Offender::Key(key),
            (None, Some(ip)) => core::Offender::Address(ip),
            _ => return Err(type_error(ruby, "penalize takes a key or ip:, one of them")),
        };
        let limiter = &rb_self.inner;
        let strike = run_core(ruby, limiter.waits_on_io(), || {
            limiter.penalize(offender, &rule, now)
        })?;
        Ok(strike.banned)
    }

    /// `screen(ip)`: how the address lists judge the client address now (a
    /// blocked or safelisted Decision), or nil. Asks no store.
    /// (Without the GVL: the first read of the lists in a process may wait on the store.)
    pub fn screen(ruby: &Ruby, rb_self: &Self, ip: String) -> Result<Option<Decision>, Error> {
        let limiter = &rb_self.inner;
        let listed = run_core(ruby, limiter.waits_on_io(), || Ok(limiter.screen(&ip)))?;
        listed.map(|inner| deliver(ruby, inner)).transpose()
    }

    /// `admin`: the admin interface to this limiter's store.
    pub fn admin(&self) -> crate::admin::Admin {
        crate::admin::Admin::wrap(core::Admin::new(self.inner.store()))
    }

    /// `_check_many(keys, cost, now)`: one Redis round trip (a pipeline).
    pub fn check_many(
        ruby: &Ruby,
        rb_self: &Self,
        keys: RArray,
        cost: Value,
        now: Value,
    ) -> Result<RArray, Error> {
        let cost = convert::cost(ruby, cost)?;
        let now = convert::now(ruby, now)?;
        let keys: Vec<Vec<u8>> = keys
            .into_iter()
            .map(|key| convert::key_bytes(ruby, key))
            .collect::<Result<_, _>>()?;
        let items: Vec<core::BatchItem<'_>> = keys
            .iter()
            .map(|k| core::BatchItem::new(&rb_self.inner, k, cost))
            .collect();
        run_batch(ruby, &items, now)
    }

    /// `_reset(key)`.
    pub fn reset(ruby: &Ruby, rb_self: &Self, key: Value) -> Result<(), Error> {
        let key = convert::key_bytes(ruby, key)?;
        let limiter = &rb_self.inner;
        run_core(ruby, limiter.waits_on_io(), || limiter.reset(&key))
    }

    /// `_with_rules(rules, scope, tiers)`: another limiter on the same store.
    pub fn with_rules(
        ruby: &Ruby,
        rb_self: &Self,
        rules: Value,
        scope: String,
        tier_pairs: RArray,
    ) -> Result<Limiter, Error> {
        let rules = convert::rule_set(ruby, rules)?;
        let tiers = tiers(ruby, tier_pairs)?;
        let inner = guard(ruby, || {
            rb_self
                .inner
                .with_rules(rules)
                .with_scope(&scope)?
                .with_tiers(tiers)
        })?;
        Ok(Limiter {
            inner,
            store: rb_self.store.clone(),
        })
    }

    /// `scope`: the scope ("" for none).
    pub fn scope(&self) -> String {
        self.inner.scope().to_owned()
    }

    /// `rules`: the rules, shortest window first.
    pub fn rules(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let out = ruby.ary_new();
        for &inner in rb_self.inner.rules().rules() {
            out.push(Rule { inner })?;
        }
        Ok(out)
    }

    /// `store_stats`: {attempts:, failures:, short_circuits:} of the store.
    pub fn store_stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let out = ruby.hash_new();
        for (name, value) in rb_self.inner.store_stats().counts() {
            out.aset(ruby.to_symbol(name), value)?;
        }
        Ok(out)
    }

    /// `stats`: {allowed:, denied:, cached_denials:, errors:, fail_open:,
    /// fail_closed:, peak_used: {window_seconds => units}}.
    pub fn stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let stats = rb_self.inner.stats();
        let out = ruby.hash_new();
        for (name, value) in stats.counts() {
            out.aset(ruby.to_symbol(name), value)?;
        }
        let peaks = ruby.hash_new();
        for (window_ms, used) in stats.peak_used {
            peaks.aset(window_ms as f64 / 1000.0, used)?;
        }
        out.aset(ruby.to_symbol("peak_used"), peaks)?;
        Ok(out)
    }

    /// `error_count`: checks that fell back to on_error.
    pub fn error_count(&self) -> u64 {
        self.inner.error_count()
    }

    pub fn inspect(&self) -> String {
        format!(
            "#<Ratekeeper::Limiter {} store={}>",
            self.inner.rules(),
            self.store
        )
    }
}

/// One converted `check_all` item: limiter, key, cost, tier.
type Item = (Obj<Limiter>, Vec<u8>, u64, Option<String>);

/// Five positional arguments.
fn five(ruby: &Ruby, args: &[Value]) -> Result<[Value; 5], Error> {
    <[Value; 5]>::try_from(args).map_err(|_| type_error(ruby, "expected 5 arguments"))
}

/// `Ratekeeper._check_all(items, now, ip)`: items are [limiter, key, cost]
/// Arrays; limiters sharing a store are asked in one round trip; `ip` (the
/// client address, or nil) is matched against listed addresses.
pub fn check_all(ruby: &Ruby, items: RArray, now: Value, ip: Value) -> Result<RArray, Error> {
    let now = convert::now(ruby, now)?;
    let ip = optional_text(ip)?;
    let mut owned: Vec<Item> = Vec::with_capacity(items.len());
    for item in items.into_iter() {
        let shape = || {
            type_error(
                ruby,
                "each item must be [limiter, key], [limiter, key, cost] or [limiter, key, cost, tier]",
            )
        };
        let parts = RArray::from_value(item).ok_or_else(shape)?;
        if !(2..=4).contains(&parts.len()) {
            return Err(shape());
        }
        let limiter = Obj::<Limiter>::try_convert(parts.entry(0)?).map_err(|_| {
            type_error(
                ruby,
                "the first element of each item must be a Ratekeeper::Limiter",
            )
        })?;
        let key = convert::key_bytes(ruby, parts.entry(1)?)?;
        let cost = if parts.len() >= 3 {
            convert::cost(ruby, parts.entry(2)?)?
        } else {
            1
        };
        let tier = if parts.len() == 4 {
            optional_text(parts.entry(3)?)?
        } else {
            None
        };
        owned.push((limiter, key, cost, tier));
    }
    let items: Vec<core::BatchItem<'_>> = owned
        .iter()
        .map(|(l, k, c, tier)| core::BatchItem {
            ip: ip.as_deref(),
            tier: tier.as_deref(),
            ..core::BatchItem::new(&l.inner, k, *c)
        })
        .collect();
    run_batch(ruby, &items, now)
}
