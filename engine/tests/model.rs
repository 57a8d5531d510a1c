//! The engine against the plain definition of an exact sliding log: a check
//! at `t` with cost `c` is admitted iff, for every rule (L, W), the units
//! admitted in `(t - W, t]` plus `c` are at most L. Random rules, weighted
//! costs, times (still, forward, backwards), peeks and rule changes, on a
//! buffer.
//!
//! Where nothing merges (every entry kept, or every window at most 1,024 ms,
//! whose step is a millisecond) the engine IS that log. Where entries merge,
//! each rule's count lies between the exact count over its window and the
//! exact count over its window widened by the steps of its band and every
//! shorter one: a window never holds more than its limit, and a denial is
//! at most those steps too cautious.

use proptest::prelude::*;
use ratekeeper_engine::layout::{header_len, most_entries, step, ENTRY};
use ratekeeper_engine::{check, check_in, Check, Rules, Scratch, Seen, Write};

#[derive(Debug, Clone)]
struct Step {
    advance: i64,
    cost: i64,
    peek: bool,
    change: Option<Vec<(i64, i64)>>,
}

fn rules_from(windows: Vec<i64>) -> impl Strategy<Value = Vec<(i64, i64)>> {
    prop::collection::vec(
        (
            prop_oneof![3 => 1i64..30, 1 => 30i64..400],
            prop::sample::select(windows),
        ),
        1..4,
    )
    .prop_map(|mut pairs| {
        pairs.sort_by_key(|p| p.1);
        pairs.dedup_by_key(|p| p.1);
        pairs
    })
}

const FINE: [i64; 6] = [1, 5, 50, 200, 1_000, 1_024];
const ANY: [i64; 8] = [1, 50, 1_000, 5_000, 60_000, 90_000, 3_600_000, 86_400_000];

fn steps(changes: f64) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            prop_oneof![
                Just(0i64),
                0i64..3,
                0i64..200,
                0i64..20_000,
                0i64..4_000_000,
                -500i64..0
            ],
            prop_oneof![4 => Just(1i64), 1 => 1i64..6, 1 => 20i64..200],
            prop::bool::weighted(0.1),
            prop::option::weighted(changes.max(1e-9), rules_from(ANY.to_vec()))
                .prop_map(move |c| c.filter(|_| changes > 0.0)),
        )
            .prop_map(|(advance, cost, peek, change)| Step {
                advance,
                cost,
                peek,
                change,
            }),
        1..150,
    )
}

/// Every admitted check, as (time, cost).
#[derive(Debug, Default)]
struct Admitted(Vec<(i64, i64)>);

impl Admitted {
    /// Units admitted in `(t - w, t]`.
    fn count(&self, t: i64, w: i64) -> i64 {
        self.0
            .iter()
            .filter(|&&(at, _)| at > t - w && at <= t)
            .map(|e| e.1)
            .sum()
    }

    /// The oldest admitted time in `(t - w, t]` (-1: none).
    fn oldest(&self, t: i64, w: i64) -> i64 {
        self.0
            .iter()
            .find(|&&(at, _)| at > t - w && at <= t)
            .map_or(-1, |e| e.0)
    }

    /// When `over` units of the window have left it (their oldest first).
    fn free_at(&self, t: i64, w: i64, over: i64) -> i64 {
        let mut left = 0;
        for &(at, cost) in self.0.iter().filter(|&&(at, _)| at > t - w && at <= t) {
            left += cost;
            if left >= over {
                return at + w;
            }
        }
        unreachable!("over is at most the count")
    }

    fn newest(&self) -> i64 {
        self.0.last().map_or(i64::MIN, |e| e.0)
    }
}

