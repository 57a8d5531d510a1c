//! `Verdict`: what the gate decided of a request, as a door renders it.

use crate::convert::latin1_bytes;
use crate::http::Answer;
use crate::twin::Twin;
use crate::twins;
use crate::types::Decision;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use ratekeeper_core as core;
use std::sync::Arc;

/// What the gate decided of a request.
#[pyclass(frozen, module = "ratekeeper")]
pub struct Verdict {
    inner: Arc<core::gate::Verdict>,
    /// The gate that decided it (which a response's status is told to, and
    /// whose policy names the verdict's parts when a door asks).
    gate: Arc<core::gate::Gate>,
}

impl Verdict {
    /// The name of the list or ban entry the reason names.
    fn entry(&self) -> Option<String> {
        self.gate.entry_name(self.inner.reason).map(str::to_owned)
    }
}

/// A core verdict for Python, of `gate` (its outage warnings logged).
pub(super) fn verdict(
    py: Python<'_>,
    gate: &Arc<core::gate::Gate>,
    inner: core::gate::Verdict,
) -> PyResult<Verdict> {
    let logger = || {
        py.import("logging")?
            .call_method1("getLogger", ("ratekeeper",))
    };
    for warning in &inner.warnings {
        logger()?.call_method1("warning", (warning.as_str(),))?;
    }
    Ok(Verdict {
        inner: Arc::new(inner),
        gate: gate.clone(),
    })
}

/// A response's end told to the gate (see `Verdict.finish`).
struct Finishing {
    verdict: Arc<core::gate::Verdict>,
    status: Option<u16>,
    headers: Vec<core::gate::Header>,
}

impl Twin for Finishing {
    type On = Arc<core::gate::Gate>;
    type Out = ();
    fn waits(&self, gate: &Self::On) -> bool {
        self.verdict.awaits_end && gate.warden().waits_on_io()
    }
    fn blocking(&self, gate: &Self::On) -> core::Result<()> {
        gate.finish(&self.verdict, self.status, &self.headers)
    }
    async fn awaited(&self, gate: &Self::On) -> core::Result<()> {
        (gate.finish_async(&self.verdict, self.status, &self.headers)).await
    }
    fn deliver(&self, py: Python<'_>, _: &Self::On, _: ()) -> PyResult<Py<PyAny>> {
        Ok(py.None())
    }
}

twins! {
    impl Verdict {
        /// Tells the gate that the response to a request it let through
        /// ended (its last byte sent, or the client gone), with its status
        /// (None: the application raised) and its headers (`(name, value)`
        /// pairs of str, as WSGI's, or bytes, as ASGI's): every slot the
        /// request held is released, a throttle that counts only some
        /// responses (`count`, say "failures") gives back the unit it
        /// counted when this one is not among them (a request the
        /// application raised on stays counted), and a throttle with meters
        /// settles each meter that has a `usage` header to what the
        /// response's header says. A door calls it once, when `awaits_end`
        /// (else it does nothing).
        #[pyo3(signature = (status, headers = None))]
        fn finish / afinish(self, py, status: Option<u16>, headers: Option<&Bound<'_, PyAny>>)
            on self.gate => Finishing {
                verdict: self.inner.clone(),
                status,
                headers: response_headers(headers)?,
            };
    }
}

/// A response's headers as a door gives them: `(name, value)` pairs, each
/// str (WSGI's native strings, Latin-1) or bytes (ASGI's); none when not given.
fn response_headers(headers: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<core::gate::Header>> {
    let Some(headers) = headers.filter(|h| !h.is_none()) else {
        return Ok(Vec::new());
    };
    let bad =
        || PyTypeError::new_err("a response header must be a (name, value) pair of str or bytes");
    let part = |item: PyResult<Bound<'_, PyAny>>| -> PyResult<Vec<u8>> {
        let item = item.map_err(|_| bad())?;
        match item.cast::<PyString>() {
            Ok(text) => Ok(latin1_bytes(&text.to_cow()?)),
            Err(_) => Ok(item
                .cast::<PyBytes>()
                .map_err(|_| bad())?
                .as_bytes()
                .to_vec()),
        }
    };
    let mut out = Vec::new();
    for pair in headers.try_iter()? {
        let pair = pair?;
        if pair.is_instance_of::<PyString>() || pair.is_instance_of::<PyBytes>() || pair.len()? != 2
        {
            return Err(bad());
        }
        out.push((part(pair.get_item(0))?, part(pair.get_item(1))?));
    }
    Ok(out)
}

#[pymethods]
impl Verdict {
    /// Whether the door is to tell the gate when the response ends
    /// (`finish`): a throttle with an in-flight rule holds a slot for this
    /// request, or one that counts only some responses counted it.
    #[getter]
    fn awaits_end(&self) -> bool {
        self.inner.awaits_end
    }

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

    /// Why the request ends as it does: "admitted", "exempt", "safelisted",
    /// "blocked", "banned", "throttled", "degraded" or "shadowed".
    #[getter]
    fn reason(&self) -> &'static str {
        self.inner.reason.name()
    }

    /// The scope of the throttle that decision is of.
    #[getter]
    fn scope(&self) -> Option<String> {
        (self.inner.throttle).map(|i| self.gate.scope_of(i).to_owned())
    }

    /// The name of the fail2ban or allow2ban entry that refused the request.
    #[getter]
    fn ban(&self) -> Option<String> {
        self.inner.ban().and_then(|_| self.entry())
    }

    /// The scope of the throttle whose refusal shadow mode let through.
    #[getter]
    fn shadow(&self) -> Option<String> {
        self.inner.shadowed().and_then(|_| self.entry())
    }

    /// Whether the ban's strike banned the client.
    #[getter]
    fn banned(&self) -> bool {
        self.inner.ban().is_some_and(|(_, banned)| banned)
    }

    /// The name of the safelist entry that let the request through.
    #[getter]
    fn safelist(&self) -> Option<String> {
        self.inner.safelist().and_then(|_| self.entry())
    }

    /// The name of the blocklist entry that refused the request.
    #[getter]
    fn blocklist(&self) -> Option<String> {
        self.inner.blocklist().and_then(|_| self.entry())
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
            .map(|c| {
                (
                    self.gate.scope_of(c.throttle).to_owned(),
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
            "Verdict('{}', reason='{}', status={:?}, scope={:?})",
            self.inner.ending.name(),
            self.inner.reason.name(),
            self.inner.answer.status,
            self.scope()
        )
    }
}
