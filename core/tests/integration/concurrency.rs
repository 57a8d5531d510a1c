//! Many threads on one key never admit more than the limit, on either store.

use crate::common;

use ratekeeper_core::{Limiter, OnError, RuleSet, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn hammer(store: Arc<dyn Store>, rules: &str, threads: usize, per_thread: usize) -> u64 {
    let limiter = Arc::new(Limiter::with_store(
        RuleSet::parse(rules).unwrap(),
        store,
        OnError::Raise,
    ));
    let admitted = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let limiter = limiter.clone();
            let admitted = admitted.clone();
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    if limiter.check(b"shared", 1, None).unwrap().allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    admitted.load(Ordering::Relaxed)
}

#[test]
fn threads_admit_exactly_the_limit() {
    for (name, store) in common::all() {
        assert_eq!(
            hammer(store, "100/hour", 16, 40),
            100,
            "{name}: 640 tries on 100/hour"
        );
    }
}

#[test]
fn threads_admit_exactly_the_tightest_of_several_rules() {
    for (name, store) in common::all() {
        assert_eq!(
            hammer(store, "500/hour; 77/day; 1000/366d", 8, 50),
            77,
            "{name}: 400 tries, 77/day binds"
        );
    }
}

/// Keys with braces cannot choose their Cluster slot: they are hashed, and
/// their log lands where the hash says, not where `{...}` would send it.
#[test]
fn braces_in_keys_cannot_pick_a_cluster_slot() {
    let Some(store) = common::cluster() else {
        return;
    };
    let limiter = Limiter::with_store(RuleSet::parse("2/hour").unwrap(), store, OnError::Raise);
    for key in [&b"{user}:1"[..], b"{user}:2", b"a{b}c", b"}{", &[b'{'; 300]] {
        assert!(limiter.check(key, 1, None).unwrap().allowed());
        assert!(limiter.check(key, 1, None).unwrap().allowed());
        assert!(!limiter.check(key, 1, None).unwrap().allowed(), "{key:?}");
    }
    let tag = ratekeeper_core::keys::key_tag(b"{user}:1");
    assert!(tag.starts_with(b"#") && !tag.contains(&b'{'));
}
