//! The times of log lines: calendar days, the zones lines are written in,
//! ISO 8601 text, and the range a replayed time must fall in. Each failure
//! is the reason Python's `datetime` gave, as the report quotes it.

use super::python::str_repr;

/// The times a record may carry, in epoch seconds: from 1970 up to 2200.
pub const EARLIEST: f64 = 0.0;
/// (2200-01-01T00:00:00Z, excluded.)
pub const LATEST: f64 = 7_258_118_400.0;

/// `seconds` when it is a time from 1970 up to 2200; else the reason, quoting
/// the time as `written()` spells it (Python's `repr` of it).
pub fn checked(seconds: f64, written: impl FnOnce() -> String) -> Result<f64, String> {
    if (EARLIEST..LATEST).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(format!(
            "bad time {}: give a time from 1970 up to 2200",
            written()
        ))
    }
}

/// Days from 1970-01-01 to the given day of the proleptic Gregorian calendar.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days in a month of a year.
fn month_days(year: i64, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Epoch seconds of 00:00 on a day in a zone `offset_s` east of UTC, checked
/// as `datetime(year, month, day, tzinfo=timezone(offset))` checks it.
pub fn midnight(year: i64, month: u32, day: u32, offset_s: i64) -> Result<i64, String> {
    check_offset(offset_s)?;
    check_day(year, month, day)?;
    Ok(days_from_civil(year, month, day) * 86_400 - offset_s)
}

/// Python's check of a date.
fn check_day(year: i64, month: u32, day: u32) -> Result<(), String> {
    if !(1..=9999).contains(&year) {
        return Err(format!("year {year} is out of range"));
    }
    if !(1..=12).contains(&month) {
        return Err("month must be in 1..12".into());
    }
    if day < 1 || day > month_days(year, month) {
        return Err("day is out of range for month".into());
    }
    Ok(())
}

/// Python's check of a zone's offset (strictly within a day), its message
/// spelling the offset as a `timedelta`.
fn check_offset(offset_s: i64) -> Result<(), String> {
    if offset_s.abs() < 86_400 {
        return Ok(());
    }
    let (days, seconds) = (offset_s.div_euclid(86_400), offset_s.rem_euclid(86_400));
    let delta = if seconds == 0 {
        format!("days={days}")
    } else {
        format!("days={days}, seconds={seconds}")
    };
    Err(format!(
        "offset must be a timedelta strictly between -timedelta(hours=24) and \
         timedelta(hours=24), not datetime.timedelta({delta})."
    ))
}

/// Epoch seconds of the ISO 8601 time `text` as Python 3.11's
/// `datetime.fromisoformat` reads it, with a trailing `Z` for UTC and UTC
/// when no zone is given: a date (`2024-03-05`, `20240305`), then any one
/// character and a time (`10`, `10:00`, `10:00:00.5`, `100000`), then a zone
/// (`Z`, `+01`, `+01:00`, `+0100`). Week dates are not read. `None` when it
/// is not such a time.
pub fn parse_iso(text: &str) -> Option<f64> {
    let chars: Vec<char> = text.chars().collect();
    let (days, date_len) = date(&chars)?;
    let mut total_us = days * 86_400_000_000;
    if chars.len() > date_len {
        // any one character separates the date from the time
        let rest: String = chars[date_len + 1..].iter().collect();
        if rest.is_empty() {
            return None;
        }
        let (clock, zone) = match rest.find(['+', '-', 'Z', 'z']) {
            Some(at) => rest.split_at(at),
            None => (rest.as_str(), ""),
        };
        let (h, m, s, us) = clock_time(clock)?;
        if h > 23 || m > 59 || s > 59 {
            return None;
        }
        total_us += ((h * 60 + m) * 60 + s) * 1_000_000 + us;
        total_us -= zone_offset_us(zone)?;
    }
    Some(total_us as f64 / 1e6)
}

/// The days since 1970 of the date `chars` start with, and its length: a
/// calendar date (`2024-03-05`, `20240305`) or a week date (`2024-W10-2`,
/// `2024W102`, the day 1 when not given).
fn date(chars: &[char]) -> Option<(i64, usize)> {
    let digits = |from: usize, n: usize| -> Option<i64> {
        let part = chars.get(from..from + n)?;
        part.iter().all(char::is_ascii_digit).then(|| {
            part.iter()
                .fold(0, |acc, c| acc * 10 + i64::from(*c as u8 - b'0'))
        })
    };
    let year = digits(0, 4)?;
    let extended = chars.get(4) == Some(&'-');
    let at = if extended { 5 } else { 4 };
    if chars.get(at) == Some(&'W') {
        let week = digits(at + 1, 2)?;
        let day_at = if extended { at + 4 } else { at + 3 };
        let with_day = if extended {
            chars.get(at + 3) == Some(&'-')
        } else {
            chars.get(day_at).is_some_and(char::is_ascii_digit)
        };
        let (day, len) = if with_day {
            (digits(day_at, 1)?, day_at + 1)
        } else {
            (1, at + 3)
        };
        return Some((week_date(year, week, day)?, len));
    }
    let (month, day, len) = if extended {
        if chars.get(7) != Some(&'-') {
            return None;
        }
        (digits(5, 2)?, digits(8, 2)?, 10)
    } else {
        (digits(4, 2)?, digits(6, 2)?, 8)
    };
    check_day(year, month as u32, day as u32).ok()?;
    Some((days_from_civil(year, month as u32, day as u32), len))
}

/// Days since 1970 of day `day` (Monday 1) of ISO week `week` of `year`, as
/// `date.fromisocalendar` checks them.
fn week_date(year: i64, week: i64, day: i64) -> Option<i64> {
    if !(1..=9999).contains(&year) || !(1..=7).contains(&day) {
        return None;
    }
    // Monday is 0; 1970-01-01 was a Thursday
    let weekday = |days: i64| (days + 3).rem_euclid(7);
    let jan1 = days_from_civil(year, 1, 1);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let long_year = weekday(jan1) == 3 || (weekday(jan1) == 2 && leap);
    let week_exists = (1..=52).contains(&week) || (week == 53 && long_year);
    if !week_exists {
        return None;
    }
    let jan4 = jan1 + 3;
    let monday_of_week_1 = jan4 - weekday(jan4);
    Some(monday_of_week_1 + (week - 1) * 7 + day - 1)
}

/// `HH[:MM[:SS[.f...]]]` or `HH[MM[SS[.f...]]]`: hours, minutes, seconds
/// and microseconds (fraction digits past six are cut).
fn clock_time(text: &str) -> Option<(i64, i64, i64, i64)> {
    let b = text.as_bytes();
    let two = |at: usize| -> Option<i64> {
        let p = b.get(at..at + 2)?;
        p.iter()
            .all(u8::is_ascii_digit)
            .then(|| i64::from(p[0] - b'0') * 10 + i64::from(p[1] - b'0'))
    };
    let extended = b.get(2) == Some(&b':');
    let step = if extended { 3 } else { 2 };
    let mut parts = [0_i64; 3];
    let mut at = 0;
    for (i, part) in parts.iter_mut().enumerate() {
        *part = two(at)?;
        at += 2;
        if at == b.len() {
            return Some((parts[0], parts[1], parts[2], 0));
        }
        if i < 2 {
            if extended && b[at] != b':' {
                return None;
            }
            at = at + step - 2;
        }
    }
    if !matches!(b[at], b'.' | b',') {
        return None;
    }
    let fraction = &b[at + 1..];
    if fraction.is_empty() || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut us = 0;
    for i in 0..6 {
        us = us * 10 + fraction.get(i).map_or(0, |d| i64::from(d - b'0'));
    }
    Some((parts[0], parts[1], parts[2], us))
}

/// The offset east of UTC, in µs, of a zone: empty (UTC), `Z`, or a sign and
/// a time under a day.
fn zone_offset_us(zone: &str) -> Option<i64> {
    match zone {
        "" | "Z" | "z" => Some(0),
        _ => {
            let sign = match zone.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, m, s, us) = clock_time(&zone[1..])?;
            let offset = ((h * 60 + m) * 60 + s) * 1_000_000 + us;
            (offset < 86_400_000_000).then_some(sign * offset)
        }
    }
}

