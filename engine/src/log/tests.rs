use super::*;
use crate::layout::dec5;

fn at<'a>(stored: &'a [u8], rules: &'a Rules) -> Check<'a> {
    Check {
        stored,
        rules,
        cost: 1,
        now: 1_000,
        clock: None,
        writing: true,
        exact: false,
        settle: None,
    }
}

/// A log of one admitted check under `rules`.
fn one_check(rules: &Rules) -> Vec<u8> {
    let mut log = Vec::new();
    let (_, write) = check(at(&log, rules)).unwrap();
    write.apply(&mut log);
    log
}

#[test]
fn a_previous_format_log_without_a_ring_is_damaged_not_a_panic() {
    let rules = Rules::new(&[(5, 1_000)]);
    // version 4, one rule, N = 3 units, capacity 0
    let mut stored = vec![0u8; 60];
    stored[0] = legacy::VERSION;
    stored[1] = 2;
    stored[6] = 3;
    assert_eq!(check(at(&stored, &rules)).unwrap_err(), Damaged::Bytes);
}

#[test]
fn a_forged_ring_size_is_damaged_not_an_allocation() {
    let rules = Rules::new(&[(5, 1_000)]);
    let mut log = one_check(&rules);
    // a ring of 2^40 - 1 entries, holding as many
    let band = band_at(1, 0);
    log[band..band + 5].copy_from_slice(&[0xff; 5]);
    log[band + 10..band + 15].copy_from_slice(&[0xff; 5]);
    assert_eq!(check(at(&log, &rules)).unwrap_err(), Damaged::Bytes);
    // other rules: the same log is rebuilt, and refused as well
    let other = Rules::new(&[(5, 2_000)]);
    assert_eq!(check(at(&log, &other)).unwrap_err(), Damaged::Bytes);
}

#[test]
fn a_log_of_a_newer_format_is_refused_by_name() {
    let rules = Rules::new(&[(5, 1_000)]);
    let mut log = one_check(&rules);
    log[GUARD_LEN] = VERSION + 1;
    let err = check(at(&log, &rules)).unwrap_err();
    assert_eq!(err, Damaged::Newer(VERSION + 1));
    assert!(err.to_string().contains("newer release"), "{err}");
}

#[test]
fn the_previous_release_reads_this_format_as_damaged() {
    // what a release of format 4 reads: a log of no rules (byte 1), N
    // units (bytes 2..7) and a ring of capacity C (bytes 7..12) whose
    // unit number N - C lies past the string's end
    let rules = Rules::new(&[(5, 1_000)]);
    let log = one_check(&rules);
    assert_eq!(log[0], legacy::VERSION);
    assert_eq!(log[1], 0);
    let (n, cap) = (dec5(&log, 2).unwrap(), dec5(&log, 7).unwrap());
    assert!(cap > 0 && n > cap);
    assert!(29 + ((n - cap) % cap) as usize * 5 > log.len() + (1 << 30));
}
