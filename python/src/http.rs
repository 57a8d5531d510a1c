//! `Responses` and `Answer`: the core's one HTTP answer (see
//! `ratekeeper_core::http`) for the WSGI, ASGI and Django adapters.

use crate::errors::guard;
use crate::types::Decision;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use ratekeeper_core as core;

/// How an adapter answers: `status` of a denial (429), `blocked_status` of a
/// blocked client (403), which rate-limit `headers` to send ("all",
/// "draft", "legacy" or "none"), and whether denial log lines show keys as
/// they are (`log_keys`) rather than hashed.
#[pyclass(frozen, module = "ratekeeper")]
pub struct Responses {
    inner: core::Responses,
}

/// What to do with a request: `status` None passes it on to the app (adding
/// `headers` to its response); otherwise answer `status`, `headers`, `body`.
#[pyclass(frozen, module = "ratekeeper")]
pub struct Answer {
    inner: core::Answer,
}

#[pymethods]
impl Responses {
    #[new]
    #[pyo3(signature = (*, status = None, blocked_status = None, headers = None, log_keys = false))]
    fn new(
        py: Python<'_>,
        status: Option<i64>,
        blocked_status: Option<i64>,
        headers: Option<&str>,
        log_keys: bool,
    ) -> PyResult<Responses> {
        let d = core::Responses::default();
        let inner = guard(py, || {
            core::Responses::new(
                status.unwrap_or(d.status.into()),
                blocked_status.unwrap_or(d.blocked_status.into()),
                headers.unwrap_or(d.headers.name()),
                log_keys,
            )
        })?;
        Ok(Responses { inner })
    }

    /// The status of a denial.
    #[getter]
    fn status(&self) -> u16 {
        self.inner.status
    }

    /// The status of a blocked client's answer.
    #[getter]
    fn blocked_status(&self) -> u16 {
        self.inner.blocked_status
    }

    /// The header style: "all", "draft", "legacy" or "none".
    #[getter]
    fn headers(&self) -> &'static str {
        self.inner.headers.name()
    }

    /// Whether denial log lines show keys as they are.
    #[getter]
    fn log_keys(&self) -> bool {
        self.inner.log_keys
    }

    /// The answer to a request the decision decided.
    fn answer(&self, decision: &Decision) -> Answer {
        Answer {
            inner: self.inner.answer(&decision.inner),
        }
    }

    /// The headers to add to the app's response when the request goes on
    /// (none when a list decided; the style's rate-limit headers otherwise,
    /// with Retry-After for a denial let through).
    fn pass_headers<'py>(
        &self,
        py: Python<'py>,
        decision: &Decision,
    ) -> PyResult<Bound<'py, PyDict>> {
        headers_dict(py, &self.inner.pass_headers(&decision.inner))
    }

    /// The answer to a blocked client.
    fn blocked(&self) -> Answer {
        Answer {
            inner: self.inner.blocked(),
        }
    }

    /// The headers of a denial, for a custom responder's response: the
    /// style's rate-limit headers, Retry-After and the JSON content type.
    fn denial_headers<'py>(
        &self,
        py: Python<'py>,
        decision: &Decision,
    ) -> PyResult<Bound<'py, PyDict>> {
        headers_dict(py, &self.inner.denial_headers(&decision.inner))
    }

    /// The log line of a denial of `key` under `scope`: `(text, fields)`.
    #[pyo3(signature = (decision, scope, key, method = "", path = ""))]
    fn denial_log(
        &self,
        py: Python<'_>,
        decision: &Decision,
        scope: &str,
        key: &Bound<'_, PyAny>,
        method: &str,
        path: &str,
    ) -> PyResult<(String, Py<PyAny>)> {
        let key = crate::convert::key_bytes(key)?;
        let line = self
            .inner
            .denial_log(&decision.inner, scope, &key, method, path);
        Ok((line.text, crate::plain::to_py(py, &line.fields)?))
    }

    fn __repr__(&self) -> String {
        format!(
            "Responses(status={}, blocked_status={}, headers='{}', log_keys={})",
            self.inner.status,
            self.inner.blocked_status,
            self.inner.headers.name(),
            if self.inner.log_keys { "True" } else { "False" }
        )
    }
}

fn headers_dict<'py>(
    py: Python<'py>,
    headers: &[(&'static str, String)],
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, value) in headers {
        dict.set_item(*name, value)?;
    }
    Ok(dict)
}

