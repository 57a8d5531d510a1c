//! The `Admin` class: safelist and blocklist entries, a key's tier or
//! override, and the global switches, changed and read through the core's
//! `Admin`. Entries and inspections come back as plain dicts.

use crate::call::run_core;
use crate::convert;
use crate::errors::guard;
use crate::plain::to_dict;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ratekeeper_core as core;

/// Changes and reads the policies in a store (see `ratekeeper.Admin`).
#[pyclass(frozen, module = "ratekeeper")]
pub struct Admin {
    inner: core::Admin,
}

impl Admin {
    /// Wraps a core admin (for `Limiter.admin()`).
    pub fn wrap(inner: core::Admin) -> Admin {
        Admin { inner }
    }

    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        py: Python<'_>,
        list: core::List,
        target: &Bound<'_, PyAny>,
        options: core::TargetOptions,
        scope: &str,
        ttl: Option<f64>,
        reason: &str,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyDict>> {
        let target = convert::key_bytes(target)?.into_owned();
        let now = convert::now(now)?;
        let admin = &self.inner;
        let entry = run_core(py, true, || {
            admin.add_with(list, &target, options, scope, ttl, reason, now)
        })?;
        entry_dict(py, &entry)
    }

    /// `add`, awaited: the store's calls awaited on the runtime, never
    /// blocking the event loop.
    #[allow(clippy::too_many_arguments)]
    fn add_async<'py>(
        &self,
        py: Python<'py>,
        list: core::List,
        target: &Bound<'_, PyAny>,
        options: core::TargetOptions,
        scope: &str,
        ttl: Option<f64>,
        reason: &str,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let target = convert::key_bytes(target)?.into_owned();
        let (now, reason, admin) = (convert::now(now)?, reason.to_owned(), self.inner.clone());
        let scope = scope.to_owned();
        let add = async move {
            admin
                .add_with_async(list, &target, options, &scope, ttl, &reason, now)
                .await
        };
        crate::aio::spawn(py, add, |py, entry| Ok(entry_dict(py, &entry)?.into_any()))
    }

    /// `remove`, awaited.
    fn remove_async<'py>(
        &self,
        py: Python<'py>,
        list: core::List,
        target: &Bound<'_, PyAny>,
        key: bool,
        scope: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let target = convert::key_bytes(target)?.into_owned();
        let (admin, scope) = (self.inner.clone(), scope.to_owned());
        let options = core::TargetOptions { key, force: true };
        let remove = async move {
            admin
                .remove_with_async(list, &target, options, &scope)
                .await
        };
        crate::aio::spawn(py, remove, |py, was: bool| {
            Ok(pyo3::types::PyBool::new(py, was)
                .to_owned()
                .into_any()
                .unbind())
        })
    }

    fn remove(
        &self,
        py: Python<'_>,
        list: core::List,
        target: &Bound<'_, PyAny>,
        key: bool,
        scope: &str,
    ) -> PyResult<bool> {
        let target = convert::key_bytes(target)?.into_owned();
        let admin = &self.inner;
        let options = core::TargetOptions { key, force: true };
        run_core(py, true, || {
            admin.remove_with(list, &target, options, scope)
        })
    }
}

fn entry_dict(py: Python<'_>, entry: &core::Entry) -> PyResult<Py<PyDict>> {
    Ok(to_dict(py, &entry.plain())?.unbind())
}

fn switches_dict(py: Python<'_>, switches: core::Switches) -> PyResult<Py<PyDict>> {
    Ok(to_dict(py, &switches.plain())?.unbind())
}

#[pymethods]
impl Admin {
    #[new]
    #[pyo3(signature = (store = "memory://", *, prefix = "rk", redis_module = None))]
    fn new(
        py: Python<'_>,
        store: &str,
        prefix: &str,
        redis_module: Option<&str>,
    ) -> PyResult<Admin> {
        Ok(Admin {
            inner: guard(py, || core::Admin::open(store, prefix, redis_module))?,
        })
    }

