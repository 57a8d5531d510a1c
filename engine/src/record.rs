//! The record command's arguments and decisions, as `engine/lua/record.lua`
//! takes and makes them: a change to a key's record, and a fail2ban strike.

use crate::command::{listing, number, ArgError, MAX_NOW};
use crate::layout::MAX5;

/// One operation on a key's record (ARGV of the record script).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordArgs<'a> {
    /// `set now field [value]`: sets (or, with no value, removes) one field
    /// of the key's record, at `now` (ms).
    Set {
        /// The time the record's lifetime is judged at.
        now: i64,
        /// The field: `s`, `b`, `t` or `o`.
        field: &'a [u8],
        /// Its new value; `None` removes it.
        value: Option<&'a [u8]>,
    },
    /// `strike now|"" maxretry findtime`: one fail2ban strike.
    Strike {
        /// Its time (ms), or `None` for the server clock.
        now: Option<i64>,
        /// Strikes within `findtime` that ban.
        maxretry: i64,
        /// The window strikes are counted in (ms).
        findtime: i64,
    },
}

/// Parses the record script's ARGV.
pub fn parse_record<'a>(args: &[&'a [u8]]) -> Result<RecordArgs<'a>, ArgError> {
    match args.first().copied() {
        Some(b"set") => {
            if !(3..=4).contains(&args.len()) {
                return Err(ArgError(
                    "wrong number of arguments: set takes now, a field and maybe a value".into(),
                ));
            }
            Ok(RecordArgs::Set {
                now: number(args[1], "now (ms)", 0, MAX_NOW)?,
                field: args[2],
                value: args.get(3).copied(),
            })
        }
        Some(b"strike") => {
            if args.len() != 4 {
                return Err(ArgError(
                    "wrong number of arguments: strike takes now, maxretry and findtime".into(),
                ));
            }
            let now = match args[1] {
                b"" => None,
                given => Some(number(given, "now (ms)", 0, MAX_NOW)?),
            };
            Ok(RecordArgs::Strike {
                now,
                maxretry: number(args[2], "maxretry", 1, 1_000_000)?,
                findtime: number(args[3], "findtime (ms)", 1, MAX5 as i64)?,
            })
        }
        _ => Err(ArgError("unknown record op: give set or strike".into())),
    }
}

/// How long a record lasts after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// It holds a tier or an override: for good.
    Persist,
    /// Until its last listing lapses, in this many ms.
    Expire(i64),
    /// Nothing in it stands: delete it.
    Delete,
}

/// The lifetime of a record holding these fields (`s`, `b`, `t`, `o`) at `now`.
pub fn lifetime(fields: [Option<&[u8]>; 4], now: i64) -> Lifetime {
    if fields[2].is_some() || fields[3].is_some() {
        return Lifetime::Persist;
    }
    let last = fields[..2]
        .iter()
        .filter_map(|f| f.and_then(listing))
        .map(|(until, _)| until)
        .fold(0, i64::max);
    if last > now {
        Lifetime::Expire(last - now)
    } else {
        Lifetime::Delete
    }
}

/// Strikes (as stored, newest first) that fall within `findtime` of `now`.
pub fn strikes_within(stored: &[&[u8]], now: i64, findtime: i64) -> i64 {
    let times = stored
        .iter()
        .filter_map(|s| std::str::from_utf8(s).ok()?.parse::<i64>().ok());
    count_within(times, now, findtime)
}

/// Strike times (ms) that fall within `findtime` of `now`.
pub fn count_within(times: impl IntoIterator<Item = i64>, now: i64, findtime: i64) -> i64 {
    times.into_iter().filter(|&at| at > now - findtime).count() as i64
}

/// Whether `count` strikes within the window ban: they reach `maxretry`.
pub fn bans(count: i64, maxretry: i64) -> bool {
    count >= maxretry
}

/// What one strike came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Struck {
    /// Strikes within the window, this one included.
    pub count: i64,
    /// Whether they ban (the strikes are then cleared).
    pub banned: bool,
}

/// One strike at `now` on a key's strike times held in a process (newest
/// first, as the script's list holds them): the newest `maxretry` are kept,
/// and when those within `findtime` reach `maxretry` it is a ban and they are
/// cleared, as `record.lua` does to its list.
pub fn strike(
    times: &mut std::collections::VecDeque<i64>,
    now: i64,
    maxretry: i64,
    findtime: i64,
) -> Struck {
    times.push_front(now);
    times.truncate(usize::try_from(maxretry).unwrap_or(usize::MAX));
    let count = count_within(times.iter().copied(), now, findtime);
    let banned = bans(count, maxretry);
    if banned {
        times.clear();
    }
    Struck { count, banned }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_arguments_parse_or_are_named() {
        assert_eq!(
            parse_record(&[b"set", b"5", b"t", b"gold"]),
            Ok(RecordArgs::Set {
                now: 5,
                field: b"t",
                value: Some(b"gold")
            })
        );
        assert!(matches!(
            parse_record(&[b"strike", b"", b"3", b"60000"]),
            Ok(RecordArgs::Strike {
                now: None,
                maxretry: 3,
                ..
            })
        ));
        assert!(parse_record(&[b"drop"])
            .unwrap_err()
            .0
            .contains("unknown record op"));
        assert!(parse_record(&[b"set", b"5"])
            .unwrap_err()
            .0
            .contains("wrong number"));
        assert!(parse_record(&[b"strike", b"", b"0", b"1"])
            .unwrap_err()
            .0
            .contains("maxretry"));
    }

    #[test]
    fn a_record_lasts_while_something_in_it_stands() {
        assert_eq!(
            lifetime([None, None, Some(b"gold"), None], 5),
            Lifetime::Persist
        );
        assert_eq!(
            lifetime([Some(b"100 x"), Some(b"300"), None, None], 50),
            Lifetime::Expire(250)
        );
        assert_eq!(
            lifetime([Some(b"10 x"), None, None, None], 50),
            Lifetime::Delete
        );
        assert_eq!(strikes_within(&[b"100", b"90", b"junk", b"10"], 100, 50), 2);
    }

    #[test]
    fn strikes_held_in_a_process_ban_as_the_script_does() {
        let mut times = std::collections::VecDeque::new();
        let mut struck = |now| {
            let s = strike(&mut times, now, 3, 100);
            (s.count, s.banned)
        };
        assert_eq!(struck(10), (1, false));
        // the first strike has left the window when the third comes
        assert_eq!(struck(100), (2, false));
        assert_eq!(struck(120), (2, false));
        assert_eq!(struck(130), (3, true));
        assert!(times.is_empty(), "a ban clears the strikes");
        assert_eq!(strike(&mut times, 140, 3, 100).count, 1);
        strike(&mut times, 150, 3, 5);
        strike(&mut times, 160, 3, 5);
        strike(&mut times, 170, 3, 5);
        assert_eq!(times.len(), 3, "the newest maxretry are kept");
    }
}
