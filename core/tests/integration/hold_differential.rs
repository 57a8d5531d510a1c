//! The hold and leases scripts held to the module's `RATEKEEPER.HOLD` and
//! `RATEKEEPER.LEASES`: random in-flight limits beside random rates (or
//! none), costs, lease times, peeks, releases (of leases held, lapsed and
//! unknown), extensions and lists, at times moving forward (and now and
//! then back), applied once through the scripts and once through the module
//! (the check's arguments as the script takes them, or packed as clients
//! send them) to two keys on one Redis: every reply, every log's bytes and
//! every lease set must be equal.
//!
//! Runs on `RATEKEEPER_TEST_REDIS_MODULE` (scripts/test starts it).

use crate::common;
use crate::engine_differential::{loaded, rule_args, unpacked_array, Rng};

use ratekeeper_core::engine::lua::{HOLD_SCRIPT, LEASES_SCRIPT};
use ratekeeper_core::engine::packed::pack_check;
use ratekeeper_core::engine::Rules;
use redis::Value;

/// One side's keys: the leases, then the log.
struct Side {
    leases: String,
    log: String,
}

/// The module's reply to a packed check (the check's reply and the lease
/// step's four numbers, packed into one string) read back into the
/// script's array: `{check's reply, live, taken, soonest, now}`.
fn unpacked(reply: Value) -> Value {
    let Value::BulkString(bytes) = reply else {
        return reply;
    };
    let Value::Array(mut items) = unpacked_array(&bytes) else {
        unreachable!("unpacked_array gives an array");
    };
    assert!(items.len() >= 9, "a packed hold reply: {items:?}");
    let numbers = items.split_off(items.len() - 4);
    let mut parts = vec![Value::Array(items)];
    parts.extend(numbers);
    Value::Array(parts)
}

/// A lease set as stored: its members and scores, and its expiry.
fn lease_set(con: &mut redis::Connection, key: &str) -> (Vec<(String, String)>, bool) {
    let members: Vec<(String, String)> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con)
        .unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(con).unwrap();
    (members, ttl > 0)
}

