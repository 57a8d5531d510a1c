//! Awaitables: the core's async calls run on a tokio runtime of this
//! process's own, their outcome handed to the asyncio loop that awaits them.
//!
//! An `acheck` creates a future on the running loop, holds the check for
//! the runtime and returns; the event loop never waits on Redis. The calls
//! of one turn of the loop are handed to the runtime together, by a callback
//! the first of them schedules (`loop.call_soon`): one wake of a runtime
//! thread for a turn's checks rather than one each. When the
//! check ends, the runtime thread queues its outcome for that loop and, if
//! the queue was empty, writes to an eventfd the loop watches
//! (`loop.add_reader`): it never takes the GIL, so it never waits for the
//! loop to let go of it. The loop then settles every queued future at
//! once, on its own thread. A future cancelled meanwhile (`asyncio.wait_for`,
//! a client gone) is left as it is: the check itself runs to its end once,
//! so it logs once or not at all, and its connection is the shared
//! multiplexed one, never left half-used.
//!
//! Every `a*` method returns a [`Coroutine`]: nothing runs until it is
//! first awaited (or sent to by a task), so `asyncio.run(limiter.acheck(k))`,
//! `create_task`, `TaskGroup` and `wait_for` take it as they take an `async
//! def`'s coroutine, and the loop it runs on is the one that awaits it.
//!
//! The runtime is rebuilt in a forked child (a tokio runtime's threads do
//! not survive a fork; the parent's copy is leaked, never dropped), as the
//! core's pools are; this is why the binding keeps its own runtime rather
//! than one global to every extension.

use crate::errors::{panic_message, to_py};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use pyo3::exceptions::{PyRuntimeError, PyStopIteration};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use ratekeeper_core as core;
use ratekeeper_core::process::ProcessLocal;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, OnceLock};

static RUNTIME: OnceLock<ProcessLocal<tokio::runtime::Runtime>> = OnceLock::new();
static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

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

/// What a finished call leaves for its loop: the future, and how to make
/// its result (`true`, value) or exception (`false`, exception) with the GIL.
type Done = (
    Py<PyAny>,
    Box<dyn FnOnce(Python<'_>) -> (bool, Py<PyAny>) + Send>,
);

/// A call not yet handed to the runtime.
type Job = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// One event loop's inbox: finished calls, and the eventfd that wakes it;
/// and its outbox: the calls made in the loop's current turn, handed to the
/// runtime together at its next (one wake of the runtime for all of them,
/// not one each).
struct Link {
    fd: i32,
    queue: Mutex<Vec<Done>>,
    outbox: Mutex<Vec<Job>>,
}

impl Link {
    /// Queues `done`; wakes the loop when the queue was empty (else a wake is on its way).
    fn post(&self, done: Done) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let was_empty = queue.is_empty();
        queue.push(done);
        drop(queue);
        if was_empty {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
            unsafe { libc::write(self.fd, (&one as *const u64).cast(), 8) };
        }
    }

    /// Holds `job` for the runtime; true when it is the first since the
    /// last hand-over (the caller then schedules one: [`Submit`]).
    fn hold(&self, job: Job) -> bool {
        let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        outbox.push(job);
        outbox.len() == 1
    }

    /// Hands every held call to the runtime, as one task that runs them
    /// side by side.
    fn submit(&self) {
        let jobs = std::mem::take(&mut *self.outbox.lock().unwrap_or_else(|p| p.into_inner()));
        if jobs.is_empty() {
            return;
        }
        runtime().spawn(async move {
            let mut running: FuturesUnordered<Job> = jobs.into_iter().collect();
            while running.next().await.is_some() {}
        });
    }
}

/// What `loop.call_soon` runs after a turn that made calls: hands them to
/// the runtime ([`Link::submit`]).
#[pyclass(frozen, module = "ratekeeper")]
struct Submit {
    link: Arc<Link>,
}

#[pymethods]
impl Submit {
    fn __call__(&self) {
        self.link.submit();
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // SAFETY: the eventfd is ours and closed once, here.
        unsafe { libc::close(self.fd) };
    }
}

/// The reader `loop.add_reader` calls: settles every queued future.
#[pyclass(frozen, module = "ratekeeper")]
struct Waker {
    link: Arc<Link>,
}

