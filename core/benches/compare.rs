//! The Rust half of the benchmark suite (`bench/run` runs it all): medians of
//! the core's check on Redis, printed as JSON lines `{"name", "median_ns"}`.
//! With a Redis that has the ratekeeper module loaded, the same check through
//! the module, and what one Redis core sustains through the script and
//! through the module; with a Cluster of such Redis, the throughput as a
//! workload spreads over more masters.
//!
//!   RATEKEEPER_BENCH_REDIS=redis://127.0.0.1:6379/0 RATEKEEPER_BENCH_N=20000 \
//!   RATEKEEPER_BENCH_REDIS_MODULE=redis://127.0.0.1:6380/0 \
//!   RATEKEEPER_BENCH_CLUSTER_MODULE=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 \
//!   RATEKEEPER_BENCH_SECONDS=3 cargo bench -p ratekeeper-core --bench compare

use ratekeeper_core::{Limiter, ModuleUse, OnError, RuleSet, StoreOptions};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FOUR_RULES: &str = "50/second; 1000/minute; 20000/hour; 100000/day";
const KEYS: usize = 1000;
const BATCH: usize = 50;

fn limiter(url: &str, rules: &str, cache: Duration) -> Limiter {
    limiter_with(url, rules, cache, ModuleUse::Off)
}

fn limiter_with(url: &str, rules: &str, cache: Duration, module: ModuleUse) -> Limiter {
    let options = StoreOptions {
        prefix: format!("bench-{}", std::process::id()),
        timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(2),
        redis_module: module,
        ..StoreOptions::default()
    };
    Limiter::open(
        RuleSet::parse(rules).unwrap(),
        url,
        &options,
        OnError::Raise,
    )
    .unwrap()
    .with_denial_cache(cache)
}

