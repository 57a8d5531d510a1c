//! `Reservation`: a check for an estimate, settled to what the work cost
//! (see `ratekeeper_core::Reservation`), as `Limiter.reserve` returns it; a
//! context manager, sync and async.

use crate::aio::Started;
use crate::call::deliver;
use crate::twin::Twin;
use crate::twins;
use crate::types::Decision;
use pyo3::prelude::*;
use ratekeeper_core as core;
use std::sync::{Arc, Mutex};

/// A reservation and the limiter that made it; what its settle did.
pub struct Held {
    limiter: Arc<core::Limiter>,
    inner: core::Reservation,
    settled: Mutex<Option<core::Settled>>,
}

/// A check admitted (or refused) for an estimate, to settle to what the
/// work cost (see `Limiter.reserve`).
#[pyclass(frozen, module = "ratekeeper")]
pub struct Reservation {
    held: Arc<Held>,
}

impl Reservation {
    /// The reservation `inner` that `limiter` made.
    pub fn wrap(limiter: Arc<core::Limiter>, inner: core::Reservation) -> Reservation {
        Reservation {
            held: Arc::new(Held {
                limiter,
                inner,
                settled: Mutex::new(None),
            }),
        }
    }

    /// What the settle did, as `whole` and `each` meter's read it: an int,
    /// or a metered limiter's dict.
    fn settled_by(
        &self,
        py: Python<'_>,
        whole: impl Fn(&core::Settled) -> u64,
        each: impl Fn(&core::MeterSettled) -> u64,
    ) -> PyResult<Py<PyAny>> {
        let done = self.done();
        let metered = !self.held.inner.estimates.is_empty();
        let meters = done
            .as_ref()
            .map(|s| s.meters.as_slice())
            .unwrap_or_default();
        match metered {
            false => per_meter(py, done.as_ref().map_or(0, &whole), std::iter::empty()),
            true => per_meter_dict(py, meters.iter().map(|m| (m.name.as_str(), each(m)))),
        }
    }

    fn done(&self) -> Option<core::Settled> {
        self.held
            .settled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `self`, or `RateLimitExceeded` (with `.decision`) when refused.
    fn entered(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let held = &slf.get().held;
        match held.inner.refusal() {
            None => Ok(slf.clone().into_any().unbind()),
            Some(why) => {
                let decision = Py::new(
                    slf.py(),
                    Decision {
                        inner: held.inner.decision.clone(),
                    },
                )?;
                Err(crate::errors::rate_limit_exceeded(
                    slf.py(),
                    why,
                    decision.into_any(),
                ))
            }
        }
    }
}

/// A settle of a reservation to what the work cost.
struct Settling {
    actual: Actual,
    now: Option<f64>,
}

/// What the work cost: units, or a metered limiter's per meter (`None`: a
/// meter not named, which keeps its estimate), or nothing (a cancel).
enum Actual {
    Units(u64),
    Meters(Vec<Option<u64>>),
    Nothing,
}

impl Settling {
    /// A settle's arguments: `actual` an int, or for a metered limiter a
    /// mapping of meters to units and/or the meters as keywords.
    fn new(
        py: Python<'_>,
        held: &Held,
        actual: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        meters: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Settling> {
        let now = crate::convert::now(now)?;
        let named = match actual {
            Some(actual) => crate::convert::meter_units(actual)?,
            None => None,
        };
        let keywords = meters
            .map(|m| crate::convert::meter_units(m.as_any()))
            .transpose()?
            .flatten();
        let actual = match (actual, named, keywords) {
            (Some(actual), None, None) => Actual::Units(crate::convert::actual_cost(py, actual)?),
            (None, None, None) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "settle takes what the work cost: an int, or units per meter",
                ))
            }
            (Some(_), None, Some(_)) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "settle takes an int or units per meter, not both",
                ))
            }
            (_, named, keywords) => {
                let mut units = named.unwrap_or_default();
                units.extend(keywords.unwrap_or_default());
                Actual::Meters(crate::errors::guard(py, || {
                    held.limiter.meter_actuals(&units)
                })?)
            }
        };
        Ok(Settling { actual, now })
    }

    /// A cancel: every unit back (each meter's).
    fn nothing() -> Settling {
        Settling {
            actual: Actual::Nothing,
            now: None,
        }
    }
}