/// One key's log checked step by step, beside every check it admitted.
struct Trace {
    log: Vec<u8>,
    admitted: Admitted,
    now: i64,
    scratch: Scratch,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            log: Vec::new(),
            admitted: Admitted::default(),
            now: 1_000_000,
            scratch: Scratch::default(),
        }
    }

    /// The step's check under `rules` through the engine, both with fresh
    /// buffers and with kept ones (which must agree), its write applied:
    /// its time (never before the newest admitted check) and what it saw.
    fn check(
        &mut self,
        step: &Step,
        rules: &Rules,
        exact: bool,
    ) -> Result<(i64, Seen), TestCaseError> {
        self.now += step.advance;
        let t = self.now.max(self.admitted.newest());
        let asked = Check {
            stored: &self.log,
            rules,
            cost: step.cost,
            now: self.now,
            clock: None,
            writing: !step.peek,
            exact,
            settle: None,
        };
        let (seen, write) = check(asked).unwrap();
        let (seen_in, write_in) = check_in(asked, &mut self.scratch).unwrap();
        prop_assert_eq!(&seen_in, &seen);
        prop_assert_eq!(&write_in, &write);
        self.scratch.keep(seen_in, write_in);
        if step.peek {
            prop_assert_eq!(&write, &Write::Nothing);
        }
        write.apply(&mut self.log);
        Ok((t, seen))
    }

    /// Records the step's check at `t` when it was admitted and logged.
    fn admit(&mut self, t: i64, seen: &Seen, step: &Step) {
        if seen.allowed && !step.peek {
            self.admitted.0.push((t, step.cost));
        }
    }
}

/// The bytes a log of these rules holds at most, whatever the traffic: a
/// band's most entries, or its limit (an entry holds a unit at least),
/// whichever is fewer, its ring at most twice that.
fn bound(rules: &Rules, exact: bool) -> usize {
    let mut shorter = 0;
    let mut entries = 0;
    for (&limit, &window) in rules.limits.iter().zip(&rules.windows) {
        let most = most_entries(window - shorter, step(window, exact));
        entries += most.min(2 * limit.max(2)) as usize;
        shorter = window;
    }
    header_len(rules.len()) + entries * ENTRY
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn where_nothing_merges_the_engine_is_an_exact_sliding_log(
        exact in any::<bool>(),
        fine in rules_from(FINE.to_vec()),
        any_rules in rules_from(ANY.to_vec()),
        steps in steps(0.0),
    ) {
        // every entry kept, or windows whose step is a millisecond
        let rules = Rules::new(if exact { &any_rules } else { &fine });
        let mut trace = Trace::new();
        for step in steps {
            let (t, seen) = trace.check(&step, &rules, exact)?;
            let admitted = &trace.admitted;
            prop_assert_eq!(seen.now, t);
            let fits = rules.limits.iter().zip(&rules.windows)
                .all(|(&l, &w)| admitted.count(t, w) + step.cost <= l);
            prop_assert_eq!(seen.allowed, fits);
            for (i, rule) in seen.rules.iter().enumerate() {
                let (l, w) = (rules.limits[i], rules.windows[i]);
                let count = admitted.count(t, w);
                prop_assert_eq!(rule.count, count);
                prop_assert_eq!(rule.oldest, admitted.oldest(t, w));
                let over = count + step.cost - l;
                let free_at = if !fits && over > 0 && step.cost <= l {
                    admitted.free_at(t, w, over)
                } else {
                    -1
                };
                prop_assert_eq!(rule.free_at, free_at);
            }
            trace.admit(t, &seen, &step);
            prop_assert!(trace.log.len() <= bound(&rules, exact), "{} bytes", trace.log.len());
        }
    }

    #[test]
    fn merged_entries_leave_a_window_late_never_early(
        steps in steps(0.0),
        first in rules_from(ANY.to_vec()),
    ) {
        let rules = Rules::new(&first);
        // how late a unit may leave rule i's window: the steps of its band
        // and every shorter one (each band merges at its own step)
        let late: Vec<i64> = rules.windows.iter()
            .scan(0, |sum, &w| { *sum += step(w, false); Some(*sum) })
            .collect();
        let mut trace = Trace::new();
        for step in steps {
            let (t, seen) = trace.check(&step, &rules, false)?;
            let admitted = &trace.admitted;
            for (i, rule) in seen.rules.iter().enumerate() {
                let w = rules.windows[i];
                prop_assert!(admitted.count(t, w) <= rule.count,
                    "rule {i}: {} counted of {} admitted", rule.count, admitted.count(t, w));
                prop_assert!(rule.count <= admitted.count(t, w + late[i]),
                    "rule {i}: {} counted, {} within {} ms late", rule.count, admitted.count(t, w + late[i]), late[i]);
                if rule.free_at != -1 {
                    prop_assert!(rule.free_at > t);
                }
            }
            trace.admit(t, &seen, &step);
            // never more than a limit in any window
            for (&l, &w) in rules.limits.iter().zip(&rules.windows) {
                prop_assert!(trace.admitted.count(t, w) <= l);
            }
            prop_assert!(trace.log.len() <= bound(&rules, false), "{} bytes", trace.log.len());
        }
    }

    #[test]
    fn a_log_rebuilt_for_other_rules_never_forgets_a_unit_still_inside(
        first in rules_from(ANY.to_vec()),
        steps in steps(0.08),
        flips in prop::collection::vec(prop::bool::weighted(0.05), 150),
    ) {
        let mut rules = Rules::new(&first);
        let mut exact = false;
        let mut trace = Trace::new();
        // the windows the stored log was written for, and the time before
        // which it need not hold a unit (it holds what its longest window held)
        let mut stored_windows = rules.windows.clone();
        let mut horizon = i64::MIN;
        for (step, flip) in steps.into_iter().zip(flips) {
            if let Some(pairs) = &step.change {
                rules = Rules::new(pairs);
            }
            exact ^= flip;
            let mut seen_from = horizon;
            if rules.windows != stored_windows && !trace.log.is_empty() {
                seen_from = horizon.max(trace.admitted.newest() - stored_windows.last().unwrap());
            }
            let before = trace.log.clone();
            let (t, seen) = trace.check(&step, &rules, exact)?;
            for (i, rule) in seen.rules.iter().enumerate() {
                let w = rules.windows[i];
                let held = trace.admitted.count(t, w.min(t.saturating_sub(seen_from)));
                prop_assert!(held <= rule.count, "rule {}: {} counted of {} held", i, rule.count, held);
            }
            if trace.log != before {
                horizon = seen_from;
                stored_windows = rules.windows.clone();
            }
            trace.admit(t, &seen, &step);
        }
    }
}

