//! What an operator's text names: an exact key, or an address or range
//! (refused when it reads as one but is not, or is wider than a /8); or a
//! key's stored form, as the record of denials and the lists give it back
//! (see [`stored_form`]), which names the very key even when only its tag
//! (`#` and its SHA-1) was kept or its bytes are not UTF-8.

use crate::error::{Error, Result};
use crate::keys::{key_tag, tag_of};
use crate::net::Cidr;

/// What a safelist or blocklist entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An exact key, as the application checks it.
    Key(Vec<u8>),
    /// An IP address or a CIDR range, matched against the client address.
    Net(Cidr),
    /// A key named by its tag (`#` and the SHA-1 of a key over 128 bytes,
    /// holding braces or starting with `#`): the key itself is not known,
    /// so the tag is not hashed again.
    Tag(Vec<u8>),
}

/// How the admin tools read a target (see [`Target::given`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TargetOptions {
    /// An exact key, even when its text reads as an address or a range.
    pub key: bool,
    /// Allow a range wider than [`WIDEST_V4`] / [`WIDEST_V6`].
    pub force: bool,
    /// The text is a key's stored form ([`stored_form`]), as the consoles
    /// and `ratekeeper top` give it: the very key whose denials were recorded.
    pub tag: bool,
}

/// The widest IPv4 range listed without `force`: a /8 (16 million addresses).
pub const WIDEST_V4: u8 = 8;
/// The widest IPv6 range listed without `force`: a /32 (a whole provider).
pub const WIDEST_V6: u8 = 32;

impl Target {
    /// An address or range when the text is one (`203.0.113.7`, `10.0.0.0/8`,
    /// `2001:db8::/32`), an exact key otherwise.
    pub fn parse(target: &[u8]) -> Result<Target> {
        Target::given(
            target,
            TargetOptions {
                key: false,
                force: true,
                tag: false,
            },
        )
    }

    /// The target a key's stored form ([`stored_form`]) names: the key
    /// itself when it is its own tag, else its tag. Refused when the text
    /// is no key's stored form.
    pub fn stored(text: &[u8]) -> Result<Target> {
        let refused = |why: &str| {
            Error::config(format!(
                "'{}' is not a key's stored form ({why}): give it as a console or `ratekeeper top` \
                 shows it, or name the key itself (without tag=True in Python, tag: true in Ruby, --tag)",
                String::from_utf8_lossy(text).escape_debug()
            ))
        };
        if text.is_empty() {
            return Err(Error::config(
                "the target is empty: give a key's stored form",
            ));
        }
        let bytes = decode_stored(text).ok_or_else(|| refused("a bad escape after #%"))?;
        if is_hashed(&bytes) {
            return Ok(Target::Tag(bytes.to_ascii_lowercase()));
        }
        if bytes.first() == Some(&b'#') {
            return Err(refused("a tag is # and 40 hexadecimal digits"));
        }
        if tag_of(&bytes).as_ref() != bytes.as_slice() {
            return Err(refused(
                "a key over 128 bytes or holding braces is stored as its tag",
            ));
        }
        Ok(Target::Key(bytes))
    }

    /// The tag this target names a key by (`None` for an address or range).
    pub fn key_tag(&self) -> Option<Vec<u8>> {
        match self {
            Target::Key(key) => Some(key_tag(key)),
            Target::Tag(tag) => Some(tag.clone()),
            Target::Net(_) => None,
        }
    }

    /// A target as an operator gave it: an exact key when `options.key`;
    /// else an address or range when the text reads as one, refused when it
    /// reads as one but is not (`300.1.2.3`, `1.2.3`, `/24`, `fe80::1%eth0`,
    /// an address with spaces around it: none would match a client) or when
    /// the range is wider than a /8 (IPv6: /32) without `options.force`;
    /// else an exact key.
    pub fn given(target: &[u8], options: TargetOptions) -> Result<Target> {
        if options.tag {
            return Target::stored(target);
        }
        if target.is_empty() {
            return Err(Error::config(
                "the target is empty: give a key, an IP address or a CIDR range",
            ));
        }
        let Some(text) = std::str::from_utf8(target).ok().filter(|_| !options.key) else {
            return Ok(Target::Key(target.to_vec()));
        };
        if !looks_like_net(text.trim()) {
            return Ok(Target::Key(target.to_vec()));
        }
        let shown = text.escape_debug();
        let as_key = "or give it as an exact key (key=True in Python, key: true in Ruby, --key)";
        if text.trim() != text {
            return Err(Error::config(format!(
                "'{shown}' has spaces around it: give the address without them, {as_key}"
            )));
        }
        let net = Cidr::parse(text)
            .map_err(|e| {
                Error::config(format!(
                    "'{shown}' reads as an IP address or range but is not one ({e}): fix it, {as_key}"
                ))
            })?
            .network_range();
        let widest = if net.is_ipv4() { WIDEST_V4 } else { WIDEST_V6 };
        if net.prefix() < widest && !options.force {
            return Err(Error::config(format!(
                "the range {net} is wider than a /{widest}: it would hold far more clients than one \
                 abuser; give force=True (Ruby force: true, --force) if you mean it"
            )));
        }
        Ok(Target::Net(net))
    }
}

/// Whether a stored tag is a hash (`#` and 40 hexadecimal digits): a key
/// kept verbatim never starts with `#`.
fn is_hashed(tag: &[u8]) -> bool {
    tag.len() == 41 && tag[0] == b'#' && tag[1..].iter().all(u8::is_ascii_hexdigit)
}