impl Answer {
    /// Each header's lower-case name, and its ASGI `(name, value)` pair of
    /// bytes (the value in Latin-1: a character past it, which no header the
    /// core writes holds, as `?`).
    fn asgi_pairs<'a, 'py: 'a>(
        &'a self,
        py: Python<'py>,
    ) -> impl Iterator<Item = PyResult<(Vec<u8>, Bound<'py, PyTuple>)>> + 'a {
        self.inner.headers.iter().map(move |(name, value)| {
            let name = name.to_ascii_lowercase().into_bytes();
            let value = crate::convert::latin1_bytes(value);
            let pair = (PyBytes::new(py, &name), PyBytes::new(py, &value)).into_pyobject(py)?;
            Ok((name, pair))
        })
    }
}

impl From<core::Answer> for Answer {
    fn from(inner: core::Answer) -> Answer {
        Answer { inner }
    }
}

#[pymethods]
impl Answer {
    /// The status to answer with, or None to pass the request on.
    #[getter]
    fn status(&self) -> Option<u16> {
        self.inner.status
    }

    /// The headers, as a dict of str to str.
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        headers_dict(py, &self.inner.headers)
    }

    /// The headers as ASGI sends them: a list of (name, value) pairs of
    /// bytes, names in lower case, values in Latin-1 (a character past it,
    /// which no header the core writes holds, as `?`).
    #[getter]
    fn asgi_headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let pairs = self.asgi_pairs(py).map(|got| got.map(|(_, pair)| pair));
        PyList::new(py, pairs.collect::<PyResult<Vec<_>>>()?)
    }

    /// An ASGI `send` that adds these headers to the response the app
    /// starts (each one the app does not set itself); `send` itself when
    /// there are none.
    fn asgi_send<'py>(&self, send: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if self.inner.headers.is_empty() {
            return Ok(send);
        }
        let py = send.py();
        let extra = self
            .asgi_pairs(py)
            .map(|got| got.map(|(name, pair)| (name, pair.into_any().unbind())))
            .collect::<PyResult<_>>()?;
        Ok(Bound::new(
            py,
            AsgiSend {
                send: send.unbind(),
                extra,
            },
        )?
        .into_any())
    }

    /// The body (empty when the request passes on).
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.body)
    }

    /// Whether the request goes on to the app.
    #[getter]
    fn passes(&self) -> bool {
        self.inner.passes()
    }

    fn __repr__(&self) -> String {
        match self.inner.status {
            None => format!("Answer(passes, {} headers)", self.inner.headers.len()),
            Some(status) => format!("Answer(status={status}, {} bytes)", self.inner.body.len()),
        }
    }
}

/// An ASGI `send` adding a passed request's rate-limit headers to the
/// response the app starts ([`Answer::asgi_send`]).
#[pyclass(frozen, module = "ratekeeper")]
pub struct AsgiSend {
    send: Py<PyAny>,
    /// Each header's name (lower case) and its `(name, value)` pair.
    extra: Vec<(Vec<u8>, Py<PyAny>)>,
}

#[pymethods]
impl AsgiSend {
    /// Sends `message`: an `http.response.start` with the headers added
    /// (a copy; the app's message is left as it was), any other as it is.
    fn __call__<'py>(&self, message: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = message.py();
        let send = self.send.bind(py);
        let start = match message.cast::<PyDict>() {
            Ok(dict) => match dict.get_item(intern!(py, "type"))? {
                Some(kind) => kind.eq(intern!(py, "http.response.start"))?.then_some(dict),
                None => None,
            },
            Err(_) => None,
        };
        let Some(start) = start else {
            return send.call1((message,));
        };
        let headers = PyList::empty(py);
        let mut present = Vec::new();
        if let Some(given) = start.get_item(intern!(py, "headers"))? {
            for pair in given.try_iter()? {
                let pair = pair?;
                if let Ok(name) = pair.get_item(0).and_then(|n| Ok(n.cast_into::<PyBytes>()?)) {
                    present.push(name);
                }
                headers.append(pair)?;
            }
        }
        for (name, pair) in &self.extra {
            if !present
                .iter()
                .any(|p| p.as_bytes().eq_ignore_ascii_case(name))
            {
                headers.append(pair.bind(py))?;
            }
        }
        let sent = start.copy()?;
        sent.set_item(intern!(py, "headers"), headers)?;
        send.call1((sent,))
    }
}