impl Twin for Settling {
    type On = Arc<Held>;
    type Out = core::Settled;
    fn waits(&self, on: &Self::On) -> bool {
        on.limiter.waits_on_io()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<core::Settled> {
        match &self.actual {
            Actual::Units(units) => on.limiter.settle(&on.inner, *units, self.now),
            Actual::Meters(units) => on.limiter.settle_meters(&on.inner, units, self.now),
            Actual::Nothing => on.limiter.cancel(&on.inner),
        }
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<core::Settled> {
        match &self.actual {
            Actual::Units(units) => on.limiter.settle_async(&on.inner, *units, self.now).await,
            Actual::Meters(units) => {
                on.limiter
                    .settle_meters_async(&on.inner, units, self.now)
                    .await
            }
            Actual::Nothing => on.limiter.cancel_async(&on.inner).await,
        }
    }
    /// The rules' state after the settle, or None when it asked nothing of
    /// the store.
    fn deliver(&self, py: Python<'_>, on: &Self::On, out: core::Settled) -> PyResult<Py<PyAny>> {
        let decision = out.decision.clone();
        *on.settled.lock().unwrap_or_else(|p| p.into_inner()) = Some(out);
        match decision {
            Some(inner) => Ok(Py::new(py, deliver(py, inner)?)?.into_any()),
            None => Ok(py.None()),
        }
    }
}

/// `units` as an int, or, when `meters` holds any, the meters' dict.
fn per_meter<'a>(
    py: Python<'_>,
    units: u64,
    meters: impl Iterator<Item = (&'a str, u64)>,
) -> PyResult<Py<PyAny>> {
    let mut meters = meters.peekable();
    match meters.peek() {
        None => Ok(units.into_pyobject(py)?.into_any().unbind()),
        Some(_) => per_meter_dict(py, meters),
    }
}

/// Units by meter as a dict.
fn per_meter_dict<'a>(
    py: Python<'_>,
    meters: impl Iterator<Item = (&'a str, u64)>,
) -> PyResult<Py<PyAny>> {
    let dict = pyo3::types::PyDict::new(py);
    for (name, units) in meters {
        dict.set_item(name, units)?;
    }
    Ok(dict.into_any().unbind())
}

twins! {
    impl Reservation {
        /// Settles the reservation at 0: the work did not happen, every unit
        /// (of every meter) goes back.
        #[pyo3(signature = ())]
        fn cancel / acancel(self, py)
            on self.held => Settling::nothing();
    }
}

#[pymethods]
impl Reservation {
    /// Settles the reservation to `actual`, the units the work cost, in one
    /// round trip: below the estimate the difference goes back to every
    /// rule's window, as if never spent; above it the overrun is counted
    /// now (`over`), never refused. A metered limiter's reservation settles
    /// per meter: `r.settle(tokens=1234)` or `r.settle({"tokens": 1234})`
    /// (a meter not named keeps its estimate). Returns the rules' state
    /// after it, or None when nothing was asked of the store (the work
    /// cost the estimate, or the reservation was not logged). A
    /// reservation settles once: again raises ConfigurationError.
    #[pyo3(signature = (actual = None, now = None, **meters))]
    fn settle(
        &self,
        py: Python<'_>,
        actual: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        meters: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let settling = Settling::new(py, &self.held, actual, now, meters)?;
        crate::twin::blocking(py, &self.held, settling)
    }

    /// `await asettle(...)`: `settle`, as a coroutine: awaited on the running
    /// event loop without blocking it (the store's calls on this process's
    /// runtime). Cancelled, the call still runs to its end once.
    #[pyo3(signature = (actual = None, now = None, **meters))]
    fn asettle<'py>(
        &self,
        py: Python<'py>,
        actual: Option<&Bound<'_, PyAny>>,
        now: Option<&Bound<'_, PyAny>>,
        meters: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let settling = Settling::new(py, &self.held, actual, now, meters)?;
        crate::twin::awaited(py, "asettle", &self.held, settling)
    }

    /// The reservation's check: allowed, or why not.
    #[getter]
    fn decision(&self) -> Decision {
        Decision {
            inner: self.held.inner.decision.clone(),
        }
    }

    /// Whether the work may go on.
    #[getter]
    fn allowed(&self) -> bool {
        self.held.inner.decision.allowed()
    }

    /// The units reserved: an int, or a metered limiter's by meter (a dict).
    #[getter]
    fn estimate(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let inner = &self.held.inner;
        per_meter(
            py,
            inner.estimate,
            inner.estimates.iter().map(|(n, u)| (n.as_str(), *u)),
        )
    }

    /// Whether it was settled (or cancelled).
    #[getter]
    fn settled(&self) -> bool {
        self.held.inner.settled()
    }

    /// Units the settle charged over the estimate (0 before it); a metered
    /// limiter's by meter (a dict of the meters it changed).
    #[getter]
    fn over(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.settled_by(py, |s| s.over, |m| m.over)
    }

    /// Units the settle gave back (0 before it); a metered limiter's by
    /// meter (a dict of the meters it changed).
    #[getter]
    fn refunded(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.settled_by(py, |s| s.refunded, |m| m.refunded)
    }

    /// `with limiter.reserve(...) as r:` the reservation, or
    /// `RateLimitExceeded` when it was refused. Left unsettled, the
    /// reservation keeps its estimate.
    fn __enter__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        Reservation::entered(slf)
    }

    /// Leaves the reservation as it is (settled, or keeping its estimate).
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        false
    }

    /// `async with limiter.reserve(...) as r:` (or `await
    /// limiter.areserve(...)`): as `with`.
    fn __aenter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let entered = Reservation::entered(slf);
        crate::aio::coroutine(slf.py(), "__aenter__", move |_| Ok(Started::Ready(entered)))
    }

    /// As `__exit__`.
    #[pyo3(signature = (*_exc))]
    fn __aexit__<'py>(
        slf: &Bound<'py, Self>,
        _exc: &Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let stays = Ok(false
            .into_pyobject(slf.py())?
            .to_owned()
            .into_any()
            .unbind());
        crate::aio::coroutine(slf.py(), "__aexit__", move |_| Ok(Started::Ready(stays)))
    }

    fn __repr__(&self) -> String {
        let inner = &self.held.inner;
        let estimate = inner.estimate_text();
        format!(
            "<Reservation of {} {} settled={}>",
            estimate,
            if inner.decision.allowed() {
                "allowed"
            } else {
                "refused"
            },
            if inner.settled() { "True" } else { "False" }
        )
    }
}