/// Checks `calls` times at `spacing` ms from `start`, each of `cost`;
/// returns the log and how many were admitted.
fn traffic(rules: &Rules, calls: i64, spacing: i64, cost: i64) -> (Vec<u8>, i64) {
    let mut log = Vec::new();
    let mut admitted = 0;
    for i in 0..calls {
        let (seen, write) = check(Check {
            stored: &log,
            rules,
            cost,
            now: 1_700_000_000_000 + i * spacing,
            clock: None,
            writing: true,
            exact: false,
            settle: None,
        })
        .unwrap();
        admitted += i64::from(seen.allowed);
        write.apply(&mut log);
    }
    (log, admitted)
}

#[test]
fn a_weighted_check_logs_one_entry_whatever_its_cost() {
    // "2000000/minute", 100 checks of 20,000 a second apart: all admitted,
    // 100 entries of 10 bytes in a ring of 128
    let rules = Rules::new(&[(2_000_000, 60_000)]);
    let (log, admitted) = traffic(&rules, 100, 500, 20_000);
    assert_eq!(admitted, 100);
    assert_eq!(log.len(), header_len(1) + 128 * ENTRY);
    assert!(log.len() <= 2_000);
}

#[test]
fn a_busy_key_holds_about_1024_entries_per_rule() {
    // "10/second; 1000/minute; 100000/day" called 100 times a second: each
    // band holds at most its most entries, whatever the calls
    let rules = Rules::new(&[(10, 1_000), (1_000, 60_000), (100_000, 86_400_000)]);
    let (log, admitted) = traffic(&rules, 200_000, 10, 1);
    assert!(admitted > 1_000, "{admitted}");
    assert!(log.len() <= bound(&rules, false));
    assert!(log.len() <= 40_000, "{} bytes", log.len());
}

#[test]
fn a_log_of_the_previous_format_is_read_and_rewritten() {
    // version 4, one rule of 60 s, 3 units at 1000, 1000 and 1500 ms
    let mut v4 = vec![4u8, 1];
    v4.extend_from_slice(&[0, 0, 0, 0, 3]); // N
    v4.extend_from_slice(&[0, 0, 0, 0, 5]); // capacity
    v4.extend_from_slice(&[0, 0, 0, 0, 5]); // slots
    v4.extend_from_slice(&[0, 0, 0, 0, 0x05, 0xdc]); // newest: 1500
    v4.extend_from_slice(&[0; 6]); // TTL unknown
    v4.extend_from_slice(&[0, 0, 0, 0xea, 0x60]); // window 60,000
    v4.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0x03, 0xe8]); // p 0, at 1000
    for t in [1000u16, 1000, 1500, 0, 0] {
        v4.extend_from_slice(&[0, 0, 0, (t >> 8) as u8, t as u8]);
    }
    let rules = Rules::new(&[(5, 60_000)]);
    let mut log = v4.clone();
    let (seen, write) = check(Check {
        stored: &log,
        rules: &rules,
        cost: 2,
        now: 2_000,
        clock: None,
        writing: true,
        exact: false,
        settle: None,
    })
    .unwrap();
    assert!(seen.allowed);
    assert_eq!(seen.rules[0].count, 3);
    assert_eq!(seen.rules[0].oldest, 1_000);
    assert!(matches!(write, Write::Rewrite { .. }));
    write.apply(&mut log);
    let (seen, _) = check(Check {
        stored: &log,
        rules: &rules,
        cost: 1,
        now: 2_000,
        clock: None,
        writing: true,
        exact: false,
        settle: None,
    })
    .unwrap();
    assert!(!seen.allowed);
    assert_eq!(seen.rules[0].count, 5);
    assert_eq!(seen.rules[0].free_at, 61_000);
}

