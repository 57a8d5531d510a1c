//! The Rust half of the benchmark suite (`bench/run` runs it all): medians of
//! the core's check on Redis, printed as JSON lines `{"name", "median_ns"}`.
//!
//!   RATEKEEPER_BENCH_REDIS=redis://127.0.0.1:6379/0 RATEKEEPER_BENCH_N=20000 \
//!     cargo bench -p ratekeeper-core --bench compare

use ratekeeper_core::{Limiter, OnError, RuleSet, StoreOptions};
use std::time::{Duration, Instant};

const FOUR_RULES: &str = "50/second; 1000/minute; 20000/hour; 100000/day";
const KEYS: usize = 1000;
const BATCH: usize = 50;

fn limiter(url: &str, rules: &str, cache: Duration) -> Limiter {
    let options = StoreOptions {
        prefix: format!("bench-{}", std::process::id()),
        timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(2),
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

fn report(name: &str, ns: f64) {
    println!("{{\"name\": \"{name}\", \"median_ns\": {ns:.1}}}");
}

fn main() {
    let url = std::env::var("RATEKEEPER_BENCH_REDIS")
        .expect("set RATEKEEPER_BENCH_REDIS (bench/run does)");
    let n: usize = std::env::var("RATEKEEPER_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user:{i}")).collect();

    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
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
