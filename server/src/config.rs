//! The policy file: TOML read into a checked [`Spec`], with no store opened.
//! Every problem is reported with where it is (`throttle[1] ("api")`) and
//! what is wrong; a store URL is never quoted (it may hold a password).
//! Limiter options, rules, tiers, statuses, header styles, address ranges
//! and ban parameters are checked by the core, as in every binding.

use crate::error::ServerError;
use crate::original::Source;
use ratekeeper_core::http::Responses;
use ratekeeper_core::settings::{Kind, OptionValue};
use ratekeeper_core::{ClientPrefixes, Fail2Ban, RuleSet, Settings, TrustedProxies};
use regex::Regex;
use serde::Deserialize;
use std::net::SocketAddr;

/// Where the HTTP door listens unless the file or `--listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8070";

/// The policy file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    listen: Option<String>,
    grpc: Option<String>,
    #[serde(default)]
    store: toml::Table,
    #[serde(default)]
    trusted_proxies: Vec<String>,
    ipv4_prefix: Option<i64>,
    ipv6_prefix: Option<i64>,
    #[serde(default)]
    exempt_paths: Vec<String>,
    status: Option<i64>,
    blocked_status: Option<i64>,
    headers: Option<String>,
    log_keys: Option<bool>,
    log_denials: Option<bool>,
    #[serde(default)]
    throttle: Vec<ThrottleFile>,
    #[serde(default)]
    fail2ban: Vec<BanFile>,
    #[serde(default)]
    allow2ban: Vec<BanFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThrottleFile {
    scope: String,
    rules: String,
    key: Option<String>,
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    methods: Vec<String>,
    #[serde(default)]
    headers: Vec<String>,
    #[serde(default)]
    tiers: toml::Table,
    tier: Option<String>,
    envoy: Option<EnvoyFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvoyFile {
    domain: String,
    key: String,
    #[serde(default, rename = "match")]
    matches: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BanFile {
    name: Option<String>,
    paths: Vec<String>,
    #[serde(default)]
    methods: Vec<String>,
    maxretry: Option<i64>,
    findtime: Option<f64>,
    bantime: Option<f64>,
}

/// A checked policy file.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The HTTP door's address (forward auth, `/healthz`, `/metrics`).
    pub listen: SocketAddr,
    /// The gRPC door's address (Envoy's rate limit service), if any.
    pub grpc: Option<SocketAddr>,
    /// The store and the limiter options (`[store]`), as the core checked them.
    pub settings: Settings,
    /// Statuses, header style and how keys are logged.
    pub responses: Responses,
    /// Whether each denial is logged (one line, as the middlewares write it).
    pub log_denials: bool,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub proxies: TrustedProxies,
    /// Path prefixes never limited.
    pub exempt_paths: Vec<String>,
    /// The throttles, in file order: the first denial answers.
    pub throttles: Vec<ThrottleSpec>,
    /// Fail2ban and allow2ban entries, in file order (fail2ban first).
    pub bans: Vec<BanSpec>,
}

/// One throttle: which requests it counts, under which key, by which rules.
#[derive(Debug, Clone, PartialEq)]
pub struct ThrottleSpec {
    /// The scope its quotas are kept under: the name a Django `scope` or a
    /// Rack throttle shares a quota by.
    pub scope: String,
    /// Its rules.
    pub rules: RuleSet,
    /// Named rule sets a request (`tier`) or the store may select.
    pub tiers: Vec<(String, RuleSet)>,
    /// Where a forward-auth request's tier name comes from.
    pub tier: Option<Source>,
    /// Where a forward-auth request's key comes from; `None`: the throttle
    /// answers Envoy only.
    pub key: Option<Source>,
    /// Hosts it applies to (exact, or `*.example.com`); empty: any.
    pub hosts: Vec<String>,
    /// Path prefixes it applies to; empty: any.
    pub paths: Vec<String>,
    /// Methods it applies to (upper case); empty: any.
    pub methods: Vec<String>,
    /// Headers a request must carry for it to apply (lower case).
    pub headers: Vec<String>,
    /// How Envoy's descriptors select it, if they do.
    pub envoy: Option<EnvoySpec>,
}

/// How an Envoy descriptor selects a throttle and names the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvoySpec {
    /// The request's domain.
    pub domain: String,
    /// The entry whose value is the key (`remote_address`, a header's
    /// `descriptor_key`...).
    pub key: String,
    /// Entries the descriptor must hold: a value, or `"*"` for any.
    pub matches: Vec<(String, String)>,
}

