//! `Ratekeeper::Limiter`'s native half: converts arguments, releases the GVL
//! around store I/O, calls the core. lib/ratekeeper/limiter.rb adds the
//! keyword-argument methods users call.

use crate::convert;
use crate::errors::{config_error, guard, settle};
use crate::gvl::without_gvl;
use crate::types::{Decision, Rule};
use magnus::{Error, RArray, Ruby, Value};
use ratekeeper_core as core;
use std::time::Duration;

#[magnus::wrap(class = "Ratekeeper::Limiter", free_immediately, size)]
pub struct Limiter {
    inner: core::Limiter,
    store: String,
}

fn duration(ruby: &Ruby, name: &str, seconds: f64) -> Result<Duration, Error> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 60.0) {
        return Err(config_error(
            ruby,
            format!("invalid {name} {seconds}: give seconds, more than 0 and at most 60"),
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl Limiter {
    /// `Limiter._new(rules, store, prefix, on_error, timeout, connect_timeout, pool_size, max_keys)`.
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
    ) -> Result<Limiter, Error> {
        let rules = convert::rule_set(ruby, rules)?;
        let on_error: core::OnError = guard(ruby, || on_error.parse())?;
        if !(1..=1024).contains(&pool_size) {
            return Err(config_error(
                ruby,
                format!("invalid pool_size {pool_size}: give 1 to 1024"),
            ));
        }
        if max_keys < 1 {
            return Err(config_error(
                ruby,
                format!("invalid max_keys {max_keys}: give at least 1"),
            ));
        }
        let options = core::StoreOptions {
            prefix,
            timeout: duration(ruby, "timeout", timeout)?,
            connect_timeout: duration(ruby, "connect_timeout", connect_timeout)?,
            pool_size: pool_size as u32,
            max_keys: max_keys as usize,
        };
        let inner = guard(ruby, || {
            core::Limiter::open(rules, &store, &options, on_error)
        })?;
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
        let run = || {
            if check {
                limiter.check(&key, cost, now)
            } else {
                limiter.peek(&key, cost, now)
            }
        };
        let outcome = if limiter.waits_on_io() {
            without_gvl(run)
        } else {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        };
        Ok(Decision {
            inner: settle(ruby, outcome)?,
        })
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

    /// `_reset(key)`.
    pub fn reset(ruby: &Ruby, rb_self: &Self, key: Value) -> Result<(), Error> {
        let key = convert::key_bytes(ruby, key)?;
        let limiter = &rb_self.inner;
        settle(ruby, without_gvl(|| limiter.reset(&key)))
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
    pub fn store_stats(ruby: &Ruby, rb_self: &Self) -> Result<magnus::RHash, Error> {
        let stats = rb_self.inner.store_stats();
        let out = ruby.hash_new();
        out.aset(ruby.to_symbol("attempts"), stats.attempts)?;
        out.aset(ruby.to_symbol("failures"), stats.failures)?;
        out.aset(ruby.to_symbol("short_circuits"), stats.short_circuits)?;
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
