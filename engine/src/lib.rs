//! # ratekeeper-engine
//!
//! The compact sliding log of ratekeeper, over a byte buffer, with no I/O.
//! The Redis module (`module/`) runs it inside Redis; the Lua scripts
//! (`engine/lua/`: `bands.lua` and `log.lua`, called by `check.lua`) run the
//! same algorithm for Redis servers that load no modules, and a differential test (`core/tests/integration/engine_differential.rs`)
//! holds the two to equal replies and equal bytes. The core re-exports this
//! crate as `ratekeeper_core::engine`.
//!
//! It may use nothing but the standard library: no other crate, no I/O, no
//! clock (every time is an argument), so that the module inside Redis and
//! the core outside it run the same code.
//!
//! ## The log
//!
//! Each key's log is ONE byte string (in Redis, `<prefix>:{<key>}:l`) of
//! **entries**: an admitted check writes one entry, its time and its cost,
//! however large the cost. Numbers are big-endian, 5 bytes unless said
//! otherwise:
//!
//! * a header: [`layout::GUARD`] (12 bytes, which the previous format's
//!   releases read as a log they cannot use and refuse rather than
//!   overwrite), the version ([`layout::VERSION`], 1 byte), the rule count
//!   (1 byte), flags (1 byte: [`layout::EXACT`]), the newest entry's time (6
//!   bytes), when the key's TTL runs out by the server clock (6 bytes; 0:
//!   unknown), every rule's window, then per rule its **band**'s fields
//!   ([`layout::BAND`]): its ring's capacity, head and length, the running
//!   total before its front, its front's and its back's times, and its back's
//!   running total: 27 + 40 × rules bytes;
//! * each band's ring, in rule order: `capacity` entries of 10 bytes, a time
//!   (ms modulo 2^40, read back relative to the newest one: exact across 34
//!   years, and the longest window is 366 days) and the band's running total
//!   after the entry (modulo 2^40: an entry's units are its total less the
//!   one before it).
//!
//! Rule `i`'s band holds the entries inside its window that every shorter
//! window no longer sees, oldest first; its window's count is the units of
//! its band and of every shorter one's, kept in the header, so a check's
//! work does not grow with its cost or the limits. A check moves the entries
//! that left a window to the next band whose window still holds them (the
//! longest window's band first), reading a ring only where entries leave
//! it; when it is denied it finds when enough units will have left by a
//! binary search of the running totals.
//!
//! **Merging.** An entry that joins a band in the same step of its window
//! (1/1024 of the window rounded up, [`layout::step`]) as the band's newest
//! entry merges into it, stamped with the newer time: its units leave a window
//! late by at most the steps of that window's band and the shorter ones',
//! never early. So a window never holds more than its limit, a denial is at
//! most that too cautious, and a band holds at most about 1,024 entries
//! ([`layout::most_entries`]) whatever the traffic. Windows up to 1,024 ms
//! step by the millisecond, where entries of one millisecond are one time
//! anyway: nothing changes. A rule set with [`layout::EXACT`] keeps every
//! entry (up to [`layout::MAX_ENTRIES`] per band).
//!
//! **Settling.** A reservation is a check of an estimate; its settle
//! ([`log::Settle`], mode `s` of the script) has the entry that holds the
//! reservation's units (the oldest from its time on) give back what the work
//! did not use, in place: that entry and the newer ones of its band are
//! written again with their running totals lowered (an entry left with no
//! units is taken out), then any overrun is logged at the settle's time
//! whatever the limits say. A log written for other rules is rebuilt for
//! the settle's, giving the refund back on the way.
//!
//! A ring that is full is rewritten at twice its capacity (at least 4, at
//! most its band's most); otherwise a check patches the entries it added and
//! the header in place. A log written for other rules (or flags) is rebuilt
//! for the new ones, keeping every unit still inside the longest window; a
//! log of the previous format ([`legacy`]: a 5-byte timestamp per unit) is
//! read the same way, once, and written in this one. A log of a newer format
//! is refused by name ([`log::Damaged::Newer`]). The key's TTL is its longest
//! window plus a quarter (at least a second), renewed on the server clock once
//! per quarter window rather than on every check. One key's clock never runs
//! backwards: a check older than the newest entry is taken at its time.

//! ## The commands
//!
//! [`command`] reads the check's arguments and the key's record
//! (safelist, blocklist, tier, override) as `check.lua` does and picks the
//! rules ([`packed`]: the same arguments and reply, each as one string, as
//! clients send them to the module); [`log::check`] runs the check and says what to write
//! ([`log::Write`]): nothing, a patch of ranges (`SETRANGE`s) with the TTL
//! maybe renewed, or a whole new string. [`record`] reads the arguments of
//! `record.lua` (a record change, a fail2ban strike).

pub mod band;
pub mod command;
pub mod layout;
pub mod legacy;
pub mod log;
pub mod packed;
pub mod record;
pub mod rules;
pub mod seen;
pub mod settle;
pub mod write;

/// The engine's Lua twins, for Redis servers that load no modules (most
/// managed Redis): the same algorithm and byte layout, held to the engine by
/// the differential test.
pub mod lua {
    /// Checks and logs one key against a rule set: `engine/lua/bands.lua`
    /// (the check's state and the functions on a log's bands), then
    /// `engine/lua/log.lua` (the check, the function `check`), then
    /// `engine/lua/check.lua`, which calls it.
    pub const CHECK_SCRIPT: &str = concat!(
        include_str!("../lua/bands.lua"),
        include_str!("../lua/log.lua"),
        include_str!("../lua/check.lua")
    );
    /// Checks (peeks, settles) a key's several meters, each a log of its
    /// own, all or nothing: `bands.lua` and `log.lua`, then
    /// `engine/lua/meters.lua`, which calls `check` once per meter.
    pub const METERS_SCRIPT: &str = concat!(
        include_str!("../lua/bands.lua"),
        include_str!("../lua/log.lua"),
        include_str!("../lua/meters.lua")
    );
    /// Holds a slot of a key's in-flight rule and checks its rates, in one
    /// step: `bands.lua` and `log.lua`, then `engine/lua/hold.lua`.
    pub const HOLD_SCRIPT: &str = concat!(
        include_str!("../lua/bands.lua"),
        include_str!("../lua/log.lua"),
        include_str!("../lua/hold.lua")
    );
    /// Releases, extends or lists a key's leases (`engine/lua/leases.lua`).
    pub const LEASES_SCRIPT: &str = include_str!("../lua/leases.lua");
    /// Changes a key's record and counts fail2ban strikes (`engine/lua/record.lua`).
    pub const RECORD_SCRIPT: &str = include_str!("../lua/record.lua");
}

pub use command::{parse_check, select, ArgError, CheckArgs, Record, Selected};
pub use log::{check, check_in, Check, Damaged, Edits, Rules, Scratch, Seen, Write};
