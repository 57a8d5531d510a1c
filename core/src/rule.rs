//! Rules (`limit / window`) and rule sets, with the text grammar.
//!
//! A rule is written `LIMIT/WINDOW` or `LIMIT per WINDOW`, where `WINDOW` is an
//! optional count and a unit: `20/minute`, `20 per minute`, `5/5min`,
//! `100/30s`, `2/500ms`, `800/day`. Units: `ms`; `s`, `sec`, `second(s)`;
//! `m`, `min`, `minute(s)`; `h`, `hour(s)`; `d`, `day(s)` (any case). A rule set
//! joins rules with `;` or `,`, and may hold one in-flight rule
//! (`10 concurrent`, see [`crate::in_flight`]).

use crate::error::{Error, Result};
use std::fmt;

/// Largest limit a rule may have, 2^40 - 1: a log's running totals are kept
/// modulo 2^40 (the engine's bound, which the Redis module holds its
/// arguments to).
pub const MAX_LIMIT: u64 = ratekeeper_engine::command::MAX_LIMIT as u64;
/// Longest window a rule may have: 366 days, in milliseconds (the engine's bound).
pub const MAX_WINDOW_MS: u64 = ratekeeper_engine::command::MAX_WINDOW_MS as u64;
/// Most rules one set may hold.
pub const MAX_RULES: usize = 64;

const SECOND_MS: u64 = 1_000;
const MINUTE_MS: u64 = 60 * SECOND_MS;
const HOUR_MS: u64 = 60 * MINUTE_MS;
const DAY_MS: u64 = 24 * HOUR_MS;

/// One rule: at most `limit` units in any window of `window_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rule {
    /// Units admitted per window, at least 1.
    pub limit: u64,
    /// The window, in milliseconds (1 ms to 366 days).
    pub window_ms: u64,
}

impl Rule {
    /// A validated rule from a limit and a window in milliseconds.
    pub fn new(limit: u64, window_ms: u64) -> Result<Rule> {
        let shown = format!("{limit}/{}", window_name(window_ms));
        check_limit(limit, &shown)?;
        check_window(window_ms, &shown)?;
        Ok(Rule { limit, window_ms })
    }

    /// A validated rule from a limit and a window in (possibly fractional) seconds.
    pub fn from_seconds(limit: i128, window_seconds: f64) -> Result<Rule> {
        let shown = format!("({limit}, {window_seconds})");
        if limit < 1 {
            return Err(Error::config(format!(
                "invalid rule {shown}: the limit must be a whole number of at least 1"
            )));
        }
        if !window_seconds.is_finite() || window_seconds <= 0.0 {
            return Err(Error::config(format!(
                "invalid rule {shown}: the window must be a positive number of seconds"
            )));
        }
        let ms = (window_seconds * 1000.0).round();
        if ms < 1.0 || ms > MAX_WINDOW_MS as f64 {
            return Err(Error::config(format!(
                "invalid rule {shown}: the window must be between 1 ms and 366 days"
            )));
        }
        let limit = u64::try_from(limit).unwrap_or(u64::MAX);
        check_limit(limit, &shown)?;
        Ok(Rule {
            limit,
            window_ms: ms as u64,
        })
    }

    /// The short name of this rule's window used in headers: `1s`, `5m`, `1d`, `500ms`.
    pub fn window_name(&self) -> String {
        window_name(self.window_ms)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.limit, window_name(self.window_ms))
    }
}

/// The compact name of a window: the largest unit that divides it.
pub fn window_name(ms: u64) -> String {
    let mut name = String::new();
    push_window_name(&mut name, ms);
    name
}

/// Appends `n` in decimal to `text` (a header's or a name's number).
pub(crate) fn push_number(text: &mut String, n: u64) {
    text.push_str(itoa::Buffer::new().format(n));
}

/// Appends [`window_name`] of `ms` to `text`.
pub(crate) fn push_window_name(text: &mut String, ms: u64) {
    for (unit, size) in [
        ("d", DAY_MS),
        ("h", HOUR_MS),
        ("m", MINUTE_MS),
        ("s", SECOND_MS),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            push_number(text, ms / size);
            text.push_str(unit);
            return;
        }
    }
    push_number(text, ms);
    text.push_str("ms");
}

