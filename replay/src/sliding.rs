//! A user's log as one limiter of a replay keeps it: the times of its units
//! in a queue, and per rule the number of the oldest unit still in its
//! window. It admits exactly as the engine's log does (the test below holds
//! it to `ratekeeper_engine::check` on random sequences): a window is
//! `(now - W, now]`, a check is never earlier than the log's newest unit, a
//! denial logs nothing and moves nothing, and after a jump of half the
//! stamps' span every unit is gone. It keeps what a replay needs and no
//! more: no bytes, no expiry, no TTL, one owner.

use ratekeeper_engine::layout::SPAN;
use std::collections::VecDeque;

/// One limiter's rules: limits and windows (ms), in the same order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// Each rule's limit.
    pub limits: Vec<i64>,
    /// Each rule's window, in ms.
    pub windows: Vec<i64>,
}

/// The units a user has logged with one limiter. Per rule, the number of
/// the oldest unit in its window at the newest unit (its start) is kept by
/// the caller, beside the logs of other users (a replay holds them in one
/// array, so that a check reads memory it can find without this).
#[derive(Debug, Clone, Default)]
pub struct Log {
    times: VecDeque<i64>,
    /// The number of `times[0]`.
    first: u64,
}

impl Log {
    /// Asks for the units a check reads first: the newest, and the oldest.
    pub fn prefetch(&self) {
        if let (Some(oldest), Some(newest)) = (self.times.front(), self.times.back()) {
            prefetch(oldest);
            prefetch(newest);
        }
    }

    /// Checks one unit at `now` (ms) against `rules`, whose starts are
    /// `starts` (zeros for a new log): writes each rule's count before it
    /// into `counts`, and logs it when every rule admits it (returns whether
    /// it did).
    pub fn check(
        &mut self,
        starts: &mut [u64],
        now: i64,
        rules: &Rules,
        counts: &mut [i64],
    ) -> bool {
        let mut now = now;
        if let Some(&newest) = self.times.back() {
            now = now.max(newest);
            if now - newest >= SPAN / 2 {
                self.first += self.times.len() as u64;
                self.times.clear();
            }
        }
        let end = self.first + self.times.len() as u64;
        let mut allowed = true;
        for (i, count) in counts.iter_mut().enumerate() {
            let mut p = starts[i].max(self.first);
            while p < end && self.times[(p - self.first) as usize] + rules.windows[i] <= now {
                p += 1;
            }
            *count = (end - p) as i64;
            allowed &= *count < rules.limits[i];
        }
        if allowed {
            // the pointers move on only with a unit logged: a later check may
            // be earlier than this one, though never than its newest unit
            let end = end + 1;
            self.times.push_back(now);
            let mut oldest = end;
            for (i, start) in starts.iter_mut().enumerate() {
                *start = end - counts[i] as u64 - 1;
                oldest = oldest.min(*start);
            }
            while self.first < oldest {
                self.times.pop_front();
                self.first += 1;
            }
        }
        allowed
    }
}

/// Asks for the cache line holding `value` (on x86-64; elsewhere nothing).
#[inline]
pub(super) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of a valid reference's address reads nothing and cannot fault.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ratekeeper_engine::{check, Check, Write};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Any sequence of checks, some out of order, some far apart: the
        /// replay's log admits and counts as the engine's does.
        #[test]
        fn the_replay_log_admits_as_the_engine_does(
            rules in prop::collection::vec((1_i64..6, 1_i64..60), 1..4),
            steps in prop::collection::vec(-20_i64..40, 1..200),
        ) {
            let mut pairs = rules.clone();
            pairs.sort_by_key(|&(_, w)| w);
            pairs.dedup_by_key(|&mut (_, w)| w);
            let engine_rules = ratekeeper_engine::Rules::new(&pairs);
            let ours = Rules {
                limits: pairs.iter().map(|p| p.0).collect(),
                windows: pairs.iter().map(|p| p.1).collect(),
            };
            let mut log = Log::default();
            let mut starts = vec![0; pairs.len()];
            let mut stored: Vec<u8> = Vec::new();
            let mut now = 1_000_000_i64;
            let mut counts = vec![0; pairs.len()];
            for step in steps {
                now = (now + step).max(0);
                let (seen, write) = check(Check {
                    stored: &stored, rules: &engine_rules, cost: 1, now, clock: None, writing: true, exact: false, settle: None,
                }).unwrap();
                let allowed = log.check(&mut starts, now, &ours, &mut counts);
                prop_assert_eq!(allowed, seen.allowed);
                let engine_counts: Vec<i64> = seen.rules.iter().map(|r| r.count).collect();
                prop_assert_eq!(&counts, &engine_counts);
                if write != Write::Nothing {
                    write.apply(&mut stored);
                }
            }
        }
    }

    #[test]
    fn a_jump_of_half_the_span_starts_afresh() {
        let rules = Rules {
            limits: vec![1],
            windows: vec![SPAN - 1],
        };
        let mut log = Log::default();
        let (mut starts, mut counts) = ([0], [0]);
        assert!(log.check(&mut starts, 0, &rules, &mut counts));
        assert!(!log.check(&mut starts, SPAN / 2 - 1, &rules, &mut counts));
        assert!(log.check(&mut starts, SPAN / 2, &rules, &mut counts));
        assert_eq!(counts, [0]);
    }
}
