//! A policy given as a dict: its values as the core's policy table (the
//! same shape as the policy file), callables kept by the door and named
//! `call:N` in the table.

use crate::errors::config_error;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use ratekeeper_core::gate::spec::{Table, Value};

/// A dict's value as a policy value; callables become `call:N`.
fn value(
    path: &str,
    v: &Bound<'_, PyAny>,
    callables: &mut Vec<Py<PyAny>>,
) -> PyResult<Option<Value>> {
    if v.is_none() {
        return Ok(None);
    }
    if v.is_instance_of::<PyBool>() {
        return Ok(Some(Value::Boolean(v.extract()?)));
    }
    if v.is_instance_of::<PyInt>() {
        let n: i64 = v
            .extract()
            .map_err(|_| config_error(v.py(), format!("{path}: {v} is too large")))?;
        return Ok(Some(Value::Integer(n)));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Some(Value::Float(v.extract()?)));
    }
    if let Ok(text) = v.cast::<PyString>() {
        return Ok(Some(Value::String(text.to_cow()?.into_owned())));
    }
    if let Ok(dict) = v.cast::<PyDict>() {
        return Ok(Some(Value::Table(table(path, dict, callables)?)));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in v.try_iter()?.enumerate() {
            if let Some(item) = value(&format!("{path}[{i}]"), &item?, callables)? {
                out.push(item);
            }
        }
        return Ok(Some(Value::Array(out)));
    }
    if v.is_callable() {
        callables.push(v.clone().unbind());
        return Ok(Some(Value::String(format!("call:{}", callables.len() - 1))));
    }
    Err(PyTypeError::new_err(format!(
        "{path}: a policy holds strings, numbers, booleans, lists, dicts and callables, not {}",
        v.get_type().name()?
    )))
}

fn table(path: &str, dict: &Bound<'_, PyDict>, callables: &mut Vec<Py<PyAny>>) -> PyResult<Table> {
    let mut out = Table::new();
    for (k, v) in dict.iter() {
        let name: String = k.extract().map_err(|_| {
            PyTypeError::new_err(format!("{path}: the policy's names are strings, not {k}"))
        })?;
        let place = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        if let Some(v) = value(&place, &v, callables)? {
            out.insert(name, v);
        }
    }
    Ok(out)
}

/// A policy dict's table; with `beside` (a limiter or a gate whose store
/// it goes on) the policy must name no store of its own.
pub(super) fn storeless_table(
    py: Python<'_>,
    dict: &Bound<'_, PyDict>,
    beside: bool,
    what: &str,
    callables: &mut Vec<Py<PyAny>>,
) -> PyResult<Table> {
    if beside && dict.contains("store")? {
        return Err(config_error(
            py,
            format!("give the store in the policy or {what}, not both"),
        ));
    }
    table("", dict, callables)
}
