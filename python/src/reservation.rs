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
    actual: u64,
    now: Option<f64>,
}

impl Twin for Settling {
    type On = Arc<Held>;
    type Out = core::Settled;
    fn waits(&self, on: &Self::On) -> bool {
        on.limiter.waits_on_io()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<core::Settled> {
        on.limiter.settle(&on.inner, self.actual, self.now)
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<core::Settled> {
        on.limiter
            .settle_async(&on.inner, self.actual, self.now)
            .await
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

twins! {
    impl Reservation {
        /// Settles the reservation to `actual`, the units the work cost, in one
        /// round trip: below the estimate the difference goes back to every
        /// rule's window, as if never spent; above it the overrun is counted
        /// now (`over`), never refused. Returns the rules' state after it, or
        /// None when nothing was asked of the store (the work cost the
        /// estimate, or the reservation was not logged). A reservation settles
        /// once: again raises ConfigurationError.
        #[pyo3(signature = (actual, now = None))]
        fn settle / asettle(self, py, actual: &Bound<'_, PyAny>, now: Option<&Bound<'_, PyAny>>)
            on self.held => Settling { actual: crate::convert::actual_cost(py, actual)?, now: crate::convert::now(now)? };

        /// Settles the reservation at 0: the work did not happen, every unit
        /// goes back.
        #[pyo3(signature = ())]
        fn cancel / acancel(self, py)
            on self.held => Settling { actual: 0, now: None };
    }
}

#[pymethods]
impl Reservation {
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

    /// The units reserved.
    #[getter]
    fn estimate(&self) -> u64 {
        self.held.inner.estimate
    }

    /// Whether it was settled (or cancelled).
    #[getter]
    fn settled(&self) -> bool {
        self.held.inner.settled()
    }

    /// Units the settle charged over the estimate (0 before it).
    #[getter]
    fn over(&self) -> u64 {
        self.done().map_or(0, |s| s.over)
    }

    /// Units the settle gave back (0 before it).
    #[getter]
    fn refunded(&self) -> u64 {
        self.done().map_or(0, |s| s.refunded)
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
        format!(
            "<Reservation of {} {} settled={}>",
            inner.estimate,
            if inner.decision.allowed() {
                "allowed"
            } else {
                "refused"
            },
            if inner.settled() { "True" } else { "False" }
        )
    }
}
