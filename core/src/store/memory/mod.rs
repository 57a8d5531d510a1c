//! The embedded store: sharded, thread-safe, in-process logs, bounded in
//! keys. Each log is the engine's bytes, checked by the engine as the Redis
//! module checks its own (`ratekeeper_engine`): the selection by a key's
//! record, the admission and the fail2ban strikes are the engine's. The
//! records, shared hashes and strikes are held in `controls`.

mod controls;
mod leases;
mod together;

use self::controls::Controls;
use self::leases::Leases;
use super::{system_now_ms, LogStore, Request, StoreAccess};
use crate::controls::{Applied, DecidedBy, List, Listing, RawRecord};
use crate::decision::{Observation, RuleObservation};
use crate::error::{Error, Result};
use crate::in_flight::{Held, LeaseCall};
use hashbrown::HashTable;
use ratekeeper_engine::command::{select, Record as LogRecord, Selected};
use ratekeeper_engine::log::newest as newest_entry;
use ratekeeper_engine::{check_in, Check, Rules, Scratch, Seen, Write};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

const SHARDS: usize = 32;
const FIRST_SWEEP: usize = 1024;

/// One key's log: the engine's bytes, as Redis would hold them.
#[derive(Debug, Default)]
struct Log {
    bytes: Vec<u8>,
    /// When every unit has left every window (newest unit + longest window).
    expires_at: u64,
}

/// A shard's logs by id, each found by the hash the store computes once
/// per check (for the choice of the shard and the lookup both).
#[derive(Debug, Default)]
struct Logs(HashTable<(Vec<u8>, Log)>);

impl Logs {
    fn get(&self, hash: u64, id: &[u8]) -> Option<&Log> {
        self.0.find(hash, |(k, _)| k == id).map(|(_, log)| log)
    }

    /// The log `id`, made empty first when there is none.
    fn get_or_default(&mut self, hash: u64, id: &[u8], hasher: &RandomState) -> &mut Log {
        let entry = self.0.entry(
            hash,
            |(k, _)| k == id,
            |(k, _)| hasher.hash_one(k.as_slice()),
        );
        &mut entry
            .or_insert_with(|| (id.to_vec(), Log::default()))
            .into_mut()
            .1
    }

    /// Removes the log `id`; whether there was one.
    fn remove(&mut self, hash: u64, id: &[u8]) -> bool {
        match self.0.find_entry(hash, |(k, _)| k == id) {
            Ok(found) => {
                found.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Keeps the logs `keep` says yes to; how many it dropped.
    fn retain(&mut self, mut keep: impl FnMut(&Log) -> bool) -> usize {
        let before = self.0.len();
        self.0.retain(|(_, log)| keep(log));
        before - self.0.len()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0.clear();
    }

    fn values(&self) -> impl Iterator<Item = &Log> {
        self.0.iter().map(|(_, log)| log)
    }
}

#[derive(Debug)]
struct Shard {
    logs: Logs,
    /// Size at which this shard's expired keys are next swept out.
    sweep_at: usize,
    /// The buffers this shard's checks are made in, one after another.
    scratch: Scratch,
}

/// In-process store: a key expires after its longest window (by the newest
/// time the store has been given), and at most `max_keys` keys are held (in
/// all shards together). A new key finding the store full first sweeps out
/// every expired key (a log whose windows have all emptied); only when the
/// store is still over seven eighths full are live keys evicted, those
/// closest to expiry first, down to seven eighths: their quotas start
/// afresh. Controls (listings, tiers, overrides, switches, strikes) are
/// held in-process too.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Vec<Mutex<Shard>>,
    hasher: RandomState,
    max_keys: usize,
    /// The keys held, in every shard (changed under the shard's lock).
    held: AtomicUsize,
    /// The newest time the store has been given: keys expire by it.
    newest_ms: AtomicU64,
    /// Held by the one check making room in a full store.
    making_room: Mutex<()>,
    controls: Mutex<Controls>,
    /// Each key's leases (its in-flight rule's slots).
    leases: Leases,
    /// Whether any key has a record: checks skip the controls lock until one does.
    has_records: AtomicBool,
    version: AtomicU64,
    /// The last test reset this store saw (see [`crate::testing::reset`]).
    resets_seen: AtomicU64,
}

impl MemoryStore {
    /// An empty store holding at most `max_keys` keys.
    pub fn new(max_keys: usize) -> MemoryStore {
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    logs: Logs::default(),
                    sweep_at: FIRST_SWEEP,
                    scratch: Scratch::default(),
                })
            })
            .collect();
        MemoryStore {
            shards,
            hasher: RandomState::new(),
            max_keys: max_keys.max(1),
            held: AtomicUsize::new(0),
            newest_ms: AtomicU64::new(0),
            making_room: Mutex::new(()),
            controls: Mutex::new(Controls::default()),
            leases: Leases::default(),
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
            self.held.fetch_sub(shard.logs.len(), Ordering::AcqRel);
            shard.logs.clear();
            shard.sweep_at = FIRST_SWEEP;
        }
        // a test's frozen clock may be earlier than the real one
        self.newest_ms.store(0, Ordering::Release);
        *self.controls() = Controls::default();
        self.leases.clear();
        self.has_records.store(false, Ordering::Release);
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    fn controls(&self) -> MutexGuard<'_, Controls> {
        self.controls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many keys the store holds now (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).logs.len()).sum()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The hash of a log's id: its shard, and where the shard holds it.
    fn hash(&self, id: &[u8]) -> u64 {
        self.hasher.hash_one(id)
    }

    /// The shard of the log whose id hashes to `hash` (bits the shard's
    /// table does not index by).
    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        lock(&self.shards[shard_of(hash)])
    }
}

