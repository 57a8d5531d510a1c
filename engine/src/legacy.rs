//! Logs of the previous format (version 4), read once to be rewritten in
//! this one: a header of 29 + 15 × rules bytes, then a ring of 5-byte
//! timestamps, one per logged unit (the newest `capacity` units).

use crate::layout::Damaged;
use crate::layout::{dec5, dec6, unstamp};

/// The previous format's version, its first byte.
pub const VERSION: u8 = 4;
/// Bytes of its header before the rules' windows.
const FIXED: usize = 29;
/// Bytes per unit in its ring.
const UNIT: usize = 5;

/// The time of a previous-format log's newest unit.
pub fn newest(log: &[u8]) -> Option<i64> {
    match log.first() {
        Some(&VERSION) => dec6(log, 17),
        _ => None,
    }
}

/// The units a previous-format log holds inside `horizon` (later than it),
/// oldest first, as (time, units of that time), and its newest time; `None`
/// when `log` is not one (a foreign string, read as no log).
pub fn units_after(log: &[u8], horizon: impl Fn(i64) -> i64) -> Result<Option<Units>, Damaged> {
    if log.len() < FIXED || log[0] != VERSION {
        return Ok(None);
    }
    let header = FIXED + 15 * usize::from(log[1]);
    let n = dec5(log, 2).ok_or(Damaged::Bytes)?;
    let cap = dec5(log, 7).ok_or(Damaged::Bytes)?;
    if cap == 0 && n > 0 {
        return Err(Damaged::Bytes); // units, and no ring to hold them
    }
    let newest = dec6(log, 17).ok_or(Damaged::Bytes)?;
    let after = horizon(newest);
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for s in (n - cap).max(0)..n {
        let at = header + (s % cap) as usize * UNIT;
        let t = unstamp(newest, dec5(log, at).ok_or(Damaged::Bytes)?);
        if t <= after {
            continue;
        }
        match runs.last_mut() {
            Some((last, units)) if *last == t => *units += 1,
            _ => runs.push((t, 1)),
        }
    }
    Ok(Some(Units { newest, runs }))
}

/// What a previous-format log holds.
#[derive(Debug)]
pub struct Units {
    /// Its newest unit's time.
    pub newest: i64,
    /// Its units inside the horizon, oldest first: (time, how many).
    pub runs: Vec<(i64, i64)>,
}
