//! Time, in one place: the epoch milliseconds every store and decision
//! counts in, the seconds the bindings speak, and the bounds of both.

use crate::error::{Error, Result};
use std::time::Duration;

/// Latest `now` accepted, in seconds since the epoch (year 6429): timestamps
/// are kept in 47 bits of milliseconds.
pub const MAX_NOW_SECONDS: f64 = 140_737_488_355.0;

/// Seconds (float) since the epoch to whole milliseconds, rounded to the
/// nearest; refused outside `0..=MAX_NOW_SECONDS`.
pub fn now_to_ms(now: f64) -> Result<u64> {
    if !(0.0..=MAX_NOW_SECONDS).contains(&now) {
        return Err(Error::config(format!(
            "invalid now {}: give seconds since the epoch, from 0 to {MAX_NOW_SECONDS}",
            crate::error::shown(now)
        )));
    }
    Ok((now * 1000.0).round() as u64)
}

/// Milliseconds since the Unix epoch by the system clock.
pub fn system_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Milliseconds to whole seconds, rounded up (as `Retry-After` gives them).
pub fn ceil_seconds(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// Milliseconds as the seconds (float) the bindings show.
pub fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Seconds within (0, 60], or [0, 60] when `zero_ok`, as a duration: the
/// bound (here and nowhere else) of the options given in seconds up to a
/// minute: `timeout`, `connect_timeout`, `denial_cache`, and
/// `controls_refresh` before its own narrower one (the `lease` has its own).
pub fn option_seconds(name: &str, value: f64, zero_ok: bool) -> Result<Duration> {
    let low_ok = if zero_ok { value >= 0.0 } else { value > 0.0 };
    if !(value.is_finite() && low_ok && value <= 60.0) {
        let from = if zero_ok { "0 (off)" } else { "more than 0" };
        return Err(Error::config(format!(
            "invalid {name} {}: give seconds, {from} and at most 60",
            crate::error::shown(value)
        )));
    }
    Ok(Duration::from_secs_f64(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_rounded_and_checked() {
        assert_eq!(now_to_ms(1.0005).unwrap(), 1001);
        assert_eq!(now_to_ms(1700000000.1234).unwrap(), 1_700_000_000_123);
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e12] {
            assert!(now_to_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seconds_round_up_for_headers() {
        assert_eq!(ceil_seconds(0), 0);
        assert_eq!(ceil_seconds(1), 1);
        assert_eq!(ceil_seconds(1000), 1);
        assert_eq!(ceil_seconds(1001), 2);
        assert_eq!(seconds(1500), 1.5);
    }
}