    /// Blocks `target` (a key, an IP address or a CIDR range) for `ttl`
    /// seconds (default one week), with a reason. Returns the entry as a dict.
    /// `key=True` lists `target` as an exact key even when it reads as an
    /// address; `force=True` allows a range wider than a /8 (IPv6: /32);
    /// `scope` blocks a key for the limiters of that scope only.
    #[pyo3(signature = (target, ttl = None, reason = "", *, now = None, key = false, force = false, scope = None))]
    #[allow(clippy::too_many_arguments)]
    fn block(
        &self,
        py: Python<'_>,
        target: &Bound<'_, PyAny>,
        ttl: Option<f64>,
        reason: &str,
        now: Option<&Bound<'_, PyAny>>,
        key: bool,
        force: bool,
        scope: Option<&str>,
    ) -> PyResult<Py<PyDict>> {
        let options = core::TargetOptions { key, force };
        let scope = scope.unwrap_or_default();
        self.add(
            py,
            core::List::Block,
            target,
            options,
            scope,
            ttl,
            reason,
            now,
        )
    }

    /// Safelists `target` (checks skip limiting) for `ttl` seconds (default one week).
    /// `key=True` lists `target` as an exact key even when it reads as an
    /// address; `force=True` allows a range wider than a /8 (IPv6: /32).
    #[pyo3(signature = (target, ttl = None, reason = "", *, now = None, key = false, force = false))]
    #[allow(clippy::too_many_arguments)]
    fn safelist(
        &self,
        py: Python<'_>,
        target: &Bound<'_, PyAny>,
        ttl: Option<f64>,
        reason: &str,
        now: Option<&Bound<'_, PyAny>>,
        key: bool,
        force: bool,
    ) -> PyResult<Py<PyDict>> {
        let options = core::TargetOptions { key, force };
        self.add(py, core::List::Safe, target, options, "", ttl, reason, now)
    }

    /// Removes `target` from the blocklist (`key=True`: as an exact key;
    /// `scope`: a key's ban in that scope); True when it was on it.
    #[pyo3(signature = (target, *, key = false, scope = None))]
    fn unblock(
        &self,
        py: Python<'_>,
        target: &Bound<'_, PyAny>,
        key: bool,
        scope: Option<&str>,
    ) -> PyResult<bool> {
        self.remove(
            py,
            core::List::Block,
            target,
            key,
            scope.unwrap_or_default(),
        )
    }

    /// Removes `target` from the safelist (`key=True`: as an exact key); True when it was on it.
    #[pyo3(signature = (target, *, key = false))]
    fn unsafelist(&self, py: Python<'_>, target: &Bound<'_, PyAny>, key: bool) -> PyResult<bool> {
        self.remove(py, core::List::Safe, target, key, "")
    }

    /// Every standing listing, tier and override: dicts with `kind`
    /// (safelist, blocklist, tier, override), `target`, `network`,
    /// `expires_at` (epoch seconds; None for a tier or override), `detail`
    /// (the reason, the tier, or the rules) and `scope` (the scope a key's
    /// ban holds in; None: everywhere).
    #[pyo3(signature = (*, now = None))]
    fn entries(&self, py: Python<'_>, now: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Py<PyDict>>> {
        let now = convert::now(now)?;
        let admin = &self.inner;
        let entries = run_core(py, true, || admin.entries(now))?;
        entries.iter().map(|e| entry_dict(py, e)).collect()
    }

