//! Meters on every store: a limiter of several named rule sets whose check
//! charges each its own units and logs on all of them or on none, its
//! reservations settled per meter, and the errors that name a bad cost.

use crate::common;
use ratekeeper_core::{CheckOptions, Decision, Limiter, OnError, RuleSet, StoreOptions};
use std::sync::Arc;

fn metered(store: Arc<dyn ratekeeper_core::store::Store>, on_error: OnError) -> Limiter {
    Limiter::with_store(RuleSet::parse("1/s").unwrap(), store, on_error)
        .with_meters(vec![
            ("requests".into(), RuleSet::parse("3/minute").unwrap()),
            (
                "tokens".into(),
                RuleSet::parse("100/minute; 1000/day").unwrap(),
            ),
        ])
        .unwrap()
}

fn costs(limiter: &Limiter, given: &[(&str, i128)]) -> Vec<u64> {
    let given: Vec<(String, i128)> = given.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    limiter.meter_costs(&given).unwrap()
}

/// A check (`logs`) or a peek of `given` units per meter at `now`.
fn decide(limiter: &Limiter, key: &[u8], given: &[(&str, i128)], now: f64, logs: bool) -> Decision {
    let costs = costs(limiter, given);
    let options = CheckOptions {
        now: Some(now),
        meter_costs: Some(&costs),
        ..CheckOptions::default()
    };
    match logs {
        true => limiter.check_with(key, &options).unwrap(),
        false => limiter.peek_with(key, &options).unwrap(),
    }
}

fn check(limiter: &Limiter, key: &[u8], given: &[(&str, i128)], now: f64) -> Decision {
    decide(limiter, key, given, now, true)
}

/// Each meter's remaining units in its shortest window, by a peek of one unit each.
fn remaining(limiter: &Limiter, key: &[u8], now: f64) -> (u64, u64) {
    let d = decide(limiter, key, &[("requests", 1), ("tokens", 1)], now, false);
    (d.rules[0].remaining, d.rules[1].remaining)
}

#[test]
fn a_check_logs_on_every_meter_or_on_none_on_every_store() {
    for (name, store) in common::all() {
        let limiter = metered(store, OnError::Raise);
        let key = format!("{}-llm", common::unique_prefix()).into_bytes();
        let t = 1_800_000_000.0;
        for i in 0..2 {
            let d = check(
                &limiter,
                &key,
                &[("requests", 1), ("tokens", 40)],
                t + f64::from(i),
            );
            assert!(d.allowed(), "{name}: call {i}");
        }
        assert_eq!(remaining(&limiter, &key, t + 2.0), (1, 20), "{name}");
        // the tokens do not fit: refused, and no request is spent
        let refused = check(&limiter, &key, &[("requests", 1), ("tokens", 40)], t + 2.0);
        assert!(!refused.allowed(), "{name}");
        assert_eq!(refused.meter(), Some("tokens"), "{name}");
        assert_eq!(
            refused.retry_after_ms,
            Some(58_000),
            "{name}: when the first 40 leave"
        );
        assert_eq!(
            refused
                .meters
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>(),
            ["requests", "tokens"],
            "{name}"
        );
        assert_eq!(
            remaining(&limiter, &key, t + 2.0),
            (1, 20),
            "{name}: nothing logged"
        );
        let header = refused.headers();
        let retry = header.iter().find(|(n, _)| *n == "Retry-After").unwrap();
        assert_eq!(retry.1, "58", "{name}");
        // the requests do not fit: refused, and no token is spent
        assert!(check(&limiter, &key, &[("requests", 1), ("tokens", 10)], t + 3.0).allowed());
        let no_request = check(&limiter, &key, &[("requests", 1), ("tokens", 5)], t + 4.0);
        assert!(!no_request.allowed(), "{name}");
        assert_eq!(no_request.meter(), Some("requests"), "{name}");
        assert_eq!(remaining(&limiter, &key, t + 4.0), (0, 10), "{name}");
        // a meter not charged is not consulted: tokens alone still fit
        let tokens_only = check(&limiter, &key, &[("tokens", 10)], t + 5.0);
        assert!(tokens_only.allowed(), "{name}");
        assert_eq!(tokens_only.meters.len(), 1, "{name}");
        assert_eq!(tokens_only.policy_name(0), "tokens-1m", "{name}");
        // a cost past every limit of a meter never passes
        let never = check(
            &limiter,
            &key,
            &[("requests", 1), ("tokens", 101)],
            t + 70.0,
        );
        assert_eq!(
            (never.allowed(), never.retry_after_ms),
            (false, None),
            "{name}"
        );
        // reset forgets every meter
        limiter.reset(&key).unwrap();
        assert_eq!(remaining(&limiter, &key, t + 5.0), (3, 100), "{name}");
    }
}

