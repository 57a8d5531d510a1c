//! The `Limiter` class and `check_all`: convert arguments, call the core
//! (each blocking method and its awaited twin through one call in `calls`),
//! hand back its decisions.

mod calls;

use self::calls::{
    asked, Acquiring, Batch, Checking, Holding, Item, Penalizing, Reserving, Resetting, Screening,
};
use crate::convert;
use crate::errors::guard;
use crate::settings;
use crate::twins;
use crate::types::{Fail2Ban, Rule};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ratekeeper_core as core;
use std::sync::Arc;

/// Checks keys against a rule set on a store (see `ratekeeper.Limiter`).
#[pyclass(frozen, module = "ratekeeper")]
pub struct Limiter {
    inner: Arc<core::Limiter>,
    /// The store URL as `repr` shows it (no password).
    store: String,
}

impl Limiter {
    /// A core limiter for Python (`store`: its URL as `repr` shows it).
    pub fn wrap(inner: Arc<core::Limiter>, store: String) -> Limiter {
        Limiter { inner, store }
    }

    /// The core limiter, shared.
    pub fn shared(&self) -> Arc<core::Limiter> {
        self.inner.clone()
    }

    /// Its store URL as `repr` shows it.
    pub fn store_shown(&self) -> &str {
        &self.store
    }

