//! Lines of the common or combined log format (Apache, nginx):
//! `host ident authuser [10/Oct/2000:13:55:36 -0700] "request" status bytes ...`.
//! A line is read as the pattern
//! `(\S+) \S+ (\S+) \[(\d\d/[A-Za-z]{3}/\d{4}):(\d\d):(\d\d):(\d\d(?:\.\d+)?) ([+-]\d{4})\] "[^"\\]*(?:\\.[^"\\]*)*" (?:\d{3}|-) (?:\d+|-)`
//! matches its start (digits are ASCII; `\S` is anything Python does not
//! call whitespace), walked by hand.

use super::python::{is_space, str_repr};
use super::times::{checked, midnight};
use super::Parsed;
use std::borrow::Cow;

/// Which field of a line is its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The client's address (the first field).
    Host,
    /// The signed-in user (the third).
    AuthUser,
}

/// What a line's fields hold, borrowed from it.
struct Fields<'a> {
    host: &'a str,
    user: &'a str,
    date: &'a str,
    hours: &'a str,
    minutes: &'a str,
    seconds: &'a str,
    zone: &'a str,
}

/// A cursor over a line's bytes.
struct Cursor<'a> {
    line: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn byte(&self) -> Option<u8> {
        self.line.as_bytes().get(self.at).copied()
    }

    /// Consumes `b`.
    fn eat(&mut self, b: u8) -> Option<()> {
        (self.byte()? == b).then(|| self.at += 1)
    }

    /// A run of non-whitespace characters (at least one).
    fn token(&mut self) -> Option<&'a str> {
        let rest = &self.line[self.at..];
        let len = rest.find(is_space).unwrap_or(rest.len());
        (len > 0).then(|| {
            self.at += len;
            &rest[..len]
        })
    }

    /// Exactly `n` bytes each of which `ok` accepts.
    fn run(&mut self, n: usize, ok: fn(&u8) -> bool) -> Option<&'a str> {
        let part = self.line.as_bytes().get(self.at..self.at + n)?;
        part.iter().all(ok).then(|| {
            self.at += n;
            &self.line[self.at - n..self.at]
        })
    }

    /// One or more digits.
    fn digits(&mut self) -> Option<&'a str> {
        let rest = &self.line.as_bytes()[self.at..];
        let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        (len > 0).then(|| {
            self.at += len;
            &self.line[self.at - len..self.at]
        })
    }

    /// The quoted request: up to the first `"` no backslash escapes (an
    /// escape takes any character but a newline).
    fn quoted(&mut self) -> Option<()> {
        self.eat(b'"')?;
        let bytes = self.line.as_bytes();
        // (a request is most of a line: its end is searched for, not walked to)
        while let Some(found) = memchr::memchr2(b'"', b'\\', &bytes[self.at..]) {
            self.at += found;
            if bytes[self.at] == b'"' {
                self.at += 1;
                return Some(());
            }
            // a backslash
            if matches!(bytes.get(self.at + 1), None | Some(b'\n')) {
                return None;
            }
            // (the escaped character may be several bytes long)
            let next = self.line[self.at + 1..].chars().next()?;
            self.at += 1 + next.len_utf8();
        }
        None
    }
}

/// The fields of `line` when it is in the format.
fn fields(line: &str) -> Option<Fields<'_>> {
    let mut c = Cursor { line, at: 0 };
    let digit = u8::is_ascii_digit;
    let host = c.token()?;
    c.eat(b' ')?;
    c.token()?;
    c.eat(b' ')?;
    let user = c.token()?;
    c.eat(b' ')?;
    c.eat(b'[')?;
    let date_at = c.at;
    c.run(2, digit)?;
    c.eat(b'/')?;
    c.run(3, u8::is_ascii_alphabetic)?;
    c.eat(b'/')?;
    c.run(4, digit)?;
    let date = &line[date_at..c.at];
    c.eat(b':')?;
    let hours = c.run(2, digit)?;
    c.eat(b':')?;
    let minutes = c.run(2, digit)?;
    c.eat(b':')?;
    let seconds_at = c.at;
    c.run(2, digit)?;
    if c.byte() == Some(b'.')
        && line
            .as_bytes()
            .get(c.at + 1)
            .is_some_and(u8::is_ascii_digit)
    {
        c.at += 1;
        c.digits()?;
    }
    let seconds = &line[seconds_at..c.at];
    c.eat(b' ')?;
    let zone_at = c.at;
    c.run(1, |b| matches!(b, b'+' | b'-'))?;
    c.run(4, digit)?;
    let zone = &line[zone_at..c.at];
    c.eat(b']')?;
    c.eat(b' ')?;
    c.quoted()?;
    c.eat(b' ')?;
    if c.eat(b'-').is_none() {
        c.run(3, digit)?;
    }
    c.eat(b' ')?;
    if c.eat(b'-').is_none() {
        c.digits()?;
    }
    Some(Fields {
        host,
        user,
        date,
        hours,
        minutes,
        seconds,
        zone,
    })
}