/// The index of the shard of the log whose id hashes to `hash`.
fn shard_of(hash: u64) -> usize {
    (hash >> 40) as usize % SHARDS
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

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A panic elsewhere while holding the lock leaves the logs consistent: keep going.
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shard {
    /// Sweeps out the logs expired by `now` (the store's newest time);
    /// how many it dropped.
    fn sweep(&mut self, now: u64) -> usize {
        let dropped = self.logs.retain(|log| log.expires_at > now);
        self.sweep_at = (self.logs.len() * 2).max(FIRST_SWEEP);
        dropped
    }
}

/// `held` less `n`, under the lock of the shard `n` keys left.
fn forget(held: &AtomicUsize, n: usize) {
    if n > 0 {
        held.fetch_sub(n, Ordering::AcqRel);
    }
}

impl MemoryStore {
    /// Makes room in a full store (one check at a time; no shard lock held
    /// by the caller): sweeps every shard's expired keys, then, only if the
    /// store is still over seven eighths full, evicts the live keys closest
    /// to expiry down to seven eighths. Each call frees an eighth of
    /// `max_keys`, so its cost (a pass over the keys) is spread over the
    /// eighth of new keys that follow.
    fn make_room(&self) {
        let _one = self
            .making_room
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if self.held.load(Ordering::Acquire) < self.max_keys {
            return; // another check made room meanwhile
        }
        let now = self.newest_ms.load(Ordering::Acquire);
        for shard in &self.shards {
            let mut shard = lock(shard);
            let dropped = shard.sweep(now);
            forget(&self.held, dropped);
        }
        let low = self.max_keys - self.max_keys.div_ceil(8);
        if self.held.load(Ordering::Acquire) <= low {
            return; // expired keys made the room: no live key is evicted
        }
        // every key left is live: evict those closest to expiry
        let mut expiries: Vec<u64> = Vec::new();
        for shard in &self.shards {
            expiries.extend(lock(shard).logs.values().map(|log| log.expires_at));
        }
        let cut = expiries.len().saturating_sub(low);
        if cut == 0 {
            return;
        }
        let (below, &mut threshold, _) = expiries.select_nth_unstable(cut - 1);
        // all keys expiring before the threshold go, and enough of those at it
        let mut ties = cut - below.iter().filter(|&&at| at < threshold).count();
        for shard in &self.shards {
            let mut shard = lock(shard);
            let dropped = shard.logs.retain(|log| {
                if log.expires_at < threshold {
                    false
                } else if log.expires_at == threshold && ties > 0 {
                    ties -= 1;
                    false
                } else {
                    true
                }
            });
            forget(&self.held, dropped);
        }
    }
}

impl LogStore for MemoryStore {
    fn apply(&self, request: &Request<'_>) -> Result<Observation> {
        self.after_reset();
        let now_given = request.now_ms.unwrap_or_else(system_now_ms);
        // the key's record, and the record of the bans it earned in this scope
        let (own, scoped) = if request.read_record && self.has_records.load(Ordering::Acquire) {
            let controls = self.controls();
            let scoped = (!request.scope.is_empty())
                .then(|| {
                    let id = (request.scope.to_owned(), request.tag.to_vec());
                    controls.scoped.get(&id).cloned()
                })
                .flatten();
            (controls.records.get(request.tag).cloned(), scoped)
        } else {
            (None, None)
        };
        fn field(raw: &Option<RawRecord>, i: usize) -> Option<&[u8]> {
            raw.as_ref()
                .and_then(|r| r[i].as_deref())
                .map(str::as_bytes)
        }
        let record = (own.is_some() || scoped.is_some()).then(|| LogRecord {
            safe: field(&own, 0),
            block: field(&own, 1),
            tier: field(&own, 2),
            overrides: field(&own, 3),
            scope_block: field(&scoped, 1),
        });
        let tiers = request
            .tiers
            .iter()
            .map(|(name, rules)| (name.as_bytes(), rules.log_rules()));
        let now = now_given as i64;
        let selected = select(request.rules.log_rules(), tiers, record.as_ref(), now)
            .map_err(|e| Error::storage(e.0))?;
        match selected {
            Selected::Listed {
                kind,
                reason,
                until,
            } => {
                let list = if kind == 1 { List::Safe } else { List::Block };
                let listing = Listing {
                    until_ms: until as u64,
                    reason: String::from_utf8_lossy(reason).into_owned(),
                };
                Ok(Observation {
                    now_ms: now_given,
                    allowed: list == List::Safe,
                    rules: Vec::new(),
                    decided_by: DecidedBy::Listed(list, listing),
                    leases: None,
                })
            }
            Selected::Rules { rules, detail } => {
                let applied = Applied::from_detail(&String::from_utf8_lossy(&detail))?;
                let seen = self.check_log(request, &rules, now)?;
                Ok(observation(&seen, DecidedBy::Limited(applied)))
            }
        }
    }

    fn apply_together(&self, requests: &[Request<'_>]) -> Result<Vec<Observation>> {
        self.together(requests)
    }

    fn hold(&self, request: &Request<'_>, id: &str, lease_ms: u64) -> Result<Observation> {
        self.hold_here(request, id, lease_ms)
    }

    fn leases(
        &self,
        tag: &[u8],
        scope: &str,
        call: LeaseCall<'_>,
        now_ms: Option<u64>,
    ) -> Result<Vec<Held>> {
        Ok(self.leases_here(tag, scope, call, now_ms))
    }

    fn reset(&self, tag: &[u8], scope: &str) -> Result<()> {
        self.after_reset();
        self.forget_leases(tag, scope);
        let id = log_id(tag, scope);
        let hash = self.hash(&id);
        let mut shard = self.shard(hash);
        if shard.logs.remove(hash, &id) {
            forget(&self.held, 1);
        }
        Ok(())
    }
}

impl StoreAccess for MemoryStore {
    fn waits_on_io(&self) -> bool {
        false
    }
}

impl MemoryStore {
    /// Observes (and for a check, logs) the request's log against `rules`,
    /// by the engine.
    fn check_log(&self, request: &Request<'_>, rules: &Rules, now: i64) -> Result<Seen> {
        // (a key of no scope is held under its tag: no id is made for it)
        let scoped;
        let id = if request.scope.is_empty() {
            request.tag
        } else {
            scoped = log_id(request.tag, request.scope);
            &scoped
        };
        let hash = self.hash(id);
        // (a load, and a write only when time moved on)
        if now as u64 > self.newest_ms.load(Ordering::Relaxed) {
            self.newest_ms.fetch_max(now as u64, Ordering::AcqRel);
        }
        let mut made_room = false;
        loop {
            let mut shard = self.shard(hash);
            let newest_ms = self.newest_ms.load(Ordering::Acquire);
            let Shard { logs, scratch, .. } = &mut *shard;
            let live = logs.get(hash, id).filter(|log| log.expires_at > newest_ms);
            let had_log = live.is_some();
            let (seen, write) = check_in(
                Check {
                    stored: live.map_or(&[][..], |log| log.bytes.as_slice()),
                    rules,
                    cost: request.log_cost(),
                    now,
                    clock: None,
                    writing: request.mode.writes(),
                    exact: request.rules.exact(),
                    settle: request.mode.settle(),
                },
                scratch,
            )
            .map_err(|damaged| Error::storage(damaged.to_string()))?;
            if write == Write::Nothing {
                return Ok(seen);
            }
            if !had_log {
                // a new key: room for it, in a full store made without this
                // shard's lock, then the check again (the log may have changed)
                if !made_room && self.held.load(Ordering::Acquire) >= self.max_keys {
                    drop(shard);
                    self.make_room();
                    made_room = true;
                    continue;
                }
                if shard.logs.remove(hash, id) {
                    forget(&self.held, 1); // its expired log
                }
                if shard.logs.len() >= shard.sweep_at {
                    let dropped = shard.sweep(newest_ms);
                    forget(&self.held, dropped);
                }
                self.held.fetch_add(1, Ordering::AcqRel);
            }
            let longest = rules.windows.iter().copied().max().unwrap_or(0);
            let Shard { logs, scratch, .. } = &mut *shard;
            let log = logs.get_or_default(hash, id, &self.hasher);
            scratch.apply(write, &mut log.bytes);
            let newest = newest_entry(&log.bytes).unwrap_or(now);
            log.expires_at = (newest + longest).max(0) as u64;
            return Ok(seen);
        }
    }
}

/// What the engine saw of a log, as a store reports it.
fn observation(seen: &Seen, decided_by: DecidedBy) -> Observation {
    let at = |ms: i64| (ms >= 0).then_some(ms as u64);
    Observation {
        now_ms: seen.now as u64,
        allowed: seen.allowed,
        rules: seen
            .rules
            .iter()
            .map(|rule| RuleObservation {
                count: rule.count as u64,
                oldest_ms: at(rule.oldest),
                free_at_ms: at(rule.free_at),
            })
            .collect(),
        decided_by,
        leases: None,
    }
}

#[cfg(test)]
mod tests;
