//! One check of one log against one rule set: what it observes, and the
//! bytes it writes (see the crate docs for the layout and the rules it keeps).

use crate::band::{Band, Stored};
pub use crate::layout::Damaged;
use crate::layout::{
    band_at, dec6, flags, guarded, header_len, most_entries, range, step, unstamp, BAND, ENTRY,
    EXPIRE_AT, FIXED, FLAGS_AT, GUARD, MAX_COST, MAX_LIMIT, NEWEST_AT, SPAN, VERSION,
};
use crate::legacy;
pub use crate::rules::Rules;
pub use crate::seen::{RuleSeen, Seen};
use crate::settle::Refund;
pub use crate::settle::Settle;
use crate::write::{patch, rewrite, Head};
pub use crate::write::{Edits, Scratch, Write};

/// One check: the stored log, the rules, and what to do.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The log's bytes as stored (empty: no log yet).
    pub stored: &'a [u8],
    /// The rules that apply.
    pub rules: &'a Rules,
    /// Units to log on admission.
    pub cost: i64,
    /// The check's time (ms).
    pub now: i64,
    /// The server's clock (ms) when the check runs on it; TTLs are kept by it.
    pub clock: Option<i64>,
    /// Log the units on admission (a check), or only observe (a peek).
    pub writing: bool,
    /// Keep every entry: never merge close ones (see the crate docs).
    pub exact: bool,
    /// A settle of a reservation rather than a check (see [`Settle`]).
    pub settle: Option<Settle>,
}

/// The time (ms) of a log's newest entry, as its header holds it (a log of
/// this format, or of the previous one).
pub fn newest(log: &[u8]) -> Option<i64> {
    if guarded(log) {
        dec6(log, NEWEST_AT)
    } else {
        legacy::newest(log)
    }
}

/// Runs one check: what it observes, and what it writes.
///
/// This is the algorithm of `engine/lua/log.lua`, step for step, so that
/// both leave the same bytes (a differential test holds them to it).
pub fn check(c: Check<'_>) -> Result<(Seen, Write), Damaged> {
    check_in(c, &mut Scratch::default())
}

/// [`check`], its results built in `scratch`'s buffers (hand them back
/// with [`Scratch::keep`]).
pub fn check_in(c: Check<'_>, scratch: &mut Scratch) -> Result<(Seen, Write), Damaged> {
    let mut bands = std::mem::take(&mut scratch.bands);
    let mut seen = std::mem::take(&mut scratch.seen);
    seen.clear();
    let outcome = run(c, &mut bands, seen, scratch);
    scratch.bands = bands;
    outcome
}

/// Sets `bands` to the rules' bands, empty, keeping their buffers.
fn empty_bands(bands: &mut Vec<Band>, rules: &Rules, exact: bool) {
    bands.truncate(rules.len());
    bands.resize_with(rules.len(), Band::default);
    let mut shorter = 0;
    for (band, &window) in bands.iter_mut().zip(&rules.windows) {
        band.empty();
        band.window = window;
        band.step = step(window, exact);
        band.most = most_entries(window - shorter, band.step);
        shorter = window;
    }
}

/// Reads the bands of a stored log: its header's fields, each ring left in
/// the stored bytes; `whole` when `stored` is the whole string, whose
/// length then bounds the rings (a check reads a ring only where it needs
/// to, as the script does).
fn read_bands(stored: &[u8], bands: &mut [Band], newest: i64, whole: bool) -> Result<(), Damaged> {
    let n = bands.len();
    let mut base = header_len(n);
    for (i, band) in bands.iter_mut().enumerate() {
        let at = band_at(n, i);
        let fields = stored.get(at..at + BAND).ok_or(Damaged::Bytes)?;
        let field = |k: usize| {
            fields[5 * k..5 * k + 5]
                .iter()
                .fold(0i64, |x, &b| x << 8 | i64::from(b))
        };
        band.cap = field(0);
        band.head = field(1);
        band.len = field(2);
        band.out = field(3);
        band.front = unstamp(newest, field(4));
        band.back = unstamp(newest, field(5));
        band.back_total = field(6);
        band.stored = band.len;
        band.base = base;
        if band.len > band.cap || (band.cap > 0 && band.head >= band.cap) {
            return Err(Damaged::Bytes);
        }
        base = base
            .checked_add(band.cap as usize * ENTRY)
            .filter(|&end| !whole || end <= stored.len())
            .ok_or(Damaged::Bytes)?;
    }
    Ok(())
}

/// Puts `units` of time `t` into the band whose window holds it at `now`
/// and no shorter window does (none: they have left every window).
fn place(bands: &mut [Band], from: usize, t: i64, units: i64, now: i64) {
    if units <= 0 {
        return;
    }
    if let Some(band) = bands[from..].iter_mut().find(|b| t + b.window > now) {
        band.push(t, units);
    }
}