/// A key's stored form: the text that names the very key a tag was made
/// of, what the record of denials and the lists give back for a key and
/// what a `tag` target ([`TargetOptions::tag`]) reads. A tag that is
/// printable UTF-8 without spaces at its ends is its own form (`user:42`,
/// `#9ba4…` for a hashed key); any other (bytes not UTF-8, control
/// characters) is `#%` and the tag with each byte outside printable ASCII
/// and each `%` written `%XX` (`tok\xff\xfe` is `#%tok%FF%FE`): a form
/// survives an HTML form, a URL and a shell, and a verbatim tag never
/// starts with `#`, so no form is ambiguous.
pub fn stored_form(tag: &[u8]) -> String {
    if let Ok(text) = std::str::from_utf8(tag) {
        let plain =
            !text.chars().any(char::is_control) && text.trim() == text && !text.starts_with("#%");
        if plain {
            return text.to_owned();
        }
    }
    let mut out = String::with_capacity(tag.len() * 3 + 2);
    out.push_str("#%");
    for &b in tag {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The tag a stored form ([`stored_form`]) names, unchecked; `None` when a
/// `#%` form holds a bad escape.
pub fn decode_stored(text: &[u8]) -> Option<Vec<u8>> {
    let Some(escaped) = text.strip_prefix(b"#%") else {
        return Some(text.to_vec());
    };
    let mut out = Vec::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some((&b, tail)) = rest.split_first() {
        if b != b'%' {
            out.push(b);
            rest = tail;
            continue;
        }
        let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
        out.push(u8::from_str_radix(hex, 16).ok()?);
        rest = &tail[2..];
    }
    Some(out)
}

/// Whether text reads as an attempt at an address or range: digits and dots
/// (`1.2.3`, `300.1.2.3`), hex groups with colons (`fe80::1%eth0`), or a bare
/// `/prefix`; an optional `/prefix` after.
fn looks_like_net(text: &str) -> bool {
    let addr = text.split_once('/').map_or(text, |(a, _)| a);
    let addr = addr.split_once('%').map_or(addr, |(a, _)| a);
    let dotted = addr.contains('.') && addr.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let colons = addr.contains(':')
        && addr.matches(':').count() >= 2
        && addr
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
    dotted || colons || (addr.is_empty() && text.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_tell_addresses_from_keys() {
        assert!(matches!(
            Target::parse(b"10.0.0.0/8").unwrap(),
            Target::Net(_)
        ));
        assert!(matches!(
            Target::parse(b"2001:db8::1").unwrap(),
            Target::Net(_)
        ));
        assert_eq!(
            Target::parse(b"user:42").unwrap(),
            Target::Key(b"user:42".to_vec())
        );
        assert!(Target::parse(b"10.0.0.0/40").is_err());
        assert!(Target::parse(b"").is_err());
        let admin = TargetOptions::default();
        for bad in [
            "300.1.2.3",
            "1.2.3.4 ",
            "1.2.3",
            "/24",
            "fe80::1%eth0",
            " 10.0.0.1",
        ] {
            let message = Target::given(bad.as_bytes(), admin)
                .unwrap_err()
                .to_string();
            assert!(message.contains("exact key"), "{bad}: {message}");
            let key = TargetOptions {
                key: true,
                ..TargetOptions::default()
            };
            assert_eq!(
                Target::given(bad.as_bytes(), key).unwrap(),
                Target::Key(bad.as_bytes().to_vec())
            );
        }
        for wide in ["0.0.0.0/0", "10.0.0.0/7", "::/0", "2001:db8::/31"] {
            let message = Target::given(wide.as_bytes(), admin)
                .unwrap_err()
                .to_string();
            assert!(message.contains("force"), "{wide}: {message}");
            let force = TargetOptions {
                force: true,
                ..TargetOptions::default()
            };
            assert!(matches!(
                Target::given(wide.as_bytes(), force),
                Ok(Target::Net(_))
            ));
        }
        for fine in [
            "10.0.0.0/8",
            "2001:db8::/32",
            "user:1",
            "alice@example.com",
            "a:b",
            "1.5x",
        ] {
            assert!(Target::given(fine.as_bytes(), admin).is_ok(), "{fine}");
        }
    }

    #[test]
    fn stored_forms_name_the_very_key() {
        let hashed = key_tag(&[b'a'; 200]);
        let braced = key_tag(b"{user}");
        let cases: [(&[u8], Target); 5] = [
            (b"user:42", Target::Key(b"user:42".to_vec())),
            (&hashed, Target::Tag(hashed.clone())),
            (&braced, Target::Tag(braced.clone())),
            (b"tok\xff\xfe", Target::Key(b"tok\xff\xfe".to_vec())),
            (b" a\nb%", Target::Key(b" a\nb%".to_vec())),
        ];
        for (tag, target) in cases {
            let form = stored_form(tag);
            assert!(form.bytes().all(|b| b.is_ascii_graphic()), "{form}");
            let tagged = TargetOptions {
                tag: true,
                ..TargetOptions::default()
            };
            assert_eq!(Target::given(form.as_bytes(), tagged).unwrap(), target);
            assert_eq!(
                Target::stored(form.as_bytes()).unwrap().key_tag().unwrap(),
                tag
            );
        }
        assert_eq!(stored_form(b"tok\xff\xfe"), "#%tok%FF%FE");
        assert_eq!(stored_form(b"caf\xc3\xa9"), "caf\u{e9}");
        // a form's tag is never hashed again; the key itself is
        assert_ne!(Target::parse(&hashed).unwrap(), Target::Tag(hashed.clone()));
        for bad in [
            &b""[..],
            b"#abc",
            b"#%tok%F",
            b"#%tok%GG",
            b"{x}",
            &[b'a'; 129],
        ] {
            assert!(Target::stored(bad).is_err(), "{bad:?}");
        }
    }
}
