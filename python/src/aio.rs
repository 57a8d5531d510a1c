//! Awaitables: the core's async calls run on a tokio runtime of this
//! process's own, their outcome handed to the asyncio loop that awaits them.
//!
//! An `acheck` creates a future on the running loop, spawns the check on
//! the runtime and returns; the event loop never waits on Redis. When the
//! check ends, a runtime thread takes the GIL for a moment to settle the
//! future with `loop.call_soon_threadsafe`. A future cancelled meanwhile
//! (`asyncio.wait_for`, a client gone) is left as it is: the check itself
//! runs to its end once, so it logs once or not at all, and its connection
//! is the shared multiplexed one, never left half-used.
//!
//! The runtime is rebuilt in a forked child (a tokio runtime's threads do
//! not survive a fork; the parent's copy is leaked, never dropped), as the
//! core's pools are; this is why the binding keeps its own runtime rather
//! than one global to every extension.

use crate::errors::{panic_message, to_py};
use futures_util::FutureExt;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyCFunction;
use ratekeeper_core as core;
use ratekeeper_core::process::ProcessLocal;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;

static RUNTIME: OnceLock<ProcessLocal<tokio::runtime::Runtime>> = OnceLock::new();
static SETTLE: PyOnceLock<Py<PyCFunction>> = PyOnceLock::new();

/// This process's runtime (two worker threads: the work is waiting on Redis).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    RUNTIME
        .get_or_init(|| {
            ProcessLocal::new(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("ratekeeper-aio")
                    .enable_all()
                    .build()
                    .expect("a tokio runtime")
            })
        })
        .get()
}

/// Settles `future` with `value` (a result when `ok`, else an exception),
/// unless it is already done (cancelled while the work ran).
#[pyfunction]
fn settle(future: &Bound<'_, PyAny>, ok: bool, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if future.call_method0("done")?.is_truthy()? {
        return Ok(());
    }
    if ok {
        future.call_method1("set_result", (value,))?;
    } else {
        future.call_method1("set_exception", (value,))?;
    }
    Ok(())
}

fn settler(py: Python<'_>) -> PyResult<&Py<PyCFunction>> {
    SETTLE.get_or_try_init(py, || Ok(wrap_pyfunction!(settle, py)?.unbind()))
}

/// A future of the running loop, already holding `value`.
pub fn ready<'py>(py: Python<'py>, value: PyResult<Py<PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    let future = py
        .import("asyncio")?
        .call_method0("get_running_loop")?
        .call_method0("create_future")?;
    match value {
        Ok(value) => future.call_method1("set_result", (value,))?,
        Err(err) => future.call_method1("set_exception", (err.into_value(py),))?,
    };
    Ok(future)
}

/// An awaitable of `work`, run on the runtime; `deliver` turns its result
/// into a Python value (with the GIL, on a runtime thread).
pub fn spawn<'py, T, W, D>(py: Python<'py>, work: W, deliver: D) -> PyResult<Bound<'py, PyAny>>
where
    T: Send + 'static,
    W: Future<Output = core::Result<T>> + Send + 'static,
    D: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let future = event_loop.call_method0("create_future")?;
    let settle = settler(py)?.clone_ref(py);
    let (event_loop_ref, future_ref) = (event_loop.unbind(), future.clone().unbind());
    runtime().spawn(async move {
        let outcome = AssertUnwindSafe(work).catch_unwind().await;
        Python::attach(|py| {
            let (ok, value) = match outcome {
                Ok(Ok(value)) => match deliver(py, value) {
                    Ok(value) => (true, value),
                    Err(err) => (false, err.into_value(py).into_any()),
                },
                Ok(Err(err)) => (false, to_py(py, err).into_value(py).into_any()),
                Err(panic) => {
                    let err = crate::errors::internal_error(py, panic_message(&panic));
                    (false, err.into_value(py).into_any())
                }
            };
            // a closed loop has nobody to tell
            let _ = event_loop_ref.call_method1(
                py,
                "call_soon_threadsafe",
                (settle, future_ref, ok, value),
            );
        });
    });
    Ok(future)
}
