//! JSON-lines records, read as Python's `json.loads` reads them (`NaN`,
//! `Infinity` and `-Infinity` are numbers, the last of repeated names
//! counts) but only as far as a replay needs: the record must be an object,
//! and of its members only the key's and the time's values are kept.

use super::python::{float_repr, parse_float, str_repr};
use super::times::{checked, parse_iso, unread};
use super::Parsed;
use std::borrow::Cow;

/// The fields a record's time may be in, the first present counting.
pub const TIME_FIELDS: [&str; 3] = ["time", "timestamp", "ts"];

/// Deepest nesting read (Python gives up near its recursion limit).
const MAX_DEPTH: usize = 512;

/// A member's value, as far as a replay tells values apart.
#[derive(Debug, Clone, PartialEq)]
enum Value<'a> {
    Null,
    Bool,
    /// An integer, as written (`-0` included).
    Int(&'a str),
    Float(f64),
    Str(Cow<'a, str>),
    /// An array or an object.
    Nested,
}

/// A member of an object: its name and value.
type Member<'a> = (Cow<'a, str>, Value<'a>);

/// A JSON text being read.
struct Text<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

/// Not valid JSON.
struct Invalid;

impl<'a> Text<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn word(&mut self, word: &str) -> bool {
        let found = self.text[self.at..].starts_with(word);
        if found {
            self.at += word.len();
        }
        found
    }

    fn value(&mut self) -> Result<Value<'a>, Invalid> {
        match self.peek().ok_or(Invalid)? {
            b'"' => self.string().map(Value::Str),
            b'{' | b'[' => self.nested().map(|()| Value::Nested),
            b'n' if self.word("null") => Ok(Value::Null),
            b't' if self.word("true") => Ok(Value::Bool),
            b'f' if self.word("false") => Ok(Value::Bool),
            b'N' if self.word("NaN") => Ok(Value::Float(f64::NAN)),
            b'I' if self.word("Infinity") => Ok(Value::Float(f64::INFINITY)),
            b'-' if self.word("-Infinity") => Ok(Value::Float(f64::NEG_INFINITY)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Invalid),
        }
    }

    fn number(&mut self) -> Result<Value<'a>, Invalid> {
        let start = self.at;
        let b = self.text.as_bytes();
        let digits = |at: &mut usize| {
            let from = *at;
            while b.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at - from
        };
        let mut at = self.at;
        if b[at] == b'-' {
            at += 1;
        }
        match b.get(at) {
            Some(b'0') => at += 1,
            Some(b'1'..=b'9') => {
                digits(&mut at);
            }
            _ => return Err(Invalid),
        }
        let mut float = false;
        if b.get(at) == Some(&b'.') && b.get(at + 1).is_some_and(u8::is_ascii_digit) {
            at += 1;
            digits(&mut at);
            float = true;
        }
        if matches!(b.get(at), Some(b'e' | b'E')) {
            let mut e = at + 1;
            if matches!(b.get(e), Some(b'+' | b'-')) {
                e += 1;
            }
            if digits(&mut e) > 0 {
                at = e;
                float = true;
            }
        }
        self.at = at;
        let written = &self.text[start..at];
        if float {
            written.parse().map(Value::Float).map_err(|_| Invalid)
        } else {
            Ok(Value::Int(written))
        }
    }

    fn hex4(&mut self) -> Result<u32, Invalid> {
        let part = self.text.get(self.at..self.at + 4).ok_or(Invalid)?;
        if !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Invalid);
        }
        self.at += 4;
        u32::from_str_radix(part, 16).map_err(|_| Invalid)
    }

    fn string(&mut self) -> Result<Cow<'a, str>, Invalid> {
        self.at += 1;
        let start = self.at;
        let b = self.text.as_bytes();
        // the plain run, borrowed when the string has no escapes
        while let Some(&c) = b.get(self.at) {
            match c {
                b'"' => {
                    self.at += 1;
                    return Ok(Cow::Borrowed(&self.text[start..self.at - 1]));
                }
                b'\\' => break,
                0..=0x1f => return Err(Invalid),
                _ => self.at += 1,
            }
        }
        let mut out = String::from(&self.text[start..self.at]);
        loop {
            let c = *b.get(self.at).ok_or(Invalid)?;
            match c {
                b'"' => {
                    self.at += 1;
                    return Ok(Cow::Owned(out));
                }
                0..=0x1f => return Err(Invalid),
                b'\\' => {
                    let e = *b.get(self.at + 1).ok_or(Invalid)?;
                    self.at += 2;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let high = self.hex4()?;
                            let mut code = high;
                            if (0xd800..0xdc00).contains(&high)
                                && self.text[self.at..].starts_with("\\u")
                            {
                                let back = self.at;
                                self.at += 2;
                                let low = self.hex4()?;
                                if (0xdc00..0xe000).contains(&low) {
                                    code = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
                                } else {
                                    self.at = back;
                                }
                            }
                            // (a lone surrogate, which Python keeps, is no character here)
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        _ => return Err(Invalid),
                    }
                }
                _ => {
                    let ch = self.text[self.at..].chars().next().ok_or(Invalid)?;
                    out.push(ch);
                    self.at += ch.len_utf8();
                }
            }
        }
    }

    /// An array or object, checked and skipped.
    fn nested(&mut self) -> Result<(), Invalid> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Invalid);
        }
        let object = self.peek() == Some(b'{');
        let close = if object { b'}' } else { b']' };
        self.at += 1;
        self.space();
        if self.peek() == Some(close) {
            self.at += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            if object {
                self.member()?;
            } else {
                self.value()?;
            }
            self.space();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.space();
                }
                Some(c) if c == close => {
                    self.at += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(Invalid),
            }
        }
    }

    /// `"name": value`.
    fn member(&mut self) -> Result<Member<'a>, Invalid> {
        if self.peek() != Some(b'"') {
            return Err(Invalid);
        }
        let name = self.string()?;
        self.space();
        if self.peek() != Some(b':') {
            return Err(Invalid);
        }
        self.at += 1;
        self.space();
        Ok((name, self.value()?))
    }
}

