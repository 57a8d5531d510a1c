//! The counts of a replay: per user its logs (the measuring one, whose
//! limits no user reaches, then one per candidate rule set), its current
//! period and which candidates denied it then and ever, and its peak usage
//! per window; per candidate the requests, users and user-periods it
//! denied. What a user holds is kept in flat arrays indexed by its number,
//! so that one request's reads can all be started at once.

use super::python::floor_div;
use super::sliding::{prefetch, Log, Rules};
use hashbrown::{DefaultHashBuilder, HashTable};
use ratekeeper_core::rule::RuleSet;
use std::hash::BuildHasher;

/// The core's largest limit: the measuring log never denies below it, and
/// no suggested limit goes above it.
pub const PEAK_LIMIT: i64 = ratekeeper_core::rule::MAX_LIMIT as i64;

/// The users' keys, each numbered on first sight: the keys side by side in
/// one string, and a table of their numbers by hash. A key is compared
/// where it lies among the others (a few hundred kB for 20,000 addresses,
/// which the caches hold), never behind an allocation of its own.
#[derive(Default)]
struct Keys {
    table: HashTable<u32>,
    text: String,
    /// Where each key ends in `text` (key `n` starts where key `n - 1` ends).
    ends: Vec<usize>,
    hasher: DefaultHashBuilder,
}

/// Key `id` of the keys in `text` that end at `ends`.
fn key_in<'t>(text: &'t str, ends: &[usize], id: u32) -> &'t str {
    let id = id as usize;
    let start = if id == 0 { 0 } else { ends[id - 1] };
    &text[start..ends[id]]
}

impl Keys {
    /// The number of `key`, and whether it was seen before.
    fn number(&mut self, key: &str) -> (u32, bool) {
        let hash = self.hasher.hash_one(key);
        if let Some(&id) = self
            .table
            .find(hash, |&id| key_in(&self.text, &self.ends, id) == key)
        {
            return (id, true);
        }
        let id = self.ends.len() as u32;
        self.text.push_str(key);
        self.ends.push(self.text.len());
        let Keys {
            table,
            text,
            ends,
            hasher,
        } = self;
        table.insert_unique(hash, id, |&id| hasher.hash_one(key_in(text, ends, id)));
        (id, false)
    }
}

/// What is counted of one user.
#[derive(Clone, Copy)]
struct User {
    /// Its current period (the newest seen; an older line counts in it);
    /// `None` until its first request is replayed.
    period: Option<i64>,
    /// The candidates (bits) that denied it in its current period, and ever.
    period_denied: u64,
    denied: u64,
}

/// One candidate rule set and the denials it made.
pub struct Candidate {
    /// The rule set.
    pub rules: RuleSet,
    /// Requests it denied.
    pub denied: u64,
    /// Users it denied at least once.
    pub users_affected: u64,
    /// User-periods in which it denied the user at least once.
    pub user_periods_affected: u64,
}

/// The replay's counts.
pub struct Tally {
    /// The candidates, in the order given.
    pub candidates: Vec<Candidate>,
    /// Every distinct window of the candidates (ms), shortest first.
    pub windows_ms: Vec<u64>,
    /// The rules of each log of a user: the measuring log's, then each candidate's.
    rules: Vec<Rules>,
    /// The most rules of a log: each log's starts take this many places.
    stride: usize,
    period_seconds: f64,
    ids: Keys,
    users: Vec<User>,
    /// Per user, its logs (`rules.len()` each), their starts, and its peaks.
    logs: Vec<Log>,
    starts: Vec<u64>,
    peaks: Vec<u64>,
    /// Requests replayed.
    pub requests: u64,
    /// Lines without a key.
    pub unkeyed: u64,
    /// User-periods seen.
    pub user_periods: u64,
    /// The earliest replayed time (epoch seconds).
    pub first_time: f64,
    /// The latest replayed time (epoch seconds).
    pub last_time: f64,
    counts: Vec<i64>,
}

fn rules_of(set: &RuleSet) -> Rules {
    Rules {
        limits: set.rules().iter().map(|r| r.limit as i64).collect(),
        windows: set.rules().iter().map(|r| r.window_ms as i64).collect(),
    }
}

impl Tally {
    /// Counts for `candidates` (at most 64), user-periods `period_seconds` long.
    pub fn new(candidates: Vec<RuleSet>, period_seconds: u64) -> Tally {
        let mut windows_ms: Vec<u64> = candidates
            .iter()
            .flat_map(|set| set.rules().iter().map(|r| r.window_ms))
            .collect();
        windows_ms.sort_unstable();
        windows_ms.dedup();
        let measure = Rules {
            limits: vec![PEAK_LIMIT; windows_ms.len()],
            windows: windows_ms.iter().map(|&w| w as i64).collect(),
        };
        let rules: Vec<Rules> = [measure]
            .into_iter()
            .chain(candidates.iter().map(rules_of))
            .collect();
        let stride = rules.iter().map(|r| r.limits.len()).max().unwrap_or(0);
        Tally {
            windows_ms,
            rules,
            stride,
            candidates: candidates
                .into_iter()
                .map(|rules| Candidate {
                    rules,
                    denied: 0,
                    users_affected: 0,
                    user_periods_affected: 0,
                })
                .collect(),
            period_seconds: period_seconds as f64,
            ids: Keys::default(),
            users: Vec::new(),
            logs: Vec::new(),
            starts: Vec::new(),
            peaks: Vec::new(),
            requests: 0,
            unkeyed: 0,
            user_periods: 0,
            first_time: f64::INFINITY,
            last_time: f64::NEG_INFINITY,
            counts: vec![0; stride],
        }
    }

