//! `Gate`: the core's one decision flow (see `ratekeeper_core::gate`) for
//! the WSGI and ASGI middlewares and any Python door. A door converts its
//! framework's request into the facts `decide` takes (`request`) and
//! renders the `verdict`; it decides nothing itself. A policy given as a
//! dict becomes the core's table in `table`.

mod request;
mod table;
mod verdict;

pub use self::verdict::Verdict;

use self::request::{Parts, Request};
use self::table::storeless_table;
use self::verdict::verdict;
use crate::call::run_core;
use crate::errors::guard;
use crate::limiter::Limiter;
use crate::twin::Twin;
use crate::twins;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ratekeeper_core as core;
use ratekeeper_core::gate::source::Head;
use ratekeeper_core::gate::{Spec, Step};
use std::sync::{Arc, Mutex};

/// The policy every door applies, bound to its store: built from a policy
/// file's path or a dict of the same shape (callables allowed where a key,
/// a tier or a ban's `match` is given), optionally on a `limiter`'s store.
#[pyclass(frozen, module = "ratekeeper")]
pub struct Gate {
    inner: Arc<core::gate::Gate>,
    callables: Vec<Py<PyAny>>,
    /// The store URL as `repr` shows it (no password).
    store: String,
}

/// A request decided: the gate's store calls, if its verdict needs them.
struct Deciding {
    /// What `prepare` came to (taken by the one call made).
    step: Mutex<Option<Step>>,
}

impl Deciding {
    fn step(&self) -> core::Result<Step> {
        let taken = self.step.lock().unwrap_or_else(|p| p.into_inner()).take();
        taken.ok_or_else(|| core::Error::storage("internal error: a request decided twice"))
    }
}

impl Twin for Deciding {
    type On = Arc<core::gate::Gate>;
    type Out = core::gate::Verdict;
    fn waits(&self, gate: &Self::On) -> bool {
        let step = self.step.lock().unwrap_or_else(|p| p.into_inner());
        matches!(*step, Some(Step::Ask(_))) && gate.warden().waits_on_io()
    }
    fn blocking(&self, gate: &Self::On) -> core::Result<core::gate::Verdict> {
        match self.step()? {
            Step::Done(verdict) => Ok(*verdict),
            Step::Ask(plan) => gate.run(plan),
        }
    }
    async fn awaited(&self, gate: &Self::On) -> core::Result<core::gate::Verdict> {
        match self.step()? {
            Step::Done(verdict) => Ok(*verdict),
            Step::Ask(plan) => gate.run_async(plan).await,
        }
    }
    fn deliver(
        &self,
        py: Python<'_>,
        gate: &Self::On,
        out: core::gate::Verdict,
    ) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, verdict(py, gate, out)?)?.into_any())
    }
}

