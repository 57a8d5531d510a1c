//! One check of one log against one rule set: what it observes, and the
//! bytes it writes (see the crate docs for the layout and the rules it keeps).

use crate::layout::{
    dec5, dec6, enc5, enc6, header_len, newest, pointers_at, range, sds_extra, size_class, FIXED,
    MAX_STRING, SPAN, UNIT, VERSION,
};

/// The rules a check applies, shortest window first, as the header stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// Each rule's limit (1 to 2^40 - 1).
    pub limits: Vec<i64>,
    /// Each rule's window in ms (1 to 2^40 - 1).
    pub windows: Vec<i64>,
    /// The windows as 5-byte big-endian numbers, as the header holds them.
    pub encoded: Vec<u8>,
}

impl Rules {
    /// Rules from (limit, window ms) pairs.
    pub fn new(pairs: &[(i64, i64)]) -> Rules {
        let mut rules = Rules::with_capacity(pairs.len());
        for &(limit, window) in pairs {
            rules.push(limit, window);
        }
        rules
    }

    /// No rules yet, with room for `n`.
    pub fn with_capacity(n: usize) -> Rules {
        Rules {
            limits: Vec::with_capacity(n),
            windows: Vec::with_capacity(n),
            encoded: Vec::with_capacity(5 * n),
        }
    }

    /// Adds a rule (its window the longest so far).
    pub fn push(&mut self, limit: i64, window: i64) {
        self.limits.push(limit);
        self.windows.push(window);
        self.encoded.extend_from_slice(&enc5(window));
    }

    /// How many rules.
    pub fn len(&self) -> usize {
        self.limits.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// Forgets every rule, keeping the room they took.
    pub fn clear(&mut self) {
        self.limits.clear();
        self.windows.clear();
        self.encoded.clear();
    }
}

/// The buffers checks are made in, handed back after each one so that a
/// caller making many (the module, on Redis's thread) allocates none: the
/// rules of parsed arguments ([`Scratch::rules`], [`Scratch::keep_rules`]),
/// the check's pointers, what it saw and the bytes it writes
/// ([`check_in`], [`Scratch::keep`]). A buffer not handed back is simply
/// made again.
#[derive(Debug, Default)]
pub struct Scratch {
    pointers: Vec<Pointer>,
    seen: Vec<RuleSeen>,
    bytes: Vec<u8>,
    rules: Vec<Rules>,
}

/// The largest buffer of bytes [`Scratch`] keeps: a rewrite of a long log
/// hands back its whole string, which is not held on to.
const KEPT_BYTES: usize = 4096;

impl Scratch {
    /// An empty rule set, in kept buffers when there are some.
    pub fn rules(&mut self) -> Rules {
        let mut rules = self.rules.pop().unwrap_or_else(|| Rules::with_capacity(4));
        rules.clear();
        rules
    }

    /// Takes back a rule set's buffers.
    pub fn keep_rules(&mut self, rules: Rules) {
        if self.rules.len() < MAX_KEPT_RULES {
            self.rules.push(rules);
        }
    }

    /// Takes back the buffers of a check's results.
    pub fn keep(&mut self, seen: Seen, write: Write) {
        self.seen = seen.rules;
        let bytes = match write {
            Write::Nothing => return,
            Write::Patch { edits, .. } => edits.bytes,
            Write::Rewrite { bytes, .. } => bytes,
        };
        if bytes.capacity() <= KEPT_BYTES {
            self.bytes = bytes;
        }
    }
}

/// The most rule sets [`Scratch`] keeps (a check's own and a few tiers').
const MAX_KEPT_RULES: usize = 8;

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
}

/// What a check saw of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleSeen {
    /// Units in the window before this check.
    pub count: i64,
    /// The oldest unit in the window (-1: none).
    pub oldest: i64,
    /// When the check would fit (-1: it does or never will).
    pub free_at: i64,
}

/// What a check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The check's time, never before the log's newest unit.
    pub now: i64,
    /// Whether every rule admits it.
    pub allowed: bool,
    /// Per rule, in order.
    pub rules: Vec<RuleSeen>,
}