    /// `await admin.ablock(...)`: `block`, off the event loop (for an async admin page).
    #[pyo3(signature = (target, ttl = None, reason = "", *, now = None, key = false, force = false, scope = None))]
    #[allow(clippy::too_many_arguments)]
    fn ablock<'py>(
        &self,
        py: Python<'py>,
        target: &Bound<'_, PyAny>,
        ttl: Option<f64>,
        reason: &str,
        now: Option<&Bound<'_, PyAny>>,
        key: bool,
        force: bool,
        scope: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = core::TargetOptions { key, force };
        let scope = scope.unwrap_or_default();
        self.add_async(
            py,
            core::List::Block,
            target,
            options,
            scope,
            ttl,
            reason,
            now,
        )
    }

    /// `await admin.asafelist(...)`: `safelist`, off the event loop.
    #[pyo3(signature = (target, ttl = None, reason = "", *, now = None, key = false, force = false))]
    #[allow(clippy::too_many_arguments)]
    fn asafelist<'py>(
        &self,
        py: Python<'py>,
        target: &Bound<'_, PyAny>,
        ttl: Option<f64>,
        reason: &str,
        now: Option<&Bound<'_, PyAny>>,
        key: bool,
        force: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = core::TargetOptions { key, force };
        self.add_async(py, core::List::Safe, target, options, "", ttl, reason, now)
    }

    /// `await admin.aunblock(target)`: `unblock`, off the event loop.
    #[pyo3(signature = (target, *, key = false, scope = None))]
    fn aunblock<'py>(
        &self,
        py: Python<'py>,
        target: &Bound<'_, PyAny>,
        key: bool,
        scope: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.remove_async(
            py,
            core::List::Block,
            target,
            key,
            scope.unwrap_or_default(),
        )
    }

    /// `await admin.aunsafelist(target)`: `unsafelist`, off the event loop.
    #[pyo3(signature = (target, *, key = false))]
    fn aunsafelist<'py>(
        &self,
        py: Python<'py>,
        target: &Bound<'_, PyAny>,
        key: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.remove_async(py, core::List::Safe, target, key, "")
    }

    /// `await admin.aentries()`: `entries`, awaited.
    #[pyo3(signature = (*, now = None))]
    fn aentries<'py>(
        &self,
        py: Python<'py>,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (now, admin) = (convert::now(now)?, self.inner.clone());
        crate::aio::spawn(
            py,
            async move { admin.entries_async(now).await },
            |py, entries: Vec<core::Entry>| {
                let dicts = entries
                    .iter()
                    .map(|e| entry_dict(py, e))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(dicts.into_pyobject(py)?.into_any().unbind())
            },
        )
    }

    /// `await admin.ainspect(key)`: `inspect`, awaited.
    #[pyo3(signature = (key, *, now = None, scope = None))]
    fn ainspect<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
        now: Option<&Bound<'_, PyAny>>,
        scope: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let key = convert::key_bytes(key)?.into_owned();
        let (now, admin) = (convert::now(now)?, self.inner.clone());
        let scope = scope.unwrap_or_default();
        crate::aio::spawn(
            py,
            async move { admin.inspect_in_async(&key, &scope, now).await },
            |py, seen| Ok(to_dict(py, &seen.plain())?.into_any().unbind()),
        )
    }

    /// What is stored for `key`: a dict with `safelist` and `blocklist`
    /// (each None or {expires_at, reason}), `tier`, `override` (rules text),
    /// `address` (for a key that is an IP: how the address lists judge it),
    /// `scope` and `scope_blocklist` (the key's ban in `scope`, when given) and `now`.
    #[pyo3(signature = (key, *, now = None, scope = None))]
    fn inspect<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'_, PyAny>,
        now: Option<&Bound<'_, PyAny>>,
        scope: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let key = convert::key_bytes(key)?.into_owned();
        let now = convert::now(now)?;
        let admin = &self.inner;
        let scope = scope.unwrap_or_default();
        let seen = run_core(py, true, || admin.inspect_in(&key, scope, now))?;
        to_dict(py, &seen.plain())
    }

    /// Stores `tier` for `key` (None removes it): limiters that have the tier
    /// use its rules for the key from the next check, in every process.
    #[pyo3(signature = (key, tier))]
    fn set_tier(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        tier: Option<String>,
    ) -> PyResult<()> {
        let key = convert::key_bytes(key)?.into_owned();
        let admin = &self.inner;
        run_core(py, true, || admin.set_tier(&key, tier.as_deref()))
    }

    /// Stores `rules` as `key`'s own (None restores the configured rules),
    /// from the next check, in every process.
    #[pyo3(signature = (key, rules))]
    fn set_override(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        rules: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let key = convert::key_bytes(key)?.into_owned();
        let rules = rules.map(|r| convert::rule_set(py, r)).transpose()?;
        let admin = &self.inner;
        run_core(py, true, || admin.set_override(&key, rules.as_ref()))
    }

    /// The global switches: a dict with `enabled`, `shadow` and `multiplier`.
    fn switches(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let admin = &self.inner;
        let switches = run_core(py, true, || admin.switches())?;
        switches_dict(py, switches)
    }

    /// Changes the switches given (processes see them within their
    /// policy_refresh; this one at once); returns them all.
    #[pyo3(signature = (*, enabled = None, shadow = None, multiplier = None))]
    fn set_switches(
        &self,
        py: Python<'_>,
        enabled: Option<bool>,
        shadow: Option<bool>,
        multiplier: Option<f64>,
    ) -> PyResult<Py<PyDict>> {
        let admin = &self.inner;
        let switches = run_core(py, true, || admin.set_switches(enabled, shadow, multiplier))?;
        switches_dict(py, switches)
    }
}
