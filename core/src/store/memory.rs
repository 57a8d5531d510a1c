//! The embedded store: sharded, thread-safe, in-process logs, bounded in keys.

use super::{system_now_ms, Mode, Store};
use crate::decision::{admits, units_to_expire, Observation, RuleObservation};
use crate::error::Result;
use crate::rule::RuleSet;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};

const SHARDS: usize = 32;
const FIRST_SWEEP: usize = 1024;

/// One key's log: the timestamps (ms) of its newest units, oldest first.
#[derive(Debug, Default)]
struct Log {
    units: VecDeque<u64>,
    /// When every unit has left every window (newest unit + longest window).
    expires_at: u64,
}

#[derive(Debug)]
struct Shard {
    logs: HashMap<Vec<u8>, Log>,
    /// The newest time this shard has been given: keys expire by it.
    newest_ms: u64,
    /// Size at which expired keys are next swept out.
    sweep_at: usize,
}

/// In-process store: a key expires after its longest window (by the newest
/// time the store has been given), and at most `max_keys` keys are held; past
/// that, the keys closest to expiry are evicted first.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Vec<Mutex<Shard>>,
    hasher: RandomState,
    shard_max: usize,
}

impl MemoryStore {
    /// An empty store holding at most `max_keys` keys.
    pub fn new(max_keys: usize) -> MemoryStore {
        let shard_max = max_keys.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    logs: HashMap::new(),
                    newest_ms: 0,
                    sweep_at: FIRST_SWEEP.min(shard_max),
                })
            })
            .collect();
        MemoryStore {
            shards,
            hasher: RandomState::new(),
            shard_max,
        }
    }

    /// How many keys the store holds now (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).logs.len()).sum()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard(&self, tag: &[u8]) -> MutexGuard<'_, Shard> {
        let index = (self.hasher.hash_one(tag) as usize) % SHARDS;
        lock(&self.shards[index])
    }
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A panic elsewhere while holding the lock leaves the logs consistent: keep going.
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shard {
    /// Makes room for one more key: sweeps expired keys, then evicts the keys
    /// closest to expiry if the shard is still full.
    fn make_room(&mut self, shard_max: usize) {
        if self.logs.len() >= self.sweep_at || self.logs.len() >= shard_max {
            let now = self.newest_ms;
            self.logs.retain(|_, log| log.expires_at > now);
            self.sweep_at = (self.logs.len() * 2).clamp(FIRST_SWEEP.min(shard_max), shard_max);
        }
        if self.logs.len() >= shard_max {
            let keep = shard_max - shard_max.div_ceil(8);
            let mut expiries: Vec<u64> = self.logs.values().map(|log| log.expires_at).collect();
            let cut = expiries.len() - keep;
            let (_, &mut threshold, _) = expiries.select_nth_unstable(cut.saturating_sub(1));
            let mut to_drop = cut;
            self.logs.retain(|_, log| {
                if to_drop > 0 && log.expires_at <= threshold {
                    to_drop -= 1;
                    false
                } else {
                    true
                }
            });
        }
    }
}