/// The bytes a check writes, and the key's TTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Nothing changes.
    Nothing,
    /// Overwrite these ranges (as `SETRANGE`), and renew the TTL when given (ms).
    Patch {
        /// The ranges, in the order the script writes them.
        edits: Edits,
        /// The TTL to set, when it is renewed.
        ttl_ms: Option<i64>,
    },
    /// Replace the whole string (as `SET ... PX`).
    Rewrite {
        /// The new string.
        bytes: Vec<u8>,
        /// Its TTL.
        ttl_ms: i64,
    },
}

/// The ranges a patch overwrites, in order, their bytes held in one buffer
/// (a check writes at most three: the new units, those that wrap around the
/// ring, and the header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edits {
    bytes: Vec<u8>,
    /// (offset in the log, length) of each range.
    ranges: [(usize, usize); 3],
    count: usize,
}

impl Edits {
    /// No ranges yet, their bytes to be held in `bytes` (emptied first).
    fn in_buffer(mut bytes: Vec<u8>) -> Edits {
        bytes.clear();
        Edits {
            bytes,
            ranges: [(0, 0); 3],
            count: 0,
        }
    }

    /// Adds the range at offset `at` whose bytes `fill` appends.
    fn push(&mut self, at: usize, fill: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        fill(&mut self.bytes);
        self.ranges[self.count] = (at, self.bytes.len() - start);
        self.count += 1;
    }

    /// Each range: its offset in the log, and its bytes.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &[u8])> {
        let mut start = 0;
        self.ranges[..self.count].iter().map(move |&(at, len)| {
            start += len;
            (at, &self.bytes[start - len..start])
        })
    }
}

impl Write {
    /// Applies this write to a log held in a buffer (the TTL aside), as the
    /// memory store holds its logs.
    pub fn apply(self, log: &mut Vec<u8>) {
        match self {
            Write::Nothing => {}
            Write::Patch { edits, .. } => {
                for (at, bytes) in edits.iter() {
                    if log.len() < at + bytes.len() {
                        log.resize(at + bytes.len(), 0);
                    }
                    log[at..at + bytes.len()].copy_from_slice(bytes);
                }
            }
            Write::Rewrite { bytes, .. } => *log = bytes,
        }
    }
}

/// The stored log does not hold what its header says (a truncated or
/// foreign string, or a header no check could have written): the check
/// cannot be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damaged;

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the stored log is damaged (its bytes do not hold what its header says)")
    }
}

impl std::error::Error for Damaged {}

/// Rule i's pointer: `p`, the number of the oldest unit in its window, that
/// unit's time and stored bytes, and `p` as the stored header held it.
#[derive(Debug, Clone, Copy, Default)]
struct Pointer {
    p: i64,
    tsp: i64,
    raw: [u8; 5],
    stored: Option<i64>,
}

/// The log as one check sees it: units numbered `lo .. n_units` are in the
/// ring (or, while it is rebuilt, in `table`).
struct Log<'a> {
    stored: &'a [u8],
    rules: &'a Rules,
    n: usize,
    h: usize,
    now: i64,
    cap: i64,
    n_units: i64,
    room: i64,
    newest: i64,
    lo: i64,
    expire_at: i64,
    /// Per rule: the oldest unit in its window, its time, its stored bytes.
    at: &'a mut [Pointer],
    /// Units by number, when the stored log does not fit these rules.
    table: Option<Vec<i64>>,
}

