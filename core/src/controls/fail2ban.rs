//! Fail2ban: strikes counted against a key or an address, and the ban the
//! strike that reaches `maxretry` within `findtime` brings.

use super::{check_listing, check_tier_name};
use crate::error::{Error, Result};

/// Fail2ban: `maxretry` strikes within `findtime` ban a key for `bantime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail2Ban {
    /// Names the strike log, so that bans for different reasons count apart.
    pub name: String,
    /// Strikes that ban.
    pub maxretry: u64,
    /// The window strikes are counted in, in ms.
    pub findtime_ms: u64,
    /// How long a ban lasts, in ms.
    pub bantime_ms: u64,
}

/// The name of a ban when none is given.
pub const DEFAULT_NAME: &str = "default";
/// Strikes that ban when no `maxretry` is given.
pub const DEFAULT_MAXRETRY: i64 = 5;
/// The window strikes are counted in when no `findtime` is given: 10 minutes.
pub const DEFAULT_FINDTIME: f64 = 600.0;
/// How long a ban lasts when no `bantime` is given: an hour.
pub const DEFAULT_BANTIME: f64 = 3600.0;

impl Fail2Ban {
    /// Checked parameters, each the default when not given (see
    /// [`DEFAULT_NAME`], [`DEFAULT_MAXRETRY`], [`DEFAULT_FINDTIME`],
    /// [`DEFAULT_BANTIME`]): what `penalize` and the middlewares' fail2ban
    /// and allow2ban entries are built from.
    pub fn given(
        name: Option<&str>,
        maxretry: Option<i64>,
        findtime: Option<f64>,
        bantime: Option<f64>,
    ) -> Result<Fail2Ban> {
        Fail2Ban::new(
            name.unwrap_or(DEFAULT_NAME),
            maxretry.unwrap_or(DEFAULT_MAXRETRY),
            findtime.unwrap_or(DEFAULT_FINDTIME),
            bantime.unwrap_or(DEFAULT_BANTIME),
        )
    }

    /// Checked parameters (durations in seconds), naming the first bad one.
    pub fn new(name: &str, maxretry: i64, findtime: f64, bantime: f64) -> Result<Fail2Ban> {
        check_tier_name(name).map_err(|_| {
            Error::config(format!(
                "invalid fail2ban name '{name}': give 1 to 64 letters, digits, '_', '-', '.' or ':'"
            ))
        })?;
        if !(1..=10_000).contains(&maxretry) {
            return Err(Error::config(format!(
                "invalid maxretry {maxretry}: give 1 to 10000"
            )));
        }
        let findtime_ms = check_listing(Some(findtime), "").map_err(|_| {
            Error::config(format!(
                "invalid findtime {}: give seconds, at least 0.001 and at most 10 years",
                crate::error::shown(findtime)
            ))
        })?;
        let bantime_ms = check_listing(Some(bantime), "").map_err(|_| {
            Error::config(format!(
                "invalid bantime {}: give seconds, at least 0.001 and at most 10 years",
                crate::error::shown(bantime)
            ))
        })?;
        Ok(Fail2Ban {
            name: name.to_owned(),
            maxretry: maxretry as u64,
            findtime_ms,
            bantime_ms,
        })
    }
}

/// What one strike did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strike {
    /// Strikes counted in the window, this one included (0 after a ban: the count starts over).
    pub strikes: u64,
    /// Whether this strike banned the key.
    pub banned: bool,
    /// When the ban lapses (ms), if it banned.
    pub until_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail2ban_parameters_are_checked() {
        assert!(Fail2Ban::new("php", 3, 60.0, 3600.0).is_ok());
        for (m, f, b, word) in [
            (0, 60.0, 60.0, "maxretry"),
            (3, -1.0, 60.0, "findtime"),
            (3, 60.0, f64::NAN, "bantime"),
        ] {
            let e = Fail2Ban::new("x", m, f, b).unwrap_err().to_string();
            assert!(e.contains(word), "{e}");
        }
    }
}