#[test]
fn bad_costs_and_meters_are_named() {
    let limiter = metered(common::memory(), OnError::Raise);
    let error = |given: &[(&str, i128)]| {
        let given: Vec<(String, i128)> = given.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        limiter.meter_costs(&given).unwrap_err().to_string()
    };
    assert!(error(&[("token", 1)])
        .contains("unknown meter 'token': this limiter's meters are [requests, tokens]"));
    assert!(error(&[("tokens", -1)]).contains("invalid cost -1 for meter 'tokens'"));
    assert!(error(&[("tokens", 1), ("tokens", 2)]).contains("given twice"));
    let zero = costs(&limiter, &[("tokens", 0)]);
    let options = CheckOptions {
        meter_costs: Some(&zero),
        ..CheckOptions::default()
    };
    let message = limiter.check_with(b"k", &options).unwrap_err().to_string();
    assert!(
        message.contains("at least one meter at least 1 unit"),
        "{message}"
    );
    let message = limiter.check(b"k", 1, None).unwrap_err().to_string();
    assert!(
        message.contains("has meters (requests, tokens)"),
        "{message}"
    );
    let plain = Limiter::with_store(
        RuleSet::parse("1/s").unwrap(),
        common::memory(),
        OnError::Raise,
    );
    let message = plain
        .meter_costs(&[("tokens".into(), 1)])
        .unwrap_err()
        .to_string();
    assert!(message.contains("has no meters"), "{message}");
    let one = [1u64];
    let options = CheckOptions {
        meter_costs: Some(&one),
        ..CheckOptions::default()
    };
    let message = plain.check_with(b"k", &options).unwrap_err().to_string();
    assert!(message.contains("has no meters"), "{message}");
    for (meters, wanted) in [
        (vec![], "at least one"),
        (
            vec![("a b".to_string(), RuleSet::parse("1/s").unwrap())],
            "invalid meter name 'a b'",
        ),
        (
            vec![
                ("x".to_string(), RuleSet::parse("1/s").unwrap()),
                ("x".to_string(), RuleSet::parse("2/s").unwrap()),
            ],
            "meter 'x' is given twice",
        ),
    ] {
        let plain = Limiter::with_store(
            RuleSet::parse("1/s").unwrap(),
            common::memory(),
            OnError::Raise,
        );
        let message = plain.with_meters(meters).err().unwrap().to_string();
        assert!(message.contains(wanted), "{message}");
    }
    let tiered = Limiter::with_store(
        RuleSet::parse("1/s").unwrap(),
        common::memory(),
        OnError::Raise,
    )
    .with_tiers(vec![("pro".into(), RuleSet::parse("5/s").unwrap())])
    .unwrap();
    let message = tiered
        .with_meters(vec![("x".into(), RuleSet::parse("1/s").unwrap())])
        .err()
        .unwrap()
        .to_string();
    assert!(message.contains("meters or tiers"), "{message}");
}

