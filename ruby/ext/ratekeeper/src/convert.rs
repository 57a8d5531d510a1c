//! Ruby values to core values, with `TypeError`s that say what was expected.

use crate::errors::{config_error, to_ruby, type_error};
use magnus::{prelude::*, Error, Float, Integer, RHash, RString, Ruby, Symbol, Value};

pub(crate) fn class_name(value: Value) -> String {
    // SAFETY: the class name is copied out at once.
    unsafe { value.classname() }.into_owned()
}

/// A key as bytes: any String, binary or not.
pub fn key_bytes(ruby: &Ruby, key: Value) -> Result<Vec<u8>, Error> {
    match RString::from_value(key) {
        // SAFETY: the bytes are copied before any Ruby code can run.
        Some(s) => Ok(unsafe { s.as_slice() }.to_vec()),
        None => Err(type_error(
            ruby,
            format!("key must be a String, not {}", class_name(key)),
        )),
    }
}

/// A cost: an Integer of at least 1.
pub fn cost(ruby: &Ruby, cost: Value) -> Result<u64, Error> {
    ratekeeper_core::cost_from(integer(ruby, cost, "cost")?).map_err(|e| to_ruby(ruby, e))
}

/// A meter's name: a String or a Symbol.
pub(crate) fn meter_name(ruby: &Ruby, name: Value) -> Result<String, Error> {
    if let Some(symbol) = Symbol::from_value(name) {
        return Ok(symbol.name()?.into_owned());
    }
    match RString::from_value(name) {
        Some(text) => text.to_string(),
        None => Err(type_error(
            ruby,
            format!(
                "a meter's name must be a Symbol or String, not {}",
                class_name(name)
            ),
        )),
    }
}

/// Units per meter (a metered limiter's cost), when `value` is a Hash: each
/// name a Symbol or String, each count an Integer (their bounds the core's
/// to judge).
pub fn meter_units(ruby: &Ruby, value: Value) -> Result<Option<Vec<(String, i128)>>, Error> {
    let Some(hash) = RHash::from_value(value) else {
        return Ok(None);
    };
    let mut units = Vec::new();
    hash.foreach(|name: Value, count: Value| {
        let name = meter_name(ruby, name)?;
        let count = integer(
            ruby,
            count,
            &format!("the cost of meter '{}'", name.escape_debug()),
        )?;
        units.push((name, count));
        Ok(magnus::r_hash::ForEach::Continue)
    })?;
    Ok(Some(units))
}

/// What some work cost, for a settle: an Integer, 0 or more.
pub fn actual_cost(ruby: &Ruby, actual: Value) -> Result<u64, Error> {
    ratekeeper_core::actual_cost_from(integer(ruby, actual, "actual")?)
        .map_err(|e| to_ruby(ruby, e))
}

/// An Integer as the core takes a count (a Bignum kept by its sign, for the
/// core to judge); a `TypeError` names `what` otherwise.
fn integer(ruby: &Ruby, value: Value, what: &str) -> Result<i128, Error> {
    let Some(int) = Integer::from_value(value) else {
        return Err(type_error(
            ruby,
            format!("{what} must be an Integer, not {}", class_name(value)),
        ));
    };
    Ok(match int.to_i64() {
        Ok(value) => i128::from(value),
        Err(_) if int.funcall::<_, _, bool>("positive?", ())? => i128::MAX,
        Err(_) => i128::MIN,
    })
}

/// An optional whole number option `name`: nil, or an Integer.
pub fn whole(ruby: &Ruby, name: &str, value: Value) -> Result<Option<i64>, Error> {
    if value.is_nil() {
        return Ok(None);
    }
    let Some(int) = Integer::from_value(value) else {
        return Err(type_error(
            ruby,
            format!("{name} must be an Integer, not {}", class_name(value)),
        ));
    };
    int.to_i64()
        .map(Some)
        .map_err(|_| config_error(ruby, format!("invalid {name}: out of range")))
}

/// `now`: nil, or seconds as an Integer or Float.
pub fn now(ruby: &Ruby, now: Value) -> Result<Option<f64>, Error> {
    if now.is_nil() {
        return Ok(None);
    }
    if let Some(f) = Float::from_value(now) {
        return Ok(Some(f.to_f64()));
    }
    if let Some(i) = Integer::from_value(now) {
        return Ok(Some(i.to_i64().map(|v| v as f64).unwrap_or(f64::INFINITY)));
    }
    Err(type_error(
        ruby,
        format!(
            "now must be a Float or Integer (seconds since the epoch), not {}",
            class_name(now)
        ),
    ))
}

/// Optional seconds: nil, or an Integer or Float; a `TypeError` names `name`.
pub fn seconds(ruby: &Ruby, name: &str, value: Value) -> Result<Option<f64>, Error> {
    now(ruby, value).map_err(|_| {
        type_error(
            ruby,
            format!(
                "{name} must be a number of seconds, not {}",
                class_name(value)
            ),
        )
    })
}

/// An optional String argument (nil: none; a Symbol by name).
pub fn optional_text(value: Value) -> Result<Option<String>, Error> {
    if value.is_nil() {
        Ok(None)
    } else if let Some(symbol) = Symbol::from_value(value) {
        Ok(Some(symbol.name()?.into_owned()))
    } else {
        Ok(Some(String::try_convert(value)?))
    }
}