impl Gate {
    /// The request's facts through the core's `prepare` (the policy's
    /// callables called here, with the GIL), and what is left to do.
    #[allow(clippy::too_many_arguments)]
    fn deciding(
        &self,
        py: Python<'_>,
        method: &str,
        path: &str,
        host: &str,
        peer: &str,
        headers: &Bound<'_, PyAny>,
        query: &str,
        context: Option<&Bound<'_, PyAny>>,
        body: Option<&Bound<'_, PyAny>>,
        user: Option<&Bound<'_, PyAny>>,
        cost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Deciding> {
        let head = Head::new(
            method,
            path.to_owned(),
            host,
            peer.to_owned(),
            query.to_owned(),
        );
        let parts = Parts {
            context,
            body,
            user,
            cost,
        };
        self.prepared(py, head, headers, parts)
    }

    /// The request of an ASGI `scope` through the core's `prepare`, as
    /// [`Gate::deciding`] takes it: its method, path, `host` header, client
    /// address, header pairs and query string, the scope its context.
    fn deciding_scope(
        &self,
        py: Python<'_>,
        scope: &Bound<'_, PyDict>,
        body: Option<&Bound<'_, PyAny>>,
        cost: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Deciding> {
        let asgi = request::Scope::read(scope)?;
        let parts = Parts {
            context: Some(scope.as_any()),
            body,
            user: None,
            cost,
        };
        self.prepared(py, asgi.head, &asgi.headers, parts)
    }

    /// The request of `head`, `headers` and `parts` through the core's
    /// `prepare`, and what is left to do.
    fn prepared(
        &self,
        py: Python<'_>,
        head: Head,
        headers: &Bound<'_, PyAny>,
        parts: Parts<'_, '_>,
    ) -> PyResult<Deciding> {
        let step = self.with_request(py, head, headers, parts, |request| {
            self.inner.prepare(request)
        })?;
        Ok(Deciding {
            step: Mutex::new(Some(step)),
        })
    }

    /// `read(request)` over the request of `head`, `headers` and `parts`;
    /// an exception a callable raised while it was read comes out instead.
    fn with_request<T>(
        &self,
        py: Python<'_>,
        head: Head,
        headers: &Bound<'_, PyAny>,
        parts: Parts<'_, '_>,
        read: impl FnOnce(&Request<'_, '_>) -> T,
    ) -> PyResult<T> {
        let none = py.None().into_bound(py);
        let request = Request {
            py,
            head,
            headers,
            context: parts.context.unwrap_or(&none),
            body: parts.body,
            user: parts.user,
            cost: crate::convert::cost(py, parts.cost)?,
            callables: &self.callables,
            failed: std::cell::RefCell::new(None),
        };
        let got = read(&request);
        match request.failed.into_inner() {
            Some(e) => Err(e),
            None => Ok(got),
        }
    }
}

twins! {
    impl Gate {
        /// Decides a request: `method`, `path` (decoded), `host`, `peer` (the
        /// address that connected), `headers` (a WSGI environ or Django META,
        /// or ASGI's `(name, value)` pairs), the query string; `context` is
        /// what the policy's callables are called with (the environ, the
        /// scope, the request); `body(field)` and `user()` are called only when
        /// a throttle that applies needs them, at once (awaited too: on the
        /// loop); `body` answers a field's value, a list of them (a repeated
        /// field: each is counted), None when absent, or False when the door
        /// cannot read the body (the client is counted); `cost` (default 1).
        #[pyo3(signature = (method, path, host, peer, headers, query = "", *, context = None,
                            body = None, user = None, cost = None))]
        fn decide / adecide(self, py, method: &str, path: &str, host: &str, peer: &str,
                            headers: &Bound<'_, PyAny>, query: &str, context: Option<&Bound<'_, PyAny>>,
                            body: Option<&Bound<'_, PyAny>>, user: Option<&Bound<'_, PyAny>>,
                            cost: Option<&Bound<'_, PyAny>>)
            on self.inner => self.deciding(py, method, path, host, peer, headers, query, context, body, user, cost)?;

        /// Decides an ASGI request from its `scope` (its method, path,
        /// `host` header, client, headers and query string; the scope is
        /// what the policy's callables are called with), as `decide` does;
        /// `body(field)` is called only when a throttle that applies needs
        /// it; `cost` (default 1).
        #[pyo3(signature = (scope, *, body = None, cost = None))]
        fn decide_scope / adecide_scope(self, py, scope: &Bound<'_, PyDict>, body: Option<&Bound<'_, PyAny>>,
                                        cost: Option<&Bound<'_, PyAny>>)
            on self.inner => self.deciding_scope(py, scope, body, cost)?;
    }
}

#[pymethods]
impl Gate {
    #[new]
    #[pyo3(signature = (policy, *, limiter = None))]
    fn new(
        py: Python<'_>,
        policy: &Bound<'_, PyAny>,
        limiter: Option<PyRef<'_, Limiter>>,
    ) -> PyResult<Gate> {
        let mut callables = Vec::new();
        let spec = if let Ok(dict) = policy.cast::<PyDict>() {
            let table = storeless_table(py, dict, limiter.is_some(), "a limiter", &mut callables)?;
            match &limiter {
                Some(limiter) => {
                    let shared = limiter.shared();
                    guard(py, || Spec::on_limiter(table, callables.len(), &shared))?
                }
                None => guard(py, || Spec::from_table(table, callables.len()))?,
            }
        } else {
            let path: std::path::PathBuf = policy.extract().map_err(|_| {
                PyTypeError::new_err("policy must be a dict or the path of a policy file")
            })?;
            guard(py, || Spec::load(&path))?
        };
        let (inner, store) = match limiter {
            Some(limiter) => {
                let store = limiter.store_shown().to_owned();
                let limiter = limiter.shared();
                (
                    guard(py, || core::gate::Gate::on_limiter(spec, limiter))?,
                    store,
                )
            }
            // opening a Redis store may wait up to its connect timeout
            None => {
                let store = core::store::redact(&spec.settings.store);
                (
                    run_core(py, true, || core::gate::Gate::bind(spec, None))?,
                    store,
                )
            }
        };
        Ok(Gate {
            inner: Arc::new(inner),
            callables,
            store,
        })
    }

