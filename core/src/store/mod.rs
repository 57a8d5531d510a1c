//! Where logs live: the [`Store`] trait, its two implementations, and the
//! store URL (`memory://`, `redis://`, `rediss://`, `redis+cluster://`).

mod breaker;
mod calls;
pub mod controls;
mod memory;
pub mod one_wait;
mod pool;
mod redis;
mod signals;
mod url;

pub use self::breaker::StoreStats;
pub use self::calls::{in_place, AsyncControlStore, ControlCalls, ControlStore, HashFields};
pub use self::memory::MemoryStore;
pub use self::redis::{ModuleUse, RedisStore, SCRIPT as REDIS_SCRIPT};
pub use self::url::redact;

use crate::decision::Observation;
use crate::error::{Error, Result};
use crate::in_flight::{Held, LeaseCall};
use crate::rule::RuleSet;
use std::sync::Arc;
use std::time::Duration;

/// Whether a call may log units (a check), must leave the log alone (a
/// peek), or settles a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Log `cost` units when every rule admits them.
    Check,
    /// Only observe.
    Peek,
    /// Settle the reservation logged at `at_ms`: give back `refund` of its
    /// units, and log `cost` (what the work cost over the estimate) whatever
    /// the limits say (see [`crate::engine::log::Settle`]).
    Settle {
        /// The reservation's time: its check's `now`.
        at_ms: u64,
        /// Units it gives back.
        refund: u64,
    },
}

impl Mode {
    /// Whether the call writes the log (a check or a settle).
    pub fn writes(self) -> bool {
        self != Mode::Peek
    }

    /// The engine's settle, for a settle.
    pub fn settle(self) -> Option<crate::engine::log::Settle> {
        match self {
            Mode::Settle { at_ms, refund } => Some(crate::engine::log::Settle {
                at: at_ms.min(crate::engine::command::MAX_NOW as u64) as i64,
                refund: refund.min(crate::engine::command::MAX_COST as u64) as i64,
            }),
            _ => None,
        }
    }
}

/// One check (or peek) of a batch: see [`LogStore::apply_many`].
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The key's tag (see [`crate::keys::key_tag`]).
    pub tag: &'a [u8],
    /// Keeps this limiter's logs apart from others' for the same key ("" for none).
    pub scope: &'a str,
    /// The rules to check it against, unless the key's record selects others.
    pub rules: &'a RuleSet,
    /// The tiers a tier stored in the key's record may select.
    pub tiers: &'a [(String, RuleSet)],
    /// Whether to read the key's record (listings, tier, override).
    pub read_record: bool,
    /// Units the check costs.
    pub cost: u64,
    /// Its time in ms, or `None` for the store's clock.
    pub now_ms: Option<u64>,
    /// Check or peek.
    pub mode: Mode,
}

impl<'a> Request<'a> {
    /// The cost as a log takes it. A cost above every limit can never pass
    /// and never logs a unit, so any cost past the largest limit a rule may
    /// have goes to the log as one more than that limit: the log's arithmetic
    /// stays in range on every store, whatever the caller asked.
    pub fn log_cost(&self) -> i64 {
        self.cost.min(crate::engine::command::MAX_COST as u64) as i64
    }

    /// A request with no scope, no tiers and no record.
    pub fn plain(
        tag: &'a [u8],
        rules: &'a RuleSet,
        cost: u64,
        now_ms: Option<u64>,
        mode: Mode,
    ) -> Request<'a> {
        Request {
            tag,
            scope: "",
            rules,
            tiers: &[],
            read_record: false,
            cost,
            now_ms,
            mode,
        }
    }
}

