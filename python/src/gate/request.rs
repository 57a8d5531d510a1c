//! A request as a Python door gives it (a WSGI environ, Django's META or
//! ASGI's header pairs, and the callables the policy names), read as the
//! core's gate reads a request's facts.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};
use ratekeeper_core::gate::source::{cgi_name, joined, Head};
use ratekeeper_core::gate::Facts;

/// A request as a Python door gives it.
pub(super) struct Request<'a, 'py> {
    pub(super) py: Python<'py>,
    pub(super) head: Head,
    pub(super) headers: &'a Bound<'py, PyAny>,
    pub(super) context: &'a Bound<'py, PyAny>,
    pub(super) body: Option<&'a Bound<'py, PyAny>>,
    pub(super) user: Option<&'a Bound<'py, PyAny>>,
    pub(super) cost: u64,
    pub(super) callables: &'a [Py<PyAny>],
    /// The first error a callable raised (it ends the decision).
    pub(super) failed: std::cell::RefCell<Option<PyErr>>,
}

impl Request<'_, '_> {
    /// `Some(value)` of a door's answer: str as UTF-8, bytes as they are,
    /// None and "" as none; an error is kept for the caller.
    fn answered(&self, got: PyResult<Bound<'_, PyAny>>) -> Option<Vec<u8>> {
        let got = match got {
            Ok(got) => got,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                return None;
            }
        };
        if got.is_none() {
            return None;
        }
        match crate::convert::key_bytes(&got) {
            Ok(bytes) => Some(bytes.into_owned()),
            Err(_) if got.is_instance_of::<PyBool>() => {
                got.is_truthy().ok()?.then(|| b"1".to_vec())
            }
            Err(_) => got.str().ok().map(|s| s.to_string().into_bytes()),
        }
    }

    /// A header from a WSGI environ or Django META (`HTTP_X_API_KEY`), or
    /// from a list of `(name, value)` pairs (ASGI's, as bytes).
    fn lookup(&self, name: &str) -> PyResult<Option<Vec<u8>>> {
        if let Ok(environ) = self.headers.cast::<PyDict>() {
            return Ok(match environ.get_item(cgi_name(name))? {
                Some(v) => Some(match v.cast::<PyString>() {
                    // WSGI gives header bytes decoded as Latin-1: the bytes as they came
                    Ok(text) => text
                        .to_cow()?
                        .chars()
                        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                        .collect(),
                    Err(_) => crate::convert::key_bytes(&v)?.into_owned(),
                }),
                None => None,
            });
        }
        let mut values = Vec::new();
        for pair in self.headers.try_iter()? {
            let (k, v): (Vec<u8>, Vec<u8>) = pair?.extract()?;
            if k.eq_ignore_ascii_case(name.as_bytes()) {
                values.push(v);
            }
        }
        Ok(joined(values.iter().map(Vec::as_slice)))
    }
}

impl Facts for Request<'_, '_> {
    fn head(&self) -> &Head {
        &self.head
    }
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        match self.lookup(name) {
            Ok(found) => found,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                None
            }
        }
    }
    fn body_field(&self, field: &str) -> Option<String> {
        let got = self.answered(self.body?.call1((field,)))?;
        Some(String::from_utf8_lossy(&got).into_owned())
    }
    fn user(&self) -> Option<String> {
        let got = self.answered(self.user?.call0())?;
        Some(String::from_utf8_lossy(&got).into_owned())
    }
    fn call(&self, index: usize) -> Option<Vec<u8>> {
        let callable = self.callables.get(index)?.bind(self.py);
        self.answered(callable.call1((self.context,)))
    }
    fn cost(&self) -> u64 {
        self.cost
    }
}

/// What a door may give of a request besides its head and headers.
#[derive(Default)]
pub(super) struct Parts<'a, 'py> {
    pub(super) context: Option<&'a Bound<'py, PyAny>>,
    pub(super) body: Option<&'a Bound<'py, PyAny>>,
    pub(super) user: Option<&'a Bound<'py, PyAny>>,
    pub(super) cost: Option<&'a Bound<'py, PyAny>>,
}
