//! Both stores against a tiny reference model of DESIGN.md's semantics, on
//! random rule sets and request sequences: every decision must be identical.

use crate::common;

use proptest::prelude::*;
use ratekeeper_core::{Decision, Limiter, OnError, Rule, RuleSet, Store};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    Check { key: u8, cost: u64 },
    Peek { key: u8, cost: u64 },
    Reset { key: u8 },
}

/// What the model says a decision must show.
#[derive(Debug, PartialEq)]
struct Expected {
    allowed: bool,
    retry_after_ms: Option<u64>,
    remaining: Vec<u64>,
    reset_after_ms: Vec<u64>,
    binding: usize,
}

/// The reference model: every unit ever admitted, per key, counted naively.
#[derive(Default)]
struct Model {
    logs: HashMap<u8, Vec<u64>>,
}

impl Model {
    fn decide(
        &mut self,
        rules: &[(u64, u64)],
        key: u8,
        cost: u64,
        now: u64,
        log: bool,
    ) -> Expected {
        let units = self.logs.entry(key).or_default();
        let inside = |w: u64| -> Vec<u64> {
            let mut v: Vec<u64> = units.iter().copied().filter(|&u| u + w > now).collect();
            v.sort_unstable();
            v
        };
        let windows: Vec<Vec<u64>> = rules.iter().map(|&(_, w)| inside(w)).collect();
        let allowed = rules
            .iter()
            .zip(&windows)
            .all(|(&(l, _), v)| v.len() as u64 + cost <= l);
        let retry_after_ms = if allowed {
            Some(0)
        } else if rules.iter().any(|&(l, _)| cost > l) {
            None
        } else {
            // the least wait after which the check fits: try every candidate instant
            let mut wait = 0;
            for (&(l, w), v) in rules.iter().zip(&windows) {
                let over = v.len() as u64 + cost;
                if over > l {
                    wait = wait.max(v[(over - l - 1) as usize] + w - now);
                }
            }
            Some(wait)
        };
        if allowed && log {
            units.extend(std::iter::repeat_n(now, cost as usize));
        }
        let units = self.logs[&key].clone();
        let mut remaining = Vec::new();
        let mut reset_after_ms = Vec::new();
        for &(l, w) in rules {
            let v: Vec<u64> = units.iter().copied().filter(|&u| u + w > now).collect();
            remaining.push(l.saturating_sub(v.len() as u64));
            reset_after_ms.push(v.iter().min().map_or(0, |&o| o + w - now));
        }
        let min = *remaining.iter().min().unwrap();
        let binding = remaining.iter().position(|&r| r == min).unwrap();
        Expected {
            allowed,
            retry_after_ms,
            remaining,
            reset_after_ms,
            binding,
        }
    }
}

fn shown(d: &Decision) -> Expected {
    Expected {
        allowed: d.allowed(),
        retry_after_ms: d.retry_after_ms,
        remaining: d.rules.iter().map(|r| r.remaining).collect(),
        reset_after_ms: d.rules.iter().map(|r| r.reset_after_ms).collect(),
        binding: d.binding,
    }
}

fn rule_sets() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::btree_map(1u64..400, 1u64..8, 1..4)
        .prop_map(|m| m.into_iter().map(|(w, l)| (l, w)).collect())
}

fn ops() -> impl Strategy<Value = Vec<(u64, Op)>> {
    ops_with(4, 120)
}

/// Large limits and costs with bursts: windows drop dozens of units at once,
/// so the script's scan gives way to its binary search, and the ring wraps.
fn big_rule_sets() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::btree_map(1u64..2000, 1u64..120, 1..4)
        .prop_map(|m| m.into_iter().map(|(w, l)| (l, w)).collect())
}

fn ops_with(max_cost: u64, max_step_ms: u64) -> impl Strategy<Value = Vec<(u64, Op)>> {
    let op = prop_oneof![
        8 => (0u8..2, 1..max_cost).prop_map(|(key, cost)| Op::Check { key, cost }),
        2 => (0u8..2, 1..max_cost).prop_map(|(key, cost)| Op::Peek { key, cost }),
        1 => (0u8..2).prop_map(|key| Op::Reset { key }),
    ];
    prop::collection::vec((0..max_step_ms, op), 1..60)
}

const START_MS: u64 = 1_700_000_000_000;

fn run(
    store: Arc<dyn Store>,
    rules: &[(u64, u64)],
    ops: &[(u64, Op)],
) -> std::result::Result<(), TestCaseError> {
    run_from(
        store,
        rules,
        ops,
        &mut Model::default(),
        &mut START_MS.clone(),
    )
}

fn run_from(
    store: Arc<dyn Store>,
    rules: &[(u64, u64)],
    ops: &[(u64, Op)],
    model: &mut Model,
    now: &mut u64,
) -> std::result::Result<(), TestCaseError> {
    let set = RuleSet::new(
        rules
            .iter()
            .map(|&(l, w)| Rule::new(l, w).unwrap())
            .collect(),
    )
    .unwrap()
    // the model is an exact sliding log: a window past 1,024 ms (whose
    // entries would merge by the 1,024th) keeps every entry
    .keeping_every_entry(rules.iter().any(|&(_, w)| w > 1_024));
    let limiter = Limiter::with_store(set, store, OnError::Raise);
    for (step, (advance, op)) in ops.iter().enumerate() {
        *now += advance;
        let now = *now;
        let at = Some(now as f64 / 1000.0);
        match *op {
            Op::Check { key, cost } => {
                let got = shown(&limiter.check(&[key], cost, at).unwrap());
                prop_assert_eq!(
                    got,
                    model.decide(rules, key, cost, now, true),
                    "step {} {:?}",
                    step,
                    op
                );
            }
            Op::Peek { key, cost } => {
                let got = shown(&limiter.peek(&[key], cost, at).unwrap());
                prop_assert_eq!(
                    got,
                    model.decide(rules, key, cost, now, false),
                    "step {} {:?}",
                    step,
                    op
                );
            }
            Op::Reset { key } => {
                limiter.reset(&[key]).unwrap();
                model.logs.remove(&key);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn memory_store_matches_the_model(rules in rule_sets(), ops in ops()) {
        run(common::memory(), &rules, &ops)?;
    }

    #[test]
    fn redis_store_matches_the_model(rules in rule_sets(), ops in ops()) {
        run(common::redis(), &rules, &ops)?;
    }

    #[test]
    fn both_stores_match_the_model_on_bursts(rules in big_rule_sets(), ops in ops_with(50, 700)) {
        run(common::memory(), &rules, &ops)?;
        run(common::redis(), &rules, &ops)?;
    }

    /// The same keys checked under one rule set, then under another whose
    /// longest window is no longer: each store keeps (and Redis rebuilds its
    /// log to keep) every unit the new rules can still see, so decisions stay
    /// exact across the change.
    #[test]
    fn stores_stay_exact_across_a_rule_change(first in rule_sets(), second in rule_sets(), ops1 in ops(), ops2 in ops()) {
        prop_assume!(second.last().unwrap().1 <= first.last().unwrap().1);
        for store in [common::memory(), common::redis()] {
            let mut model = Model::default();
            let mut now = START_MS;
            run_from(store.clone(), &first, &ops1, &mut model, &mut now)?;
            run_from(store, &second, &ops2, &mut model, &mut now)?;
        }
    }
}
