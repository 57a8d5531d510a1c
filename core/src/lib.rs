//! # ratekeeper-core
//!
//! Exact multi-rule sliding-log rate limiting, shared by the Python and Ruby
//! bindings. A [`Limiter`] checks a key against a [`RuleSet`] (say
//! `1/second; 20/minute; 200/hour; 800/day`) on a [`Store`]: in-process
//! ([`MemoryStore`], `memory://`) or Redis ([`RedisStore`], `redis://`,
//! `redis+cluster://`), where a check is ONE call however many rules there
//! are (the ratekeeper Redis module's command, or an `EVALSHA`), timed by the
//! Redis server clock.
//!
//! It holds every decision, default, validation and HTTP answer the doors
//! give; the bindings (`python/`, `ruby/`) and the edge server (`server/`)
//! convert and call it. It may use the log engine (`ratekeeper-engine`, the
//! one crate of this workspace it depends on), the redis crate for Redis,
//! and small libraries for hashing, TOML and JSON; never a binding, and
//! never Python or Ruby.
//!
//! ```
//! use ratekeeper_core::{Limiter, OnError, RuleSet, StoreOptions};
//! let rules = RuleSet::parse("2/second; 5/minute").unwrap();
//! let limiter = Limiter::open(rules, "memory://", &StoreOptions::default(), OnError::Allow).unwrap();
//! assert!(limiter.check(b"user:42", 1, Some(1000.0)).unwrap().allowed());
//! assert!(limiter.check(b"user:42", 1, Some(1000.1)).unwrap().allowed());
//! let third = limiter.check(b"user:42", 1, Some(1000.2)).unwrap();
//! assert!(!third.allowed());
//! assert_eq!(third.retry_after_ms, Some(800));
//! ```
//!
//! ## Semantics
//!
//! A check of key `k` with cost `c` at time `t` is admitted iff, for every
//! rule `(L, W)`, the units admitted for `k` in the half-open window
//! `(t − W, t]` plus `c` is at most `L`. Admitted, `c` units are logged at
//! `t`; denied, nothing is logged. See [`Decision`] for what is reported.
//! A check earlier than the newest unit of its key is taken at that unit's
//! time: one key's clock never runs backwards.
//!
//! ## The Redis log format
//!
//! Each key is ONE Redis string, `<prefix>:{<key>}:l`: a header and a ring
//! of 5-byte timestamps, described once in [`engine`] (the log engine,
//! `ratekeeper-engine`). On a Redis with the ratekeeper module loaded
//! (`module/`), a check is one `RATEKEEPER.CHECK`, which runs that engine
//! inside Redis; elsewhere it is one `EVALSHA` of the script
//! [`store::REDIS_SCRIPT`] (`engine/lua/check.lua`, after `bands.lua` and
//! `log.lua`), its Lua twin. Both take
//! the same keys and arguments and leave the same bytes (a differential test
//! holds them to it), so clients pick whichever the server has (the option
//! `redis_module`) and a fleet can switch at any time.
//!
//! Measured on Redis 7.0.15 (`MEMORY USAGE`, by `core/tests/redis_footprint.rs`,
//! which asserts ≤ 6 bytes per unit and equal command counts):
//!
//! | log | Redis memory | per logged unit |
//! | --- | --- | --- |
//! | `100000/day`, full (100,000 units) | 524,376 bytes | 5.24 bytes |
//! | `1/s; 20/m; 200/h; 800/d`, full (800 units) | 4,184 bytes | 5.23 bytes |
//! | a LIST of the same 100,000 integers, for comparison | 1,008,023 bytes | 10.08 bytes |
//!
//! Per check, on a full log where each check pushes one unit out and logs
//! one (same test; Redis `INFO commandstats`):
//!
//! | rule | Redis commands per check (script's own included) | `EVALSHA` µs per call |
//! | --- | --- | --- |
//! | `10/second` | 6.00 | 27.4 |
//! | `100000/day` | 6.00 | 27.4 |
//!
//! A `100000/day` check costs what a `10/second` one does (ratio 1.00).

pub use ratekeeper_engine as engine;

pub mod admin;
pub mod audit;
pub mod clock;
pub mod controls;
pub mod decision;
pub mod denial_cache;
pub mod denials;
pub mod error;
pub mod gate;
pub mod http;
pub mod in_flight;
pub mod keys;
pub mod limiter;
pub mod meter;
pub mod metrics;
pub mod net;
pub mod plain;
pub mod process;
pub mod rule;
pub mod settings;
pub mod store;
pub mod testing;
pub mod time;

pub use admin::{Admin, Entry};
pub use clock::Clock;
pub use controls::{Fail2Ban, List, Listing, Strike, Switches, TargetOptions};
pub use decision::{Decision, MeterSpan, Observation, Outcome, RuleObservation, RuleState};
pub use error::{Error, Result};
pub use http::{Answer, HeaderStyle, Responses};
pub use in_flight::{InFlight, Lease};
pub use keys::{identity, scope_name};
#[cfg(feature = "async")]
pub use limiter::check_batch_async;
pub use limiter::{
    actual_cost_from, check_batch, cost_from, flush_denials, flush_denials_at_exit, Acquired,
    Asked, BatchItem, CheckOptions, Hold, Limiter, Meter, MeterSettled, Offender, OnError,
    Reservation, Settled,
};
pub use meter::Limits;
pub use metrics::Stats;
pub use net::{Cidr, ClientPrefixes, TrustedProxies};
pub use plain::Plain;
pub use rule::{Rule, RuleSet, RuleSpec};
pub use settings::{OptionValue, Settings};
pub use store::{
    ControlStore, LogStore, MemoryStore, Mode, ModuleUse, RedisStore, Store, StoreAccess,
    StoreOptions,
};