/// The reason a text time was not read.
pub fn unread(text: &str) -> String {
    format!("bad time {}", str_repr(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_counted_from_1970() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2024, 3, 5), 19_787);
        assert_eq!(days_from_civil(1, 1, 1), -719_162);
    }

    #[test]
    fn iso_times_are_read_as_python_reads_them() {
        let t0 = 1_709_596_800.0;
        assert_eq!(parse_iso("2024-03-05"), Some(t0));
        assert_eq!(parse_iso("2024-03-05T00:00:00.400+00:00"), Some(t0 + 0.4));
        assert_eq!(parse_iso("2024-03-05T01:00:00.700+01:00"), Some(t0 + 0.7));
        assert_eq!(parse_iso("2024-03-05 00:00:06"), Some(t0 + 6.0));
        assert_eq!(
            parse_iso("20240305T010203-0130"),
            Some(t0 + 3723.0 + 5400.0)
        );
        assert_eq!(parse_iso("2024-03-05T10"), Some(t0 + 36_000.0));
        assert_eq!(
            parse_iso("2024-03-05T00:00:00.1234567"),
            Some(t0 + 0.123456)
        );
        assert_eq!(parse_iso("2024-W10-2"), Some(t0));
        assert_eq!(parse_iso("2024W102T01"), Some(t0 + 3600.0));
        assert_eq!(parse_iso("2024-W10"), Some(t0 - 86_400.0));
        assert_eq!(parse_iso("2020-W53-7"), Some(1_609_632_000.0));
        assert_eq!(parse_iso("2021-W53-1"), None);
        for bad in [
            "yesterday",
            "2024-02-30",
            "2024-03-05T",
            "2024-03-05T25:00",
            "2024-03-05T00:00+24:00",
            "0000-01-01",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_zones_and_days_say_what_python_says() {
        assert!(midnight(2024, 3, 5, 86_400)
            .unwrap_err()
            .ends_with("not datetime.timedelta(days=1)."));
        assert!(midnight(2024, 3, 5, -362_340)
            .unwrap_err()
            .ends_with("not datetime.timedelta(days=-5, seconds=69660)."));
        assert_eq!(midnight(0, 1, 1, 0).unwrap_err(), "year 0 is out of range");
        assert_eq!(
            midnight(2024, 2, 30, 0).unwrap_err(),
            "day is out of range for month"
        );
    }
}
