//! The embedded store: sharded, thread-safe, in-process logs, bounded in keys.

use super::{system_now_ms, LogStore, Mode, PolicyStore, Request};
use crate::decision::{admits, units_to_expire, Observation, RuleObservation};
use crate::error::Result;
use crate::policy::{
    select, Applied, DecidedBy, Fail2Ban, Field, List, RawRecord, Record, SharedHash, Strike,
};
use crate::rule::RuleSet;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// The policies of the memory store: what Redis keeps in records and hashes.
#[derive(Debug, Default)]
struct Policies {
    records: HashMap<Vec<u8>, RawRecord>,
    /// The bans keys earned in a scope, by scope and key tag.
    scoped: HashMap<(String, Vec<u8>), RawRecord>,
    shared: [HashMap<Vec<u8>, Vec<u8>>; 3],
    /// Per key and fail2ban name: strike times, newest last, and when they all lapse.
    strikes: HashMap<Vec<u8>, (VecDeque<u64>, u64)>,
}

/// In-process store: a key expires after its longest window (by the newest
/// time the store has been given), and at most `max_keys` keys are held; past
/// that, the keys closest to expiry are evicted first. Policies (listings,
/// tiers, overrides, switches, strikes) are held in-process too.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Vec<Mutex<Shard>>,
    hasher: RandomState,
    shard_max: usize,
    policies: Mutex<Policies>,
    /// Whether any key has a record: checks skip the policy lock until one does.
    has_records: AtomicBool,
    version: AtomicU64,
    /// The last test reset this store saw (see [`crate::testing::reset`]).
    resets_seen: AtomicU64,
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
            policies: Mutex::new(Policies::default()),
            has_records: AtomicBool::new(false),
            version: AtomicU64::new(0),
            resets_seen: AtomicU64::new(crate::testing::resets()),
        }
    }

    /// Empties the store when a test asked for a reset since its last use.
    fn after_reset(&self) {
        let resets = crate::testing::resets();
        if self.resets_seen.swap(resets, Ordering::AcqRel) == resets {
            return;
        }
        for shard in &self.shards {
            let mut shard = lock(shard);
            shard.logs.clear();
            shard.newest_ms = 0; // a test's frozen clock may be earlier than the real one
            shard.sweep_at = FIRST_SWEEP.min(self.shard_max);
        }
        *self.policies() = Policies::default();
        self.has_records.store(false, Ordering::Release);
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    fn policies(&self) -> MutexGuard<'_, Policies> {
        self.policies.lock().unwrap_or_else(|p| p.into_inner())
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

/// Where a key's log is held: its tag, and its scope after a NUL.
fn log_id(tag: &[u8], scope: &str) -> Vec<u8> {
    let mut id = tag.to_vec();
    if !scope.is_empty() {
        id.push(0);
        id.extend_from_slice(scope.as_bytes());
    }
    id
}

fn hash_index(hash: SharedHash) -> usize {
    match hash {
        SharedHash::Nets => 0,
        SharedHash::Switches => 1,
        SharedHash::Directory => 2,
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

impl LogStore for MemoryStore {
    fn apply(&self, request: &Request<'_>) -> Result<Observation> {
        self.after_reset();
        let now_given = request.now_ms.unwrap_or_else(system_now_ms);
        let record;
        let mut applied = Applied::Given;
        let mut rules = request.rules;
        if request.policy && self.has_records.load(Ordering::Acquire) {
            let (raw, banned) = {
                let policies = self.policies();
                let banned = (!request.scope.is_empty())
                    .then(|| {
                        let id = (request.scope.to_owned(), request.tag.to_vec());
                        policies.scoped.get(&id).cloned()
                    })
                    .flatten();
                (policies.records.get(request.tag).cloned(), banned)
            };
            record = raw.map(|raw| Record::decode(&raw, now_given));
            // the key's own listing, then a ban it earned in this scope
            let listed = record
                .as_ref()
                .and_then(|r| r.listed().map(|(list, l)| (list, l.clone())))
                .or_else(|| {
                    let banned = Record::decode(&banned?, now_given).block?;
                    Some((List::Block, banned))
                });
            if let Some((list, listing)) = listed {
                return Ok(Observation {
                    now_ms: now_given,
                    allowed: list == List::Safe,
                    rules: Vec::new(),
                    decided_by: DecidedBy::Listed(list, listing),
                });
            }
            if let Some(record) = &record {
                if let Some((chosen, chosen_rules)) = select(record, request.tiers) {
                    applied = chosen;
                    rules = chosen_rules;
                }
            }
        }
        let observation = self.apply_rules(request, rules, now_given)?;
        Ok(Observation {
            decided_by: DecidedBy::Limited(applied),
            ..observation
        })
    }

    fn reset(&self, tag: &[u8], scope: &str) -> Result<()> {
        self.after_reset();
        let id = log_id(tag, scope);
        self.shard(&id).logs.remove(&id);
        Ok(())
    }

    fn waits_on_io(&self) -> bool {
        false
    }
}

/// Sets one field of the record `id` in `records`, dropping the record when
/// it no longer `lasts` (and, now and then, every record that does not).
fn set_field<K: std::hash::Hash + Eq + Clone>(
    records: &mut HashMap<K, RawRecord>,
    id: K,
    slot: usize,
    value: Option<&str>,
    lasts: impl Fn(&RawRecord) -> bool,
) {
    let record = records.entry(id.clone()).or_default();
    record[slot] = value.map(str::to_owned);
    if !lasts(record) {
        records.remove(&id);
    }
    if records.len() % 1024 == 1023 {
        records.retain(|_, r| lasts(r));
    }
}

impl PolicyStore for MemoryStore {
    fn record(&self, tag: &[u8], scope: &str) -> Result<RawRecord> {
        self.after_reset();
        let policies = self.policies();
        let found = if scope.is_empty() {
            policies.records.get(tag)
        } else {
            policies.scoped.get(&(scope.to_owned(), tag.to_vec()))
        };
        Ok(found.cloned().unwrap_or_default())
    }

    fn set_record(
        &self,
        tag: &[u8],
        scope: &str,
        field: Field,
        value: Option<&str>,
        now_ms: u64,
    ) -> Result<()> {
        self.after_reset();
        let mut policies = self.policies();
        let slot = Field::ALL.iter().position(|&f| f == field).unwrap_or(0);
        // keep records that hold a tier, an override or a standing listing
        let lasts = |r: &RawRecord| {
            r[2].is_some() || r[3].is_some() || Record::decode(r, now_ms).listed().is_some()
        };
        if scope.is_empty() {
            set_field(&mut policies.records, tag.to_vec(), slot, value, lasts);
        } else {
            let id = (scope.to_owned(), tag.to_vec());
            set_field(&mut policies.scoped, id, slot, value, lasts);
        }
        let any = !policies.records.is_empty() || !policies.scoped.is_empty();
        self.has_records.store(any, Ordering::Release);
        Ok(())
    }

    fn shared(&self, hash: SharedHash) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.after_reset();
        Ok(self.policies().shared[hash_index(hash)]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn set_shared(&self, hash: SharedHash, field: &[u8], value: Option<&[u8]>) -> Result<bool> {
        self.after_reset();
        let mut policies = self.policies();
        let map = &mut policies.shared[hash_index(hash)];
        let existed = match value {
            Some(value) => map.insert(field.to_vec(), value.to_vec()).is_some(),
            None => map.remove(field).is_some(),
        };
        if hash.held_in_process() {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        Ok(existed)
    }

    fn policy_version(&self) -> Result<u64> {
        self.after_reset();
        Ok(self.version.load(Ordering::Acquire))
    }

    fn strike(&self, tag: &[u8], rule: &Fail2Ban, now_ms: Option<u64>) -> Result<Strike> {
        self.after_reset();
        let now = now_ms.unwrap_or_else(system_now_ms);
        let mut id = tag.to_vec();
        id.push(0);
        id.extend_from_slice(rule.name.as_bytes());
        let mut policies = self.policies();
        if policies.strikes.len() >= self.shard_max * SHARDS {
            policies.strikes.retain(|_, (_, lapses)| *lapses > now);
        }
        let (times, lapses) = policies.strikes.entry(id.clone()).or_default();
        times.push_back(now);
        while times.len() as u64 > rule.maxretry {
            times.pop_front();
        }
        *lapses = now + rule.findtime_ms;
        let strikes = times
            .iter()
            .filter(|&&t| t + rule.findtime_ms > now)
            .count() as u64;
        let banned = strikes >= rule.maxretry;
        if banned {
            policies.strikes.remove(&id);
        }
        Ok(Strike {
            strikes,
            banned,
            until_ms: banned.then_some(now + rule.bantime_ms),
        })
    }
}

impl MemoryStore {
    /// Observes (and for a check, logs) the request's log against `rules`.
    fn apply_rules(
        &self,
        request: &Request<'_>,
        rules: &RuleSet,
        now_given: u64,
    ) -> Result<Observation> {
        let (cost, mode) = (request.cost, request.mode);
        let id = log_id(request.tag, request.scope);
        let tag = id.as_slice();
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
            decided_by: DecidedBy::default(),
        })
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
                .apply(&Request::plain(
                    &i.to_be_bytes(),
                    &rules,
                    1,
                    Some(1_000 + i),
                    Mode::Check,
                ))
                .unwrap();
        }
        assert!(store.len() <= 1000 + SHARDS, "{} keys held", store.len());
        // the newest keys survive eviction
        let d = store
            .apply(&Request::plain(
                &19_999u64.to_be_bytes(),
                &rules,
                1,
                Some(30_000),
                Mode::Peek,
            ))
            .unwrap();
        assert_eq!(d.rules[0].count, 1);
    }

    #[test]
    fn expired_keys_are_swept() {
        let store = MemoryStore::new(1_000_000);
        let rules = RuleSet::parse("5/s").unwrap();
        for i in 0..50_000u64 {
            store
                .apply(&Request::plain(
                    &i.to_be_bytes(),
                    &rules,
                    1,
                    Some(1_000),
                    Mode::Check,
                ))
                .unwrap();
        }
        for i in 50_000..100_000u64 {
            store
                .apply(&Request::plain(
                    &i.to_be_bytes(),
                    &rules,
                    1,
                    Some(100_000),
                    Mode::Check,
                ))
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
                .apply(&Request::plain(b"busy", &rules, 1, Some(i), Mode::Check))
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
                    .apply(&Request::plain(b"k", &rules, 1, Some(5), Mode::Peek))
                    .unwrap()
                    .allowed
            );
        }
        assert!(store.is_empty());
    }
}
