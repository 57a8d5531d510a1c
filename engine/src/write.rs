//! What a check writes ([`Write`]: nothing, a patch of ranges, or a whole
//! new string), how it is made (the header, a rewrite, a patch), and the
//! buffers checks are made in ([`Scratch`]), handed back so that a caller
//! making many allocates none.

use crate::band::{Band, Stored};
use crate::layout::{
    band_at, enc5, enc6, header_len, range, BAND, ENTRY, GUARD, MAX_STRING, SPAN, VERSION,
};
use crate::layout::{flags, Damaged};
use crate::rules::Rules;
use crate::seen::{RuleSeen, Seen};

/// The buffers checks are made in, handed back after each one so that a
/// caller making many (the module, on Redis's thread) allocates none: the
/// rules of parsed arguments ([`Scratch::rules`], [`Scratch::keep_rules`]),
/// the check's bands, what it saw and the bytes it writes
/// ([`crate::check_in`], [`Scratch::keep`]). A buffer not handed back is simply
/// made again.
#[derive(Debug, Default)]
pub struct Scratch {
    pub(crate) bands: Vec<Band>,
    pub(crate) seen: Vec<RuleSeen>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) ranges: Vec<(usize, usize)>,
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
        self.keep_write(write);
    }

    /// Takes back the buffers of what a check wrote.
    fn keep_write(&mut self, write: Write) {
        let bytes = match write {
            Write::Nothing => return,
            Write::Patch { edits, .. } => {
                self.ranges = edits.ranges;
                edits.bytes
            }
            Write::Rewrite { bytes, .. } => bytes,
        };
        if bytes.capacity() <= KEPT_BYTES {
            self.bytes = bytes;
        }
    }

    /// Applies `write` to a log held in a buffer (as [`Write::apply`]), and
    /// takes back its buffers: the memory store's checks, made one after
    /// another in one buffer set, allocate nothing once the logs are grown.
    pub fn apply(&mut self, write: Write, log: &mut Vec<u8>) {
        match write {
            Write::Rewrite { bytes, .. } => {
                // the log takes the new string; its old one is kept to be written next
                let old = std::mem::replace(log, bytes);
                if old.capacity() <= KEPT_BYTES {
                    self.bytes = old;
                }
            }
            write => {
                write.patch(log);
                self.keep_write(write);
            }
        }
    }
}

/// The most rule sets [`Scratch`] keeps (a check's own and a few tiers').
const MAX_KEPT_RULES: usize = 8;

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
/// (a check writes the entries it added to each band's ring, in at most two
/// ranges per band where the ring wraps, and the header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edits {
    bytes: Vec<u8>,
    /// (offset in the log, length) of each range.
    ranges: Vec<(usize, usize)>,
}

impl Edits {
    /// No ranges yet, held in `ranges` and their bytes in `bytes` (both emptied first).
    pub(crate) fn in_buffers(mut bytes: Vec<u8>, mut ranges: Vec<(usize, usize)>) -> Edits {
        bytes.clear();
        ranges.clear();
        Edits { bytes, ranges }
    }

    /// Adds the range at offset `at` whose bytes `fill` appends.
    pub(crate) fn push(&mut self, at: usize, fill: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        fill(&mut self.bytes);
        self.ranges.push((at, self.bytes.len() - start));
    }

    /// Each range: its offset in the log, and its bytes.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &[u8])> {
        let mut start = 0;
        self.ranges.iter().map(move |&(at, len)| {
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
            Write::Rewrite { bytes, .. } => *log = bytes,
            write => write.patch(log),
        }
    }

    /// Writes a patch's ranges into `log` (nothing for another write).
    fn patch(&self, log: &mut Vec<u8>) {
        if let Write::Patch { edits, .. } = self {
            for (at, bytes) in edits.iter() {
                if log.len() < at + bytes.len() {
                    log.resize(at + bytes.len(), 0);
                }
                log[at..at + bytes.len()].copy_from_slice(bytes);
            }
        }
    }
}

