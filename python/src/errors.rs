//! The Python exception hierarchy and the mapping from core errors to it.
//!
//! `RateKeeperError(Exception)`; `ConfigurationError(RateKeeperError, ValueError)`;
//! `StorageError(RateKeeperError)`. A panic in the core never reaches Python
//! as a `PanicException`: it becomes a `RateKeeperError`.

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use ratekeeper_core::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};

static RATEKEEPER_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CONFIGURATION_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static STORAGE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static RATE_LIMIT_EXCEEDED: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn new_class<'py>(
    py: Python<'py>,
    name: &str,
    bases: &[Bound<'py, PyAny>],
    doc: &str,
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "ratekeeper")?;
    namespace.set_item("__doc__", doc)?;
    let class = py
        .get_type::<PyType>()
        .call1((name, PyTuple::new(py, bases)?, namespace))?;
    Ok(class.cast_into::<PyType>()?.unbind())
}

/// Creates the exception classes and adds them to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let base = new_class(
        py,
        "RateKeeperError",
        &[py.get_type::<PyException>().into_any()],
        "Base class of every error ratekeeper raises.",
    )?;
    let config = new_class(
        py,
        "ConfigurationError",
        &[
            base.bind(py).clone().into_any(),
            py.get_type::<PyValueError>().into_any(),
        ],
        "Bad rules, store URL, option or argument; the message names the offending text.",
    )?;
    let storage = new_class(
        py,
        "StorageError",
        &[base.bind(py).clone().into_any()],
        "The store could not answer (unreachable, timed out) and on_error is 'raise'.",
    )?;
    let exceeded = new_class(
        py,
        "RateLimitExceeded",
        &[base.bind(py).clone().into_any()],
        "No slot: a wait (acquire, limited) timed out, or the cost can never pass; `decision` is the last denial.",
    )?;
    m.add("RateLimitExceeded", exceeded.bind(py))?;
    let _ = RATE_LIMIT_EXCEEDED.set(py, exceeded);
    m.add("RateKeeperError", base.bind(py))?;
    m.add("ConfigurationError", config.bind(py))?;
    m.add("StorageError", storage.bind(py))?;
    let _ = RATEKEEPER_ERROR.set(py, base);
    let _ = CONFIGURATION_ERROR.set(py, config);
    let _ = STORAGE_ERROR.set(py, storage);
    Ok(())
}

fn raise(py: Python<'_>, class: &PyOnceLock<Py<PyType>>, message: String) -> PyErr {
    match class.get(py) {
        Some(class) => PyErr::from_type(class.bind(py).clone(), message),
        None => PyException::new_err(message),
    }
}

/// A core error as the matching Python exception.
pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    match err {
        Error::Config(message) => raise(py, &CONFIGURATION_ERROR, message),
        storage @ Error::Storage(_) => raise(py, &STORAGE_ERROR, storage.to_string()),
    }
}

/// A `ConfigurationError` with this message.
pub fn config_error(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, &CONFIGURATION_ERROR, message.into())
}

/// A `RateLimitExceeded` carrying `decision` (as its attribute of that name).
pub fn rate_limit_exceeded(py: Python<'_>, message: String, decision: Py<PyAny>) -> PyErr {
    let err = raise(py, &RATE_LIMIT_EXCEEDED, message);
    if let Err(e) = err.value(py).setattr("decision", decision) {
        return e;
    }
    err
}

/// A `RateKeeperError` for a panic caught in the core.
pub fn internal_error(py: Python<'_>, message: String) -> PyErr {
    raise(py, &RATEKEEPER_ERROR, format!("internal error: {message}"))
}

/// Runs core code, turning its errors and any panic into Python exceptions.
pub fn guard<T>(py: Python<'_>, f: impl FnOnce() -> Result<T, Error>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result.map_err(|e| to_py(py, e)),
        Err(panic) => Err(raise(
            py,
            &RATEKEEPER_ERROR,
            format!("internal error: {}", panic_message(&panic)),
        )),
    }
}

/// The text of a caught panic.
pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}
