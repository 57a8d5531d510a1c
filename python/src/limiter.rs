//! The `Limiter` class: converts arguments, releases the GIL around store I/O,
//! calls the core.

use crate::convert;
use crate::errors::{config_error, guard};
use crate::types::{Decision, Rule};
use pyo3::prelude::*;
use ratekeeper_core as core;
use std::time::Duration;

/// Checks keys against a rule set on a store (see `ratekeeper.Limiter`).
#[pyclass(frozen, module = "ratekeeper")]
pub struct Limiter {
    inner: core::Limiter,
    store: String,
}

fn duration(py: Python<'_>, name: &str, seconds: f64) -> PyResult<Duration> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 60.0) {
        return Err(config_error(
            py,
            format!("invalid {name} {seconds}: give seconds, more than 0 and at most 60"),
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl Limiter {
    fn decide(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        check: bool,
    ) -> PyResult<Decision> {
        let key = convert::key_bytes(key)?;
        let cost = convert::cost(py, cost)?;
        let now = convert::now(now)?;
        let limiter = &self.inner;
        let run = || {
            if check {
                limiter.check(&key, cost, now)
            } else {
                limiter.peek(&key, cost, now)
            }
        };
        let decision = if limiter.waits_on_io() {
            py.detach(|| guard_free(run))
        } else {
            guard_free(run)
        };
        Ok(Decision {
            inner: guard(py, || decision)?,
        })
    }
}

/// Catches a panic without the GIL; `guard` turns the result into Python errors.
pub fn guard_free<T>(f: impl FnOnce() -> core::Result<T>) -> core::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(core::Error::storage(format!(
            "internal error: {}",
            crate::errors::panic_message(&panic)
        )))
    })
}

#[pymethods]
impl Limiter {
    #[new]
    #[pyo3(signature = (rules, store = "memory://", *, prefix = "rk", on_error = "allow", timeout = 0.05, connect_timeout = 0.05, pool_size = 16, max_keys = 1_000_000))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        rules: &Bound<'_, PyAny>,
        store: &str,
        prefix: &str,
        on_error: &str,
        timeout: f64,
        connect_timeout: f64,
        pool_size: i64,
        max_keys: i64,
    ) -> PyResult<Limiter> {
        let rules = convert::rule_set(py, rules)?;
        let on_error: core::OnError = guard(py, || on_error.parse())?;
        if !(1..=1024).contains(&pool_size) {
            return Err(config_error(
                py,
                format!("invalid pool_size {pool_size}: give 1 to 1024"),
            ));
        }
        if max_keys < 1 {
            return Err(config_error(
                py,
                format!("invalid max_keys {max_keys}: give at least 1"),
            ));
        }
        let options = core::StoreOptions {
            prefix: prefix.to_owned(),
            timeout: duration(py, "timeout", timeout)?,
            connect_timeout: duration(py, "connect_timeout", connect_timeout)?,
            pool_size: pool_size as u32,
            max_keys: max_keys as usize,
        };
        let inner = guard(py, || core::Limiter::open(rules, store, &options, on_error))?;
        Ok(Limiter {
            inner,
            store: store.to_owned(),
        })
    }

    /// Checks `key` (str or bytes) for `cost` units at `now` (seconds; the
    /// store's clock when None), logging them when every rule admits them.
    #[pyo3(signature = (key, cost = None, now = None))]
    fn check(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Decision> {
        self.decide(py, key, cost, now, true)
    }

    /// What a check of `cost` would decide now, without logging anything.
    #[pyo3(signature = (key, cost = None, now = None))]
    fn peek(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Decision> {
        self.decide(py, key, cost, now, false)
    }

    /// Forgets everything logged for `key`.
    fn reset(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = convert::key_bytes(key)?;
        let limiter = &self.inner;
        let result = py.detach(|| guard_free(|| limiter.reset(&key)));
        guard(py, || result)
    }

    /// A limiter for other rules sharing this one's store (its Redis pool or
    /// its memory) and on_error.
    fn with_rules(&self, py: Python<'_>, rules: &Bound<'_, PyAny>) -> PyResult<Limiter> {
        let rules = convert::rule_set(py, rules)?;
        Ok(Limiter {
            inner: self.inner.with_rules(rules),
            store: self.store.clone(),
        })
    }

    /// The rules, shortest window first.
    #[getter]
    fn rules(&self) -> Vec<Rule> {
        self.inner
            .rules()
            .rules()
            .iter()
            .map(|&inner| Rule { inner })
            .collect()
    }

    /// How often the store was called, failed, and was spared by its circuit
    /// breaker: a dict with `attempts`, `failures` and `short_circuits`.
    #[getter]
    fn store_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let stats = self.inner.store_stats();
        let dict = pyo3::types::PyDict::new(py);
        dict.set_item("attempts", stats.attempts)?;
        dict.set_item("failures", stats.failures)?;
        dict.set_item("short_circuits", stats.short_circuits)?;
        Ok(dict)
    }

    /// How many checks found the store failing and fell back to on_error.
    #[getter]
    fn error_count(&self) -> u64 {
        self.inner.error_count()
    }

    fn __repr__(&self) -> String {
        format!("Limiter('{}', store='{}')", self.inner.rules(), self.store)
    }
}
