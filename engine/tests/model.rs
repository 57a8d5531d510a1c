//! The engine against the plain definition of an exact sliding log: a check
//! at `t` with cost `c` is admitted iff, for every rule (L, W), the units
//! admitted in `(t - W, t]` plus `c` are at most L. Random rules, costs,
//! times (still, forward, backwards), peeks and rule changes, on a buffer.

use proptest::prelude::*;
use ratekeeper_engine::{check, check_in, Check, Rules, Scratch, Write};

#[derive(Debug, Clone)]
struct Step {
    advance: i64,
    cost: i64,
    peek: bool,
    change: Option<Vec<(i64, i64)>>,
}

fn rules_strategy() -> impl Strategy<Value = Vec<(i64, i64)>> {
    prop::collection::vec(
        (
            1i64..30,
            prop::sample::select(vec![1i64, 5, 50, 1_000, 10_000, 60_000]),
        ),
        1..4,
    )
    .prop_map(|mut pairs| {
        pairs.sort_by_key(|p| p.1);
        pairs
    })
}

fn step_strategy() -> impl Strategy<Value = Step> {
    (
        prop_oneof![Just(0i64), 0i64..3, 0i64..200, 0i64..20_000, -500i64..0],
        prop_oneof![4 => Just(1i64), 1 => 1i64..6, 1 => 20i64..40],
        prop::bool::weighted(0.1),
        prop::option::weighted(0.05, rules_strategy()),
    )
        .prop_map(|(advance, cost, peek, change)| Step {
            advance,
            cost,
            peek,
            change,
        })
}

/// The log as the definition sees it, with what the format keeps: the ring
/// holds the newest `cap` units (at least the largest limit), and a log
/// written for other windows (or a smaller ring) is rebuilt from those,
/// keeping the ones inside the new longest window.
#[derive(Debug, Default)]
struct Model {
    units: Vec<i64>,
    cap: i64,
    windows: Vec<i64>,
    exists: bool,
}

