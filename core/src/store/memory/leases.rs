//! The embedded store's leases ([`crate::in_flight`]): each key's live
//! leases (id, lapse time) in one of 32 shards, apart from the logs. A hold
//! locks its key's lease shard for the whole step, so that counting the
//! leases, checking the rates and taking a lease is one atomic step for
//! every hold of that key.

use super::{log_id, MemoryStore};
use crate::controls::{Applied, DecidedBy};
use crate::decision::Observation;
use crate::error::Result;
use crate::in_flight::{Held, LeaseCall, LeasesSeen};
use crate::store::{system_now_ms, LogStore, Mode, Request};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

const SHARDS: usize = 32;
const FIRST_SWEEP: usize = 1024;

/// One shard of the leases: each key's live leases, by its log's id.
#[derive(Debug)]
pub(super) struct LeaseShard {
    held: HashMap<Vec<u8>, Vec<Held>>,
    /// Size at which the keys whose leases all lapsed are swept out.
    sweep_at: usize,
}

/// Every key's leases, sharded.
#[derive(Debug)]
pub(super) struct Leases(Vec<Mutex<LeaseShard>>);

impl Default for Leases {
    fn default() -> Leases {
        let shard = || {
            Mutex::new(LeaseShard {
                held: HashMap::new(),
                sweep_at: FIRST_SWEEP,
            })
        };
        Leases((0..SHARDS).map(|_| shard()).collect())
    }
}

impl Leases {
    /// Forgets every lease (a test's reset).
    pub(super) fn clear(&self) {
        for shard in &self.0 {
            let mut shard = lock(shard);
            shard.held.clear();
            shard.sweep_at = FIRST_SWEEP;
        }
    }

    /// The shard of the key whose log id is `id`, its leases lapsed by `now` dropped.
    fn shard(&self, store: &MemoryStore, id: &[u8], now: u64) -> MutexGuard<'_, LeaseShard> {
        let mut shard = lock(&self.0[(store.hash(id) % SHARDS as u64) as usize]);
        if let Some(held) = shard.held.get_mut(id) {
            held.retain(|(_, lapse)| *lapse > now);
        }
        if shard.held.len() >= shard.sweep_at {
            shard
                .held
                .retain(|_, held| held.iter().any(|(_, lapse)| *lapse > now));
            shard.sweep_at = (shard.held.len() * 2).max(FIRST_SWEEP);
        }
        shard
    }
}

fn lock(shard: &Mutex<LeaseShard>) -> MutexGuard<'_, LeaseShard> {
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl MemoryStore {
    /// See [`LogStore::hold`].
    pub(super) fn hold_here(
        &self,
        request: &Request<'_>,
        id: &str,
        lease_ms: u64,
    ) -> Result<Observation> {
        self.after_reset();
        let now = request.now_ms.unwrap_or_else(system_now_ms);
        let key = log_id(request.tag, request.scope);
        let mut shard = self.leases.shard(self, &key, now);
        let live = shard.held.get(&key).map_or(&[][..], Vec::as_slice);
        let held = live.len() as u64;
        let soonest_lapse_ms = live.iter().map(|(_, lapse)| *lapse).min();
        let room = held < request.rules.in_flight().unwrap_or(0);
        let taking = request.mode == Mode::Check && room;
        let mut seen = if request.rules.rules().is_empty() {
            Observation {
                now_ms: now,
                allowed: true,
                rules: Vec::new(),
                decided_by: DecidedBy::Limited(Applied::Given),
                leases: None,
            }
        } else {
            let mode = if taking { Mode::Check } else { Mode::Peek };
            self.apply(&Request {
                mode,
                now_ms: Some(now),
                ..*request
            })?
        };
        if matches!(seen.decided_by, DecidedBy::Listed(..)) {
            return Ok(seen); // a listed key holds no slot
        }
        let taken = taking && seen.allowed;
        let mut soonest_lapse_ms = soonest_lapse_ms;
        if taken {
            let lapse = seen.now_ms + lease_ms;
            let id = crate::in_flight::lease_id(seen.now_ms, id);
            shard.held.entry(key).or_default().push((id, lapse));
            soonest_lapse_ms = soonest_lapse_ms.or(Some(lapse));
        }
        seen.allowed &= room;
        seen.leases = Some(LeasesSeen {
            held,
            soonest_lapse_ms,
            taken,
        });
        Ok(seen)
    }

    /// See [`LogStore::leases`].
    pub(super) fn leases_here(
        &self,
        tag: &[u8],
        scope: &str,
        call: LeaseCall<'_>,
        now_ms: Option<u64>,
    ) -> Vec<Held> {
        self.after_reset();
        let now = now_ms.unwrap_or_else(system_now_ms);
        let key = log_id(tag, scope);
        let mut shard = self.leases.shard(self, &key, now);
        let Some(held) = shard.held.get_mut(&key) else {
            return Vec::new();
        };
        let found = |id: &str| held.iter().position(|(h, _)| h == id);
        let answer = match call {
            LeaseCall::List => held.clone(),
            LeaseCall::Release(id) => found(id).map(|at| held.remove(at)).into_iter().collect(),
            LeaseCall::Extend(id, lease_ms) => match found(id) {
                Some(at) => {
                    held[at].1 = now + lease_ms;
                    vec![held[at].clone()]
                }
                None => Vec::new(),
            },
        };
        if held.is_empty() {
            shard.held.remove(&key);
        }
        answer
    }

    /// Forgets the leases of `tag` in `scope` (a reset).
    pub(super) fn forget_leases(&self, tag: &[u8], scope: &str) {
        let key = log_id(tag, scope);
        self.leases.shard(self, &key, 0).held.remove(&key);
    }
}