/// The entries of a stored log written for other rules (or in the previous
/// format, or being settled: `refund`) put into `bands` (empty) as a log of
/// these rules would hold them at its newest time, keeping every unit still
/// inside the longest window; returns that newest time (0: the string is no
/// log, read as none).
fn rebuild(stored: &[u8], bands: &mut [Band], refund: &mut Refund) -> Result<i64, Damaged> {
    let longest = bands.last().map_or(0, |b| b.window);
    if !guarded(stored) {
        let Some(units) = legacy::units_after(stored, |newest| newest - longest)? else {
            return Ok(0);
        };
        for &(t, count) in &units.runs {
            if t > units.newest - longest {
                let count = refund.taken(t, count, units.newest, longest);
                place(bands, 0, t, count, units.newest);
            }
        }
        return Ok(units.newest);
    }
    let n = usize::from(*stored.get(13).ok_or(Damaged::Bytes)?);
    let newest = dec6(stored, NEWEST_AT).ok_or(Damaged::Bytes)?;
    let mut old = vec![Band::default(); n];
    read_bands(stored, &mut old, newest, true)?;
    let log = Stored {
        bytes: stored,
        newest,
    };
    // the oldest band first, each from its front
    for band in old.iter_mut().rev() {
        while band.len > 0 {
            let (t, units) = band.pop(log)?;
            if t > newest - longest {
                let units = refund.taken(t, units, newest, longest);
                place(bands, 0, t, units, newest);
            }
        }
    }
    Ok(newest)
}

/// [`check`] with its buffers: the bands, what each rule saw (empty), and
/// the scratch the buffers of what it writes are taken from. Its steps:
/// [`read`] the stored log into the bands, [`advance`] them to the check's
/// time, [`observe`] each rule, then write: nothing, a [`patch`] or a
/// [`rewrite`].
fn run(
    c: Check<'_>,
    bands: &mut Vec<Band>,
    seen_rules: Vec<RuleSeen>,
    scratch: &mut Scratch,
) -> Result<(Seen, Write), Damaged> {
    let rules = c.rules;
    // No rule's limit passes MAX_LIMIT, so a cost past it is denied as one
    // more than it is, and the sums below stay far inside an i64. (A
    // settle's cost, what it charges over the estimate, may be 0.)
    let least = if c.settle.is_some() { 0 } else { 1 };
    let cost = c.cost.clamp(least, MAX_COST);
    let longest = rules.windows.iter().copied().max().unwrap_or(0);
    let Read {
        fits,
        mut newest,
        mut expire_at,
        changed,
    } = read(&c, bands)?;

    // One key's clock never runs backwards: a check older than the newest
    // entry is taken at its time. After a jump of over 17 years every entry
    // is out of every window (and its stored time would be ambiguous):
    // start afresh.
    let now = c.now.max(newest);
    let jumped = now - newest >= SPAN / 2;
    if jumped {
        bands.iter_mut().for_each(Band::empty);
    }
    let log = Stored {
        bytes: c.stored,
        newest,
    };
    advance(bands, now, log)?;
    let mut seen = observe(bands, rules, cost, now, seen_rules, log)?;
    let mut cost = cost;
    if c.settle.is_some() {
        // an overrun is counted, never refused: up to a log full to the
        // largest limit (past it every check is denied, and a total wraps)
        seen.allowed = true;
        seen.rules.iter_mut().for_each(|rule| rule.free_at = -1);
        let total = seen.rules.last().map_or(0, |rule| rule.count);
        cost = cost.min(MAX_LIMIT - total).max(0);
    }
    let allowed = seen.allowed;

    // A denied check writes nothing but a log it changed as it read it (as
    // of its newest entry: a later check may be earlier than this one,
    // though never than that entry, and entries only move to longer
    // windows' bands).
    // (so is a settle that logs nothing new; an empty log stays none)
    let logs_nothing = !allowed || (c.settle.is_some() && cost == 0);
    if !c.writing || (logs_nothing && changed.is_none()) {
        return Ok((seen, Write::Nothing));
    }
    if let Some(before) = changed.filter(|_| logs_nothing) {
        *bands = before;
    }
    if allowed && cost > 0 {
        bands[0].push(now, cost);
        newest = now;
    }

    // The key outlives its newest entry by the longest window: a quarter
    // more, renewed on the server clock once per quarter window, and a
    // second at least.
    let ttl = (longest + longest / 4).max(1000);
    let grown = !fits || jumped || bands.iter().any(|b| b.len > b.cap);
    // renewed unless the TTL (known on the server clock) outlasts the longest window
    let lasts = c.clock.is_some_and(|clock| clock + longest <= expire_at);
    let renew = allowed && !lasts;
    if renew || grown {
        expire_at = c.clock.map_or(0, |clock| clock + ttl);
    }
    let head = Head {
        stored: range(c.stored, 0, header_len(rules.len())),
        fits,
        rules,
        exact: c.exact,
        newest,
        expire_at,
    };
    let write = if grown {
        rewrite(bands, &head, log, ttl, scratch)?
    } else {
        patch(bands, &head, renew.then_some(ttl), scratch)?
    };
    Ok((seen, write))
}

