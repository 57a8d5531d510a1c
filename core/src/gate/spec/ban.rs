//! The fail2ban and allow2ban kinds: entries whose matching requests
//! strike against the client address (refused at once, or let through
//! until the strike that bans): as written, checked, and their part of a
//! request's step (the entries it strikes, and whether a strike refuses it).

use super::RequestMatch;
use crate::controls::Fail2Ban;
use crate::gate::source::Facts;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BanFile {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) paths: Vec<String>,
    #[serde(default)]
    pub(super) methods: Vec<String>,
    #[serde(rename = "match")]
    pub(super) matcher: Option<String>,
    pub(super) maxretry: Option<i64>,
    pub(super) findtime: Option<f64>,
    pub(super) bantime: Option<f64>,
}

/// A fail2ban or allow2ban entry.
#[derive(Debug, Clone)]
pub struct BanSpec {
    /// The ban's parameters, as the core checked them.
    pub rule: Fail2Ban,
    /// The requests that strike.
    pub when: RequestMatch,
    /// Allow2ban: matching requests pass until the strike that bans.
    pub allow: bool,
}

impl BanSpec {
    /// Whether a strike of this entry, which `banned` the client or not,
    /// refuses the request: fail2ban's always, allow2ban's when it banned.
    pub fn refuses(&self, banned: bool) -> bool {
        banned || !self.allow
    }
}

/// The entries of `bans` the request `facts` make strikes, in order.
pub fn striking(bans: &[BanSpec], facts: &dyn Facts) -> Vec<usize> {
    (bans.iter().enumerate())
        .filter(|(_, ban)| ban.when.names(facts))
        .map(|(i, _)| i)
        .collect()
}

pub(super) fn ban(
    b: BanFile,
    allow: bool,
    callables: usize,
) -> std::result::Result<BanSpec, String> {
    let rule = Fail2Ban::given(b.name.as_deref(), b.maxretry, b.findtime, b.bantime)
        .map_err(|e| e.to_string())?;
    let when = RequestMatch::read(&b.paths, &b.methods, b.matcher.as_deref(), callables)?;
    if when.paths.is_empty() && when.matcher.is_none() {
        return Err("give paths: the patterns of the requests that strike".into());
    }
    Ok(BanSpec { rule, when, allow })
}
