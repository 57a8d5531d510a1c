//! The policy as written (a file, or a dict or Hash turned into the same
//! table): what serde reads, before anything is checked.

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListFile {
    pub(super) name: String,
    #[serde(default)]
    pub(super) paths: Vec<String>,
    #[serde(default)]
    pub(super) methods: Vec<String>,
    #[serde(rename = "match")]
    pub(super) matcher: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ThrottleFile {
    pub(super) scope: Option<String>,
    pub(super) rules: Option<String>,
    pub(super) key: Option<String>,
    #[serde(default)]
    pub(super) hosts: Vec<String>,
    #[serde(default)]
    pub(super) paths: Vec<String>,
    #[serde(default)]
    pub(super) methods: Vec<String>,
    #[serde(default)]
    pub(super) headers: Vec<String>,
    #[serde(default)]
    pub(super) tiers: toml::Table,
    pub(super) tier: Option<String>,
    #[serde(rename = "match")]
    pub(super) matcher: Option<String>,
    pub(super) envoy: Option<EnvoyFile>,
    pub(super) shadow: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EnvoyFile {
    pub(super) domain: String,
    pub(super) key: String,
    #[serde(default, rename = "match")]
    pub(super) matches: toml::Table,
}

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
