//! The `Limiter` class and `check_all`: convert arguments, call the core
//! (see `call`), hand back its decisions.

use crate::call::{deliver, run_core};
use crate::convert;
use crate::errors::guard;
use crate::settings;
use crate::types::{Decision, Fail2Ban, Rule};
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

impl Asked {
    fn convert(
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        tier: Option<String>,
        ip: Option<String>,
    ) -> PyResult<Asked> {
        Ok(Asked {
            key: convert::key_bytes(key)?.into_owned(),
            cost: convert::cost(py, cost)?,
            now: convert::now(now)?,
            tier,
            ip,
        })
    }
}

/// The admitting decision of a wait, or `RateLimitExceeded` with the last denial.
fn admitted(py: Python<'_>, acquired: core::Acquired) -> PyResult<Decision> {
    let refusal = acquired.refusal();
    let decision = deliver(py, acquired.decision())?;
    match refusal {
        None => Ok(decision),
        Some(why) => Err(crate::errors::rate_limit_exceeded(
            py,
            why,
            Py::new(py, decision)?.into_any(),
        )),
    }
}

/// The decisions of a batch, delivered as a list.
fn deliver_all(py: Python<'_>, decisions: Vec<core::Decision>) -> PyResult<Py<PyAny>> {
    let out: Vec<Decision> = decisions
        .into_iter()
        .map(|inner| deliver(py, inner))
        .collect::<PyResult<_>>()?;
    Ok(out.into_pyobject(py)?.into_any().unbind())
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

    /// An awaitable check or peek: on the runtime for a remote store, at once for memory.
    fn decide_async<'py>(
        &self,
        py: Python<'py>,
        asked: Asked,
        check: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let limiter = self.inner.clone();
        if !limiter.waits_on_io() {
            let inner = run_core(py, false, || {
                if check {
                    limiter.check_with(&asked.key, &asked.options())
                } else {
                    limiter.peek_with(&asked.key, &asked.options())
                }
            });
            let value = inner.and_then(|inner| Ok(Py::new(py, deliver(py, inner)?)?.into_any()));
            return crate::aio::ready(py, value);
        }
        let work = async move {
            if check {
                limiter.check_async(&asked.key, &asked.options()).await
            } else {
                limiter.peek_async(&asked.key, &asked.options()).await
            }
        };
        crate::aio::spawn(py, work, |py, inner| {
            Ok(Py::new(py, deliver(py, inner)?)?.into_any())
        })
    }

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
        let asked = Asked::convert(py, key, cost, now, tier, ip)?;
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
    /// `Limiter(rules, store="memory://", **options)`: every option not
    /// given (or None) takes its default from the core (`ratekeeper.DEFAULTS`).
    #[new]
    #[pyo3(signature = (rules, store = None, *, prefix = None, on_error = None, timeout = None,
                        connect_timeout = None, pool_size = None, max_keys = None, denial_cache = None,
                        scope = None, tiers = None, policy_refresh = None, policies = None,
                        redis_module = None))]
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
        policy_refresh: Option<&Bound<'_, PyAny>>,
        policies: Option<&Bound<'_, PyAny>>,
        redis_module: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Limiter> {
        let rules = convert::rule_set(py, rules)?;
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
                ("policy_refresh", policy_refresh),
                ("policies", policies),
                ("redis_module", redis_module),
            ],
        )?;
        let inner = guard(py, || core::Limiter::from_settings(rules, &given))?;
        Ok(Limiter {
            inner: Arc::new(inner),
            store: core::store::redact(&given.store),
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

    /// `await limiter.acheck(...)`: `check`, awaited on the running event
    /// loop without blocking it (Redis: one multiplexed connection per
    /// process; the memory store answers at once). Cancelled, the check
    /// still logs once or not at all.
    #[pyo3(signature = (key, cost = None, now = None, *, tier = None, ip = None))]
    #[allow(clippy::too_many_arguments)]
    fn acheck<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        tier: Option<String>,
        ip: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let asked = Asked::convert(py, key, cost, now, tier, ip)?;
        self.decide_async(py, asked, true)
    }

    /// `await limiter.apeek(...)`: `peek`, awaited.
    #[pyo3(signature = (key, cost = None, now = None, *, tier = None, ip = None))]
    #[allow(clippy::too_many_arguments)]
    fn apeek<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        tier: Option<String>,
        ip: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let asked = Asked::convert(py, key, cost, now, tier, ip)?;
        self.decide_async(py, asked, false)
    }

    /// `await limiter.areset(key)`: `reset`, awaited.
    fn areset<'py>(&self, py: Python<'py>, key: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let key = convert::key_bytes(key)?.into_owned();
        let limiter = self.inner.clone();
        crate::aio::spawn(
            py,
            async move { limiter.reset_async(&key).await },
            |py, ()| Ok(py.None()),
        )
    }

    /// `await limiter.acheck_many(keys, ...)`: `check_many`, awaited (one pipeline).
    #[pyo3(signature = (keys, cost = None, now = None))]
    fn acheck_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cost = convert::cost(py, cost)?;
        let now = convert::now(now)?;
        let keys: Vec<Vec<u8>> = keys
            .try_iter()?
            .map(|key| Ok(convert::key_bytes(&key?)?.into_owned()))
            .collect::<PyResult<_>>()?;
        let limiter = self.inner.clone();
        let work = async move {
            let items: Vec<core::BatchItem<'_>> = keys
                .iter()
                .map(|k| core::BatchItem::new(&limiter, k, cost))
                .collect();
            core::check_batch_async(&items, now).await
        };
        crate::aio::spawn(py, work, deliver_all)
    }

    /// `await limiter.ascreen(ip)`: `screen`, answered at once when the
    /// address lists are held (`policies_ready`), else after awaiting their
    /// read.
    fn ascreen<'py>(&self, py: Python<'py>, ip: String) -> PyResult<Bound<'py, PyAny>> {
        let limiter = self.inner.clone();
        let listed = |py: Python<'_>, listed: Option<core::Decision>| match listed {
            Some(inner) => Ok(Py::new(py, deliver(py, inner)?)?.into_any()),
            None => Ok(py.None()),
        };
        if limiter.policies_ready() {
            let value = run_core(py, false, || Ok(limiter.screen(&ip))).and_then(|l| listed(py, l));
            return crate::aio::ready(py, value);
        }
        crate::aio::spawn(
            py,
            async move { Ok(limiter.screen_async(&ip).await) },
            listed,
        )
    }

    /// `await limiter.apenalize(...)`: `penalize`, its store calls awaited.
    #[pyo3(signature = (key = None, *, ip = None, ban = None, maxretry = None, findtime = None,
                        bantime = None, name = None, now = None))]
    #[allow(clippy::too_many_arguments)]
    fn apenalize<'py>(
        &self,
        py: Python<'py>,
        key: Option<&Bound<'_, PyAny>>,
        ip: Option<String>,
        ban: Option<PyRef<'_, Fail2Ban>>,
        maxretry: Option<i64>,
        findtime: Option<f64>,
        bantime: Option<f64>,
        name: Option<&str>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (key, rule, now) =
            strike_arguments(py, key, &ip, ban, maxretry, findtime, bantime, name, now)?;
        let limiter = self.inner.clone();
        let strike = async move {
            let offender = match (&key, &ip) {
                (Some(key), _) => core::Offender::Key(key),
                (None, Some(ip)) => core::Offender::Address(ip),
                (None, None) => unreachable!("checked by strike_arguments"),
            };
            limiter.penalize_async(offender, &rule, now).await
        };
        crate::aio::spawn(py, strike, |py, strike: core::Strike| {
            Ok(pyo3::types::PyBool::new(py, strike.banned)
                .to_owned()
                .into_any()
                .unbind())
        })
    }

    /// Waits until a check of `key` is admitted and returns its Decision:
    /// each denial's exact `retry_after` is slept (with a little jitter),
    /// without the GIL. Raises `RateLimitExceeded` (with `.decision`) when
    /// the next wait would end past `timeout` seconds, and at once when the
    /// cost can never pass.
    #[pyo3(signature = (key, cost = None, timeout = None, *, tier = None, ip = None))]
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
        tier: Option<String>,
        ip: Option<String>,
    ) -> PyResult<Decision> {
        let asked = Asked::convert(py, key, cost, None, tier, ip)?;
        let timeout = guard(py, || core::limiter::wait::check_timeout(timeout))?;
        let limiter = &self.inner;
        // sleeps in slices, hearing Ctrl-C (and other signals) between them
        let interrupted: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
        let mut pause = |wait: std::time::Duration| -> core::Result<()> {
            let until = std::time::Instant::now() + wait;
            loop {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Ok(());
                }
                std::thread::sleep(left.min(std::time::Duration::from_millis(100)));
                if let Err(err) = Python::attach(|py| py.check_signals()) {
                    *interrupted.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
                    return Err(core::Error::storage("the wait was interrupted"));
                }
            }
        };
        let acquired = run_core(py, true, || {
            limiter.acquire_pausing(&asked.key, &asked.options(), timeout, &mut pause)
        });
        if let Some(err) = interrupted.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(err);
        }
        admitted(py, acquired?)
    }

    /// `await limiter.aacquire(...)`: `acquire`, its waits timers on the
    /// runtime (the event loop goes on meanwhile).
    #[pyo3(signature = (key, cost = None, timeout = None, *, tier = None, ip = None))]
    #[allow(clippy::too_many_arguments)]
    fn aacquire<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
        cost: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
        tier: Option<String>,
        ip: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let asked = Asked::convert(py, key, cost, None, tier, ip)?;
        let timeout = guard(py, || core::limiter::wait::check_timeout(timeout))?;
        let limiter = self.inner.clone();
        let work = async move {
            limiter
                .acquire_async(&asked.key, &asked.options(), timeout)
                .await
        };
        crate::aio::spawn(py, work, |py, acquired| {
            Ok(Py::new(py, admitted(py, acquired)?)?.into_any())
        })
    }

    /// A decorator limiting a function (sync or async) by this limiter:
    /// `key` is a key or a callable of the function's arguments; `wait`
    /// True waits for a slot (`acquire`, at most `timeout` seconds), False
    /// raises `RateLimitExceeded` at once when denied.
    #[pyo3(signature = (key, *, cost = 1, wait = true, timeout = None))]
    fn limited<'py>(
        slf: &Bound<'py, Self>,
        key: &Bound<'py, PyAny>,
        cost: i64,
        wait: bool,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("ratekeeper.waiting")?
            .getattr("limited")?
            .call1((slf, key, cost, wait, timeout))
    }

    /// Whether the address lists and switches are held in this process as
    /// of its last change (`screen` then answers without the store).
    #[getter]
    fn policies_ready(&self) -> bool {
        self.inner.policies_ready()
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
    /// exact key, or that address, for `bantime` seconds. The parameters come
    /// as `ban` (a `Fail2Ban`) or one by one (each not given takes its
    /// default). Returns True when this strike banned it. A store failure
    /// follows `on_error`.
    #[pyo3(signature = (key = None, *, ip = None, ban = None, maxretry = None, findtime = None,
                        bantime = None, name = None, now = None))]
    #[allow(clippy::too_many_arguments)]
    fn penalize(
        &self,
        py: Python<'_>,
        key: Option<&Bound<'_, PyAny>>,
        ip: Option<String>,
        ban: Option<PyRef<'_, Fail2Ban>>,
        maxretry: Option<i64>,
        findtime: Option<f64>,
        bantime: Option<f64>,
        name: Option<&str>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let key = key.map(convert::key_bytes).transpose()?;
        let now = convert::now(now)?;
        let rule = match ban {
            Some(ban)
                if maxretry.is_none()
                    && findtime.is_none()
                    && bantime.is_none()
                    && name.is_none() =>
            {
                ban.inner.clone()
            }
            Some(_) => {
                return Err(PyTypeError::new_err(
                    "penalize takes ban= or maxretry/findtime/bantime/name, not both",
                ))
            }
            None => guard(py, || {
                core::Fail2Ban::given(name, maxretry, findtime, bantime)
            })?,
        };
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
    #[pyo3(signature = (rules, *, scope = None, tiers = None))]
    fn with_rules(
        &self,
        py: Python<'_>,
        rules: &Bound<'_, PyAny>,
        scope: Option<&Bound<'_, PyAny>>,
        tiers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Limiter> {
        let rules = convert::rule_set(py, rules)?;
        let mut given = core::Settings::default();
        settings::apply(py, &mut given, &[("scope", scope), ("tiers", tiers)])?;
        let inner = guard(py, || {
            self.inner
                .with_rules(rules)
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
        format!("Limiter('{}', store='{}')", self.inner.rules(), self.store)
    }
}

/// The arguments of a strike, checked: the key (or none, for `ip`), the
/// ban's parameters (`ban`, or those given, each else its default), `now`.
#[allow(clippy::too_many_arguments)]
fn strike_arguments(
    py: Python<'_>,
    key: Option<&Bound<'_, PyAny>>,
    ip: &Option<String>,
    ban: Option<PyRef<'_, Fail2Ban>>,
    maxretry: Option<i64>,
    findtime: Option<f64>,
    bantime: Option<f64>,
    name: Option<&str>,
    now: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Option<Vec<u8>>, core::Fail2Ban, Option<f64>)> {
    let key = key
        .map(|k| convert::key_bytes(k).map(|k| k.into_owned()))
        .transpose()?;
    let now = convert::now(now)?;
    let parts_given =
        maxretry.is_some() || findtime.is_some() || bantime.is_some() || name.is_some();
    let rule = match ban {
        Some(ban) if !parts_given => ban.inner.clone(),
        Some(_) => {
            return Err(PyTypeError::new_err(
                "penalize takes ban= or maxretry/findtime/bantime/name, not both",
            ))
        }
        None => guard(py, || {
            core::Fail2Ban::given(name, maxretry, findtime, bantime)
        })?,
    };
    if key.is_some() == ip.is_some() {
        return Err(PyTypeError::new_err(
            "penalize takes a key or ip=, one of them",
        ));
    }
    Ok((key, rule, now))
}

/// A `check_all` item a task owns: limiter, key, cost, tier.
type OwnedItem = (Arc<core::Limiter>, Vec<u8>, u64, Option<String>);

/// One converted `check_all` item: limiter, key, cost, tier.
type Item<'py> = (Bound<'py, Limiter>, Vec<u8>, u64, Option<String>);

/// Converts `check_all` items: `(limiter, key[, cost[, tier]])`.
fn batch_items<'py>(py: Python<'py>, items: &Bound<'py, PyAny>) -> PyResult<Vec<Item<'py>>> {
    let shape = || {
        PyTypeError::new_err(
            "each item must be (limiter, key), (limiter, key, cost) or (limiter, key, cost, tier)",
        )
    };
    let mut owned: Vec<Item<'py>> = Vec::new();
    for item in items.try_iter()? {
        let parts: Vec<Bound<'py, PyAny>> = item?
            .try_iter()
            .map_err(|_| shape())?
            .collect::<PyResult<_>>()?;
        if !(2..=4).contains(&parts.len()) {
            return Err(shape());
        }
        let limiter = parts[0]
            .cast::<Limiter>()
            .map_err(|_| {
                PyTypeError::new_err("the first element of each item must be a ratekeeper.Limiter")
            })?
            .clone();
        let key = convert::key_bytes(&parts[1])?.into_owned();
        let tier =
            match parts.get(3) {
                Some(tier) if !tier.is_none() => Some(tier.extract::<String>().map_err(|_| {
                    PyTypeError::new_err("the tier of an item must be a str or None")
                })?),
                _ => None,
            };
        owned.push((limiter, key, convert::cost(py, parts.get(2))?, tier));
    }
    Ok(owned)
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
) -> PyResult<Vec<Decision>> {
    let now = convert::now(now)?;
    let owned = batch_items(py, items)?;
    let items: Vec<core::BatchItem<'_>> = owned
        .iter()
        .map(|(l, k, c, tier)| core::BatchItem {
            ip: ip.as_deref(),
            tier: tier.as_deref(),
            ..core::BatchItem::new(&l.get().inner, k, *c)
        })
        .collect();
    run_batch(py, &items, now)
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
    let now = convert::now(now)?;
    let owned: Vec<OwnedItem> = batch_items(py, items)?
        .into_iter()
        .map(|(l, k, c, t)| (l.get().inner.clone(), k, c, t))
        .collect();
    let work = async move {
        let items: Vec<core::BatchItem<'_>> = owned
            .iter()
            .map(|(l, k, c, tier)| core::BatchItem {
                ip: ip.as_deref(),
                tier: tier.as_deref(),
                ..core::BatchItem::new(l, k, *c)
            })
            .collect();
        core::check_batch_async(&items, now).await
    };
    crate::aio::spawn(py, work, deliver_all)
}
