//! A request's facts as the Rack middleware hands them to the gate: its
//! head, the env's headers, and the door's callables (a key, a body field,
//! the user), whose first exception is kept to be raised.

use crate::kept::Kept;
use magnus::{prelude::*, Error, RArray, RHash, RString, Ruby, Value};
use ratekeeper_core::gate::source::{cgi_name, BodyField, Head};
use ratekeeper_core::gate::Facts;
use std::cell::RefCell;

/// The env's key of each header name the gate asked for (`HTTP_X_API_KEY`
/// of `x-api-key`), made once and kept for the process, so that a request's
/// lookups make none: a policy's names and `x-forwarded-for`, at most 256.
static ENV_KEYS: Kept = Kept::new(256);

/// The env's key of header `name`.
fn env_key(ruby: &Ruby, name: &str) -> RString {
    ENV_KEYS.get(ruby, name, cgi_name)
}

/// A request as the Rack middleware gives it.
pub(super) struct Request<'r> {
    pub(super) ruby: &'r Ruby,
    pub(super) head: Head,
    pub(super) env: RHash,
    pub(super) context: Value,
    pub(super) callables: RArray,
    pub(super) body: Value,
    pub(super) user: Value,
    pub(super) cost: u64,
    pub(super) failed: RefCell<Option<Error>>,
}

impl Request<'_> {
    /// A door's answer: a String as its bytes, nil and false as none, true
    /// as "1", anything else as its `to_s`; an exception is kept.
    fn answered(&self, got: Result<Value, Error>) -> Option<Vec<u8>> {
        let got = match got {
            Ok(got) => got,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                return None;
            }
        };
        if got.is_nil() || got.is_kind_of(self.ruby.class_false_class()) {
            return None;
        }
        if got.is_kind_of(self.ruby.class_true_class()) {
            return Some(b"1".to_vec());
        }
        let text = match RString::from_value(got) {
            Some(s) => s,
            None => match got.funcall::<_, _, RString>("to_s", ()) {
                Ok(s) => s,
                Err(e) => {
                    self.failed.borrow_mut().get_or_insert(e);
                    return None;
                }
            },
        };
        // SAFETY: the bytes are copied before any Ruby code can run.
        Some(unsafe { text.as_slice() }.to_vec())
    }
}

impl Facts for Request<'_> {
    fn head(&self) -> &Head {
        &self.head
    }
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        let found: Option<RString> = self.env.lookup(env_key(self.ruby, name)).ok()?;
        // SAFETY: the bytes are copied before any Ruby code can run.
        found.map(|s| unsafe { s.as_slice() }.to_vec())
    }
    /// What the door's body reader says of `field`: a value (a String),
    /// an Array of them (a repeated field), nil when the body has no such
    /// field, false when the door could not read the body.
    fn body_field(&self, field: &str) -> BodyField {
        if self.body.is_nil() {
            return BodyField::Absent;
        }
        let got: Value = match self.body.funcall("call", (field,)) {
            Ok(got) => got,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                return BodyField::Absent;
            }
        };
        if got.is_kind_of(self.ruby.class_false_class()) {
            return BodyField::Unreadable;
        }
        let values: Vec<Vec<u8>> = match RArray::from_value(got) {
            Some(items) => items
                .into_iter()
                .filter_map(|item| self.answered(Ok(item)))
                .collect(),
            None => self.answered(Ok(got)).into_iter().collect(),
        };
        BodyField::of(values)
    }
    fn user(&self) -> Option<String> {
        if self.user.is_nil() {
            return None;
        }
        let got = self.answered(self.user.funcall("call", ()))?;
        Some(String::from_utf8_lossy(&got).into_owned())
    }
    fn call(&self, index: usize) -> Option<Vec<u8>> {
        let callable = self.callables.entry::<Value>(index as isize).ok()?;
        self.answered(callable.funcall("call", (self.context,)))
    }
    fn cost(&self) -> u64 {
        self.cost
    }
}

/// A fact of a request's head as text: a String's bytes whatever its
/// encoding (a server hands Rack the request's bytes as they came, binary;
/// bytes that are not UTF-8 as U+FFFD, as the edge server reads them), a
/// Symbol's name; nil as "".
pub(super) fn text(value: Value) -> Result<String, Error> {
    match RString::from_value(value) {
        // SAFETY: the bytes are copied before any Ruby code can run.
        Some(s) => Ok(String::from_utf8_lossy(unsafe { s.as_slice() }).into_owned()),
        None => Ok(crate::convert::optional_text(value)?.unwrap_or_default()),
    }
}