fn at<'a>(stored: &'a [u8], rules: &'a Rules, cost: i64, now: i64, writing: bool) -> Check<'a> {
    Check {
        stored,
        rules,
        cost,
        now,
        clock: None,
        writing,
        exact: false,
        settle: None,
    }
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
            let (_, write) = check(at(&log, &rules, 1, 1_000 + i, true)).unwrap();
            write.apply(&mut log);
            logged += 1;
        }
        let before = log.clone();
        let (seen, write) = check(at(&log, &rules, cost, 2_000, writing)).unwrap();
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
            let (after, _) = check(at(&log, &rules, 1, 2_000, false)).unwrap();
            prop_assert_eq!(after.rules[0].count, logged + taken);
        }
    }
}

/// One step of a trace of reservations: a check (each admitted one a
/// reservation of its cost), or a settle of an earlier reservation at
/// `percent` of its estimate.
#[derive(Debug, Clone)]
enum Op {
    Check {
        advance: i64,
        cost: i64,
    },
    Settle {
        advance: i64,
        pick: prop::sample::Index,
        percent: i64,
    },
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let advance = prop_oneof![
        Just(0i64),
        0i64..200,
        0i64..20_000,
        0i64..4_000_000,
        -500i64..0
    ];
    prop::collection::vec(
        prop_oneof![
            3 => (advance.clone(), prop_oneof![1i64..4, 10i64..200])
                .prop_map(|(advance, cost)| Op::Check { advance, cost }),
            2 => (advance, any::<prop::sample::Index>(), prop_oneof![Just(0i64), 0i64..100, 100i64..300])
                .prop_map(|(advance, pick, percent)| Op::Settle { advance, pick, percent }),
        ],
        1..120,
    )
}

/// Reservations beside the plain sliding log they should leave: each
/// admitted check's units, less what its settle gave back, plus what
/// settles charged over their estimates.
#[derive(Default)]
struct Reserved {
    /// (time, units) of every entry the plain log holds.
    entries: Vec<(i64, i64)>,
    /// (index into `entries`, estimate) of each reservation not yet settled.
    open: Vec<(usize, i64)>,
}

impl Reserved {
    fn count(&self, t: i64, w: i64) -> i64 {
        self.entries
            .iter()
            .filter(|&&(at, _)| at > t - w && at <= t)
            .map(|e| e.1)
            .sum()
    }

    fn newest(&self) -> i64 {
        self.entries.iter().map(|e| e.0).max().unwrap_or(i64::MIN)
    }

    /// The time of the oldest entry with units in `(t - w, t]` (-1: none).
    fn oldest(&self, t: i64, w: i64) -> i64 {
        self.entries
            .iter()
            .filter(|&&(at, units)| at > t - w && at <= t && units > 0)
            .map(|e| e.0)
            .min()
            .unwrap_or(-1)
    }
}

