//! Python values to core values, with `TypeError`s that say what was expected
//! (and `parse_rules`, a rule set as Python sees it).

use crate::types::Rule;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use ratekeeper_core::{RuleSet, RuleSpec};
use std::borrow::Cow;

/// A key as bytes: `str` is encoded as UTF-8, `bytes` taken as is.
pub fn key_bytes<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(text) = key.cast::<PyString>() {
        return Ok(Cow::Owned(text.to_cow()?.as_bytes().to_vec()));
    }
    if let Ok(bytes) = key.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    Err(PyTypeError::new_err(format!(
        "key must be str or bytes, not {}",
        key.get_type().name()?
    )))
}

/// Text as Latin-1 bytes (as WSGI hands header bytes over, and as ASGI
/// sends them): a character past Latin-1 as `?`.
pub fn latin1_bytes(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
        .collect()
}

/// Bytes read as Latin-1 text (as ASGI's header and query bytes are).
pub fn latin1_text(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// A cost: a whole number of at least 1; 1 when not given.
pub fn cost(py: Python<'_>, cost: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    let Some(cost) = cost else { return Ok(1) };
    ratekeeper_core::cost_from(whole(cost, "cost")?).map_err(|e| crate::errors::to_py(py, e))
}

/// A mapping's items, each by its meter's name.
type ByMeter<'py> = Vec<(String, Bound<'py, PyAny>)>;

/// A mapping's items by meter name (each a str), when `value` is a
/// mapping, in its order.
fn by_meter<'py>(value: &Bound<'py, PyAny>) -> PyResult<Option<ByMeter<'py>>> {
    let Ok(mapping) = value.cast::<pyo3::types::PyMapping>() else {
        return Ok(None);
    };
    let mut items = Vec::new();
    for item in mapping.items()?.iter() {
        let (name, value): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item.extract()?;
        let Ok(name) = name.extract::<String>() else {
            return Err(PyTypeError::new_err(format!(
                "a meter's name must be a str, not {}",
                name.get_type().name()?
            )));
        };
        items.push((name, value));
    }
    Ok(Some(items))
}

/// Units per meter (a metered limiter's cost), when `value` is a mapping:
/// each name a str, each count an int (their bounds the core's to judge).
pub fn meter_units(value: &Bound<'_, PyAny>) -> PyResult<Option<Vec<(String, i128)>>> {
    by_meter(value)?
        .map(|items| {
            items
                .into_iter()
                .map(|(name, count)| {
                    let what = format!("the cost of meter '{}'", name.escape_debug());
                    Ok((name, whole(&count, &what)?))
                })
                .collect()
        })
        .transpose()
}

/// What some work cost, for a settle: an int, 0 or more.
pub fn actual_cost(py: Python<'_>, actual: &Bound<'_, PyAny>) -> PyResult<u64> {
    ratekeeper_core::actual_cost_from(whole(actual, "actual")?)
        .map_err(|e| crate::errors::to_py(py, e))
}

/// An int (not a bool) as the core takes a count; one past i128 kept by its
/// sign, for the core to judge. A `TypeError` names `what` otherwise.
fn whole(value: &Bound<'_, PyAny>, what: &str) -> PyResult<i128> {
    if value.is_instance_of::<pyo3::types::PyBool>()
        || !value.is_instance_of::<pyo3::types::PyInt>()
    {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            value.get_type().name()?
        )));
    }
    Ok(match value.extract::<i128>() {
        Ok(value) => value,
        Err(_) if value.gt(0)? => i128::MAX,
        Err(_) => i128::MIN,
    })
}

/// `now`: None, or seconds as an int or float.
pub fn now(now: Option<&Bound<'_, PyAny>>) -> PyResult<Option<f64>> {
    match now {
        None => Ok(None),
        Some(value) if value.is_none() => Ok(None),
        Some(value) if value.is_instance_of::<pyo3::types::PyBool>() => {
            Err(PyTypeError::new_err("now must be a float or int, not bool"))
        }
        Some(value) => value.extract::<f64>().map(Some).map_err(|_| {
            PyTypeError::new_err(format!(
                "now must be a float or int (seconds since the epoch), not {}",
                value
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        }),
    }
}

/// What a limiter limits: a mapping of meter names to rule sets (each as
/// [`rule_set`] takes it, in its order), else one rule set.
pub fn limits(py: Python<'_>, rules: &Bound<'_, PyAny>) -> PyResult<ratekeeper_core::Limits> {
    match by_meter(rules)? {
        Some(items) => Ok(ratekeeper_core::Limits::Meters(
            items
                .into_iter()
                .map(|(name, set)| Ok((name, rule_set(py, &set)?)))
                .collect::<PyResult<_>>()?,
        )),
        None => Ok(ratekeeper_core::Limits::Rules(rule_set(py, rules)?)),
    }
}

/// A rule set from a string, a `Rule`, or a list/tuple of rule strings,
/// `Rule`s and `(limit, window_seconds)` pairs.
pub fn rule_set(py: Python<'_>, rules: &Bound<'_, PyAny>) -> PyResult<RuleSet> {
    let mut specs = Vec::new();
    if rules.is_instance_of::<PyString>() || rules.is_instance_of::<Rule>() {
        specs.push(rule_spec(rules)?);
    } else if let Ok(items) = rules.try_iter() {
        for item in items {
            specs.push(rule_spec(&item?)?);
        }
    } else {
        return Err(PyTypeError::new_err(format!(
            "rules must be a str such as '10/minute', a Rule, or a list of them, not {}",
            rules.get_type().name()?
        )));
    }
    RuleSet::from_specs(specs).map_err(|e| crate::errors::to_py(py, e))
}

fn rule_spec(item: &Bound<'_, PyAny>) -> PyResult<RuleSpec> {
    if let Ok(text) = item.extract::<String>() {
        return Ok(RuleSpec::Text(text));
    }
    if let Ok(rule) = item.cast::<Rule>() {
        return Ok(RuleSpec::Rule(rule.get().inner));
    }
    if let Ok((limit, window)) = item.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>() {
        if limit.is_instance_of::<pyo3::types::PyInt>()
            && !limit.is_instance_of::<pyo3::types::PyBool>()
        {
            if let (Ok(limit), Ok(window)) = (limit.extract::<i128>(), window.extract::<f64>()) {
                return Ok(RuleSpec::Pair(limit, window));
            }
        }
    }
    Err(PyTypeError::new_err(format!(
        "each rule must be a str such as '10/minute', a Rule, or a (limit: int, window_seconds: float) pair, not {}",
        item.repr()?
    )))
}

/// The rules a text (or a list of rule texts, `Rule`s and `(limit,
/// window_seconds)` pairs) holds, shortest window first, as a `Limiter`
/// would take them; a `ConfigurationError` quotes a bad one.
#[pyfunction]
pub fn parse_rules(py: Python<'_>, rules: &Bound<'_, PyAny>) -> PyResult<Vec<Rule>> {
    let set = rule_set(py, rules)?;
    Ok(set.rules().iter().map(|&inner| Rule { inner }).collect())
}
