//! What an operator's text names: an exact key, or an address or range
//! (refused when it reads as one but is not, or is wider than a /8).

use crate::error::{Error, Result};
use crate::net::Cidr;

/// What a safelist or blocklist entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An exact key, as the application checks it.
    Key(Vec<u8>),
    /// An IP address or a CIDR range, matched against the client address.
    Net(Cidr),
}

/// How the admin tools read a target (see [`Target::given`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TargetOptions {
    /// An exact key, even when its text reads as an address or a range.
    pub key: bool,
    /// Allow a range wider than [`WIDEST_V4`] / [`WIDEST_V6`].
    pub force: bool,
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
            },
        )
    }

    /// A target as an operator gave it: an exact key when `options.key`;
    /// else an address or range when the text reads as one, refused when it
    /// reads as one but is not (`300.1.2.3`, `1.2.3`, `/24`, `fe80::1%eth0`,
    /// an address with spaces around it: none would match a client) or when
    /// the range is wider than a /8 (IPv6: /32) without `options.force`;
    /// else an exact key.
    pub fn given(target: &[u8], options: TargetOptions) -> Result<Target> {
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
                force: false,
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
                key: false,
                force: true,
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
}
