//! Controls on every store: listings (keys, addresses, ranges) with TTLs,
//! tiers and overrides stored per key, the global switches, and fail2ban.
//! On Redis and the Cluster, "another process" is a second store (its own
//! pool and its own view of the shared policies) with the same prefix.

use crate::common;

use ratekeeper_core::controls::Field;
use ratekeeper_core::store::{self, Store, StoreOptions};
use ratekeeper_core::{
    Admin, CheckOptions, Fail2Ban, Limiter, List, Offender, OnError, RuleSet, TargetOptions,
};
use std::sync::Arc;
use std::time::Duration;

const T0: f64 = 1_700_000_000.0;

/// A store's name, this process's handle on it, another process's.
type Pair = (&'static str, Arc<dyn Store>, Arc<dyn Store>);

/// Each store as two processes see it.
fn pairs() -> Vec<Pair> {
    let memory = common::memory();
    let mut out: Vec<Pair> = vec![("memory", memory.clone(), memory)];
    out.push(pair("redis", &common::redis_url()));
    if let Ok(cluster) = std::env::var("RATEKEEPER_TEST_CLUSTER") {
        out.push(pair("cluster", &cluster));
    }
    out
}

/// The store at `url` as two processes see it (a prefix of their own).
fn pair(name: &'static str, url: &str) -> Pair {
    let options = StoreOptions {
        prefix: common::unique_prefix(),
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        ..StoreOptions::default()
    };
    (
        name,
        store::open(url, &options).unwrap(),
        store::open(url, &options).unwrap(),
    )
}

fn limiter(store: &Arc<dyn Store>, rules: &str) -> Limiter {
    Limiter::with_store(
        RuleSet::parse(rules).unwrap(),
        store.clone(),
        OnError::Raise,
    )
    .with_denial_cache(Duration::ZERO)
    .with_controls_refresh(Duration::from_millis(100))
    .unwrap()
}

fn at(limiter: &Limiter, key: &str, now: f64) -> ratekeeper_core::Decision {
    limiter.check(key.as_bytes(), 1, Some(now)).unwrap()
}

#[test]
fn a_blocked_key_is_refused_by_every_process_at_once_until_its_ttl() {
    for (name, here, there) in pairs() {
        let app = limiter(&there, "100/minute");
        assert!(at(&app, "user:1", T0).allowed(), "{name}");
        let admin = Admin::new(here.clone());
        let entry = admin
            .add(List::Block, b"user:1", Some(60.0), "chargeback", Some(T0))
            .unwrap();
        assert_eq!(entry.until_ms, Some(1_700_000_060_000));
        let d = at(&app, "user:1", T0 + 1.0);
        assert!(
            !d.allowed() && d.blocked(),
            "{name}: blocked on the next check"
        );
        assert_eq!(d.reason.as_deref(), Some("chargeback"));
        assert_eq!(
            d.retry_after_ms,
            Some(59_000),
            "{name}: until the entry lapses"
        );
        assert!(
            at(&app, "user:2", T0 + 1.0).allowed(),
            "{name}: other keys pass"
        );
        let d = at(&app, "user:1", T0 + 61.0);
        assert!(
            d.allowed() && !d.blocked(),
            "{name}: the block lapsed after its TTL"
        );
        // unblock before the TTL
        admin
            .add(List::Block, b"user:1", None, "", Some(T0 + 100.0))
            .unwrap();
        assert!(!at(&app, "user:1", T0 + 101.0).allowed(), "{name}");
        assert!(admin.remove(List::Block, b"user:1").unwrap(), "{name}");
        assert!(
            at(&app, "user:1", T0 + 102.0).allowed(),
            "{name}: unblocked"
        );
        assert!(!admin.remove(List::Block, b"user:1").unwrap(), "{name}");
    }
}

#[test]
fn a_safelisted_key_skips_limiting_and_is_not_counted() {
    for (name, here, there) in pairs() {
        let app = limiter(&there, "1/minute");
        let admin = Admin::new(here);
        admin
            .add(List::Safe, b"office", Some(3600.0), "our NAT", Some(T0))
            .unwrap();
        for i in 0..5 {
            let d = at(&app, "office", T0 + f64::from(i));
            assert!(d.allowed() && d.safelisted(), "{name}");
        }
        admin.remove(List::Safe, b"office").unwrap();
        assert!(
            at(&app, "office", T0 + 10.0).allowed(),
            "{name}: nothing was counted"
        );
        assert!(!at(&app, "office", T0 + 11.0).allowed(), "{name}");
        assert_eq!(app.stats().safelisted, 5, "{name}");
    }
}

#[test]
fn an_idle_process_holds_a_change_made_elsewhere_by_its_next_check() {
    for (name, here, there) in pairs() {
        let app = limiter(&there, "100/minute");
        let opts = CheckOptions {
            now: Some(T0),
            ip: Some("198.51.100.7"),
            ..CheckOptions::default()
        };
        assert!(
            app.check_with(b"user:9", &opts).unwrap().allowed(),
            "{name}"
        );
        Admin::new(here)
            .add(List::Block, b"198.51.100.7", Some(60.0), "", Some(T0))
            .unwrap();
        // the app makes no check for a while: its policies are read all the
        // same (every 100 ms here), so its very next check sees the block
        std::thread::sleep(Duration::from_millis(600));
        let d = app.check_with(b"user:9", &opts).unwrap();
        assert!(d.blocked(), "{name}: the first check after an idle spell");
    }
}

#[test]
fn addresses_and_ranges_are_matched_against_the_client_address() {
    for (name, here, there) in pairs() {
        let app = limiter(&there, "100/minute");
        let admin = Admin::new(here);
        admin
            .add(
                List::Block,
                b"203.0.113.0/24",
                Some(60.0),
                "botnet",
                Some(T0),
            )
            .unwrap();
        admin
            .add(List::Safe, b"203.0.113.9", Some(60.0), "", Some(T0))
            .unwrap();
        // other processes see address lists within their refresh (100 ms here)
        std::thread::sleep(Duration::from_millis(150));
        let opts = |ip| CheckOptions {
            now: Some(T0 + 1.0),
            ip: Some(ip),
            ..CheckOptions::default()
        };
        let d = app.check_with(b"user:5", &opts("203.0.113.77")).unwrap();
        assert!(!d.allowed() && d.blocked(), "{name}: in the range");
        assert_eq!(d.reason.as_deref(), Some("botnet"));
        assert!(
            app.check_with(b"user:5", &opts("203.0.114.1"))
                .unwrap()
                .allowed(),
            "{name}"
        );
        let d = app.check_with(b"user:5", &opts("203.0.113.9")).unwrap();
        assert!(
            d.allowed() && d.safelisted(),
            "{name}: the safelist comes first"
        );
        // a key that is itself an address is matched without `ip`
        assert!(at(&app, "203.0.113.200", T0 + 1.0).blocked(), "{name}");
        assert!(
            !at(&app, "203.0.113.200", T0 + 61.0).blocked(),
            "{name}: lapsed"
        );
        let entries = Admin::new(there.clone()).entries(Some(T0 + 1.0)).unwrap();
        let shown: Vec<String> = entries
            .iter()
            .map(|e| format!("{}{}", e.field.code(), String::from_utf8_lossy(&e.target)))
            .collect();
        assert_eq!(shown, ["b203.0.113.0/24", "s203.0.113.9/32"], "{name}");
    }
}

#[test]
fn a_stored_override_is_obeyed_on_the_next_check_and_removing_it_restores_the_rules() {
    for (name, here, there) in pairs() {
        let app = limiter(&there, "2/minute");
        let admin = Admin::new(here);
        assert!(at(&app, "acme", T0).allowed());
        assert!(at(&app, "acme", T0 + 1.0).allowed());
        assert!(!at(&app, "acme", T0 + 2.0).allowed(), "{name}");
        admin
            .set_override(
                b"acme",
                Some(&RuleSet::parse("5/minute; 50/hour").unwrap()),
                "",
            )
            .unwrap();
        let d = at(&app, "acme", T0 + 3.0);
        assert!(
            d.allowed() && d.overridden,
            "{name}: the override admits more"
        );
        assert_eq!(d.rules.len(), 2);
        assert_eq!(
            (d.rules[0].limit, d.rules[0].remaining),
            (5, 2),
            "{name}: units kept"
        );
        admin.set_override(b"acme", None, "").unwrap();
        let d = at(&app, "acme", T0 + 4.0);
        assert!(!d.allowed() && !d.overridden, "{name}: back to 2/minute");
        assert_eq!(d.rules.len(), 1);
    }
}

#[test]
fn tiers_come_from_the_caller_or_from_the_store() {
    for (name, here, there) in pairs() {
        let tiers = vec![
            ("free".to_owned(), RuleSet::parse("1/minute").unwrap()),
            ("pro".to_owned(), RuleSet::parse("3/minute").unwrap()),
        ];
        let app = limiter(&there, "2/minute").with_tiers(tiers).unwrap();
        let free = |now| CheckOptions {
            now: Some(now),
            tier: Some("free"),
            ..CheckOptions::default()
        };
        let d = app.check_with(b"u", &free(T0)).unwrap();
        assert!(d.allowed() && d.tier.as_deref() == Some("free"), "{name}");
        assert!(
            !app.check_with(b"u", &free(T0 + 1.0)).unwrap().allowed(),
            "{name}"
        );
        Admin::new(here.clone())
            .set_tier(b"u", Some("pro"), "")
            .unwrap();
        let d = app.check_with(b"u", &free(T0 + 2.0)).unwrap();
        assert!(
            d.allowed() && d.tier.as_deref() == Some("pro"),
            "{name}: the stored tier wins"
        );
        assert_eq!(d.rules[0].limit, 3);
        let err = app
            .check_with(
                b"u",
                &CheckOptions {
                    tier: Some("gold"),
                    ..CheckOptions::default()
                },
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("'gold'") && err.contains("free, pro"), "{err}");
        let inspected = Admin::new(there.clone()).inspect(b"u", None).unwrap();
        assert_eq!(inspected.record.tier.as_deref(), Some("pro"), "{name}");
        Admin::new(here).set_tier(b"u", None, "").unwrap();
        assert!(
            !app.check_with(b"u", &free(T0 + 3.0)).unwrap().allowed(),
            "{name}"
        );
    }
}

#[test]
fn switches_turn_limiting_off_shadow_it_or_scale_it() {
    for (name, here, there) in pairs() {
        let app = limiter(&there, "2/minute");
        let admin = Admin::new(here);
        let wait = || std::thread::sleep(Duration::from_millis(150));
        admin.set_shadow(true, "").unwrap();
        wait();
        for i in 0..4 {
            let d = at(&app, "s", T0 + f64::from(i));
            assert!(d.allowed(), "{name}: shadow mode never denies");
            assert_eq!(
                d.shadowed(),
                i >= 2,
                "{name}: but reports what it would deny"
            );
        }
        assert_eq!(app.stats().denied, 2, "{name}: shadow denials are counted");
        admin.set_shadow(false, "").unwrap();
        admin.set_multiplier(2.0, "").unwrap();
        wait();
        let d = at(&app, "s", T0 + 5.0);
        assert!(
            d.allowed() && d.rules[0].limit == 4,
            "{name}: limits doubled"
        );
        assert!(admin.set_multiplier(0.0, "").is_err());
        admin.set_multiplier(1.0, "").unwrap();
        admin.set_enabled(false, "").unwrap();
        wait();
        for _ in 0..5 {
            assert!(at(&app, "s", T0 + 6.0).allowed(), "{name}: switched off");
        }
        admin.set_enabled(true, "").unwrap();
        wait();
        assert!(!at(&app, "s", T0 + 7.0).allowed(), "{name}: on again");
        assert_eq!(
            Admin::new(there).switches().unwrap(),
            ratekeeper_core::Switches::default()
        );
    }
}

#[test]
fn fail2ban_bans_after_maxretry_within_findtime_and_the_ban_lapses() {
    for (name, here, there) in pairs() {
        let app = limiter(&there, "100/minute");
        let rule = Fail2Ban::new("logins", 3, 60.0, 600.0).unwrap();
        let strikes = limiter(&here, "100/minute");
        // strikes spread wider than findtime never ban
        for i in 0..5 {
            let s = strikes
                .penalize(
                    Offender::Key(b"mallory"),
                    &rule,
                    Some(T0 + 61.0 * f64::from(i)),
                )
                .unwrap();
            assert!(!s.banned, "{name}");
        }
        let t = T0 + 1000.0;
        assert!(
            !strikes
                .penalize(Offender::Key(b"eve"), &rule, Some(t))
                .unwrap()
                .banned
        );
        assert!(
            !strikes
                .penalize(Offender::Key(b"eve"), &rule, Some(t + 1.0))
                .unwrap()
                .banned
        );
        let third = strikes
            .penalize(Offender::Key(b"eve"), &rule, Some(t + 2.0))
            .unwrap();
        assert!(third.banned && third.strikes == 3, "{name}");
        let d = at(&app, "eve", t + 3.0);
        assert!(
            d.blocked() && d.reason.as_deref() == Some("fail2ban logins"),
            "{name}"
        );
        assert!(
            at(&app, "eve", t + 603.0).allowed(),
            "{name}: the ban lapsed"
        );
        // the client address is banned as an address: any key checked from it is refused
        for i in 0..3 {
            strikes
                .penalize(
                    Offender::Address("198.51.100.4"),
                    &rule,
                    Some(t + f64::from(i)),
                )
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(150));
        let from = CheckOptions {
            now: Some(t + 4.0),
            ip: Some("198.51.100.4"),
            ..CheckOptions::default()
        };
        assert!(
            app.check_with(b"user:9", &from).unwrap().blocked(),
            "{name}"
        );
        let listed = Admin::new(here).entries(Some(t + 4.0)).unwrap();
        assert!(
            listed
                .iter()
                .any(|e| e.field == Field::Block && e.target == b"198.51.100.4/32"),
            "{name}: {listed:?}"
        );
        // a key that reads as a range or an address (text a client typed)
        // bans that exact key, never the addresses it names
        for key in ["0.0.0.0/0", "::/0", "203.0.113.50"] {
            for i in 0..3 {
                strikes
                    .penalize(Offender::Key(key.as_bytes()), &rule, Some(t + f64::from(i)))
                    .unwrap();
            }
            assert!(at(&app, key, t + 4.0).blocked(), "{name}: {key}");
        }
        std::thread::sleep(Duration::from_millis(150));
        let elsewhere = CheckOptions {
            now: Some(t + 4.0),
            ip: Some("203.0.113.50"),
            ..CheckOptions::default()
        };
        let d = app.check_with(b"user:10", &elsewhere).unwrap();
        assert!(!d.blocked(), "{name}: a typed key banned every client");
        assert!(strikes
            .penalize(Offender::Address("0.0.0.0/0"), &rule, Some(t))
            .unwrap_err()
            .to_string()
            .contains("invalid client address"));
    }
}

#[test]
fn scopes_keep_logs_apart_but_share_the_key_policies() {
    for (name, here, _) in pairs() {
        let api = limiter(&here, "1/minute").with_scope("api").unwrap();
        let web = limiter(&here, "1/minute").with_scope("web").unwrap();
        assert!(
            at(&api, "k", T0).allowed() && at(&web, "k", T0).allowed(),
            "{name}"
        );
        assert!(!at(&api, "k", T0 + 1.0).allowed(), "{name}");
        web.reset(b"k").unwrap();
        assert!(
            !at(&api, "k", T0 + 2.0).allowed(),
            "{name}: reset is per scope"
        );
        Admin::new(here.clone())
            .add(List::Block, b"k", None, "", Some(T0))
            .unwrap();
        assert!(
            at(&web, "k", T0 + 3.0).blocked() && at(&api, "k", T0 + 3.0).blocked(),
            "{name}"
        );
        assert!(limiter(&here, "1/s").with_scope("has space").is_err());
    }
}

/// Every store, with the Redis servers that have the module too (checks through it).
fn pairs_and_modules() -> Vec<Pair> {
    let mut out = pairs();
    for (name, var) in [
        ("redis-module", "RATEKEEPER_TEST_REDIS_MODULE"),
        ("cluster-module", "RATEKEEPER_TEST_CLUSTER_MODULE"),
    ] {
        if let Some(url) = common::configured(var) {
            out.push(pair(name, &url));
        }
    }
    out
}

/// A key banned by `penalize` in a login limiter (scope "login") is banned
/// for that scope only: a victim whose address or user key a client typed
/// into the login form is not banned elsewhere. An address ban (`ip=`)
/// holds everywhere. Admin lists the scope, inspects and unblocks by it.
#[test]
fn a_key_ban_holds_in_the_scope_that_earned_it() {
    for (name, here, there) in pairs_and_modules() {
        let login = limiter(&here, "100/minute").with_scope("login").unwrap();
        let api = limiter(&there, "100/minute").with_scope("api").unwrap();
        let plain = limiter(&there, "100/minute");
        let elsewhere_login = limiter(&there, "100/minute").with_scope("login").unwrap();
        let rule = Fail2Ban::new("typed", 2, 60.0, 600.0).unwrap();
        let typed = Offender::Key(b"user:42");
        assert!(!login.penalize(typed, &rule, Some(T0)).unwrap().banned);
        assert!(
            login.penalize(typed, &rule, Some(T0)).unwrap().banned,
            "{name}"
        );
        let d = at(&elsewhere_login, "user:42", T0 + 1.0);
        assert!(d.blocked(), "{name}: banned in the scope, in every process");
        assert_eq!(d.reason.as_deref(), Some("fail2ban typed"), "{name}");
        assert!(
            at(&api, "user:42", T0 + 1.0).allowed(),
            "{name}: not banned in another scope"
        );
        assert!(
            at(&plain, "user:42", T0 + 1.0).allowed(),
            "{name}: not banned for a limiter with no scope"
        );
        // the key's own safelist entry wins over a ban earned in a scope
        let admin = Admin::new(there.clone());
        admin
            .add(List::Safe, b"user:42", Some(60.0), "", Some(T0))
            .unwrap();
        assert!(
            at(&elsewhere_login, "user:42", T0 + 2.0).safelisted(),
            "{name}"
        );
        admin.remove(List::Safe, b"user:42").unwrap();
        // listed with its scope, inspected and removed by it
        let entries = admin.entries(Some(T0 + 2.0)).unwrap();
        let banned: Vec<_> = entries
            .iter()
            .filter(|e| e.target == b"user:42")
            .map(|e| (e.field, e.scope.as_str()))
            .collect();
        assert_eq!(banned, [(Field::Block, "login")], "{name}");
        let seen = admin
            .inspect_in(b"user:42", "login", Some(T0 + 2.0))
            .unwrap();
        assert!(
            seen.record.block.is_none() && seen.scope_block.is_some(),
            "{name}"
        );
        let key = ratekeeper_core::TargetOptions {
            key: true,
            force: false,
            tag: false,
        };
        assert!(
            !admin
                .remove_with(List::Block, b"user:42", key, "api", "")
                .unwrap(),
            "{name}: not banned in api"
        );
        assert!(admin
            .remove_with(List::Block, b"user:42", key, "login", "")
            .unwrap());
        assert!(
            at(&elsewhere_login, "user:42", T0 + 3.0).allowed(),
            "{name}: unblocked"
        );
        assert!(admin.entries(Some(T0 + 3.0)).unwrap().is_empty(), "{name}");
        // an operator can ban a key in one scope; not an address or a safelist entry
        admin
            .add_with(
                List::Block,
                b"user:7",
                key,
                "api",
                Some(60.0),
                "abuse",
                Some(T0),
            )
            .unwrap();
        assert!(at(&api, "user:7", T0 + 4.0).blocked(), "{name}");
        assert!(at(&plain, "user:7", T0 + 4.0).allowed(), "{name}");
        let address = ratekeeper_core::TargetOptions::default();
        for (list, target) in [
            (List::Block, &b"203.0.113.9"[..]),
            (List::Safe, &b"user:7"[..]),
        ] {
            let e = admin
                .add_with(list, target, address, "api", None, "", Some(T0))
                .unwrap_err();
            assert!(e.to_string().contains("a scope ('api') holds only"), "{e}");
        }
        // an address ban earned in a scope holds everywhere
        let ip = Offender::Address("198.51.100.4");
        login.penalize(ip, &rule, Some(T0)).unwrap();
        assert!(login.penalize(ip, &rule, Some(T0)).unwrap().banned);
        std::thread::sleep(Duration::from_millis(150));
        let opts = CheckOptions {
            now: Some(T0 + 5.0),
            ip: Some("198.51.100.4"),
            ..CheckOptions::default()
        };
        assert!(
            plain.check_with(b"anyone", &opts).unwrap().blocked(),
            "{name}"
        );
    }
}

#[test]
fn bad_admin_input_is_a_configuration_error() {
    let admin = Admin::new(common::memory());
    for (ttl, reason, word) in [
        (Some(0.0), "", "ttl"),
        (Some(f64::NAN), "", "ttl"),
        (None, &"x".repeat(600)[..], "reason"),
    ] {
        let e = admin
            .add(List::Block, b"k", ttl, reason, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(word), "{e}");
    }
    assert!(admin.add(List::Block, b"", None, "", None).is_err());
    assert!(admin
        .add(List::Block, b"10.0.0.0/99", None, "", None)
        .is_err());
    assert!(admin.set_tier(b"k", Some("no spaces"), "").is_err());
}

/// The awaited policy calls (a strike and its ban, an operator's change, a
/// listing, an inspection, the screen's first read) do on every store what
/// the blocking ones do, and on Redis they await it: on a runtime of ONE
/// thread, a ticker keeps ticking while each call waits on a frozen Redis,
/// and each call ends within the store's timeout (a strike by `on_error`,
/// an operator's change with the storage error).
#[cfg(feature = "async")]
#[test]
fn awaited_policy_calls_match_the_blocking_ones_and_never_block_the_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ban = Fail2Ban::new("logins", 2, 60.0, 600.0).unwrap();
    for (name, store, _) in pairs() {
        let limiter = Limiter::with_store(
            RuleSet::parse("5/minute").unwrap(),
            store.clone(),
            OnError::Allow,
        )
        .with_scope("awaited")
        .unwrap();
        let admin = Admin::new(store.clone());
        runtime.block_on(async {
            let ip = "198.51.100.7";
            let strikes = [
                limiter
                    .penalize_async(Offender::Address(ip), &ban, None)
                    .await,
                limiter
                    .penalize_async(Offender::Address(ip), &ban, None)
                    .await,
            ];
            let banned: Vec<bool> = strikes.iter().map(|s| s.as_ref().unwrap().banned).collect();
            assert_eq!(banned, [false, true], "{name}");
            let screened = limiter.screen_async(ip).await.expect("the ban is screened");
            assert!(!screened.allowed(), "{name}");
            let entries = admin.entries_async(None).await.unwrap();
            assert!(
                entries
                    .iter()
                    .any(|e| e.network && e.target == b"198.51.100.7/32"),
                "{name}: {entries:?}"
            );
            admin
                .add_with_async(
                    List::Block,
                    b"user:9",
                    Default::default(),
                    "",
                    Some(60.0),
                    "abuse",
                    None,
                )
                .await
                .unwrap();
            let seen = admin.inspect_in_async(b"user:9", "", None).await.unwrap();
            assert_eq!(seen.record.block.unwrap().reason, "abuse", "{name}");
            // the blocking side sees what the awaited one wrote, and the other way round
            assert!(
                admin
                    .inspect(b"user:9", None)
                    .unwrap()
                    .record
                    .block
                    .is_some(),
                "{name}"
            );
            let removed = admin
                .remove_with_async(List::Block, b"user:9", Default::default(), "", "")
                .await
                .unwrap();
            assert!(removed, "{name}");
            assert!(
                admin
                    .inspect(b"user:9", None)
                    .unwrap()
                    .record
                    .block
                    .is_none(),
                "{name}"
            );
            assert!(admin.remove(List::Block, ip.as_bytes()).unwrap(), "{name}");
        });
    }

    let redis = common::OwnRedis::start(&[]);
    let timeout = Duration::from_millis(300);
    let options = StoreOptions {
        prefix: common::unique_prefix(),
        timeout,
        connect_timeout: timeout,
        ..StoreOptions::default()
    };
    let store = store::open(&redis.url(), &options).unwrap();
    let limiter = Limiter::with_store(
        RuleSet::parse("5/minute").unwrap(),
        store.clone(),
        OnError::Allow,
    );
    let admin = Admin::new(store);
    runtime.block_on(async {
        // connected, and the module probed, before the freeze
        admin.entries_async(None).await.unwrap();
        limiter
            .penalize_async(Offender::Key(b"warm"), &ban, None)
            .await
            .unwrap();
    });
    redis.freeze();
    /// Ticks of a ticker task beside `call` until it ends, and its answer.
    async fn ticks_beside<T>(call: impl std::future::Future<Output = T>) -> (u32, T) {
        use std::sync::atomic::{AtomicU32, Ordering};
        let ticks = Arc::new(AtomicU32::new(0));
        let ticker = tokio::spawn({
            let ticks = ticks.clone();
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    ticks.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let answer = call.await;
        ticker.abort();
        (ticks.load(Ordering::Relaxed), answer)
    }
    runtime.block_on(async {
        let start = std::time::Instant::now();
        let (ticks, strike) =
            ticks_beside(limiter.penalize_async(Offender::Key(b"k"), &ban, None)).await;
        assert!(ticks > 0, "the strike blocked the runtime's one thread");
        assert_eq!(
            strike.unwrap().strikes,
            0,
            "on_error allow: no strike counted"
        );
        let (ticks, added) = ticks_beside(admin.add_with_async(
            List::Block,
            b"user:1",
            Default::default(),
            "",
            None,
            "abuse",
            None,
        ))
        .await;
        assert!(
            ticks > 0,
            "the operator's change blocked the runtime's one thread"
        );
        let message = added.unwrap_err().to_string();
        assert!(message.contains("timed out"), "{message}");
        let (ticks, entries) = ticks_beside(admin.entries_async(None)).await;
        assert!(
            ticks > 0 && entries.is_err(),
            "the listing blocked the runtime's thread"
        );
        // three calls, each within one timeout (and slack for this machine)
        assert!(start.elapsed() < 3 * (timeout + Duration::from_millis(700)));
    });
    redis.thaw();
}

#[test]
fn every_change_an_operator_makes_is_in_the_audit_trail_with_who_and_why() {
    for (name, here, elsewhere) in pairs() {
        let admin = Admin::new(here.clone()).with_actor("alice");
        admin
            .add(
                List::Block,
                b"203.0.113.7",
                Some(3600.0),
                "scraper",
                Some(T0),
            )
            .unwrap();
        admin
            .set_tier(b"user:7", Some("pro"), "paid on the 3rd")
            .unwrap();
        admin
            .set_override(b"user:7", Some(&RuleSet::parse("5/minute").unwrap()), "")
            .unwrap();
        // another process, another operator, hostile text
        let bob = Admin::new(elsewhere.clone()).with_actor("bob\r\n<b>");
        let key = TargetOptions {
            key: true,
            force: false,
            tag: false,
        };
        bob.remove_with(
            List::Block,
            b"203.0.113.7",
            TargetOptions::default(),
            "",
            "false alarm",
        )
        .unwrap();
        bob.remove_with(List::Safe, b"\xff<script>", key, "", "")
            .unwrap();
        bob.set_switches(Some(true), Some(false), Some(2.0), "load test")
            .unwrap();
        let history = admin.history(10).unwrap();
        let seen: Vec<(&str, &str, &str, &str, &str)> = history
            .iter()
            .map(|c| {
                (
                    c.actor.as_str(),
                    c.action.as_str(),
                    c.target.as_str(),
                    c.detail.as_str(),
                    c.reason.as_str(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (
                    "bob\r\n<b>",
                    "switches",
                    "",
                    "multiplier=2 enabled=1 shadow=0",
                    "load test"
                ),
                (
                    "bob\r\n<b>",
                    "unsafelist",
                    "\u{fffd}<script>",
                    "was not listed",
                    ""
                ),
                (
                    "bob\r\n<b>",
                    "unblock",
                    "203.0.113.7/32",
                    "lifted",
                    "false alarm"
                ),
                ("alice", "override", "user:7", "5/1m", ""),
                ("alice", "tier", "user:7", "pro", "paid on the 3rd"),
                ("alice", "block", "203.0.113.7/32", "for 1h", "scraper"),
            ],
            "{name}"
        );
        assert_eq!(
            history[5].at_ms,
            (T0 * 1000.0) as u64,
            "{name}: at the time given"
        );
        assert!(history[0].at_ms >= history[1].at_ms, "{name}: newest first");
        assert_eq!(admin.history(2).unwrap().len(), 2, "{name}");
        assert!(admin.history(0).is_err(), "{name}");
        assert!(
            admin.history(ratekeeper_core::audit::KEEP + 1).is_err(),
            "{name}"
        );
        // bounded: the oldest go
        for i in 0..ratekeeper_core::audit::KEEP + 5 {
            admin
                .set_tier(format!("k{i}").as_bytes(), None, "")
                .unwrap();
        }
        let all = admin.history(ratekeeper_core::audit::KEEP).unwrap();
        assert_eq!(all.len(), ratekeeper_core::audit::KEEP, "{name}");
        assert!(
            all.iter().all(|c| c.action == "tier"),
            "{name}: the first six are gone"
        );
    }
}

#[test]
fn the_record_of_denials_shows_who_is_limited_and_the_network_they_share() {
    for (name, here, elsewhere) in pairs() {
        let limiter = limiter(&here, "2/minute")
            .with_scope("api")
            .unwrap()
            .with_denial_cache(Duration::from_secs(1));
        // a scraper rotating addresses in one /24, and one noisy key
        for i in 0..6 {
            let ip = format!("198.51.100.{}", 10 + i % 3);
            for _ in 0..4 {
                let options = CheckOptions {
                    ip: Some(&ip),
                    ..CheckOptions::default()
                };
                limiter
                    .check_with(format!("user:{i}").as_bytes(), &options)
                    .unwrap();
            }
        }
        for _ in 0..5 {
            limiter.check(b"token:abc", 1, None).unwrap();
        }
        // admitted checks are not in it
        limiter.check(b"user:quiet", 1, None).unwrap();
        let admin = Admin::new(elsewhere.clone());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let top = loop {
            let top = admin.top_denied(300).unwrap();
            // (a reader may have written part of them: wait for all 15)
            let counted: u64 = top.per_minute.iter().map(|m| m.1).sum();
            if counted == 15 || std::time::Instant::now() > deadline {
                break top;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let keys: Vec<(&str, &str, u64)> = top
            .keys
            .iter()
            .map(|d| (d.scope.as_str(), d.target.as_str(), d.count))
            .collect();
        assert_eq!(keys[0], ("api", "token:abc", 3), "{name}: {keys:?}");
        assert_eq!(
            keys.len(),
            7,
            "{name}: six users and the token, not user:quiet"
        );
        assert!(keys[1..].iter().all(|k| k.2 == 2), "{name}: {keys:?}");
        assert_eq!(
            top.networks
                .iter()
                .map(|d| (d.scope.as_str(), d.target.as_str(), d.count))
                .collect::<Vec<_>>(),
            vec![("api", "198.51.100.0/24", 12)],
            "{name}"
        );
        assert_eq!(top.addresses.len(), 3, "{name}");
        assert_eq!(top.addresses.iter().map(|d| d.count).sum::<u64>(), 12);
        assert!(
            (5..=6).contains(&top.per_minute.len()),
            "{name}: 300 s over 5 or 6 minutes"
        );
        assert_eq!(
            top.per_minute.iter().map(|m| m.1).sum::<u64>(),
            15,
            "{name}"
        );
        assert!(admin.top_denied(0).is_err() && admin.top_denied(3601).is_err());
    }
}

#[test]
fn an_operator_sees_what_a_key_used_whatever_its_listings() {
    for (name, here, elsewhere) in pairs() {
        let rules = RuleSet::parse("5/minute; 50/hour").unwrap();
        let limiter = limiter(&here, "5/minute; 50/hour")
            .with_scope("api")
            .unwrap();
        for _ in 0..3 {
            limiter.check(b"user:8", 1, None).unwrap();
        }
        let admin = Admin::new(elsewhere.clone());
        admin
            .add_with(
                List::Block,
                b"user:8",
                TargetOptions {
                    key: true,
                    force: false,
                    tag: false,
                },
                "api",
                None,
                "",
                None,
            )
            .unwrap();
        assert!(
            limiter.peek(b"user:8", 1, None).unwrap().blocked(),
            "{name}"
        );
        let usage = admin.usage(b"user:8", "api", &rules).unwrap();
        let used: Vec<u64> = usage.rules.iter().map(|r| r.used()).collect();
        assert_eq!(used, vec![3, 3], "{name}");
        assert_eq!(
            admin.usage(b"user:8", "", &rules).unwrap().rules[0].used(),
            0,
            "{name}: another scope"
        );
        assert!(
            admin.usage(b"", "api", &rules).is_err() && admin.usage(b"k", "a b", &rules).is_err()
        );
    }
}
