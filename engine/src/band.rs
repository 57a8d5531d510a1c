//! One rule's band of a log: the entries inside its window that every
//! shorter window no longer sees, oldest first, in a ring of its own (see
//! the crate docs). A check reads a band's entries from the stored ring only
//! when it needs them; what it adds is held aside until it is written.

use crate::layout::Damaged;
use crate::layout::{dec5, enc5, unstamp, ENTRY, SPAN};

/// An entry: its time (ms) and its band's running total after it (modulo
/// 2^40); its units are that total less the one before it.
pub type Entry = (i64, i64);

/// A band as one check sees and changes it.
#[derive(Debug, Clone, Default)]
pub struct Band {
    /// Its rule's window (ms).
    pub window: i64,
    /// Entries of one step of this many ms merge.
    pub step: i64,
    /// The most entries it holds: a push past them merges into its back.
    pub most: i64,
    /// Its ring's capacity, in entries (0: none yet).
    pub cap: i64,
    /// The ring slot of its front entry.
    pub head: i64,
    /// How many entries it holds.
    pub len: i64,
    /// The running total before its front entry.
    pub out: i64,
    /// Its front entry's time (when it holds one).
    pub front: i64,
    /// Its back entry's time (when it holds one).
    pub back: i64,
    /// Its back entry's running total (`out` when it holds none).
    pub back_total: i64,
    /// Entries `0 .. stored` (from the front) are read from the stored ring.
    pub stored: i64,
    /// Entries `stored .. len` are these, from `pending_from`.
    pub pending: Vec<Entry>,
    /// Where the band's entries start in `pending`.
    pub pending_from: usize,
    /// Where its ring starts in the stored log.
    pub base: usize,
    /// Whether this check changed it.
    pub touched: bool,
}

/// The stored log a band's ring is read from, with the time its stamps are
/// read back against.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    /// The log's bytes.
    pub bytes: &'a [u8],
    /// Its newest entry's time.
    pub newest: i64,
}

impl Band {
    /// Makes it hold nothing and have no ring, keeping its rule's window,
    /// step and most (and its buffer).
    pub fn empty(&mut self) {
        self.cap = 0;
        self.head = 0;
        self.len = 0;
        self.out = 0;
        self.front = 0;
        self.back = 0;
        self.back_total = 0;
        self.stored = 0;
        self.pending.clear();
        self.pending_from = 0;
        self.base = 0;
        self.touched = false;
    }

    /// The units it holds.
    pub fn units(&self) -> i64 {
        (self.back_total - self.out).rem_euclid(SPAN)
    }

    /// Entry `i` from its front.
    pub fn entry(&self, i: i64, log: Stored<'_>) -> Result<Entry, Damaged> {
        if i < self.stored {
            let at = self.base + ((self.head + i) % self.cap) as usize * ENTRY;
            let t = dec5(log.bytes, at).ok_or(Damaged::Bytes)?;
            let total = dec5(log.bytes, at + 5).ok_or(Damaged::Bytes)?;
            return Ok((unstamp(log.newest, t), total));
        }
        let at = self.pending_from + (i - self.stored) as usize;
        self.pending.get(at).copied().ok_or(Damaged::Bytes)
    }

    /// Takes its front entry off: its time and units.
    pub fn pop(&mut self, log: Stored<'_>) -> Result<(i64, i64), Damaged> {
        let (t, total) = self.entry(0, log)?;
        if self.stored > 0 {
            self.head = (self.head + 1) % self.cap;
            self.stored -= 1;
        } else {
            self.pending_from += 1;
        }
        self.len -= 1;
        let units = (total - self.out).rem_euclid(SPAN);
        self.out = total;
        if self.len > 0 {
            self.front = self.entry(0, log)?.0;
        }
        self.touched = true;
        Ok((t, units))
    }

    /// Lets every entry go (each has left every window).
    pub fn drop_all(&mut self) {
        if self.cap > 0 {
            self.head = (self.head + self.stored) % self.cap;
        }
        self.stored = 0;
        self.pending_from = self.pending.len();
        self.len = 0;
        self.out = self.back_total;
        self.touched = true;
    }

    /// Adds `units` at time `t` (no earlier than its back): merged into its
    /// back when both fall in one step, or when it holds its most entries.
    pub fn push(&mut self, t: i64, units: i64) {
        self.back_total = (self.back_total + units).rem_euclid(SPAN);
        let merge = self.len > 0
            && (t.div_euclid(self.step) == self.back.div_euclid(self.step)
                || self.len >= self.most);
        if merge {
            if self.stored == self.len {
                // the back is in the stored ring: it is rewritten from here
                self.stored -= 1;
                self.pending.push((self.back, 0));
            }
            if let Some(last) = self.pending.last_mut() {
                *last = (t, self.back_total);
            }
        } else {
            self.pending.push((t, self.back_total));
            self.len += 1;
        }
        self.back = t;
        if self.len == 1 {
            self.front = t;
        }
        self.touched = true;
    }

    /// The entries held aside, from the front's: what a write adds to the
    /// stored ring, from slot `(head + stored) % cap`.
    pub fn added(&self) -> &[Entry] {
        &self.pending[self.pending_from..]
    }

    /// The time at which `need` of its units (at most all) have left a
    /// window of `window` ms: its entries leave oldest first. The first
    /// entry whose running total reaches `need` is found by galloping from
    /// the front (entries 0, 1, 3, 7, ...: what a denial waits for is most
    /// often its oldest few), then a binary search.
    pub fn free_at(&self, need: i64, window: i64, log: Stored<'_>) -> Result<i64, Damaged> {
        let last = self.len - 1;
        let reached = |i: i64| -> Result<bool, Damaged> {
            Ok((self.entry(i, log)?.1 - self.out).rem_euclid(SPAN) >= need)
        };
        let (mut a, mut b) = (0, 0);
        while b < last && !reached(b)? {
            a = b + 1;
            b = (2 * b + 1).min(last);
        }
        while a < b {
            let mid = (a + b) / 2;
            if reached(mid)? {
                b = mid;
            } else {
                a = mid + 1;
            }
        }
        let t = if a == last {
            self.back
        } else {
            self.entry(a, log)?.0
        };
        Ok(t + window)
    }

    /// Appends its header fields (times as their stamps, modulo 2^40).
    pub fn encode(&self, out: &mut Vec<u8>) {
        for x in [
            self.cap,
            self.head,
            self.len,
            self.out,
            self.front.rem_euclid(SPAN),
            self.back.rem_euclid(SPAN),
            self.back_total,
        ] {
            out.extend_from_slice(&enc5(x));
        }
    }
}
