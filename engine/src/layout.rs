//! The bytes of a log: its constants and the fixed-width big-endian numbers
//! its header and rings hold (see the crate docs for the layout).

/// The first 12 bytes of every log of this format: a header that a release
/// of the previous format (4) reads as a log of no rules whose ring cannot
/// hold its units, which it refuses as damaged rather than overwriting.
pub const GUARD: [u8; 12] = [4, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0, 0, 0, 0];
/// The format's version, the byte after [`GUARD`].
pub const VERSION: u8 = 5;
/// Bytes per entry in a ring: its time and its band's running total.
pub const ENTRY: usize = 10;
/// Bytes of the header before the rules' windows.
pub const FIXED: usize = 27;
/// Bytes of one band's fields in the header: its ring's capacity, its
/// head, its length, the running total before its front, its front's and
/// its back's times, and its back's running total (5 bytes each).
pub const BAND: usize = 35;
/// Where the header holds the flags byte.
pub const FLAGS_AT: usize = 14;
/// Where the header holds the newest entry's time (6 bytes).
pub const NEWEST_AT: usize = 15;
/// Where the header holds when the key's TTL runs out (6 bytes).
pub const EXPIRE_AT: usize = 21;
/// Flag: every entry is kept (no merging of close entries).
pub const EXACT: u8 = 1;
/// The range of a stored timestamp and of a band's running total: 2^40
/// (about 34 years of milliseconds).
pub const SPAN: i64 = 1 << 40;
/// The largest number a 5-byte field holds.
pub const MAX5: u64 = (1 << 40) - 1;
/// The longest string Redis keeps (its `proto-max-bulk-len`, 512 MB): a log
/// whose header asks for more was not written by a check.
pub const MAX_STRING: usize = 512 * 1024 * 1024;
/// The most entries one rule's ring holds (reached only with merging off,
/// where a full ring merges its two newest entries): 255 rules of this
/// many entries stay within [`MAX_STRING`].
pub const MAX_ENTRIES: i64 = 1 << 17;
/// A window is split into this many steps: entries of one step that every
/// shorter window no longer sees are merged.
pub const STEPS: i64 = 1024;

/// Bytes of the header of a log of `n` rules.
pub const fn header_len(n: usize) -> usize {
    FIXED + (5 + BAND) * n
}

/// Where band `i`'s fields start in the header of a log of `n` rules.
pub const fn band_at(n: usize, i: usize) -> usize {
    FIXED + 5 * n + BAND * i
}

/// The time step (ms) within which entries of a window's band merge:
/// 1/1024 of the window rounded up, 1 with merging off (entries of one
/// millisecond always merge: they are one time).
pub fn step(window: i64, exact: bool) -> i64 {
    if exact {
        1
    } else {
        ((window + STEPS - 1) / STEPS).max(1)
    }
}

/// The most entries a band holds: the steps of the time it spans (`span`,
/// its window less the shorter one's), and no more than [`MAX_ENTRIES`].
/// (Its limit bounds it too, an entry holding at least one unit, but a
/// limit may be lowered while the log holds more.)
pub fn most_entries(span: i64, step: i64) -> i64 {
    (span.div_euclid(step) + 2).clamp(1, MAX_ENTRIES)
}

/// Whether `log` starts as a log of this format does (any version).
pub fn guarded(log: &[u8]) -> bool {
    log.len() > GUARD.len() && log[..GUARD.len()] == GUARD
}

/// The largest limit a rule may have (the core's bound on rules too),
/// 2^40 - 1: a log's running totals are kept modulo 2^40.
pub const MAX_LIMIT: i64 = MAX5 as i64;

/// The largest cost a check may carry: one past the largest limit, as the
/// core sends any cost past every limit (a denial that can never pass).
pub const MAX_COST: i64 = MAX_LIMIT + 1;