/// What a check read of the stored log.
struct Read {
    /// The log is of this format and these rules.
    fits: bool,
    /// Its newest entry's time.
    newest: i64,
    /// When the key expires on the server clock (0: not known).
    expire_at: i64,
    /// The bands as the read changed them, as of the log's newest entry: a
    /// log written for other rules (or in the previous format) rebuilt, or
    /// a settle's refund given back. Written even when the check is denied
    /// (or the settle logs nothing new), so that a log is rebuilt once.
    changed: Option<Vec<Band>>,
}

/// Reads the stored log into the rules' bands.
fn read(c: &Check<'_>, bands: &mut Vec<Band>) -> Result<Read, Damaged> {
    let rules = c.rules;
    let n = rules.len();
    let h = header_len(n);
    if guarded(c.stored) && c.stored[GUARD_LEN] > VERSION {
        return Err(Damaged::Newer(c.stored[GUARD_LEN]));
    }
    let hdr = range(c.stored, 0, h);
    let fits = hdr.len() == h
        && guarded(hdr)
        && hdr[GUARD_LEN] == VERSION
        && usize::from(hdr[GUARD_LEN + 1]) == n
        && hdr[FLAGS_AT] == flags(c.exact)
        && hdr[FIXED..FIXED + 5 * n] == rules.encoded[..];
    empty_bands(bands, rules, c.exact);
    let mut read = Read {
        fits,
        newest: 0,
        expire_at: 0,
        changed: None,
    };
    if fits {
        read.newest = dec6(hdr, NEWEST_AT).ok_or(Damaged::Bytes)?;
        read.expire_at = dec6(hdr, EXPIRE_AT).ok_or(Damaged::Bytes)?;
        read_bands(c.stored, bands, read.newest, false)?;
        if let Some(settle) = c.settle {
            let log = Stored {
                bytes: c.stored,
                newest: read.newest,
            };
            if settle.give_back(bands, log)? {
                read.changed = Some(bands.clone());
            }
        }
    } else if !c.stored.is_empty() {
        read.newest = rebuild(c.stored, bands, &mut Refund::of(c.settle))?;
        read.changed = Some(bands.clone());
    }
    Ok(read)
}

/// Moves the entries that left a window at `now` to the next band whose
/// window still holds them, the longest window's band first (so a band is
/// emptied of what left it before it is given more); a band whose newest
/// entry left every window is let go at once.
fn advance(bands: &mut [Band], now: i64, log: Stored<'_>) -> Result<(), Damaged> {
    let last_window = bands.last().map_or(0, |b| b.window);
    for i in (0..bands.len()).rev() {
        if bands[i].len > 0 && bands[i].back + last_window <= now {
            bands[i].drop_all();
            continue;
        }
        while bands[i].len > 0 && bands[i].front + bands[i].window <= now {
            let (t, units) = bands[i].pop(log)?;
            place(bands, i + 1, t, units, now);
        }
    }
    Ok(())
}

/// What each rule sees of a check of `cost` at `now`: each rule's window
/// holds its band and every shorter one's; a denied check, when each rule
/// would take it (once the units over its limit have left its window, its
/// oldest band's first).
fn observe(
    bands: &[Band],
    rules: &Rules,
    cost: i64,
    now: i64,
    seen_rules: Vec<RuleSeen>,
    log: Stored<'_>,
) -> Result<Seen, Damaged> {
    let mut seen = Seen {
        now,
        allowed: true,
        rules: seen_rules,
    };
    let (mut count, mut oldest) = (0, -1);
    for (i, band) in bands.iter().enumerate() {
        count += band.units();
        if band.len > 0 {
            oldest = band.front;
        }
        seen.allowed &= count + cost <= rules.limits[i];
        seen.rules.push(RuleSeen {
            count,
            oldest: if count > 0 { oldest } else { -1 },
            free_at: -1,
        });
    }
    if seen.allowed {
        return Ok(seen);
    }
    for i in 0..bands.len() {
        let limit = rules.limits[i];
        let mut need = seen.rules[i].count + cost - limit;
        if need <= 0 || cost > limit {
            continue;
        }
        for band in bands[..=i].iter().rev() {
            let units = band.units();
            if need <= units {
                seen.rules[i].free_at = band.free_at(need, rules.windows[i], log)?;
                break;
            }
            need -= units;
        }
    }
    Ok(seen)
}

/// Where the format's version sits: right after the guard.
const GUARD_LEN: usize = GUARD.len();

#[cfg(test)]
mod tests;
