//! In-flight rules on every store (memory, Redis by the script and with the
//! module loaded, Cluster): holds that take leases beside the rates in one
//! step, releases and extensions, leases that lapse, peeks that take
//! nothing, and the calls refused on such a limiter.

use crate::common;
use ratekeeper_core::{CheckOptions, Hold, Limiter, OnError, RuleSet};
use std::sync::Arc;
use std::time::Duration;

fn limiter(store: Arc<dyn ratekeeper_core::store::Store>, rules: &str) -> Limiter {
    Limiter::with_store(RuleSet::parse(rules).unwrap(), store, OnError::Raise)
        .with_scope(&common::unique_prefix())
        .unwrap()
}

fn at(now: f64) -> CheckOptions<'static> {
    CheckOptions {
        now: Some(now),
        ..CheckOptions::default()
    }
}

fn hold(limiter: &Limiter, key: &[u8], now: f64, lease_ms: u64) -> Hold {
    limiter.hold(key, &at(now), Some(lease_ms)).unwrap()
}

#[test]
fn slots_are_held_released_and_lapse_on_every_store() {
    let t = 1_800_000_000.0;
    for (name, store) in common::all() {
        let limiter = limiter(store, "2 concurrent");
        let key = b"export";
        let first = hold(&limiter, key, t, 10_000);
        let second = hold(&limiter, key, t + 1.0, 10_000);
        assert!(
            first.decision.allowed() && second.decision.allowed(),
            "{name}"
        );
        let (a, b) = (first.lease.unwrap(), second.lease.unwrap());
        assert_ne!(a.id, b.id, "{name}");
        let since = ratekeeper_core::in_flight::taken_at_of(&a.id);
        assert_eq!(since, Some(1_800_000_000_000), "{name}: the id says when");
        assert_eq!(a.lapse_at_ms, 1_800_000_010_000, "{name}");
        assert_eq!(second.decision.in_flight.unwrap().held, 2, "{name}");
        let alone = first.decision.in_flight.unwrap();
        assert_eq!(
            alone.lapse_after_ms,
            Some(10_000),
            "{name}: its own lease's lapse"
        );
        assert_eq!(
            first.decision.binding_state().reset_after_ms,
            10_000,
            "{name}"
        );
        // full: refused until the soonest lease lapses (9 s from t + 1)
        let third = hold(&limiter, key, t + 1.0, 10_000);
        assert!(!third.decision.allowed() && third.lease.is_none(), "{name}");
        assert_eq!(third.decision.retry_after_ms, Some(9_000), "{name}");
        assert_eq!(third.decision.binding_state().remaining, 0, "{name}");
        assert!(
            third.refusal().unwrap().contains("every slot is held"),
            "{name}"
        );
        // a peek says the same, and takes nothing
        let peeked = limiter.peek(key, 1, Some(t + 1.0)).unwrap();
        assert!(!peeked.allowed(), "{name}");
        // a release gives the slot back at once; a second is harmless
        assert!(limiter.release(&a).unwrap(), "{name}");
        assert!(!limiter.release(&a).unwrap(), "{name}");
        let fourth = hold(&limiter, key, t + 2.0, 10_000);
        assert!(fourth.decision.allowed(), "{name}");
        // a holder that died: its lease lapses, and the slot comes back
        let fifth = hold(&limiter, key, t + 11.5, 10_000);
        assert!(fifth.decision.allowed(), "{name}: b lapsed at t + 11");
        assert_eq!(fifth.decision.in_flight.unwrap().held, 2, "{name}");
        assert!(!limiter.release(&b).unwrap(), "{name}: a lapsed lease");
        // another key is untouched
        assert!(
            hold(&limiter, b"other", t + 2.0, 10_000).decision.allowed(),
            "{name}"
        );
    }
}

