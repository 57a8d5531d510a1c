//! A key's several logs (its meters) checked in one atomic step, all or
//! nothing ([`crate::store::LogStore::apply_together`]): every shard that
//! holds one of them locked (in shard order, so two such checks never wait
//! on each other), each log checked by the engine, and what the checks
//! write applied only when every log admits its cost.

use super::{forget, lock, log_id, observation, shard_of, MemoryStore, Shard};
use crate::controls::{Applied, DecidedBy};
use crate::decision::Observation;
use crate::error::{Error, Result};
use crate::store::{system_now_ms, Mode, Request};
use ratekeeper_engine::log::newest as newest_entry;
use ratekeeper_engine::{check_in, Check, Scratch, Write};
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

impl MemoryStore {
    /// See [`crate::store::LogStore::apply_together`].
    pub(super) fn together(&self, requests: &[Request<'_>]) -> Result<Vec<Observation>> {
        self.after_reset();
        let now = requests
            .first()
            .and_then(|r| r.now_ms)
            .unwrap_or_else(system_now_ms);
        if now > self.newest_ms.load(Ordering::Relaxed) {
            self.newest_ms.fetch_max(now, Ordering::AcqRel);
        }
        if self.held.load(Ordering::Acquire) + requests.len() > self.max_keys {
            self.make_room();
        }
        let ids: Vec<Vec<u8>> = requests.iter().map(|r| log_id(r.tag, r.scope)).collect();
        let hashes: Vec<u64> = ids.iter().map(|id| self.hash(id)).collect();
        let mut order: Vec<usize> = hashes.iter().map(|&h| shard_of(h)).collect();
        order.sort_unstable();
        order.dedup();
        let mut guards: Vec<(usize, MutexGuard<'_, Shard>)> =
            order.iter().map(|&i| (i, lock(&self.shards[i]))).collect();
        let newest_ms = self.newest_ms.load(Ordering::Acquire);
        let mut scratch = Scratch::default();
        let mut checked = Vec::with_capacity(requests.len());
        for (i, request) in requests.iter().enumerate() {
            let shard = shard_for(&mut guards, hashes[i]);
            let live = shard
                .logs
                .get(hashes[i], &ids[i])
                .filter(|log| log.expires_at > newest_ms);
            let (seen, write) = check_in(
                Check {
                    stored: live.map_or(&[][..], |log| log.bytes.as_slice()),
                    rules: request.rules.log_rules(),
                    cost: request.log_cost(),
                    now: now as i64,
                    clock: None,
                    writing: request.mode.writes(),
                    exact: request.rules.exact(),
                    settle: request.mode.settle(),
                },
                &mut scratch,
            )
            .map_err(|damaged| Error::storage(damaged.to_string()))?;
            checked.push((seen, write, live.is_some()));
        }
        let admitted = checked.iter().all(|(seen, _, _)| seen.allowed);
        let observations = checked
            .iter()
            .map(|(seen, _, _)| observation(seen, DecidedBy::Limited(Applied::Given)))
            .collect();
        let writes = requests.iter().any(|r| r.mode != Mode::Check) || admitted;
        for (i, (_, write, had_log)) in checked.into_iter().enumerate() {
            if !writes || write == Write::Nothing {
                continue;
            }
            let shard = shard_for(&mut guards, hashes[i]);
            if !had_log {
                if shard.logs.remove(hashes[i], &ids[i]) {
                    forget(&self.held, 1); // its expired log
                }
                self.held.fetch_add(1, Ordering::AcqRel);
            }
            let longest = requests[i].rules.log_rules().windows.iter().copied().max();
            let log = shard.logs.get_or_default(hashes[i], &ids[i], &self.hasher);
            scratch.apply(write, &mut log.bytes);
            let newest = newest_entry(&log.bytes).unwrap_or(now as i64);
            log.expires_at = (newest + longest.unwrap_or(0)).max(0) as u64;
        }
        Ok(observations)
    }
}

/// The locked shard that holds the log whose id hashes to `hash`.
fn shard_for<'g, 's>(guards: &'g mut [(usize, MutexGuard<'s, Shard>)], hash: u64) -> &'g mut Shard {
    let at = shard_of(hash);
    let (_, guard) = guards
        .iter_mut()
        .find(|(i, _)| *i == at)
        .expect("every shard of the check is locked");
    guard
}
