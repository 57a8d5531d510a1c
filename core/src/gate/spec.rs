//! The policy every door applies, checked once: read from a policy file
//! (TOML), a Python dict (Django's settings) or a Ruby Hash (what the Rack
//! DSL builds), each turned into the same [`toml::Table`] first. Every
//! problem is reported with where it is (`throttle[1] ("api")`) and what is
//! wrong; a store URL is never quoted (it may hold a password).

use super::source::Source;
use crate::error::{Error, Result};
use crate::http::{Responses, DEFAULT_BLOCKED_STATUS, DEFAULT_STATUS};
use crate::limiter::Limiter;
use crate::net::{ClientPrefixes, TrustedProxies};
use crate::policy::Fail2Ban;
use crate::rule::RuleSet;
use crate::settings::{Kind, OptionValue, Settings};
use regex::Regex;
use serde::Deserialize;
use std::net::SocketAddr;

/// A policy as a table and its values, for a binding to build from its
/// language's dict or Hash.
pub use toml::{Table, Value};

/// The policy as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    listen: Option<String>,
    grpc: Option<String>,
    enabled: Option<bool>,
    #[serde(default)]
    store: toml::Table,
    #[serde(default)]
    trusted_proxies: Vec<String>,
    ipv4_prefix: Option<i64>,
    ipv6_prefix: Option<i64>,
    #[serde(default)]
    exempt_paths: Vec<String>,
    exempt: Option<String>,
    status: Option<i64>,
    blocked_status: Option<i64>,
    headers: Option<String>,
    log_keys: Option<bool>,
    log_denials: Option<bool>,
    #[serde(default)]
    throttle: Vec<ThrottleFile>,
    #[serde(default)]
    safelist: Vec<ListFile>,
    #[serde(default)]
    blocklist: Vec<ListFile>,
    #[serde(default)]
    fail2ban: Vec<BanFile>,
    #[serde(default)]
    allow2ban: Vec<BanFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListFile {
    name: String,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    methods: Vec<String>,
    #[serde(rename = "match")]
    matcher: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThrottleFile {
    scope: Option<String>,
    rules: Option<String>,
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
    #[serde(rename = "match")]
    matcher: Option<String>,
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
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    methods: Vec<String>,
    #[serde(rename = "match")]
    matcher: Option<String>,
    maxretry: Option<i64>,
    findtime: Option<f64>,
    bantime: Option<f64>,
}

/// A checked policy.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The edge server's HTTP door (forward auth, `/healthz`, `/metrics`);
    /// the apps ignore it.
    pub listen: Option<SocketAddr>,
    /// The edge server's gRPC door (Envoy's rate limit service); the apps ignore it.
    pub grpc: Option<SocketAddr>,
    /// Whether the doors limit at all (false: every request passes, unmarked).
    pub enabled: bool,
    /// The store and the limiter options (`[store]`), as the core checked them.
    pub settings: Settings,
    /// Statuses, header style and how keys are logged.
    pub responses: Responses,
    /// Whether each denial is logged (one line).
    pub log_denials: bool,
    /// Proxies whose `X-Forwarded-For` is believed, and the client prefixes.
    pub proxies: TrustedProxies,
    /// Path prefixes never limited.
    pub exempt_paths: Vec<String>,
    /// A predicate the door holds: requests it is true for are never limited.
    pub exempt_call: Option<usize>,
    /// The throttles, in order: each that applies counts the request, the
    /// first denial answers.
    pub throttles: Vec<ThrottleSpec>,
    /// Requests never limited, by what they are (paths, methods, a
    /// predicate the door holds), in order.
    pub safelists: Vec<ListSpec>,
    /// Requests always refused (403), by what they are, in order.
    pub blocklists: Vec<ListSpec>,
    /// Fail2ban and allow2ban entries, in order (fail2ban first).
    pub bans: Vec<BanSpec>,
}

/// The requests a safelist, blocklist or ban entry names.
#[derive(Debug, Clone)]
pub struct RequestMatch {
    /// Path patterns (regular expressions); empty: any.
    pub paths: Vec<Regex>,
    /// Methods (upper case); empty: any.
    pub methods: Vec<String>,
    /// A predicate the door holds (a Ruby block, a Python callable): the
    /// entry names a request only when it is true.
    pub matcher: Option<usize>,
}