#[test]
fn a_hold_checks_the_rates_and_logs_only_when_it_takes_a_slot() {
    let t = 1_800_000_100.0;
    for (name, store) in common::all() {
        let limiter = limiter(store, "1 concurrent; 3/minute");
        let key = b"partner";
        let first = hold(&limiter, key, t, 60_000);
        assert!(first.decision.allowed(), "{name}");
        assert_eq!(first.decision.rules[0].remaining, 2, "{name}");
        // refused for the slot: the rate logs nothing
        for i in 0..3 {
            let refused = hold(&limiter, key, t + 1.0 + f64::from(i), 60_000);
            assert!(!refused.decision.allowed(), "{name}");
            assert_eq!(
                refused.decision.rules[0].remaining, 2,
                "{name}: nothing logged"
            );
        }
        limiter.release(&first.lease.unwrap()).unwrap();
        for i in 0..2 {
            let ok = hold(&limiter, key, t + 10.0 + f64::from(i), 60_000);
            assert!(ok.decision.allowed(), "{name}");
            limiter.release(&ok.lease.unwrap()).unwrap();
        }
        // the rate is spent: refused with a slot free, and no lease taken
        let spent = hold(&limiter, key, t + 20.0, 60_000);
        assert!(!spent.decision.allowed() && spent.lease.is_none(), "{name}");
        assert_eq!(spent.decision.in_flight.unwrap().held, 0, "{name}");
        assert_eq!(spent.decision.retry_after_ms, Some(40_000), "{name}");
        let headers = spent.decision.headers();
        let policy = headers
            .iter()
            .find(|(h, _)| *h == "RateLimit-Policy")
            .unwrap();
        assert_eq!(policy.1, "\"1m\";q=3;w=60", "{name}: no in-flight policy");
    }
}

#[test]
fn leases_extend_and_are_listed() {
    let t = 1_800_000_200.0;
    for (name, store) in common::all() {
        let limiter = limiter(store, "3 in flight").with_lease(5_000);
        let key = b"job";
        let lease = limiter.hold(key, &at(t), None).unwrap().lease.unwrap();
        assert_eq!(
            lease.lapse_at_ms, 1_800_000_205_000,
            "{name}: the limiter's lease"
        );
        let frozen = limiter.with_rules(RuleSet::parse("3 in flight").unwrap());
        // (an extension is made at the store's clock: a frozen one here)
        let clock = ratekeeper_core::Clock::frozen_at(1_800_000_204_000);
        let frozen = frozen
            .with_scope(limiter.scope())
            .unwrap()
            .with_clock(clock);
        let extended = frozen.extend(&lease, Some(30_000)).unwrap();
        assert_eq!(extended, Some(1_800_000_234_000), "{name}");
        let listed = frozen.leases(key).unwrap();
        assert_eq!(
            listed,
            vec![(lease.id.clone(), 1_800_000_234_000)],
            "{name}"
        );
        assert!(frozen.release_id(key, &lease.id).unwrap(), "{name}");
        assert!(frozen.leases(key).unwrap().is_empty(), "{name}");
        assert_eq!(
            frozen.extend(&lease, None).unwrap(),
            None,
            "{name}: released"
        );
    }
}

