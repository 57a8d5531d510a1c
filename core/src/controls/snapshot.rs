//! The shared controls as every process holds them: the switches and the
//! address lists, as of one version of the store.

use super::{Field, List, Listing, Switches};
use crate::net::Cidr;
use std::collections::HashMap;
use std::net::IpAddr;

/// Listings of addresses and ranges, for one list.
#[derive(Debug, Clone, Default)]
pub struct NetList {
    exact: HashMap<IpAddr, Listing>,
    ranges: Vec<(Cidr, Listing)>,
}

impl NetList {
    /// The standing listing that covers `ip` at `now_ms`, if any.
    pub fn find(&self, ip: IpAddr, now_ms: u64) -> Option<&Listing> {
        let ip = crate::net::canonical(ip);
        if let Some(hit) = self.exact.get(&ip).filter(|l| l.stands_at(now_ms)) {
            return Some(hit);
        }
        self.ranges
            .iter()
            .find(|(net, l)| net.contains(ip) && l.stands_at(now_ms))
            .map(|(_, l)| l)
    }

    fn add(&mut self, net: Cidr, listing: Listing) {
        match net.single_address() {
            Some(ip) => {
                self.exact.insert(ip, listing);
            }
            None => self.ranges.push((net, listing)),
        }
    }

    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.ranges.is_empty()
    }
}

/// What every process holds of the shared controls: the switches and the
/// address lists, as of one version.
#[derive(Debug, Clone, Default)]
pub struct Shared {
    /// The version counter it was read at.
    pub version: u64,
    /// The switches.
    pub switches: Switches,
    /// Safelisted addresses and ranges.
    pub safe: NetList,
    /// Blocklisted addresses and ranges.
    pub block: NetList,
}

impl Shared {
    /// From the stored hashes: the address lists (fields `s<cidr>` and
    /// `b<cidr>`) and the switches.
    pub fn from_hashes(
        version: u64,
        nets: &[(Vec<u8>, Vec<u8>)],
        switches: &[(Vec<u8>, Vec<u8>)],
    ) -> Shared {
        let mut shared = Shared {
            version,
            switches: Switches::from_fields(switches),
            ..Shared::default()
        };
        for (field, value) in nets {
            let (Some((&mark, net)), Ok(value)) = (field.split_first(), std::str::from_utf8(value))
            else {
                continue;
            };
            let (Some(net), Some(listing)) = (
                std::str::from_utf8(net)
                    .ok()
                    .and_then(|n| Cidr::parse(n).ok()),
                Listing::decode(value),
            ) else {
                continue;
            };
            match Field::from_code(mark) {
                Some(Field::Safe) => shared.safe.add(net, listing),
                Some(Field::Block) => shared.block.add(net, listing),
                _ => {}
            }
        }
        shared
    }

    /// Whether any address or range is listed.
    pub fn has_nets(&self) -> bool {
        !(self.safe.is_empty() && self.block.is_empty())
    }

    /// The list that decides for `ip` at `now_ms` (the safelist first), if any.
    pub fn judge_ip(&self, ip: IpAddr, now_ms: u64) -> Option<(List, &Listing)> {
        if let Some(l) = self.safe.find(ip, now_ms) {
            return Some((List::Safe, l));
        }
        self.block.find(ip, now_ms).map(|l| (List::Block, l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn nets_match_exact_and_ranges() {
        let nets = vec![
            (b"b10.0.0.0/8".to_vec(), b"9000 office".to_vec()),
            (b"b203.0.113.7/32".to_vec(), b"9000 scanner".to_vec()),
            (b"s10.1.1.1/32".to_vec(), b"9000".to_vec()),
            (b"bgarbage".to_vec(), b"9000".to_vec()),
        ];
        let shared = Shared::from_hashes(1, &nets, &[]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(shared.judge_ip(ip("10.9.9.9"), 1).unwrap().0, List::Block);
        assert_eq!(shared.judge_ip(ip("10.1.1.1"), 1).unwrap().0, List::Safe);
        assert_eq!(
            shared.judge_ip(ip("203.0.113.7"), 1).unwrap().1.reason,
            "scanner"
        );
        assert!(shared.judge_ip(ip("203.0.113.7"), 9000).is_none());
        assert!(shared.judge_ip(ip("8.8.8.8"), 1).is_none());
    }
}
