//! How Python reads and spells numbers and text, where the report of
//! `ratekeeper analyze` depends on it: the report was written by Python
//! before the replay moved here, and its reasons for bad lines, its user
//! periods and its keys stay what they were. Nothing else in the core uses
//! these.

/// Python's `str.isspace` of one character (what `\s` matches, and what
/// `str.strip()` removes).
pub fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\x1c'..='\x1f'
            | ' '
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Python's `a // b` of two floats (`b > 0`): the floor of the quotient, as
/// Python computes it from `fmod` (which `(a / b).floor()` is not, when the
/// quotient rounds up to a whole number).
pub fn floor_div(a: f64, b: f64) -> f64 {
    let rem = a % b;
    let mut div = (a - rem) / b;
    if rem != 0.0 && ((b < 0.0) != (rem < 0.0)) {
        div -= 1.0;
    }
    if div != 0.0 {
        let floor = div.floor();
        if div - floor > 0.5 {
            floor + 1.0
        } else {
            floor
        }
    } else {
        0.0_f64.copysign(a / b)
    }
}

/// Python's `repr` of a float: `1.5`, `100.0`, `1e+300`, `1e-05`, `nan`, `inf`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    // the shortest digits that read back as `x`, and the exponent of the first
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if (-4..16).contains(&exponent) {
        let point = exponent + 1;
        let text = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if digits.len() <= point as usize {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (whole, fraction) = digits.split_at(point as usize);
            format!("{whole}.{fraction}")
        };
        return format!("{sign}{text}");
    }
    let (first, rest) = digits.split_at(1);
    let rest = if rest.is_empty() {
        String::new()
    } else {
        format!(".{rest}")
    };
    let exp_sign = if exponent < 0 { '-' } else { '+' };
    format!("{sign}{first}{rest}e{exp_sign}{:02}", exponent.abs())
}

/// Python's `repr` of a string: quoted with `'` (or `"` when it holds a `'`
/// and no `"`), its backslashes, quote, control and invisible characters
/// escaped. (Python asks the Unicode database which characters are
/// printable; this knows the invisible ones a log can hold: controls,
/// separators, format characters, private use.)
pub fn str_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// Whether Python prints `c` as itself in a `repr` (see [`str_repr`]).
fn is_printable(c: char) -> bool {
    let code = c as u32;
    if code < 0x7f {
        return code >= 0x20;
    }
    !(c.is_control()
        || (is_space(c) && c != ' ')
        || matches!(
            code,
            0xad | 0x600..=0x605
                | 0x61c
                | 0x6dd
                | 0x70f
                | 0x180e
                | 0x200b..=0x200f
                | 0x202a..=0x202e
                | 0x2060..=0x206f
                | 0xd800..=0xf8ff
                | 0xfeff
                | 0xfff0..=0xfffb
                | 0xe0000..=0xe0fff
                | 0xf0000..
        ))
}

/// Python's `float(text)`: surrounding whitespace, a sign, `_` between
/// digits, `inf`, `infinity` and `nan` in any case. `None` when Python
/// raises.
pub fn parse_float(text: &str) -> Option<f64> {
    let text = text.trim_matches(is_space);
    if text.is_empty() || !text.is_ascii() {
        return None;
    }
    let plain;
    let text = if text.contains('_') {
        let bytes = text.as_bytes();
        let between_digits = bytes.iter().enumerate().all(|(i, &b)| {
            b != b'_'
                || (i > 0
                    && i + 1 < bytes.len()
                    && bytes[i - 1].is_ascii_digit()
                    && bytes[i + 1].is_ascii_digit())
        });
        if !between_digits {
            return None;
        }
        plain = text.replace('_', "");
        plain.as_str()
    } else {
        text
    };
    let unsigned = text.trim_start_matches(['+', '-']);
    if text.len() - unsigned.len() > 1 {
        return None;
    }
    let word = unsigned.to_ascii_lowercase();
    let numeric = unsigned
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !(numeric || matches!(word.as_str(), "inf" | "infinity" | "nan")) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_spelled_as_python_spells_them() {
        for (x, text) in [
            (1.5, "1.5"),
            (100.0, "100.0"),
            (-5.0, "-5.0"),
            (1e300, "1e+300"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
            (1.2345e-7, "1.2345e-07"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
            (1709596800.25, "1709596800.25"),
        ] {
            assert_eq!(float_repr(x), text);
        }
    }

    #[test]
    fn strings_are_quoted_as_python_quotes_them() {
        assert_eq!(str_repr("yesterday"), "'yesterday'");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("'\""), "'\\'\"'");
        assert_eq!(
            str_repr("a\\b\r\n\t\x00\x7f"),
            "'a\\\\b\\r\\n\\t\\x00\\x7f'"
        );
        assert_eq!(
            str_repr("\u{202e}é\u{a0}\u{10ffff}"),
            "'\\u202eé\\xa0\\U0010ffff'"
        );
    }

    #[test]
    fn float_text_is_read_as_python_reads_it() {
        assert_eq!(parse_float(" 1_700.5\n"), Some(1700.5));
        assert_eq!(parse_float("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_float("NaN").unwrap().is_nan());
        assert_eq!(parse_float("1e300"), Some(1e300));
        assert_eq!(parse_float(".5"), Some(0.5));
        for bad in [
            "",
            "1__0",
            "_1",
            "1_",
            "yesterday",
            "--1",
            "1e",
            "0x10",
            "1.5.2",
        ] {
            assert_eq!(parse_float(bad), None, "{bad}");
        }
    }

    #[test]
    fn floor_division_is_pythons() {
        assert_eq!(floor_div(1709596800.0, 86400.0), 19787.0);
        assert_eq!(floor_div(86399.99999999999, 86400.0), 0.0);
        assert_eq!(floor_div(172800.0, 86400.0), 2.0);
    }
}