#[pymethods]
impl Waker {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our own eventfd (non-blocking).
        unsafe { libc::read(self.link.fd, (&mut count as *mut u64).cast(), 8) };
        let done = std::mem::take(&mut *self.link.queue.lock().unwrap_or_else(|p| p.into_inner()));
        for (future, make) in done {
            let (ok, value) = make(py);
            // one failure must not leave the other futures unsettled
            if let Err(err) = settle(future.bind(py), ok, value.bind(py)) {
                err.write_unraisable(py, None);
            }
        }
        Ok(())
    }
}

/// Settles `future` with `value` (a result when `ok`, else an exception),
/// unless it is done already (cancelled while the work ran).
fn settle(future: &Bound<'_, PyAny>, ok: bool, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if future
        .call_method0(intern!(future.py(), "done"))?
        .is_truthy()?
    {
        return Ok(());
    }
    let py = future.py();
    let method = if ok {
        intern!(py, "set_result")
    } else {
        intern!(py, "set_exception")
    };
    future.call_method1(method, (value,))?;
    Ok(())
}

/// The running loop's inbox, made (and watched by the loop) on first use.
fn link_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Link>> {
    if let Ok(waker) = event_loop.getattr(intern!(py, "_ratekeeper_waker")) {
        if let Ok(waker) = waker.cast::<Waker>() {
            return Ok(waker.get().link.clone());
        }
    }
    // SAFETY: creates a new eventfd; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let link = Arc::new(Link {
        fd,
        queue: Mutex::new(Vec::new()),
        outbox: Mutex::new(Vec::new()),
    });
    let waker = Bound::new(py, Waker { link: link.clone() })?;
    event_loop.call_method1("add_reader", (fd, waker.clone()))?;
    event_loop.setattr("_ratekeeper_waker", waker)?;
    Ok(link)
}

fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let get = GET_RUNNING_LOOP.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("asyncio")?.getattr("get_running_loop")?.unbind())
    })?;
    get.bind(py).call0()
}

/// An awaitable of `work`, run on the runtime; `deliver` turns its result
/// into a Python value (with the GIL, on the loop's thread).
pub fn spawn<'py, T, W, D>(py: Python<'py>, work: W, deliver: D) -> PyResult<Bound<'py, PyAny>>
where
    T: Send + 'static,
    W: Future<Output = core::Result<T>> + Send + 'static,
    D: FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let event_loop = running_loop(py)?;
    let future = event_loop.call_method0(intern!(py, "create_future"))?;
    let link = link_for(py, &event_loop)?;
    let future_ref = future.clone().unbind();
    let held = link.clone();
    let job: Job = Box::pin(async move {
        let outcome = AssertUnwindSafe(work).catch_unwind().await;
        let make = move |py: Python<'_>| -> (bool, Py<PyAny>) {
            match outcome {
                Ok(Ok(value)) => match deliver(py, value) {
                    Ok(value) => (true, value),
                    Err(err) => (false, err.into_value(py).into_any()),
                },
                Ok(Err(err)) => (false, to_py(py, err).into_value(py).into_any()),
                Err(panic) => {
                    let err = crate::errors::internal_error(py, panic_message(&panic));
                    (false, err.into_value(py).into_any())
                }
            }
        };
        link.post((future_ref, Box::new(make)));
    });
    if held.hold(job) {
        let scheduled = Bound::new(py, Submit { link: held.clone() })
            .and_then(|submit| event_loop.call_method1(intern!(py, "call_soon"), (submit,)));
        if scheduled.is_err() {
            held.submit(); // (a running loop takes callbacks: not seen)
        }
    }
    Ok(future)
}

/// What a coroutine's first step comes to: its value at once (a call that
/// does not wait on the store), or a future of the running loop to wait on.
pub enum Started {
    /// The call's outcome, made on the loop's thread.
    Ready(PyResult<Py<PyAny>>),
    /// A future the runtime settles ([`spawn`]).
    Waiting(Py<PyAny>),
}

