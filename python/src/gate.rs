//! `Gate` and `Verdict`: the core's one decision flow (see
//! `ratekeeper_core::gate`) for the WSGI and ASGI middlewares and any
//! Python door. A door converts its framework's request into the facts
//! `decide` takes and renders the verdict; it decides nothing itself.

use crate::call::run_core;
use crate::errors::{config_error, guard};
use crate::http::Answer;
use crate::limiter::Limiter;
use crate::types::Decision;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use ratekeeper_core as core;
use ratekeeper_core::gate::source::{cgi_name, joined, Head};
use ratekeeper_core::gate::spec::{Table, Value};
use ratekeeper_core::gate::{Facts, Spec, Step};
use std::sync::Arc;

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

/// What the gate decided of a request.
#[pyclass(frozen, module = "ratekeeper")]
pub struct Verdict {
    inner: core::gate::Verdict,
    scope: Option<String>,
    ban: Option<String>,
    safelist: Option<String>,
    blocklist: Option<String>,
    /// The scope of each check made, in order.
    scopes: Vec<String>,
}

/// A dict's value as a policy value; callables become `call:N`.
fn value(
    path: &str,
    v: &Bound<'_, PyAny>,
    callables: &mut Vec<Py<PyAny>>,
) -> PyResult<Option<Value>> {
    if v.is_none() {
        return Ok(None);
    }
    if v.is_instance_of::<PyBool>() {
        return Ok(Some(Value::Boolean(v.extract()?)));
    }
    if v.is_instance_of::<PyInt>() {
        let n: i64 = v
            .extract()
            .map_err(|_| config_error(v.py(), format!("{path}: {v} is too large")))?;
        return Ok(Some(Value::Integer(n)));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Some(Value::Float(v.extract()?)));
    }
    if let Ok(text) = v.cast::<PyString>() {
        return Ok(Some(Value::String(text.to_cow()?.into_owned())));
    }
    if let Ok(dict) = v.cast::<PyDict>() {
        return Ok(Some(Value::Table(table(path, dict, callables)?)));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in v.try_iter()?.enumerate() {
            if let Some(item) = value(&format!("{path}[{i}]"), &item?, callables)? {
                out.push(item);
            }
        }
        return Ok(Some(Value::Array(out)));
    }
    if v.is_callable() {
        callables.push(v.clone().unbind());
        return Ok(Some(Value::String(format!("call:{}", callables.len() - 1))));
    }
    Err(PyTypeError::new_err(format!(
        "{path}: a policy holds strings, numbers, booleans, lists, dicts and callables, not {}",
        v.get_type().name()?
    )))
}

fn table(path: &str, dict: &Bound<'_, PyDict>, callables: &mut Vec<Py<PyAny>>) -> PyResult<Table> {
    let mut out = Table::new();
    for (k, v) in dict.iter() {
        let name: String = k.extract().map_err(|_| {
            PyTypeError::new_err(format!("{path}: the policy's names are strings, not {k}"))
        })?;
        let place = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        if let Some(v) = value(&place, &v, callables)? {
            out.insert(name, v);
        }
    }
    Ok(out)
}

/// A policy dict's table; with `beside` (a limiter or a gate whose store
/// it goes on) the policy must name no store of its own.
fn storeless_table(
    py: Python<'_>,
    dict: &Bound<'_, PyDict>,
    beside: bool,
    what: &str,
    callables: &mut Vec<Py<PyAny>>,
) -> PyResult<Table> {
    if beside && dict.contains("store")? {
        return Err(config_error(
            py,
            format!("give the store in the policy or {what}, not both"),
        ));
    }
    table("", dict, callables)
}

/// A request as a Python door gives it.
struct Request<'a, 'py> {
    py: Python<'py>,
    head: Head,
    headers: &'a Bound<'py, PyAny>,
    context: &'a Bound<'py, PyAny>,
    body: Option<&'a Bound<'py, PyAny>>,
    user: Option<&'a Bound<'py, PyAny>>,
    cost: u64,
    callables: &'a [Py<PyAny>],
    /// The first error a callable raised (it ends the decision).
    failed: std::cell::RefCell<Option<PyErr>>,
}