impl RequestMatch {
    /// Whether a request with this method and path is named, before the
    /// door's predicate is asked.
    pub fn matches_request(&self, method: &str, path: &str) -> bool {
        (self.methods.is_empty() || self.methods.iter().any(|m| m == method))
            && (self.paths.is_empty() || self.paths.iter().any(|p| p.is_match(path)))
    }

    fn read(
        paths: &[String],
        given_methods: &[String],
        given_matcher: Option<&str>,
        callables: usize,
    ) -> std::result::Result<RequestMatch, String> {
        Ok(RequestMatch {
            paths: patterns(paths)?,
            methods: methods(given_methods)?,
            matcher: matcher(given_matcher, callables)?,
        })
    }
}

/// A safelist or blocklist entry: the requests it names.
#[derive(Debug, Clone)]
pub struct ListSpec {
    /// Its name (in notifications and logs).
    pub name: String,
    /// The requests it names.
    pub when: RequestMatch,
}

/// One throttle: which requests it counts, under which key, by which rules.
#[derive(Debug, Clone, PartialEq)]
pub struct ThrottleSpec {
    /// The scope its quotas are kept under: the name every door and
    /// language shares a quota by.
    pub scope: String,
    /// Its rules.
    pub rules: RuleSet,
    /// Named rule sets a request (`tier`) or the store may select.
    pub tiers: Vec<(String, RuleSet)>,
    /// Where a request's tier name comes from.
    pub tier: Option<Source>,
    /// Where a request's key comes from; `None`: the throttle answers Envoy only.
    pub key: Option<Source>,
    /// Hosts it applies to (exact, or `*.example.com`); empty: any.
    pub hosts: Vec<String>,
    /// Path prefixes it applies to; empty: any.
    pub paths: Vec<String>,
    /// Methods it applies to (upper case); empty: any.
    pub methods: Vec<String>,
    /// Headers a request must carry for it to apply (lower case).
    pub headers: Vec<String>,
    /// A predicate the door holds (say "the request resolves to this
    /// view"): it applies only when it is true.
    pub matcher: Option<usize>,
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
    /// The requests that strike.
    pub when: RequestMatch,
    /// Allow2ban: matching requests pass until the strike that bans.
    pub allow: bool,
}