/// The median over batches of the mean time of one call in a batch.
fn median_ns(n: usize, mut call: impl FnMut(usize)) -> f64 {
    for i in 0..n / 10 {
        call(i); // warm up
    }
    let mut samples: Vec<f64> = (0..n / BATCH)
        .map(|b| {
            let start = Instant::now();
            for i in 0..BATCH {
                call(b * BATCH + i);
            }
            start.elapsed().as_nanos() as f64 / BATCH as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The medians of two calls measured in alternating batches, so that both
/// see the same machine (a 2-core box's wake-up latency drifts between runs).
fn paired_median_ns(n: usize, mut a: impl FnMut(usize), mut b: impl FnMut(usize)) -> (f64, f64) {
    for i in 0..n / 10 {
        a(i);
        b(i);
    }
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    for batch in 0..n / BATCH {
        let start = Instant::now();
        for i in 0..BATCH {
            a(batch * BATCH + i);
        }
        sa.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
        let start = Instant::now();
        for i in 0..BATCH {
            b(batch * BATCH + i);
        }
        sb.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    sa.sort_by(f64::total_cmp);
    sb.sort_by(f64::total_cmp);
    (sa[sa.len() / 2], sb[sb.len() / 2])
}

fn report(name: &str, ns: f64) {
    println!("{{\"name\": \"{name}\", \"median_ns\": {ns:.1}}}");
}

/// A plain redis-rs connection to `url`.
fn connection(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// Loads the Lua `source` into the server of `con`; its SHA-1.
fn load_script(con: &mut redis::Connection, source: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query(con)
        .unwrap()
}

/// The arguments of one 4-rule check as the script takes them (mode, cost,
/// now "" for the server clock, the rules).
fn check_args() -> Vec<Vec<u8>> {
    let rules = RuleSet::parse(FOUR_RULES).unwrap();
    let mut args: Vec<Vec<u8>> = vec![b"c".to_vec(), b"1".to_vec(), Vec::new()];
    args.push(rules.rules().len().to_string().into_bytes());
    args.push(
        rules
            .rules()
            .iter()
            .flat_map(|r| r.window_ms.to_be_bytes()[3..].to_vec())
            .collect(),
    );
    args.extend(
        rules
            .rules()
            .iter()
            .map(|r| r.limit.to_string().into_bytes()),
    );
    args.extend(
        rules
            .rules()
            .iter()
            .map(|r| r.window_ms.to_string().into_bytes()),
    );
    args
}

/// The same check packed into one argument, as clients send it to the module.
fn packed_args() -> Vec<Vec<u8>> {
    let rules = RuleSet::parse(FOUR_RULES).unwrap();
    vec![ratekeeper_core::engine::packed::pack_check(
        true,
        false,
        1,
        None,
        rules.log_rules(),
        std::iter::empty(),
    )]
}

/// The call of one check of `key`: the module's command, or the script by its SHA-1.
fn check_command(module: bool, sha: &str, key: &str, args: &[Vec<u8>]) -> redis::Cmd {
    let mut cmd = if module {
        redis::cmd("RATEKEEPER.CHECK")
    } else {
        let mut c = redis::cmd("EVALSHA");
        c.arg(sha);
        c
    };
    cmd.arg(1).arg(key).arg(args);
    cmd
}

/// Redis's CPU seconds so far (user + system).
fn redis_cpu(con: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(con).unwrap();
    info.lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .map(|l| l.split(':').nth(1).unwrap().trim().parse::<f64>().unwrap())
        .sum()
}

/// `usec_per_call` of one command in `INFO commandstats`.
fn usec_per_call(con: &mut redis::Connection, command: &str) -> f64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{command}:")))
        .unwrap_or_else(|| panic!("no {command} in commandstats"));
    line.split(',')
        .find_map(|f| f.strip_prefix("usec_per_call="))
        .unwrap()
        .parse()
        .unwrap()
}

/// Redis's own time per `command` (`usec_per_call`) while `call` runs `n`
/// times, one call after another: the median of `RUNS` runs of `n / RUNS`
/// calls, the stats reset before each (a stall of Redis's thread, such as
/// the machine running something else, falls in one run rather than in the
/// figure).
fn usec_per_call_median(
    con: &mut redis::Connection,
    command: &str,
    n: usize,
    mut call: impl FnMut(usize),
) -> f64 {
    const RUNS: usize = 5;
    let mut runs: Vec<f64> = (0..RUNS)
        .map(|run| {
            let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).unwrap();
            for i in 0..n / RUNS {
                call(run * (n / RUNS) + i);
            }
            usec_per_call(con, command)
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[RUNS / 2]
}

/// Checks Redis answered while `threads` connections (one per address,
/// cycling) each kept a pipeline of 64 checks in flight for `seconds`, on
/// 20,000 keys (their own per thread, from `keys_of`).
fn pipelined(
    addresses: &[String],
    threads: usize,
    module: bool,
    sha: &str,
    seconds: f64,
    keys_of: &(dyn Fn(usize) -> Vec<String> + Sync),
) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let args = if module { packed_args() } else { check_args() };
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (stop, done, args) = (stop.clone(), done.clone(), args.clone());
            let url = format!("redis://{}/0", addresses[t % addresses.len()]);
            let keys = keys_of(t);
            scope.spawn(move || {
                let mut con = connection(&url);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let mut pipe = redis::pipe();
                    for _ in 0..64 {
                        pipe.add_command(check_command(module, sha, &keys[i % keys.len()], &args));
                        i += 1;
                    }
                    let replies: Vec<redis::Value> = pipe.query(&mut con).unwrap();
                    done.fetch_add(replies.len() as u64, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    done.load(Ordering::Relaxed)
}

/// What one Redis core sustains through the script and through the module:
/// checks per second of Redis CPU (one client thread keeping a pipeline
/// full), and the Redis time per check under that load.
fn sustained(url: &str, seconds: f64) {
    let mut con = connection(url);
    let sha = load_script(&mut con, ratekeeper_core::store::REDIS_SCRIPT);
    let address = url
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    for (module, path, command) in [
        (false, "script", "evalsha"),
        (true, "module", "ratekeeper.check"),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut con)
            .unwrap();
        let cpu = redis_cpu(&mut con);
        let start = Instant::now();
        let keys = |t: usize| {
            (0..20_000)
                .map(|i| format!("sat-{path}:{{{t}-{i}}}"))
                .collect()
        };
        let checks = pipelined(
            std::slice::from_ref(&address),
            1,
            module,
            &sha,
            seconds,
            &keys,
        );
        let elapsed = start.elapsed().as_secs_f64();
        let used = redis_cpu(&mut con) - cpu;
        println!(
            "{{\"name\": \"redis_checks_per_cpu_second_{path}\", \"per_s\": {:.0}, \"checks_per_s\": {:.0}, \"redis_cpu\": {:.2}}}",
            checks as f64 / used,
            checks as f64 / elapsed,
            used / elapsed
        );
        println!(
            "{{\"name\": \"redis_usec_per_pipelined_check_{path}\", \"usec\": {:.2}}}",
            usec_per_call(&mut con, command)
        );
    }
}

/// Checks per second through the module on a Cluster, the workload spread
/// over 1, 2, then every master (one pipelining connection per master in use).
fn cluster_scaling(nodes: &str, seconds: f64) {
    let first = nodes.split(',').next().unwrap();
    let mut con = connection(&format!("redis://{first}/0"));
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con).unwrap();
    // (first slot, last slot, master address), by master
    let mut masters: Vec<(Vec<(i64, i64)>, String)> = Vec::new();
    for range in slots {
        let redis::Value::Array(items) = range else {
            continue;
        };
        let int = |v: &redis::Value| match v {
            redis::Value::Int(i) => *i,
            _ => panic!("{v:?}"),
        };
        let redis::Value::Array(master) = &items[2] else {
            continue;
        };
        let host = match &master[0] {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        };
        let address = format!("{host}:{}", int(&master[1]));
        let span = (int(&items[0]), int(&items[1]));
        match masters.iter_mut().find(|(_, a)| *a == address) {
            Some((spans, _)) => spans.push(span),
            None => masters.push((vec![span], address)),
        }
    }
    masters.sort_by(|a, b| a.1.cmp(&b.1));
    // 4,000 keys on each master, found by their slot
    let mut keys: Vec<Vec<String>> = vec![Vec::new(); masters.len()];
    let mut i = 0;
    while keys.iter().any(|k| k.len() < 4_000) {
        let key = format!("scale:{{{i}}}");
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&key)
            .query(&mut con)
            .unwrap();
        let owner = masters
            .iter()
            .position(|(spans, _)| spans.iter().any(|&(a, b)| a <= slot && slot <= b))
            .unwrap();
        if keys[owner].len() < 4_000 {
            keys[owner].push(key);
        }
        i += 1;
    }
    for used in 1..=masters.len() {
        let addresses: Vec<String> = masters[..used].iter().map(|m| m.1.clone()).collect();
        let checks = pipelined(&addresses, used, true, "", seconds, &|t| keys[t].clone());
        println!(
            "{{\"name\": \"cluster_module_{used}_masters_per_s\", \"per_s\": {:.0}}}",
            checks as f64 / seconds
        );
    }
}

fn main() {
    let url = std::env::var("RATEKEEPER_BENCH_REDIS")
        .expect("set RATEKEEPER_BENCH_REDIS (bench/run does)");
    let n: usize = std::env::var("RATEKEEPER_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user:{i}")).collect();

    let mut con = connection(&url);
    report(
        "rust_redis_rs_ping",
        median_ns(n, |_| redis::cmd("PING").query::<()>(&mut con).unwrap()),
    );

    let four = limiter(&url, FOUR_RULES, Duration::ZERO);
    report(
        "rust_check_4_rules",
        median_ns(n, |i| {
            assert!(four
                .check(keys[i % KEYS].as_bytes(), 1, None)
                .unwrap()
                .allowed())
        }),
    );
    // the floor of any check through a script from this client: one that makes
    // only the check's four Redis calls (bench/script_floor.lua), with the
    // check's keys and arguments, against PING in alternating batches
    let floor = load_script(&mut con, include_str!("../../bench/script_floor.lua"));
    let args = check_args();
    let mut pinging = connection(&url);
    let (script_floor, ping) = paired_median_ns(
        n,
        |i| {
            let key = &keys[i % KEYS];
            redis::cmd("EVALSHA")
                .arg(&floor)
                .arg(2)
                .arg(format!("floor:{{{key}}}:l"))
                .arg(format!("floor:{{{key}}}:p"))
                .arg(&args)
                .query::<redis::Value>(&mut con)
                .unwrap();
        },
        |_| redis::cmd("PING").query::<()>(&mut pinging).unwrap(),
    );
    report("rust_script_floor", script_floor);
    report("rust_redis_rs_ping_floor_paired", ping);
    let seconds: f64 = std::env::var("RATEKEEPER_BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3.0);
    if let Ok(module_url) = std::env::var("RATEKEEPER_BENCH_REDIS_MODULE") {
        let four = limiter_with(&module_url, FOUR_RULES, Duration::ZERO, ModuleUse::Require);
        let mut con = connection(&module_url);
        let (check, ping) = paired_median_ns(
            n,
            |i| {
                assert!(four
                    .check(keys[i % KEYS].as_bytes(), 1, None)
                    .unwrap()
                    .allowed())
            },
            |_| redis::cmd("PING").query::<()>(&mut con).unwrap(),
        );
        report("rust_check_4_rules_module", check);
        report("rust_redis_rs_ping_paired", ping);
        // Redis's own time per check, as for the script (one client, checks
        // one after another, each reading the key's record too)
        let usec = usec_per_call_median(&mut con, "ratekeeper.check", n, |i| {
            assert!(four
                .check(keys[i % KEYS].as_bytes(), 1, None)
                .unwrap()
                .allowed())
        });
        println!("{{\"name\": \"redis_usec_per_check_4_rules_module\", \"usec\": {usec:.2}}}");
        sustained(&module_url, seconds);
    }
    if let Ok(nodes) = std::env::var("RATEKEEPER_BENCH_CLUSTER_MODULE") {
        cluster_scaling(&nodes, seconds);
    }

    // one full log sliding: every check pushes the oldest unit out and logs one
    const START_MS: u64 = 1_700_000_000_000;
    let at = |ms: u64| Some((START_MS + ms) as f64 / 1000.0);
    let second = limiter(&url, "10/second", Duration::ZERO);
    let mut step = 0;
    report(
        "rust_check_10_per_second_full",
        median_ns(n, |_| {
            step += 1;
            assert!(second
                .check(b"slide:second", 1, at(step * 100))
                .unwrap()
                .allowed());
        }),
    );
    let day = limiter(&url, "100000/day", Duration::ZERO);
    for i in 0..100 {
        day.check(b"slide:day", 1000, at(i * 864_000)).unwrap(); // 100,000 units in 100 steps
    }
    let mut step = 0;
    report(
        "rust_check_100000_per_day_full",
        median_ns(n, |_| {
            step += 1;
            assert!(day
                .check(b"slide:day", 1, at(86_400_000 + step * 864))
                .unwrap()
                .allowed());
        }),
    );

    // a denied key hammered: remembered in-process, against asking Redis each time
    let cached = limiter(&url, "1/hour", Duration::from_secs(1));
    let uncached = limiter(&url, "1/hour", Duration::ZERO);
    for l in [&cached, &uncached] {
        l.reset(b"denied").unwrap();
        assert!(l.check(b"denied", 1, None).unwrap().allowed());
        assert!(!l.check(b"denied", 1, None).unwrap().allowed());
    }
    let before = cached.store_stats().attempts;
    report(
        "rust_denied_cached",
        median_ns(n, |_| {
            assert!(cached.check(b"denied", 1, None).unwrap().cached)
        }),
    );
    assert_eq!(
        cached.store_stats().attempts,
        before,
        "the cached denials reached Redis"
    );
    report(
        "rust_denied_round_trip",
        median_ns(n, |_| {
            assert!(!uncached.check(b"denied", 1, None).unwrap().allowed())
        }),
    );

    let memory = Limiter::open(
        RuleSet::parse("1000000/second").unwrap(),
        "memory://",
        &StoreOptions::default(),
        OnError::Raise,
    )
    .unwrap();
    report(
        "rust_memory_check_1_rule",
        median_ns(n * 5, |i| {
            assert!(memory
                .check(keys[i % KEYS].as_bytes(), 1, None)
                .unwrap()
                .allowed())
        }),
    );
}