/// A coroutine's first step, made on the loop that awaits it.
type Start = Box<dyn FnOnce(Python<'_>) -> PyResult<Started> + Send>;

/// Where a [`Coroutine`] is.
enum State {
    Created(Start),
    Waiting(Py<PyAny>),
    Done,
}

/// The coroutine an `a*` method returns (`collections.abc.Coroutine`: it
/// has `send`, `throw`, `close` and `__await__`). Its call starts at the
/// first step, on the loop that runs it; cancelled (`throw`) or closed
/// while it waits, the call itself still runs to its end once.
#[pyclass(frozen, module = "ratekeeper", name = "Coroutine")]
pub struct Coroutine {
    name: &'static str,
    state: Mutex<State>,
}

impl Coroutine {
    /// The next step: the future to wait on, or the outcome as
    /// `StopIteration(value)` (or the call's exception).
    fn step(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let state = std::mem::replace(&mut *self.lock(), State::Done);
        let future = match state {
            State::Created(start) => match start(py)? {
                Started::Ready(value) => return Err(PyStopIteration::new_err((value?,))),
                Started::Waiting(future) => future,
            },
            State::Waiting(future) => future,
            State::Done => {
                return Err(PyRuntimeError::new_err(format!(
                    "cannot reuse already awaited coroutine {}",
                    self.name
                )))
            }
        };
        let bound = future.bind(py);
        if bound.call_method0(intern!(py, "done"))?.is_truthy()? {
            let value = bound.call_method0(intern!(py, "result"))?;
            return Err(PyStopIteration::new_err((value.unbind(),)));
        }
        // as an asyncio future's own `__await__` does: the task waits on it
        bound.setattr(intern!(py, "_asyncio_future_blocking"), true)?;
        *self.lock() = State::Waiting(future.clone_ref(py));
        Ok(future)
    }

    /// Ends it: a future still waited on is cancelled (the call runs on).
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        if let State::Waiting(future) = std::mem::replace(&mut *self.lock(), State::Done) {
            future.bind(py).call_method0(intern!(py, "cancel"))?;
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl Coroutine {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.step(py)
    }

    /// Runs the next step (the value sent is not used: a step only waits).
    fn send(&self, py: Python<'_>, _value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.step(py)
    }

    /// Raises where it waits, ending it, as a coroutine's `throw` does: the
    /// exception `typ`, or `val` when it is one (an instance of the class
    /// `typ`), or `typ(val)`; with the traceback `tb` when given.
    #[pyo3(signature = (typ, val = None, tb = None))]
    fn throw(
        &self,
        py: Python<'_>,
        typ: &Bound<'_, PyAny>,
        val: Option<&Bound<'_, PyAny>>,
        tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.finish(py)?;
        let mut raised = match val.filter(|val| !val.is_none()) {
            Some(val) if val.is_instance_of::<pyo3::exceptions::PyBaseException>() => val.clone(),
            Some(val) if typ.is_instance_of::<pyo3::types::PyType>() => typ.call1((val,))?,
            _ => typ.clone(),
        };
        if let Some(tb) = tb.filter(|tb| !tb.is_none()) {
            if raised.is_instance_of::<pyo3::types::PyType>() {
                raised = raised.call0()?;
            }
            raised = raised.call_method1(intern!(py, "with_traceback"), (tb,))?;
        }
        Err(PyErr::from_value(raised))
    }

    /// Ends it where it waits.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.finish(py)
    }

    fn __repr__(&self) -> String {
        format!("<ratekeeper coroutine {}>", self.name)
    }

    #[getter]
    fn __name__(&self) -> &'static str {
        self.name
    }

    #[getter]
    fn __qualname__(&self) -> &'static str {
        self.name
    }
}

impl Drop for Coroutine {
    /// A coroutine never run warns as an `async def`'s does: a forgotten
    /// `await` would otherwise check nothing, silently.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if matches!(state, State::Created(_)) {
            Python::attach(|py| {
                let message = format!("coroutine '{}' was never awaited", self.name);
                if let Ok(message) = std::ffi::CString::new(message) {
                    let warning = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
                    if let Err(err) = PyErr::warn(py, &warning, &message, 1) {
                        err.write_unraisable(py, None);
                    }
                }
            });
        }
    }
}

/// A coroutine named `name` whose first step is `start`.
pub fn coroutine<'py>(
    py: Python<'py>,
    name: &'static str,
    start: impl FnOnce(Python<'_>) -> PyResult<Started> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    let made = Coroutine {
        name,
        state: Mutex::new(State::Created(Box::new(start))),
    };
    Ok(Bound::new(py, made)?.into_any())
}
