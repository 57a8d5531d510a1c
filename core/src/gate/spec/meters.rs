//! A throttle's meters, as written (`meters`, `cost` and `usage`) and
//! checked: named rule sets a request charges together, all or nothing
//! (an LLM API's "600 requests/minute" and "30,000 tokens/minute"), each
//! at a fixed estimate, settled when the response ends to what the
//! application says in a response header it cost.

use super::values::{header_name, rules};
use crate::meter::check_meter_name;
use crate::rule::RuleSet;

/// One meter of a throttle.
#[derive(Debug, Clone, PartialEq)]
pub struct MeterSpec {
    /// Its name (its headers' `tokens-1m`, its logs' scope `SCOPE@tokens`).
    pub name: String,
    /// Its rules.
    pub rules: RuleSet,
    /// The units a request reserves of it before the application runs (its
    /// `cost`, 1 when not named; 0: the request charges it only what the
    /// response says it cost).
    pub cost: u64,
    /// The response header (lower case) whose value is what the request
    /// really cost of it (its `usage`): when the response ends, the
    /// reservation is settled to that value (the difference given back,
    /// or an overrun charged); none, or a response without a readable
    /// value: the estimate stands.
    pub usage: Option<String>,
}

/// A throttle's `meters`, `cost` and `usage` tables checked into its
/// meters, in name order (none when it names none).
pub(super) fn meters(
    given: &toml::Table,
    cost: &toml::Table,
    usage: &toml::Table,
) -> std::result::Result<Vec<MeterSpec>, String> {
    if given.is_empty() {
        return match (cost.is_empty(), usage.is_empty()) {
            (true, true) => Ok(Vec::new()),
            (false, _) => {
                Err("cost: give meters first (a throttle of rules costs a request 1 unit)".into())
            }
            (_, false) => {
                Err("usage: give meters first (usage names a meter's response header)".into())
            }
        };
    }
    let mut out = Vec::with_capacity(given.len());
    for (name, value) in given {
        let what = format!("meters.{name}");
        check_meter_name(name).map_err(|e| format!("{what}: {e}"))?;
        let text = value
            .as_str()
            .ok_or_else(|| format!("{what}: give rules as a string, as \"30000/minute\""))?;
        let rules = rules(&what, text)?;
        rules
            .without_in_flight(&format!("the meter '{name}'"))
            .map_err(|e| format!("{what}: {e}"))?;
        out.push(MeterSpec {
            name: name.clone(),
            rules,
            cost: 1,
            usage: None,
        });
    }
    let known = (out.iter())
        .map(|m| m.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    for (name, value) in cost {
        let units = match value.as_integer() {
            Some(units) if units >= 0 => units as u64,
            _ => {
                return Err(format!(
                    "cost.{name}: give a whole number of units, 0 or more"
                ))
            }
        };
        match out.iter_mut().find(|m| m.name == *name) {
            Some(meter) => meter.cost = units,
            None => {
                return Err(format!(
                    "cost.{name}: no meter is named so (the meters: {})",
                    known
                ))
            }
        }
    }
    if out.iter().all(|m| m.cost == 0) {
        return Err("cost: a request reserves at least 1 unit of at least one meter".into());
    }
    for (name, value) in usage {
        let header = value.as_str().and_then(header_name).ok_or_else(|| {
            format!("usage.{name}: give the name of a response header, as \"X-Tokens-Used\"")
        })?;
        match out.iter_mut().find(|m| m.name == *name) {
            Some(meter) => meter.usage = Some(header),
            None => {
                return Err(format!(
                    "usage.{name}: no meter is named so (the meters: {})",
                    known
                ))
            }
        }
    }
    Ok(out)
}

/// What a response says a meter cost: its header's value, a whole number
/// of units in ASCII digits (surrounding spaces allowed); `None` when it is
/// not one (the estimate then stands).
pub fn units_of(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}