impl Request<'_, '_> {
    /// `Some(value)` of a door's answer: str as UTF-8, bytes as they are,
    /// None and "" as none; an error is kept for the caller.
    fn answered(&self, got: PyResult<Bound<'_, PyAny>>) -> Option<Vec<u8>> {
        let got = match got {
            Ok(got) => got,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                return None;
            }
        };
        if got.is_none() {
            return None;
        }
        match crate::convert::key_bytes(&got) {
            Ok(bytes) => Some(bytes.into_owned()),
            Err(_) if got.is_instance_of::<PyBool>() => {
                got.is_truthy().ok()?.then(|| b"1".to_vec())
            }
            Err(_) => got.str().ok().map(|s| s.to_string().into_bytes()),
        }
    }

    /// A header from a WSGI environ or Django META (`HTTP_X_API_KEY`), or
    /// from a list of `(name, value)` pairs (ASGI's, as bytes).
    fn lookup(&self, name: &str) -> PyResult<Option<Vec<u8>>> {
        if let Ok(environ) = self.headers.cast::<PyDict>() {
            return Ok(match environ.get_item(cgi_name(name))? {
                Some(v) => Some(match v.cast::<PyString>() {
                    // WSGI gives header bytes decoded as Latin-1: the bytes as they came
                    Ok(text) => text
                        .to_cow()?
                        .chars()
                        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                        .collect(),
                    Err(_) => crate::convert::key_bytes(&v)?.into_owned(),
                }),
                None => None,
            });
        }
        let mut values = Vec::new();
        for pair in self.headers.try_iter()? {
            let (k, v): (Vec<u8>, Vec<u8>) = pair?.extract()?;
            if k.eq_ignore_ascii_case(name.as_bytes()) {
                values.push(v);
            }
        }
        Ok(joined(values.iter().map(Vec::as_slice)))
    }
}

impl Facts for Request<'_, '_> {
    fn head(&self) -> &Head {
        &self.head
    }
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        match self.lookup(name) {
            Ok(found) => found,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                None
            }
        }
    }
    fn body_field(&self, field: &str) -> Option<String> {
        let got = self.answered(self.body?.call1((field,)))?;
        Some(String::from_utf8_lossy(&got).into_owned())
    }
    fn user(&self) -> Option<String> {
        let got = self.answered(self.user?.call0())?;
        Some(String::from_utf8_lossy(&got).into_owned())
    }
    fn call(&self, index: usize) -> Option<Vec<u8>> {
        let callable = self.callables.get(index)?.bind(self.py);
        self.answered(callable.call1((self.context,)))
    }
    fn cost(&self) -> u64 {
        self.cost
    }
}

