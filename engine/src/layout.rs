//! The bytes of a log: its constants and the fixed-width big-endian numbers
//! its header and ring hold (see the crate docs for the layout).

/// The format's version, the header's first byte.
pub const VERSION: u8 = 4;
/// Bytes per logged unit in the ring.
pub const UNIT: usize = 5;
/// Bytes of the header before the rules' windows.
pub const FIXED: usize = 29;
/// The range of a stored timestamp (ms): 2^40, about 34 years.
pub const SPAN: i64 = 1 << 40;
/// The largest number a 5-byte field holds.
pub const MAX5: u64 = (1 << 40) - 1;
/// The longest string Redis keeps (its `proto-max-bulk-len`, 512 MB): a log
/// whose header asks for more was not written by a check.
pub const MAX_STRING: usize = 512 * 1024 * 1024;

/// Where the header holds the newest unit's time (6 bytes).
pub const NEWEST_AT: usize = 17;

/// The time (ms) of a log's newest unit, as its header holds it.
pub fn newest(log: &[u8]) -> Option<i64> {
    dec6(log, NEWEST_AT)
}

/// Bytes of the header of a log of `n` rules.
pub const fn header_len(n: usize) -> usize {
    FIXED + 15 * n
}

/// Where the per-rule pointers start in the header of a log of `n` rules.
pub const fn pointers_at(n: usize) -> usize {
    FIXED + 5 * n
}

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

/// `len` bytes of `bytes` from `at`, cut short at its end (as `GETRANGE`).
pub fn range(bytes: &[u8], at: usize, len: usize) -> &[u8] {
    let start = at.min(bytes.len());
    let end = at.saturating_add(len).min(bytes.len());
    &bytes[start..end]
}

/// The allocation jemalloc makes for `bytes` bytes: 16-byte steps up to 128,
/// then four size classes per doubling.
pub fn size_class(bytes: usize) -> usize {
    if bytes <= 128 {
        return bytes.div_ceil(16) * 16;
    }
    let mut q = 128;
    while q * 2 < bytes {
        q *= 2;
    }
    bytes.div_ceil(q / 4) * (q / 4)
}

/// What Redis adds to a string of `len` bytes: its sds header and terminator.
pub fn sds_extra(len: usize) -> usize {
    if len < 256 {
        4
    } else if len < 65536 {
        6
    } else {
        10
    }
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
    fn size_classes_are_jemallocs() {
        assert_eq!(size_class(1), 16);
        assert_eq!(size_class(128), 128);
        assert_eq!(size_class(129), 160);
        assert_eq!(size_class(257), 320);
        assert_eq!(size_class(1025), 1280);
    }

    #[test]
    fn ranges_are_cut_at_the_end() {
        assert_eq!(range(b"abcdef", 4, 10), b"ef");
        assert_eq!(range(b"abc", 7, 2), b"");
        assert_eq!(range(b"abc", 1, usize::MAX), b"bc");
    }
}