impl Model {
    /// The units a check under `rules` sees, and the ring it leaves.
    fn view(&self, rules: &Rules) -> (Vec<i64>, i64) {
        let largest = *rules.limits.iter().max().unwrap();
        if !self.exists {
            return (Vec::new(), largest);
        }
        if self.windows == rules.windows && self.cap >= largest {
            return (self.units.clone(), self.cap);
        }
        let longest = *rules.windows.iter().max().unwrap();
        let newest = self.units.last().copied().unwrap_or(0);
        let from = self.units.len().saturating_sub(self.cap as usize);
        let kept: Vec<i64> = self.units[from..]
            .iter()
            .copied()
            .filter(|&u| u > newest - longest)
            .collect();
        let cap = largest.max(kept.len() as i64);
        (kept, cap)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_engine_is_an_exact_sliding_log(
        first in rules_strategy(),
        steps in prop::collection::vec(step_strategy(), 1..120),
    ) {
        let mut rules = Rules::new(&first);
        let mut log: Vec<u8> = Vec::new();
        let mut model = Model::default();
        let mut now = 1_000_000i64;
        // the same checks made in buffers kept from one to the next
        let mut scratch = Scratch::default();
        for step in steps {
            now += step.advance;
            if let Some(pairs) = &step.change {
                rules = Rules::new(pairs);
            }
            let newest = model.units.last().copied().unwrap_or(i64::MIN);
            let t = now.max(newest);
            let (mut units, cap) = model.view(&rules);
            let fits = rules.limits.iter().zip(&rules.windows).all(|(&l, &w)| {
                units.iter().filter(|&&u| u > t - w).count() as i64 + step.cost <= l
            });
            let asked = Check {
                stored: &log,
                rules: &rules,
                cost: step.cost,
                now,
                clock: None,
                writing: !step.peek,
            };
            let (seen, write) = check(asked).unwrap();
            let (seen_in, write_in) = check_in(asked, &mut scratch).unwrap();
            prop_assert_eq!(&seen_in, &seen);
            prop_assert_eq!(&write_in, &write);
            scratch.keep(seen_in, write_in);
            prop_assert_eq!(seen.now, t);
            prop_assert_eq!(seen.allowed, fits);
            for (i, rule) in seen.rules.iter().enumerate() {
                let w = rules.windows[i];
                let inside: Vec<i64> = units.iter().copied().filter(|&u| u > t - w).collect();
                prop_assert_eq!(rule.count, inside.len() as i64);
                prop_assert_eq!(rule.oldest, inside.first().copied().unwrap_or(-1));
                // when a denied check would fit: once its oldest `over` units have left
                let over = inside.len() as i64 + step.cost - rules.limits[i];
                let free_at = if !fits && over > 0 && step.cost <= rules.limits[i] {
                    inside[over as usize - 1] + w
                } else {
                    -1
                };
                prop_assert_eq!(rule.free_at, free_at);
            }
            if step.peek {
                prop_assert_eq!(&write, &Write::Nothing);
            }
            let wrote = write != Write::Nothing;
            write.apply(&mut log);
            if wrote {
                if fits {
                    units.extend(std::iter::repeat_n(t, step.cost as usize));
                }
                model = Model {
                    units,
                    cap,
                    windows: rules.windows.clone(),
                    exists: true,
                };
            }
        }
    }
}

#[test]
fn a_full_log_costs_five_bytes_a_unit() {
    let rules = Rules::new(&[(1_000, 60_000)]);
    let mut log = Vec::new();
    for i in 0..1_000 {
        let (seen, write) = check(Check {
            stored: &log,
            rules: &rules,
            cost: 1,
            now: 1_000 + i,
            clock: None,
            writing: true,
        })
        .unwrap();
        assert!(seen.allowed);
        write.apply(&mut log);
    }
    assert_eq!(log.len(), 29 + 15 + 1_000 * 5);
}

/// A cost from the extremes: at most the limit passes and logs that many
/// units; anything above it (up to `i64::MAX`) is a denial that writes
/// nothing and can never pass; a cost under 1 never reaches the engine but
/// is taken as 1, never as a credit.
fn extreme_cost() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        Just(1),
        Just(-1),
        Just(i64::MIN),
        Just(1 << 40),
        Just((1 << 40) - 1),
        Just(i64::MAX),
        Just(1 << 62),
        Just(ratekeeper_engine::command::MAX_LIMIT),
        Just(ratekeeper_engine::command::MAX_LIMIT + 1),
        1i64..12,
    ]
}

proptest! {
    #[test]
    fn a_cost_at_the_extremes_is_counted_or_denied_never_wrapped(
        limit in prop_oneof![Just(1i64), 1i64..10, Just(ratekeeper_engine::command::MAX_LIMIT)],
        already in 0i64..4,
        cost in extreme_cost(),
        writing in any::<bool>(),
    ) {
        let rules = Rules::new(&[(limit, 60_000)]);
        let mut log = Vec::new();
        let mut logged = 0;
        for i in 0..already.min(limit) {
            let (_, write) = check(Check { stored: &log, rules: &rules, cost: 1, now: 1_000 + i, clock: None, writing: true }).unwrap();
            write.apply(&mut log);
            logged += 1;
        }
        let before = log.clone();
        let (seen, write) = check(Check { stored: &log, rules: &rules, cost, now: 2_000, clock: None, writing }).unwrap();
        let taken = cost.max(1);
        prop_assert_eq!(seen.rules[0].count, logged);
        prop_assert_eq!(seen.allowed, logged.saturating_add(taken) <= limit);
        if taken > limit {
            prop_assert_eq!(seen.rules[0].free_at, -1);
        }
        write.apply(&mut log);
        if !seen.allowed || !writing {
            prop_assert_eq!(&log, &before);
        } else {
            let (after, _) = check(Check { stored: &log, rules: &rules, cost: 1, now: 2_000, clock: None, writing: false }).unwrap();
            prop_assert_eq!(after.rules[0].count, logged + taken);
        }
    }
}
