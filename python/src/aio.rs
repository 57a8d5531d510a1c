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
//! The runtime is rebuilt in a forked child (a tokio runtime's threads do
//! not survive a fork; the parent's copy is leaked, never dropped), as the
//! core's pools are; this is why the binding keeps its own runtime rather
//! than one global to every extension.

use crate::errors::{panic_message, to_py};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
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

/// A future of the running loop, already holding `value`.
pub fn ready<'py>(py: Python<'py>, value: PyResult<Py<PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    let future = running_loop(py)?.call_method0(intern!(py, "create_future"))?;
    match value {
        Ok(value) => future.call_method1("set_result", (value,))?,
        Err(err) => future.call_method1("set_exception", (err.into_value(py),))?,
    };
    Ok(future)
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
