//! The test helpers' hooks: the process's [`Clock`] (frozen, switched off)
//! and `ratekeeper_core::testing::reset`, in a process of their own: they
//! are process-wide, and other tests must not see them. A limiter given a
//! clock of its own sees none of them.

use ratekeeper_core::testing::reset;
use ratekeeper_core::{Clock, Limiter, OnError, RuleSet, StoreOptions};

fn memory_limiter() -> Limiter {
    let rules = RuleSet::parse("1/minute").unwrap();
    Limiter::open(rules, "memory://", &StoreOptions::default(), OnError::Allow).unwrap()
}

/// One test, as the hooks are process-wide.
#[test]
fn hooks_freeze_disable_and_reset() {
    let limiter = memory_limiter();
    // on a clock of its own, frozen an hour later: the process's hooks miss it
    let own = memory_limiter().with_clock(Clock::frozen_at(4_600_000));
    let process = Clock::process();
    process.freeze(Some(1_000_000));
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    let denied = limiter.check(b"k", 1, None).unwrap();
    assert!(!denied.allowed());
    assert_eq!(denied.retry_after_ms, Some(60_000), "time stood still");
    assert!(
        own.check(b"j", 1, None).unwrap().allowed(),
        "an hour on, by its own clock"
    );
    assert!(!own.check(b"j", 1, None).unwrap().allowed());
    process.freeze(Some(1_060_000));
    assert!(
        limiter.check(b"k", 1, None).unwrap().allowed(),
        "a minute on"
    );
    process.set_limiting(false);
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    assert!(
        !own.check(b"j", 1, None).unwrap().allowed(),
        "its own clock still limits"
    );
    process.set_limiting(true);
    assert!(!limiter.check(b"k", 1, None).unwrap().allowed());
    reset();
    assert!(limiter.check(b"k", 1, None).unwrap().allowed(), "emptied");
    process.freeze(None);
    assert_eq!(Clock::process().frozen(), None);
    assert_eq!(limiter.clock().frozen(), None);
}