/// The header a check writes.
pub(crate) struct Head<'a> {
    /// The stored header's bytes.
    pub(crate) stored: &'a [u8],
    /// Whether the stored log fits these rules (a band this check left
    /// alone then keeps its stored bytes).
    pub(crate) fits: bool,
    pub(crate) rules: &'a Rules,
    pub(crate) exact: bool,
    pub(crate) newest: i64,
    pub(crate) expire_at: i64,
}

impl Head<'_> {
    /// Appends the header of `bands`.
    pub(crate) fn write(&self, bands: &[Band], out: &mut Vec<u8>) {
        let n = self.rules.len();
        out.extend_from_slice(&GUARD);
        out.extend_from_slice(&[VERSION, n as u8, flags(self.exact)]);
        out.extend_from_slice(&enc6(self.newest));
        out.extend_from_slice(&enc6(self.expire_at));
        out.extend_from_slice(&self.rules.encoded);
        for (i, band) in bands.iter().enumerate() {
            match self.fits && !band.touched {
                true => out.extend_from_slice(range(self.stored, band_at(n, i), BAND)),
                false => band.encode(out),
            }
        }
    }
}

/// The whole string: every ring from its first slot, a ring that outgrew
/// its capacity at twice it (at least 4, at most its most).
pub(crate) fn rewrite(
    bands: &mut [Band],
    head: &Head<'_>,
    log: Stored<'_>,
    ttl_ms: i64,
    scratch: &mut Scratch,
) -> Result<Write, Damaged> {
    let h = header_len(bands.len());
    let caps: Vec<i64> = bands
        .iter()
        .map(|b| match b.len > b.cap {
            true => b.most.min(b.len.max(2 * b.cap).max(4)),
            false => b.cap,
        })
        .collect();
    let slots = caps.iter().sum::<i64>() as usize;
    if slots.saturating_mul(ENTRY).saturating_add(h) > MAX_STRING {
        // a header no check could have written (Redis would refuse the string too)
        return Err(Damaged::Bytes);
    }
    let mut out = std::mem::take(&mut scratch.bytes);
    out.clear();
    out.reserve(h + slots * ENTRY);
    out.resize(h, 0);
    for (band, &cap) in bands.iter().zip(&caps) {
        for i in 0..band.len {
            put_entry(&mut out, band.entry(i, log)?);
        }
        out.resize(out.len() + (cap - band.len) as usize * ENTRY, 0);
    }
    for (band, cap) in bands.iter_mut().zip(caps) {
        band.cap = cap;
        band.head = 0;
        band.touched = true;
    }
    let mut header = Vec::with_capacity(h);
    head.write(bands, &mut header);
    out[..h].copy_from_slice(&header);
    Ok(Write::Rewrite { bytes: out, ttl_ms })
}

/// The ranges a check overwrites: each band's added entries, from its slot
/// after the stored ones (two ranges where the ring wraps), then the header.
pub(crate) fn patch(
    bands: &[Band],
    head: &Head<'_>,
    ttl_ms: Option<i64>,
    scratch: &mut Scratch,
) -> Result<Write, Damaged> {
    let mut edits = Edits::in_buffers(
        std::mem::take(&mut scratch.bytes),
        std::mem::take(&mut scratch.ranges),
    );
    for band in bands {
        let added = band.added();
        if added.is_empty() {
            continue;
        }
        let slot = ((band.head + band.stored) % band.cap) as usize;
        let first = added.len().min(band.cap as usize - slot);
        if band.base + (slot + first) * ENTRY > MAX_STRING {
            // a header no check could have written (Redis would refuse the string too)
            return Err(Damaged::Bytes);
        }
        let (to_end, from_start) = added.split_at(first);
        edits.push(band.base + slot * ENTRY, |out| {
            to_end.iter().for_each(|&e| put_entry(out, e))
        });
        if !from_start.is_empty() {
            edits.push(band.base, |out| {
                from_start.iter().for_each(|&e| put_entry(out, e))
            });
        }
    }
    edits.push(0, |out| head.write(bands, out));
    Ok(Write::Patch { edits, ttl_ms })
}

/// Appends an entry as a ring holds it: its time's stamp, its running total.
fn put_entry(out: &mut Vec<u8>, (t, total): (i64, i64)) {
    out.extend_from_slice(&enc5(t.rem_euclid(SPAN)));
    out.extend_from_slice(&enc5(total));
}