    /// Checks of `keys`, each for `cost`, at `now`.
    fn batch_of(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Batch> {
        let cost = convert::cost(py, cost)?;
        let items = keys
            .try_iter()?
            .map(|key| {
                let key = convert::key_bytes(&key?)?.into_owned();
                Ok((self.inner.clone(), key, cost, None))
            })
            .collect::<PyResult<_>>()?;
        Ok(Batch {
            items,
            ip: None,
            now: convert::now(now)?,
        })
    }
}

twins! {
    impl Limiter {
        /// Checks `key` (str or bytes) for `cost` units at `now` (seconds; the
        /// store's clock when None), logging them when every rule admits them.
        /// `tier` names one of the limiter's tiers (a tier stored for the key
        /// wins); `ip` is the client address, matched against listed addresses.
        #[pyo3(signature = (key, cost = None, now = None, *, tier = None, ip = None))]
        fn check / acheck(self, py, key: &Bound<'_, PyAny>, cost: Option<&Bound<'_, PyAny>>,
                          now: Option<&Bound<'_, PyAny>>, tier: Option<String>, ip: Option<String>)
            on self.inner => Checking { asked: asked(py, &self.inner, key, cost, now, tier, ip)?, logs: true };

        /// Reserves `cost` units, an estimate of what some work will cost (the
        /// tokens a call may use): a check that, when admitted, holds them
        /// until the returned Reservation is settled to what the work cost
        /// (`r.settle(actual)`; never settled, it keeps the estimate). As a
        /// context manager (`with limiter.reserve(key, 2000) as r:`), a refused
        /// reservation raises RateLimitExceeded. `wait=True` waits for the
        /// reservation as `acquire` waits for a check (at most `timeout`
        /// seconds; None: as long as it takes).
        #[pyo3(signature = (key, cost = None, now = None, *, tier = None, ip = None, wait = false, timeout = None))]
        fn reserve / areserve(self, py, key: &Bound<'_, PyAny>, cost: Option<&Bound<'_, PyAny>>,
                              now: Option<&Bound<'_, PyAny>>, tier: Option<String>, ip: Option<String>,
                              wait: bool, timeout: Option<f64>)
            on self.inner => Reserving::new(py, asked(py, &self.inner, key, cost, now, tier, ip)?, wait, timeout)?;

        /// What a check of `cost` would decide now, without logging anything.
        #[pyo3(signature = (key, cost = None, now = None, *, tier = None, ip = None))]
        fn peek / apeek(self, py, key: &Bound<'_, PyAny>, cost: Option<&Bound<'_, PyAny>>,
                        now: Option<&Bound<'_, PyAny>>, tier: Option<String>, ip: Option<String>)
            on self.inner => Checking { asked: asked(py, &self.inner, key, cost, now, tier, ip)?, logs: false };

        /// Forgets everything logged for `key` by this limiter (its scope).
        #[pyo3(signature = (key))]
        fn reset / areset(self, py, key: &Bound<'_, PyAny>)
            on self.inner => Resetting { key: convert::key_bytes(key)?.into_owned() };

        /// Checks several keys against these rules in one Redis round trip (a
        /// pipeline); each key is checked atomically on its own.
        #[pyo3(signature = (keys, cost = None, now = None))]
        fn check_many / acheck_many(self, py, keys: &Bound<'_, PyAny>, cost: Option<&Bound<'_, PyAny>>,
                                    now: Option<&Bound<'_, PyAny>>)
            on () => self.batch_of(py, keys, cost, now)?;

        /// How the address lists judge the client address `ip` now: a blocked or
        /// safelisted Decision, or None when it is not listed. Asks no store but
        /// for the process's first read of the lists (made without the GIL, or
        /// awaited).
        #[pyo3(signature = (ip))]
        fn screen / ascreen(self, py, ip: String)
            on self.inner => Screening { ip };

        /// Counts one fail2ban strike against `key` (a bad request, a failed
        /// login), or against the client address `ip` (what a middleware saw):
        /// the strike that makes `maxretry` within `findtime` seconds blocks that
        /// exact key, or that address, for `bantime` seconds. The parameters come
        /// as `ban` (a `Fail2Ban`) or one by one (each not given takes its
        /// default). Returns True when this strike banned it. A store failure
        /// follows `on_error`.
        #[pyo3(signature = (key = None, *, ip = None, ban = None, maxretry = None, findtime = None,
                            bantime = None, name = None, now = None))]
        fn penalize / apenalize(self, py, key: Option<&Bound<'_, PyAny>>, ip: Option<String>,
                                ban: Option<PyRef<'_, Fail2Ban>>, maxretry: Option<i64>, findtime: Option<f64>,
                                bantime: Option<f64>, name: Option<&str>, now: Option<&Bound<'_, PyAny>>)
            on self.inner => Penalizing::new(py, key, ip, ban, maxretry, findtime, bantime, name, now)?;

        /// Waits until a check of `key` is admitted and returns its Decision:
        /// each denial's exact `retry_after` is slept (with a little jitter),
        /// without the GIL (awaited: on timers, the loop going on). Raises
        /// `RateLimitExceeded` (with `.decision`) when the next wait would end
        /// past `timeout` seconds, and at once when the cost can never pass.
        #[pyo3(signature = (key, cost = None, timeout = None, *, tier = None, ip = None))]
        fn acquire / aacquire(self, py, key: &Bound<'_, PyAny>, cost: Option<&Bound<'_, PyAny>>,
                              timeout: Option<f64>, tier: Option<String>, ip: Option<String>)
            on self.inner => Acquiring::new(py, asked(py, &self.inner, key, cost, None, tier, ip)?, timeout)?;
    }
}

#[pymethods]
impl Limiter {
    /// `Limiter(rules, store="memory://", **options)`: every option not
    /// given (or None) takes its default from the core (`ratekeeper.DEFAULTS`).
    #[new]
    #[pyo3(signature = (rules, store = None, *, prefix = None, on_error = None, timeout = None,
                        connect_timeout = None, pool_size = None, max_keys = None, denial_cache = None,
                        scope = None, tiers = None, controls_refresh = None, controls = None,
                        redis_module = None, lease = None, policy_refresh = None, policies = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        rules: &Bound<'_, PyAny>,
        store: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        on_error: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        pool_size: Option<&Bound<'_, PyAny>>,
        max_keys: Option<&Bound<'_, PyAny>>,
        denial_cache: Option<&Bound<'_, PyAny>>,
        scope: Option<&Bound<'_, PyAny>>,
        tiers: Option<&Bound<'_, PyAny>>,
        controls_refresh: Option<&Bound<'_, PyAny>>,
        controls: Option<&Bound<'_, PyAny>>,
        redis_module: Option<&Bound<'_, PyAny>>,
        lease: Option<&Bound<'_, PyAny>>,
        policy_refresh: Option<&Bound<'_, PyAny>>,
        policies: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Limiter> {
        let limits = convert::limits(py, rules)?;
        let mut given = core::Settings::default();
        settings::apply(
            py,
            &mut given,
            &[
                ("store", store),
                ("prefix", prefix),
                ("on_error", on_error),
                ("timeout", timeout),
                ("connect_timeout", connect_timeout),
                ("pool_size", pool_size),
                ("max_keys", max_keys),
                ("denial_cache", denial_cache),
                ("scope", scope),
                ("tiers", tiers),
                ("controls_refresh", controls_refresh),
                ("controls", controls),
                ("redis_module", redis_module),
                ("lease", lease),
                ("policy_refresh", policy_refresh),
                ("policies", policies),
            ],
        )?;
        let inner = guard(py, || core::Limiter::from_limits(limits, &given))?;
        Ok(Limiter {
            inner: Arc::new(inner),
            store: core::store::redact(&given.store),
        })
    }

    /// A decorator limiting a function (sync or async) by this limiter:
    /// `key` is a key or a callable of the function's arguments; `wait`
    /// True waits for a slot (`acquire`, at most `timeout` seconds), False
    /// raises `RateLimitExceeded` at once when denied. With `settle` (a
    /// callable of the function's result giving what the call cost), `cost`
    /// is an estimate reserved before the call and settled after it.
    #[pyo3(signature = (key, *, cost = None, wait = true, timeout = None, settle = None))]
    fn limited<'py>(
        slf: &Bound<'py, Self>,
        key: &Bound<'py, PyAny>,
        cost: Option<&Bound<'py, PyAny>>,
        wait: bool,
        timeout: Option<f64>,
        settle: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("ratekeeper.waiting")?
            .getattr("limited")?
            .call1((slf, key, cost, wait, timeout, settle))
    }

    /// Holds a slot of `key` under the limiter's in-flight rule ("10
    /// concurrent"): when a slot is free and every rate admits `cost`,
    /// logs it and takes a lease that lapses after `lease` seconds (the
    /// limiter's, 60 by default) unless released first. Returns a Lease;
    /// as a context manager (`with limiter.hold(key) as lease:`) it raises
    /// RateLimitExceeded when refused and releases the slot at the block's
    /// end. `wait=True` waits for a slot (at most `timeout` seconds; None:
    /// as long as it takes), trying again when one is released here, when
    /// the soonest lease lapses, and at least every 0.1 s.
    #[pyo3(signature = (key, cost = None, now = None, *, lease = None, wait = false, timeout = None))]
    #[allow(clippy::too_many_arguments)]
    fn hold(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        lease: Option<f64>,
        wait: bool,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let asked = asked(py, &self.inner, key, cost, now, None, None)?;
        let holding = Holding::new(py, asked, lease, wait, timeout)?;
        crate::twin::blocking(py, &self.inner, holding)
    }

    /// `hold`, awaited: `lease = await limiter.ahold(key)`, or `async with
    /// limiter.ahold(key) as lease:`, which releases it at the block's end.
    #[pyo3(signature = (key, cost = None, now = None, *, lease = None, wait = false, timeout = None))]
    #[allow(clippy::too_many_arguments)]
    fn ahold<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        lease: Option<f64>,
        wait: bool,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let asked = asked(py, &self.inner, key, cost, now, None, None)?;
        let holding = Holding::new(py, asked, lease, wait, timeout)?;
        let pending = crate::twin::awaited(py, "ahold", &self.inner, holding)?;
        py.import("ratekeeper.holding")?
            .getattr("AsyncHold")?
            .call1((pending,))
    }

    /// The live leases of `key`: (id, lapse time in seconds since the
    /// epoch) pairs, for an operator.
    #[pyo3(signature = (key))]
    fn leases(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Vec<(String, f64)>> {
        let key = convert::key_bytes(key)?.into_owned();
        let inner = self.inner.clone();
        let held = crate::call::run_core(py, inner.waits_on_io(), || inner.leases(&key))?;
        Ok(held
            .into_iter()
            .map(|(id, ms)| (id, ms as f64 / 1000.0))
            .collect())
    }

    /// Whether the address lists and switches are held in this process as
    /// of its last change (`screen` then answers without the store).
    #[getter]
    fn controls_ready(&self) -> bool {
        self.inner.controls_ready()
    }

    /// The old name of `controls_ready`, kept working with a `DeprecationWarning`.
    #[getter]
    fn policies_ready(&self, py: Python<'_>) -> PyResult<bool> {
        let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
        PyErr::warn(
            py,
            &category,
            c"policies_ready is now called controls_ready",
            1,
        )?;
        Ok(self.inner.controls_ready())
    }

    /// The admin interface to this limiter's store (its Redis or its
    /// memory), its changes recorded in the audit trail as `actor`'s.
    #[pyo3(signature = (*, actor = None))]
    fn admin(&self, actor: Option<&str>) -> crate::admin::Admin {
        let admin = core::Admin::new(self.inner.store());
        crate::admin::Admin::wrap(admin.with_actor(actor.unwrap_or_default()))
    }

    /// A limiter for other rules sharing this one's store (its Redis pool or
    /// its memory), on_error, denial cache and controls refresh; with its own
    /// `scope` (logs kept apart) and `tiers`.
    #[pyo3(signature = (rules, *, scope = None, tiers = None))]
    fn with_rules(
        &self,
        py: Python<'_>,
        rules: &Bound<'_, PyAny>,
        scope: Option<&Bound<'_, PyAny>>,
        tiers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Limiter> {
        let limits = convert::limits(py, rules)?;
        let mut given = core::Settings::default();
        settings::apply(py, &mut given, &[("scope", scope), ("tiers", tiers)])?;
        let inner = guard(py, || {
            self.inner
                .with_limits(limits)?
                .with_scope(&given.scope)?
                .with_tiers(given.tiers)
        })?;
        Ok(Limiter {
            inner: Arc::new(inner),
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

    /// The limit of the in-flight rule ("10 concurrent": 10), or None
    /// when the limiter has none.
    #[getter]
    fn in_flight(&self) -> Option<u64> {
        self.inner.rules().in_flight()
    }

    /// A metered limiter's rules by meter, in order (empty without meters).
    #[getter]
    fn meters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let meters = PyDict::new(py);
        for meter in self.inner.meters() {
            let rules: Vec<Rule> = meter
                .rules
                .rules()
                .iter()
                .map(|&inner| Rule { inner })
                .collect();
            meters.set_item(&meter.name, rules)?;
        }
        Ok(meters)
    }

    /// The rules, shortest window first (a metered limiter's first meter's).
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
    /// breaker, and which way its checks go: a dict with `attempts`,
    /// `failures`, `short_circuits`, `module_calls`, `script_calls` and `path`
    /// ("module", "script" or "memory").
    #[getter]
    fn store_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::plain::to_dict(py, &self.inner.store_stats().plain())
    }

    /// What this limiter decided so far: a dict of `allowed`, `denied`,
    /// `cached_denials`, `errors`, `fail_open`, `fail_closed`, `blocked` and
    /// `safelisted` counts, and `peak_used`: window seconds to the most units
    /// seen in use in it.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::plain::to_dict(py, &self.inner.stats().plain())
    }

    /// How many checks found the store failing and fell back to on_error.
    #[getter]
    fn error_count(&self) -> u64 {
        self.inner.error_count()
    }

    fn __repr__(&self) -> String {
        let meters = self.inner.meters();
        if meters.is_empty() {
            return format!("Limiter('{}', store='{}')", self.inner.rules(), self.store);
        }
        let named: Vec<String> = meters
            .iter()
            .map(|m| format!("'{}': '{}'", m.name, m.rules))
            .collect();
        format!("Limiter({{{}}}, store='{}')", named.join(", "), self.store)
    }
}

/// The checks of `check_all`'s arguments: `(limiter, key[, cost[, tier]])` items.
fn check_all_batch(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    now: Option<&Bound<'_, PyAny>>,
    ip: Option<String>,
) -> PyResult<Batch> {
    let shape = || {
        PyTypeError::new_err(
            "each item must be (limiter, key), (limiter, key, cost) or (limiter, key, cost, tier)",
        )
    };
    let mut owned: Vec<Item> = Vec::new();
    for item in items.try_iter()? {
        let parts: Vec<Bound<'_, PyAny>> = item?
            .try_iter()
            .map_err(|_| shape())?
            .collect::<PyResult<_>>()?;
        if !(2..=4).contains(&parts.len()) {
            return Err(shape());
        }
        let limiter = parts[0].cast::<Limiter>().map_err(|_| {
            PyTypeError::new_err("the first element of each item must be a ratekeeper.Limiter")
        })?;
        let key = convert::key_bytes(&parts[1])?.into_owned();
        let tier =
            match parts.get(3) {
                Some(tier) if !tier.is_none() => Some(tier.extract::<String>().map_err(|_| {
                    PyTypeError::new_err("the tier of an item must be a str or None")
                })?),
                _ => None,
            };
        let cost = convert::cost(py, parts.get(2))?;
        owned.push((limiter.get().inner.clone(), key, cost, tier));
    }
    Ok(Batch {
        items: owned,
        ip,
        now: convert::now(now)?,
    })
}

/// Checks `(limiter, key)`, `(limiter, key, cost)` or `(limiter, key,
/// cost, tier)` items at once: limiters sharing a store (see
/// `Limiter.with_rules`) are asked in one round trip. `ip`, the client
/// address, is matched against listed addresses for every item.
#[pyfunction]
#[pyo3(signature = (items, now = None, *, ip = None))]
pub fn check_all(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    now: Option<&Bound<'_, PyAny>>,
    ip: Option<String>,
) -> PyResult<Py<PyAny>> {
    crate::twin::blocking(py, &(), check_all_batch(py, items, now, ip)?)
}

/// `await ratekeeper.acheck_all(items, ...)`: `check_all`, awaited (one
/// pipeline for limiters sharing a Redis).
#[pyfunction]
#[pyo3(signature = (items, now = None, *, ip = None))]
pub fn acheck_all<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
    now: Option<&Bound<'_, PyAny>>,
    ip: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    crate::twin::awaited(py, "acheck_all", &(), check_all_batch(py, items, now, ip)?)
}