    /// The number of the user of `key`, made on first sight.
    pub fn user_id(&mut self, key: &str) -> u32 {
        let (id, seen) = self.ids.number(key);
        if seen {
            return id;
        }
        self.users.push(User {
            period: None,
            period_denied: 0,
            denied: 0,
        });
        let logs = self.rules.len();
        self.logs.resize_with(self.logs.len() + logs, Log::default);
        self.starts
            .resize(self.starts.len() + logs * self.stride, 0);
        self.peaks
            .resize(self.peaks.len() + self.windows_ms.len(), 0);
        id
    }

    /// Starts reading what replaying a request of user `id` reads (its
    /// counts, its logs' ends), so that the reads are done by the time the
    /// request leaves the reorder buffer: a day's log of 20,000 users is
    /// larger than the caches, and a replay otherwise waits on memory for
    /// most of its time.
    pub fn prefetch(&self, id: u32) {
        let id = id as usize;
        let (logs, stride, windows) = (self.rules.len(), self.stride, self.windows_ms.len());
        // (a replay of no candidate keeps no starts and no peaks)
        let firsts = [
            self.starts.get(id * logs * stride),
            self.peaks.get(id * windows),
        ];
        firsts.into_iter().flatten().for_each(prefetch);
        self.users.get(id).into_iter().for_each(prefetch);
        for log in self.logs.iter().skip(id * logs).take(logs) {
            log.prefetch();
        }
    }

    /// Replays one request of user `id` (`None`: a line without a key) at
    /// `at` (epoch seconds, checked from 1970 up to 2200).
    pub fn feed(&mut self, id: Option<u32>, at: f64) {
        let Some(id) = id else {
            self.unkeyed += 1;
            return;
        };
        let now = (at * 1000.0).round() as i64;
        let id = id as usize;
        let (logs, stride, windows) = (self.rules.len(), self.stride, self.windows_ms.len());
        let user_logs = &mut self.logs[id * logs..(id + 1) * logs];
        let user_starts = &mut self.starts[id * logs * stride..(id + 1) * logs * stride];
        let peaks = &mut self.peaks[id * windows..(id + 1) * windows];
        let user = &mut self.users[id];

        let measure = &self.rules[0];
        let counts = &mut self.counts[..windows];
        let admitted = user_logs[0].check(&mut user_starts[..windows], now, measure, counts);
        let period = floor_div(at, self.period_seconds) as i64;
        match user.period {
            None => {
                user.period = Some(period);
                self.user_periods += 1;
            }
            Some(current) if period > current => {
                user.period = Some(period);
                user.period_denied = 0;
                self.user_periods += 1;
            }
            Some(_) => {}
        }
        for (peak, &count) in peaks.iter_mut().zip(counts.iter()) {
            let used = (count + i64::from(admitted)).min(PEAK_LIMIT) as u64;
            *peak = (*peak).max(used);
        }
        for (i, candidate) in self.candidates.iter_mut().enumerate() {
            let rules = &self.rules[i + 1];
            let n = rules.limits.len();
            let starts = &mut user_starts[(i + 1) * stride..(i + 1) * stride + n];
            if user_logs[i + 1].check(starts, now, rules, &mut self.counts[..n]) {
                continue;
            }
            let bit = 1 << i;
            candidate.denied += 1;
            if user.denied & bit == 0 {
                user.denied |= bit;
                candidate.users_affected += 1;
            }
            if user.period_denied & bit == 0 {
                user.period_denied |= bit;
                candidate.user_periods_affected += 1;
            }
        }
        self.requests += 1;
        self.first_time = self.first_time.min(at);
        self.last_time = self.last_time.max(at);
    }

    /// The users seen (each line held is replayed before the counts are
    /// read, so every one has been replayed).
    pub fn users(&self) -> u64 {
        self.users.len() as u64
    }

    /// Per measured window, every user's peak, ascending.
    pub fn sorted_peaks(&self) -> Vec<Vec<u64>> {
        let windows = self.windows_ms.len();
        (0..windows)
            .map(|w| {
                let mut column: Vec<u64> = self
                    .peaks
                    .iter()
                    .skip(w)
                    .step_by(windows)
                    .copied()
                    .collect();
                column.sort_unstable();
                column
            })
            .collect()
    }
}
