//! Reservations on every store: a check for an estimate, settled to what
//! the work cost (units given back, or an overrun charged and never
//! refused), and what a settle of a reservation the store did not log does.

use crate::common;
use ratekeeper_core::{CheckOptions, Limiter, OnError, RuleSet};

fn reserve(limiter: &Limiter, key: &[u8], cost: u64, now: f64) -> ratekeeper_core::Reservation {
    let options = CheckOptions {
        cost,
        now: Some(now),
        ..CheckOptions::default()
    };
    limiter.reserve(key, &options).unwrap()
}

#[test]
fn a_settle_gives_back_what_was_not_used_and_charges_an_overrun_on_every_store() {
    for (name, store) in common::all() {
        let limiter = Limiter::with_store(
            RuleSet::parse("100/minute; 1000/hour").unwrap(),
            store,
            OnError::Raise,
        );
        let key = format!("{}-tokens", common::unique_prefix()).into_bytes();
        let t = 1_800_000_000.0;
        // 60 reserved; 50 more do not fit
        let first = reserve(&limiter, &key, 60, t);
        assert!(first.decision.allowed() && first.logged(), "{name}");
        assert_eq!(first.decision.rules[0].remaining, 40, "{name}");
        let denied = reserve(&limiter, &key, 50, t + 1.0);
        assert!(!denied.decision.allowed() && !denied.logged(), "{name}");
        let nothing = limiter.settle(&denied, 0, Some(t + 1.0)).unwrap();
        assert!(
            nothing.decision.is_none() && nothing.refunded == 0,
            "{name}: a denial settles to nothing"
        );

        // the work cost 10: 50 back, in every window, as if never spent
        let settled = limiter.settle(&first, 10, Some(t + 2.0)).unwrap();
        assert_eq!((settled.refunded, settled.over), (50, 0), "{name}");
        let after = settled
            .decision
            .expect("a settle that changed the log decides");
        assert!(after.allowed(), "{name}");
        assert_eq!(after.rules[0].remaining, 90, "{name}");
        assert_eq!(after.rules[1].remaining, 990, "{name}");
        let again = limiter.settle(&first, 10, Some(t + 2.0)).unwrap_err();
        assert!(
            again.to_string().contains("settles once"),
            "{name}: {again}"
        );
        let second = reserve(&limiter, &key, 50, t + 3.0);
        assert!(
            second.decision.allowed(),
            "{name}: the units given back admit it"
        );
        assert_eq!(second.decision.rules[0].remaining, 40, "{name}");

        // the work cost 120 of 50: 70 more, charged past the limit, never refused
        let over = limiter.settle(&second, 120, Some(t + 4.0)).unwrap();
        assert_eq!((over.refunded, over.over), (0, 70), "{name}");
        let after = over.decision.unwrap();
        assert!(
            after.allowed(),
            "{name}: an overrun is counted, never refused"
        );
        assert_eq!(after.rules[0].remaining, 0, "{name}");
        assert_eq!(after.rules[1].remaining, 1000 - 130, "{name}");
        assert!(
            !limiter.check(&key, 1, Some(t + 5.0)).unwrap().allowed(),
            "{name}"
        );
        // the 50 and the 10 leave the minute a minute after their checks,
        // the overrun a minute after the settle
        let later = limiter.check(&key, 1, Some(t + 63.5)).unwrap();
        assert!(later.allowed(), "{name}");
        assert_eq!(later.rules[0].remaining, 100 - 70 - 1, "{name}");

        // at the estimate: nothing to ask the store
        let even = reserve(&limiter, &key, 5, t + 64.0);
        let same = limiter.settle(&even, 5, Some(t + 64.0)).unwrap();
        assert!(
            same.decision.is_none() && same.over == 0 && same.refunded == 0,
            "{name}"
        );

        // a settle after the longest window gives nothing back
        let old = reserve(&limiter, &key, 7, t + 65.0);
        assert!(old.logged(), "{name}");
        let late = limiter.settle(&old, 0, Some(t + 65.0 + 3_700.0)).unwrap();
        let late = late.decision.unwrap();
        assert_eq!(
            late.rules[1].remaining, 1000,
            "{name}: nothing left in any window"
        );
    }
}
