//! Python values to the core's options (`ratekeeper_core::settings`): the
//! core names the options, their kinds, defaults and checks; this converts.

use crate::convert;
use crate::errors::{config_error, to_py};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};
use ratekeeper_core::settings::{Kind, OptionValue, Settings};

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// `value` as the option `name` takes it, or a `TypeError` saying what it takes.
pub fn option_value(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<OptionValue> {
    let kind = Settings::kind(name).map_err(|e| to_py(py, e))?;
    let wrong = || {
        PyTypeError::new_err(format!(
            "{name} must be {}, not {}",
            kind.expected(),
            type_name(value)
        ))
    };
    let is_number = !value.is_instance_of::<PyBool>()
        && (value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>());
    Ok(match kind {
        Kind::Text if value.is_instance_of::<PyString>() => OptionValue::Text(value.extract()?),
        Kind::Seconds if is_number => OptionValue::Seconds(value.extract()?),
        Kind::Count if is_number && value.is_instance_of::<PyInt>() => match value.extract() {
            Ok(n) => OptionValue::Count(n),
            Err(_) => {
                return Err(config_error(
                    py,
                    format!("invalid {name} {}: too large", value.str()?),
                ))
            }
        },
        Kind::Flag if value.is_instance_of::<PyBool>() => OptionValue::Flag(value.extract()?),
        Kind::Tiers => OptionValue::Tiers(tiers(py, value)?),
        _ => return Err(wrong()),
    })
}

/// Tiers from a dict of name to rules.
fn tiers(
    py: Python<'_>,
    tiers: &Bound<'_, PyAny>,
) -> PyResult<Vec<(String, ratekeeper_core::RuleSet)>> {
    let dict = tiers.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(
            "tiers must be a dict of tier name to rules, such as {'free': '100/hour'}",
        )
    })?;
    dict.iter()
        .map(|(name, rules)| {
            let name: String = name
                .extract()
                .map_err(|_| PyTypeError::new_err("tier names must be str"))?;
            Ok((name, convert::rule_set(py, &rules)?))
        })
        .collect()
}

/// Sets each option given (a `None` keeps the core's default); an old
/// name of an option is taken with a `DeprecationWarning`.
pub fn apply(
    py: Python<'_>,
    settings: &mut Settings,
    given: &[(&str, Option<&Bound<'_, PyAny>>)],
) -> PyResult<()> {
    let mut values = Vec::new();
    for (name, value) in given {
        if let Some(value) = value.filter(|v| !v.is_none()) {
            values.push((*name, option_value(py, name, value)?));
        }
    }
    let warnings = settings.set_all(values).map_err(|e| to_py(py, e))?;
    let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
    for warning in warnings {
        // stack level 1: the Python line that called in
        PyErr::warn(py, &category, &std::ffi::CString::new(warning)?, 1)?;
    }
    Ok(())
}

/// Checks one option of `Limiter` as the limiter would, without building
/// one: a `ConfigurationError` names a bad value or an unknown option, a
/// `TypeError` a value of the wrong type; None (the default) is fine; an
/// option's old name warns as `Limiter` does.
#[pyfunction]
pub fn check_option(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if value.is_none() {
        return Settings::kind(name).map(|_| ()).map_err(|e| to_py(py, e)); // None: the default
    }
    apply(py, &mut Settings::default(), &[(name, Some(value))])
}

/// `ratekeeper.DEFAULTS`: every option of `Limiter` with its default.
pub fn defaults(py: Python<'_>) -> PyResult<Py<PyAny>> {
    crate::plain::to_py(py, &Settings::defaults())
}