/// Whether `line` is in the format (what choosing the format asks).
pub fn matches(line: &str) -> bool {
    fields(line).is_some()
}

/// A number of ASCII digits.
fn number(digits: &str) -> i64 {
    digits
        .bytes()
        .fold(0, |acc, d| acc * 10 + i64::from(d - b'0'))
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Reads the lines of one log, keeping the midnight of the last day and zone
/// seen (lines come in runs of one day).
pub struct Parser {
    field: Field,
    last_day: Option<(String, String, i64)>,
}

impl Parser {
    /// A reader keying lines by `field`.
    pub fn new(field: Field) -> Parser {
        Parser {
            field,
            last_day: None,
        }
    }

    /// The key (`None` for `-`) and epoch seconds of `line`, or why it cannot be replayed.
    pub fn parse<'a>(&mut self, line: &'a str) -> Result<Parsed<'a>, String> {
        let f = fields(line).ok_or("not in common or combined log format")?;
        let midnight = match &self.last_day {
            Some((date, zone, at)) if date == f.date && zone == f.zone => *at,
            _ => {
                let at = day_start(f.date, f.zone)
                    .map_err(|why| format!("bad date {} {}: {why}", f.date, f.zone))?;
                self.last_day = Some((f.date.to_owned(), f.zone.to_owned(), at));
                at
            }
        };
        if f.hours >= "24" || f.minutes >= "60" || f.seconds >= "61" {
            return Err(format!("bad time {}:{}:{}", f.hours, f.minutes, f.seconds));
        }
        let key = match self.field {
            Field::Host => f.host,
            Field::AuthUser => f.user,
        };
        let seconds: f64 = f.seconds.parse().map_err(|_| "bad seconds".to_string())?;
        // summed in Python's order, so that every time is the same float
        let at = midnight as f64
            + (number(f.hours) * 3600) as f64
            + (number(f.minutes) * 60) as f64
            + seconds;
        let at = checked(at, || str_repr(f.date))?;
        Ok(((key != "-").then_some(Cow::Borrowed(key)), at))
    }
}

/// Epoch seconds of 00:00 on `date` (`10/Oct/2000`) in `zone` (`-0700`).
fn day_start(date: &str, zone: &str) -> Result<i64, String> {
    let month_name = &date[3..6];
    let month = MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(month_name))
        .ok_or_else(|| format!("unknown month {}", str_repr(month_name)))?;
    let offset = number(&zone[1..3]) * 3600 + number(&zone[3..5]) * 60;
    let offset = if zone.starts_with('-') {
        -offset
    } else {
        offset
    };
    midnight(
        number(&date[7..11]),
        month as u32 + 1,
        number(&date[..2]) as u32,
        offset,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "10.0.0.1 - ann [05/Mar/2024:00:00:10 +0000] \"GET /a\\\"b HTTP/1.1\" 200 512 \"-\" \"curl\"\n";

    #[test]
    fn lines_are_read() {
        let mut ip = Parser::new(Field::Host);
        assert_eq!(
            ip.parse(LINE),
            Ok((Some("10.0.0.1".into()), 1_709_596_810.0))
        );
        let mut user = Parser::new(Field::AuthUser);
        assert_eq!(user.parse(LINE), Ok((Some("ann".into()), 1_709_596_810.0)));
        let late = "h - - [04/Mar/2024:23:59:59.5 -0500] \"-\" - -";
        assert_eq!(
            user.parse(late),
            Ok((None, 1_709_596_800.0 + 5.0 * 3600.0 - 0.5))
        );
    }

    #[test]
    fn bad_lines_say_why_as_before() {
        let mut r = Parser::new(Field::Host);
        let why = |r: &mut Parser, line: &str| r.parse(line).unwrap_err();
        assert_eq!(
            why(&mut r, "this is not a log line\n"),
            "not in common or combined log format"
        );
        assert_eq!(
            why(&mut r, "a  b c [05/Mar/2024:00:00:01 +0000] \"x\" 200 5"),
            "not in common or combined log format"
        );
        assert_eq!(
            why(&mut r, "a b c\t[05/Mar/2024:00:00:01 +0000] \"x\" 200 5"),
            "not in common or combined log format"
        );
        assert_eq!(
            why(&mut r, "a b c [05/Mar/2024:00:00:01 +0000] \"x\\\n"),
            "not in common or combined log format"
        );
        assert_eq!(
            why(&mut r, "a b c [05/Foo/2024:00:00:01 +0000] \"x\" 200 5"),
            "bad date 05/Foo/2024 +0000: unknown month 'Foo'"
        );
        assert_eq!(
            why(&mut r, "a b c [05/Mar/2024:25:00:01 +0000] \"x\" 200 5"),
            "bad time 25:00:01"
        );
        assert_eq!(
            why(&mut r, "a b c [05/Mar/1960:00:00:01 +0000] \"x\" 200 5"),
            "bad time '05/Mar/1960': give a time from 1970 up to 2200"
        );
        assert!(
            why(&mut r, "a b c [30/Feb/2024:00:00:01 +0000] \"x\" 200 5")
                .ends_with("day is out of range for month")
        );
    }
}
