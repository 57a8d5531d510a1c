//! How a limiter is told what to do: its failure policy, and the options
//! of one check and of one fail2ban strike.

use crate::error::{Error, Result};
use std::str::FromStr;

/// What a check returns when the store cannot answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Admit the request (fail open), log a warning once per outage, count it.
    #[default]
    Allow,
    /// Deny the request (fail closed), log a warning once per outage, count it.
    Deny,
    /// Return the storage error to the caller.
    Raise,
}

impl OnError {
    /// Its name: `allow`, `deny` or `raise`.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Allow => "allow",
            OnError::Deny => "deny",
            OnError::Raise => "raise",
        }
    }
}

impl FromStr for OnError {
    type Err = Error;

    fn from_str(text: &str) -> Result<OnError> {
        match text {
            "allow" => Ok(OnError::Allow),
            "deny" => Ok(OnError::Deny),
            "raise" => Ok(OnError::Raise),
            other => Err(Error::config(format!(
                "invalid on_error '{other}': use 'allow', 'deny' or 'raise'"
            ))),
        }
    }
}

/// A check's cost from the whole number a caller gave (of any size: a
/// binding passes a number past `i128` as [`i128::MAX`] or [`i128::MIN`]).
///
/// Less than 1 is an error that names the cost. A cost past `u64` is kept as
/// [`u64::MAX`]: it exceeds every limit, so it is a denial that can never pass,
/// as any cost above a rule's limit is.
pub fn cost_from(value: i128) -> Result<u64> {
    if value < 1 {
        return Err(Error::config(format!(
            "invalid cost {value}: a check costs at least 1"
        )));
    }
    Ok(u64::try_from(value).unwrap_or(u64::MAX))
}

/// What some work really cost, as a settle takes it (0 or more, where a
/// check's cost is at least 1): a binding's integer, checked.
pub fn actual_cost_from(value: i128) -> Result<u64> {
    if value < 0 {
        return Err(Error::config(format!(
            "invalid cost {value}: what the work cost is 0 or more"
        )));
    }
    Ok(u64::try_from(value).unwrap_or(u64::MAX))
}

/// One check's arguments as a binding converted them, owned: what
/// [`CheckOptions`] borrows, kept while a call is made (on another thread,
/// or awaited).
#[derive(Debug, Clone)]
pub struct Asked {
    /// The key's bytes.
    pub key: Vec<u8>,
    /// Units the check costs.
    pub cost: u64,
    /// Seconds since the epoch; the store's clock when `None`.
    pub now: Option<f64>,
    /// The tier the caller names.
    pub tier: Option<String>,
    /// The client address.
    pub ip: Option<String>,
    /// A metered limiter's cost per meter (see [`CheckOptions::meter_costs`]).
    pub meter_costs: Option<Vec<u64>>,
}

impl Asked {
    /// The check's options.
    pub fn options(&self) -> CheckOptions<'_> {
        CheckOptions {
            cost: self.cost,
            now: self.now,
            tier: self.tier.as_deref(),
            ip: self.ip.as_deref(),
            meter_costs: self.meter_costs.as_deref(),
        }
    }
}

/// How one check is asked for: its cost and time, the tier the caller names,
/// the client address.
#[derive(Debug, Clone, Copy)]
pub struct CheckOptions<'a> {
    /// Units the check costs (at least 1).
    pub cost: u64,
    /// Seconds since the epoch; the store's clock when `None`.
    pub now: Option<f64>,
    /// The tier whose rules apply (one of the limiter's tiers), unless the
    /// key's record stores another tier or an override.
    pub tier: Option<&'a str>,
    /// The client address, matched against listed addresses and ranges (a key
    /// that is itself an address is matched without it).
    pub ip: Option<&'a str>,
    /// A metered limiter's cost: units per meter, in its meters' order
    /// ([`super::Limiter::meter_costs`]), in place of `cost`.
    pub meter_costs: Option<&'a [u64]>,
}

impl Default for CheckOptions<'_> {
    fn default() -> Self {
        CheckOptions {
            cost: 1,
            now: None,
            tier: None,
            ip: None,
            meter_costs: None,
        }
    }
}

/// What a fail2ban strike is counted against (see [`super::Limiter::penalize`]).
#[derive(Debug, Clone, Copy)]
pub enum Offender<'a> {
    /// An exact key (a user, an e-mail address typed into a form...).
    Key(&'a [u8]),
    /// The client the request came from, as text: its address (an IPv6
    /// address is banned as its /64), or the network a middleware names it
    /// by ([`crate::TrustedProxies::client_key`]).
    Address(&'a str),
}
