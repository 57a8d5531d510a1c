//! Client addresses: which IP a request comes from, honouring `X-Forwarded-For`
//! only through proxies the operator trusts; which client that address names
//! (an IPv6 client holds a whole /64, so it is limited and banned as one);
//! and CIDR ranges.

use crate::error::{Error, Result};
use std::net::IpAddr;
use std::ops::RangeInclusive;

/// How much of an IPv4 address names a client when not given: all of it.
pub const DEFAULT_IPV4_PREFIX: u8 = 32;
/// How much of an IPv6 address names a client when not given: its /64, what
/// one subscriber is usually given (and can send each request from a new
/// address in).
pub const DEFAULT_IPV6_PREFIX: u8 = 64;
/// The IPv4 prefixes a client may be taken as (`ipv4_prefix`).
pub const IPV4_PREFIXES: RangeInclusive<u8> = 16..=32;
/// The IPv6 prefixes a client may be taken as (`ipv6_prefix`).
pub const IPV6_PREFIXES: RangeInclusive<u8> = 48..=128;

/// How much of its address names a client: keys of kind `ip` and address
/// bans take an IPv4 address as its /`v4` and an IPv6 address as its /`v6`
/// (an IPv4-mapped IPv6 address as IPv4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientPrefixes {
    /// The IPv4 prefix length (16 to 32).
    pub v4: u8,
    /// The IPv6 prefix length (48 to 128).
    pub v6: u8,
}

impl Default for ClientPrefixes {
    fn default() -> ClientPrefixes {
        ClientPrefixes {
            v4: DEFAULT_IPV4_PREFIX,
            v6: DEFAULT_IPV6_PREFIX,
        }
    }
}

impl ClientPrefixes {
    /// Checked prefixes (the options `ipv4_prefix` and `ipv6_prefix`), each
    /// the default when not given.
    pub fn new(v4: Option<i64>, v6: Option<i64>) -> Result<ClientPrefixes> {
        let check = |name: &str, given: Option<i64>, default: u8, range: RangeInclusive<u8>| {
            let Some(given) = given else {
                return Ok(default);
            };
            u8::try_from(given)
                .ok()
                .filter(|p| range.contains(p))
                .ok_or_else(|| {
                    Error::config(format!(
                        "invalid {name} {given}: give {} to {}",
                        range.start(),
                        range.end()
                    ))
                })
        };
        Ok(ClientPrefixes {
            v4: check("ipv4_prefix", v4, DEFAULT_IPV4_PREFIX, IPV4_PREFIXES)?,
            v6: check("ipv6_prefix", v6, DEFAULT_IPV6_PREFIX, IPV6_PREFIXES)?,
        })
    }

    /// The network that names the client of address `ip`.
    pub fn network(&self, ip: IpAddr) -> Cidr {
        let network = canonical(ip);
        let prefix = if network.is_ipv4() { self.v4 } else { self.v6 };
        Cidr { network, prefix }.network_range()
    }

    /// The client of address `ip` as a key's text: the address itself when
    /// the prefix keeps all of it (`203.0.113.7`), else its network
    /// (`2001:db8:1:2::/64`).
    pub fn client_of(&self, ip: IpAddr) -> String {
        client_text(&self.network(ip))
    }
}

/// A client's network as text: a single address bare, a range as `net/len`.
pub fn client_text(network: &Cidr) -> String {
    match network.single_address() {
        Some(ip) => address_text(ip),
        None => network.to_string(),
    }
}

/// An address as text, as `Display` writes it (an IPv4 address's four
/// numbers written straight: every request's client is one).
pub fn address_text(ip: IpAddr) -> String {
    let IpAddr::V4(v4) = ip else {
        return ip.to_string();
    };
    let mut text = String::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            text.push('.');
        }
        text.push_str(itoa::Buffer::new().format(octet));
    }
    text
}

/// The network an address ban given as text covers (`penalize(ip=...)`):
/// an address is taken as its client's network by the default prefixes (an
/// IPv6 address as its /64); a network (what a middleware with other
/// prefixes names a client by) is taken as it is, when it is no wider than
/// a client can be (IPv4 /16, IPv6 /48).
pub fn client_network(text: &str) -> Result<Cidr> {
    if let Some(ip) = parse_hop(text) {
        return Ok(ClientPrefixes::default().network(ip));
    }
    let bad = || {
        Error::config(format!(
            "invalid client address '{}': give one IPv4 or IPv6 address, or a client's network \
             (IPv4 /{} to /32, IPv6 /{} to /128)",
            text.escape_debug(),
            IPV4_PREFIXES.start(),
            IPV6_PREFIXES.start()
        ))
    };
    let network = Cidr::parse(text).map_err(|_| bad())?.network_range();
    let range = if network.is_ipv4() {
        IPV4_PREFIXES
    } else {
        IPV6_PREFIXES
    };
    if !range.contains(&network.prefix()) {
        return Err(bad());
    }
    Ok(network)
}

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

/// Who a request's client is: the proxies whose `X-Forwarded-For` is
/// believed, and how much of the client's address names the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    ranges: Vec<Cidr>,
    /// Whether a peer that is not an address (a Unix socket's, as a WSGI or
    /// Rack server gives it: empty or `unix:PATH`) is a trusted proxy.
    unix: bool,
    prefixes: ClientPrefixes,
}

/// The key, and the address, of the client of a request whose peer is not
/// an address (a Unix socket, an empty `REMOTE_ADDR`) when no trusted proxy
/// names the client: every such request is counted under it, never let
/// past a throttle unkeyed (and the first is logged as a configuration
/// problem).
pub const UNKNOWN_PEER: &str = "unknown-peer";

