//! What a check writes ([`Write`]: nothing, a patch of ranges, or a whole
//! new string) and the buffers checks are made in ([`Scratch`]), handed
//! back so that a caller making many allocates none.

use crate::band::Band;
use crate::log::{RuleSeen, Rules, Seen};

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