impl Log<'_> {
    fn unstamp(&self, e: i64) -> i64 {
        self.newest - (self.newest.rem_euclid(SPAN) - e).rem_euclid(SPAN)
    }

    /// The time of unit `s`.
    fn entry(&self, s: i64) -> Result<i64, Damaged> {
        match &self.table {
            Some(table) => table.get(s as usize).copied().ok_or(Damaged),
            None => {
                let off = self.h + (s % self.cap) as usize * UNIT;
                dec5(self.stored, off)
                    .map(|e| self.unstamp(e))
                    .ok_or(Damaged)
            }
        }
    }

    /// Starts from an empty log, its units to be held in a table.
    fn start_table(&mut self) {
        self.table = Some(Vec::new());
        self.n_units = 0;
        self.room = 0;
        self.lo = 0;
        self.expire_at = 0;
        for i in 0..self.n {
            self.at[i].p = 0;
            self.at[i].tsp = 0;
            self.at[i].raw = [0; 5];
        }
    }

    fn set_pointer(&mut self, i: usize, s: i64, t: i64) {
        self.at[i].p = s;
        self.at[i].tsp = t;
        self.at[i].raw = enc5(t.rem_euclid(SPAN));
    }

    /// Moves rule `i`'s pointer to the oldest unit still inside its window: a
    /// scan of the next 32 units, then a binary search for a burst.
    fn advance(&mut self, i: usize) -> Result<(), Damaged> {
        let w = self.rules.windows[i];
        let mut s = self.at[i].p;
        if s < self.lo {
            s = self.lo;
            let t = self.entry(s)?;
            self.at[i].tsp = t;
            self.at[i].raw = enc5(t.rem_euclid(SPAN));
        }
        if s >= self.n_units || self.at[i].tsp + w > self.now {
            self.at[i].p = s;
            return Ok(());
        }
        s += 1;
        let mut k = (self.n_units - s).min(32);
        if self.table.is_none() {
            k = k.min(self.cap - s % self.cap);
        }
        if k > 0 {
            if let Some(table) = &self.table {
                for j in 0..k {
                    let t = *table.get((s + j) as usize).ok_or(Damaged)?;
                    if t + w > self.now {
                        self.set_pointer(i, s + j, t);
                        return Ok(());
                    }
                }
            } else {
                let off = self.h + (s % self.cap) as usize * UNIT;
                let chunk = range(self.stored, off, k as usize * UNIT);
                for j in 0..k as usize {
                    let t = self.unstamp(dec5(chunk, j * UNIT).ok_or(Damaged)?);
                    if t + w > self.now {
                        self.at[i].p = s + j as i64;
                        self.at[i].tsp = t;
                        self.at[i]
                            .raw
                            .copy_from_slice(&chunk[j * UNIT..j * UNIT + UNIT]);
                        return Ok(());
                    }
                }
            }
            s += k;
        }
        let (mut a, mut b) = (s, self.n_units);
        while a < b {
            let mid = (a + b) / 2;
            if self.entry(mid)? + w > self.now {
                b = mid;
            } else {
                a = mid + 1;
            }
        }
        self.at[i].p = a;
        if a < self.n_units {
            let t = self.entry(a)?;
            self.at[i].tsp = t;
            self.at[i].raw = enc5(t.rem_euclid(SPAN));
        }
        Ok(())
    }
}

/// Runs one check: what it observes, and what it writes.
///
/// This is the algorithm of `engine/lua/check.lua`, step for step, so that
/// both leave the same bytes (a differential test holds them to it).
pub fn check(c: Check<'_>) -> Result<(Seen, Write), Damaged> {
    check_in(c, &mut Scratch::default())
}

/// [`check`], its results built in `scratch`'s buffers (hand them back
/// with [`Scratch::keep`]).
pub fn check_in(c: Check<'_>, scratch: &mut Scratch) -> Result<(Seen, Write), Damaged> {
    let mut pointers = std::mem::take(&mut scratch.pointers);
    pointers.clear();
    pointers.resize(c.rules.len(), Pointer::default());
    let mut seen = std::mem::take(&mut scratch.seen);
    seen.clear();
    let outcome = run(c, &mut pointers, seen, &mut scratch.bytes);
    scratch.pointers = pointers;
    outcome
}

