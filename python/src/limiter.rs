//! The `Limiter` class and `check_all`: convert arguments, release the GIL
//! around store I/O, call the core, log its once-per-outage warning.

use crate::convert;
use crate::errors::{guard, panic_message};
use crate::types::{Decision, Rule};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ratekeeper_core as core;

/// Checks keys against a rule set on a store (see `ratekeeper.Limiter`).
#[pyclass(frozen, module = "ratekeeper")]
pub struct Limiter {
    inner: core::Limiter,
    /// The store URL as `repr` shows it (no password).
    store: String,
}

/// Catches a panic (without the GIL); `guard` turns the result into Python errors.
pub fn guard_free<T>(f: impl FnOnce() -> core::Result<T>) -> core::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        Err(core::Error::storage(format!(
            "internal error: {}",
            panic_message(&panic)
        )))
    })
}

/// Runs core code that may wait on the store: without the GIL when it does.
pub fn run_core<T: Send>(
    py: Python<'_>,
    waits: bool,
    f: impl FnOnce() -> core::Result<T> + Send,
) -> PyResult<T> {
    let outcome = if waits {
        py.detach(|| guard_free(f))
    } else {
        guard_free(f)
    };
    guard(py, || outcome)
}

/// A core decision for Python, logging its once-per-outage warning on the `ratekeeper` logger.
fn deliver(py: Python<'_>, inner: core::Decision) -> PyResult<Decision> {
    if let Some(warning) = &inner.warning {
        py.import("logging")?
            .call_method1("getLogger", ("ratekeeper",))?
            .call_method1("warning", (warning.as_str(),))?;
    }
    Ok(Decision { inner })
}

/// Runs a batch of checks and delivers their decisions.
fn run_batch(
    py: Python<'_>,
    items: &[core::BatchItem<'_>],
    now: Option<f64>,
) -> PyResult<Vec<Decision>> {
    let waits = items.iter().any(|item| item.limiter.waits_on_io());
    let decisions = run_core(py, waits, || core::check_batch(items, now))?;
    decisions
        .into_iter()
        .map(|inner| deliver(py, inner))
        .collect()
}

/// Tiers from a dict of name to rules.
fn tiers(
    py: Python<'_>,
    tiers: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<(String, core::RuleSet)>> {
    let Some(tiers) = tiers else {
        return Ok(Vec::new());
    };
    let dict = tiers.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(
            "tiers must be a dict of tier name to rules, such as {'free': '100/hour'}",
        )
    })?;
    dict.iter()
        .map(|(name, rules)| {
            let name: String = name
                .extract()
                .map_err(|_| PyTypeError::new_err("tier names must be str"))?;
            Ok((name, convert::rule_set(py, &rules)?))
        })
        .collect()
}

/// The arguments of one check, converted.
struct Asked {
    key: Vec<u8>,
    cost: u64,
    now: Option<f64>,
    tier: Option<String>,
    ip: Option<String>,
}

impl Asked {
    fn options(&self) -> core::CheckOptions<'_> {
        core::CheckOptions {
            cost: self.cost,
            now: self.now,
            tier: self.tier.as_deref(),
            ip: self.ip.as_deref(),
        }
    }
}

impl Limiter {
    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        tier: Option<String>,
        ip: Option<String>,
        check: bool,
    ) -> PyResult<Decision> {
        let asked = Asked {
            key: convert::key_bytes(key)?.into_owned(),
            cost: convert::cost(py, cost)?,
            now: convert::now(now)?,
            tier,
            ip,
        };
        let limiter = &self.inner;
        let inner = run_core(py, limiter.waits_on_io(), || {
            if check {
                limiter.check_with(&asked.key, &asked.options())
            } else {
                limiter.peek_with(&asked.key, &asked.options())
            }
        })?;
        deliver(py, inner)
    }
}