/// The header's flags for a check that keeps every entry or not.
pub(crate) fn flags(exact: bool) -> u8 {
    if exact {
        EXACT
    } else {
        0
    }
}

/// The stored log cannot be read by this check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damaged {
    /// Its bytes do not hold what its header says (a truncated or foreign
    /// string, or a header no check could have written).
    Bytes,
    /// It was written by a newer release, in this format version.
    Newer(u8),
}

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damaged::Bytes => f.write_str(
                "the stored log is damaged (its bytes do not hold what its header says)",
            ),
            Damaged::Newer(version) => write!(
                f,
                "the stored log was written by a newer release of ratekeeper (log format {version}, this release reads {VERSION}): upgrade this process"
            ),
        }
    }
}

impl std::error::Error for Damaged {}

/// `x` modulo 2^40, as 5 big-endian bytes.
pub fn enc5(x: i64) -> [u8; 5] {
    let b = (x as u64).to_be_bytes();
    [b[3], b[4], b[5], b[6], b[7]]
}

/// `x` modulo 2^48, as 6 big-endian bytes.
pub fn enc6(x: i64) -> [u8; 6] {
    let b = (x as u64).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// The 5-byte number at `at`, if `bytes` holds it.
pub fn dec5(bytes: &[u8], at: usize) -> Option<i64> {
    let b = bytes.get(at..at.checked_add(5)?)?;
    Some(b.iter().fold(0i64, |n, &x| n << 8 | i64::from(x)))
}

/// The 6-byte number at `at`, if `bytes` holds it.
pub fn dec6(bytes: &[u8], at: usize) -> Option<i64> {
    let b = bytes.get(at..at.checked_add(6)?)?;
    Some(b.iter().fold(0i64, |n, &x| n << 8 | i64::from(x)))
}

/// The latest time at or before `newest` that the stored time `stamp` (ms
/// modulo 2^40) stands for.
pub fn unstamp(newest: i64, stamp: i64) -> i64 {
    // (modulo a power of two: the low 40 bits, of a negative number too)
    newest - (((newest & (SPAN - 1)) - stamp) & (SPAN - 1))
}

/// `len` bytes of `bytes` from `at`, cut short at its end (as `GETRANGE`).
pub fn range(bytes: &[u8], at: usize, len: usize) -> &[u8] {
    let start = at.min(bytes.len());
    let end = at.saturating_add(len).min(bytes.len());
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_in_their_width() {
        for x in [0, 1, 255, 256, 1 << 39, (1 << 40) - 1] {
            assert_eq!(dec5(&enc5(x), 0), Some(x));
        }
        assert_eq!(dec5(&enc5(1 << 40), 0), Some(0));
        assert_eq!(dec6(&enc6(1_700_000_000_123), 0), Some(1_700_000_000_123));
        assert_eq!(dec5(&[1, 2, 3, 4], 0), None);
        assert_eq!(dec5(&[0; 8], usize::MAX - 2), None);
    }

    #[test]
    fn steps_are_a_1024th_of_the_window_rounded_up() {
        assert_eq!(step(1, false), 1);
        assert_eq!(step(1_000, false), 1);
        assert_eq!(step(1_024, false), 1);
        assert_eq!(step(1_025, false), 2);
        assert_eq!(step(60_000, false), 59);
        assert_eq!(step(86_400_000, false), 84_375);
        assert_eq!(step(86_400_000, true), 1);
        // a day's band holds at most ~1,024 entries, whatever the limit
        assert_eq!(most_entries(86_400_000 - 60_000, 84_375), 1025);
        assert_eq!(most_entries(86_400_000, 1), MAX_ENTRIES);
    }

    #[test]
    fn ranges_are_cut_at_the_end() {
        assert_eq!(range(b"abcdef", 4, 10), b"ef");
        assert_eq!(range(b"abc", 7, 2), b"");
        assert_eq!(range(b"abc", 1, usize::MAX), b"bc");
    }
}
