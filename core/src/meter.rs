//! Meters: a limiter of several named rule sets ("requests": "3500/minute",
//! "tokens": "90000/minute; 2000000/day"), whose check costs each meter
//! its own units and is admitted only when every meter it charges admits,
//! in one atomic step of the store
//! ([`crate::store::LogStore::apply_together`]). Here: the names a meter may
//! have, and one decision made of each meter's.

use crate::decision::{Decision, MeterSpan};
use crate::error::{Error, Result};
use crate::rule::RuleSet;

/// What a limiter limits: one rule set, or several named ones, its meters.
#[derive(Debug, Clone)]
pub enum Limits {
    /// One rule set.
    Rules(RuleSet),
    /// Several named rule sets, in order.
    Meters(Vec<(String, RuleSet)>),
}

impl Limits {
    /// The first meter's rules (what [`crate::Limiter::rules`] answers), or
    /// the error that there is none.
    pub fn first(meters: &[(String, RuleSet)]) -> Result<RuleSet> {
        match meters.first() {
            Some((_, rules)) => Ok(rules.clone()),
            None => Err(Error::config("invalid meters: give at least one")),
        }
    }
}

/// Longest meter name.
pub const MAX_METER_NAME: usize = 32;

/// Checks a meter's name: 1 to 32 ASCII letters, digits, `_` or `-` (it
/// names the meter's log in the store and its items in the headers).
pub fn check_meter_name(name: &str) -> Result<()> {
    let fits = !name.is_empty()
        && name.len() <= MAX_METER_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits {
        return Ok(());
    }
    Err(Error::config(format!(
        "invalid meter name '{}': give 1 to {MAX_METER_NAME} ASCII letters, digits, '_' or '-'",
        name.escape_debug()
    )))
}

/// The scope a meter's log is kept under: the limiter's scope and the
/// meter's name after `@` (which no other limiter's logs of the key use
/// unless its scope says so).
pub fn meter_scope(scope: &str, name: &str) -> String {
    format!("{scope}@{name}")
}

impl Decision {
    /// One decision of each meter's (named, in order): admitted when every
    /// meter admitted, else the outcome of a meter that did not; its rules
    /// are every meter's in turn; `retry_after` is when every meter will
    /// admit (`None` when one never will); the binding rule is the binding
    /// one of the meter that refused with the longest wait, or, when all
    /// admitted, of the meter with the least share of its limit left.
    pub fn metered(parts: Vec<(String, Decision)>) -> Decision {
        let allowed = parts.iter().all(|(_, d)| d.allowed());
        let key = |d: &Decision| d.retry_after_ms.map_or(u64::MAX, |w| w.saturating_add(1));
        let chosen = if allowed {
            (0..parts.len())
                .min_by(|&a, &b| {
                    let (x, y) = (parts[a].1.binding_state(), parts[b].1.binding_state());
                    // x.remaining / x.limit against y's, without division
                    (u128::from(x.remaining) * u128::from(y.limit))
                        .cmp(&(u128::from(y.remaining) * u128::from(x.limit)))
                })
                .unwrap_or(0)
        } else {
            (0..parts.len())
                .filter(|&i| !parts[i].1.allowed())
                .max_by_key(|&i| key(&parts[i].1))
                .unwrap_or(0)
        };
        let retry_after_ms = if allowed {
            Some(0)
        } else {
            parts
                .iter()
                .filter(|(_, d)| !d.allowed())
                .map(|(_, d)| d.retry_after_ms)
                .try_fold(0, |most, wait| wait.map(|w| most.max(w)))
        };
        let warning = parts.iter().find_map(|(_, d)| d.warning.clone());
        let mut rules = Vec::new();
        let mut meters = Vec::with_capacity(parts.len());
        let mut binding = 0;
        let mut outcome = None;
        let mut first = None;
        for (i, (name, decision)) in parts.into_iter().enumerate() {
            let start = rules.len();
            if i == chosen {
                binding = start + decision.binding;
                outcome = Some(decision.outcome);
            }
            rules.extend_from_slice(&decision.rules);
            meters.push(MeterSpan {
                name,
                rules: start..rules.len(),
            });
            first.get_or_insert(decision);
        }
        let first = first.expect("a metered decision has a meter");
        Decision {
            outcome: outcome.unwrap_or(first.outcome),
            retry_after_ms,
            now_ms: first.now_ms,
            rules,
            binding,
            warning,
            cached: false,
            reason: first.reason,
            tier: None,
            overridden: false,
            meters,
            in_flight: None,
        }
    }

