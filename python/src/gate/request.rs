//! A request as a Python door gives it (a WSGI environ, Django's META or
//! ASGI's header pairs, and the callables the policy names), read as the
//! core's gate reads a request's facts.

use crate::convert::{latin1_bytes, latin1_text};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};
use ratekeeper_core::gate::source::{cgi_name, joined, BodyField, Head};
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
                    Ok(text) => latin1_bytes(&text.to_cow()?),
                    Err(_) => crate::convert::key_bytes(&v)?.into_owned(),
                }),
                None => None,
            });
        }
        let mut values = Vec::new();
        for pair in self.headers.try_iter()? {
            let (k, v) = header_pair(&pair?)?;
            if k.as_bytes().eq_ignore_ascii_case(name.as_bytes()) {
                values.push(v);
            }
        }
        Ok(joined(values.iter().map(|v| v.as_bytes())))
    }
}

/// An ASGI header: a `(name, value)` pair of bytes (a tuple, or a list).
fn header_pair<'py>(
    pair: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let bad = || PyTypeError::new_err("an ASGI header must be a (name, value) pair of bytes");
    let bytes = |i: usize| -> PyResult<Bound<'py, PyBytes>> {
        pair.get_item(i)?.cast_into::<PyBytes>().map_err(|_| bad())
    };
    let is_pair = pair.is_instance_of::<PyTuple>() || pair.is_instance_of::<PyList>();
    if !is_pair || pair.len()? != 2 {
        return Err(bad());
    }
    Ok((bytes(0)?, bytes(1)?))
}

/// What the gate reads of an ASGI scope: the request's head (method, path,
/// `host` header, client address, query string) and its header pairs.
pub(super) struct Scope<'py> {
    pub(super) head: Head,
    pub(super) headers: Bound<'py, PyAny>,
}

impl<'py> Scope<'py> {
    /// Reads `scope` as an ASGI server fills it (absent fields as a request
    /// without them: GET, "/", no host, no client, no headers).
    pub(super) fn read(scope: &Bound<'py, PyDict>) -> PyResult<Scope<'py>> {
        let py = scope.py();
        let text = |name: &Bound<'py, PyString>| -> PyResult<Option<String>> {
            match scope.get_item(name)? {
                Some(v) if !v.is_none() => Ok(Some(v.extract::<String>()?)),
                _ => Ok(None),
            }
        };
        let method = text(intern!(py, "method"))?.unwrap_or_else(|| "GET".to_owned());
        let path = text(intern!(py, "path"))?
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".to_owned());
        let headers = match scope.get_item(intern!(py, "headers"))? {
            Some(h) if !h.is_none() => h,
            _ => PyList::empty(py).into_any(),
        };
        let mut host = String::new();
        for pair in headers.try_iter()? {
            let (name, value) = header_pair(&pair?)?;
            if name.as_bytes().eq_ignore_ascii_case(b"host") {
                host = latin1_text(value.as_bytes());
                break;
            }
        }
        let peer = match scope.get_item(intern!(py, "client"))? {
            Some(client) if !client.is_none() => client.get_item(0)?.extract::<String>()?,
            _ => String::new(),
        };
        let query = match scope.get_item(intern!(py, "query_string"))? {
            Some(q) if !q.is_none() => latin1_text(q.cast::<PyBytes>()?.as_bytes()),
            _ => String::new(),
        };
        Ok(Scope {
            head: Head::new(&method, path, &host, peer, query),
            headers,
        })
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
    /// What the door's body reader says of `field`: a value (str or
    /// bytes), a list or tuple of them (a repeated field), None when the
    /// body has no such field, False when the door could not read the body.
    fn body_field(&self, field: &str) -> BodyField {
        let Some(body) = self.body else {
            return BodyField::Absent;
        };
        let got = match body.call1((field,)) {
            Ok(got) => got,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                return BodyField::Absent;
            }
        };
        if got.is_instance_of::<PyBool>() && !got.is_truthy().unwrap_or(true) {
            return BodyField::Unreadable;
        }
        let values: Vec<Vec<u8>> =
            if got.is_instance_of::<PyList>() || got.is_instance_of::<PyTuple>() {
                match got.try_iter() {
                    Ok(items) => items.filter_map(|item| self.answered(item)).collect(),
                    Err(e) => {
                        self.failed.borrow_mut().get_or_insert(e);
                        Vec::new()
                    }
                }
            } else {
                self.answered(Ok(got)).into_iter().collect()
            };
        BodyField::of(values)
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