impl Store for MemoryStore {
    fn apply(
        &self,
        tag: &[u8],
        rules: &RuleSet,
        cost: u64,
        now_ms: Option<u64>,
        mode: Mode,
    ) -> Result<Observation> {
        let now_given = now_ms.unwrap_or_else(system_now_ms);
        let mut shard = self.shard(tag);
        shard.newest_ms = shard.newest_ms.max(now_given);
        let shard_newest = shard.newest_ms;
        let empty = Log::default();
        let log = match shard.logs.get(tag) {
            Some(log) if log.expires_at > shard_newest => log,
            _ => &empty,
        };
        // A clock never runs backwards for one key.
        let now = log
            .units
            .back()
            .map_or(now_given, |&newest| now_given.max(newest));
        let firsts: Vec<usize> = rules
            .rules()
            .iter()
            .map(|rule| {
                log.units
                    .partition_point(|&unit| unit + rule.window_ms <= now)
            })
            .collect();
        let counts = firsts.iter().map(|&first| (log.units.len() - first) as u64);
        let allowed = admits(rules, counts, cost);
        let observed: Vec<RuleObservation> = rules
            .rules()
            .iter()
            .zip(&firsts)
            .map(|(rule, &first)| {
                let count = (log.units.len() - first) as u64;
                let free_at_ms = if allowed {
                    None
                } else {
                    units_to_expire(rule, count, cost)
                        .map(|k| log.units[first + k as usize - 1] + rule.window_ms)
                };
                RuleObservation {
                    count,
                    oldest_ms: log.units.get(first).copied(),
                    free_at_ms,
                }
            })
            .collect();
        if allowed && mode == Mode::Check {
            let keep = rules.max_limit() as usize;
            let expires_at = now + rules.longest_window_ms();
            if !matches!(shard.logs.get(tag), Some(log) if log.expires_at > shard_newest) {
                shard.logs.remove(tag);
                let shard_max = self.shard_max;
                shard.make_room(shard_max);
            }
            let log = shard.logs.entry(tag.to_vec()).or_default();
            // keep only units some window can still see: at most the largest
            // limit, and none older than the longest window
            let longest = rules.longest_window_ms();
            while log.units.front().is_some_and(|&unit| unit + longest <= now) {
                log.units.pop_front();
            }
            log.units.extend(std::iter::repeat_n(now, cost as usize));
            while log.units.len() > keep {
                log.units.pop_front();
            }
            log.expires_at = expires_at;
        }
        Ok(Observation {
            now_ms: now,
            allowed,
            rules: observed,
        })
    }

    fn reset(&self, tag: &[u8]) -> Result<()> {
        self.shard(tag).logs.remove(tag);
        Ok(())
    }

    fn waits_on_io(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_keys() {
        let store = MemoryStore::new(1000);
        let rules = RuleSet::parse("5/hour").unwrap();
        for i in 0..20_000u64 {
            store
                .apply(&i.to_be_bytes(), &rules, 1, Some(1_000 + i), Mode::Check)
                .unwrap();
        }
        assert!(store.len() <= 1000 + SHARDS, "{} keys held", store.len());
        // the newest keys survive eviction
        let d = store
            .apply(
                &19_999u64.to_be_bytes(),
                &rules,
                1,
                Some(30_000),
                Mode::Peek,
            )
            .unwrap();
        assert_eq!(d.rules[0].count, 1);
    }

    #[test]
    fn expired_keys_are_swept() {
        let store = MemoryStore::new(1_000_000);
        let rules = RuleSet::parse("5/s").unwrap();
        for i in 0..50_000u64 {
            store
                .apply(&i.to_be_bytes(), &rules, 1, Some(1_000), Mode::Check)
                .unwrap();
        }
        for i in 50_000..100_000u64 {
            store
                .apply(&i.to_be_bytes(), &rules, 1, Some(100_000), Mode::Check)
                .unwrap();
        }
        // the first 50,000 expired long ago and are swept while the next 50,000 arrive
        assert!(store.len() < 75_000, "{} keys held", store.len());
    }

    #[test]
    fn units_out_of_every_window_are_dropped() {
        let store = MemoryStore::new(10);
        let rules = RuleSet::parse("1000000/s").unwrap();
        for i in 0..10_000u64 {
            store
                .apply(b"busy", &rules, 1, Some(i), Mode::Check)
                .unwrap();
        }
        let shard = store.shard(b"busy");
        assert_eq!(
            shard.logs[&b"busy"[..]].units.len(),
            1000,
            "one second of units at one a millisecond"
        );
    }

    #[test]
    fn peek_logs_nothing() {
        let store = MemoryStore::new(10);
        let rules = RuleSet::parse("1/s").unwrap();
        for _ in 0..3 {
            assert!(
                store
                    .apply(b"k", &rules, 1, Some(5), Mode::Peek)
                    .unwrap()
                    .allowed
            );
        }
        assert!(store.is_empty());
    }
}
