//! Controls that sit beside the rules: safelists and blocklists (with a TTL and
//! a reason), a key's tier or rule override stored in the store, global switches
//! (enabled, shadow mode, a limit multiplier), and fail2ban strikes.
//!
//! This module holds the model; [`encoding`] how it is stored (Redis key
//! names and field values), [`snapshot`] the shared controls as a process
//! holds them, [`target`] how an operator's text names a key or an address,
//! and [`fail2ban`] strikes and bans. The model knows no store:
//! `store::controls` reads and writes it there.
//!
//! Where each lives, and when a process sees a change:
//!
//! | what | where (Redis) | read |
//! | --- | --- | --- |
//! | a key's listing, tier, override | the key's record `<prefix>:{<tag>}:p`, fields `s`, `b`, `t`, `o` | by the check script, in the same round trip |
//! | an address or range's listing | the hash `<prefix>:{=policy}:nets` | in-process, refreshed every `controls_refresh` |
//! | the switches | the hash `<prefix>:{=policy}:switches` | in-process, refreshed every `controls_refresh` |
//! | what is listed, for `list` | the hash `<prefix>:{=policy}:dir` | by the admin tools only |
//!
//! A key's record shares the `{<tag>}` of the key's logs, so in a Cluster it
//! lives in their slot. An address range cannot (it covers many keys), so the
//! ranges and switches are held in every process and refreshed when the
//! version counter `<prefix>:{=policy}:version` moves; a change made in this
//! process is seen at its next check.

pub mod encoding;
pub mod fail2ban;
pub mod snapshot;
pub mod target;

pub use encoding::{decode_rules, encode_rules, version_key, RawRecord, SharedHash};
pub use fail2ban::{Fail2Ban, Strike};
pub use snapshot::{NetList, Shared};
pub use target::{stored_form, Target, TargetOptions, WIDEST_V4, WIDEST_V6};

use crate::error::{Error, Result};
use crate::rule::{Rule, RuleSet};
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

    /// The audit trail's name of putting a target on it: `safelist` or `block`.
    pub fn action(self) -> &'static str {
        match self {
            List::Safe => "safelist",
            List::Block => "block",
        }
    }
}

/// A field of a key's record.
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

    /// Its name as the admin tools show it: `safelist`, `blocklist`, `tier`, `override`.
    pub fn name(self) -> &'static str {
        match self {
            Field::Safe => "safelist",
            Field::Block => "blocklist",
            Field::Tier => "tier",
            Field::Override => "override",
        }
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
    /// Whether it still stands at `now_ms`.
    pub fn stands_at(&self, now_ms: u64) -> bool {
        self.until_ms > now_ms
    }
}

/// One line of `list`: a listing, a tier or an override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// What it is: [`Field::Safe`], [`Field::Block`], [`Field::Tier`] or [`Field::Override`].
    pub field: Field,
    /// The key, address or range (as text; addresses and ranges canonical),
    /// or the key's tag when it was listed by its tag (`by_tag`).
    pub target: Vec<u8>,
    /// Whether the target is an address or range.
    pub network: bool,
    /// Whether the target is a key's tag ([`Target::Tag`]), not the key.
    pub by_tag: bool,
    /// When a listing lapses (ms since the epoch); `None` for a tier or override.
    pub until_ms: Option<u64>,
    /// A listing's reason, the tier's name, or the override's rules.
    pub detail: String,
    /// The scope a key's ban holds in (earned by `penalize` in a scoped
    /// limiter); "" for an entry that holds everywhere.
    pub scope: String,
}

impl Entry {
    /// The stored form ([`stored_form`]) of the key a key's entry names
    /// (`None` for an address or range): what a `tag` target takes to act
    /// on the very key, whatever its bytes.
    pub fn stored(&self) -> Option<String> {
        match (self.network, self.by_tag) {
            (true, _) => None,
            (false, true) => Some(stored_form(&self.target)),
            (false, false) => Some(stored_form(&crate::keys::key_tag(&self.target))),
        }
    }
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
    /// `rules` with every rate's limit multiplied (rounded down, at least 1).
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
        // (an in-flight rule is not a rate: it keeps its limit)
        RuleSet::new(scaled)
            .and_then(|set| {
                set.keeping_every_entry(rules.exact())
                    .with_in_flight(rules.in_flight())
            })
            .unwrap_or_else(|_| rules.clone())
    }
}

/// Whether a multiplier is one the switches accept: above 0, at most 1000.
pub fn valid_multiplier(m: f64) -> bool {
    m.is_finite() && m > 0.0 && m <= MAX_MULTIPLIER
}

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

/// What decided a check: rules, or a list (a door's verdict on a request is
/// [`crate::gate::Verdict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecidedBy {
    /// The rules counted the check.
    Limited(Applied),
    /// The key was on a list: no rule counted it.
    Listed(List, Listing),
}

impl Default for DecidedBy {
    fn default() -> Self {
        DecidedBy::Limited(Applied::Given)
    }
}

impl Applied {
    /// Which rules decided a check, from the detail the engine's selection
    /// gives (the check script's and the module's reply carry it): `""` the
    /// caller's, `t<tier>` a stored tier, `o<limit>:<window ms>;...` an override.
    pub fn from_detail(detail: &str) -> Result<Applied> {
        if detail.is_empty() {
            Ok(Applied::Given)
        } else if let Some(tier) = detail.strip_prefix('t') {
            Ok(Applied::Tier(tier.to_owned()))
        } else if let Some(rules) = detail.strip_prefix('o') {
            Ok(Applied::Override(decode_rules(rules)?))
        } else {
            Err(Error::storage(format!(
                "unexpected detail '{detail}' of a check: give '', t<tier> or o<rules>"
            )))
        }
    }
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

static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Moves on each change of the controls made in this process: limiters then read the
/// shared controls again and forget remembered denials at their next check.
pub fn epoch() -> u64 {
    EPOCH.load(Ordering::Acquire)
}

/// Checks tier names: each valid, none given twice.
pub fn check_tiers(tiers: &[(String, RuleSet)]) -> Result<()> {
    for (i, (name, _)) in tiers.iter().enumerate() {
        check_tier_name(name)?;
        if tiers[..i].iter().any(|(other, _)| other == name) {
            return Err(Error::config(format!("tier '{name}' is given twice")));
        }
    }
    Ok(())
}

pub(crate) fn bump_epoch() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
