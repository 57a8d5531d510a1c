use super::*;
use crate::rule::RuleSet;

#[test]
fn bounded_in_keys() {
    let store = MemoryStore::new(1000);
    let rules = RuleSet::parse("5/hour").unwrap();
    for i in 0..20_000u64 {
        store
            .apply(&Request::plain(
                &i.to_be_bytes(),
                &rules,
                1,
                Some(1_000 + i),
                Mode::Check,
            ))
            .unwrap();
    }
    assert!(store.len() <= 1000 + SHARDS, "{} keys held", store.len());
    // the newest keys survive eviction
    let d = store
        .apply(&Request::plain(
            &19_999u64.to_be_bytes(),
            &rules,
            1,
            Some(30_000),
            Mode::Peek,
        ))
        .unwrap();
    assert_eq!(d.rules[0].count, 1);
}

#[test]
fn expired_keys_are_swept() {
    let store = MemoryStore::new(1_000_000);
    let rules = RuleSet::parse("5/s").unwrap();
    for i in 0..50_000u64 {
        store
            .apply(&Request::plain(
                &i.to_be_bytes(),
                &rules,
                1,
                Some(1_000),
                Mode::Check,
            ))
            .unwrap();
    }
    for i in 50_000..100_000u64 {
        store
            .apply(&Request::plain(
                &i.to_be_bytes(),
                &rules,
                1,
                Some(100_000),
                Mode::Check,
            ))
            .unwrap();
    }
    // the first 50,000 expired long ago and are swept while the next 50,000 arrive
    assert!(store.len() < 75_000, "{} keys held", store.len());
}

#[test]
fn a_log_holds_no_more_than_its_largest_limit() {
    let store = MemoryStore::new(10);
    let rules = RuleSet::parse("1000/s").unwrap();
    for i in 0..10_000u64 {
        store
            .apply(&Request::plain(b"busy", &rules, 1, Some(i), Mode::Check))
            .unwrap();
    }
    let hash = store.hash(b"busy");
    let shard = store.shard(hash);
    assert_eq!(
        shard.logs.get(hash, b"busy").expect("held").bytes.len(),
        layout::header_len(1) + 1000 * layout::UNIT,
        "the engine's ring of the newest 1,000 units"
    );
}

#[test]
fn peek_logs_nothing() {
    let store = MemoryStore::new(10);
    let rules = RuleSet::parse("1/s").unwrap();
    for _ in 0..3 {
        assert!(
            store
                .apply(&Request::plain(b"k", &rules, 1, Some(5), Mode::Peek))
                .unwrap()
                .allowed
        );
    }
    assert!(store.is_empty());
}
