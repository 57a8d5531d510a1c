//! `Lease`: a slot of an in-flight rule taken by `Limiter.hold` (see
//! `ratekeeper_core::in_flight`), released by its holder or lapsing; a
//! context manager, sync and async, that releases it at the block's end.

use crate::aio::Started;
use crate::twin::Twin;
use crate::twins;
use crate::types::Decision;
use pyo3::prelude::*;
use ratekeeper_core as core;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A hold and the limiter that made it; whether its holder released it.
pub struct Holder {
    limiter: Arc<core::Limiter>,
    inner: core::Hold,
    released: AtomicBool,
}

/// A slot held (or refused) by `Limiter.hold`: release it when the work ends.
#[pyclass(frozen, module = "ratekeeper")]
pub struct Lease {
    holder: Arc<Holder>,
}

impl Lease {
    /// The hold `inner` that `limiter` made.
    pub fn wrap(limiter: Arc<core::Limiter>, inner: core::Hold) -> Lease {
        Lease {
            holder: Arc::new(Holder {
                limiter,
                inner,
                released: AtomicBool::new(false),
            }),
        }
    }

    /// `self`, or `RateLimitExceeded` (with `.decision`) when refused.
    fn entered(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let inner = &slf.get().holder.inner;
        match inner.refusal() {
            None => Ok(slf.clone().into_any().unbind()),
            Some(why) => {
                let decision = Decision {
                    inner: inner.decision.clone(),
                };
                let decision = Py::new(slf.py(), decision)?.into_any();
                Err(crate::errors::rate_limit_exceeded(slf.py(), why, decision))
            }
        }
    }
}

/// A release (`extend_ms` None) or an extension of the lease.
struct Leasing {
    extend_ms: Option<u64>,
    /// A `with` block's end: the answer is False (no exception is swallowed).
    exiting: bool,
}

impl Leasing {
    fn release() -> Leasing {
        Leasing {
            extend_ms: None,
            exiting: false,
        }
    }

    fn exit() -> Leasing {
        Leasing {
            extend_ms: None,
            exiting: true,
        }
    }
}

impl Leasing {
    fn extension(py: Python<'_>, holder: &Holder, lease: Option<f64>) -> PyResult<Leasing> {
        let ms = match lease {
            Some(seconds) => crate::errors::guard(py, || core::in_flight::lease_ms_from(seconds))?,
            None => holder.limiter.lease_ms(),
        };
        Ok(Leasing {
            extend_ms: Some(ms),
            exiting: false,
        })
    }
}

impl Twin for Leasing {
    type On = Arc<Holder>;
    /// Released: whether it was held; extended: its new lapse time (ms).
    type Out = Option<u64>;
    fn waits(&self, on: &Self::On) -> bool {
        on.limiter.waits_on_io()
    }
    fn blocking(&self, on: &Self::On) -> core::Result<Option<u64>> {
        let Some(lease) = &on.inner.lease else {
            return Ok(None);
        };
        match self.extend_ms {
            Some(ms) => on.limiter.extend(lease, Some(ms)),
            None if on.released.swap(true, Ordering::AcqRel) => Ok(None),
            None => Ok(on.limiter.release(lease)?.then_some(1)),
        }
    }
    async fn awaited(&self, on: &Self::On) -> core::Result<Option<u64>> {
        let Some(lease) = &on.inner.lease else {
            return Ok(None);
        };
        match self.extend_ms {
            Some(ms) => on.limiter.extend_async(lease, Some(ms)).await,
            None if on.released.swap(true, Ordering::AcqRel) => Ok(None),
            None => Ok(on.limiter.release_async(lease).await?.then_some(1)),
        }
    }
    fn deliver(&self, py: Python<'_>, _: &Self::On, out: Option<u64>) -> PyResult<Py<PyAny>> {
        Ok(match self.extend_ms {
            None if self.exiting => false.into_pyobject(py)?.to_owned().into_any().unbind(),
            None => out
                .is_some()
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind(),
            Some(_) => match out {
                Some(ms) => seconds(ms).into_pyobject(py)?.into_any().unbind(),
                None => py.None(),
            },
        })
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

twins! {
    impl Lease {
        /// Gives the slot back: True when it was still held (False when it
        /// lapsed, was released already, here or in another process, or
        /// when the hold took none).
        #[pyo3(signature = ())]
        fn release / arelease(self, py)
            on self.holder => Leasing::release();

        /// Makes the lease lapse `lease` seconds from now (the limiter's
        /// lease when None), for work that runs longer: its new lapse time
        /// (seconds since the epoch), or None when it lapsed or was released.
        #[pyo3(signature = (lease = None))]
        fn extend / aextend(self, py, lease: Option<f64>)
            on self.holder => Leasing::extension(py, &self.holder, lease)?;
    }
}

#[pymethods]
impl Lease {
    /// The hold's decision: allowed, or why not (`in_flight`: the slots held).
    #[getter]
    fn decision(&self) -> Decision {
        Decision {
            inner: self.holder.inner.decision.clone(),
        }
    }

    /// Whether the work may go on.
    #[getter]
    fn allowed(&self) -> bool {
        self.holder.inner.decision.allowed()
    }

    /// The lease's id (None when the hold took no slot).
    #[getter]
    fn id(&self) -> Option<&str> {
        self.holder.inner.lease.as_ref().map(|l| l.id.as_str())
    }

    /// When the lease lapses unless extended (seconds since the epoch, the
    /// store's clock; None when the hold took no slot). An extension's
    /// new time is what `extend` returns.
    #[getter]
    fn lapse_at(&self) -> Option<f64> {
        self.holder
            .inner
            .lease
            .as_ref()
            .map(|l| seconds(l.lapse_at_ms))
    }

    /// When the slot was taken (seconds since the epoch; None without one).
    #[getter]
    fn taken_at(&self) -> Option<f64> {
        self.holder
            .inner
            .lease
            .as_ref()
            .map(|l| seconds(l.taken_at_ms))
    }

    /// Whether its holder released it here.
    #[getter]
    fn released(&self) -> bool {
        self.holder.released.load(Ordering::Acquire)
    }

    /// `with limiter.hold(key) as lease:` the lease, or `RateLimitExceeded`
    /// when it was refused.
    fn __enter__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        Lease::entered(slf)
    }

    /// Releases the lease (an error releasing it is logged: the lease lapses).
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        if let Err(err) = crate::twin::blocking(py, &self.holder, Leasing::exit()) {
            crate::call::log_warning(
                py,
                &format!("the lease was not released ({err}); it lapses"),
            )?;
        }
        Ok(false)
    }

    /// `async with limiter.ahold(...) as lease:` as `with`.
    fn __aenter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let entered = Lease::entered(slf);
        crate::aio::coroutine(slf.py(), "__aenter__", move |_| Ok(Started::Ready(entered)))
    }

    /// Releases the lease, awaited.
    #[pyo3(signature = (*_exc))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc: &Bound<'py, pyo3::types::PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::twin::awaited(py, "__aexit__", &self.holder, Leasing::exit())
    }

    fn __repr__(&self) -> String {
        let inner = &self.holder.inner;
        match &inner.lease {
            Some(lease) => format!(
                "<Lease {} lapse_at={} released={}>",
                lease.id,
                seconds(lease.lapse_at_ms),
                if self.released() { "True" } else { "False" }
            ),
            None if inner.decision.allowed() => "<Lease allowed, no slot taken>".to_owned(),
            None => "<Lease refused>".to_owned(),
        }
    }
}