    /// `gate.penalize(name, peer, headers)`: counts a strike of the
    /// fail2ban or allow2ban entry `name` against the client of a request
    /// from `peer` with `headers` (a mapping, WSGI/Django `HTTP_` names or
    /// plain ones; `X-Forwarded-For` believed from the policy's trusted
    /// proxies), as an app does after a failed login; True when the strike
    /// banned the client (its network: an IPv6 client's /64).
    /// Raises ConfigurationError when a throttle of the policy counts only
    /// some responses (`count`): what a door that never sees the response
    /// (a FastAPI dependency) calls, at once.
    fn check_unanswered(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || self.inner.spec().check_unanswered())
    }

    #[pyo3(signature = (name, peer, headers))]
    fn penalize(
        &self,
        py: Python<'_>,
        name: &str,
        peer: &str,
        headers: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let head = Head::new("", String::new(), "", peer.to_owned(), String::new());
        let client = self.with_request(py, head, headers, Parts::default(), |request| {
            self.inner.client(request)
        })?;
        let (gate, name) = (self.inner.clone(), name.to_owned());
        let waits = gate.warden().waits_on_io();
        run_core(py, waits, move || gate.penalize(&name, &client))
    }

    /// The scopes of the policy's throttles, in order.
    #[getter]
    fn scopes(&self) -> Vec<String> {
        self.inner.scopes()
    }

    /// `gate.with_policy(policy)`: a gate for another policy (a dict, as
    /// `Gate` takes, naming no store) on this gate's store: the same
    /// connections, address lists and failure policy (say a Django view's
    /// own throttle beside the settings' gate). Who the client is (its
    /// trusted proxies, each prefix) is this gate's unless the policy names
    /// it.
    fn with_policy(&self, py: Python<'_>, policy: &Bound<'_, PyDict>) -> PyResult<Gate> {
        let mut callables = Vec::new();
        let table = storeless_table(py, policy, true, "the gate it is made from", &mut callables)?;
        let spec = guard(py, || {
            Spec::beside(table, callables.len(), self.inner.spec())
        })?;
        let warden = self.inner.warden().clone();
        let inner = guard(py, || core::gate::Gate::on_warden(spec, warden))?;
        Ok(Gate {
            inner: Arc::new(inner),
            callables,
            store: self.store.clone(),
        })
    }

    /// The admin interface to this gate's store (its Redis or its memory),
    /// its changes recorded in the audit trail as `actor`'s.
    #[pyo3(signature = (*, actor = None))]
    fn admin(&self, actor: Option<&str>) -> crate::admin::Admin {
        let admin = core::Admin::new(self.inner.warden().store());
        crate::admin::Admin::wrap(admin.with_actor(actor.unwrap_or_default()))
    }

    /// Each throttle's limiter stats, by scope.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (t, limiter) in self
            .inner
            .spec()
            .throttles
            .iter()
            .zip(self.inner.limiters())
        {
            out.set_item(&t.scope, crate::plain::to_py(py, &limiter.stats().plain())?)?;
        }
        Ok(out)
    }

    /// The calls made to the store every throttle shares.
    #[getter]
    fn store_stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::plain::to_py(py, &self.inner.warden().store_stats().plain())
    }

    /// `{scope: rules}` of each log the policy's throttles keep a key's
    /// usage in, in order (a throttle with meters: each meter's,
    /// `"scope@meter"`), the rules as text, as `Admin.usage` takes them.
    fn throttle_rules<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (scope, rules) in self.inner.throttle_rules() {
            out.set_item(scope, rules.to_string())?;
        }
        Ok(out)
    }

    /// The throttles' limiters, by scope (their stats, for the metrics collector).
    fn limiters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (t, limiter) in self
            .inner
            .spec()
            .throttles
            .iter()
            .zip(self.inner.limiters())
        {
            out.set_item(&t.scope, Limiter::wrap(limiter.clone(), self.store.clone()))?;
        }
        Ok(out)
    }

    /// Who this gate names as the client: its policy's `trusted_proxies`,
    /// `ipv4_prefix` and `ipv6_prefix` (what a door's `client_ip` and
    /// `client_key` believe, so that they name the client the gate does).
    #[getter]
    fn trusted_proxies(&self) -> crate::net::TrustedProxies {
        crate::net::TrustedProxies::of(self.inner.spec().proxies.clone())
    }

    /// Whether the policy limits at all.
    #[getter]
    fn enabled(&self) -> bool {
        self.inner.spec().enabled
    }

    /// Whether a throttle keys requests by a body field (`identity:FIELD`),
    /// so a door that reads the body ahead of the app must read it.
    #[getter]
    fn reads_body(&self) -> bool {
        self.inner.spec().reads_body()
    }

    fn __repr__(&self) -> String {
        let spec = self.inner.spec();
        format!(
            "Gate({} throttle(s), {} ban(s), store='{}')",
            spec.throttles.len(),
            spec.bans.len(),
            self.store
        )
    }
}
