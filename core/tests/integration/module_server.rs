//! The Redis module as a server runs it: hostile arguments, a replica, an
//! AOF rewrite and restart, a restart without the module, a replica and an
//! AOF that start receiving writes after the module stopped building its
//! replication for nobody, and the option
//! `redis_module` (auto, off, require) with what `store_stats` says.
//!
//! The module's file is `RATEKEEPER_MODULE` (scripts/test builds it).

use crate::common;

use common::OwnRedis;
use ratekeeper_core::{Limiter, ModuleUse, OnError, RuleSet, Store};
use redis::Value;
use std::sync::Arc;
use std::time::Duration;

fn module_file() -> Option<String> {
    common::configured("RATEKEEPER_MODULE")
}

fn connect(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

fn limiter(store: Arc<dyn Store>) -> Limiter {
    Limiter::with_store(
        RuleSet::parse("10/minute; 1000/day").unwrap(),
        store,
        OnError::Raise,
    )
}

/// A limiter of two meters, requests and tokens, on `store`.
fn meters(store: Arc<dyn Store>) -> Limiter {
    Limiter::with_store(RuleSet::parse("1/s").unwrap(), store, OnError::Raise)
        .with_meters(vec![
            ("requests".into(), RuleSet::parse("10/minute").unwrap()),
            ("tokens".into(), RuleSet::parse("100/minute").unwrap()),
        ])
        .unwrap()
}

/// How many of `n` checks of one request and `tokens` tokens `limiter` admits.
fn metered_admit(limiter: &Limiter, key: &[u8], tokens: i128, n: usize) -> usize {
    let costs = limiter
        .meter_costs(&[("requests".into(), 1), ("tokens".into(), tokens)])
        .unwrap();
    let options = ratekeeper_core::CheckOptions {
        meter_costs: Some(&costs),
        ..ratekeeper_core::CheckOptions::default()
    };
    (0..n)
        .filter(|_| limiter.check_with(key, &options).unwrap().allowed())
        .count()
}

/// A limiter of "2 concurrent; 10/minute" on `store`.
fn in_flight(store: Arc<dyn Store>) -> Limiter {
    Limiter::with_store(
        RuleSet::parse("2 concurrent; 10/minute").unwrap(),
        store,
        OnError::Raise,
    )
}

/// A hold of `key` by `limiter`.
fn hold(limiter: &Limiter, key: &[u8]) -> ratekeeper_core::Hold {
    let options = ratekeeper_core::CheckOptions::default();
    limiter.hold(key, &options, None).unwrap()
}

/// A lease key's members, each with its score.
type Members = Vec<(Vec<u8>, String)>;

/// The leases a server holds: each lease key's members and scores.
fn leases(con: &mut redis::Connection) -> Vec<(Vec<u8>, Members)> {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*:f").query(con).unwrap();
    let mut out: Vec<_> = keys
        .into_iter()
        .map(|k| {
            let members: Members = redis::cmd("ZRANGE")
                .arg(&k)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(con)
                .unwrap();
            (k, members)
        })
        .collect();
    out.sort();
    out
}

/// The logs (and their records) a store's prefix holds: key -> bytes.
fn logs(con: &mut redis::Connection) -> Vec<(Vec<u8>, Vec<u8>)> {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*:l").query(con).unwrap();
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = keys
        .into_iter()
        .map(|k| {
            let v: Vec<u8> = redis::cmd("GET").arg(&k).query(con).unwrap();
            (k, v)
        })
        .collect();
    out.sort();
    out
}

/// Lets the store notice a restarted Redis: its pooled connections were
/// reset, and the first call on one fails (as any client's would).
fn reconnected(store: &Arc<dyn Store>) {
    for _ in 0..5 {
        if store.clock_ms().is_ok() {
            return;
        }
    }
    panic!("the store did not reconnect");
}

#[test]
fn hostile_arguments_get_error_replies_and_redis_stays_up() {
    let Some(url) = common::configured("RATEKEEPER_TEST_REDIS_MODULE") else {
        return;
    };
    let mut con = connect(&url);
    let tag = common::unique_prefix();
    let (hash, list, text) = (
        format!("{tag}:h"),
        format!("{tag}:list"),
        format!("{tag}:s"),
    );
    let _: () = redis::cmd("HSET")
        .arg(&hash)
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(&list)
        .arg("x")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(&text)
        .arg("plain")
        .query(&mut con)
        .unwrap();
    let w = vec![0u8, 0, 0, 3, 232];
    let good = |log: &str| -> Vec<Vec<u8>> {
        vec![
            b"1".to_vec(),
            log.as_bytes().to_vec(),
            b"c".to_vec(),
            b"1".to_vec(),
            b"1000".to_vec(),
            b"1".to_vec(),
            w.clone(),
            b"5".to_vec(),
            b"1000".to_vec(),
        ]
    };
    // the same check packed (as clients send it), with the limit given
    let packed = |limit: u32| -> Vec<u8> {
        let mut p = ratekeeper_core::engine::packed::pack_check(
            true,
            false,
            1,
            Some(1000),
            &ratekeeper_core::engine::Rules::new(&[(5, 1000)]),
            std::iter::empty(),
        );
        let end = p.len();
        p[end - 4..].copy_from_slice(&limit.to_be_bytes());
        p
    };
    let fixed: Vec<(&str, Vec<Vec<u8>>, &str)> = vec![
        ("RATEKEEPER.CHECK", vec![], "wrong number of arguments"),
        (
            "RATEKEEPER.CHECK",
            vec![b"0".to_vec(), b"k".to_vec()],
            "numkeys",
        ),
        (
            "RATEKEEPER.CHECK",
            vec![b"3".to_vec(), b"k".to_vec()],
            "numkeys",
        ),
        (
            "RATEKEEPER.CHECK",
            vec![b"2".to_vec(), b"k".to_vec()],
            "wrong number of arguments",
        ),
        (
            "RATEKEEPER.CHECK",
            vec![b"1".to_vec(), b"k".to_vec(), b"c".to_vec()],
            "wrong number of arguments",
        ),
        (
            "RATEKEEPER.CHECK",
            {
                let mut a = good(&format!("{tag}:l"));
                a[3] = b"99999999999999999999999".to_vec();
                a
            },
            "the cost",
        ),
        (
            "RATEKEEPER.CHECK",
            {
                let mut a = good(&format!("{tag}:l"));
                a[3] = b"-4".to_vec();
                a
            },
            "the cost",
        ),
        (
            "RATEKEEPER.CHECK",
            {
                let mut a = good(&format!("{tag}:l"));
                a[5] = b"200".to_vec();
                a
            },
            "200 rules need",
        ),
        (
            "RATEKEEPER.CHECK",
            {
                let mut a = good(&format!("{tag}:l"));
                a[7] = vec![0xff, 0xfe, 0];
                a
            },
            "a limit",
        ),
        (
            "RATEKEEPER.CHECK",
            {
                // a limit of 2^40: refused (a log's totals are kept modulo 2^40)
                let mut a = good(&format!("{tag}:huge"));
                a[7] = b"1099511627776".to_vec();
                a
            },
            "a limit must be from 1 to 1099511627775",
        ),
        (
            "RATEKEEPER.CHECK",
            vec![b"1".to_vec(), b"k".to_vec(), vec![9, 1]],
            "the packed check's format is 9",
        ),
        (
            "RATEKEEPER.CHECK",
            vec![b"1".to_vec(), b"k".to_vec(), packed(5)[..21].to_vec()],
            "the packed check ends before the windows",
        ),
        (
            "RATEKEEPER.CHECK",
            vec![b"1".to_vec(), b"k".to_vec(), packed(0)],
            "the rules: a limit must be from 1",
        ),
        ("RATEKEEPER.CHECK", good(&hash), "WRONGTYPE"),
        ("RATEKEEPER.CHECK", good(&list), "WRONGTYPE"),
        (
            "RATEKEEPER.CHECK",
            {
                let mut a = good(&format!("{tag}:l2"));
                a[0] = b"2".to_vec();
                a.insert(2, text.clone().into_bytes());
                a
            },
            "WRONGTYPE",
        ),
        ("RATEKEEPER.POLICY", vec![], "wrong number of arguments"),
        (
            "RATEKEEPER.POLICY",
            vec![b"1".to_vec(), b"k".to_vec(), b"explode".to_vec()],
            "unknown record op",
        ),
        (
            "RATEKEEPER.POLICY",
            vec![
                b"1".to_vec(),
                text.clone().into_bytes(),
                b"set".to_vec(),
                b"5".to_vec(),
                b"t".to_vec(),
                b"x".to_vec(),
            ],
            "WRONGTYPE",
        ),
        (
            "RATEKEEPER.POLICY",
            vec![
                b"1".to_vec(),
                hash.clone().into_bytes(),
                b"strike".to_vec(),
                b"".to_vec(),
                b"3".to_vec(),
                b"1000".to_vec(),
            ],
            "WRONGTYPE",
        ),
        (
            "RATEKEEPER.POLICY",
            vec![
                b"1".to_vec(),
                b"k".to_vec(),
                b"strike".to_vec(),
                b"".to_vec(),
                b"0".to_vec(),
                b"1000".to_vec(),
            ],
            "maxretry",
        ),
    ];
    for (name, args, want) in &fixed {
        let err = redis::cmd(name)
            .arg(args)
            .query::<Value>(&mut con)
            .expect_err(&format!("{name} {args:?} was accepted"));
        assert!(err.to_string().contains(want), "{name} {args:?}: {err}");
    }
    // the text key is a plain string: read as a foreign log, rebuilt (as the script does)
    let rebuilt: Value = redis::cmd("RATEKEEPER.CHECK")
        .arg(good(&text))
        .query(&mut con)
        .unwrap();
    assert!(matches!(rebuilt, Value::Array(_)));

    // random arguments, many times: every answer is an error or a reply
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let pieces: Vec<Vec<u8>> = vec![
        b"c".to_vec(),
        b"p".to_vec(),
        b"1".to_vec(),
        b"2".to_vec(),
        b"0".to_vec(),
        b"-1".to_vec(),
        b"".to_vec(),
        b"18446744073709551616".to_vec(),
        b"10000000".to_vec(),
        b"10000001".to_vec(),
        b"1099511627775".to_vec(),
        b"31622400001".to_vec(),
        w.clone(),
        b"set".to_vec(),
        b"strike".to_vec(),
        b"h".to_vec(),
        b"q".to_vec(),
        b"r".to_vec(),
        b"e".to_vec(),
        b"l".to_vec(),
        b"60000".to_vec(),
        b"1000".to_vec(),
        vec![0xff; 7],
        hash.clone().into_bytes(),
        format!("{tag}:fuzz").into_bytes(),
    ];
    let (mut errors, mut replies) = (0, 0);
    for _ in 0..3000 {
        let name = match next() % 5 {
            0 => "RATEKEEPER.CHECK",
            1 => "RATEKEEPER.POLICY",
            2 => "RATEKEEPER.HOLD",
            3 => "RATEKEEPER.LEASES",
            _ => "RATEKEEPER.METERS",
        };
        let count = next() % 14;
        let mut args: Vec<Vec<u8>> = Vec::new();
        if next() % 3 > 0 {
            args.push(b"1".to_vec());
            args.push(format!("{tag}:fuzz{}", next() % 4).into_bytes());
        }
        for _ in 0..count {
            let piece = match next() % 4 {
                0 => (0..next() % 12).map(|_| next() as u8).collect(),
                _ => pieces[(next() % pieces.len() as u64) as usize].clone(),
            };
            args.push(piece);
        }
        match redis::cmd(name).arg(&args).query::<Value>(&mut con) {
            Ok(_) => replies += 1,
            Err(e) if e.to_string().contains("internal error") => {
                panic!("{name} {args:?} panicked in the module: {e}")
            }
            Err(e)
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
                    || e.to_string().contains("WRONGTYPE")
                    || e.to_string().contains("CROSSSLOT") =>
            {
                errors += 1
            }
            Err(e) => panic!("{name} {args:?}: {e}"),
        }
    }
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    assert!(errors > 2000, "{errors} errors, {replies} replies");
    eprintln!("fuzzed: {errors} error replies, {replies} replies; Redis answers PING");
}

#[test]
fn the_module_declares_its_keys() {
    let Some(url) = common::configured("RATEKEEPER_TEST_REDIS_MODULE") else {
        return;
    };
    let mut con = connect(&url);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RATEKEEPER.CHECK")
        .arg(2)
        .arg("rk:{u}:l")
        .arg("rk:{u}:r")
        .arg("c")
        .arg(1)
        .arg("")
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, ["rk:{u}:l", "rk:{u}:r"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RATEKEEPER.POLICY")
        .arg(1)
        .arg("rk:{u}:r")
        .arg("set")
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, ["rk:{u}:r"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RATEKEEPER.METERS")
        .arg(2)
        .arg("rk:{u}:@requests:l")
        .arg("rk:{u}:@tokens:l")
        .arg("packed")
        .arg("packed")
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, ["rk:{u}:@requests:l", "rk:{u}:@tokens:l"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RATEKEEPER.HOLD")
        .arg(3)
        .arg("rk:{u}:f")
        .arg("rk:{u}:l")
        .arg("rk:{u}:r")
        .arg(&["h", "2", "60000", "id", "", "packed"][..])
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, ["rk:{u}:f", "rk:{u}:l", "rk:{u}:r"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RATEKEEPER.LEASES")
        .arg(1)
        .arg("rk:{u}:f")
        .arg(&["l", "", "0", ""][..])
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, ["rk:{u}:f"]);
    // the lease commands' bad arguments are named, never a crash
    for (name, args, want) in [
        ("RATEKEEPER.HOLD", vec!["5"], "numkeys"),
        (
            "RATEKEEPER.HOLD",
            vec!["1", "rk:{u}:f", "h"],
            "wrong number of arguments",
        ),
        (
            "RATEKEEPER.HOLD",
            vec!["1", "rk:{u}:f", "x", "2", "1000", "id", ""],
            "give h (hold) or q",
        ),
        (
            "RATEKEEPER.HOLD",
            vec!["1", "rk:{u}:f", "h", "0", "1000", "id", ""],
            "in-flight limit",
        ),
        (
            "RATEKEEPER.HOLD",
            vec!["1", "rk:{u}:f", "h", "2", "86400001", "id", ""],
            "lease time",
        ),
        (
            "RATEKEEPER.HOLD",
            vec!["1", "rk:{u}:f", "h", "2", "1000", "", ""],
            "lease id",
        ),
        (
            "RATEKEEPER.HOLD",
            vec!["2", "rk:{u}:f", "rk:{u}:l", "h", "2", "1000", "id", ""],
            "wrong number of arguments",
        ),
        (
            "RATEKEEPER.LEASES",
            vec!["1", "rk:{u}:f", "x", "id", "0", ""],
            "give r (release)",
        ),
        (
            "RATEKEEPER.LEASES",
            vec!["1", "rk:{u}:f", "e", "id", "0", ""],
            "lease time",
        ),
        (
            "RATEKEEPER.LEASES",
            vec!["1", "rk:{u}:f", "r"],
            "wrong number of arguments",
        ),
    ] {
        let err = redis::cmd(name)
            .arg(&args)
            .query::<Value>(&mut con)
            .expect_err(&format!("{name} {args:?} was accepted"));
        assert!(err.to_string().contains(want), "{name} {args:?}: {err}");
    }
    // the meters command's bad arguments are named, never a crash
    for (args, want) in [
        (vec!["0"], "numkeys"),
        (vec!["1", "rk:{u}:@a:l"], "wrong number of arguments"),
        (
            vec!["2", "rk:{u}:@a:l", "rk:{u}:@b:l", "x"],
            "wrong number of arguments",
        ),
        (vec!["1", "rk:{u}:@a:l", "\x07junk"], "packed"),
    ] {
        let err = redis::cmd("RATEKEEPER.METERS")
            .arg(&args)
            .query::<Value>(&mut con)
            .expect_err(&format!("{args:?} was accepted"));
        assert!(err.to_string().contains(want), "{args:?}: {err}");
    }
}

#[test]
fn auto_uses_the_module_where_loaded_and_the_script_elsewhere() {
    let Some(with_module) = common::configured("RATEKEEPER_TEST_REDIS_MODULE") else {
        return;
    };
    let cases = [
        (with_module.clone(), ModuleUse::Auto, "module"),
        (with_module.clone(), ModuleUse::Off, "script"),
        (with_module, ModuleUse::Require, "module"),
        (common::redis_url(), ModuleUse::Auto, "script"),
    ];
    for (url, module, path) in cases {
        let store = common::open_with(&url, module);
        let limiter = limiter(store.clone());
        let admitted = (0..12)
            .filter(|_| limiter.check(b"user", 1, None).unwrap().allowed())
            .count();
        assert_eq!(admitted, 10, "{url} {module:?}");
        let stats = store.stats();
        assert_eq!(stats.path, path, "{url} {module:?}: {stats:?}");
        let (went, other) = match path {
            "module" => (stats.module_calls, stats.script_calls),
            _ => (stats.script_calls, stats.module_calls),
        };
        // the 12th is answered by the denial cache
        assert!(went >= 11 && other == 0, "{url} {module:?}: {stats:?}");
    }
    // require, on a Redis without the module: a clear error, every time
    let store = common::open_with(&common::redis_url(), ModuleUse::Require);
    for _ in 0..2 {
        let e = limiter(store.clone())
            .check(b"user", 1, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no ratekeeper module loaded"), "{e}");
        assert!(e.contains("--loadmodule"), "{e}");
    }
}

#[test]
fn a_replica_and_an_aof_hold_the_same_logs_and_a_server_without_the_module_goes_on() {
    let Some(module) = module_file() else { return };
    let load = ["--loadmodule", module.as_str()];
    let mut master = OwnRedis::start(&[&load[..], &["--appendonly", "yes"]].concat());
    let (_replica, mut rcon) = synced_replica(&master, || {});
    let mut mcon = connect(&master.url());

    let store = common::open_with(&master.url(), ModuleUse::Auto);
    let limiter = limiter(store.clone());
    for i in 0..40 {
        admit(&limiter, format!("user-{i}").as_bytes(), 3);
    }
    assert_eq!(admit(&limiter, b"busy", 6), 6);
    // a rule change rewrites a log whole (SET ... PXAT)
    let wider = Limiter::with_store(
        RuleSet::parse("20/minute").unwrap(),
        store.clone(),
        OnError::Raise,
    );
    assert_eq!(admit(&wider, b"wide", 25), 20);
    // a key's meters in one call (RATEKEEPER.METERS): each log written, or none
    let metered = meters(store.clone());
    assert_eq!(
        metered_admit(&metered, b"llm", 30, 4),
        3,
        "tokens: 100/minute"
    );
    // holds (RATEKEEPER.HOLD) and a release (RATEKEEPER.LEASES): the rates'
    // log and the leases' sorted set
    let held = in_flight(store.clone());
    let holds: Vec<_> = (0..3).map(|_| hold(&held, b"export")).collect();
    assert_eq!(holds.iter().filter(|h| h.lease.is_some()).count(), 2);
    assert!(held.release(holds[0].lease.as_ref().unwrap()).unwrap());
    assert_eq!(store.stats().path, "module");
    assert_eq!(store.stats().script_calls, 0);

    assert!(
        acknowledged(&mut mcon, 10_000),
        "the replica did not acknowledge the writes"
    );
    assert_eq!(
        leases(&mut rcon),
        leases(&mut mcon),
        "the replica's leases differ"
    );
    assert_eq!(leases(&mut mcon).len(), 1);
    let on_master = logs(&mut mcon);
    assert_eq!(on_master.len(), 45, "44 logs and the holds' one");
    let on_replica = logs(&mut rcon);
    let differ: Vec<String> = on_master
        .iter()
        .zip(&on_replica)
        .filter(|(m, r)| m != r)
        .map(|(m, r)| format!("{}: {:?} / {:?}", String::from_utf8_lossy(&m.0), m.1, r.1))
        .collect();
    assert!(
        on_replica.len() == on_master.len() && differ.is_empty(),
        "the replica's logs differ ({} on the replica): {differ:?}",
        on_replica.len()
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&on_master[0].0)
        .query(&mut rcon)
        .unwrap();
    assert!(ttl > 0, "the replica's log has no TTL ({ttl})");

    // an AOF rewrite, more checks, then a restart: the same logs
    let _: Value = redis::cmd("BGREWRITEAOF").query(&mut mcon).unwrap();
    let done = ["aof_rewrite_in_progress:0", "aof_rewrite_scheduled:0"];
    common::info_holds(&mut mcon, "persistence", &done, 100);
    assert_eq!(admit(&limiter, b"busy", 2), 2);
    let before = logs(&mut mcon);
    master.stop();
    master.restart();
    let mut mcon = connect(&master.url());
    assert_eq!(
        logs(&mut mcon),
        before,
        "the logs differ after the AOF is loaded"
    );
    reconnected(&store);

    // and without the module: the AOF still loads, checks go on through the
    // script with no error, exactly
    master.stop();
    master.set_args(&["--appendonly", "yes"]);
    master.restart();
    let mut mcon = connect(&master.url());
    assert_eq!(
        logs(&mut mcon),
        before,
        "the logs differ on a server without the module"
    );
    reconnected(&store);
    assert_eq!(admit(&limiter, b"busy", 5), 2, "busy had 8 of 10");
    assert_eq!(admit(&limiter, b"user-7", 10), 7);
    assert_eq!(
        metered_admit(&metered, b"llm", 10, 2),
        1,
        "90 of 100 tokens spent"
    );
    let still = leases(&mut mcon);
    assert_eq!(still.len(), 1, "the lease the AOF kept");
    assert!(
        hold(&held, b"export").lease.is_some(),
        "one slot of two is free"
    );
    assert!(hold(&held, b"export").lease.is_none(), "both are held");
    let stats = store.stats();
    assert_eq!(stats.path, "script", "{stats:?}");
    assert!(stats.script_calls >= 10, "{stats:?}");
}

/// `ratekeeper_replicating` from `INFO ratekeeper`: whether the module
/// builds what it replicates (1) or only counts its writes (0).
fn replicating(con: &mut redis::Connection) -> i64 {
    info_number(con, "ratekeeper", "ratekeeper_replicating")
}

/// A number field of an `INFO` section.
fn info_number(con: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("INFO {section} has no {field}: {info}"))
        .trim()
        .parse()
        .unwrap()
}

/// Checks `key` `n` times; how many were admitted.
fn admit(limiter: &Limiter, key: &[u8], n: usize) -> usize {
    (0..n)
        .filter(|_| limiter.check(key, 1, None).unwrap().allowed())
        .count()
}

/// A replica of `master` without the module (what it is sent is plain
/// string commands), once its first sync is done (up to 30 s on a busy
/// machine), calling `meanwhile` until then; and a connection to it.
fn synced_replica(master: &OwnRedis, mut meanwhile: impl FnMut()) -> (OwnRedis, redis::Connection) {
    let replica = OwnRedis::start(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut rcon = connect(&replica.url());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !common::info_holds(&mut rcon, "replication", &["master_link_status:up"], 1) {
        assert!(
            std::time::Instant::now() < deadline,
            "the replica never synced with its master"
        );
        meanwhile();
    }
    (replica, rcon)
}

/// Whether the master's one replica acknowledged every write so far within
/// `timeout_ms`.
fn acknowledged(mcon: &mut redis::Connection, timeout_ms: u64) -> bool {
    common::replicated(mcon, 1, timeout_ms) == 1
}

#[test]
fn writes_nothing_received_reach_a_replica_that_attaches_later_and_every_write_after() {
    let Some(module) = module_file() else { return };
    // a diskless full sync with a delay: the replica's backlog exists a
    // second before the snapshot it starts from is taken, and the snapshot
    // takes most of a second more (10 ms a key), while checks go on
    let master = OwnRedis::start(&[
        "--loadmodule",
        module.as_str(),
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "1",
        "--rdb-key-save-delay",
        "10000",
    ]);
    let mut mcon = connect(&master.url());
    assert_eq!(replicating(&mut mcon), 0, "nothing receives writes yet");
    let store = common::open_with(&master.url(), ModuleUse::Require);
    let limiter = limiter(store.clone());
    for i in 0..40 {
        assert_eq!(admit(&limiter, format!("user-{i}").as_bytes(), 3), 3);
    }
    // every write is counted where save points see it
    let changes = info_number(&mut mcon, "persistence", "rdb_changes_since_last_save");
    assert!(changes >= 120, "{changes} writes counted of 120");

    // a replica attaches while checks go on
    let mut during = 0;
    let (_replica, mut rcon) = synced_replica(&master, || {
        admit(&limiter, format!("during-{}", during % 50).as_bytes(), 2);
        during += 1;
    });
    assert_eq!(replicating(&mut mcon), 1, "a replica receives writes");
    // a save that ends with the replica there leaves the module replicating
    // (once the child that sent the replica its snapshot has ended: Redis
    // refuses a BGSAVE while it runs)
    let idle = ["rdb_bgsave_in_progress:0"];
    assert!(common::info_holds(&mut mcon, "persistence", &idle, 1200));
    let _: Value = redis::cmd("BGSAVE").query(&mut mcon).unwrap();
    let saved = ["rdb_bgsave_in_progress:0", "rdb_last_bgsave_status:ok"];
    assert!(common::info_holds(&mut mcon, "persistence", &saved, 1200));
    assert_eq!(
        replicating(&mut mcon),
        1,
        "a save's end stopped the replication"
    );
    for i in 0..40 {
        admit(&limiter, format!("user-{i}").as_bytes(), 2);
    }
    // a rule change rewrites a log whole
    let wider = Limiter::with_store(
        RuleSet::parse("20/minute").unwrap(),
        store.clone(),
        OnError::Raise,
    );
    assert_eq!(admit(&wider, b"wide", 25), 20);

    assert!(
        acknowledged(&mut mcon, 10_000),
        "the replica did not acknowledge the writes"
    );
    let on_master = logs(&mut mcon);
    assert!(on_master.len() >= 41, "{} logs", on_master.len());
    assert_eq!(
        logs(&mut rcon),
        on_master,
        "the replica's logs differ from its master's ({during} checks during the sync)"
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&on_master[0].0)
        .query(&mut rcon)
        .unwrap();
    assert!(ttl > 0, "the replica's log has no TTL ({ttl})");
}

#[test]
fn a_master_restarted_from_its_rdb_replicates_into_the_backlog_it_kept() {
    let Some(module) = module_file() else { return };
    // (stopped, it does not wait for its frozen replica)
    let mut master = OwnRedis::start(&["--loadmodule", module.as_str(), "--shutdown-timeout", "0"]);
    let (replica, mut rcon) = synced_replica(&master, || {});
    let store = common::open_with(&master.url(), ModuleUse::Require);
    let limiter = limiter(store.clone());
    for i in 0..20 {
        admit(&limiter, format!("user-{i}").as_bytes(), 2);
    }
    // the master restarts from its RDB, which holds its replication offset,
    // while the replica is away: it keeps a backlog for the replica to resume
    // from, and the checks made before the replica is back must reach it
    replica.freeze();
    let mut mcon = connect(&master.url());
    // (SAVE is refused while a child saves: the full sync's may still run)
    let saved = (0..200).any(|_| {
        let done = redis::cmd("SAVE").query::<Value>(&mut mcon).is_ok();
        if !done {
            std::thread::sleep(Duration::from_millis(50));
        }
        done
    });
    assert!(saved, "the master never saved its RDB");
    master.stop();
    master.restart();
    let mut mcon = connect(&master.url());
    assert_eq!(
        info_number(&mut mcon, "replication", "repl_backlog_active"),
        1
    );
    assert_eq!(replicating(&mut mcon), 1, "a backlog receives writes");
    reconnected(&store);
    for i in 0..20 {
        admit(&limiter, format!("user-{i}").as_bytes(), 2);
    }
    assert_eq!(admit(&limiter, b"after", 12), 10);
    replica.thaw();
    assert!(
        acknowledged(&mut mcon, 30_000),
        "the replica did not come back"
    );
    let on_master = logs(&mut mcon);
    assert_eq!(on_master.len(), 21);
    assert_eq!(
        logs(&mut rcon),
        on_master,
        "the replica's logs differ from its restarted master's"
    );
}

#[test]
fn an_aof_switched_on_after_writes_nothing_received_holds_them_all() {
    let Some(module) = module_file() else { return };
    // (each save takes 10 ms a key, so that checks go on during the AOF's
    // first rewrite)
    let load = [
        "--loadmodule",
        module.as_str(),
        "--rdb-key-save-delay",
        "10000",
    ];
    let mut master = OwnRedis::start(&load);
    let mut mcon = connect(&master.url());
    assert_eq!(replicating(&mut mcon), 0, "nothing receives writes yet");
    let store = common::open_with(&master.url(), ModuleUse::Require);
    let limiter = limiter(store.clone());
    for i in 0..30 {
        admit(&limiter, format!("user-{i}").as_bytes(), 4);
    }
    // a save that ends leaves the module as it was: nothing receives writes
    let _: Value = redis::cmd("BGSAVE").query(&mut mcon).unwrap();
    let saved = ["rdb_bgsave_in_progress:0", "rdb_last_bgsave_status:ok"];
    assert!(common::info_holds(&mut mcon, "persistence", &saved, 600));
    assert!(
        (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            replicating(&mut mcon) == 0
        }),
        "the module still replicates after a save ended with nothing to receive writes"
    );

    let _: Value = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut mcon)
        .unwrap();
    let done = [
        "aof_enabled:1",
        "aof_rewrite_in_progress:0",
        "aof_rewrite_scheduled:0",
        "aof_last_bgrewrite_status:ok",
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut during = 0;
    while !common::info_holds(&mut mcon, "persistence", &done, 1) {
        assert!(
            std::time::Instant::now() < deadline,
            "the AOF's first rewrite never ended"
        );
        admit(&limiter, format!("during-{}", during % 20).as_bytes(), 1);
        during += 1;
    }
    assert!(during > 0, "no check was made during the rewrite");
    assert_eq!(replicating(&mut mcon), 1, "the AOF receives writes");
    for i in 0..30 {
        admit(&limiter, format!("user-{i}").as_bytes(), 3);
    }
    assert_eq!(admit(&limiter, b"late", 12), 10);
    let before = logs(&mut mcon);
    assert!(before.len() >= 32, "{} logs", before.len());
    master.stop();
    master.set_args(&[&load[..], &["--appendonly", "yes"]].concat());
    master.restart();
    let mut mcon = connect(&master.url());
    assert_eq!(
        logs(&mut mcon),
        before,
        "the logs differ after the AOF is loaded ({during} checks during its first rewrite)"
    );
}

#[test]
fn a_module_loaded_later_is_picked_up_within_ten_seconds() {
    let Some(module) = module_file() else { return };
    let server = OwnRedis::start(&["--enable-module-command", "yes"]);
    let store = common::open_with(&server.url(), ModuleUse::Auto);
    let limiter = limiter(store.clone());
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    assert_eq!(store.stats().path, "script");
    let mut con = connect(&server.url());
    let _: () = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(&module)
        .query(&mut con)
        .unwrap();
    std::thread::sleep(Duration::from_millis(10_100));
    assert!(limiter.check(b"k", 1, None).unwrap().allowed());
    let stats = store.stats();
    assert_eq!((stats.path, stats.module_calls), ("module", 1), "{stats:?}");
}