/// The entry of `trusted_proxies` that trusts a peer that is not an
/// address: a proxy on a Unix socket.
pub const UNIX_PROXY: &str = "unix";

impl TrustedProxies {
    /// From address ranges such as `["10.0.0.0/8", "127.0.0.1"]`, and
    /// `"unix"` for a proxy that connects over a Unix socket, with the
    /// default client prefixes (IPv4 /32, IPv6 /64).
    pub fn parse<S: AsRef<str>>(ranges: &[S]) -> Result<TrustedProxies> {
        let unix = ranges.iter().any(|r| r.as_ref().trim() == UNIX_PROXY);
        Ok(TrustedProxies {
            ranges: ranges
                .iter()
                .filter(|r| r.as_ref().trim() != UNIX_PROXY)
                .map(|r| Cidr::parse(r.as_ref()))
                .collect::<Result<_>>()?,
            unix,
            prefixes: ClientPrefixes::default(),
        })
    }

    /// These proxies with each part not `given` (the ranges, the IPv4
    /// prefix, the IPv6 prefix, in that order) taken from `base`.
    pub fn or_from(self, base: &TrustedProxies, given: (bool, bool, bool)) -> TrustedProxies {
        let (ranges, v4, v6) = given;
        TrustedProxies {
            ranges: if ranges {
                self.ranges
            } else {
                base.ranges.clone()
            },
            unix: if ranges { self.unix } else { base.unix },
            prefixes: ClientPrefixes {
                v4: if v4 {
                    self.prefixes.v4
                } else {
                    base.prefixes.v4
                },
                v6: if v6 {
                    self.prefixes.v6
                } else {
                    base.prefixes.v6
                },
            },
        }
    }

    /// The same proxies, naming clients by `prefixes`.
    pub fn with_prefixes(mut self, prefixes: ClientPrefixes) -> TrustedProxies {
        self.prefixes = prefixes;
        self
    }

    /// How much of its address names a client.
    pub fn prefixes(&self) -> ClientPrefixes {
        self.prefixes
    }

    /// Whether `ip` is a trusted proxy.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|r| r.contains(ip))
    }

    /// Whether the address that connected (`peer`, as a door gives it) is
    /// a trusted proxy.
    pub fn trusts_peer(&self, peer: &str) -> bool {
        match parse_hop(peer) {
            Some(ip) => self.trusts(ip),
            None => self.unix,
        }
    }

    /// The client's address: the peer itself unless the peer is a trusted
    /// proxy; then `X-Forwarded-For` is walked from the right, past trusted
    /// proxies, to the first address that is not one. A malformed hop stops
    /// the walk at the last address known good. A peer that is not an
    /// address (a Unix socket's) is trusted only with `"unix"` among the
    /// proxies; when no address is found, [`UNKNOWN_PEER`].
    pub fn client_ip(&self, peer: &str, forwarded_for: Option<&str>) -> String {
        match self.client(peer, forwarded_for) {
            Some(ip) => ip.to_string(),
            None => unknown_peer(peer),
        }
    }

    /// The client as a key of kind `ip` names it: its address's network by
    /// these prefixes (an IPv6 client as its /64 by default: every address
    /// it rotates through shares one quota and one ban), found as
    /// [`TrustedProxies::client_ip`] finds the address.
    pub fn client_key(&self, peer: &str, forwarded_for: Option<&str>) -> String {
        match self.client(peer, forwarded_for) {
            Some(ip) => self.prefixes.client_of(ip),
            None => unknown_peer(peer),
        }
    }

    /// [`TrustedProxies::client_ip`] and [`TrustedProxies::client_key`],
    /// the client found once.
    pub fn client_ip_and_key(&self, peer: &str, forwarded_for: Option<&str>) -> (String, String) {
        match self.client(peer, forwarded_for) {
            Some(ip) => (address_text(ip), self.prefixes.client_of(ip)),
            None => {
                let unknown = unknown_peer(peer);
                (unknown.clone(), unknown)
            }
        }
    }

    fn client(&self, peer: &str, forwarded_for: Option<&str>) -> Option<IpAddr> {
        let mut client = parse_hop(peer);
        let mut trusted = self.trusts_peer(peer);
        if let Some(header) = forwarded_for {
            for hop in header.rsplit(',') {
                if !trusted {
                    break;
                }
                match parse_hop(hop) {
                    Some(ip) => {
                        client = Some(ip);
                        trusted = self.trusts(ip);
                    }
                    None => break,
                }
            }
        }
        client
    }
}

/// [`UNKNOWN_PEER`], for a request from `peer`, which is not an address:
/// the first such request of a process is logged as a configuration
/// problem (its peer shown escaped and cut short).
fn unknown_peer(peer: &str) -> String {
    static LOGGED: std::sync::Once = std::sync::Once::new();
    LOGGED.call_once(|| {
        let shown: String = peer.chars().take(64).flat_map(char::escape_debug).collect();
        log::warn!(
            "ratekeeper: the peer '{shown}' is not an IP address (a Unix socket, an empty \
             REMOTE_ADDR) and no trusted proxy names the client: every such request is counted \
             under the one key '{UNKNOWN_PEER}'. Put \"unix\" in trusted_proxies when a proxy \
             that sets X-Forwarded-For connects over a Unix socket"
        );
    });
    UNKNOWN_PEER.to_owned()
}

#[cfg(test)]
mod tests;
