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
    store: String,
}

/// Runs core code that may wait on the store: without the GVL when it does.
fn run_core<T>(ruby: &Ruby, waits: bool, f: impl FnOnce() -> core::Result<T>) -> Result<T, Error> {
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
    items: &[(&core::Limiter, &[u8], u64)],
    now: Option<f64>,
) -> Result<RArray, Error> {
    let waits = items.iter().any(|(limiter, _, _)| limiter.waits_on_io());
    let decisions = run_core(ruby, waits, || core::check_batch(items, now))?;
    let out = ruby.ary_new_capa(decisions.len());
    for inner in decisions {
        out.push(deliver(ruby, inner)?)?;
    }
    Ok(out)
}

impl Limiter {
    /// `Limiter._new(rules, store, prefix, on_error, timeout, connect_timeout, pool_size, max_keys, denial_cache)`.
    #[allow(clippy::too_many_arguments)]
    pub fn native_new(
        ruby: &Ruby,
        rules: Value,
        store: String,
        prefix: String,
        on_error: String,
        timeout: f64,
        connect_timeout: f64,
        pool_size: i64,
        max_keys: i64,
        denial_cache: f64,
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
        };
        let inner = guard(ruby, || core::Limiter::from_settings(rules, &settings))?;
        Ok(Limiter { inner, store })
    }

    fn decide(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        cost: Value,
        now: Value,
        check: bool,
    ) -> Result<Decision, Error> {
        let key = convert::key_bytes(ruby, key)?;
        let cost = convert::cost(ruby, cost)?;
        let now = convert::now(ruby, now)?;
        let limiter = &rb_self.inner;
        let inner = run_core(ruby, limiter.waits_on_io(), || {
            if check {
                limiter.check(&key, cost, now)
            } else {
                limiter.peek(&key, cost, now)
            }
        })?;
        deliver(ruby, inner)
    }

    /// `_check(key, cost, now)`.
    pub fn check(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        cost: Value,
        now: Value,
    ) -> Result<Decision, Error> {
        Limiter::decide(ruby, rb_self, key, cost, now, true)
    }

    /// `_peek(key, cost, now)`.
    pub fn peek(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        cost: Value,
        now: Value,
    ) -> Result<Decision, Error> {
        Limiter::decide(ruby, rb_self, key, cost, now, false)
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
        let items: Vec<(&core::Limiter, &[u8], u64)> = keys
            .iter()
            .map(|k| (&rb_self.inner, k.as_slice(), cost))
            .collect();
        run_batch(ruby, &items, now)
    }

    /// `_reset(key)`.
    pub fn reset(ruby: &Ruby, rb_self: &Self, key: Value) -> Result<(), Error> {
        let key = convert::key_bytes(ruby, key)?;
        let limiter = &rb_self.inner;
        run_core(ruby, limiter.waits_on_io(), || limiter.reset(&key))
    }

    /// `_with_rules(rules)`: another limiter on the same store.
    pub fn with_rules(ruby: &Ruby, rb_self: &Self, rules: Value) -> Result<Limiter, Error> {
        let rules = convert::rule_set(ruby, rules)?;
        Ok(Limiter {
            inner: rb_self.inner.with_rules(rules),
            store: rb_self.store.clone(),
        })
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

/// `Ratekeeper._check_all(items, now)`: items are [limiter, key, cost] Arrays;
/// limiters sharing a store are asked in one round trip.
pub fn check_all(ruby: &Ruby, items: RArray, now: Value) -> Result<RArray, Error> {
    let now = convert::now(ruby, now)?;
    let mut owned: Vec<(Obj<Limiter>, Vec<u8>, u64)> = Vec::with_capacity(items.len());
    for item in items.into_iter() {
        let shape = || {
            type_error(
                ruby,
                "each item must be [limiter, key] or [limiter, key, cost]",
            )
        };
        let parts = RArray::from_value(item).ok_or_else(shape)?;
        if !(2..=3).contains(&parts.len()) {
            return Err(shape());
        }
        let limiter = Obj::<Limiter>::try_convert(parts.entry(0)?).map_err(|_| {
            type_error(
                ruby,
                "the first element of each item must be a Ratekeeper::Limiter",
            )
        })?;
        let key = convert::key_bytes(ruby, parts.entry(1)?)?;
        let cost = if parts.len() == 3 {
            convert::cost(ruby, parts.entry(2)?)?
        } else {
            1
        };
        owned.push((limiter, key, cost));
    }
    let items: Vec<(&core::Limiter, &[u8], u64)> = owned
        .iter()
        .map(|(l, k, c)| (&l.inner, k.as_slice(), *c))
        .collect();
    run_batch(ruby, &items, now)
}