#[pymethods]
impl Limiter {
    #[new]
    #[pyo3(signature = (rules, store = "memory://", *, prefix = "rk", on_error = "allow", timeout = 0.25,
                        connect_timeout = 0.25, pool_size = 16, max_keys = 1_000_000, denial_cache = 1.0,
                        scope = "", tiers = None, policy_refresh = 2.0, policies = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        rules: &Bound<'_, PyAny>,
        store: &str,
        prefix: &str,
        on_error: &str,
        timeout: f64,
        connect_timeout: f64,
        pool_size: i128,
        max_keys: i128,
        denial_cache: f64,
        scope: &str,
        tiers: Option<&Bound<'_, PyAny>>,
        policy_refresh: f64,
        policies: bool,
    ) -> PyResult<Limiter> {
        let rules = convert::rule_set(py, rules)?;
        let settings = core::Settings {
            store,
            prefix,
            on_error,
            timeout,
            connect_timeout,
            pool_size,
            max_keys,
            denial_cache,
            scope,
            tiers: self::tiers(py, tiers)?,
            policy_refresh,
            policies,
        };
        let inner = guard(py, || core::Limiter::from_settings(rules, &settings))?;
        Ok(Limiter {
            inner,
            store: core::store::redact(store),
        })
    }

    /// Checks `key` (str or bytes) for `cost` units at `now` (seconds; the
    /// store's clock when None), logging them when every rule admits them.
    /// `tier` names one of the limiter's tiers (a tier stored for the key
    /// wins); `ip` is the client address, matched against listed addresses.
    #[pyo3(signature = (key, cost = None, now = None, *, tier = None, ip = None))]
    #[allow(clippy::too_many_arguments)]
    fn check(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        tier: Option<String>,
        ip: Option<String>,
    ) -> PyResult<Decision> {
        self.decide(py, key, cost, now, tier, ip, true)
    }

    /// What a check of `cost` would decide now, without logging anything.
    #[pyo3(signature = (key, cost = None, now = None, *, tier = None, ip = None))]
    #[allow(clippy::too_many_arguments)]
    fn peek(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        tier: Option<String>,
        ip: Option<String>,
    ) -> PyResult<Decision> {
        self.decide(py, key, cost, now, tier, ip, false)
    }

    /// Counts one fail2ban strike against `key` (a bad request, a failed
    /// login), or against the client address `ip` (what a middleware saw):
    /// the strike that makes `maxretry` within `findtime` seconds blocks that
    /// exact key, or that address, for `bantime` seconds. Returns True when
    /// this strike banned it. A store failure follows `on_error`.
    #[pyo3(signature = (key = None, *, ip = None, maxretry = 5, findtime = 600.0, bantime = 3600.0, name = "default", now = None))]
    #[allow(clippy::too_many_arguments)]
    fn penalize(
        &self,
        py: Python<'_>,
        key: Option<&Bound<'_, PyAny>>,
        ip: Option<String>,
        maxretry: i64,
        findtime: f64,
        bantime: f64,
        name: &str,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let key = key.map(convert::key_bytes).transpose()?;
        let now = convert::now(now)?;
        let rule = guard(py, || {
            core::Fail2Ban::new(name, maxretry, findtime, bantime)
        })?;
        let offender = match (&key, &ip) {
            (Some(key), None) => core::Offender::Key(key),
            (None, Some(ip)) => core::Offender::Address(ip),
            _ => {
                return Err(PyTypeError::new_err(
                    "penalize takes a key or ip=, one of them",
                ))
            }
        };
        let limiter = &self.inner;
        let strike = run_core(py, limiter.waits_on_io(), || {
            limiter.penalize(offender, &rule, now)
        })?;
        Ok(strike.banned)
    }

    /// How the address lists judge the client address `ip` now: a blocked or
    /// safelisted Decision, or None when it is not listed. Asks no store.
    /// (Without the GIL: the first read of the lists in a process may wait on the store.)
    fn screen(&self, py: Python<'_>, ip: &str) -> PyResult<Option<Decision>> {
        let limiter = &self.inner;
        let listed = run_core(py, limiter.waits_on_io(), || Ok(limiter.screen(ip)))?;
        listed.map(|inner| deliver(py, inner)).transpose()
    }

    /// The admin interface to this limiter's store (its Redis or its memory).
    fn admin(&self) -> crate::admin::Admin {
        crate::admin::Admin::wrap(core::Admin::new(self.inner.store()))
    }

    /// Checks several keys against these rules in one Redis round trip (a
    /// pipeline); each key is checked atomically on its own.
    #[pyo3(signature = (keys, cost = None, now = None))]
    fn check_many(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Decision>> {
        let cost = convert::cost(py, cost)?;
        let now = convert::now(now)?;
        let keys: Vec<Vec<u8>> = keys
            .try_iter()?
            .map(|key| Ok(convert::key_bytes(&key?)?.into_owned()))
            .collect::<PyResult<_>>()?;
        let items: Vec<core::BatchItem<'_>> = keys
            .iter()
            .map(|k| core::BatchItem::new(&self.inner, k, cost))
            .collect();
        run_batch(py, &items, now)
    }

    /// Forgets everything logged for `key` (and a denial remembered for it here).
    fn reset(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = convert::key_bytes(key)?;
        let limiter = &self.inner;
        run_core(py, limiter.waits_on_io(), || limiter.reset(&key))
    }

    /// A limiter for other rules sharing this one's store (its Redis pool or
    /// its memory), on_error, denial cache and policy refresh; with its own
    /// `scope` (logs kept apart) and `tiers`.
    #[pyo3(signature = (rules, *, scope = "", tiers = None))]
    fn with_rules(
        &self,
        py: Python<'_>,
        rules: &Bound<'_, PyAny>,
        scope: &str,
        tiers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Limiter> {
        let rules = convert::rule_set(py, rules)?;
        let tiers = self::tiers(py, tiers)?;
        let inner = guard(py, || {
            self.inner
                .with_rules(rules)
                .with_scope(scope)?
                .with_tiers(tiers)
        })?;
        Ok(Limiter {
            inner,
            store: self.store.clone(),
        })
    }

    /// The scope ("" for none).
    #[getter]
    fn scope(&self) -> &str {
        self.inner.scope()
    }

    /// The tiers' names.
    #[getter]
    fn tiers(&self) -> Vec<String> {
        self.inner.tiers().iter().map(|(n, _)| n.clone()).collect()
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
    fn store_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (name, value) in self.inner.store_stats().counts() {
            dict.set_item(name, value)?;
        }
        Ok(dict)
    }

    /// What this limiter decided so far: a dict of `allowed`, `denied`,
    /// `cached_denials`, `errors`, `fail_open`, `fail_closed` counts, and
    /// `peak_used`: window seconds to the most units seen in use in it.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.inner.stats();
        let dict = PyDict::new(py);
        for (name, value) in stats.counts() {
            dict.set_item(name, value)?;
        }
        let peaks = PyDict::new(py);
        for (window_ms, used) in stats.peak_used {
            peaks.set_item(window_ms as f64 / 1000.0, used)?;
        }
        dict.set_item("peak_used", peaks)?;
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

/// Checks `(limiter, key)` or `(limiter, key, cost)` items at once: limiters
/// sharing a store (see `Limiter.with_rules`) are asked in one round trip.
/// `ip`, the client address, is matched against listed addresses for every item.
#[pyfunction]
#[pyo3(signature = (items, now = None, *, ip = None))]
pub fn check_all(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    now: Option<&Bound<'_, PyAny>>,
    ip: Option<String>,
) -> PyResult<Vec<Decision>> {
    let shape = || PyTypeError::new_err("each item must be (limiter, key) or (limiter, key, cost)");
    let now = convert::now(now)?;
    let mut owned: Vec<(Bound<'_, Limiter>, Vec<u8>, u64)> = Vec::new();
    for item in items.try_iter()? {
        let parts: Vec<Bound<'_, PyAny>> = item?
            .try_iter()
            .map_err(|_| shape())?
            .collect::<PyResult<_>>()?;
        if !(2..=3).contains(&parts.len()) {
            return Err(shape());
        }
        let limiter = parts[0]
            .cast::<Limiter>()
            .map_err(|_| {
                PyTypeError::new_err("the first element of each item must be a ratekeeper.Limiter")
            })?
            .clone();
        let key = convert::key_bytes(&parts[1])?.into_owned();
        owned.push((limiter, key, convert::cost(py, parts.get(2))?));
    }
    let items: Vec<core::BatchItem<'_>> = owned
        .iter()
        .map(|(l, k, c)| core::BatchItem {
            ip: ip.as_deref(),
            ..core::BatchItem::new(&l.get().inner, k, *c)
        })
        .collect();
    run_batch(py, &items, now)
}