/// The members of the record on `line` whose names are in `wanted`, the
/// last of each name; `Err(reason)` when the line is not a JSON object.
fn members<'a>(line: &'a str, wanted: &[&str]) -> Result<Vec<Member<'a>>, &'static str> {
    let mut r = Text {
        text: line,
        at: 0,
        depth: 0,
    };
    let invalid = |_| "not valid JSON";
    r.space();
    if r.peek() != Some(b'{') {
        // a valid value that is not an object is not an object; anything else is invalid
        r.value().map_err(invalid)?;
        r.space();
        return Err(if r.at == line.len() {
            "not a JSON object"
        } else {
            "not valid JSON"
        });
    }
    let mut kept: Vec<Member<'a>> = Vec::new();
    r.at += 1;
    r.depth = 1;
    r.space();
    if r.peek() == Some(b'}') {
        r.at += 1;
    } else {
        loop {
            let (name, value) = r.member().map_err(invalid)?;
            if wanted.contains(&name.as_ref()) {
                match kept.iter_mut().find(|(n, _)| *n == name) {
                    Some(slot) => slot.1 = value,
                    None => kept.push((name, value)),
                }
            }
            r.space();
            match r.peek() {
                Some(b',') => {
                    r.at += 1;
                    r.space();
                }
                Some(b'}') => {
                    r.at += 1;
                    break;
                }
                _ => return Err("not valid JSON"),
            }
        }
    }
    r.space();
    if r.at != line.len() {
        return Err("not valid JSON");
    }
    Ok(kept)
}

/// Whether `line` is a JSON object (what choosing the format asks).
pub fn is_object(line: &str) -> bool {
    line.trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
        && members(line, &[]).is_ok()
}

/// Reads records keyed by one field.
pub struct Parser {
    key_fields: Vec<String>,
    wanted: Vec<String>,
}

impl Parser {
    /// A reader whose key is the first of `key_fields` a record has.
    pub fn new(key_fields: Vec<String>) -> Parser {
        let mut wanted = key_fields.clone();
        wanted.extend(TIME_FIELDS.iter().map(|f| f.to_string()));
        Parser { key_fields, wanted }
    }

    /// The key (`None` when null, empty or `-`) and epoch seconds of the
    /// record on `line`, or why it cannot be replayed.
    pub fn parse<'a>(&self, line: &'a str) -> Result<Parsed<'a>, String> {
        let wanted: Vec<&str> = self.wanted.iter().map(String::as_str).collect();
        let kept = members(line, &wanted)?;
        let key = self.key(&kept)?;
        for field in TIME_FIELDS {
            let Some(value) = value_of(&kept, field) else {
                continue;
            };
            return Ok((key, time_of(field, value)?));
        }
        Err("no 'time', 'timestamp' or 'ts' field".into())
    }

    /// The key of a record whose wanted members are `kept`.
    fn key<'a>(&self, kept: &[Member<'a>]) -> Result<Option<Cow<'a, str>>, String> {
        for field in &self.key_fields {
            let Some(value) = value_of(kept, field) else {
                continue;
            };
            return match value {
                Value::Null => Ok(None),
                Value::Str(s) if s.is_empty() || s == "-" => Ok(None),
                Value::Str(s) => Ok(Some(s.clone())),
                Value::Int("-0") => Ok(Some("0".into())),
                Value::Int(digits) => Ok(Some(Cow::Borrowed(digits))),
                Value::Float(x) => Ok(Some(float_repr(*x).into())),
                Value::Bool | Value::Nested => Err(format!(
                    "field {} is not a string or a number",
                    str_repr(field)
                )),
            };
        }
        let names: Vec<String> = self.key_fields.iter().map(|f| str_repr(f)).collect();
        Err(format!("no {} field", names.join(" or ")))
    }
}