impl Spec {
    /// Reads and checks the policy file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Spec> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::config(format!(
                "cannot read the policy file {}: {e}",
                path.display()
            ))
        })?;
        Spec::parse(&text)
    }

    /// Checks a policy file's text.
    pub fn parse(text: &str) -> Result<Spec> {
        Spec::read(text, 0, None)
    }

    /// Checks a policy given as text, with `callables` the door holds.
    fn read(text: &str, callables: usize, limiter: Option<&Limiter>) -> Result<Spec> {
        let file: File = toml::from_str(text)
            .map_err(|e| Error::config(format!("the policy is not valid: {e}")))?;
        Spec::check(file, callables, limiter)
    }

    /// Checks a policy given as a table (a Python dict or a Ruby Hash,
    /// converted). A key, tier or ban match may be `call:N` for a callable
    /// the door holds, N below `callables`.
    pub fn from_table(table: toml::Table, callables: usize) -> Result<Spec> {
        Spec::read(&Spec::written(&table)?, callables, None)
    }

    /// [`Spec::from_table`] for a door given a limiter (see
    /// [`super::Gate::on_limiter`]): a throttle that gives no rules has the
    /// limiter's rules and tiers, and its scope unless it gives one.
    pub fn on_limiter(table: toml::Table, callables: usize, limiter: &Limiter) -> Result<Spec> {
        Spec::read(&Spec::written(&table)?, callables, Some(limiter))
    }

    /// A table written out, to be read back so that a problem is shown where
    /// it is (`listen = 5`), as in a file.
    fn written(table: &toml::Table) -> Result<String> {
        toml::to_string(table).map_err(|e| Error::config(format!("the policy is not valid: {e}")))
    }

    fn check(file: File, callables: usize, limiter: Option<&Limiter>) -> Result<Spec> {
        let in_ = |place: String| move |e: String| Error::config(format!("{place}: {e}"));
        let listen = file
            .listen
            .as_deref()
            .map(|a| address("listen", a))
            .transpose()?;
        let grpc = file
            .grpc
            .as_deref()
            .map(|a| address("grpc", a))
            .transpose()?;
        let settings = store_settings(&file.store)?;
        let responses = Responses::new(
            file.status.unwrap_or(i64::from(DEFAULT_STATUS)),
            file.blocked_status
                .unwrap_or(i64::from(DEFAULT_BLOCKED_STATUS)),
            file.headers.as_deref().unwrap_or("all"),
            file.log_keys.unwrap_or(false),
        )?;
        let proxies = TrustedProxies::parse(&file.trusted_proxies)
            .map_err(|e| in_("trusted_proxies".into())(e.to_string()))?
            .with_prefixes(ClientPrefixes::new(file.ipv4_prefix, file.ipv6_prefix)?);
        for prefix in &file.exempt_paths {
            path_prefix("exempt_paths", prefix).map_err(Error::config)?;
        }
        let exempt_call = match file.exempt.as_deref() {
            None => None,
            Some(text) => match Source::parse(text, callables) {
                Ok(Source::Call(n)) => Some(n),
                _ => {
                    return Err(Error::config(format!(
                        "exempt: '{}' is not a callable the door holds (give exempt_paths for path prefixes)",
                        text.escape_debug()
                    )))
                }
            },
        };
        let mut throttles: Vec<ThrottleSpec> = Vec::new();
        for (i, t) in file.throttle.into_iter().enumerate() {
            let place = match &t.scope {
                Some(scope) => format!("throttle[{i}] (\"{}\")", scope.escape_debug()),
                None => format!("throttle[{i}]"),
            };
            let spec = throttle(t, callables, limiter).map_err(in_(place.clone()))?;
            if let Some(j) = throttles.iter().position(|o| o.scope == spec.scope) {
                return Err(Error::config(format!(
                    "{place}: throttle[{j}] has the same scope; give each throttle a scope of its own"
                )));
            }
            throttles.push(spec);
        }
        let mut lists = [Vec::new(), Vec::new()];
        for (n, (kind, given)) in [("safelist", file.safelist), ("blocklist", file.blocklist)]
            .into_iter()
            .enumerate()
        {
            for (i, l) in given.into_iter().enumerate() {
                lists[n].push(list(l, callables).map_err(in_(format!("{kind}[{i}]")))?);
            }
        }
        let [safelists, blocklists] = lists;
        let mut bans = Vec::new();
        for (kind, list, allow) in [
            ("fail2ban", file.fail2ban, false),
            ("allow2ban", file.allow2ban, true),
        ] {
            for (i, b) in list.into_iter().enumerate() {
                bans.push(ban(b, allow, callables).map_err(in_(format!("{kind}[{i}]")))?);
            }
        }
        Ok(Spec {
            listen,
            grpc,
            enabled: file.enabled.unwrap_or(true),
            settings,
            responses,
            log_denials: file.log_denials.unwrap_or(true),
            proxies,
            exempt_paths: file.exempt_paths,
            exempt_call,
            throttles,
            safelists,
            blocklists,
            bans,
        })
    }

    /// Whether a throttle keys requests by a field of their body
    /// (`identity:FIELD`): a door that must read a body ahead of the app
    /// (ASGI) reads it only then.
    pub fn reads_body(&self) -> bool {
        self.throttles
            .iter()
            .any(|t| matches!(t.key, Some(Source::Identity(_))))
    }

    /// Whether `path` is exempt from limiting.
    pub fn exempt(&self, path: &str) -> bool {
        self.exempt_paths
            .iter()
            .any(|p| path.starts_with(p.as_str()))
    }
}

/// A listening address, or an error naming `name` (a key or a flag).
pub fn address(name: &str, text: &str) -> Result<SocketAddr> {
    text.parse().map_err(|_| {
        Error::config(format!(
            "invalid {name} '{}': give an address and a port, as 127.0.0.1:8070",
            text.escape_debug()
        ))
    })
}