/// The log half of a store: one sliding log per key, a check applied to it
/// atomically. A store that keeps no controls implements only this (and an
/// empty [`ControlStore`]).
pub trait LogStore: Send + Sync {
    /// Reads the key's record (when asked) and observes its log
    /// against the rules that apply at `now_ms` (the store's own clock when
    /// `None`); in [`Mode::Check`] logs `cost` units at that time when every
    /// rule admits them — all in one atomic step. A listed key is not logged.
    fn apply(&self, request: &Request<'_>) -> Result<Observation>;

    /// Applies several requests, each atomically on its own, in one round
    /// trip where the store allows it; the outcomes come back in order.
    fn apply_many(&self, requests: &[Request<'_>]) -> Vec<Result<Observation>> {
        requests.iter().map(|r| self.apply(r)).collect()
    }

    /// Applies requests to one key's several logs (its meters: one tag,
    /// a scope each) in one atomic step, all or nothing: in [`Mode::Check`]
    /// every log is logged only when each admits its cost (each
    /// observation's `allowed` says whether its own log would). A peek
    /// logs nothing; a settle is applied to each. No record is read.
    fn apply_together(&self, requests: &[Request<'_>]) -> Result<Vec<Observation>>;

    /// A hold of a rule set with an in-flight rule (see [`crate::in_flight`]):
    /// in one atomic step, counts the key's live leases and checks its rates
    /// (none when the set has only the in-flight rule); in [`Mode::Check`],
    /// when a slot is free and every rate admits, logs the cost and takes
    /// the lease `id`, lapsing `lease_ms` from now. A peek takes nothing.
    /// The observation's `leases` says what was seen and taken.
    fn hold(&self, request: &Request<'_>, id: &str, lease_ms: u64) -> Result<Observation>;

    /// Releases, extends or lists the key's leases in `scope`, at `now_ms`
    /// (the store's clock when `None`): the lease released or extended (with
    /// its lapse time), or every live one; none for a lease that lapsed.
    fn leases(
        &self,
        tag: &[u8],
        scope: &str,
        call: LeaseCall<'_>,
        now_ms: Option<u64>,
    ) -> Result<Vec<Held>>;

    /// Forgets everything logged for `tag` in `scope` (its leases too).
    fn reset(&self, tag: &[u8], scope: &str) -> Result<()>;
}

/// How a store is reached, beside what it keeps: its clock, the calls made
/// to it, whether they wait on the network, and its awaitable form. The
/// defaults are an in-process store's, save that a call is taken to wait.
pub trait StoreAccess: Send + Sync {
    /// The store's clock, in ms since the epoch.
    fn clock_ms(&self) -> Result<u64> {
        Ok(system_now_ms())
    }

    /// How often the store was called, failed, and was spared by its
    /// circuit breaker, and which way its checks go.
    fn stats(&self) -> StoreStats {
        StoreStats {
            path: "memory",
            ..StoreStats::default()
        }
    }

    /// Whether a call may wait on the network: bindings release the GIL or
    /// GVL around such calls only, since releasing costs more than a memory check.
    fn waits_on_io(&self) -> bool {
        true
    }

    /// The awaitable form of this log, when the store has one (Redis); a
    /// store without one answers in-process at once (memory).
    #[cfg(feature = "async")]
    fn as_async(&self) -> Option<&dyn AsyncLogStore> {
        None
    }

    /// The awaitable form of its controls, when the store has one (Redis);
    /// [`ControlCalls::awaited`] makes a store's blocking calls in place
    /// without one (memory, which answers at once).
    #[cfg(feature = "async")]
    fn as_async_controls(&self) -> Option<&dyn AsyncControlStore> {
        None
    }
}

/// A whole store: its log, its controls, and how it is reached.
pub trait Store: LogStore + ControlStore + StoreAccess {}

impl<T: LogStore + ControlStore + StoreAccess + ?Sized> Store for T {}

/// A boxed future, as the awaitable log and controls return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The awaitable form of a log (see [`LogStore`]): the same calls, answered
/// without blocking a thread (Redis: one multiplexed connection per process,
/// which concurrent checks share).
#[cfg(feature = "async")]
pub trait AsyncLogStore: Send + Sync {
    /// [`LogStore::apply`], awaited.
    fn apply_async<'a>(&'a self, request: &'a Request<'a>) -> BoxFuture<'a, Result<Observation>>;

    /// [`LogStore::apply_many`], awaited (one pipeline on a single Redis).
    fn apply_many_async<'a>(
        &'a self,
        requests: &'a [Request<'a>],
    ) -> BoxFuture<'a, Vec<Result<Observation>>>;

    /// [`LogStore::apply_together`], awaited.
    fn apply_together_async<'a>(
        &'a self,
        requests: &'a [Request<'a>],
    ) -> BoxFuture<'a, Result<Vec<Observation>>>;

    /// [`LogStore::hold`], awaited.
    fn hold_async<'a>(
        &'a self,
        request: &'a Request<'a>,
        id: &'a str,
        lease_ms: u64,
    ) -> BoxFuture<'a, Result<Observation>>;

    /// [`LogStore::leases`], awaited.
    fn leases_async<'a>(
        &'a self,
        tag: &'a [u8],
        scope: &'a str,
        call: LeaseCall<'a>,
        now_ms: Option<u64>,
    ) -> BoxFuture<'a, Result<Vec<Held>>>;

    /// [`LogStore::reset`], awaited.
    fn reset_async<'a>(&'a self, tag: &'a [u8], scope: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// The default wait for one Redis command and for a new connection: 250 ms.
///
/// A healthy Redis answers a check in well under a millisecond, but a busy
/// one stalls now and then: the `fork` of a `BGSAVE` or AOF rewrite blocks it
/// for about 10-20 ms per GB of data, and a slow disk can hold an fsync. A
/// timeout is a check that falls back to `on_error` (admitted, by default), so
/// it should outlast those stalls (the p99.9 of a busy Redis with a few GB)
/// rather than turn each into a burst of unlimited requests; and it should be
/// short enough that a request waiting on a dead Redis, before the circuit
/// breaker opens, is still answered in a fraction of a second.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// `pool_size`, checked (here and nowhere else): 1 to 1024 connections.
pub fn check_pool_size(n: i128) -> Result<u32> {
    if (1..=1024).contains(&n) {
        Ok(n as u32)
    } else {
        Err(Error::config(format!(
            "invalid pool_size {n}: give 1 to 1024"
        )))
    }
}