/// The value of the member `name` among `kept`.
fn value_of<'k, 'a>(kept: &'k [Member<'a>], name: &str) -> Option<&'k Value<'a>> {
    kept.iter().find(|(n, _)| n == name).map(|(_, v)| v)
}

/// The epoch seconds a time field holds.
fn time_of(field: &str, value: &Value<'_>) -> Result<f64, String> {
    match value {
        Value::Int(digits) => {
            let written = if *digits == "-0" { "0" } else { digits };
            checked(written.parse().unwrap_or(f64::INFINITY), || {
                written.to_owned()
            })
        }
        Value::Float(x) => checked(*x, || float_repr(*x)),
        Value::Str(text) => {
            let seconds = match parse_float(text) {
                Some(x) => x,
                None => {
                    let iso = text.trim_matches(super::python::is_space);
                    let iso = match iso.strip_suffix(['Z', 'z']) {
                        Some(head) => Cow::Owned(format!("{head}+00:00")),
                        None => Cow::Borrowed(iso),
                    };
                    parse_iso(&iso).ok_or_else(|| unread(text))?
                }
            };
            checked(seconds, || str_repr(text))
        }
        _ => Err(format!("field {} is not a time", str_repr(field))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> Parser {
        Parser::new(vec!["user".into()])
    }

    #[test]
    fn records_are_read_as_python_reads_them() {
        let t0 = 1_709_596_800.0;
        let r = user();
        assert_eq!(
            r.parse("{\"ts\": 1709596800, \"user\": \"u1\"}\n"),
            Ok((Some("u1".into()), t0))
        );
        assert_eq!(
            r.parse("{\"ts\": \"1709596805\", \"user\": 42}"),
            Ok((Some("42".into()), t0 + 5.0))
        );
        assert_eq!(
            r.parse("{\"ts\": 1709596800.5, \"user\": 1.5e3}"),
            Ok((Some("1500.0".into()), t0 + 0.5))
        );
        assert_eq!(
            r.parse("{\"ts\": 1709596800, \"user\": \"\\u00e9\\ud83d\\ude00\"}"),
            Ok((Some("é😀".into()), t0))
        );
        assert_eq!(
            r.parse("{\"user\": \"a\", \"user\": null, \"ts\": 1709596800}"),
            Ok((None, t0))
        );
        assert_eq!(
            r.parse("{\"timestamp\": \"2024-03-05T00:00:00.400Z\", \"user\": \"u1\", \"x\": [1, {\"y\": NaN}]}"),
            Ok((Some("u1".into()), t0 + 0.4))
        );
    }

    #[test]
    fn bad_records_say_why_as_before() {
        let r = user();
        let why = |line: &str| r.parse(line).unwrap_err();
        assert_eq!(why("{not json"), "not valid JSON");
        assert_eq!(why("[1, 2]"), "not a JSON object");
        assert_eq!(why("{\"a\": 1} x"), "not valid JSON");
        assert_eq!(why("{\"a\": 01}"), "not valid JSON");
        assert_eq!(why("{\"a\": \"\t\"}"), "not valid JSON");
        assert_eq!(why("{\"ts\": 1}"), "no 'user' field");
        assert_eq!(
            why("{\"user\": true, \"ts\": 1}"),
            "field 'user' is not a string or a number"
        );
        assert_eq!(
            why("{\"user\": \"u\"}"),
            "no 'time', 'timestamp' or 'ts' field"
        );
        assert_eq!(
            why("{\"user\": \"u\", \"ts\": \"yesterday\"}"),
            "bad time 'yesterday'"
        );
        assert_eq!(
            why("{\"user\": \"u\", \"ts\": [1]}"),
            "field 'ts' is not a time"
        );
        for (ts, written) in [
            ("NaN", "nan"),
            ("-Infinity", "-inf"),
            ("1e300", "1e+300"),
            ("-5", "-5"),
            ("\"inf\"", "'inf'"),
        ] {
            assert_eq!(
                why(&format!("{{\"user\": \"u\", \"ts\": {ts}}}")),
                format!("bad time {written}: give a time from 1970 up to 2200")
            );
        }
        assert_eq!(
            why(&format!("{}1{}", "[".repeat(600), "]".repeat(600))),
            "not valid JSON"
        );
        let ip = Parser::new(vec!["ip".into(), "remote_addr".into()]);
        assert_eq!(
            ip.parse("{\"ts\": 1}").unwrap_err(),
            "no 'ip' or 'remote_addr' field"
        );
    }
}
