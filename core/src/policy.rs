//! Policies that sit beside the rules: safelists and blocklists (with a TTL and
//! a reason), a key's tier or rule override stored in the store, global switches
//! (enabled, shadow mode, a limit multiplier), and fail2ban strikes.
//!
//! Where each lives, and when a process sees a change:
//!
//! | what | where (Redis) | read |
//! | --- | --- | --- |
//! | a key's listing, tier, override | the key's record `<prefix>:{<tag>}:p`, fields `s`, `b`, `t`, `o` | by the check script, in the same round trip |
//! | an address or range's listing | the hash `<prefix>:{=policy}:nets` | in-process, refreshed every `policy_refresh` |
//! | the switches | the hash `<prefix>:{=policy}:switches` | in-process, refreshed every `policy_refresh` |
//! | what is listed, for `list` | the hash `<prefix>:{=policy}:dir` | by the admin tools only |
//!
//! A key's record shares the `{<tag>}` of the key's logs, so in a Cluster it
//! lives in their slot. An address range cannot (it covers many keys), so the
//! ranges and switches are held in every process and refreshed when the
//! version counter `<prefix>:{=policy}:version` moves; a change made in this
//! process is seen at its next check.

use crate::error::{Error, Result};
use crate::net::Cidr;
use crate::rule::{Rule, RuleSet};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

/// How long a safelist or blocklist entry lasts when no TTL is given: one week.
pub const DEFAULT_LIST_TTL_MS: u64 = 7 * 86_400_000;
/// The longest TTL an entry may have: 10 years.
pub const MAX_LIST_TTL_MS: u64 = 3_650 * 86_400_000;
/// Longest reason kept with an entry, in bytes.
pub const MAX_REASON: usize = 500;

/// The safelist or the blocklist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum List {
    /// Requests skip limiting.
    Safe,
    /// Requests are refused.
    Block,
}

impl List {
    /// Its field in a key's record, and its mark in the shared hashes.
    pub fn field(self) -> Field {
        match self {
            List::Safe => Field::Safe,
            List::Block => Field::Block,
        }
    }

    /// `safelist` or `blocklist`.
    pub fn name(self) -> &'static str {
        match self {
            List::Safe => "safelist",
            List::Block => "blocklist",
        }
    }
}

/// A field of a key's policy record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// Safelisted until, and why.
    Safe,
    /// Blocked until, and why.
    Block,
    /// The key's tier.
    Tier,
    /// The key's own rules.
    Override,
}

impl Field {
    /// All fields, in the order the check script reads them.
    pub const ALL: [Field; 4] = [Field::Safe, Field::Block, Field::Tier, Field::Override];

    /// The one-letter name stored in Redis.
    pub fn code(self) -> &'static str {
        match self {
            Field::Safe => "s",
            Field::Block => "b",
            Field::Tier => "t",
            Field::Override => "o",
        }
    }

    /// Its name as the admin tools show it: `safelist`, `blocklist`, `tier`, `override`.
    pub fn name(self) -> &'static str {
        match self {
            Field::Safe => "safelist",
            Field::Block => "blocklist",
            Field::Tier => "tier",
            Field::Override => "override",
        }
    }

    /// The field a one-letter name stands for.
    pub fn from_code(code: u8) -> Option<Field> {
        Field::ALL
            .into_iter()
            .find(|f| f.code().as_bytes()[0] == code)
    }
}

/// A safelist or blocklist entry: until when (ms since the epoch) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// When the entry lapses.
    pub until_ms: u64,
    /// Why it was made (may be empty).
    pub reason: String,
}

impl Listing {
    /// As stored: `"<until_ms> <reason>"`.
    pub fn encode(&self) -> String {
        format!("{} {}", self.until_ms, self.reason)
    }

    /// From its stored form; `None` when it is not one.
    pub fn decode(text: &str) -> Option<Listing> {
        let (until, reason) = text.split_once(' ').unwrap_or((text, ""));
        Some(Listing {
            until_ms: until.parse().ok()?,
            reason: reason.to_owned(),
        })
    }

