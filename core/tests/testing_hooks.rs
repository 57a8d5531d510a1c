//! The test helpers' hooks (`ratekeeper_core::testing`), in a process of
//! their own: they are process-wide, and other tests must not see them.

use ratekeeper_core::testing::{freeze, frozen, reset, set_disabled};
use ratekeeper_core::{Limiter, OnError, RuleSet, StoreOptions};

/// One test, as the hooks are process-wide.
#[test]
fn hooks_freeze_disable_and_reset() {
    let rules = RuleSet::parse("1/minute").unwrap();
    let limiter =
        Limiter::open(rules, "memory://", &StoreOptions::default(), OnError::Allow).unwrap();
    freeze(Some(1_000_000));
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    let denied = limiter.check(b"k", 1, None).unwrap();
    assert!(!denied.allowed());
    assert_eq!(denied.retry_after_ms, Some(60_000), "time stood still");
    freeze(Some(1_060_000));
    assert!(
        limiter.check(b"k", 1, None).unwrap().allowed(),
        "a minute on"
    );
    set_disabled(true);
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    set_disabled(false);
    assert!(!limiter.check(b"k", 1, None).unwrap().allowed());
    reset();
    assert!(limiter.check(b"k", 1, None).unwrap().allowed(), "emptied");
    freeze(None);
    assert_eq!(frozen(), None);
}
