//! The throttle, the rule kind that counts requests: as written
//! (`[[throttle]]`), checked into its model, and its part of a request's
//! step (whether it applies, which tier the request names, its decision as
//! the gate takes it: a shadow throttle's in shadow mode). Which decision
//! answers the request is the flow's (`gate::Gate::conclude`).

use super::meters::{meters, MeterSpec};
use super::values::{header_names, matcher, methods, path_prefix, rules};
use crate::decision::Decision;
use crate::gate::source::{self, Client, Facts, Source};
use crate::limiter::Limiter;
use crate::rule::RuleSet;
use serde::Deserialize;

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
    pub(super) count: Option<toml::Value>,
    #[serde(default)]
    pub(super) meters: toml::Table,
    #[serde(default)]
    pub(super) cost: toml::Table,
    #[serde(default)]
    pub(super) usage: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EnvoyFile {
    pub(super) domain: String,
    pub(super) key: String,
    #[serde(default, rename = "match")]
    pub(super) matches: toml::Table,
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
    /// Shadow mode for this throttle alone (`shadow = true`): it counts and
    /// reports as any throttle does, and what it would refuse is logged
    /// (`shadow=true`) and let through, with none of its headers: a new
    /// throttle tried in production.
    pub shadow: bool,
    /// Which responses it counts (`count = "failures"` or a list of
    /// statuses); `None`: every request it admits. A request is counted
    /// before the application runs (one already over the limit is refused at
    /// once) and given back when its response is not one it counts.
    pub count: Option<Counted>,
    /// Its meters (`meters`, with each one's `cost` and `usage`): named
    /// rule sets a request charges together, all or nothing, in one round
    /// trip; `rules` is then the first one's. Empty: it counts by `rules`.
    pub meters: Vec<MeterSpec>,
}

/// The responses a throttle counts (its `count`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counted {
    /// Failures: a status of 400 or more.
    Failures,
    /// These statuses.
    Statuses(Vec<u16>),
}

impl Counted {
    /// Whether a response of `status` is counted.
    pub fn counts(&self, status: u16) -> bool {
        match self {
            Counted::Failures => status >= 400,
            Counted::Statuses(statuses) => statuses.contains(&status),
        }
    }

    /// `count` as written: "failures", or a list of statuses (100 to 599).
    fn parse(value: &toml::Value) -> std::result::Result<Counted, String> {
        let wrong = || {
            "count: give \"failures\" (a status of 400 or more) or a list of statuses, as [401, 403]"
                .to_owned()
        };
        match value {
            toml::Value::String(text) if text == "failures" => Ok(Counted::Failures),
            toml::Value::Array(items) if !items.is_empty() => items
                .iter()
                .map(|item| match item.as_integer() {
                    Some(status @ 100..=599) => Ok(status as u16),
                    _ => Err(format!("count: {item} is not a status (give 100 to 599)")),
                })
                .collect::<std::result::Result<_, _>>()
                .map(Counted::Statuses),
            _ => Err(wrong()),
        }
    }
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

impl ThrottleSpec {
    /// Whether a throttle counts this request: its hosts, paths, methods,
    /// required headers and the door's predicate admit it.
    pub fn applies(&self, facts: &dyn Facts) -> bool {
        let t = self;
        (t.hosts.is_empty()
            || t.hosts
                .iter()
                .any(|h| source::host_matches(h, facts.host())))
            && (t.paths.is_empty() || t.paths.iter().any(|p| facts.path().starts_with(p.as_str())))
            && (t.methods.is_empty() || t.methods.iter().any(|m| m == facts.method()))
            && t.headers.iter().all(|h| facts.header(h).is_some())
            && t.matcher.is_none_or(|i| facts.call(i).is_some())
    }

    /// The tier a request names, when it is one of the throttle's tiers (a
    /// client may send any text: another is ignored). A tier read from the
    /// request (a header, a query field) is a claim, believed only when the
    /// peer is a trusted proxy, which set it (as `X-Forwarded-For` is): a
    /// client that connects itself is held to the main rules (or the tier the
    /// store keeps for its key). A callable's answer is the app's, believed.
    pub fn tier_of(
        &self,
        facts: &dyn Facts,
        client: &Client,
        proxies: &crate::net::TrustedProxies,
    ) -> Option<String> {
        let t = self;
        let source = t.tier.as_ref()?;
        if !matches!(source, Source::Call(_)) && !proxies.trusts_peer(facts.peer()) {
            return None;
        }
        let value = source::value_of(source, facts, client)?;
        let name = String::from_utf8(value).ok()?;
        t.tiers
            .iter()
            .any(|(tier, _)| *tier == name)
            .then_some(name)
    }

    /// Its `decision` as the gate takes it: a shadow throttle's in shadow
    /// mode (what it would refuse is reported and logged, never answered).
    pub fn taken(&self, decision: Decision) -> Decision {
        match self.shadow {
            true => decision.shadow(),
            false => decision,
        }
    }
}

pub(super) fn throttle(
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
    let metered = meters(&t.meters, &t.cost, &t.usage)?;
    let (main, mut tiers) = match (t.rules.as_deref(), limiter, metered.first()) {
        (Some(_), _, Some(_)) => {
            return Err("give rules or meters, not both (a meter is a named rule set)".into())
        }
        (Some(text), _, None) => (rules("rules", text)?, Vec::new()),
        (None, _, Some(first)) => (first.rules.clone(), Vec::new()),
        (None, Some(limiter), None) => (limiter.rules().clone(), limiter.tiers().to_vec()),
        (None, None, None) => return Err("give rules, as \"10/second; 100/minute\"".into()),
    };
    if !metered.is_empty() && (!t.tiers.is_empty() || t.tier.is_some()) {
        return Err(
            "a throttle with meters takes no tiers: give each tier a throttle of its own".into(),
        );
    }
    for (name, value) in &t.tiers {
        let text = value
            .as_str()
            .ok_or_else(|| format!("tiers.{name}: give rules as a string, as \"100/minute\""))?;
        tiers.retain(|(given, _)| given != name);
        let what = format!("tiers.{name}");
        let tier = rules(&what, text)?;
        tier.without_in_flight("a tier")
            .map_err(|e| format!("{what}: {e}"))?;
        tiers.push((name.clone(), tier));
    }
    let count = t.count.as_ref().map(Counted::parse).transpose()?;
    held(&main, &tiers, count.as_ref())?;
    crate::controls::check_tiers(&tiers).map_err(|e| e.to_string())?;
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
        shadow: t.shadow.unwrap_or(false),
        count,
        meters: metered,
    })
}

/// A throttle with an in-flight rule ("3 concurrent") holds a slot from
/// the request's admission until its response ends, one key's slot each:
/// it takes no tiers (a tier's rules could not hold the same slots) and
/// counts every response (a slot is given back at the end whatever the
/// status, so `count` would have nothing to choose).
fn held(
    main: &RuleSet,
    tiers: &[(String, RuleSet)],
    count: Option<&Counted>,
) -> std::result::Result<(), String> {
    let Some(limit) = main.in_flight() else {
        return Ok(());
    };
    if !tiers.is_empty() {
        return Err(format!(
            "rules: a throttle with an in-flight rule ('{limit} concurrent') takes no tiers: \
             give each tier a throttle of its own"
        ));
    }
    if count.is_some() {
        return Err(format!(
            "count: a throttle with an in-flight rule ('{limit} concurrent') counts every request \
             while it is under way: give `count` to a throttle of rates alone"
        ));
    }
    Ok(())
}

pub(super) fn envoy(e: EnvoyFile) -> std::result::Result<EnvoySpec, String> {
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