    /// The name of the meter whose rules hold `rules[i]` (`None` for a
    /// limiter of one rule set).
    pub fn meter_of(&self, i: usize) -> Option<&str> {
        self.meters
            .iter()
            .find(|m| m.rules.contains(&i))
            .map(|m| m.name.as_str())
    }

    /// The binding rule's meter (`None` for a limiter of one rule set).
    pub fn meter(&self) -> Option<&str> {
        self.meter_of(self.binding)
    }

    /// `rules[i]`'s name in the headers: its window's (`1m`), after its
    /// meter's name for a metered limiter (`tokens-1m`).
    pub fn policy_name(&self, i: usize) -> String {
        let mut name = String::new();
        self.push_policy_name(&mut name, i);
        name
    }

    /// Appends [`Decision::policy_name`] of `rules[i]` to `text`.
    pub(crate) fn push_policy_name(&self, text: &mut String, i: usize) {
        if let Some(meter) = self.meter_of(i) {
            text.push_str(meter);
            text.push('-');
        }
        crate::rule::push_window_name(text, self.rules[i].window_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Observation, RuleObservation};

    fn decided(rules: &str, counts: &[u64], allowed: bool, free_at: Option<u64>) -> Decision {
        let rules = RuleSet::parse(rules).unwrap();
        let obs = Observation {
            now_ms: 1_000,
            allowed,
            rules: counts
                .iter()
                .map(|&count| RuleObservation {
                    count,
                    oldest_ms: Some(500),
                    free_at_ms: if allowed { None } else { free_at },
                })
                .collect(),
            decided_by: Default::default(),
            leases: None,
        };
        Decision::from_observation(&rules, 10, &obs, allowed)
    }

    #[test]
    fn names_are_checked() {
        for good in ["requests", "tokens", "a", "in_flight-2"] {
            check_meter_name(good).unwrap();
        }
        let long = "x".repeat(33);
        for bad in ["", "a b", "a:b", "{t}", "tökens", long.as_str()] {
            let message = check_meter_name(bad).unwrap_err().to_string();
            assert!(message.contains("meter name"), "{message}");
        }
    }

    #[test]
    fn admitted_only_when_every_meter_admits_and_waits_for_the_last() {
        let both = Decision::metered(vec![
            ("requests".into(), decided("100/m", &[5], true, None)),
            (
                "tokens".into(),
                decided("1000/m; 5000/d", &[985, 985], false, Some(31_000)),
            ),
        ]);
        assert!(!both.allowed());
        assert_eq!(both.retry_after_ms, Some(30_000));
        assert_eq!(both.rules.len(), 3);
        assert_eq!(both.meter(), Some("tokens"));
        assert_eq!(both.policy_name(0), "requests-1m");
        assert_eq!(both.policy_name(2), "tokens-1d");
        let headers = both.headers();
        let policy = &headers
            .iter()
            .find(|(n, _)| *n == "RateLimit-Policy")
            .unwrap()
            .1;
        assert_eq!(
            policy,
            "\"requests-1m\";q=100;w=60, \"tokens-1m\";q=1000;w=60, \"tokens-1d\";q=5000;w=86400"
        );
        let admitted = Decision::metered(vec![
            ("requests".into(), decided("100/m", &[80], true, None)),
            ("tokens".into(), decided("1000/m", &[100], true, None)),
        ]);
        assert!(admitted.allowed());
        assert_eq!(admitted.retry_after_ms, Some(0));
        // requests keep 10 of 100 left, tokens 890 of 1000: requests bind
        assert_eq!(admitted.meter(), Some("requests"));
        assert_eq!(admitted.binding_state().remaining, 10);
    }

    #[test]
    fn a_meter_that_never_admits_makes_the_wait_none() {
        let never = Decision::metered(vec![
            (
                "requests".into(),
                decided("100/m", &[0], false, Some(2_000)),
            ),
            ("tokens".into(), decided("5/m", &[0], false, None)),
        ]);
        assert_eq!(never.retry_after_ms, None);
        assert_eq!(never.meter(), Some("tokens"));
    }
}