/// A fail2ban or allow2ban entry.
#[derive(Debug, Clone)]
pub struct BanSpec {
    /// The ban's parameters, as the core checked them.
    pub rule: Fail2Ban,
    /// Path patterns (regular expressions) of the requests that strike.
    pub paths: Vec<Regex>,
    /// Methods that strike (upper case); empty: any.
    pub methods: Vec<String>,
    /// Allow2ban: matching requests pass until the strike that bans.
    pub allow: bool,
}

/// Reads and checks the policy file at `path`.
pub fn load(path: &std::path::Path) -> Result<Spec, ServerError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ServerError::Config(format!(
            "cannot read the policy file {}: {e}",
            path.display()
        ))
    })?;
    parse(&text)
}

/// Checks a policy file's text.
pub fn parse(text: &str) -> Result<Spec, ServerError> {
    let file: File = toml::from_str(text)
        .map_err(|e| ServerError::Config(format!("the policy file is not valid: {e}")))?;
    let in_ = |place: String| move |e: String| ServerError::Config(format!("{place}: {e}"));
    let listen = address("listen", file.listen.as_deref().unwrap_or(DEFAULT_LISTEN))?;
    let grpc = file
        .grpc
        .as_deref()
        .map(|a| address("grpc", a))
        .transpose()?;
    let settings = store_settings(&file.store)?;
    let responses = Responses::new(
        file.status
            .unwrap_or(i64::from(ratekeeper_core::http::DEFAULT_STATUS)),
        file.blocked_status
            .unwrap_or(i64::from(ratekeeper_core::http::DEFAULT_BLOCKED_STATUS)),
        file.headers.as_deref().unwrap_or("all"),
        file.log_keys.unwrap_or(false),
    )
    .map_err(|e| ServerError::Config(e.to_string()))?;
    let proxies = TrustedProxies::parse(&file.trusted_proxies)
        .map_err(|e| in_("trusted_proxies".into())(e.to_string()))?
        .with_prefixes(
            ClientPrefixes::new(file.ipv4_prefix, file.ipv6_prefix)
                .map_err(|e| ServerError::Config(e.to_string()))?,
        );
    for prefix in &file.exempt_paths {
        if !prefix.starts_with('/') {
            return Err(ServerError::Config(format!(
                "exempt_paths: '{}' is not a path: give a prefix starting with '/'",
                prefix.escape_debug()
            )));
        }
    }
    let mut throttles: Vec<ThrottleSpec> = Vec::new();
    for (i, t) in file.throttle.into_iter().enumerate() {
        let place = format!("throttle[{i}] (\"{}\")", t.scope.escape_debug());
        let spec = throttle(t).map_err(in_(place.clone()))?;
        if let Some(j) = throttles.iter().position(|o| o.scope == spec.scope) {
            return Err(ServerError::Config(format!(
                "{place}: throttle[{j}] has the same scope; give each throttle a scope of its own"
            )));
        }
        throttles.push(spec);
    }
    let mut bans = Vec::new();
    for (kind, list, allow) in [
        ("fail2ban", file.fail2ban, false),
        ("allow2ban", file.allow2ban, true),
    ] {
        for (i, b) in list.into_iter().enumerate() {
            bans.push(ban(b, allow).map_err(in_(format!("{kind}[{i}]")))?);
        }
    }
    Ok(Spec {
        listen,
        grpc,
        settings,
        responses,
        log_denials: file.log_denials.unwrap_or(true),
        proxies,
        exempt_paths: file.exempt_paths,
        throttles,
        bans,
    })
}

/// A listening address, or an error naming `name` (a key or a flag).
pub(crate) fn address(name: &str, text: &str) -> Result<SocketAddr, ServerError> {
    text.parse().map_err(|_| {
        ServerError::Config(format!(
            "invalid {name} '{}': give an address and a port, as 127.0.0.1:8070",
            text.escape_debug()
        ))
    })
}

