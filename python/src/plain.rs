//! The core's plain values (see `ratekeeper_core::plain`) as Python values:
//! maps as dicts with `str` keys (window seconds as floats), lists as lists,
//! text as `str`.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::IntoPyObjectExt;
use ratekeeper_core::plain::{Key, Plain};

/// `plain` as a Python value.
pub fn to_py(py: Python<'_>, plain: &Plain) -> PyResult<Py<PyAny>> {
    Ok(match plain {
        Plain::Null => py.None(),
        Plain::Bool(b) => b.into_py_any(py)?,
        Plain::Int(n) => n.into_py_any(py)?,
        Plain::Float(f) => f.into_py_any(py)?,
        Plain::Text(text) => text.into_py_any(py)?,
        Plain::Map(fields) => {
            let dict = PyDict::new(py);
            for (key, value) in fields {
                let value = to_py(py, value)?;
                match key {
                    Key::Name(name) => dict.set_item(*name, value)?,
                    Key::Seconds(s) => dict.set_item(*s, value)?,
                }
            }
            dict.into_any().unbind()
        }
        Plain::List(items) => items
            .iter()
            .map(|item| to_py(py, item))
            .collect::<PyResult<Vec<_>>>()?
            .into_py_any(py)?,
    })
}

/// `plain`, a map, as a dict.
pub fn to_dict<'py>(py: Python<'py>, plain: &Plain) -> PyResult<Bound<'py, PyDict>> {
    Ok(to_py(py, plain)?.into_bound(py).cast_into::<PyDict>()?)
}