#[test]
fn calls_that_would_keep_a_slot_are_refused() {
    let limiter = limiter(common::memory(), "2 concurrent; 10/minute");
    let err = |e: ratekeeper_core::Error| e.to_string();
    let check = err(limiter.check(b"k", 1, None).unwrap_err());
    assert!(
        check.contains("hold()") && check.contains("2 concurrent"),
        "{check}"
    );
    assert!(err(limiter.reserve(b"k", &CheckOptions::default()).unwrap_err()).contains("hold()"));
    let plain = Limiter::with_store(
        RuleSet::parse("10/minute").unwrap(),
        common::memory(),
        OnError::Raise,
    );
    let no_slot = err(plain
        .hold(b"k", &CheckOptions::default(), None)
        .unwrap_err());
    assert!(no_slot.contains("has none"), "{no_slot}");
    for (text, want) in [
        ("2 concurrent; 3 at once", "2 in-flight rules"),
        ("0 concurrent", "at least 1"),
        ("2000000 concurrent", "at most 1000000"),
    ] {
        let e = RuleSet::parse(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
    let tiered = limiter.with_rules(RuleSet::parse("2 concurrent").unwrap());
    let tiers = vec![("pro".to_owned(), RuleSet::parse("5/s").unwrap())];
    assert!(err(tiered.with_tiers(tiers).err().unwrap()).contains("no tiers"));
    assert_eq!(
        RuleSet::parse("100/minute; 10 concurrent")
            .unwrap()
            .to_string(),
        "10 concurrent; 100/1m"
    );
}

#[test]
fn a_waiting_hold_takes_the_slot_a_release_frees() {
    for (name, store) in common::all() {
        let limiter = Arc::new(limiter(store, "1 concurrent"));
        let held = limiter
            .hold(b"w", &CheckOptions::default(), Some(60_000))
            .unwrap()
            .lease
            .unwrap();
        let other = Arc::clone(&limiter);
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            other.release(&held).unwrap()
        });
        let started = std::time::Instant::now();
        let mut pause = |d: Duration| {
            std::thread::sleep(d);
            Ok(())
        };
        let (acquired, hold) = limiter
            .hold_pausing(
                b"w",
                &CheckOptions::default(),
                None,
                Some(Duration::from_secs(5)),
                &mut pause,
            )
            .unwrap();
        assert!(releaser.join().unwrap(), "{name}");
        assert!(
            matches!(acquired, ratekeeper_core::Acquired::Admitted(_)),
            "{name}"
        );
        assert!(hold.lease.is_some(), "{name}");
        // well before the held lease's 60 s: the release was heard
        assert!(started.elapsed() < Duration::from_secs(3), "{name}");
        // and a short timeout ends with the refusal
        let (timed_out, none) = limiter
            .hold_pausing(
                b"w",
                &CheckOptions::default(),
                None,
                Some(Duration::from_millis(200)),
                &mut pause,
            )
            .unwrap();
        assert!(
            matches!(timed_out, ratekeeper_core::Acquired::TimedOut(_)),
            "{name}"
        );
        assert!(none.lease.is_none(), "{name}");
        limiter.release(&hold.lease.unwrap()).unwrap();
    }
}

#[test]
fn an_operator_sees_and_releases_a_lease_and_the_trail_says_so() {
    for (name, store) in common::all() {
        let limiter = limiter(store.clone(), "1 concurrent");
        let options = CheckOptions::default();
        let lease = limiter
            .hold(b"stuck", &options, Some(60_000))
            .unwrap()
            .lease
            .unwrap();
        let admin = ratekeeper_core::Admin::new(store).with_actor("ops");
        let seen = admin.inspect_in(b"stuck", limiter.scope(), None).unwrap();
        assert_eq!(seen.leases.len(), 1, "{name}");
        assert_eq!(
            seen.leases[0],
            (lease.id.clone(), lease.lapse_at_ms),
            "{name}"
        );
        assert!(
            admin.inspect(b"stuck", None).unwrap().leases.is_empty(),
            "{name}: another scope"
        );
        assert_eq!(
            admin.leases(b"stuck", limiter.scope()).unwrap(),
            seen.leases,
            "{name}"
        );
        assert!(
            !limiter
                .hold(b"stuck", &options, None)
                .unwrap()
                .decision
                .allowed(),
            "{name}"
        );
        let scope = limiter.scope();
        assert!(
            admin
                .release_lease(b"stuck", scope, &lease.id, "hung")
                .unwrap(),
            "{name}"
        );
        assert!(
            !admin
                .release_lease(b"stuck", scope, &lease.id, "again")
                .unwrap(),
            "{name}"
        );
        assert!(
            limiter
                .hold(b"stuck", &options, None)
                .unwrap()
                .decision
                .allowed(),
            "{name}"
        );
        let trail = admin.history(50).unwrap();
        let released: Vec<_> = trail.iter().filter(|c| c.detail == lease.id).collect();
        assert_eq!(released.len(), 1, "{name}: one release recorded");
        let change = released[0];
        assert_eq!(
            (
                change.action.as_str(),
                change.actor.as_str(),
                change.reason.as_str()
            ),
            ("release", "ops", "hung"),
            "{name}"
        );
        assert_eq!(
            (change.target.as_str(), change.scope.as_str()),
            ("stuck", scope),
            "{name}"
        );
        let bad = admin
            .release_lease(b"", scope, "x", "")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("lease id"), "{bad}");
    }
}