    /// Whether it still stands at `now_ms`.
    pub fn stands_at(&self, now_ms: u64) -> bool {
        self.until_ms > now_ms
    }
}

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

/// Checks a reason and a TTL in seconds (`None`: a week), giving the TTL in ms.
pub fn check_listing(ttl_seconds: Option<f64>, reason: &str) -> Result<u64> {
    if reason.len() > MAX_REASON {
        return Err(Error::config(format!(
            "the reason is {} bytes long; at most {MAX_REASON} are kept",
            reason.len()
        )));
    }
    match ttl_seconds {
        None => Ok(DEFAULT_LIST_TTL_MS),
        Some(ttl) => {
            let ms = ttl * 1000.0;
            if !(ms.is_finite() && ms >= 1.0 && ms <= MAX_LIST_TTL_MS as f64) {
                return Err(Error::config(format!(
                    "invalid ttl {}: give seconds, at least 0.001 and at most 10 years",
                    crate::error::shown(ttl)
                )));
            }
            Ok(ms.round() as u64)
        }
    }
}

/// The global switches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Switches {
    /// When false, every check is admitted without asking the store.
    pub enabled: bool,
    /// When true, checks decide and report, but never deny.
    pub shadow: bool,
    /// Every configured and tier limit is multiplied by this (at least 1 remains).
    pub multiplier: f64,
}

impl Default for Switches {
    fn default() -> Self {
        Switches {
            enabled: true,
            shadow: false,
            multiplier: 1.0,
        }
    }
}

/// Largest limit multiplier accepted.
pub const MAX_MULTIPLIER: f64 = 1000.0;

impl Switches {
    /// The switches from the stored hash (missing or unreadable fields keep their defaults).
    pub fn from_fields(fields: &[(Vec<u8>, Vec<u8>)]) -> Switches {
        let mut switches = Switches::default();
        for (name, value) in fields {
            let value = String::from_utf8_lossy(value);
            match name.as_slice() {
                b"enabled" => switches.enabled = value != "0",
                b"shadow" => switches.shadow = value == "1",
                b"multiplier" => {
                    if let Some(m) = value.parse::<f64>().ok().filter(|m| valid_multiplier(*m)) {
                        switches.multiplier = m;
                    }
                }
                _ => {}
            }
        }
        switches
    }

    /// `rules` with every limit multiplied (rounded down, at least 1).
    pub fn scale(&self, rules: &RuleSet) -> RuleSet {
        if self.multiplier == 1.0 {
            return rules.clone();
        }
        let scaled: Vec<Rule> = rules
            .rules()
            .iter()
            .map(|r| Rule {
                limit: ((r.limit as f64 * self.multiplier).floor() as u64)
                    .clamp(1, crate::rule::MAX_LIMIT),
                window_ms: r.window_ms,
            })
            .collect();
        RuleSet::new(scaled).unwrap_or_else(|_| rules.clone())
    }
}

/// Whether a multiplier is one the switches accept: above 0, at most 1000.
pub fn valid_multiplier(m: f64) -> bool {
    m.is_finite() && m > 0.0 && m <= MAX_MULTIPLIER
}

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

/// What every process holds of the shared policies: the switches and the
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

/// The hashes shared by every key, in the `{=policy}` slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedHash {
    /// Address and range listings.
    Nets,
    /// The switches.
    Switches,
    /// An index of listed keys, tiers and overrides, for `list`.
    Directory,
}

impl SharedHash {
    /// The Redis key of this hash.
    pub fn key(self, prefix: &str) -> String {
        let name = match self {
            SharedHash::Nets => "nets",
            SharedHash::Switches => "switches",
            SharedHash::Directory => "dir",
        };
        format!("{prefix}:{{=policy}}:{name}")
    }