/// [`check`] with its buffers: the rules' pointers, what each rule saw
/// (empty), and the buffer the bytes to write are taken from.
fn run(
    c: Check<'_>,
    pointers: &mut [Pointer],
    seen_rules: Vec<RuleSeen>,
    buffer: &mut Vec<u8>,
) -> Result<(Seen, Write), Damaged> {
    let rules = c.rules;
    // No rule's limit passes MAX_LIMIT, so a cost past it is denied as one
    // more than it is, and the sums below stay far inside an i64.
    let c = Check {
        cost: c.cost.clamp(1, crate::command::MAX_LIMIT + 1),
        ..c
    };
    let n = rules.len();
    let h = header_len(n);
    let at_pointers = pointers_at(n);
    let mut cap = rules.limits.iter().copied().max().unwrap_or(0);
    let longest = rules.windows.iter().copied().max().unwrap_or(0);
    let hdr = range(c.stored, 0, h);
    let fresh = hdr.is_empty();
    let fits = hdr.len() == h
        && hdr[0] == VERSION
        && usize::from(hdr[1]) == n
        && dec5(hdr, 7).is_some_and(|stored| stored >= cap)
        && hdr[FIXED..at_pointers] == rules.encoded[..];
    let mut log = Log {
        stored: c.stored,
        rules,
        n,
        h,
        now: c.now,
        cap,
        n_units: 0,
        room: 0,
        newest: 0,
        lo: 0,
        expire_at: 0,
        at: pointers,
        table: None,
    };
    // what the stored header held, so that only what changed is encoded again
    let (mut room_in, mut expire_in) = (-1, -1);
    if fits {
        let num = |at| dec5(hdr, at).ok_or(Damaged);
        log.n_units = num(2)?;
        cap = num(7)?;
        log.cap = cap;
        log.room = num(12)?;
        room_in = log.room;
        log.newest = newest(hdr).ok_or(Damaged)?;
        log.expire_at = dec6(hdr, 23).ok_or(Damaged)?;
        expire_in = log.expire_at;
        log.lo = (log.n_units - cap).max(0);
        for i in 0..n {
            let at = at_pointers + 10 * i;
            log.at[i].p = num(at)?;
            log.at[i].stored = Some(log.at[i].p);
            log.at[i].raw.copy_from_slice(&hdr[at + 5..at + 10]);
            log.at[i].tsp = log.unstamp(num(at + 5)?);
        }
    } else if fresh {
        log.start_table();
    } else {
        // Written for other rules: keep every stored unit still inside the
        // longest window of a check at the newest unit's time (no later check
        // is earlier), renumbered from 0; the ring grows to hold them all.
        let all = c.stored;
        log.start_table();
        if all.len() >= FIXED && all[0] == VERSION {
            let old_h = header_len(usize::from(all[1]));
            let old_n = dec5(all, 2).ok_or(Damaged)?;
            let old_cap = dec5(all, 7).ok_or(Damaged)?;
            if old_cap == 0 && old_n > 0 {
                return Err(Damaged); // units, and no ring to hold them
            }
            log.newest = newest(all).ok_or(Damaged)?;
            let horizon = log.newest - longest;
            let mut kept = Vec::new();
            for s in (old_n - old_cap).max(0)..old_n {
                let off = old_h + (s % old_cap) as usize * UNIT;
                let ts = log.unstamp(dec5(all, off).ok_or(Damaged)?);
                if ts > horizon {
                    kept.push(ts);
                }
            }
            log.n_units = kept.len() as i64;
            if log.n_units > cap {
                cap = log.n_units;
                log.cap = cap;
            }
            if let Some(&first) = kept.first() {
                for i in 0..n {
                    log.at[i].tsp = first;
                    log.at[i].raw = enc5(first.rem_euclid(SPAN));
                }
            }
            log.table = Some(kept);
        }
    }

    // One key's clock never runs backwards; after a jump of over 17 years
    // every unit is out of every window: start afresh.
    if log.now < log.newest {
        log.now = log.newest;
    }
    if log.now - log.newest >= SPAN / 2 {
        log.start_table();
    }
    let now = log.now;

    let mut seen = Seen {
        now,
        allowed: true,
        rules: seen_rules,
    };
    for i in 0..n {
        if log.at[i].p < log.lo
            || (log.at[i].p < log.n_units && log.at[i].tsp + rules.windows[i] <= now)
        {
            log.advance(i)?;
        }
        let count = log.n_units - log.at[i].p;
        seen.allowed &= count + c.cost <= rules.limits[i];
        seen.rules.push(RuleSeen {
            count,
            oldest: if count > 0 { log.at[i].tsp } else { -1 },
            free_at: -1,
        });
    }
    let allowed = seen.allowed;
    if !allowed {
        for (i, rule) in seen.rules.iter_mut().enumerate() {
            let over = rule.count + c.cost - rules.limits[i];
            if over > 0 && c.cost <= rules.limits[i] {
                rule.free_at = log.entry(log.at[i].p + over - 1)? + rules.windows[i];
            }
        }
    }

    // A denied check writes nothing but a rebuilt log: pointers it moved are
    // not kept, since a later check may be earlier than this one (though never
    // than the newest unit) and pointers only move forward.
    if !c.writing || (!allowed && log.table.is_none()) || (!allowed && fresh) {
        return Ok((seen, Write::Nothing));
    }

    // Writing: the header from its unchanged bytes and what changed.
    let unit = enc5(now.rem_euclid(SPAN));
    let before = log.n_units;
    if !allowed {
        // a rebuilt log, its pointers at its first unit
        let first = log.table.as_ref().and_then(|t| t.first().copied());
        for i in 0..n {
            match first {
                Some(t) => log.set_pointer(i, 0, t),
                None => {
                    log.at[i].p = 0;
                    log.at[i].tsp = 0;
                    log.at[i].raw = [0; 5];
                }
            }
        }
    }
    if allowed {
        for i in 0..n {
            if log.at[i].p == log.n_units {
                log.at[i].tsp = now;
                log.at[i].raw = unit;
            }
        }
        log.n_units += c.cost;
        log.newest = now;
    }
    // The key outlives its newest unit by the longest window: a quarter more,
    // renewed on the server clock once per quarter window, and a second at least.
    let ttl = (longest + longest / 4).max(1000);
    let used = log.n_units.min(cap);
    let rewrite = log.table.is_some() || used > log.room;
    // renewed unless the TTL (known on the server clock) outlasts the longest window
    let lasts = c
        .clock
        .is_some_and(|clock| clock + longest <= log.expire_at);
    let renew = allowed && !lasts;
    if renew || rewrite {
        log.expire_at = c.clock.map_or(0, |clock| clock + ttl);
    }

    let header = |log: &Log<'_>, out: &mut Vec<u8>| {
        out.push(VERSION);
        out.push(n as u8);
        out.extend_from_slice(&enc5(log.n_units));
        if fits && log.room == room_in {
            out.extend_from_slice(&hdr[7..17]);
        } else {
            out.extend_from_slice(&enc5(cap));
            out.extend_from_slice(&enc5(log.room));
        }
        // (a rebuilt log states its newest unit afresh: the string it was
        // rebuilt from may not be a log at all)
        if allowed || log.table.is_some() {
            out.extend_from_slice(&enc6(log.newest));
        } else {
            out.extend_from_slice(&hdr[17..23]);
        }
        if log.expire_at == expire_in {
            out.extend_from_slice(&hdr[23..29]);
        } else {
            out.extend_from_slice(&enc6(log.expire_at));
        }
        out.extend_from_slice(&rules.encoded);
        for i in 0..n {
            let at = at_pointers + 10 * i;
            if log.at[i].stored == Some(log.at[i].p) {
                out.extend_from_slice(&hdr[at..at + 5]);
            } else {
                out.extend_from_slice(&enc5(log.at[i].p));
            }
            out.extend_from_slice(&log.at[i].raw);
        }
    };

    if rewrite {
        // The whole string: in the layout of these rules, or with a bigger
        // ring, as many slots as its allocation holds anyway.
        let used_slots = used as usize;
        if h + used_slots * UNIT > MAX_STRING {
            // a header no check could have written (Redis would refuse the string too)
            return Err(Damaged);
        }
        let mut slots = Vec::with_capacity(used_slots * UNIT);
        if let Some(table) = log.table.as_mut() {
            if allowed {
                table.resize(log.n_units as usize, now);
            }
            slots.resize(used_slots * UNIT, 0);
            for s in (log.n_units - cap).max(0)..log.n_units {
                let at = (s % cap) as usize * UNIT;
                slots[at..at + UNIT].copy_from_slice(&enc5(table[s as usize].rem_euclid(SPAN)));
            }
        } else {
            // growing, so before < cap: units 0 .. before-1 sit in slots 0 .. before-1
            let body = range(c.stored, h, before as usize * UNIT);
            if log.n_units <= cap {
                slots.extend_from_slice(body);
                for _ in 0..c.cost {
                    slots.extend_from_slice(&unit);
                }
            } else {
                let wrapped = log.n_units - cap;
                for _ in 0..wrapped {
                    slots.extend_from_slice(&unit);
                }
                slots.extend_from_slice(range(body, wrapped as usize * UNIT, usize::MAX));
                for _ in 0..c.cost - wrapped {
                    slots.extend_from_slice(&unit);
                }
            }
        }
        let bytes = h + used_slots * UNIT;
        let extra = sds_extra(bytes);
        let mut room = ((size_class(bytes + extra) - extra - h) / UNIT) as i64;
        if sds_extra(h + room as usize * UNIT) > extra {
            room -= 1;
        }
        log.room = room.max(used).min(cap);
        slots.resize(slots.len() + (log.room - used) as usize * UNIT, 0);
        let mut out = std::mem::take(buffer);
        out.clear();
        out.reserve(h + slots.len());
        header(&log, &mut out);
        out.extend_from_slice(&slots);
        return Ok((
            seen,
            Write::Rewrite {
                bytes: out,
                ttl_ms: ttl,
            },
        ));
    }

    let mut edits = Edits::in_buffer(std::mem::take(buffer));
    if allowed {
        let slot = before % cap;
        let first = c.cost.min(cap - slot);
        if h + (slot + first) as usize * UNIT > MAX_STRING {
            // a header no check could have written (Redis would refuse the string too)
            return Err(Damaged);
        }
        let units = |count: i64| {
            move |out: &mut Vec<u8>| (0..count).for_each(|_| out.extend_from_slice(&unit))
        };
        edits.push(h + slot as usize * UNIT, units(first));
        if c.cost > first {
            edits.push(h, units(c.cost - first));
        }
    }
    edits.push(0, |out| header(&log, out));
    Ok((
        seen,
        Write::Patch {
            edits,
            ttl_ms: renew.then_some(ttl),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_log_without_a_ring_is_damaged_not_a_panic() {
        let rules = Rules::new(&[(5, 1_000)]);
        // version 4, one rule, N = 3 units, capacity 0
        let mut stored = vec![0u8; 60];
        stored[0] = VERSION;
        stored[1] = 2;
        stored[6] = 3;
        let c = Check {
            stored: &stored,
            rules: &rules,
            cost: 1,
            now: 1_000,
            clock: None,
            writing: true,
        };
        assert_eq!(check(c).unwrap_err(), Damaged);
    }

    #[test]
    fn a_forged_ring_size_is_damaged_not_an_allocation() {
        fn at<'a>(stored: &'a [u8], rules: &'a Rules) -> Check<'a> {
            Check {
                stored,
                rules,
                cost: 1,
                now: 1_000,
                clock: None,
                writing: true,
            }
        }
        let rules = Rules::new(&[(5, 1_000)]);
        let mut log = Vec::new();
        let (_, write) = check(at(&log, &rules)).unwrap();
        write.apply(&mut log);
        // capacity and slots of 2^40 - 1, and a billion units logged
        log[2..7].copy_from_slice(&enc5(1_000_000_000));
        log[7..12].copy_from_slice(&[0xff; 5]);
        log[12..17].copy_from_slice(&[0xff; 5]);
        assert_eq!(check(at(&log, &rules)).unwrap_err(), Damaged);
    }
}