/// The `[store]` table: `url` and the limiter options (`prefix`,
/// `on_error`, `timeout`...), each checked by the core's [`Settings`].
fn store_settings(table: &toml::Table) -> Result<Settings, ServerError> {
    let mut settings = Settings::default();
    for (name, value) in table {
        let option = if name == "url" {
            "store"
        } else {
            name.as_str()
        };
        if matches!(option, "scope" | "tiers") {
            return Err(ServerError::Config(format!(
                "[store]: '{option}' is given per throttle, not for the store"
            )));
        }
        let kind = Settings::kind(option).map_err(|e| {
            ServerError::Config(format!(
                "[store]: {}",
                e.to_string().replace("'store'", "'url'")
            ))
        })?;
        let converted = match (kind, value) {
            (Kind::Text, toml::Value::String(s)) => Some(OptionValue::Text(s.clone())),
            (Kind::Seconds, toml::Value::Float(f)) => Some(OptionValue::Seconds(*f)),
            (Kind::Seconds, toml::Value::Integer(n)) => Some(OptionValue::Seconds(*n as f64)),
            (Kind::Count, toml::Value::Integer(n)) => Some(OptionValue::Count(i128::from(*n))),
            (Kind::Flag, toml::Value::Boolean(b)) => Some(OptionValue::Flag(*b)),
            _ => None,
        };
        let converted = converted.ok_or_else(|| {
            ServerError::Config(format!("[store]: {name} must be {}", kind.expected()))
        })?;
        settings
            .set(option, converted)
            .map_err(|e| ServerError::Config(format!("[store]: {e}")))?;
    }
    Ok(settings)
}

fn rules(what: &str, text: &str) -> Result<RuleSet, String> {
    RuleSet::parse(text).map_err(|e| format!("{what}: {e}"))
}

fn throttle(t: ThrottleFile) -> Result<ThrottleSpec, String> {
    ratekeeper_core::keys::check_scope(&t.scope).map_err(|e| e.to_string())?;
    let main = rules("rules", &t.rules)?;
    let mut tiers = Vec::new();
    for (name, value) in &t.tiers {
        let text = value
            .as_str()
            .ok_or_else(|| format!("tiers.{name}: give rules as a string, as \"100/minute\""))?;
        tiers.push((name.clone(), rules(&format!("tiers.{name}"), text)?));
    }
    ratekeeper_core::policy::check_tiers(&tiers).map_err(|e| e.to_string())?;
    let key = t.key.as_deref().map(Source::parse).transpose()?;
    let tier = t.tier.as_deref().map(Source::parse).transpose()?;
    if let Some(source) = &tier {
        if matches!(source, Source::Ip | Source::Identity(_)) {
            return Err("tier: give 'header:NAME' or 'query:FIELD'".into());
        }
        if tiers.is_empty() {
            return Err("tier is given but no tiers are".into());
        }
    }
    let envoy = t.envoy.map(envoy).transpose()?;
    if key.is_none() && envoy.is_none() {
        return Err("give a key (for forward auth), an [envoy] table (for Envoy), or both".into());
    }
    for path in &t.paths {
        if !path.starts_with('/') {
            return Err(format!(
                "paths: '{}' is not a path: give a prefix starting with '/'",
                path.escape_debug()
            ));
        }
    }
    Ok(ThrottleSpec {
        scope: t.scope,
        rules: main,
        tiers,
        tier,
        key,
        hosts: t
            .hosts
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect(),
        paths: t.paths,
        methods: methods(&t.methods)?,
        headers: header_names("headers", &t.headers)?,
        envoy,
    })
}

fn envoy(e: EnvoyFile) -> Result<EnvoySpec, String> {
    if e.domain.is_empty() || e.key.is_empty() {
        return Err("envoy: give a domain and the key entry's name".into());
    }
    let mut matches = Vec::new();
    for (name, value) in &e.matches {
        let value = value.as_str().ok_or_else(|| {
            format!("envoy.match.{name}: give the entry's value as a string (\"*\": any value)")
        })?;
        matches.push((name.clone(), value.to_owned()));
    }
    Ok(EnvoySpec {
        domain: e.domain,
        key: e.key,
        matches,
    })
}