/// The `[store]` table: `url` and the limiter options (`prefix`,
/// `on_error`, `timeout`...), each checked by [`Settings`].
fn store_settings(table: &toml::Table) -> Result<Settings> {
    let mut settings = Settings::default();
    for (name, value) in table {
        let option = if name == "url" {
            "store"
        } else {
            name.as_str()
        };
        if matches!(option, "scope" | "tiers") {
            return Err(Error::config(format!(
                "[store]: '{option}' is given per throttle, not for the store"
            )));
        }
        let kind = Settings::kind(option).map_err(|e| {
            Error::config(format!(
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
        let converted = converted
            .ok_or_else(|| Error::config(format!("[store]: {name} must be {}", kind.expected())))?;
        settings
            .set(option, converted)
            .map_err(|e| Error::config(format!("[store]: {e}")))?;
    }
    Ok(settings)
}

fn rules(what: &str, text: &str) -> std::result::Result<RuleSet, String> {
    RuleSet::parse(text).map_err(|e| format!("{what}: {e}"))
}

fn path_prefix(what: &str, path: &str) -> std::result::Result<(), String> {
    if path.starts_with('/') {
        Ok(())
    } else {
        Err(format!(
            "{what}: '{}' is not a path: give a prefix starting with '/'",
            path.escape_debug()
        ))
    }
}

fn throttle(
    t: ThrottleFile,
    callables: usize,
    limiter: Option<&Limiter>,
) -> std::result::Result<ThrottleSpec, String> {
    let scope = match (t.scope, limiter) {
        (Some(scope), _) => scope,
        (None, Some(limiter)) if t.rules.is_none() => limiter.scope().to_owned(),
        (None, _) => {
            return Err("give the throttle a scope: the name its quotas are kept under".into())
        }
    };
    crate::keys::check_scope(&scope).map_err(|e| e.to_string())?;
    let (main, mut tiers) = match (t.rules.as_deref(), limiter) {
        (Some(text), _) => (rules("rules", text)?, Vec::new()),
        (None, Some(limiter)) => (limiter.rules().clone(), limiter.tiers().to_vec()),
        (None, None) => return Err("give rules, as \"10/second; 100/minute\"".into()),
    };
    for (name, value) in &t.tiers {
        let text = value
            .as_str()
            .ok_or_else(|| format!("tiers.{name}: give rules as a string, as \"100/minute\""))?;
        tiers.retain(|(given, _)| given != name);
        tiers.push((name.clone(), rules(&format!("tiers.{name}"), text)?));
    }
    crate::policy::check_tiers(&tiers).map_err(|e| e.to_string())?;
    let key = t
        .key
        .as_deref()
        .map(|k| Source::parse(k, callables))
        .transpose()?;
    let tier = t
        .tier
        .as_deref()
        .map(|k| Source::parse(k, callables))
        .transpose()?;
    if let Some(source) = &tier {
        if matches!(source, Source::Ip | Source::User | Source::Identity(_)) {
            return Err("tier: give 'header:NAME', 'query:FIELD' or a callable".into());
        }
        if tiers.is_empty() {
            return Err("tier is given but no tiers are".into());
        }
    }
    let envoy = t.envoy.map(envoy).transpose()?;
    if key.is_none() && envoy.is_none() {
        return Err(
            "give a key (for the HTTP doors), an [envoy] table (for Envoy), or both".into(),
        );
    }
    for path in &t.paths {
        path_prefix("paths", path)?;
    }
    Ok(ThrottleSpec {
        scope,
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
        matcher: matcher(t.matcher.as_deref(), callables)?,
        envoy,
    })
}

fn envoy(e: EnvoyFile) -> std::result::Result<EnvoySpec, String> {
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

/// An HTTP method as every door compares it: a token of ASCII letters, in
/// upper case.
pub fn method(given: &str) -> std::result::Result<String, String> {
    let upper = given.to_ascii_uppercase();
    if upper.is_empty() || upper.len() > 32 || !upper.bytes().all(|b| b.is_ascii_alphabetic()) {
        Err(format!("'{}' is not an HTTP method", given.escape_debug()))
    } else {
        Ok(upper)
    }
}

fn methods(given: &[String]) -> std::result::Result<Vec<String>, String> {
    given
        .iter()
        .map(|m| method(m).map_err(|e| format!("methods: {e}")))
        .collect()
}

/// A header name as every door compares it: an HTTP token, in lower case.
pub fn header_name(given: &str) -> Option<String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    (!given.is_empty() && given.bytes().all(token)).then(|| given.to_ascii_lowercase())
}

fn header_names(what: &str, given: &[String]) -> std::result::Result<Vec<String>, String> {
    given
        .iter()
        .map(|h| {
            header_name(h)
                .ok_or_else(|| format!("{what}: '{}' is not a header name", h.escape_debug()))
        })
        .collect()
}

/// A `match` that names a predicate the door holds.
fn matcher(given: Option<&str>, callables: usize) -> std::result::Result<Option<usize>, String> {
    match given {
        None => Ok(None),
        Some(text) => match Source::parse(text, callables) {
            Ok(Source::Call(n)) => Ok(Some(n)),
            _ => Err(format!(
                "match: '{}' is not a callable the door holds",
                text.escape_debug()
            )),
        },
    }
}

fn patterns(given: &[String]) -> std::result::Result<Vec<Regex>, String> {
    given
        .iter()
        .map(|p| {
            Regex::new(p)
                .map_err(|e| format!("paths: '{}' is not a pattern: {e}", p.escape_debug()))
        })
        .collect()
}

fn list(l: ListFile, callables: usize) -> std::result::Result<ListSpec, String> {
    let when = RequestMatch::read(&l.paths, &l.methods, l.matcher.as_deref(), callables)?;
    if when.paths.is_empty() && when.methods.is_empty() && when.matcher.is_none() {
        return Err("give paths, methods or match: the requests it names".into());
    }
    Ok(ListSpec { name: l.name, when })
}

fn ban(b: BanFile, allow: bool, callables: usize) -> std::result::Result<BanSpec, String> {
    let rule = Fail2Ban::given(b.name.as_deref(), b.maxretry, b.findtime, b.bantime)
        .map_err(|e| e.to_string())?;
    let when = RequestMatch::read(&b.paths, &b.methods, b.matcher.as_deref(), callables)?;
    if when.paths.is_empty() && when.matcher.is_none() {
        return Err("give paths: the patterns of the requests that strike".into());
    }
    Ok(BanSpec { rule, when, allow })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        Spec::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn a_whole_file_is_read() {
        let spec = Spec::parse(
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
        assert_eq!(spec.listen.unwrap().port(), 9000);
        assert_eq!(spec.settings.prefix, "edge");
        assert_eq!(spec.throttles[0].methods, vec!["GET", "POST"]);
        assert_eq!(spec.throttles[0].tiers.len(), 2);
        assert_eq!(spec.throttles[0].envoy.as_ref().unwrap().matches.len(), 1);
        assert_eq!(spec.bans[0].rule.maxretry, 3);
        assert!(spec.enabled);
    }

    #[test]
    fn problems_are_named_where_they_are() {
        for (text, words) in [
            ("listen = 5", &["listen"][..]),
            ("listen = \"nowhere\"", &["listen", "nowhere"]),
            ("bogus = 1", &["bogus"]),
            ("[store]\ntimeout = -1", &["[store]", "timeout"]),
            ("[store]\nurl = \"redis://:hunter2@h:1/0?x\"\npool_size = 0", &["pool_size"]),
            ("[store]\nflavour = 1", &["[store]", "flavour"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/fortnight\"\nkey = \"ip\"", &["throttle[0]", "\"a\"", "fortnight"]),
            ("[[throttle]]\nscope = \"a b\"\nrules = \"5/s\"\nkey = \"ip\"", &["scope"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"cookie:x\"", &["cookie:x"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"call:0\"", &["call:0"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"", &["key", "envoy"]),
            ("[[throttle]]\nkey = \"ip\"\nrules = \"5/s\"", &["throttle[0]", "scope"]),
            ("[[throttle]]\nkey = \"ip\"\nscope = \"a\"", &["throttle[0]", "rules"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"\nmethods = [\"GE T\"]", &["methods", "GE T"]),
            ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"\n[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"", &["throttle[1]", "same scope"]),
            ("[[fail2ban]]\npaths = [\"(\"]", &["fail2ban[0]", "pattern"]),
            ("[[allow2ban]]\npaths = [\"x\"]\nmaxretry = 0", &["allow2ban[0]", "maxretry"]),
            ("status = 200", &["status"]),
            ("trusted_proxies = [\"banana\"]", &["trusted_proxies", "banana"]),
            ("exempt_paths = [\"health\"]", &["exempt_paths", "health"]),
        ] {
            let e = error(text);
            for word in words {
                assert!(e.contains(word), "{text:?}: {e}");
            }
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn methods_and_header_names_are_checked_once() {
        assert_eq!(method("post").unwrap(), "POST");
        assert!(method(" post").is_err());
        assert!(method("GET\r\n").is_err());
        assert!(method("").is_err());
        assert_eq!(header_name("X-Api-Key").as_deref(), Some("x-api-key"));
        assert_eq!(header_name("a b"), None);
        assert_eq!(header_name(""), None);
    }
}
