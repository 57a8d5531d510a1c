//! The value classes Ruby sees: `Ratekeeper::Rule`, `RuleState` and `Decision`.

use magnus::{Error, RArray, RHash, Ruby};
use ratekeeper_core as core;

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// One rule: `limit` units per `window` seconds.
#[magnus::wrap(class = "Ratekeeper::Rule", free_immediately, size)]
pub struct Rule {
    pub inner: core::Rule,
}

impl Rule {
    pub fn limit(&self) -> u64 {
        self.inner.limit
    }

    pub fn window(&self) -> f64 {
        seconds(self.inner.window_ms)
    }

    pub fn to_s(&self) -> String {
        self.inner.to_string()
    }

    pub fn inspect(&self) -> String {
        format!("#<Ratekeeper::Rule {}>", self.inner)
    }

    pub fn eq(&self, other: &Rule) -> bool {
        self.inner == other.inner
    }
}

/// The state of one rule after a check.
#[magnus::wrap(class = "Ratekeeper::RuleState", free_immediately, size)]
pub struct RuleState {
    inner: core::RuleState,
}

impl RuleState {
    pub fn limit(&self) -> u64 {
        self.inner.limit
    }

    pub fn window(&self) -> f64 {
        seconds(self.inner.window_ms)
    }

    pub fn remaining(&self) -> u64 {
        self.inner.remaining
    }

    pub fn used(&self) -> u64 {
        self.inner.used()
    }

    pub fn reset_after(&self) -> f64 {
        seconds(self.inner.reset_after_ms)
    }

    pub fn inspect(&self) -> String {
        format!(
            "#<Ratekeeper::RuleState rule={}/{} remaining={} reset_after={:?}>",
            self.inner.limit,
            self.inner.window_name(),
            self.inner.remaining,
            seconds(self.inner.reset_after_ms)
        )
    }
}

/// The answer to a check or a peek.
#[magnus::wrap(class = "Ratekeeper::Decision", free_immediately, size)]
pub struct Decision {
    pub inner: core::Decision,
}

impl Decision {
    pub fn allowed(&self) -> bool {
        self.inner.allowed
    }

    pub fn retry_after(&self) -> Option<f64> {
        self.inner.retry_after_ms.map(seconds)
    }

    pub fn limit(&self) -> u64 {
        self.inner.binding_state().limit
    }

    pub fn remaining(&self) -> u64 {
        self.inner.binding_state().remaining
    }

    pub fn reset_after(&self) -> f64 {
        seconds(self.inner.binding_state().reset_after_ms)
    }

    pub fn window(&self) -> f64 {
        seconds(self.inner.binding_state().window_ms)
    }

    pub fn now(&self) -> f64 {
        seconds(self.inner.now_ms)
    }

    pub fn degraded(&self) -> bool {
        self.inner.degraded
    }

    pub fn cached(&self) -> bool {
        self.inner.cached
    }

    pub fn blocked(&self) -> bool {
        self.inner.blocked
    }

    pub fn safelisted(&self) -> bool {
        self.inner.safelisted
    }

    pub fn reason(&self) -> Option<String> {
        self.inner.reason.clone()
    }

    pub fn shadowed(&self) -> bool {
        self.inner.shadowed
    }

    pub fn tier(&self) -> Option<String> {
        self.inner.tier.clone()
    }

    pub fn overridden(&self) -> bool {
        self.inner.overridden
    }

    pub fn rules(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let out = ruby.ary_new_capa(rb_self.inner.rules.len());
        for &inner in &rb_self.inner.rules {
            out.push(RuleState { inner })?;
        }
        Ok(out)
    }

    pub fn headers(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let out = ruby.hash_new();
        for (name, value) in rb_self.inner.headers() {
            out.aset(name, value)?;
        }
        Ok(out)
    }

    pub fn inspect(&self) -> String {
        let bind = self.inner.binding_state();
        let retry = match self.inner.retry_after_ms {
            Some(ms) => format!("{:?}", seconds(ms)),
            None => "nil".to_owned(),
        };
        format!(
            "#<Ratekeeper::Decision allowed={} retry_after={retry} limit={} remaining={} reset_after={:?} rule={}/{}{}>",
            self.inner.allowed,
            bind.limit,
            bind.remaining,
            seconds(bind.reset_after_ms),
            bind.limit,
            bind.window_name(),
            if self.inner.degraded { " degraded" } else { "" }
        )
    }
}
