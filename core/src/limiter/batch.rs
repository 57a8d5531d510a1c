//! Checks of several keys at once: one round trip where the store allows
//! it (a Redis pipeline), each check atomic on its own.

use super::pipeline::{check_arguments, finish, Prepared};
use super::{CheckOptions, Limiter};
use crate::decision::{Decision, Observation};
use crate::error::Result;
use crate::store::{Mode, Request};
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

/// Checks several items at once, say the per-IP and the per-user rules of
/// one request: limiters sharing one store (see [`Limiter::with_rules`]) are
/// asked in one round trip. Each check is atomic on its own and logs when its
/// own rules admit it, whatever the others decide; the decisions come back in
/// order.
pub fn check_batch(items: &[BatchItem<'_>], now: Option<f64>) -> Result<Vec<Decision>> {
    let mut now_ms = None;
    for item in items {
        now_ms = check_arguments(item.cost, now)?;
    }
    let mut prepared = Vec::with_capacity(items.len());
    for item in items {
        let options = CheckOptions {
            cost: item.cost,
            now,
            tier: item.tier,
            ip: item.ip,
        };
        prepared.push(
            item.limiter
                .prepare(item.key, &options, now_ms, Mode::Check)?,
        );
    }
    let pending: Vec<usize> = (0..items.len())
        .filter(|&i| matches!(prepared[i], Prepared::Ask { .. }))
        .collect();
    let requests: Vec<Request<'_>> = pending
        .iter()
        .map(|&i| match &prepared[i] {
            Prepared::Ask {
                tag, rules, tiers, ..
            } => items[i]
                .limiter
                .request(tag, rules, tiers, items[i].cost, now_ms, Mode::Check),
            Prepared::Decided(_) => unreachable!("only pending checks"),
        })
        .collect();
    let shared_store = pending
        .windows(2)
        .all(|pair| Arc::ptr_eq(&items[pair[0]].limiter.store, &items[pair[1]].limiter.store));
    let outcomes: Vec<Result<Observation>> = match pending.first() {
        Some(&first) if shared_store => items[first].limiter.store.apply_many(&requests),
        _ => pending
            .iter()
            .zip(&requests)
            .map(|(&i, request)| items[i].limiter.store.apply(request))
            .collect(),
    };
    let mut concluded = Vec::with_capacity(pending.len());
    for ((&i, request), outcome) in pending.iter().zip(&requests).zip(outcomes) {
        concluded.push(items[i].limiter.conclude(request, items[i].tier, outcome)?);
    }
    let mut concluded = concluded.into_iter();
    Ok(prepared
        .into_iter()
        .map(|p| match p {
            Prepared::Decided(decision) => decision,
            Prepared::Ask { shared, .. } => finish(
                concluded.next().expect("one decision per pending check"),
                &shared,
            ),
        })
        .collect())
}
