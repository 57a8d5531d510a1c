//! A frozen Redis (SIGSTOP): every check, blocking or awaited, is answered
//! within one timeout, whatever else its process does meanwhile.

use crate::common;

use common::OwnRedis;
use ratekeeper_core::{Admin, Limiter, List, OnError, RuleSet, StoreOptions};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Each store call's timeout, and a new connection's.
const TIMEOUT: Duration = Duration::from_millis(250);

/// A limiter of "1000/hour" on `redis` under `prefix`, which fails open
/// after [`TIMEOUT`].
fn frozen_limiter(redis: &OwnRedis, prefix: &str) -> Arc<Limiter> {
    let options = StoreOptions {
        prefix: prefix.to_owned(),
        timeout: TIMEOUT,
        connect_timeout: TIMEOUT,
        ..StoreOptions::default()
    };
    let rules = RuleSet::parse("1000/hour").unwrap();
    Arc::new(Limiter::open(rules, &redis.url(), &options, OnError::Allow).unwrap())
}

/// Redis frozen (SIGSTOP) under 4 threads of blocking checks: each check is
/// answered within ONE `timeout` (and a little slack), never a timeout for a
/// new connection's setup and another for the command; awaited checks too.
/// The slack (50 ms) is for this process's own threads waking: beside the
/// other tests on 2 cores (a Cluster's scenarios, forked saves), a thread
/// woken by its timeout once waited 51 ms for a core, so it runs alone.
#[cfg(feature = "async")]
#[test]
#[ignore = "timed to 50 ms: scripts/test runs it alone"]
fn a_frozen_redis_answers_every_check_within_one_timeout() {
    let bound = TIMEOUT + Duration::from_millis(50);
    let redis = OwnRedis::start(&[]);
    let prefix = common::unique_prefix();
    let open = || frozen_limiter(&redis, &prefix);
    let (blocking, awaited) = (open(), open());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for i in 0..4 {
        assert!(!blocking
            .check(format!("warm{i}").as_bytes(), 1, None)
            .unwrap()
            .degraded());
        let awaited = awaited.clone();
        let d = runtime
            .block_on(async move {
                awaited
                    .check_async(format!("warm{i}").as_bytes(), &Default::default())
                    .await
            })
            .unwrap();
        assert!(!d.degraded());
    }
    redis.freeze();
    // a pipeline of checks too: the client would wait a timeout per reply
    let keys: Vec<Vec<u8>> = (0..8).map(|i| format!("many{i}").into_bytes()).collect();
    let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let start = Instant::now();
    let many = blocking.check_many(&keys, 1, None).unwrap();
    let took = start.elapsed();
    assert!(many.iter().all(|d| d.degraded()));
    assert!(took <= bound, "check_many took {took:?} (bound {bound:?})");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (limiter, seen) = (blocking.clone(), seen.clone());
            std::thread::spawn(move || {
                for i in 0..3 {
                    let start = Instant::now();
                    let d = limiter
                        .check(format!("f{t}-{i}").as_bytes(), 1, None)
                        .unwrap();
                    seen.lock()
                        .unwrap()
                        .push(("blocking", start.elapsed(), d.degraded()));
                }
            })
        })
        .collect();
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let (limiter, seen) = (awaited.clone(), seen.clone());
            runtime.spawn(async move {
                for i in 0..3 {
                    let start = Instant::now();
                    let key = format!("a{t}-{i}");
                    let d = limiter
                        .check_async(key.as_bytes(), &Default::default())
                        .await
                        .unwrap();
                    seen.lock()
                        .unwrap()
                        .push(("awaited", start.elapsed(), d.degraded()));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    runtime.block_on(async {
        for task in tasks {
            task.await.unwrap();
        }
    });
    redis.thaw();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 24);
    assert!(seen.iter().all(|(_, _, degraded)| *degraded), "{seen:?}");
    for kind in ["blocking", "awaited"] {
        let slowest = seen
            .iter()
            .filter(|s| s.0 == kind)
            .map(|s| s.1)
            .max()
            .unwrap();
        eprintln!("Redis frozen, timeout {TIMEOUT:?}: the slowest {kind} check took {slowest:?}");
        assert!(
            slowest <= bound,
            "a {kind} check took {slowest:?} (bound {bound:?})"
        );
    }
}

/// A change to the controls made in this process (an operator's block)
/// has the next check read them again. An awaited check makes that read
/// awaited too: on a frozen Redis, a task beside it on the runtime's one
/// thread is answered within its own timeout. (The read was once made
/// blocking, holding the thread a timeout, so the task beside it took two.)
#[cfg(feature = "async")]
#[test]
#[ignore = "timed: scripts/test runs it alone"]
fn an_awaited_checks_read_of_the_controls_never_holds_the_runtimes_thread() {
    // (a check held a timeout more takes twice the timeout)
    let bound = TIMEOUT + Duration::from_millis(150);
    let redis = OwnRedis::start(&[]);
    let prefix = common::unique_prefix();
    let limiter = frozen_limiter(&redis, &prefix);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // (each timed from when both were spawned: a task waits for the thread too)
    let check = |key: &'static str, start: Instant| {
        let limiter = limiter.clone();
        async move {
            let d = limiter
                .check_async(key.as_bytes(), &Default::default())
                .await;
            (start.elapsed(), d.unwrap().degraded())
        }
    };
    for round in 0..3 {
        assert!(!runtime.block_on(check("warm", Instant::now())).1);
        // an operator's change, made in this process: the next check reads the controls
        Admin::open(&redis.url(), &prefix, None)
            .unwrap()
            .add(List::Block, b"192.0.2.1", Some(60.0), "", None)
            .unwrap();
        redis.freeze();
        let seen = runtime.block_on(async {
            let start = Instant::now();
            let tasks = [check("a", start), check("b", start)].map(tokio::spawn);
            let mut seen = Vec::new();
            for task in tasks {
                seen.push(task.await.unwrap());
            }
            seen
        });
        redis.thaw();
        assert!(seen.iter().all(|(_, degraded)| *degraded), "{seen:?}");
        let slowest = seen.iter().map(|s| s.0).max().unwrap();
        assert!(
            slowest <= bound,
            "round {round}: an awaited check took {slowest:?} (bound {bound:?}): {seen:?}"
        );
    }
}