#[test]
fn a_reservation_settles_per_meter_on_every_store() {
    for (name, store) in common::all() {
        let limiter = metered(store, OnError::Raise);
        let key = format!("{}-reserve", common::unique_prefix()).into_bytes();
        let t = 1_800_000_000.0;
        let estimate = costs(&limiter, &[("requests", 1), ("tokens", 80)]);
        let options = CheckOptions {
            now: Some(t),
            meter_costs: Some(&estimate),
            ..CheckOptions::default()
        };
        let reservation = limiter.reserve(&key, &options).unwrap();
        assert!(reservation.logged(), "{name}");
        assert_eq!(
            reservation.estimates,
            [("requests".into(), 1), ("tokens".into(), 80)]
        );
        assert!(!check(&limiter, &key, &[("requests", 1), ("tokens", 30)], t + 1.0).allowed());
        // the call used 15 tokens: 65 go back; the request stays spent
        let actual = limiter.meter_actuals(&[("tokens".into(), 15)]).unwrap();
        let settled = limiter
            .settle_meters(&reservation, &actual, Some(t + 2.0))
            .unwrap();
        assert_eq!((settled.over, settled.refunded), (0, 65), "{name}");
        assert_eq!(settled.meters.len(), 1, "{name}");
        assert_eq!(remaining(&limiter, &key, t + 2.0), (2, 85), "{name}");
        let again = limiter.settle_meters(&reservation, &actual, Some(t + 2.0));
        assert!(
            again.unwrap_err().to_string().contains("settles once"),
            "{name}"
        );
        // an overrun is charged, never refused, on a meter reserved or not
        let second = limiter.reserve(&key, &options).unwrap();
        assert!(second.decision.allowed(), "{name}");
        let actual = limiter
            .meter_actuals(&[("tokens".into(), 100), ("requests".into(), 2)])
            .unwrap();
        let over = limiter
            .settle_meters(&second, &actual, Some(t + 3.0))
            .unwrap();
        assert_eq!(
            (over.over, over.refunded),
            (21, 0),
            "{name}: 20 tokens and a request"
        );
        assert!(over.decision.unwrap().allowed(), "{name}");
        assert_eq!(remaining(&limiter, &key, t + 3.0), (0, 0), "{name}");
        // a single settle of a metered reservation is refused by name
        let third = limiter.reserve(&key, &options).unwrap();
        assert!(!third.logged(), "{name}");
        let message = limiter.settle(&third, 1, None).unwrap_err().to_string();
        assert!(message.contains("per meter"), "{name}: {message}");
    }
}

#[test]
fn threads_racing_on_one_key_never_spend_a_meter_alone() {
    for (name, store) in common::all() {
        let limiter = Arc::new(metered(store, OnError::Raise));
        let key = format!("{}-race", common::unique_prefix()).into_bytes();
        let t = 1_800_000_000.0;
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (limiter, key) = (limiter.clone(), key.clone());
                std::thread::spawn(move || {
                    let mut admitted = (0u64, 0u64);
                    for j in 0..6 {
                        let tokens = 7 + (i * 6 + j) % 23;
                        let d = check(&limiter, &key, &[("requests", 1), ("tokens", tokens)], t);
                        if d.allowed() {
                            admitted = (admitted.0 + 1, admitted.1 + tokens as u64);
                        }
                    }
                    admitted
                })
            })
            .collect();
        let (mut requests, mut tokens) = (0, 0);
        for thread in threads {
            let (r, k) = thread.join().unwrap();
            requests += r;
            tokens += k;
        }
        assert!(
            requests <= 3 && tokens <= 100,
            "{name}: {requests} requests, {tokens} tokens"
        );
        assert!(requests >= 1, "{name}");
        assert_eq!(
            remaining(&limiter, &key, t),
            (3 - requests, 100 - tokens),
            "{name}"
        );
    }
}

#[test]
fn a_failing_store_falls_back_over_every_meter() {
    let store = ratekeeper_core::store::open(
        "redis://127.0.0.1:1/0",
        &StoreOptions {
            timeout: std::time::Duration::from_millis(100),
            connect_timeout: std::time::Duration::from_millis(100),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let limiter = metered(store, OnError::Deny);
    let d = check(
        &limiter,
        b"k",
        &[("requests", 1), ("tokens", 5)],
        1_800_000_000.0,
    );
    assert!(d.degraded() && !d.allowed());
    assert_eq!(d.rules.len(), 3);
    assert!(d
        .warning
        .as_deref()
        .unwrap_or("")
        .contains("the store is failing"));
}