    /// Whether a change to it must move the version (processes hold it).
    pub fn held_in_process(self) -> bool {
        self != SharedHash::Directory
    }
}

/// The Redis key of the version counter of the shared policies.
pub fn version_key(prefix: &str) -> String {
    format!("{prefix}:{{=policy}}:version")
}

/// A key's stored policy record, as read (fields in [`Field::ALL`] order).
pub type RawRecord = [Option<String>; 4];

/// A key's record, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// A standing safelist entry.
    pub safe: Option<Listing>,
    /// A standing blocklist entry.
    pub block: Option<Listing>,
    /// The stored tier.
    pub tier: Option<String>,
    /// The stored override.
    pub rules: Option<RuleSet>,
}

impl Record {
    /// Decodes a raw record, keeping listings that stand at `now_ms`.
    pub fn decode(raw: &RawRecord, now_ms: u64) -> Record {
        let listing = |v: &Option<String>| {
            v.as_deref()
                .and_then(Listing::decode)
                .filter(|l| l.stands_at(now_ms))
        };
        Record {
            safe: listing(&raw[0]),
            block: listing(&raw[1]),
            tier: raw[2].clone(),
            rules: raw[3].as_deref().and_then(|o| decode_rules(o).ok()),
        }
    }

    /// The list that decides for this key (the safelist first), if any.
    pub fn listed(&self) -> Option<(List, &Listing)> {
        if let Some(l) = &self.safe {
            return Some((List::Safe, l));
        }
        self.block.as_ref().map(|l| (List::Block, l))
    }
}

/// Which rules a check was decided by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The rules the caller gave (its own, or those of the tier it named).
    Given,
    /// The rules of the tier stored for the key.
    Tier(String),
    /// The key's stored override.
    Override(RuleSet),
}

/// What decided a check: rules, or a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The rules counted the check.
    Limited(Applied),
    /// The key was on a list: no rule counted it.
    Listed(List, Listing),
}

impl Default for Verdict {
    fn default() -> Self {
        Verdict::Limited(Applied::Given)
    }
}

/// A rule set as an override is stored: `limit:window_ms` pairs joined by `;`.
pub fn encode_rules(rules: &RuleSet) -> String {
    let parts: Vec<String> = rules
        .rules()
        .iter()
        .map(|r| format!("{}:{}", r.limit, r.window_ms))
        .collect();
    parts.join(";")
}

/// A stored override back as a rule set.
pub fn decode_rules(text: &str) -> Result<RuleSet> {
    let bad = || Error::storage(format!("unreadable stored override '{text}'"));
    let rules = text
        .split(';')
        .map(|pair| {
            let (limit, window) = pair.split_once(':').ok_or_else(bad)?;
            Rule::new(
                limit.parse().map_err(|_| bad())?,
                window.parse().map_err(|_| bad())?,
            )
        })
        .collect::<Result<Vec<Rule>>>()?;
    RuleSet::new(rules)
}

/// The rules a key's record selects: its override, else its stored tier when
/// that is one of `tiers`; `None` keeps the caller's.
pub fn select<'a>(
    record: &'a Record,
    tiers: &'a [(String, RuleSet)],
) -> Option<(Applied, &'a RuleSet)> {
    if let Some(rules) = &record.rules {
        return Some((Applied::Override(rules.clone()), rules));
    }
    let tier = record.tier.as_deref()?;
    tiers
        .iter()
        .find(|(name, _)| name == tier)
        .map(|(name, rules)| (Applied::Tier(name.clone()), rules))
}

/// A tier name: 1 to 64 characters, letters, digits, `_`, `-`, `.` and `:`.
pub fn check_tier_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::config(format!(
            "invalid tier name '{name}': give 1 to 64 letters, digits, '_', '-', '.' or ':'"
        )))
    }
}