fn check_limit(limit: u64, shown: &str) -> Result<()> {
    if limit == 0 {
        return Err(Error::config(format!(
            "invalid rule '{shown}': the limit must be at least 1"
        )));
    }
    if limit > MAX_LIMIT {
        return Err(Error::config(format!(
            "invalid rule '{shown}': the limit may be at most {MAX_LIMIT}"
        )));
    }
    Ok(())
}

fn check_window(window_ms: u64, shown: &str) -> Result<()> {
    if window_ms == 0 || window_ms > MAX_WINDOW_MS {
        return Err(Error::config(format!(
            "invalid rule '{shown}': the window must be between 1 ms and 366 days"
        )));
    }
    Ok(())
}

/// One part of a rule set as a binding received it.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleSpec {
    /// Rule text, one rule or several.
    Text(String),
    /// A limit and a window in seconds.
    Pair(i128, f64),
    /// A rule already built.
    Rule(Rule),
}

/// Several rules checked as one unit, kept sorted by window (shortest first).
#[derive(Debug, Clone)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// The same rules as the engine's log takes them (made once, here).
    log: ratekeeper_engine::Rules,
    /// Every entry kept: close entries never merge (the rule text's `exact`).
    exact: bool,
    /// The in-flight rule's limit: leases held at once (see [`crate::in_flight`]).
    in_flight: Option<u64>,
}

impl PartialEq for RuleSet {
    fn eq(&self, other: &RuleSet) -> bool {
        self.rules == other.rules && self.exact == other.exact && self.in_flight == other.in_flight
    }
}

impl Eq for RuleSet {}

impl std::hash::Hash for RuleSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rules.hash(state);
        self.exact.hash(state);
        self.in_flight.hash(state);
    }
}

impl RuleSet {
    /// A rule set from rules in any order; rejects an empty set and two rules with one window.
    pub fn new(mut rules: Vec<Rule>) -> Result<RuleSet> {
        if rules.is_empty() {
            return Err(Error::config(
                "the rule set is empty: give at least one rule such as '10/minute'",
            ));
        }
        if rules.len() > MAX_RULES {
            return Err(Error::config(format!(
                "the rule set has {} rules; at most {MAX_RULES} are allowed",
                rules.len()
            )));
        }
        rules.sort_by_key(|r| r.window_ms);
        for pair in rules.windows(2) {
            if pair[0].window_ms == pair[1].window_ms {
                return Err(Error::config(format!(
                    "rules '{}' and '{}' have the same window; give each window once",
                    pair[0], pair[1]
                )));
            }
        }
        let pairs: Vec<(i64, i64)> = rules
            .iter()
            .map(|r| (r.limit as i64, r.window_ms as i64))
            .collect();
        let log = ratekeeper_engine::Rules::new(&pairs);
        Ok(RuleSet {
            rules,
            log,
            exact: false,
            in_flight: None,
        })
    }

    /// A rule set of one in-flight rule and no rate: `limit` leases at once.
    pub fn in_flight_only(limit: u64) -> Result<RuleSet> {
        let limit = crate::in_flight::in_flight_limit(limit.into())?;
        Ok(RuleSet {
            rules: Vec::new(),
            log: ratekeeper_engine::Rules::new(&[]),
            exact: false,
            in_flight: Some(limit),
        })
    }

    /// The same rate rules with an in-flight rule of `limit` leases (or none).
    pub fn with_in_flight(self, limit: Option<u64>) -> Result<RuleSet> {
        let in_flight = limit
            .map(|l| crate::in_flight::in_flight_limit(l.into()))
            .transpose()?;
        Ok(RuleSet { in_flight, ..self })
    }

    /// The in-flight rule's limit, when the set holds one.
    pub fn in_flight(&self) -> Option<u64> {
        self.in_flight
    }

    /// Refuses an in-flight rule where `what` cannot hold one (naming it).
    pub fn without_in_flight(&self, what: &str) -> Result<()> {
        match self.in_flight {
            None => Ok(()),
            Some(limit) => Err(Error::config(format!(
                "{what} cannot hold an in-flight rule ('{limit} concurrent'): \
                 give it to a limiter and take slots with hold()"
            ))),
        }
    }

