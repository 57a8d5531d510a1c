//! In-flight (concurrency) rules: "at most N at once". A rule set may hold
//! one beside its rates (`"10 concurrent; 100/minute; 5000/day"`), or only
//! one (`"3 concurrent"`). A hold ([`crate::Limiter::hold`]) admitted by
//! every rule takes a **lease**: an id and a time it lapses at. The holder
//! releases it when its work ends; a holder that died never does, and its
//! slot comes back when the lease lapses. The store keeps a key's leases
//! beside its log, in the same Cluster slot, and a hold checks them and the
//! rates in one atomic step.
//!
//! The spellings of the rule, any case: `10 concurrent`, `10 concurrently`,
//! `10 in flight`, `10 in-flight`, `10 at once`, `10 at a time`.

use crate::error::{Error, Result};

/// Most leases one in-flight rule may allow at once.
pub const MAX_IN_FLIGHT: u64 = 1_000_000;
/// A lease's time when neither the limiter nor the hold gives one: 60 s.
pub const DEFAULT_LEASE_MS: u64 = 60_000;
/// The longest lease: one day (work that runs longer extends its lease).
pub const MAX_LEASE_MS: u64 = 86_400_000;

const SPELLINGS: [&str; 6] = [
    "concurrent",
    "concurrently",
    "in flight",
    "in-flight",
    "at once",
    "at a time",
];

/// The limit of an in-flight rule written `text` (`"10 concurrent"`), an
/// error naming what is wrong with one, or `None` when `text` is not
/// written as one (it may be a rate).
pub(crate) fn parse_part(text: &str) -> Option<Result<u64>> {
    let words: Vec<String> = text
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    let (count, rest) = words.split_first()?;
    if !SPELLINGS.contains(&rest.join(" ").as_str()) {
        return None;
    }
    let bad = |why: String| Error::config(format!("invalid in-flight rule '{text}': {why}"));
    let limit = match count.parse::<u64>() {
        Ok(limit) if count.bytes().all(|b| b.is_ascii_digit()) => limit,
        _ if count.bytes().all(|b| b.is_ascii_digit()) => u64::MAX,
        _ => return Some(Err(bad(format!("'{count}' is not a whole number")))),
    };
    Some(check_limit(limit).map_err(|why| bad(why.to_owned())))
}

fn check_limit(limit: u64) -> std::result::Result<u64, &'static str> {
    match limit {
        0 => Err("the limit must be at least 1"),
        l if l > MAX_IN_FLIGHT => Err("the limit may be at most 1000000"),
        l => Ok(l),
    }
}

/// An in-flight rule from its limit (a binding's number), validated.
pub fn in_flight_limit(limit: i128) -> Result<u64> {
    let limit = u64::try_from(limit.max(0)).unwrap_or(u64::MAX);
    check_limit(limit).map_err(|why| {
        Error::config(format!(
            "invalid in-flight rule '{limit} concurrent': {why}"
        ))
    })
}

/// A lease's time from seconds (a binding's `lease=`): more than 0, at most a day.
pub fn lease_ms_from(seconds: f64) -> Result<u64> {
    let ms = (seconds * 1000.0).round();
    if !seconds.is_finite() || ms < 1.0 || ms > MAX_LEASE_MS as f64 {
        return Err(Error::config(format!(
            "invalid lease {}: give the seconds a slot is held for when not released, \
             more than 0 and at most 86400 (a day)",
            crate::error::shown(seconds)
        )));
    }
    Ok(ms as u64)
}

/// What a hold or a peek saw of a key's in-flight rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// The rule's limit: leases held at once.
    pub limit: u64,
    /// Leases held after this hold (a taken one included).
    pub held: u64,
    /// Time until the soonest of the held leases lapses (`None`: none held).
    pub lapse_after_ms: Option<u64>,
}

impl InFlight {
    /// Slots free after this hold.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.held)
    }
}

/// What a store saw of a key's leases in a hold (or a peek).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeasesSeen {
    /// Live leases before this hold.
    pub held: u64,
    /// When the soonest live lease lapses (ms since the epoch), the one
    /// this hold took included.
    pub soonest_lapse_ms: Option<u64>,
    /// Whether this hold took a lease.
    pub taken: bool,
}

/// A lease a hold took: release it when the work ends ([`crate::Limiter::release`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Its id, unique among the key's leases: when it was taken (ms), a
    /// dash, and 64 random bits in hex (see [`lease_id`]).
    pub id: String,
    /// When it lapses unless extended (ms since the epoch, the store's clock).
    pub lapse_at_ms: u64,
    /// When it was taken (ms since the epoch, the store's clock).
    pub taken_at_ms: u64,
    pub(crate) tag: Vec<u8>,
    pub(crate) scope: String,
}

/// A lease's id: the time it was taken at (ms), a dash, and the random part
/// the hold gave (the store makes it so, as it takes the lease).
pub fn lease_id(taken_at_ms: u64, random: &str) -> String {
    format!("{taken_at_ms}-{random}")
}

/// When the lease `id` was taken (ms since the epoch), from the id.
pub fn taken_at_of(id: &str) -> Option<u64> {
    id.split_once('-')?.0.parse().ok()
}

/// A call on a key's leases ([`crate::store::LogStore::leases`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseCall<'a> {
    /// Give back the lease `id` (nothing when it lapsed or is gone).
    Release(&'a str),
    /// Make the live lease `id` lapse `lease_ms` from now (nothing when it lapsed).
    Extend(&'a str, u64),
    /// Only read the live leases.
    List,
}

/// One live lease as a store holds it: its id and when it lapses (ms).
pub type Held = (String, u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_parses() {
        for text in [
            "10 concurrent",
            "10 Concurrently",
            "10  in flight",
            "10 in-flight",
            "10 at once",
            "10 AT A TIME",
        ] {
            assert_eq!(parse_part(text).unwrap().unwrap(), 10, "{text}");
        }
        assert!(parse_part("10/minute").is_none());
        assert!(parse_part("concurrent").is_none());
        assert!(parse_part("10 concurrent per minute").is_none());
    }

    #[test]
    fn bad_limits_are_named() {
        let err = |t: &str| parse_part(t).unwrap().unwrap_err().to_string();
        assert!(err("0 concurrent").contains("at least 1"));
        assert!(err("-3 concurrent").contains("'-3' is not a whole number"));
        assert!(err("1000001 concurrent").contains("at most 1000000"));
        assert!(err("99999999999999999999999 at once").contains("at most"));
        assert!(in_flight_limit(0).is_err() && in_flight_limit(5).unwrap() == 5);
    }

    #[test]
    fn leases_are_bounded() {
        assert_eq!(lease_ms_from(1.5).unwrap(), 1500);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 86_401.0, 0.0004] {
            assert!(lease_ms_from(bad)
                .unwrap_err()
                .to_string()
                .contains("lease"));
        }
    }
}
