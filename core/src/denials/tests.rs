use super::*;

#[test]
fn addresses_share_their_24_or_64() {
    assert_eq!(network_of("198.51.100.77").unwrap(), "198.51.100.0/24");
    assert_eq!(
        network_of("2001:db8:1:2:aa::5").unwrap(),
        "2001:db8:1:2::/64"
    );
    assert_eq!(network_of("not an address"), None);
}

#[test]
fn a_flood_of_distinct_keys_is_counted_in_a_bounded_tally() {
    let tally = Tally::new();
    for i in 0..MAX_TALLIED + 100 {
        tally.note(
            "api",
            format!("k{i}").as_bytes(),
            Some("203.0.113.9"),
            60_000,
        );
    }
    let minute = tally.current.lock().unwrap();
    assert_eq!(minute.keys["api"].len(), MAX_TALLIED);
    assert_eq!(minute.others["api"], 100);
    assert_eq!(
        minute.addresses["api"][&b"203.0.113.9"[..]],
        MAX_TALLIED as u64 + 100
    );
}

/// A store that refuses the first `failures` writes of denials and
/// keeps the others (flush calls nothing else).
struct Flaky {
    failures: Mutex<usize>,
    kept: Mutex<Vec<(u64, Vec<u8>)>>,
}

impl ControlStore for Flaky {
    fn record(&self, _: &[u8], _: &str) -> Result<crate::controls::RawRecord> {
        unreachable!("a flush writes denials only")
    }
    fn set_record(
        &self,
        _: &[u8],
        _: &str,
        _: crate::controls::Field,
        _: Option<&str>,
        _: u64,
    ) -> Result<()> {
        unreachable!("a flush writes denials only")
    }
    fn shared(&self, _: crate::controls::SharedHash) -> Result<crate::store::HashFields> {
        unreachable!("a flush writes denials only")
    }
    fn set_shared(
        &self,
        _: crate::controls::SharedHash,
        _: &[u8],
        _: Option<&[u8]>,
    ) -> Result<bool> {
        unreachable!("a flush writes denials only")
    }
    fn controls_version(&self) -> Result<u64> {
        unreachable!("a flush writes denials only")
    }
    fn strike(
        &self,
        _: &[u8],
        _: &crate::controls::Fail2Ban,
        _: Option<u64>,
    ) -> Result<crate::controls::Strike> {
        unreachable!("a flush writes denials only")
    }
    fn push_change(&self, _: &[u8], _: usize) -> Result<()> {
        unreachable!("a flush writes denials only")
    }
    fn changes(&self, _: usize) -> Result<Vec<Vec<u8>>> {
        unreachable!("a flush writes denials only")
    }
    fn put_denials(&self, minute_ms: u64, _: u64, tally: &[u8], _: u64) -> Result<()> {
        let mut failures = self.failures.lock().unwrap();
        if *failures > 0 {
            *failures -= 1;
            return Err(Error::storage("Redis timed out"));
        }
        self.kept.lock().unwrap().push((minute_ms, tally.to_vec()));
        Ok(())
    }
    fn denials(&self, _: &[u64]) -> Result<Vec<Vec<Vec<u8>>>> {
        unreachable!("a flush writes denials only")
    }
}

/// The count of `key` in a written tally.
fn count_of(tally: &[u8], key: &str) -> u64 {
    let entries: Vec<Counted> = serde_json::from_slice(tally).unwrap();
    entries
        .iter()
        .filter(|e| matches!(e.kind, Kind::Key) && e.value == key)
        .map(|e| e.count)
        .sum()
}

#[test]
fn a_failed_write_of_the_tally_is_made_again_by_the_next_flush() {
    let store = Flaky {
        failures: Mutex::new(1),
        kept: Mutex::new(Vec::new()),
    };
    let tally = Tally::new();
    for _ in 0..3 {
        tally.note("api", b"k", None, 60_000);
    }
    assert!(tally.flush(&store).is_err());
    assert!(store.kept.lock().unwrap().is_empty());
    tally.flush(&store).unwrap();
    let kept = store.kept.lock().unwrap().clone();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        count_of(&kept[0].1, "k"),
        3,
        "the denials of the failed write"
    );
    tally.flush(&store).unwrap();
    assert_eq!(store.kept.lock().unwrap().len(), 1, "nothing new: no write");

    // a minute that ended, its write failed: written by the next flush,
    // before the new minute
    tally.note("api", b"k", None, 90_000);
    tally.note("api", b"k", None, 120_000);
    *store.failures.lock().unwrap() = 1;
    assert!(tally.flush(&store).is_err());
    tally.flush(&store).unwrap();
    let kept = store.kept.lock().unwrap().clone();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert_eq!((kept[1].0, count_of(&kept[1].1, "k")), (60_000, 4));
    assert_eq!((kept[2].0, count_of(&kept[2].1, "k")), (120_000, 1));
}

#[test]
fn a_minute_keeps_its_most_denied() {
    let mut minute = Minute::default();
    for i in 0..MAX_ENTRIES as u64 + 10 {
        for _ in 0..=i {
            bump(&mut minute.keys, "", format!("k{i}").as_bytes());
        }
    }
    let kept: Vec<Counted> = serde_json::from_slice(&encode(&minute)).unwrap();
    assert_eq!(kept.len(), MAX_ENTRIES);
    assert_eq!(kept[0].count, MAX_ENTRIES as u64 + 10);
    assert!(
        kept.iter().all(|c| c.count > 10),
        "the least denied dropped"
    );
}

#[test]
fn a_key_row_keeps_the_very_tag_and_older_rows_still_read() {
    let mut minute = Minute::default();
    let hashed = crate::keys::key_tag(&[b'a'; 200]);
    for tag in [&b"tok\xff\xfe"[..], b"tok\xff\xfd", &hashed, b"user:1"] {
        bump(&mut minute.keys, "api", tag);
    }
    let kept: Vec<Counted> = serde_json::from_slice(&encode(&minute)).unwrap();
    let mut tallied: Vec<Vec<u8>> = kept.iter().map(Counted::tallied).collect();
    tallied.sort();
    let mut want = vec![
        b"tok\xff\xfe".to_vec(),
        b"tok\xff\xfd".to_vec(),
        hashed.clone(),
        b"user:1".to_vec(),
    ];
    want.sort();
    assert_eq!(tallied, want, "two keys alike as text stay two");
    let plain: Vec<&Counted> = kept.iter().filter(|c| c.exact.is_none()).collect();
    assert_eq!(plain.len(), 2, "a UTF-8 tag is kept as it was: {kept:?}");
    // a row written before the exact tag was kept
    let old: Vec<Counted> =
        serde_json::from_str(r#"[{"k":"k","s":"api","v":"user:2","n":3}]"#).unwrap();
    assert_eq!(old[0].tallied(), b"user:2".to_vec());
}