fn methods(given: &[String]) -> Result<Vec<String>, String> {
    given
        .iter()
        .map(|m| {
            let upper = m.trim().to_ascii_uppercase();
            if upper.is_empty() || !upper.bytes().all(|b| b.is_ascii_alphabetic()) {
                Err(format!(
                    "methods: '{}' is not an HTTP method",
                    m.escape_debug()
                ))
            } else {
                Ok(upper)
            }
        })
        .collect()
}

fn header_names(what: &str, given: &[String]) -> Result<Vec<String>, String> {
    given
        .iter()
        .map(|h| {
            axum::http::HeaderName::from_bytes(h.as_bytes())
                .map(|n| n.as_str().to_owned())
                .map_err(|_| format!("{what}: '{}' is not a header name", h.escape_debug()))
        })
        .collect()
}

fn ban(b: BanFile, allow: bool) -> Result<BanSpec, String> {
    let rule = Fail2Ban::given(b.name.as_deref(), b.maxretry, b.findtime, b.bantime)
        .map_err(|e| e.to_string())?;
    if b.paths.is_empty() {
        return Err("give paths: the patterns of the requests that strike".into());
    }
    let paths = b
        .paths
        .iter()
        .map(|p| {
            Regex::new(p)
                .map_err(|e| format!("paths: '{}' is not a pattern: {e}", p.escape_debug()))
        })
        .collect::<Result<_, _>>()?;
    Ok(BanSpec {
        rule,
        paths,
        methods: methods(&b.methods)?,
        allow,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn a_whole_file_is_read() {
        let spec = parse(
            r#"
            listen = "127.0.0.1:9000"
            grpc = "127.0.0.1:9001"
            trusted_proxies = ["127.0.0.1", "10.0.0.0/8"]
            exempt_paths = ["/health"]
            headers = "draft"
            [store]
            url = "memory://"
            prefix = "edge"
            timeout = 1
            on_error = "deny"
            [[throttle]]
            scope = "api"
            rules = "100/minute"
            key = "header:X-Api-Key"
            paths = ["/api/"]
            methods = ["get", "POST"]
            tiers = { free = "10/minute", pro = "1000/minute" }
            tier = "header:X-Plan"
            envoy = { domain = "edge", key = "api_key", match = { generic_key = "api" } }
            [[fail2ban]]
            name = "php"
            paths = ['\.php$']
            maxretry = 3
            "#,
        )
        .unwrap();
        assert_eq!(spec.listen.port(), 9000);
        assert_eq!(spec.settings.prefix, "edge");
        assert_eq!(spec.throttles[0].methods, vec!["GET", "POST"]);
        assert_eq!(spec.throttles[0].tiers.len(), 2);
        assert_eq!(spec.throttles[0].envoy.as_ref().unwrap().matches.len(), 1);
        assert_eq!(spec.bans[0].rule.maxretry, 3);
    }

    #[test]
    fn problems_are_named_where_they_are() {
        for (text, words) in [
            ("listen = 5", &["listen"][..]),
            ("bogus = 1", &["bogus"]),
            ("[store]\ntimeout = -1", &["[store]", "timeout"]),
            ("[store]\nurl = \"redis://:hunter2@h:1/0?x\"\npool_size = 0", &["pool_size"]),
            ("[store]\nflavour = 1", &["[store]", "flavour"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/fortnight\"\nkey = \"ip\"", &["throttle[0]", "\"a\"", "fortnight"]),
            ("[[throttle]]\nscope = \"a b\"\nrules = \"5/s\"\nkey = \"ip\"", &["scope"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"cookie:x\"", &["cookie:x"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"", &["key", "envoy"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"\n[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"", &["throttle[1]", "same scope"]),
            ("[[fail2ban]]\npaths = [\"(\"]", &["fail2ban[0]", "pattern"]),
            ("[[allow2ban]]\npaths = [\"x\"]\nmaxretry = 0", &["allow2ban[0]", "maxretry"]),
            ("status = 200", &["status"]),
            ("trusted_proxies = [\"banana\"]", &["trusted_proxies", "banana"]),
        ] {
            let e = error(text);
            for word in words {
                assert!(e.contains(word), "{text:?}: {e}");
            }
            assert!(!e.contains("hunter2"), "{e}");
        }
    }
}
