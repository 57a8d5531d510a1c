//! Checks of several keys at once: one round trip where the store allows
//! it (a Redis pipeline), each check atomic on its own.

use super::pipeline::{finish, Prepared};
use super::{CheckOptions, Limiter};
use crate::decision::{Decision, Observation};
use crate::error::Result;
use crate::store::{Mode, Request, Store};
use std::sync::Arc;

impl Limiter {
    /// Checks several keys against this limiter's rules, in one round trip
    /// where the store allows it (a Redis pipeline). Each key is checked
    /// atomically on its own; the decisions come back in order.
    pub fn check_many(&self, keys: &[&[u8]], cost: u64, now: Option<f64>) -> Result<Vec<Decision>> {
        let items: Vec<BatchItem<'_>> = keys
            .iter()
            .map(|&key| BatchItem {
                limiter: self,
                key,
                cost,
                tier: None,
                ip: None,
            })
            .collect();
        check_batch(&items, now)
    }
}

/// One check of a batch (see [`check_batch`]).
#[derive(Clone, Copy)]
pub struct BatchItem<'a> {
    /// The limiter whose rules apply.
    pub limiter: &'a Limiter,
    /// The key.
    pub key: &'a [u8],
    /// Units the check costs.
    pub cost: u64,
    /// The tier the caller names, if any.
    pub tier: Option<&'a str>,
    /// The client address, if known.
    pub ip: Option<&'a str>,
}

impl<'a> BatchItem<'a> {
    /// A check of `key` for `cost` units by `limiter`, with no tier or address.
    pub fn new(limiter: &'a Limiter, key: &'a [u8], cost: u64) -> BatchItem<'a> {
        BatchItem {
            limiter,
            key,
            cost,
            tier: None,
            ip: None,
        }
    }
}

/// A batch made ready: each item decided in-process or to be asked.
struct Batch<'i> {
    items: &'i [BatchItem<'i>],
    now_ms: Option<u64>,
    prepared: Vec<Prepared<'i>>,
    /// The items the store is asked about.
    pending: Vec<usize>,
}

impl<'i> Batch<'i> {
    fn prepare(items: &'i [BatchItem<'i>], now: Option<f64>) -> Result<Batch<'i>> {
        let mut now_ms = None;
        for item in items {
            if !item.limiter.meters.is_empty() {
                return Err(crate::error::Error::config(
                    "a limiter with meters checks its meters together itself: check it alone",
                ));
            }
            item.limiter.refuse_in_flight("a batch")?;
            now_ms = item.limiter.check_time(item.cost, now)?;
        }
        let mut prepared = Vec::with_capacity(items.len());
        for item in items {
            let options = CheckOptions {
                cost: item.cost,
                now,
                tier: item.tier,
                ip: item.ip,
                meter_costs: None,
            };
            prepared.push(
                item.limiter
                    .prepare(item.key, &options, now_ms, Mode::Check)?,
            );
        }
        let pending = (0..items.len())
            .filter(|&i| matches!(prepared[i], Prepared::Ask { .. }))
            .collect();
        Ok(Batch {
            items,
            now_ms,
            prepared,
            pending,
        })
    }

    /// What the store is asked, in the order of `pending`.
    fn requests(&self) -> Vec<Request<'_>> {
        self.pending
            .iter()
            .map(|&i| match &self.prepared[i] {
                Prepared::Ask {
                    tag, rules, tiers, ..
                } => self.items[i].limiter.request(
                    tag,
                    rules,
                    tiers,
                    self.items[i].cost,
                    self.now_ms,
                    Mode::Check,
                ),
                Prepared::Decided(_) => unreachable!("only pending checks"),
            })
            .collect()
    }

    /// The store every pending item shares (asked in one round trip), if one does.
    fn one_store(&self) -> Option<&Arc<dyn Store>> {
        let first = *self.pending.first()?;
        let shared = self.pending.windows(2).all(|pair| {
            Arc::ptr_eq(
                &self.items[pair[0]].limiter.warden.store,
                &self.items[pair[1]].limiter.warden.store,
            )
        });
        shared.then(|| &self.items[first].limiter.warden.store)
    }

    /// The decisions, in order, from what the store answered for the pending items.
    fn finish(
        &self,
        requests: &[Request<'_>],
        outcomes: Vec<Result<Observation>>,
    ) -> Result<Vec<Decision>> {
        let mut concluded = Vec::with_capacity(self.pending.len());
        for ((&i, request), outcome) in self.pending.iter().zip(requests).zip(outcomes) {
            let item = &self.items[i];
            concluded.push(item.limiter.conclude(request, item.tier, outcome)?);
        }
        let mut concluded = concluded.into_iter();
        Ok(self
            .prepared
            .iter()
            .zip(self.items)
            .map(|(p, item)| match p {
                Prepared::Decided(decision) => decision.clone(),
                Prepared::Ask { shared, tag, .. } => {
                    let concluded = concluded.next().expect("one decision per pending check");
                    let decision = finish(concluded, shared);
                    item.limiter.noted(&decision, Mode::Check, tag, item.ip);
                    decision
                }
            })
            .collect())
    }
}

/// Checks several items at once, say the per-IP and the per-user rules of
/// one request: limiters sharing one store (see [`Limiter::with_rules`]) are
/// asked in one round trip. Each check is atomic on its own and logs when its
/// own rules admit it, whatever the others decide; the decisions come back in
/// order.
pub fn check_batch(items: &[BatchItem<'_>], now: Option<f64>) -> Result<Vec<Decision>> {
    crate::store::one_wait::within(|| {
        let batch = Batch::prepare(items, now)?;
        let requests = batch.requests();
        let outcomes = match batch.one_store() {
            Some(store) => store.apply_many(&requests),
            None => batch
                .pending
                .iter()
                .zip(&requests)
                .map(|(&i, request)| items[i].limiter.warden.store.apply(request))
                .collect(),
        };
        batch.finish(&requests, outcomes)
    })
}

/// [`check_batch`], awaiting the store's answers where it has an awaitable
/// log (one pipeline on a single Redis).
#[cfg(feature = "async")]
pub async fn check_batch_async(items: &[BatchItem<'_>], now: Option<f64>) -> Result<Vec<Decision>> {
    crate::store::one_wait::within_async(async {
        for item in items {
            item.limiter.controls_due_async().await;
        }
        let batch = Batch::prepare(items, now)?;
        let requests = batch.requests();
        let outcomes = match batch.one_store().map(|store| (store, store.as_async())) {
            Some((_, Some(log))) => log.apply_many_async(&requests).await,
            Some((store, None)) => store.apply_many(&requests),
            None => {
                let mut outcomes = Vec::with_capacity(requests.len());
                for (&i, request) in batch.pending.iter().zip(&requests) {
                    let store = &items[i].limiter.warden.store;
                    outcomes.push(match store.as_async() {
                        Some(log) => log.apply_async(request).await,
                        None => store.apply(request),
                    });
                }
                outcomes
            }
        };
        batch.finish(&requests, outcomes)
    })
    .await
}
