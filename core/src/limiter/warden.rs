//! The [`Warden`]: a store with what every limiter on it shares (the
//! shared controls as this process holds them, the failure policy, the
//! denial cache's cap, whether checks read each key's record, the clock).
//! It screens client addresses against the address lists and counts
//! strikes, and it makes the limiters of rule sets: a gate's warden screens
//! and strikes for the whole policy, and each of its throttles is a
//! limiter it made. A limiter is its rules, scope and tiers over a warden.

use super::options::{Offender, OnError};
use super::pipeline::finish;
use super::view::{self, controls, current_controls, Controls};
use super::Limiter;
use crate::clock::Clock;
use crate::controls::{Fail2Ban, List, Listing, Shared, Strike, Target};
use crate::decision::Decision;
use crate::denial_cache::DEFAULT_CAP;
use crate::error::{Error, Result};
use crate::keys::key_tag;
use crate::rule::RuleSet;
use crate::store::{self, in_place, AsyncControlStore, ControlCalls, Store};
use crate::time::now_to_ms;
use std::sync::Arc;
use std::time::Duration;

/// A store and what the limiters on it share (clones share the store and
/// the controls held).
#[derive(Clone)]
pub struct Warden {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) shared: Controls,
    pub(crate) on_error: OnError,
    pub(crate) clock: Clock,
    /// How long a limiter made here remembers a denial in-process (zero: not at all).
    pub(crate) denial_cap: Duration,
    /// Whether checks read each key's record.
    pub(crate) read_records: bool,
}

/// `controls_refresh`, checked (here and nowhere else): 0.1 to 60 seconds.
pub fn check_controls_refresh(refresh: Duration) -> Result<Duration> {
    if refresh < Duration::from_millis(100) || refresh > Duration::from_secs(60) {
        return Err(Error::config(format!(
            "invalid controls_refresh {}: give 0.1 to 60 seconds",
            crate::error::shown(refresh.as_secs_f64())
        )));
    }
    Ok(refresh)
}

/// How the address lists judge a client address: what [`Warden::screen`] found.
#[derive(Debug, Clone)]
pub struct Listed {
    list: List,
    listing: Listing,
    now_ms: u64,
    shared: Arc<Shared>,
}

impl Listed {
    /// The list that names the address.
    pub fn list(&self) -> List {
        self.list
    }

    /// Whether the request goes on: a safelisted address, or a blocked one
    /// in shadow mode (reported, not refused).
    pub fn allowed(&self) -> bool {
        self.list == List::Safe || self.shared.switches.shadow
    }

    /// The decision a limiter of `rules` reports for the listed address
    /// (shadow mode applied).
    pub fn decision(&self, rules: &RuleSet) -> Decision {
        finish(
            Decision::listed(rules, self.now_ms, self.list, &self.listing),
            &self.shared,
        )
    }
}

impl Drop for Warden {
    /// The last warden of a view leaves the denials its reader has not
    /// written yet to be written (by its reader, or as the process exits).
    fn drop(&mut self) {
        if Arc::strong_count(&self.shared) == 1 && self.store.waits_on_io() {
            super::view::leave(&self.shared, &self.store);
        }
    }
}

impl Warden {
    /// A warden of `store` with the defaults: allow on error, controls read
    /// again every [`super::DEFAULT_CONTROLS_REFRESH`], each key's record
    /// read, denials remembered for up to [`DEFAULT_CAP`] when the store is
    /// remote, the process's clock.
    pub fn new(store: Arc<dyn Store>, on_error: OnError) -> Warden {
        let denial_cap = if store.waits_on_io() {
            DEFAULT_CAP
        } else {
            Duration::ZERO
        };
        Warden {
            store,
            shared: controls(super::DEFAULT_CONTROLS_REFRESH),
            on_error,
            clock: Clock::process(),
            denial_cap,
            read_records: true,
        }
    }

    /// This warden reading the shared controls again every `refresh` (0.1
    /// to 60 seconds).
    pub fn with_controls_refresh(mut self, refresh: Duration) -> Result<Warden> {
        self.shared = controls(check_controls_refresh(refresh)?);
        Ok(self)
    }

    /// This warden's checks reading (`true`) or ignoring each key's
    /// record (listings, tier, override).
    pub fn with_records(mut self, read: bool) -> Warden {
        self.read_records = read;
        self
    }

    /// This warden on `clock` instead of the process's.
    pub fn with_clock(mut self, clock: Clock) -> Warden {
        self.clock = clock;
        self
    }

    /// A limiter of `rules` on this warden (no scope or tiers until given).
    pub fn limiter(&self, rules: RuleSet) -> Limiter {
        Limiter::over(rules, self.clone())
    }

