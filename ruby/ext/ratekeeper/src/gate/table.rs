//! A policy Hash as the core's policy table: each value converted, each
//! problem named by where it is.

use crate::errors::type_error;
use magnus::{
    prelude::*, r_hash::ForEach, Error, Float, Integer, RArray, RHash, RString, Ruby, Symbol, Value,
};
use ratekeeper_core::gate::spec::{Table, Value as PolicyValue};

fn class_name(value: Value) -> String {
    // SAFETY: the class name is copied out at once.
    unsafe { value.classname() }.into_owned()
}

/// A Ruby value of the policy as a policy value (nil: left out).
fn value(ruby: &Ruby, path: &str, v: Value) -> Result<Option<PolicyValue>, Error> {
    if v.is_nil() {
        return Ok(None);
    }
    if v.is_kind_of(ruby.class_true_class()) || v.is_kind_of(ruby.class_false_class()) {
        return Ok(Some(PolicyValue::Boolean(v.to_bool())));
    }
    if let Some(int) = Integer::from_value(v) {
        let n = int
            .to_i64()
            .map_err(|_| crate::errors::config_error(ruby, format!("{path}: out of range")))?;
        return Ok(Some(PolicyValue::Integer(n)));
    }
    if let Some(float) = Float::from_value(v) {
        return Ok(Some(PolicyValue::Float(float.to_f64())));
    }
    if let Some(symbol) = Symbol::from_value(v) {
        return Ok(Some(PolicyValue::String(symbol.name()?.into_owned())));
    }
    if let Some(text) = RString::from_value(v) {
        return Ok(Some(PolicyValue::String(text.to_string()?)));
    }
    if let Some(hash) = RHash::from_value(v) {
        return Ok(Some(PolicyValue::Table(table(ruby, path, hash)?)));
    }
    if let Some(array) = RArray::from_value(v) {
        let mut out = Vec::new();
        for (i, item) in array.into_iter().enumerate() {
            if let Some(item) = value(ruby, &format!("{path}[{i}]"), item)? {
                out.push(item);
            }
        }
        return Ok(Some(PolicyValue::Array(out)));
    }
    Err(type_error(
        ruby,
        format!(
            "{path}: a policy holds strings, numbers, booleans, arrays, hashes and callables, not {}",
            class_name(v)
        ),
    ))
}

pub(super) fn table(ruby: &Ruby, path: &str, hash: RHash) -> Result<Table, Error> {
    let mut out = Table::new();
    let mut failed = None;
    hash.foreach(|k: Value, v: Value| {
        let name = match Symbol::from_value(k) {
            Some(symbol) => symbol.name()?.into_owned(),
            None => String::try_convert(k)?,
        };
        let place = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        match value(ruby, &place, v) {
            Ok(Some(v)) => {
                out.insert(name, v);
            }
            Ok(None) => {}
            Err(e) => {
                failed = Some(e);
                return Ok(ForEach::Stop);
            }
        }
        Ok(ForEach::Continue)
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
