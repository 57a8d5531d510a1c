//! One definition for a method that blocks and its awaited twin (`check`
//! and `acheck`, `block` and `ablock`...). A [`Twin`] is the core call a
//! method makes, taken from its arguments once; [`blocking`] makes it on the
//! caller's thread (without the GIL when it may wait on the store),
//! [`awaited`] returns a coroutine that makes it on the runtime (at once, on
//! the loop, when it would not wait), and both hand its outcome to Python by [`Twin::deliver`]. The
//! [`twins!`](crate::twins) macro writes both methods of each pair from one
//! signature and one expression that makes the call; `scripts/stubs` writes
//! the awaited twins' stubs from the blocking ones'.

use crate::aio::Started;
use crate::call::run_core;
use pyo3::prelude::*;
use ratekeeper_core as core;
use std::future::Future;
use std::sync::Arc;

/// A call of the core that a blocking method and its awaited twin both
/// make, on the core object its Python object wraps (a limiter, an admin,
/// a gate: [`Twin::On`]), which a blocking call borrows and an awaited one
/// clones.
pub trait Twin: Send + Sync + 'static {
    /// What the call is made on.
    type On: Clone + Send + Sync + 'static;
    /// What the core call comes to.
    type Out: Send + 'static;

    /// Whether the call may wait on the store (a blocking call then lets
    /// go of the GIL; an awaited one runs on the runtime).
    fn waits(&self, on: &Self::On) -> bool;

    /// The call, blocking this thread.
    fn blocking(&self, on: &Self::On) -> core::Result<Self::Out>;

    /// The call, awaited.
    fn awaited<'a>(
        &'a self,
        on: &'a Self::On,
    ) -> impl Future<Output = core::Result<Self::Out>> + Send + 'a;

    /// Its outcome as a Python value (with the GIL).
    fn deliver(&self, py: Python<'_>, on: &Self::On, out: Self::Out) -> PyResult<Py<PyAny>>;

    /// The exception a failed blocking call raises (by default the core
    /// error's own).
    fn failed(&self, _py: Python<'_>, err: PyErr) -> PyErr {
        err
    }
}

/// Makes `call` on `on` on this thread and delivers its outcome.
pub fn blocking<T: Twin>(py: Python<'_>, on: &T::On, call: T) -> PyResult<Py<PyAny>> {
    match run_core(py, call.waits(on), || call.blocking(on)) {
        Ok(out) => call.deliver(py, on, out),
        Err(err) => Err(call.failed(py, err)),
    }
}

/// A coroutine of `call` on `on`, named `name`: at its first step, made on
/// the runtime when it may wait on the store, else at once on the loop.
pub fn awaited<'py, T: Twin>(
    py: Python<'py>,
    name: &'static str,
    on: &T::On,
    call: T,
) -> PyResult<Bound<'py, PyAny>> {
    let on = on.clone();
    crate::aio::coroutine(py, name, move |py| {
        if !call.waits(&on) {
            let value = run_core(py, false, || call.blocking(&on))
                .and_then(|out| call.deliver(py, &on, out));
            return Ok(Started::Ready(value));
        }
        let made = Arc::new((on, call));
        let delivered = made.clone();
        crate::aio::spawn(
            py,
            async move { made.1.awaited(&made.0).await },
            move |py, out| delivered.1.deliver(py, &delivered.0, out),
        )
        .map(|future| Started::Waiting(future.unbind()))
    })
}

/// Writes, into an `#[pymethods]` block of its own, each pair of a
/// blocking method and its awaited twin (`a` + its name) from one
/// signature: both take the same arguments and make the [`Twin`] that
/// `=> expression` builds from them (with `self` and `py` in reach) on the
/// core object `on` names; the blocking one returns its outcome, the
/// awaited one an awaitable of it.
///
/// ```ignore
/// twins! {
///     impl Limiter {
///         /// Forgets everything logged for `key` by this limiter.
///         #[pyo3(signature = (key))]
///         fn reset / areset(self, py, key: &Bound<'_, PyAny>) on self.inner
///             => Resetting { key: convert::key_bytes(key)?.into_owned() };
///     }
/// }
/// ```
#[macro_export]
macro_rules! twins {
    (impl $class:ident {
        $(
            $(#[doc = $doc:literal])*
            #[pyo3(signature = $sig:tt)]
            fn $name:ident / $aname:ident ($self:ident, $py:ident $(, $arg:ident : $ty:ty)* $(,)?)
                on $on:expr => $call:expr;
        )*
    }) => {
        #[pyo3::pymethods]
        impl $class {
            $(
                $(#[doc = $doc])*
                #[pyo3(signature = $sig)]
                #[allow(clippy::too_many_arguments)]
                fn $name(&$self, $py: pyo3::Python<'_> $(, $arg: $ty)*) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                    $crate::twin::blocking($py, &$on, $call)
                }

                #[doc = concat!("`await ", stringify!($aname), "(...)`: `", stringify!($name),
                                "`, as a coroutine: awaited on the running event loop without blocking it (the store's calls ",
                                "on this process's runtime). Cancelled, the call still runs to its end once.")]
                #[pyo3(signature = $sig)]
                #[allow(clippy::too_many_arguments)]
                fn $aname<'py>(&$self, $py: pyo3::Python<'py> $(, $arg: $ty)*) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                    $crate::twin::awaited($py, stringify!($aname), &$on, $call)
                }
            )*
        }
    };
}
