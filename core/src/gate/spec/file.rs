//! The policy as written (a file, or a dict or Hash turned into the same
//! table): what serde reads, before anything is checked.

use super::ban::BanFile;
use super::list::ListFile;
use super::throttle::ThrottleFile;
use serde::Deserialize;

/// The policy as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) listen: Option<String>,
    pub(super) grpc: Option<String>,
    pub(super) enabled: Option<bool>,
    #[serde(default)]
    pub(super) store: toml::Table,
    #[serde(default)]
    pub(super) trusted_proxies: Vec<String>,
    pub(super) ipv4_prefix: Option<i64>,
    pub(super) ipv6_prefix: Option<i64>,
    #[serde(default)]
    pub(super) exempt_paths: Vec<String>,
    pub(super) exempt: Option<String>,
    pub(super) status: Option<i64>,
    pub(super) blocked_status: Option<i64>,
    pub(super) headers: Option<String>,
    pub(super) log_keys: Option<bool>,
    pub(super) log_denials: Option<bool>,
    #[serde(default)]
    pub(super) throttle: Vec<ThrottleFile>,
    #[serde(default)]
    pub(super) safelist: Vec<ListFile>,
    #[serde(default)]
    pub(super) blocklist: Vec<ListFile>,
    #[serde(default)]
    pub(super) fail2ban: Vec<BanFile>,
    #[serde(default)]
    pub(super) allow2ban: Vec<BanFile>,
}
