//! Measures what the crate docs state about the Redis log: the bytes of a
//! full log (`MEMORY USAGE`: about 1,024 entries a rule, whatever the
//! units), and Redis commands per check independent of the limit.
//! Prints the figures; asserts only on counts, never on time.

mod common;

use ratekeeper_core::{Limiter, OnError, RuleSet, Store};
use std::sync::Arc;

fn memory_usage(con: &mut redis::Connection, key: &str) -> u64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query(con)
        .unwrap()
}

const START: f64 = 1_700_000_000.0;

/// Checks one key `checks` times, `spacing` seconds apart from `first`, and
/// requires every check to be admitted.
fn steady(limiter: &Limiter, key: &[u8], first: u64, checks: u64, spacing: f64) {
    for i in first..first + checks {
        assert!(
            limiter
                .check(key, 1, Some(START + i as f64 * spacing))
                .unwrap()
                .allowed(),
            "check {i}"
        );
    }
}

/// `(calls, usec)` of one command from `INFO commandstats`.
fn command_stats(con: &mut redis::Connection, command: &str) -> (u64, f64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{command}:")));
    let Some(line) = line else { return (0, 0.0) };
    let field = |name: &str| -> f64 {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    (field("calls") as u64, field("usec"))
}

/// Redis commands (all kinds, script-internal included) and EVALSHA usec per
/// check, over `checks` admitted checks that each push one unit out of the window.
fn per_check(
    con: &mut redis::Connection,
    limiter: &Limiter,
    key: &[u8],
    first: u64,
    checks: u64,
    spacing: f64,
) -> (f64, f64) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).unwrap();
    steady(limiter, key, first, checks, spacing);
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    let total: u64 = info
        .lines()
        .filter(|l| {
            l.starts_with("cmdstat_")
                && !l.starts_with("cmdstat_config")
                && !l.starts_with("cmdstat_info")
        })
        .map(|l| {
            l.split([':', ','])
                .find_map(|kv| kv.strip_prefix("calls="))
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    let (_, usec) = command_stats(con, "evalsha");
    (total as f64 / checks as f64, usec / checks as f64)
}

#[test]
fn a_full_log_is_bounded_and_checks_do_not_grow_with_the_limit() {
    let mut con = common::raw_redis();
    let store: Arc<dyn Store> = common::redis();
    let prefix = {
        // the store's prefix is private: find it by logging one unit
        let probe = Limiter::with_store(
            RuleSet::parse("1/s").unwrap(),
            store.clone(),
            OnError::Raise,
        );
        probe.check(b"probe", 1, Some(1.0)).unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("rktest-*:{probe}:l")
            .query(&mut con)
            .unwrap();
        let mut found: Vec<String> = keys
            .into_iter()
            .filter(|k| {
                let ttl: i64 = redis::cmd("PTTL").arg(k).query(&mut con).unwrap();
                ttl > 0
            })
            .collect();
        found.sort();
        found
            .pop()
            .unwrap()
            .trim_end_matches(":{probe}:l")
            .to_owned()
    };

    // a day's log at its limit, sliding: 99,000 units a day apart evenly (a
    // merged entry leaves the window up to a step, 84 s, late: the 1,000
    // units to spare keep every check admitted), held in about 1,024 entries
    let day = Limiter::with_store(
        RuleSet::parse("100000/day").unwrap(),
        store.clone(),
        OnError::Raise,
    );
    let spacing = 86_400.0 / 99_000.0;
    steady(&day, b"day", 0, 99_000, spacing);
    let day_bytes = memory_usage(&mut con, &format!("{prefix}:{{day}}:l"));
    let per_unit = day_bytes as f64 / 99_000.0;
    println!("100000/day, 99000 units: {day_bytes} bytes, {per_unit:.2} bytes/unit");
    assert!(day_bytes <= 24_000, "{day_bytes} bytes for a day's log");

    let four = Limiter::with_store(
        RuleSet::parse("1/s; 20/m; 200/h; 800/d").unwrap(),
        store.clone(),
        OnError::Raise,
    );
    for i in 0..800u64 {
        // one unit every 4.5 minutes fits all four rules
        assert!(four
            .check(b"four", 1, Some(1_700_000_000.0 + i as f64 * 108.0))
            .unwrap()
            .allowed());
    }
    let four_bytes = memory_usage(&mut con, &format!("{prefix}:{{four}}:l"));
    println!(
        "1/s; 20/m; 200/h; 800/d, 800 units: {four_bytes} bytes, {:.2} bytes/unit",
        four_bytes as f64 / 800.0
    );

    let _: () = redis::cmd("DEL")
        .arg("rktest-list")
        .query(&mut con)
        .unwrap();
    for chunk in 0..100 {
        let values: Vec<u64> = (0..1000)
            .map(|i| 1_700_000_000_000 + chunk * 1000 + i)
            .collect();
        let _: () = redis::cmd("RPUSH")
            .arg("rktest-list")
            .arg(values)
            .query(&mut con)
            .unwrap();
    }
    let list_bytes = memory_usage(&mut con, "rktest-list");
    println!(
        "a LIST of 100000 ms timestamps: {list_bytes} bytes, {:.2} bytes/unit",
        list_bytes as f64 / 100_000.0
    );
    let _: () = redis::cmd("DEL")
        .arg("rktest-list")
        .query(&mut con)
        .unwrap();

    // per check: a 10/second rule and a 100,000/day rule, both full and sliding
    // (each check pushes the oldest unit out and logs a new one)
    let second = Limiter::with_store(
        RuleSet::parse("10/second").unwrap(),
        store.clone(),
        OnError::Raise,
    );
    steady(&second, b"second", 0, 10, 0.1);
    let (second_cmds, second_usec) = per_check(&mut con, &second, b"second", 10, 2000, 0.1);
    let (day_cmds, day_usec) = per_check(&mut con, &day, b"day", 99_000, 2000, spacing);
    println!(
        "per check, 10/second: {second_cmds:.2} Redis commands, {second_usec:.2} usec in EVALSHA"
    );
    println!("per check, 100000/day: {day_cmds:.2} Redis commands, {day_usec:.2} usec in EVALSHA");
    println!(
        "ratio 100000/day : 10/second = {:.2} (usec)",
        day_usec / second_usec
    );
    assert!(
        day_cmds <= second_cmds + 0.5,
        "a 100000/day check issues {day_cmds} commands, a 10/second one {second_cmds}"
    );
}
