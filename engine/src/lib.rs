//! # ratekeeper-engine
//!
//! The compact sliding log of ratekeeper, over a byte buffer, with no I/O.
//! The Redis module (`module/`) runs it inside Redis; the Lua script
//! `engine/lua/check.lua` runs the same algorithm for Redis servers that load
//! no modules, and a differential test (`core/tests/integration/engine_differential.rs`)
//! holds the two to equal replies and equal bytes. The core re-exports this
//! crate as `ratekeeper_core::engine`.
//!
//! ## The log
//!
//! Each key's log is ONE byte string (in Redis, `<prefix>:{<key>}:l`):
//!
//! * a header (numbers big-endian, 5 bytes unless said otherwise): version
//!   ([`layout::VERSION`], 1 byte), rule count (1 byte), `N` the number of
//!   units ever logged, the ring capacity (at least the largest limit), the
//!   ring slots allocated, the newest timestamp (6 bytes), when the key's TTL
//!   runs out by the server clock (6 bytes; 0: unknown), every rule's window,
//!   and per rule `p`, the number of the oldest unit inside its window, and
//!   that unit's timestamp: 29 + 15 × rules bytes;
//! * a ring of 5-byte timestamps, one per logged unit: unit `s` sits in slot
//!   `s % capacity`, so only the newest `max(limit)` units are kept, which is
//!   all an exact sliding log over these rules needs. A timestamp is stored in
//!   milliseconds modulo 2^40 and read back relative to the newest one (exact
//!   across 34 years; the longest window is 366 days).
//!
//! Why this shape: a rule's pointer `p` only moves forward, so a check reads
//! the header, reads ring entries only for units that leave a window (the
//! next 32 at once, then a binary search for a burst), and writes the new
//! units and the header in place. Its cost depends on the number of rules,
//! not on the limits. While the ring is still filling, the string is
//! rewritten with as many slots as its allocation (a jemalloc size class,
//! [`layout::size_class`]) holds anyway, instead of being grown in place,
//! which would make Redis reserve up to twice the bytes: a unit costs 5 bytes
//! plus the allocator's rounding. A log written for other rules is rebuilt
//! for the new ones, keeping every unit still inside the longest window. The
//! key's TTL is its longest window plus a quarter (at least a second),
//! renewed on the server clock once per quarter window rather than on every
//! check. One key's clock never runs backwards: a check older than the newest
//! unit is taken at that unit's time.
//!
//! ## The commands
//!
//! [`command`] reads the check's arguments and the key's policy record
//! (safelist, blocklist, tier, override) as `check.lua` does and picks the
//! rules ([`packed`]: the same arguments and reply, each as one string, as
//! clients send them to the module); [`log::check`] runs the check and says what to write
//! ([`log::Write`]): nothing, a patch of ranges (`SETRANGE`s) with the TTL
//! maybe renewed, or a whole new string. [`policy`] reads the arguments of
//! `policy.lua` (a record change, a fail2ban strike).

pub mod command;
pub mod layout;
pub mod log;
pub mod packed;
pub mod policy;

/// The engine's Lua twins, for Redis servers that load no modules (most
/// managed Redis): the same algorithm and byte layout, held to the engine by
/// the differential test.
pub mod lua {
    /// Checks and logs one key against a rule set (`engine/lua/check.lua`).
    pub const CHECK_SCRIPT: &str = include_str!("../lua/check.lua");
    /// Changes a key's policy record and counts fail2ban strikes (`engine/lua/policy.lua`).
    pub const POLICY_SCRIPT: &str = include_str!("../lua/policy.lua");
}

pub use command::{parse_check, select, ArgError, CheckArgs, Record, Selected};
pub use log::{check, check_in, Check, Damaged, Edits, Rules, Scratch, Seen, Write};
