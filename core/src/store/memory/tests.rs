use super::*;
use crate::rule::RuleSet;
use crate::store::Mode;
use ratekeeper_engine::layout;

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
fn a_log_holds_no_more_entries_than_its_window_has_steps() {
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
        layout::header_len(1) + 1002 * layout::ENTRY,
        "a ring of a second's 1,000 one-millisecond steps and two"
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

/// Checks (or with `Mode::Peek`, reads) `key` under `rules` at `now` ms.
fn at(store: &MemoryStore, key: &[u8], rules: &RuleSet, now: u64, mode: Mode) -> Observation {
    store
        .apply(&Request::plain(key, rules, 1, Some(now), mode))
        .unwrap()
}

const HOUR: u64 = 3_600_000;

#[test]
fn a_full_store_sweeps_emptied_logs_before_it_evicts_a_live_one() {
    let n = 1000;
    let store = MemoryStore::new(n);
    let rules = RuleSet::parse("3/hour").unwrap();
    let t0 = 1_000_000;
    for i in 0..n as u64 - 1 {
        at(&store, &i.to_be_bytes(), &rules, t0, Mode::Check);
    }
    // an hour on, those windows have emptied; alice uses two of her three
    let later = t0 + HOUR;
    for _ in 0..2 {
        at(&store, b"alice", &rules, later, Mode::Check);
    }
    assert_eq!(store.len(), n, "the store is full, of emptied logs but one");
    // n - 1 new keys, all held where alice is (a bound per shard would evict her)
    let alice_shard = shard_of(store.hash(b"alice"));
    let newcomers: Vec<[u8; 8]> = (1_000_000u64..)
        .map(u64::to_be_bytes)
        .filter(|key| shard_of(store.hash(key)) == alice_shard)
        .take(n - 1)
        .collect();
    for key in &newcomers {
        at(&store, key, &rules, later + 1, Mode::Check);
    }
    // the emptied logs made the room: alice and every newcomer keep their counts
    let alice = at(&store, b"alice", &rules, later + 2, Mode::Peek);
    assert_eq!(alice.rules[0].count, 2, "alice's log was evicted");
    let kept = newcomers
        .iter()
        .filter(|key| at(&store, &key[..], &rules, later + 2, Mode::Peek).rules[0].count == 1)
        .count();
    assert_eq!(kept, n - 1);
    assert_eq!(store.len(), n);
}

#[test]
fn a_store_full_of_live_keys_evicts_those_closest_to_expiry_and_their_quotas_reset() {
    let n = 1000;
    let store = MemoryStore::new(n);
    let rules = RuleSet::parse("3/hour").unwrap();
    let t0 = 1_000_000;
    // alice spends her three an hour first; n - 1 others one each after her
    for _ in 0..3 {
        at(&store, b"alice", &rules, t0, Mode::Check);
    }
    assert!(!at(&store, b"alice", &rules, t0, Mode::Check).allowed);
    let others: Vec<[u8; 8]> = (0..n as u64 - 1).map(u64::to_be_bytes).collect();
    for (i, key) in others.iter().enumerate() {
        at(&store, key, &rules, t0 + 1 + i as u64, Mode::Check);
    }
    // max_keys live keys fit: none is evicted
    let now = t0 + 10_000;
    assert!(!at(&store, b"alice", &rules, now, Mode::Peek).allowed);
    let counts = |store: &MemoryStore| -> Vec<u64> {
        others
            .iter()
            .map(|key| at(store, &key[..], &rules, now, Mode::Peek).rules[0].count)
            .collect()
    };
    assert_eq!(counts(&store), vec![1; n - 1]);
    // one more key: every key is live, so the eighth of max_keys closest to
    // expiry goes (alice first), and their quotas start afresh
    at(&store, b"newcomer", &rules, now, Mode::Check);
    let evicted = n.div_ceil(8);
    assert_eq!(store.len(), n - evicted + 1);
    let alice = at(&store, b"alice", &rules, now, Mode::Peek);
    assert!(alice.allowed, "alice's quota was reset by her eviction");
    assert_eq!(alice.rules[0].count, 0);
    let mut expected = vec![0; evicted - 1];
    expected.resize(n - 1, 1);
    assert_eq!(
        counts(&store),
        expected,
        "the newest keys keep their counts"
    );
}