    /// The same rules, their log keeping every entry (`exact`): a denial is
    /// never cautious, and the log grows with the calls in its windows (up
    /// to 131,072 entries per rule) instead of holding about 1,024.
    pub fn keeping_every_entry(self, exact: bool) -> RuleSet {
        RuleSet { exact, ..self }
    }

    /// Whether the log keeps every entry (see [`RuleSet::keeping_every_entry`]).
    pub fn exact(&self) -> bool {
        self.exact
    }

    /// The rules of an engine's log (a stored override the engine read) as
    /// a rule set, held to the same bounds as every rule set.
    pub fn from_log_rules(log: &ratekeeper_engine::Rules) -> Result<RuleSet> {
        let rules = log
            .limits
            .iter()
            .zip(&log.windows)
            .map(|(&limit, &window)| Rule::new(limit as u64, window as u64))
            .collect::<Result<Vec<Rule>>>()?;
        RuleSet::new(rules)
    }

    /// The rules as the engine's log takes them: limits, windows (ms) and
    /// the windows as a log's header stores them.
    pub fn log_rules(&self) -> &ratekeeper_engine::Rules {
        &self.log
    }

    /// Parses a rule set such as `"1/second; 20/minute, 800/day"`; a part
    /// `exact` keeps every entry of its log ([`RuleSet::keeping_every_entry`]).
    pub fn parse(text: &str) -> Result<RuleSet> {
        let mut exact = false;
        let mut in_flight = Vec::new();
        let parts: Vec<&str> = text
            .split([';', ','])
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .filter(|p| {
                let flag = p.eq_ignore_ascii_case("exact");
                exact |= flag;
                !flag
            })
            .filter(|p| match crate::in_flight::parse_part(p) {
                Some(limit) => {
                    in_flight.push(limit);
                    false
                }
                None => true,
            })
            .collect();
        let in_flight = one_in_flight(in_flight.into_iter().collect::<Result<Vec<u64>>>()?)?;
        if parts.is_empty() {
            if let Some(limit) = in_flight {
                return RuleSet::in_flight_only(limit);
            }
            return Err(Error::config(format!(
                "the rule set '{text}' is empty: give at least one rule such as '10/minute'"
            )));
        }
        let rules = parts
            .iter()
            .map(|part| parse_rule(part))
            .collect::<Result<Vec<_>>>()?;
        // quote two rules with one window as they were written
        for (i, rule) in rules.iter().enumerate() {
            if let Some(j) = rules[..i]
                .iter()
                .position(|r| r.window_ms == rule.window_ms)
            {
                return Err(Error::config(format!(
                    "rules '{}' and '{}' have the same window ({}); give each window once",
                    parts[j],
                    parts[i],
                    window_name(rule.window_ms)
                )));
            }
        }
        RuleSet::new(rules)?
            .keeping_every_entry(exact)
            .with_in_flight(in_flight)
    }

    /// A rule set from parts given one by one, as bindings receive them:
    /// each a rule text (`"20/minute"`, even `"1/s; 5/m"`) or a (limit, window
    /// in seconds) pair.
    pub fn from_specs(specs: Vec<RuleSpec>) -> Result<RuleSet> {
        let (mut rules, mut exact, mut in_flight) = (Vec::new(), false, Vec::new());
        for spec in specs {
            match spec {
                RuleSpec::Text(text) => {
                    let set = RuleSet::parse(&text)?;
                    exact |= set.exact;
                    in_flight.extend(set.in_flight);
                    rules.extend_from_slice(set.rules());
                }
                RuleSpec::Pair(limit, window) => rules.push(Rule::from_seconds(limit, window)?),
                RuleSpec::Rule(rule) => rules.push(rule),
            }
        }
        let in_flight = one_in_flight(in_flight)?;
        match (rules.is_empty(), in_flight) {
            (true, Some(limit)) => RuleSet::in_flight_only(limit),
            _ => RuleSet::new(rules)?
                .keeping_every_entry(exact)
                .with_in_flight(in_flight),
        }
    }

