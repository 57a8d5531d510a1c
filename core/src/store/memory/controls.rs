//! The memory store's controls: what Redis keeps in records and hashes
//! (listings, tiers, overrides, the shared hashes) and the fail2ban
//! strikes, held in-process; the strikes counted by the engine.

use super::MemoryStore;
use crate::controls::{Fail2Ban, Field, RawRecord, SharedHash, Strike};
use crate::error::Result;
use crate::store::{ControlStore, HashFields};
use crate::time::system_now_ms;
use ratekeeper_engine::record::{lifetime, strike, Lifetime};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering;

/// The controls of the memory store: what Redis keeps in records and hashes.
#[derive(Debug, Default)]
pub(super) struct Controls {
    pub(super) records: HashMap<Vec<u8>, RawRecord>,
    /// The bans keys earned in a scope, by scope and key tag.
    pub(super) scoped: HashMap<(String, Vec<u8>), RawRecord>,
    pub(super) shared: [HashMap<Vec<u8>, Vec<u8>>; 3],
    /// Per key and fail2ban name: strike times, newest first, and when they all lapse.
    pub(super) strikes: HashMap<Vec<u8>, (VecDeque<i64>, u64)>,
    /// The audit trail, newest first.
    pub(super) changes: VecDeque<Vec<u8>>,
    /// The record of denials: by minute (ms), each process's tally.
    pub(super) denials: BTreeMap<u64, HashMap<u64, Vec<u8>>>,
}

fn hash_index(hash: SharedHash) -> usize {
    match hash {
        SharedHash::Nets => 0,
        SharedHash::Switches => 1,
        SharedHash::Directory => 2,
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

impl ControlStore for MemoryStore {
    fn record(&self, tag: &[u8], scope: &str) -> Result<RawRecord> {
        self.after_reset();
        let controls = self.controls();
        let found = if scope.is_empty() {
            controls.records.get(tag)
        } else {
            controls.scoped.get(&(scope.to_owned(), tag.to_vec()))
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
        let mut controls = self.controls();
        let slot = Field::ALL.iter().position(|&f| f == field).unwrap_or(0);
        // keep records that hold a tier, an override or a standing listing
        let lasts = |r: &RawRecord| {
            let field = |i: usize| r[i].as_deref().map(str::as_bytes);
            let fields = [field(0), field(1), field(2), field(3)];
            lifetime(fields, now_ms as i64) != Lifetime::Delete
        };
        if scope.is_empty() {
            set_field(&mut controls.records, tag.to_vec(), slot, value, lasts);
        } else {
            let id = (scope.to_owned(), tag.to_vec());
            set_field(&mut controls.scoped, id, slot, value, lasts);
        }
        let any = !controls.records.is_empty() || !controls.scoped.is_empty();
        self.has_records.store(any, Ordering::Release);
        Ok(())
    }

    fn shared(&self, hash: SharedHash) -> Result<HashFields> {
        self.after_reset();
        Ok(self.controls().shared[hash_index(hash)]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn set_shared(&self, hash: SharedHash, field: &[u8], value: Option<&[u8]>) -> Result<bool> {
        self.after_reset();
        let mut controls = self.controls();
        let map = &mut controls.shared[hash_index(hash)];
        let existed = match value {
            Some(value) => map.insert(field.to_vec(), value.to_vec()).is_some(),
            None => map.remove(field).is_some(),
        };
        if hash.held_in_process() {
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        Ok(existed)
    }

    fn controls_version(&self) -> Result<u64> {
        self.after_reset();
        Ok(self.version.load(Ordering::Acquire))
    }

    fn push_change(&self, change: &[u8], keep: usize) -> Result<()> {
        self.after_reset();
        let mut controls = self.controls();
        controls.changes.push_front(change.to_vec());
        controls.changes.truncate(keep);
        Ok(())
    }

    fn changes(&self, limit: usize) -> Result<Vec<Vec<u8>>> {
        self.after_reset();
        Ok(self
            .controls()
            .changes
            .iter()
            .take(limit)
            .cloned()
            .collect())
    }

    fn put_denials(&self, minute_ms: u64, process: u64, tally: &[u8], ttl_s: u64) -> Result<()> {
        self.after_reset();
        let mut controls = self.controls();
        controls
            .denials
            .entry(minute_ms)
            .or_default()
            .insert(process, tally.to_vec());
        // the minutes older than the newest by more than they are kept
        let horizon = minute_ms.saturating_sub(ttl_s * 1000);
        controls.denials = controls.denials.split_off(&horizon);
        Ok(())
    }

    fn denials(&self, minutes: &[u64]) -> Result<Vec<Vec<Vec<u8>>>> {
        self.after_reset();
        let controls = self.controls();
        Ok(minutes
            .iter()
            .map(|minute| {
                controls
                    .denials
                    .get(minute)
                    .map_or_else(Vec::new, |tallies| tallies.values().cloned().collect())
            })
            .collect())
    }

    fn strike(&self, tag: &[u8], rule: &Fail2Ban, now_ms: Option<u64>) -> Result<Strike> {
        self.after_reset();
        let now = now_ms.unwrap_or_else(system_now_ms);
        let mut id = tag.to_vec();
        id.push(0);
        id.extend_from_slice(rule.name.as_bytes());
        let mut controls = self.controls();
        if controls.strikes.len() >= self.max_keys {
            controls.strikes.retain(|_, (_, lapses)| *lapses > now);
        }
        let (times, lapses) = controls.strikes.entry(id.clone()).or_default();
        let struck = strike(
            times,
            now as i64,
            rule.maxretry as i64,
            rule.findtime_ms as i64,
        );
        *lapses = now + rule.findtime_ms;
        if struck.banned {
            controls.strikes.remove(&id);
        }
        Ok(Strike {
            strikes: struck.count as u64,
            banned: struck.banned,
            until_ms: struck.banned.then_some(now + rule.bantime_ms),
        })
    }
}
