//! Batches (`check_many`, `check_batch`: one Redis round trip) and the
//! in-process denial cache (a hammered denied key does not reach Redis).

use crate::common;

use ratekeeper_core::{check_batch, BatchItem, Limiter, OnError, RuleSet, StoreOptions};
use std::time::Duration;

fn limiter(rules: &str) -> Limiter {
    let options = StoreOptions {
        prefix: common::unique_prefix(),
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        ..StoreOptions::default()
    };
    Limiter::open(
        RuleSet::parse(rules).unwrap(),
        &common::redis_url(),
        &options,
        OnError::Raise,
    )
    .unwrap()
}

#[test]
fn a_hammered_denied_key_is_answered_in_process() {
    let limiter = limiter("2/hour");
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    let first_denial = limiter.check(b"k", 1, None).unwrap();
    assert!(!first_denial.allowed() && !first_denial.cached);
    let attempts = limiter.store_stats().attempts;
    for _ in 0..1000 {
        let d = limiter.check(b"k", 1, None).unwrap();
        assert!(!d.allowed() && d.cached);
        assert!(d.retry_after_ms.unwrap() > 0 && d.retry_after_ms <= first_denial.retry_after_ms);
    }
    assert_eq!(limiter.store_stats().attempts, attempts, "Redis was called");
    // a smaller cost is not covered by a denial of a bigger one, nor other keys
    assert!(limiter.check(b"other", 1, None).unwrap().allowed());
    // a reset in this process takes effect at once
    limiter.reset(b"k").unwrap();
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
}

#[test]
fn a_reset_elsewhere_is_seen_within_the_cap() {
    let here = limiter("1/hour").with_denial_cache(Duration::from_millis(300));
    let there = here.with_rules(RuleSet::parse("1/hour").unwrap());
    assert!(here.check(b"k", 1, None).unwrap().allowed());
    assert!(!here.check(b"k", 1, None).unwrap().allowed());
    there.reset(b"k").unwrap();
    assert!(
        !here.check(b"k", 1, None).unwrap().allowed(),
        "remembered for up to the cap"
    );
    std::thread::sleep(Duration::from_millis(350));
    assert!(
        here.check(b"k", 1, None).unwrap().allowed(),
        "seen after the cap"
    );
}

#[test]
fn explicit_times_and_a_zero_cap_are_never_cached() {
    let limiter = limiter("1/hour").with_denial_cache(Duration::ZERO);
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    for _ in 0..3 {
        assert!(!limiter.check(b"k", 1, None).unwrap().cached);
    }
    let timed = self::limiter("1/hour");
    assert!(timed.check(b"k", 1, Some(1000.0)).unwrap().allowed());
    assert!(!timed.check(b"k", 1, Some(1001.0)).unwrap().cached);
    assert!(timed
        .check(b"k", 1, Some(1000.0 + 3600.0))
        .unwrap()
        .allowed());
}

#[test]
fn check_many_answers_each_key_in_order() {
    let limiter = limiter("2/hour");
    let keys: [&[u8]; 4] = [b"a", b"b", b"a", b"a"];
    let decisions = limiter.check_many(&keys, 1, None).unwrap();
    let allowed: Vec<bool> = decisions.iter().map(|d| d.allowed()).collect();
    assert_eq!(allowed, [true, true, true, false]);
    assert_eq!(decisions[2].rules[0].remaining, 0);
    // after SCRIPT FLUSH the pipeline's EVALSHAs fail with NOSCRIPT and are re-run
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut common::raw_redis())
        .unwrap();
    let again = limiter.check_many(&[b"c", b"c", b"c"], 1, None).unwrap();
    assert_eq!(
        again.iter().map(|d| d.allowed()).collect::<Vec<_>>(),
        [true, true, false]
    );
}

#[test]
fn check_batch_mixes_rule_sets_on_one_store() {
    let per_ip = limiter("3/minute");
    let per_user = per_ip.with_rules(RuleSet::parse("1/minute; 5/hour").unwrap());
    let items = [
        BatchItem::new(&per_ip, b"ip:1", 1),
        BatchItem::new(&per_user, b"user:7", 1),
    ];
    let first = check_batch(&items, None).unwrap();
    assert!(first[0].allowed() && first[1].allowed());
    assert_eq!(
        (
            first[0].binding_state().limit,
            first[1].binding_state().limit
        ),
        (3, 1)
    );
    let second = check_batch(&items, None).unwrap();
    assert!(second[0].allowed(), "the IP rule still has room");
    assert!(!second[1].allowed(), "the user rule is spent");
    assert!(
        check_batch(&[BatchItem::new(&per_ip, b"k", 0)], None).is_err(),
        "bad costs are refused"
    );
}