/// Runs `ops` under `rules` on a fresh log: what each step saw, beside the
/// plain log after the step before it (`checks` and `settles` hold them:
/// (time, seen, plain counts per rule widened by `late`)).
fn reservations(ops: &[Op], rules: &Rules, exact: bool, late: &[i64]) -> Result<(), TestCaseError> {
    let longest = *rules.windows.last().unwrap();
    let mut log = Vec::new();
    let mut plain = Reserved::default();
    let mut now = 1_000_000i64;
    for op in ops {
        let (advance, cost, settle, estimate) = match op {
            Op::Check { advance, cost } => (*advance, *cost, None, 0),
            Op::Settle {
                advance,
                pick,
                percent,
            } => {
                if plain.open.is_empty() {
                    continue;
                }
                let (entry, estimate) = plain.open.swap_remove(pick.index(plain.open.len()));
                let actual = estimate * percent / 100;
                let at = plain.entries[entry].0;
                let settle = ratekeeper_engine::log::Settle {
                    at,
                    refund: (estimate - actual).max(0),
                };
                // a late settle (its reservation left the longest window) gives nothing back
                if at > plain.newest() - longest {
                    plain.entries[entry].1 -= settle.refund;
                }
                (
                    *advance,
                    (actual - estimate).max(0),
                    Some((settle, entry)),
                    estimate,
                )
            }
        };
        now += advance;
        let t = now.max(plain.newest());
        let (seen, write) = check(Check {
            stored: &log,
            rules,
            cost,
            now,
            clock: None,
            writing: true,
            exact,
            settle: settle.map(|s| s.0),
        })
        .unwrap();
        write.apply(&mut log);
        prop_assert_eq!(seen.now, t);
        for (i, rule) in seen.rules.iter().enumerate() {
            let w = rules.windows[i];
            prop_assert!(
                plain.count(t, w) <= rule.count,
                "rule {i}: {} counted of {} held (settle {settle:?}, estimate {estimate})",
                rule.count,
                plain.count(t, w)
            );
            prop_assert!(
                rule.count <= plain.count(t, w + late[i]),
                "rule {i}: {} counted, {} within {} ms late",
                rule.count,
                plain.count(t, w + late[i]),
                late[i]
            );
            if late.iter().all(|&l| l == 0) {
                // (an entry a refund left with no units is taken out)
                prop_assert_eq!(
                    rule.oldest,
                    plain.oldest(t, w),
                    "rule {}: the oldest unit",
                    i
                );
            }
        }
        match settle {
            Some(_) => {
                prop_assert!(seen.allowed, "a settle is never refused");
                if cost > 0 {
                    plain.entries.push((t, cost));
                }
            }
            None => {
                let fits = rules
                    .limits
                    .iter()
                    .zip(&rules.windows)
                    .all(|(&l, &w)| plain.count(t, w) + cost <= l);
                if late.iter().all(|&l| l == 0) {
                    prop_assert_eq!(seen.allowed, fits);
                } else if seen.allowed {
                    prop_assert!(fits, "admitted over a limit");
                }
                if seen.allowed {
                    plain.entries.push((t, cost));
                    plain.open.push((plain.entries.len() - 1, cost));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_settle_gives_back_what_a_reservation_did_not_use_and_charges_its_overrun(
        exact in any::<bool>(),
        fine in rules_from(FINE.to_vec()),
        any_rules in rules_from(ANY.to_vec()),
        merging in any::<bool>(),
        ops in ops(),
    ) {
        // where nothing merges the log is the plain one exactly; where
        // entries merge, each count lies between the plain one and the plain
        // one widened by the steps of its band and every shorter one
        let (rules, exact) = match (merging, exact) {
            (true, _) => (Rules::new(&any_rules), false),
            (false, true) => (Rules::new(&any_rules), true),
            (false, false) => (Rules::new(&fine), false),
        };
        let late: Vec<i64> = if merging {
            rules.windows.iter()
                .scan(0, |sum, &w| { *sum += step(w, false); Some(*sum) })
                .collect()
        } else {
            vec![0; rules.len()]
        };
        reservations(&ops, &rules, exact, &late)?;
    }
}

#[test]
fn a_settles_overrun_past_every_limit_fills_the_log_and_never_wraps() {
    use ratekeeper_engine::command::{MAX_COST, MAX_LIMIT};
    use ratekeeper_engine::log::Settle;
    let rules = Rules::new(&[(10, 1_000), (1_000, 60_000)]);
    let mut log = Vec::new();
    let (seen, write) = check(at(&log, &rules, 3, 5_000, true)).unwrap();
    assert!(seen.allowed);
    write.apply(&mut log);
    for round in 0..3 {
        let (seen, write) = check(Check {
            settle: Some(Settle {
                at: 5_000,
                refund: 0,
            }),
            ..at(&log, &rules, MAX_COST, 5_001 + round, true)
        })
        .unwrap();
        assert!(seen.allowed, "a settle is never refused");
        write.apply(&mut log);
        let (seen, _) = check(at(&log, &rules, 1, 5_010, false)).unwrap();
        assert!(
            !seen.allowed,
            "round {round}: the log is full, never wrapped"
        );
        assert_eq!(seen.rules[1].count, MAX_LIMIT, "round {round}");
    }
}