fn log_bytes(con: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

fn run_sequence(con: &mut redis::Connection, shas: &(String, String), seed: u64) -> [u64; 3] {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let tag = common::unique_prefix();
    let sides = [
        Side {
            leases: format!("{tag}:{{k}}:s:f"),
            log: format!("{tag}:{{k}}:s:l"),
        },
        Side {
            leases: format!("{tag}:{{k}}:m:f"),
            log: format!("{tag}:{{k}}:m:l"),
        },
    ];
    let rates: Vec<(u64, u64)> = match rng.below(3) {
        0 => Vec::new(),
        1 => vec![(1 + rng.below(6), 1_000 + rng.below(9_000))],
        _ => vec![(1 + rng.below(4), 1_000), (3 + rng.below(20), 60_000)],
    };
    let limit = 1 + rng.below(4);
    let mut now: i64 = 1_700_000_000_000 + rng.below(1 << 20) as i64;
    let mut ids: Vec<String> = Vec::new();
    // steps compared, leases taken, holds refused
    let mut stats = [0u64; 3];
    for step in 0..80 {
        now += match rng.below(10) {
            0 => -(rng.below(500) as i64),
            1..=3 => rng.below(20) as i64,
            _ => rng.below(1_500) as i64,
        };
        let at = format!("seed {seed} step {step}, limit {limit}, rates {rates:?}, now {now}");
        let lease_ms = 100 + rng.below(4_000);
        let kind = rng.below(100);
        let replies: Vec<Result<Value, String>> = if kind < 60 {
            let taking = rng.chance(85);
            let id = format!("{seed}x{step}");
            let cost = 1 + rng.below(3);
            let packed = rng.chance(50);
            let head: Vec<Vec<u8>> = vec![
                if taking { "h" } else { "q" }.into(),
                limit.to_string().into(),
                lease_ms.to_string().into(),
                id.clone().into(),
                now.to_string().into(),
            ];
            let mut check: Vec<Vec<u8>> = vec![
                if taking { "c" } else { "p" }.into(),
                cost.to_string().into(),
                now.to_string().into(),
            ];
            rule_args(&mut check, &rates);
            let pairs: Vec<(i64, i64)> = rates.iter().map(|&(l, w)| (l as i64, w as i64)).collect();
            let packed_check = pack_check(
                taking,
                false,
                cost,
                Some(now as u64),
                &Rules::new(&pairs),
                std::iter::empty(),
            );
            let answers: Vec<Result<Value, String>> = sides
                .iter()
                .enumerate()
                .map(|(i, side)| {
                    let module = i == 1;
                    let mut cmd = if module {
                        redis::cmd("RATEKEEPER.HOLD")
                    } else {
                        let mut c = redis::cmd("EVALSHA");
                        c.arg(&shas.0);
                        c
                    };
                    if rates.is_empty() {
                        cmd.arg(1).arg(&side.leases).arg(&head);
                    } else {
                        cmd.arg(2).arg(&side.leases).arg(&side.log).arg(&head);
                        match module && packed {
                            true => cmd.arg(&packed_check),
                            false => cmd.arg(&check),
                        };
                    }
                    cmd.query::<Value>(con)
                        .map(unpacked)
                        .map_err(|e| e.to_string())
                })
                .collect();
            if let Ok(Value::Array(parts)) = &answers[0] {
                match parts.get(2) {
                    Some(Value::Int(1)) => {
                        stats[1] += 1;
                        ids.push(format!("{now}-{id}"));
                    }
                    _ if taking => stats[2] += 1,
                    _ => {}
                }
            }
            answers
        } else {
            let (call, id) = match kind {
                60..=79 => ("r", pick(&mut rng, &ids)),
                80..=89 => ("e", pick(&mut rng, &ids)),
                _ => ("l", String::new()),
            };
            sides
                .iter()
                .enumerate()
                .map(|(i, side)| {
                    let mut cmd = if i == 1 {
                        redis::cmd("RATEKEEPER.LEASES")
                    } else {
                        let mut c = redis::cmd("EVALSHA");
                        c.arg(&shas.1);
                        c
                    };
                    cmd.arg(1)
                        .arg(&side.leases)
                        .arg(call)
                        .arg(&id)
                        .arg(if call == "e" { lease_ms } else { 0 })
                        .arg(now);
                    cmd.query::<Value>(con).map_err(|e| e.to_string())
                })
                .collect()
        };
        assert_eq!(replies[0], replies[1], "{at}: the replies differ");
        assert_eq!(
            lease_set(con, &sides[0].leases),
            lease_set(con, &sides[1].leases),
            "{at}: the leases differ"
        );
        assert_eq!(
            log_bytes(con, &sides[0].log),
            log_bytes(con, &sides[1].log),
            "{at}: the logs differ"
        );
        stats[0] += 1;
    }
    stats
}

/// A lease id taken before (or, now and then, one never taken).
fn pick(rng: &mut Rng, ids: &[String]) -> String {
    if ids.is_empty() || rng.chance(10) {
        return "1-unknown".to_owned();
    }
    ids[rng.below(ids.len() as u64) as usize].clone()
}

#[test]
fn the_scripts_and_the_module_hold_and_release_alike() {
    let Some(url) = common::configured("RATEKEEPER_TEST_REDIS_MODULE") else {
        return;
    };
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    let shas = (
        loaded(&mut con, HOLD_SCRIPT),
        loaded(&mut con, LEASES_SCRIPT),
    );
    let mut total = [0u64; 3];
    for seed in 1..=120 {
        let stats = run_sequence(&mut con, &shas, seed);
        for (t, s) in total.iter_mut().zip(stats) {
            *t += s;
        }
    }
    eprintln!(
        "hold differential: {} steps compared, {} leases taken, {} holds refused",
        total[0], total[1], total[2]
    );
    assert!(
        total[0] == 120 * 80 && total[1] > 1_000 && total[2] > 300,
        "{total:?}"
    );
}