    /// The rules, shortest window first.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The longest window of the set, in milliseconds.
    pub fn longest_window_ms(&self) -> u64 {
        self.rules.last().map_or(0, |r| r.window_ms)
    }

    /// The largest limit of the set: how many units a log must keep.
    pub fn max_limit(&self) -> u64 {
        self.rules.iter().map(|r| r.limit).max().unwrap_or(0)
    }
}

/// The one in-flight rule of a rule set's parts (none, or an error for two).
fn one_in_flight(limits: Vec<u64>) -> Result<Option<u64>> {
    match limits[..] {
        [] => Ok(None),
        [limit] => Ok(Some(limit)),
        _ => Err(Error::config(format!(
            "the rule set has {} in-flight rules; give one, such as '10 concurrent'",
            limits.len()
        ))),
    }
}

impl fmt::Display for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut texts: Vec<String> = self.rules.iter().map(Rule::to_string).collect();
        if let Some(limit) = self.in_flight {
            texts.insert(0, format!("{limit} concurrent"));
        }
        f.write_str(&texts.join("; "))?;
        if self.exact {
            f.write_str("; exact")?;
        }
        Ok(())
    }
}

/// Parses one rule such as `20/minute`, `20 per minute`, `5/5min`.
pub fn parse_rule(text: &str) -> Result<Rule> {
    let bad = |why: &str| Error::config(format!("invalid rule '{text}': {why}"));
    let trimmed = text.trim();
    let (limit_text, window_text) = if let Some((l, w)) = trimmed.split_once('/') {
        (l, w)
    } else if let Some((l, w)) = split_per(trimmed) {
        (l, w)
    } else {
        return Err(bad(
            "expected LIMIT/WINDOW, such as '20/minute' or '20 per minute'",
        ));
    };
    let limit = parse_count(limit_text.trim()).map_err(|why| bad(&format!("the limit {why}")))?;
    let window_ms = parse_window(window_text.trim()).map_err(|why| bad(&why))?;
    let limit = u64::try_from(limit).unwrap_or(u64::MAX);
    if limit > MAX_LIMIT {
        return Err(bad(&format!("the limit may be at most {MAX_LIMIT}")));
    }
    Ok(Rule { limit, window_ms })
}

fn split_per(text: &str) -> Option<(&str, &str)> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find(" per ")?;
    Some((&text[..at], &text[at + 5..]))
}

/// A whole number (optionally signed, so `-1` gets a precise message).
fn parse_count(text: &str) -> std::result::Result<i128, String> {
    if text.is_empty() {
        return Err("is missing".into());
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{text}' is not a whole number"));
    }
    if digits.len() > 30 {
        return Ok(i128::MAX); // past every bound: the caller names its own
    }
    let value: i128 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a whole number"))?;
    if value < 1 {
        return Err(format!("'{text}' must be at least 1"));
    }
    Ok(value)
}

fn parse_window(text: &str) -> std::result::Result<u64, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (count_text, unit_text) = text.split_at(split);
    if unit_text.starts_with('.') {
        return Err(format!(
            "the window '{text}' must be a whole number of a unit (write 500ms for half a second)"
        ));
    }
    let count = if count_text.trim().is_empty() {
        1
    } else {
        parse_count(count_text.trim()).map_err(|why| format!("the window count {why}"))?
    };
    let unit = unit_text.trim().to_ascii_lowercase();
    let size = match unit.as_str() {
        "ms" | "msec" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => SECOND_MS,
        "m" | "min" | "mins" | "minute" | "minutes" => MINUTE_MS,
        "h" | "hr" | "hour" | "hours" => HOUR_MS,
        "d" | "day" | "days" => DAY_MS,
        "" => return Err("the window has no unit (use ms, s, m, h or d)".into()),
        other => {
            return Err(format!(
                "unknown time unit '{other}' (use ms, s, m, h or d)"
            ))
        }
    };
    let ms = count.checked_mul(size as i128).unwrap_or(i128::MAX);
    if ms > MAX_WINDOW_MS as i128 {
        return Err("the window is longer than 366 days".into());
    }
    Ok(ms as u64)
}

#[cfg(test)]
mod tests;