/// `max_keys`, checked (here and nowhere else): at least 1.
pub fn check_max_keys(n: i128) -> Result<usize> {
    if n < 1 {
        return Err(Error::config(format!(
            "invalid max_keys {n}: give at least 1"
        )));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Options that shape a store; the defaults suit a web app.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// First part of every Redis key (`<prefix>:{<key>}:l`); no braces.
    pub prefix: String,
    /// Longest wait for one Redis command (see [`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// Longest wait for a new Redis connection.
    pub connect_timeout: Duration,
    /// Most Redis connections kept open by this process.
    pub pool_size: u32,
    /// Most keys the memory store holds before it evicts the soonest to expire.
    pub max_keys: usize,
    /// Whether Redis checks use the ratekeeper module (see [`ModuleUse`]).
    pub redis_module: ModuleUse,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            prefix: "rk".to_owned(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_TIMEOUT,
            pool_size: 16,
            max_keys: 1_000_000,
            redis_module: ModuleUse::Auto,
        }
    }
}

impl StoreOptions {
    /// Checks the options, naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        check_prefix(&self.prefix)?;
        // (the settings' own bound, for options made without settings)
        for (name, value) in [
            ("timeout", self.timeout),
            ("connect_timeout", self.connect_timeout),
        ] {
            crate::time::option_seconds(name, value.as_secs_f64(), false)?;
        }
        check_pool_size(i128::from(self.pool_size))?;
        check_max_keys(self.max_keys as i128)?;
        Ok(())
    }
}

/// The two kinds of store a URL can name.
enum UrlKind {
    Memory,
    Redis,
}

/// Which kind of store `url` names, refusing what names none.
fn url_kind(url: &str) -> Result<UrlKind> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("memory") if url["memory://".len()..].is_empty() => Ok(UrlKind::Memory),
        Some("memory") => Err(Error::config(format!(
            "invalid store URL '{}': memory:// takes no host or path (set max_keys as an option)",
            redact(url)
        ))),
        Some(
            "redis" | "rediss" | "redis+cluster" | "rediss+cluster" | "redis+sentinel"
            | "rediss+sentinel",
        ) => Ok(UrlKind::Redis),
        _ => Err(Error::config(format!(
            "invalid store URL '{}': use memory://, redis://host:port/db, rediss://..., redis+cluster://host:port,host:port or redis+sentinel://host:port/master",
            redact(url)
        ))),
    }
}

/// Checks a store URL as [`open`] would, without connecting to anything
/// (the files its TLS parameters name are read).
pub fn check_url(url: &str) -> Result<()> {
    match url_kind(url)? {
        UrlKind::Memory => Ok(()),
        UrlKind::Redis => self::url::StoreUrl::parse(url).map(|_| ()),
    }
}

/// Checks a key prefix: 1 to 64 characters without `{` or `}` (which
/// would pick the Cluster slot).
pub fn check_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() || prefix.len() > 64 || prefix.contains(['{', '}']) {
        return Err(Error::config(format!(
            "invalid prefix '{}': give 1 to 64 characters without '{{' or '}}'",
            prefix.escape_debug()
        )));
    }
    Ok(())
}

/// Opens the store a URL names: `memory://`, `redis://host:port/db`,
/// `rediss://...` or `redis+cluster://host1:port1,host2:port2`.
pub fn open(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>> {
    options.validate()?;
    match url_kind(url)? {
        UrlKind::Memory => Ok(Arc::new(MemoryStore::new(options.max_keys))),
        UrlKind::Redis => Ok(Arc::new(RedisStore::open(url, options)?)),
    }
}

pub use crate::time::system_now_ms;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_urls_and_options() {
        let options = StoreOptions::default();
        for url in ["", "http://x", "memory://x", "mysql://h"] {
            let message = open(url, &options).err().unwrap().to_string();
            assert!(message.contains(&format!("'{url}'")), "{message}");
        }
        let bad_prefix = StoreOptions {
            prefix: "a{b".into(),
            ..StoreOptions::default()
        };
        assert!(open("memory://", &bad_prefix)
            .err()
            .unwrap()
            .to_string()
            .contains("prefix"));
        let bad_pool = StoreOptions {
            pool_size: 0,
            ..StoreOptions::default()
        };
        assert!(open("memory://", &bad_pool)
            .err()
            .unwrap()
            .to_string()
            .contains("pool_size"));
        let bad_timeout = StoreOptions {
            timeout: Duration::ZERO,
            ..StoreOptions::default()
        };
        assert!(open("memory://", &bad_timeout)
            .err()
            .unwrap()
            .to_string()
            .contains("timeout"));
    }
}
