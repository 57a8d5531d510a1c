//! Client addresses: which IP a request comes from, honouring `X-Forwarded-For`
//! only through proxies the operator trusts, and CIDR ranges.

use crate::error::{Error, Result};
use std::net::IpAddr;

/// An address range such as `10.0.0.0/8`, `2001:db8::/32` or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n`, `ipv6/n` or a bare address.
    pub fn parse(text: &str) -> Result<Cidr> {
        let bad = |why: &str| Error::config(format!("invalid address range '{text}': {why}"));
        let (addr, prefix) = match text.trim().split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text.trim(), None),
        };
        let network: IpAddr = addr.parse().map_err(|_| bad("not an IP address"))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| bad(&format!("the prefix length must be 0 to {max}")))?,
        };
        Ok(Cidr { network, prefix })
    }

    /// Whether `ip` lies in this range (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u32::from(net).into(), u32::from(ip).into(), self.prefix, 32)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), u128::from(ip), self.prefix, 128)
            }
            _ => false,
        }
    }
}

impl Cidr {
    /// The prefix length (32 or 128 for one address).
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether it is an IPv4 range.
    pub fn is_ipv4(&self) -> bool {
        self.network.is_ipv4()
    }

    /// The same range with the host bits cleared (`10.1.2.3/8` is `10.0.0.0/8`);
    /// an IPv4-mapped IPv6 address is taken as IPv4.
    pub fn network_range(&self) -> Cidr {
        let (network, prefix) = match (canonical(self.network), self.network) {
            (IpAddr::V4(v4), IpAddr::V6(_)) => (IpAddr::V4(v4), self.prefix.saturating_sub(96)),
            (ip, _) => (ip, self.prefix),
        };
        let network = match network {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V4((u32::from(v4) & mask).into())
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
        };
        Cidr { network, prefix }
    }

    /// The one address this range holds, if it is a single address.
    pub fn single_address(&self) -> Option<IpAddr> {
        let max = if self.network.is_ipv4() { 32 } else { 128 };
        (self.prefix == max).then_some(self.network)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn masked(net: u128, ip: u128, prefix: u8, bits: u32) -> bool {
    let shift = bits - u32::from(prefix);
    shift >= bits || (net >> shift) == (ip >> shift)
}

/// An IPv4-mapped IPv6 address as IPv4; any other address as it is.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Parses one hop of a forwarding header: an address, maybe with a port
/// (`1.2.3.4:80`, `[::1]:80`) or quotes.
pub fn parse_hop(text: &str) -> Option<IpAddr> {
    let hop = text.trim().trim_matches('"');
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Some(rest) = hop.strip_prefix('[') {
        return rest
            .split_once(']')
            .and_then(|(ip, _)| ip.parse().ok())
            .map(canonical);
    }
    let (ip, port) = hop.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    ranges: Vec<Cidr>,
}

impl TrustedProxies {
    /// From address ranges such as `["10.0.0.0/8", "127.0.0.1"]`.
    pub fn parse<S: AsRef<str>>(ranges: &[S]) -> Result<TrustedProxies> {
        Ok(TrustedProxies {
            ranges: ranges
                .iter()
                .map(|r| Cidr::parse(r.as_ref()))
                .collect::<Result<_>>()?,
        })
    }

    /// Whether `ip` is a trusted proxy.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|r| r.contains(ip))
    }

    /// The client's address: the peer itself unless the peer is a trusted
    /// proxy; then `X-Forwarded-For` is walked from the right, past trusted
    /// proxies, to the first address that is not one. A malformed hop stops
    /// the walk at the last address known good. Without a parseable peer the
    /// peer text is returned as it is.
    pub fn client_ip(&self, peer: &str, forwarded_for: Option<&str>) -> String {
        let Some(mut client) = parse_hop(peer) else {
            return peer.trim().to_owned();
        };
        if let Some(header) = forwarded_for {
            for hop in header.rsplit(',') {
                if !self.trusts(client) {
                    break;
                }
                match parse_hop(hop) {
                    Some(ip) => client = ip,
                    None => break,
                }
            }
        }
        client.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(ranges: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(ranges).unwrap()
    }

    #[test]
    fn cidr_ranges() {
        let net = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(net.contains("10.200.1.1".parse().unwrap()));
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.2.3".parse().unwrap()));
        let v6 = Cidr::parse("2001:db8::/32").unwrap();
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains("2001:db9::5".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!(Cidr::parse("1.2.3.4")
            .unwrap()
            .contains("1.2.3.4".parse().unwrap()));
        for bad in ["10.0.0.0/33", "banana", "10.0.0.0/x", "::/129", ""] {
            assert!(
                Cidr::parse(bad).unwrap_err().to_string().contains(bad),
                "{bad}"
            );
        }
    }

    #[test]
    fn ranges_are_shown_canonically() {
        assert_eq!(
            Cidr::parse("10.1.2.3/8")
                .unwrap()
                .network_range()
                .to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            Cidr::parse("203.0.113.7")
                .unwrap()
                .network_range()
                .to_string(),
            "203.0.113.7/32"
        );
        assert_eq!(
            Cidr::parse("::ffff:10.0.0.1/104")
                .unwrap()
                .network_range()
                .to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            Cidr::parse("2001:db8::1/32")
                .unwrap()
                .network_range()
                .to_string(),
            "2001:db8::/32"
        );
        assert_eq!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .network_range()
                .to_string(),
            "0.0.0.0/0"
        );
        assert!(Cidr::parse("1.2.3.4").unwrap().single_address().is_some());
    }

    #[test]
    fn untrusted_peers_cannot_spoof() {
        let none = TrustedProxies::default();
        assert_eq!(
            none.client_ip("203.0.113.9", Some("1.1.1.1")),
            "203.0.113.9"
        );
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(lb.client_ip("203.0.113.9", Some("1.1.1.1")), "203.0.113.9");
    }

    #[test]
    fn trusted_proxies_are_walked_from_the_right() {
        let lb = proxies(&["10.0.0.0/8", "127.0.0.1"]);
        assert_eq!(
            lb.client_ip("10.0.0.2", Some("6.6.6.6, 198.51.100.7, 10.0.0.9")),
            "198.51.100.7"
        );
        assert_eq!(
            lb.client_ip("127.0.0.1", Some("198.51.100.7:5555")),
            "198.51.100.7"
        );
        assert_eq!(
            lb.client_ip("10.0.0.2", Some("[2001:db8::1]:443")),
            "2001:db8::1"
        );
        assert_eq!(
            lb.client_ip("10.0.0.2", Some("10.1.1.1, 10.2.2.2")),
            "10.1.1.1"
        );
        assert_eq!(lb.client_ip("10.0.0.2", None), "10.0.0.2");
    }

    #[test]
    fn malformed_hops_stop_the_walk() {
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            lb.client_ip("10.0.0.2", Some("1.1.1.1, garbage")),
            "10.0.0.2"
        );
        assert_eq!(lb.client_ip("10.0.0.2", Some("")), "10.0.0.2");
        assert_eq!(lb.client_ip("10.0.0.2", Some(",,,")), "10.0.0.2");
        assert_eq!(lb.client_ip("not-an-ip", Some("1.1.1.1")), "not-an-ip");
    }
}