#[test]
fn hostile_keys_hold_their_own_slots_and_a_reset_frees_them() {
    let keys: [&[u8]; 5] = [
        b"\xff\xfe not utf-8",
        b"nul\0inside",
        b"cr\r\nlf",
        b"{braces}",
        b"",
    ];
    for (name, store) in common::all() {
        let limiter = limiter(store, "1 concurrent");
        for key in keys {
            let first = limiter.hold(key, &CheckOptions::default(), None).unwrap();
            assert!(first.decision.allowed(), "{name}: {key:?}");
            let second = limiter.hold(key, &CheckOptions::default(), None).unwrap();
            assert!(
                !second.decision.allowed(),
                "{name}: {key:?} holds its own slot"
            );
        }
        for key in keys {
            limiter.reset(key).unwrap();
            let after = limiter.hold(key, &CheckOptions::default(), None).unwrap();
            assert!(
                after.decision.allowed(),
                "{name}: {key:?}: a reset forgets the leases"
            );
        }
    }
}

#[test]
fn threads_released_at_once_never_hold_more_than_the_limit() {
    for (name, store) in common::all() {
        let limiter = Arc::new(limiter(store, "3 concurrent"));
        let start = Arc::new(std::sync::Barrier::new(16));
        let workers: Vec<_> = (0..16)
            .map(|_| {
                let (limiter, start) = (Arc::clone(&limiter), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    let hold = limiter
                        .hold(b"cold", &CheckOptions::default(), None)
                        .unwrap();
                    hold.lease
                })
            })
            .collect();
        let leases: Vec<_> = workers
            .into_iter()
            .filter_map(|w| w.join().unwrap())
            .collect();
        assert_eq!(leases.len(), 3, "{name}: exactly the limit taken");
        assert_eq!(limiter.leases(b"cold").unwrap().len(), 3, "{name}");
        for lease in &leases {
            assert!(limiter.release(lease).unwrap(), "{name}");
        }
    }
}

#[test]
fn a_frozen_redis_answers_a_hold_within_its_timeout_as_on_error_says() {
    let timeout = Duration::from_millis(250);
    let redis = common::OwnRedis::start(&[]);
    let options = ratekeeper_core::StoreOptions {
        prefix: common::unique_prefix(),
        timeout,
        connect_timeout: timeout,
        ..ratekeeper_core::StoreOptions::default()
    };
    let open = |on_error| {
        Limiter::open(
            RuleSet::parse("2 concurrent; 100/minute").unwrap(),
            &redis.url(),
            &options,
            on_error,
        )
        .unwrap()
    };
    let (allow, deny, raise) = (
        open(OnError::Allow),
        open(OnError::Deny),
        open(OnError::Raise),
    );
    assert!(allow
        .hold(b"k", &CheckOptions::default(), None)
        .unwrap()
        .lease
        .is_some());
    redis.freeze();
    for (limiter, allowed) in [(&allow, Some(true)), (&deny, Some(false)), (&raise, None)] {
        let started = std::time::Instant::now();
        let held = limiter.hold(b"k", &CheckOptions::default(), None);
        // one round trip, waited on once (see store::one_wait)
        assert!(
            started.elapsed() < timeout + Duration::from_millis(150),
            "{:?}",
            started.elapsed()
        );
        match allowed {
            Some(allowed) => {
                let held = held.unwrap();
                assert_eq!(held.decision.allowed(), allowed);
                assert!(held.decision.degraded() && held.lease.is_none());
            }
            None => assert!(held.is_err()),
        }
    }
    redis.thaw();
}