    /// The store.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// What a check returns when the store fails.
    pub fn on_error(&self) -> OnError {
        self.on_error
    }

    /// Whether a store call may wait on the network (see
    /// [`crate::store::StoreAccess::waits_on_io`]).
    pub fn waits_on_io(&self) -> bool {
        self.store.waits_on_io()
    }

    /// How often the store was called, failed, and was spared by its circuit breaker.
    pub fn store_stats(&self) -> crate::store::StoreStats {
        self.store.stats()
    }

    /// Whether the shared controls (switches, address lists) are held in
    /// this process as of its last change: [`Warden::screen`] then answers
    /// from memory without waiting on the store.
    pub fn controls_ready(&self) -> bool {
        view::ready(&self.shared, &self.store)
    }

    /// How the address lists judge the client address `ip` now, or `None`
    /// when they do not name it (or limiting is off). Asks no store but
    /// for the process's first read of the lists (see
    /// [`Warden::controls_ready`]).
    pub fn screen(&self, ip: &str) -> Option<Listed> {
        crate::store::one_wait::within(|| {
            if !self.clock.limiting() {
                return None;
            }
            self.judge(ip, current_controls(&self.shared, &self.store))
        })
    }

    /// [`Warden::screen`], awaiting the store when the controls must be
    /// read first.
    #[cfg(feature = "async")]
    pub async fn screen_async(&self, ip: &str) -> Option<Listed> {
        crate::store::one_wait::within_async(async {
            if !self.clock.limiting() {
                return None;
            }
            self.judge(
                ip,
                view::current_controls_async(&self.shared, &self.store).await,
            )
        })
        .await
    }

    fn judge(&self, ip: &str, shared: Arc<Shared>) -> Option<Listed> {
        if !shared.switches.enabled || !shared.has_nets() {
            return None;
        }
        let now_ms = self.clock.now_ms();
        let (list, listing) = shared.judge_ip(crate::net::parse_hop(ip)?, now_ms)?;
        let listing = listing.clone();
        Some(Listed {
            list,
            listing,
            now_ms,
            shared,
        })
    }

    /// Counts one strike of `rule` against `offender`; a key's ban holds in
    /// `scope` ("" for everywhere), an address's everywhere. See
    /// [`Limiter::penalize`].
    pub fn penalize(
        &self,
        offender: Offender<'_>,
        rule: &Fail2Ban,
        scope: &str,
        now: Option<f64>,
    ) -> Result<Strike> {
        let calls = ControlCalls::blocking(&*self.store);
        crate::store::one_wait::within(|| {
            in_place(self.penalize_in(&calls, offender, rule, scope, now))
        })
    }

    /// [`Warden::penalize`], awaited.
    #[cfg(feature = "async")]
    pub async fn penalize_async(
        &self,
        offender: Offender<'_>,
        rule: &Fail2Ban,
        scope: &str,
        now: Option<f64>,
    ) -> Result<Strike> {
        let calls = ControlCalls::awaited(&*self.store);
        crate::store::one_wait::within_async(self.penalize_in(&calls, offender, rule, scope, now))
            .await
    }

    /// [`Warden::penalize`]'s one definition, over the store's `calls`.
    async fn penalize_in(
        &self,
        calls: &dyn AsyncControlStore,
        offender: Offender<'_>,
        rule: &Fail2Ban,
        scope: &str,
        now: Option<f64>,
    ) -> Result<Strike> {
        let now_ms = now
            .map(now_to_ms)
            .transpose()?
            .or_else(|| self.clock.frozen());
        let (tag, target) = match offender {
            Offender::Key(key) => {
                if key.is_empty() {
                    return Err(Error::config("the key is empty"));
                }
                (key_tag(key), Target::Key(key.to_vec()))
            }
            Offender::Address(ip) => {
                let network = crate::net::client_network(ip)?;
                let text = crate::net::client_text(&network);
                (key_tag(text.as_bytes()), Target::Net(network))
            }
        };
        let outcome = async {
            let strike = calls.strike_async(&tag, rule, now_ms).await?;
            if let Some(until_ms) = strike.until_ms {
                let reason = format!("fail2ban {}", rule.name);
                store::controls::put_target(
                    calls,
                    List::Block,
                    target,
                    scope,
                    until_ms,
                    &reason,
                    now_ms,
                )
                .await?;
            }
            Ok(strike)
        };
        match outcome.await {
            Err(Error::Storage(_)) if self.on_error != OnError::Raise => Ok(Strike {
                strikes: 0,
                banned: self.on_error == OnError::Deny,
                until_ms: None,
            }),
            other => other,
        }
    }
}