/// Fail2ban: `maxretry` strikes within `findtime` ban a key for `bantime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail2Ban {
    /// Names the strike log, so that bans for different reasons count apart.
    pub name: String,
    /// Strikes that ban.
    pub maxretry: u64,
    /// The window strikes are counted in, in ms.
    pub findtime_ms: u64,
    /// How long a ban lasts, in ms.
    pub bantime_ms: u64,
}

impl Fail2Ban {
    /// Checked parameters (durations in seconds), naming the first bad one.
    pub fn new(name: &str, maxretry: i64, findtime: f64, bantime: f64) -> Result<Fail2Ban> {
        check_tier_name(name).map_err(|_| {
            Error::config(format!(
                "invalid fail2ban name '{name}': give 1 to 64 letters, digits, '_', '-', '.' or ':'"
            ))
        })?;
        if !(1..=10_000).contains(&maxretry) {
            return Err(Error::config(format!(
                "invalid maxretry {maxretry}: give 1 to 10000"
            )));
        }
        let findtime_ms = check_listing(Some(findtime), "").map_err(|_| {
            Error::config(format!(
                "invalid findtime {}: give seconds, at least 0.001 and at most 10 years",
                crate::error::shown(findtime)
            ))
        })?;
        let bantime_ms = check_listing(Some(bantime), "").map_err(|_| {
            Error::config(format!(
                "invalid bantime {}: give seconds, at least 0.001 and at most 10 years",
                crate::error::shown(bantime)
            ))
        })?;
        Ok(Fail2Ban {
            name: name.to_owned(),
            maxretry: maxretry as u64,
            findtime_ms,
            bantime_ms,
        })
    }
}

/// What one strike did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strike {
    /// Strikes counted in the window, this one included (0 after a ban: the count starts over).
    pub strikes: u64,
    /// Whether this strike banned the key.
    pub banned: bool,
    /// When the ban lapses (ms), if it banned.
    pub until_ms: Option<u64>,
}

static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Moves on each policy change made in this process: limiters then read the
/// shared policies again and forget remembered denials at their next check.
pub fn epoch() -> u64 {
    EPOCH.load(Ordering::Acquire)
}

pub(crate) fn bump_epoch() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
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

    #[test]
    fn listings_round_trip_and_lapse() {
        let l = Listing {
            until_ms: 5_000,
            reason: "scanner, see ticket 7".into(),
        };
        assert_eq!(Listing::decode(&l.encode()), Some(l.clone()));
        assert!(l.stands_at(4_999) && !l.stands_at(5_000));
        assert_eq!(Listing::decode("x y"), None);
    }

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

    #[test]
    fn switches_scale_limits() {
        let s = Switches::from_fields(&[
            (b"shadow".to_vec(), b"1".to_vec()),
            (b"multiplier".to_vec(), b"0.5".to_vec()),
        ]);
        assert!(s.enabled && s.shadow);
        let rules = RuleSet::parse("1/s; 10/m").unwrap();
        assert_eq!(s.scale(&rules).to_string(), "1/1s; 5/1m");
        let bad = Switches::from_fields(&[(b"multiplier".to_vec(), b"-3".to_vec())]);
        assert_eq!(bad.multiplier, 1.0);
    }

    #[test]
    fn overrides_round_trip() {
        let rules = RuleSet::parse("5/s; 100/h").unwrap();
        assert_eq!(encode_rules(&rules), "5:1000;100:3600000");
        assert_eq!(decode_rules(&encode_rules(&rules)).unwrap(), rules);
        assert!(decode_rules("5:0").is_err());
    }

    #[test]
    fn fail2ban_parameters_are_checked() {
        assert!(Fail2Ban::new("php", 3, 60.0, 3600.0).is_ok());
        for (m, f, b, word) in [
            (0, 60.0, 60.0, "maxretry"),
            (3, -1.0, 60.0, "findtime"),
            (3, 60.0, f64::NAN, "bantime"),
        ] {
            let e = Fail2Ban::new("x", m, f, b).unwrap_err().to_string();
            assert!(e.contains(word), "{e}");
        }
    }
}
