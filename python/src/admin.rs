//! The `Admin` class: safelist and blocklist entries, a key's tier or
//! override, and the global switches, changed and read through the core's
//! `Admin`. Entries and inspections come back as plain dicts.

use crate::call::run_core;
use crate::convert;
use crate::errors::guard;
use crate::plain::to_dict;
use crate::twin::Twin;
use crate::twins;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};
use ratekeeper_core as core;

/// Changes and reads the controls in a store (see `ratekeeper.Admin`).
#[pyclass(frozen, module = "ratekeeper")]
pub struct Admin {
    inner: core::Admin,
}

impl Admin {
    /// Wraps a core admin (for `Limiter.admin()`).
    pub fn wrap(inner: core::Admin) -> Admin {
        Admin { inner }
    }

    /// The call that puts `target` on `list` (in `scope`, for a key's ban).
    #[allow(clippy::too_many_arguments)]
    fn adding(
        &self,
        list: core::List,
        target: &Bound<'_, PyAny>,
        options: core::TargetOptions,
        scope: Option<&str>,
        ttl: Option<f64>,
        reason: &str,
        now: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Adding> {
        Ok(Adding {
            list,
            target: convert::key_bytes(target)?.into_owned(),
            options,
            scope: scope.unwrap_or_default().to_owned(),
            ttl,
            reason: reason.to_owned(),
            now: convert::now(now)?,
        })
    }

    /// The call that takes `target` off `list` (in `scope`, for a key's ban).
    fn removing(
        &self,
        list: core::List,
        target: &Bound<'_, PyAny>,
        key: bool,
        tag: bool,
        scope: Option<&str>,
        reason: &str,
    ) -> PyResult<Removing> {
        Ok(Removing {
            list,
            target: convert::key_bytes(target)?.into_owned(),
            options: core::TargetOptions {
                key,
                force: true,
                tag,
            },
            scope: scope.unwrap_or_default().to_owned(),
            reason: reason.to_owned(),
        })
    }
}

/// A listing made (`block`, `safelist`).
struct Adding {
    list: core::List,
    target: Vec<u8>,
    options: core::TargetOptions,
    scope: String,
    ttl: Option<f64>,
    reason: String,
    now: Option<f64>,
}

impl Twin for Adding {
    type On = core::Admin;
    type Out = core::Entry;
    fn waits(&self, admin: &core::Admin) -> bool {
        admin.store().waits_on_io()
    }
    fn blocking(&self, admin: &core::Admin) -> core::Result<core::Entry> {
        let s = self;
        admin.add_with(
            s.list, &s.target, s.options, &s.scope, s.ttl, &s.reason, s.now,
        )
    }
    async fn awaited(&self, admin: &core::Admin) -> core::Result<core::Entry> {
        let s = self;
        admin
            .add_with_async(
                s.list, &s.target, s.options, &s.scope, s.ttl, &s.reason, s.now,
            )
            .await
    }
    fn deliver(&self, py: Python<'_>, _: &core::Admin, entry: core::Entry) -> PyResult<Py<PyAny>> {
        Ok(entry_dict(py, &entry)?.into_any())
    }
}

/// A listing lifted (`unblock`, `unsafelist`): whether there was one.
struct Removing {
    list: core::List,
    target: Vec<u8>,
    options: core::TargetOptions,
    scope: String,
    reason: String,
}

impl Twin for Removing {
    type On = core::Admin;
    type Out = bool;
    fn waits(&self, admin: &core::Admin) -> bool {
        admin.store().waits_on_io()
    }
    fn blocking(&self, admin: &core::Admin) -> core::Result<bool> {
        let s = self;
        admin.remove_with(s.list, &s.target, s.options, &s.scope, &s.reason)
    }
    async fn awaited(&self, admin: &core::Admin) -> core::Result<bool> {
        let s = self;
        admin
            .remove_with_async(s.list, &s.target, s.options, &s.scope, &s.reason)
            .await
    }
    fn deliver(&self, py: Python<'_>, _: &core::Admin, was: bool) -> PyResult<Py<PyAny>> {
        Ok(PyBool::new(py, was).to_owned().into_any().unbind())
    }
}

/// An operator's release of a key's lease (`release_lease`): whether it was held.
struct Releasing {
    key: Vec<u8>,
    id: String,
    scope: String,
    reason: String,
}

impl Twin for Releasing {
    type On = core::Admin;
    type Out = bool;
    fn waits(&self, admin: &core::Admin) -> bool {
        admin.store().waits_on_io()
    }
    fn blocking(&self, admin: &core::Admin) -> core::Result<bool> {
        admin.release_lease(&self.key, &self.scope, &self.id, &self.reason)
    }
    async fn awaited(&self, admin: &core::Admin) -> core::Result<bool> {
        let s = self;
        admin
            .release_lease_async(&s.key, &s.scope, &s.id, &s.reason)
            .await
    }
    fn deliver(&self, py: Python<'_>, _: &core::Admin, was: bool) -> PyResult<Py<PyAny>> {
        Ok(PyBool::new(py, was).to_owned().into_any().unbind())
    }
}

/// Every standing entry (`entries`).
struct Listing {
    now: Option<f64>,
}

impl Twin for Listing {
    type On = core::Admin;
    type Out = Vec<core::Entry>;
    fn waits(&self, admin: &core::Admin) -> bool {
        admin.store().waits_on_io()
    }
    fn blocking(&self, admin: &core::Admin) -> core::Result<Vec<core::Entry>> {
        admin.entries(self.now)
    }
    async fn awaited(&self, admin: &core::Admin) -> core::Result<Vec<core::Entry>> {
        admin.entries_async(self.now).await
    }
    fn deliver(
        &self,
        py: Python<'_>,
        _: &core::Admin,
        entries: Vec<core::Entry>,
    ) -> PyResult<Py<PyAny>> {
        let dicts = entries
            .iter()
            .map(|e| entry_dict(py, e))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(dicts.into_pyobject(py)?.into_any().unbind())
    }
}

/// What is stored for a key (`inspect`).
struct Inspecting {
    key: Vec<u8>,
    tag: bool,
    scope: String,
    now: Option<f64>,
}

impl Twin for Inspecting {
    type On = core::Admin;
    type Out = core::admin::Inspection;
    fn waits(&self, admin: &core::Admin) -> bool {
        admin.store().waits_on_io()
    }
    fn blocking(&self, admin: &core::Admin) -> core::Result<core::admin::Inspection> {
        admin.inspect_with(&self.key, self.tag, &self.scope, self.now)
    }
    async fn awaited(&self, admin: &core::Admin) -> core::Result<core::admin::Inspection> {
        admin
            .inspect_with_async(&self.key, self.tag, &self.scope, self.now)
            .await
    }
    fn deliver(
        &self,
        py: Python<'_>,
        _: &core::Admin,
        seen: core::admin::Inspection,
    ) -> PyResult<Py<PyAny>> {
        Ok(to_dict(py, &seen.plain())?.into_any().unbind())
    }
}

/// The newest changes operators made (`history`).
struct History {
    limit: usize,
}

impl Twin for History {
    type On = core::Admin;
    type Out = Vec<core::audit::Change>;
    fn waits(&self, admin: &core::Admin) -> bool {
        admin.store().waits_on_io()
    }
    fn blocking(&self, admin: &core::Admin) -> core::Result<Vec<core::audit::Change>> {
        admin.history(self.limit)
    }
    async fn awaited(&self, admin: &core::Admin) -> core::Result<Vec<core::audit::Change>> {
        admin.history_async(self.limit).await
    }
    fn deliver(
        &self,
        py: Python<'_>,
        _: &core::Admin,
        changes: Vec<core::audit::Change>,
    ) -> PyResult<Py<PyAny>> {
        let dicts = changes
            .iter()
            .map(|c| Ok(to_dict(py, &c.plain())?.unbind()))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(dicts.into_pyobject(py)?.into_any().unbind())
    }
}

/// Who was limited over a window (`top_denied`).
struct TopDenied {
    window_s: u64,
}

impl Twin for TopDenied {
    type On = core::Admin;
    type Out = core::denials::Top;
    fn waits(&self, admin: &core::Admin) -> bool {
        admin.store().waits_on_io()
    }
    fn blocking(&self, admin: &core::Admin) -> core::Result<core::denials::Top> {
        admin.top_denied(self.window_s)
    }
    async fn awaited(&self, admin: &core::Admin) -> core::Result<core::denials::Top> {
        admin.top_denied_async(self.window_s).await
    }
    fn deliver(
        &self,
        py: Python<'_>,
        _: &core::Admin,
        top: core::denials::Top,
    ) -> PyResult<Py<PyAny>> {
        Ok(to_dict(py, &top.plain())?.into_any().unbind())
    }
}

fn entry_dict(py: Python<'_>, entry: &core::Entry) -> PyResult<Py<PyDict>> {
    Ok(to_dict(py, &entry.plain())?.unbind())
}

fn switches_dict(py: Python<'_>, switches: core::Switches) -> PyResult<Py<PyDict>> {
    Ok(to_dict(py, &switches.plain())?.unbind())
}

twins! {
    impl Admin {
        /// Blocks `target` (a key, an IP address or a CIDR range) for `ttl`
        /// seconds (default one week), with a reason. Returns the entry as a dict.
        /// `key=True` lists `target` as an exact key even when it reads as an
        /// address; `force=True` allows a range wider than a /8 (IPv6: /32);
        /// `scope` blocks a key for the limiters of that scope only; `tag=True`
        /// reads `target` as a key's stored form (the `tag` of a row of
        /// `top_denied` or `entries`): the very key, hashed or not UTF-8.
        #[pyo3(signature = (target, ttl = None, reason = "", *, now = None, key = false, force = false, scope = None, tag = false))]
        fn block / ablock(self, py, target: &Bound<'_, PyAny>, ttl: Option<f64>, reason: &str,
                          now: Option<&Bound<'_, PyAny>>, key: bool, force: bool, scope: Option<&str>, tag: bool)
            on self.inner => self.adding(core::List::Block, target, core::TargetOptions { key, force, tag }, scope, ttl, reason, now)?;

        /// Safelists `target` (checks skip limiting) for `ttl` seconds (default one week).
        /// `key=True` lists `target` as an exact key even when it reads as an
        /// address; `force=True` allows a range wider than a /8 (IPv6: /32);
        /// `tag=True` reads `target` as a key's stored form.
        #[pyo3(signature = (target, ttl = None, reason = "", *, now = None, key = false, force = false, tag = false))]
        fn safelist / asafelist(self, py, target: &Bound<'_, PyAny>, ttl: Option<f64>, reason: &str,
                                now: Option<&Bound<'_, PyAny>>, key: bool, force: bool, tag: bool)
            on self.inner => self.adding(core::List::Safe, target, core::TargetOptions { key, force, tag }, None, ttl, reason, now)?;

        /// Removes `target` from the blocklist (`key=True`: as an exact key;
        /// `tag=True`: a key's stored form; `scope`: a key's ban in that
        /// scope), saying why; True when it was on it.
        #[pyo3(signature = (target, *, key = false, scope = None, reason = "", tag = false))]
        fn unblock / aunblock(self, py, target: &Bound<'_, PyAny>, key: bool, scope: Option<&str>, reason: &str, tag: bool)
            on self.inner => self.removing(core::List::Block, target, key, tag, scope, reason)?;

        /// Removes `target` from the safelist (`key=True`: as an exact key;
        /// `tag=True`: a key's stored form), saying why; True when it was on it.
        #[pyo3(signature = (target, *, key = false, reason = "", tag = false))]
        fn unsafelist / aunsafelist(self, py, target: &Bound<'_, PyAny>, key: bool, reason: &str, tag: bool)
            on self.inner => self.removing(core::List::Safe, target, key, tag, None, reason)?;

        /// The newest `limit` changes operators made (1 to 1,000), newest
        /// first: dicts with `at` (epoch seconds), `actor` (None when nobody
        /// was named), `action` (block, safelist, unblock, unsafelist, tier,
        /// override or switches), `target`, `scope`, `detail` and `reason`.
        #[pyo3(signature = (limit = 50))]
        fn history / ahistory(self, py, limit: usize)
            on self.inner => History { limit };

        /// Who was limited over the last `window` seconds (1 to 3600), by
        /// every process on this store: a dict with `keys` (`{scope, key,
        /// count}`), `addresses` (`{scope, address, count}`) and `networks`
        /// (`{scope, network, count}`: an IPv4 /24, an IPv6 /64), each most
        /// denied first, `per_minute` (`{at, count}`, oldest first) and
        /// `window`. A process's denials reach the store within its
        /// `policy_refresh`.
        #[pyo3(signature = (window = 300))]
        fn top_denied / atop_denied(self, py, window: u64)
            on self.inner => TopDenied { window_s: window };

        /// Every standing listing, tier and override: dicts with `kind`
        /// (safelist, blocklist, tier, override), `target`, `network`,
        /// `expires_at` (epoch seconds; None for a tier or override), `detail`
        /// (the reason, the tier, or the rules) and `scope` (the scope a key's
        /// ban holds in; None: everywhere).
        #[pyo3(signature = (*, now = None))]
        fn entries / aentries(self, py, now: Option<&Bound<'_, PyAny>>)
            on self.inner => Listing { now: convert::now(now)? };

        /// Releases `key`'s lease `lease_id` in `scope` (a limiter's scope;
        /// None: none), for a holder that hangs, saying why: True when it
        /// was held. The release is recorded in the audit trail (`release`).
        #[pyo3(signature = (key, lease_id, *, scope = None, reason = ""))]
        fn release_lease / arelease_lease(self, py, key: &Bound<'_, PyAny>, lease_id: &str, scope: Option<&str>, reason: &str)
            on self.inner => Releasing {
                key: convert::key_bytes(key)?.into_owned(),
                id: lease_id.to_owned(),
                scope: scope.unwrap_or_default().to_owned(),
                reason: reason.to_owned(),
            };

        /// What is stored for `key`: a dict with `safelist` and `blocklist`
        /// (each None or {expires_at, reason}), `tier`, `override` (rules text),
        /// `address` (for a key that is an IP: how the address lists judge it),
        /// `scope` and `scope_blocklist` (the key's ban in `scope`, when given),
        /// `leases` (its live leases in `scope`: {id, since, lapse_at}) and `now`.
        /// `tag=True` reads `key` as a key's stored form.
        #[pyo3(signature = (key, *, now = None, scope = None, tag = false))]
        fn inspect / ainspect(self, py, key: &Bound<'_, PyAny>, now: Option<&Bound<'_, PyAny>>, scope: Option<&str>, tag: bool)
            on self.inner => Inspecting {
                key: convert::key_bytes(key)?.into_owned(),
                tag,
                scope: scope.unwrap_or_default().to_owned(),
                now: convert::now(now)?,
            };
    }
}

#[pymethods]
impl Admin {
    /// `Admin(store, prefix=, redis_module=, actor=)`: the controls of the
    /// store a URL names, with the limiters' prefix; every change recorded
    /// in the audit trail as `actor`'s (who makes it).
    #[new]
    #[pyo3(signature = (store = "memory://", *, prefix = "rk", redis_module = None, actor = None))]
    fn new(
        py: Python<'_>,
        store: &str,
        prefix: &str,
        redis_module: Option<&str>,
        actor: Option<&str>,
    ) -> PyResult<Admin> {
        let inner = guard(py, || core::Admin::open(store, prefix, redis_module))?;
        Ok(Admin {
            inner: inner.with_actor(actor.unwrap_or_default()),
        })
    }

    /// Stores `tier` for `key` (None removes it), saying why: limiters that
    /// have the tier use its rules for the key from the next check, in every
    /// process.
    #[pyo3(signature = (key, tier, *, reason = ""))]
    fn set_tier(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        tier: Option<String>,
        reason: &str,
    ) -> PyResult<()> {
        let key = convert::key_bytes(key)?.into_owned();
        let admin = &self.inner;
        run_core(py, true, || admin.set_tier(&key, tier.as_deref(), reason))
    }

    /// Stores `rules` as `key`'s own (None restores the configured rules),
    /// saying why, from the next check, in every process.
    #[pyo3(signature = (key, rules, *, reason = ""))]
    fn set_override(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        rules: Option<&Bound<'_, PyAny>>,
        reason: &str,
    ) -> PyResult<()> {
        let key = convert::key_bytes(key)?.into_owned();
        let rules = rules.map(|r| convert::rule_set(py, r)).transpose()?;
        let admin = &self.inner;
        run_core(py, true, || {
            admin.set_override(&key, rules.as_ref(), reason)
        })
    }

    /// What `key` has used of each of `rules` in `scope` (none: no scope),
    /// as a limiter of those rules sees its log now, whatever its listings,
    /// tier or override: a Decision (logging nothing). `tag=True` reads
    /// `key` as a key's stored form.
    #[pyo3(signature = (key, rules, *, scope = None, tag = false))]
    fn usage(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        rules: &Bound<'_, PyAny>,
        scope: Option<&str>,
        tag: bool,
    ) -> PyResult<crate::types::Decision> {
        let key = convert::key_bytes(key)?.into_owned();
        let rules = convert::rule_set(py, rules)?;
        let admin = &self.inner;
        let scope = scope.unwrap_or_default();
        let decision = run_core(py, admin.store().waits_on_io(), || {
            admin.usage_with(&key, tag, scope, &rules)
        })?;
        crate::call::deliver(py, decision)
    }

    /// The global switches: a dict with `enabled`, `shadow` and `multiplier`.
    fn switches(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let admin = &self.inner;
        let switches = run_core(py, true, || admin.switches())?;
        switches_dict(py, switches)
    }

    /// Changes the switches given, saying why (processes see them within
    /// their policy_refresh; this one at once); returns them all.
    #[pyo3(signature = (*, enabled = None, shadow = None, multiplier = None, reason = ""))]
    fn set_switches(
        &self,
        py: Python<'_>,
        enabled: Option<bool>,
        shadow: Option<bool>,
        multiplier: Option<f64>,
        reason: &str,
    ) -> PyResult<Py<PyDict>> {
        let admin = &self.inner;
        let switches = run_core(py, true, || {
            admin.set_switches(enabled, shadow, multiplier, reason)
        })?;
        switches_dict(py, switches)
    }
}