impl Gate {
    fn verdict(&self, py: Python<'_>, inner: core::gate::Verdict) -> PyResult<Verdict> {
        let logger = || {
            py.import("logging")?
                .call_method1("getLogger", ("ratekeeper",))
        };
        for warning in &inner.warnings {
            logger()?.call_method1("warning", (warning.as_str(),))?;
        }
        let spec = self.inner.spec();
        Ok(Verdict {
            scopes: inner
                .checked
                .iter()
                .map(|c| spec.throttles[c.throttle].scope.clone())
                .collect(),
            scope: inner.throttle.map(|i| spec.throttles[i].scope.clone()),
            ban: inner.ban.map(|i| spec.bans[i].rule.name.clone()),
            safelist: inner.safelist.map(|i| spec.safelists[i].name.clone()),
            blocklist: inner.blocklist.map(|i| spec.blocklists[i].name.clone()),
            inner,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare(
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
    ) -> PyResult<Step> {
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
        self.with_request(py, head, headers, parts, |request| {
            self.inner.prepare(request)
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

/// What a door may give of a request besides its head and headers.
#[derive(Default)]
struct Parts<'a, 'py> {
    context: Option<&'a Bound<'py, PyAny>>,
    body: Option<&'a Bound<'py, PyAny>>,
    user: Option<&'a Bound<'py, PyAny>>,
    cost: Option<&'a Bound<'py, PyAny>>,
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

    /// Decides a request: `method`, `path` (decoded), `host`, `peer` (the
    /// address that connected), `headers` (a WSGI environ or Django META,
    /// or ASGI's `(name, value)` pairs), the query string; `context` is
    /// what the policy's callables are called with (the environ, the
    /// scope, the request); `body(field)` and `user()` are called only when
    /// a throttle that applies needs them; `cost` (default 1).
    #[pyo3(signature = (method, path, host, peer, headers, query = "", *, context = None,
                        body = None, user = None, cost = None))]
    #[allow(clippy::too_many_arguments)]
    fn decide(
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
    ) -> PyResult<Verdict> {
        let step = self.prepare(
            py, method, path, host, peer, headers, query, context, body, user, cost,
        )?;
        let inner = match step {
            Step::Done(verdict) => *verdict,
            Step::Ask(plan) => {
                let gate = self.inner.clone();
                let waits = gate.warden().waits_on_io();
                run_core(py, waits, move || gate.run(plan))?
            }
        };
        self.verdict(py, inner)
    }

    /// `await gate.adecide(...)`: `decide`, the store awaited off the event
    /// loop (the policy's callables are called at once, on the loop).
    #[pyo3(signature = (method, path, host, peer, headers, query = "", *, context = None,
                        body = None, user = None, cost = None))]
    #[allow(clippy::too_many_arguments)]
    fn adecide<'py>(
        slf: Py<Gate>,
        py: Python<'py>,
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
    ) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        let step = this.prepare(
            py, method, path, host, peer, headers, query, context, body, user, cost,
        )?;
        let gate = this.inner.clone();
        let plan = match step {
            Step::Done(verdict) => {
                let value = this
                    .verdict(py, *verdict)
                    .and_then(|v| Ok(Py::new(py, v)?.into_any()));
                return crate::aio::ready(py, value);
            }
            Step::Ask(plan) if !gate.warden().waits_on_io() => {
                let value = run_core(py, false, || gate.run(plan))
                    .and_then(|v| this.verdict(py, v))
                    .and_then(|v| Ok(Py::new(py, v)?.into_any()));
                return crate::aio::ready(py, value);
            }
            Step::Ask(plan) => plan,
        };
        let work = async move { gate.run_async(plan).await };
        crate::aio::spawn(py, work, move |py, inner| {
            Ok(Py::new(py, slf.get().verdict(py, inner)?)?.into_any())
        })
    }

    /// `gate.penalize(name, peer, headers)`: counts a strike of the
    /// fail2ban or allow2ban entry `name` against the client of a request
    /// from `peer` with `headers` (a mapping, WSGI/Django `HTTP_` names or
    /// plain ones; `X-Forwarded-For` believed from the policy's trusted
    /// proxies), as an app does after a failed login; True when the strike
    /// banned the client (its network: an IPv6 client's /64).
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
        self.inner
            .spec()
            .throttles
            .iter()
            .map(|t| t.scope.clone())
            .collect()
    }

    /// `gate.with_policy(policy)`: a gate for another policy (a dict, as
    /// `Gate` takes, naming no store) on this gate's store: the same
    /// connections, address lists and failure policy (say a Django view's
    /// own throttle beside the settings' gate).
    fn with_policy(&self, py: Python<'_>, policy: &Bound<'_, PyDict>) -> PyResult<Gate> {
        let mut callables = Vec::new();
        let table = storeless_table(py, policy, true, "the gate it is made from", &mut callables)?;
        let spec = guard(py, || Spec::from_table(table, callables.len()))?;
        let warden = self.inner.warden().clone();
        let inner = guard(py, || core::gate::Gate::on_warden(spec, warden))?;
        Ok(Gate {
            inner: Arc::new(inner),
            callables,
            store: self.store.clone(),
        })
    }

    /// The admin interface to this gate's store (its Redis or its memory).
    fn admin(&self) -> crate::admin::Admin {
        crate::admin::Admin::wrap(core::Admin::new(self.inner.warden().store()))
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

#[pymethods]
impl Verdict {
    /// How the request ends: "pass", "deny" or "block".
    #[getter]
    fn ending(&self) -> &'static str {
        self.inner.ending.name()
    }

    /// The answer: status None passes the request on (adding `headers` to
    /// the app's response); else the status, headers and body to send.
    #[getter]
    fn answer(&self) -> Answer {
        Answer::from(self.inner.answer.clone())
    }

    /// The decision that answered, or whose headers a pass shows.
    #[getter]
    fn decision(&self) -> Option<Decision> {
        self.inner.decision.clone().map(|inner| Decision { inner })
    }

    /// The scope of the throttle that decision is of.
    #[getter]
    fn scope(&self) -> Option<String> {
        self.scope.clone()
    }

    /// The name of the fail2ban or allow2ban entry that refused the request.
    #[getter]
    fn ban(&self) -> Option<String> {
        self.ban.clone()
    }

    /// Whether the ban's strike banned the client.
    #[getter]
    fn banned(&self) -> bool {
        self.inner.banned
    }

    /// The name of the safelist entry that let the request through.
    #[getter]
    fn safelist(&self) -> Option<String> {
        self.safelist.clone()
    }

    /// The name of the blocklist entry that refused the request.
    #[getter]
    fn blocklist(&self) -> Option<String> {
        self.blocklist.clone()
    }

    /// The denial's log line and its fields, when denials are logged.
    #[getter]
    fn log(&self, py: Python<'_>) -> PyResult<Option<(String, Py<PyAny>)>> {
        self.inner
            .log
            .as_ref()
            .map(|line| Ok((line.text.clone(), crate::plain::to_py(py, &line.fields)?)))
            .transpose()
    }

    /// Every throttle's decision, as `(scope, key, decision)`, in order.
    #[getter]
    fn checked<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Vec<(String, Bound<'py, PyBytes>, Decision)>> {
        Ok(self
            .inner
            .checked
            .iter()
            .zip(&self.scopes)
            .map(|(c, scope)| {
                (
                    scope.clone(),
                    PyBytes::new(py, &c.key),
                    Decision {
                        inner: c.decision.clone(),
                    },
                )
            })
            .collect())
    }

    fn __repr__(&self) -> String {
        format!(
            "Verdict('{}', status={:?}, scope={:?})",
            self.inner.ending.name(),
            self.inner.answer.status,
            self.scope
        )
    }
}
