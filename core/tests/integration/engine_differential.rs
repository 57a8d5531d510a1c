//! The Lua script and the Redis module (the engine inside Redis) held to
//! each other: random rule sets, costs, times (backwards and far jumps
//! too), rule changes, tiers, overrides and listings, applied once through
//! the script and once through the module to two keys on one Redis: every
//! reply and every stored byte must be equal. A third key takes each step
//! through either, at random (a fleet switching), and must stay equal too.
//! The module's call is, at random, the script's arguments or the same
//! packed into one (as clients send it), whose one-string reply must hold
//! the script's items.
//!
//! Runs on `RATEKEEPER_TEST_REDIS_MODULE` (scripts/test starts it).

use crate::common;

use ratekeeper_core::engine::command::Item;
use ratekeeper_core::engine::log::Settle;
use ratekeeper_core::engine::packed::{pack_check, pack_settle, unpack_reply};
use ratekeeper_core::engine::Rules;
use ratekeeper_core::store::REDIS_SCRIPT;
use redis::Value;

/// A small deterministic generator (xorshift), so a failure names its seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

const WINDOWS: [u64; 8] = [1, 10, 100, 1_000, 5_000, 60_000, 3_600_000, 86_400_000];

/// (limit, window ms) pairs, shortest window first.
fn rule_set(rng: &mut Rng) -> Vec<(u64, u64)> {
    let n = 1 + rng.below(4) as usize;
    let mut windows: Vec<u64> = (0..n).map(|_| rng.pick(&WINDOWS)).collect();
    windows.sort_unstable();
    windows
        .into_iter()
        .map(|w| {
            let limit = match rng.below(12) {
                0 => 200 + rng.below(400),
                10..=11 => 1_000 + rng.below(2_000_000),
                1..=3 => 1 + rng.below(3),
                _ => 1 + rng.below(40),
            };
            (limit, w)
        })
        .collect()
}

/// A check's rules as the check script takes them (after its mode, cost and
/// now): their count, their windows packed, limits, windows.
pub(crate) fn rule_args(args: &mut Vec<Vec<u8>>, rules: &[(u64, u64)]) {
    args.push(rules.len().to_string().into_bytes());
    args.push(
        rules
            .iter()
            .flat_map(|r| r.1.to_be_bytes()[3..].to_vec())
            .collect(),
    );
    args.extend(rules.iter().map(|r| r.0.to_string().into_bytes()));
    args.extend(rules.iter().map(|r| r.1.to_string().into_bytes()));
}

/// One call of the check, through the script (by its source's SHA-1) or the module.
fn call(
    con: &mut redis::Connection,
    sha: &str,
    module: bool,
    keys: &[&str],
    args: &[Vec<u8>],
) -> Result<Value, String> {
    let mut cmd = if module {
        redis::cmd("RATEKEEPER.CHECK")
    } else {
        let mut c = redis::cmd("EVALSHA");
        c.arg(sha);
        c
    };
    cmd.arg(keys.len()).arg(keys).arg(args);
    cmd.query::<Value>(con).map_err(|e| e.to_string())
}

/// The module's packed check of these keys, its reply read back into the
/// script's array.
fn call_packed(con: &mut redis::Connection, keys: &[&str], packed: &[u8]) -> Result<Value, String> {
    let reply: Value = redis::cmd("RATEKEEPER.CHECK")
        .arg(keys.len())
        .arg(keys)
        .arg(packed)
        .query(con)
        .map_err(|e| e.to_string())?;
    let Value::BulkString(bytes) = reply else {
        panic!("a packed check's reply is one string: {reply:?}");
    };
    Ok(unpacked_array(&bytes))
}

/// A packed check reply read back into the script's array.
pub(crate) fn unpacked_array(bytes: &[u8]) -> Value {
    let items = unpack_reply(bytes).expect("a packed reply");
    Value::Array(
        items
            .into_iter()
            .map(|item| match item {
                Item::Int(n) => Value::Int(n),
                Item::Bytes(b) => Value::BulkString(b.to_vec()),
            })
            .collect(),
    )
}

/// Rules as the engine takes them.
fn engine_rules(rules: &[(u64, u64)]) -> Rules {
    let pairs: Vec<(i64, i64)> = rules.iter().map(|&(l, w)| (l as i64, w as i64)).collect();
    Rules::new(&pairs)
}

/// The server clock (ms).
fn server_ms(con: &mut redis::Connection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    secs * 1000 + micros / 1000
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn bytes(con: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// The key's TTL in ms (-1: none, -2: no key).
/// When `key` expires (unix ms; -1 without a TTL, -2 absent): an absolute
/// time, so reading three keys one after another on a busy machine does not
/// count as a difference between them.
fn expires_at(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap()
}

/// Whether two keys' TTLs agree: both absent, both without one, or both
/// set to the same end give or take `spread` ms (each call read the server's
/// clock on its own; the calls of a step are at most `spread` ms apart, and
/// a busy machine can hold one back a good part of a second).
fn same_ttl(a: i64, b: i64, spread: i64) -> bool {
    if a < 0 || b < 0 {
        a == b
    } else {
        (a - b).abs() <= spread
    }
}

struct Keys {
    script: String,
    module: String,
    mixed: String,
    records: [String; 3],
    /// The records of the bans the key earned in the check's scope.
    scoped: [String; 3],
}

fn copy(con: &mut redis::Connection, from: &str, to: &str) {
    let dumped: Option<Vec<u8>> = redis::cmd("DUMP").arg(from).query(con).unwrap();
    let ends = expires_at(con, from);
    let _: () = redis::cmd("DEL").arg(to).query(con).unwrap();
    if let Some(dumped) = dumped {
        // the same end, not the same time left (which a slow copy shortens)
        let _: () = redis::cmd("RESTORE")
            .arg(to)
            .arg(ends.max(0))
            .arg(dumped)
            .arg("ABSTTL")
            .query(con)
            .unwrap();
    }
}

/// Sets (or removes) one record field on every record key alike.
fn set_record(con: &mut redis::Connection, keys: &Keys, field: &str, value: Option<String>) {
    set_fields(con, &keys.records, field, value)
}

fn set_fields(
    con: &mut redis::Connection,
    records: &[String; 3],
    field: &str,
    value: Option<String>,
) {
    for record in records {
        let _: i64 = match &value {
            Some(v) => redis::cmd("HSET")
                .arg(record)
                .arg(field)
                .arg(v)
                .query(con)
                .unwrap(),
            None => redis::cmd("HDEL")
                .arg(record)
                .arg(field)
                .query(con)
                .unwrap(),
        };
    }
}

/// Deletes the three logs of a sequence.
fn delete(con: &mut redis::Connection, keys: &Keys) {
    let _: () = redis::cmd("DEL")
        .arg(&keys.script)
        .arg(&keys.module)
        .arg(&keys.mixed)
        .query(con)
        .unwrap();
}

/// A settle's arguments: the script's cost argument, the units charged
/// and the engine's settle.
fn settle_args(settle: Settle, charged: u64) -> (String, u64, Settle) {
    (
        format!("{charged} {} {}", settle.at, settle.refund),
        charged,
        settle,
    )
}

/// The shortest TTL a log is written with (check.lua's `TTL`, the engine's):
/// a second.
const MIN_TTL_MS: u64 = 1_000;

fn run_sequence(con: &mut redis::Connection, sha: &str, seed: u64, stats: &mut [u64; 5]) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let tag = common::unique_prefix();
    let keys = Keys {
        script: format!("{tag}:{{k}}:s"),
        module: format!("{tag}:{{k}}:m"),
        mixed: format!("{tag}:{{k}}:x"),
        records: [
            format!("{tag}:{{k}}:rs"),
            format!("{tag}:{{k}}:rm"),
            format!("{tag}:{{k}}:rx"),
        ],
        scoped: [
            format!("{tag}:{{k}}:login:rs"),
            format!("{tag}:{{k}}:login:rm"),
            format!("{tag}:{{k}}:login:rx"),
        ],
    };
    let mut rules = rule_set(&mut rng);
    let tiers: Vec<(String, Vec<(u64, u64)>)> = (0..rng.below(3))
        .map(|i| (format!("tier{i}"), rule_set(&mut rng)))
        .collect();
    let policy = rng.chance(50);
    let mut exact = rng.chance(20);
    // the check names the scope's record of bans too (a scoped limiter's)
    let scoped = policy && rng.chance(50);
    let mut now: i64 = if rng.chance(50) {
        1_000
    } else {
        1_700_000_000_000
    };
    // how far apart (ms, on the server's clock) the three calls of a step
    // have been at most: a key's expiry was set by one of them
    let mut widest: i64 = 50;
    // the times of the checks so far, which settles name
    let mut checked: Vec<i64> = Vec::new();
    for step in 0..60 {
        // keys about to expire, or of which one has (a machine slow between
        // steps), start again alike: a key that expires between the calls
        // is no difference between the script and the module
        let ends = [&keys.script, &keys.module, &keys.mixed].map(|k| expires_at(con, k));
        let clock = server_ms(con) as i64;
        let some_gone = ends.contains(&-2) && ends.iter().any(|&end| end != -2);
        if some_gone || ends.iter().any(|&end| end >= 0 && end - clock <= 300) {
            delete(con, &keys);
        }
        // the time: mostly forward, sometimes still, back, or far ahead
        now += match rng.below(20) {
            0 => -(rng.below(3_000) as i64),
            1 => 0,
            2 => (1i64 << 39) + rng.below(1 << 20) as i64,
            3..=6 => rng.below(3) as i64,
            7..=12 => rng.below(200) as i64,
            _ => rng.below(90_000) as i64,
        };
        now = now.clamp(0, (1 << 47) - 1);
        if rng.chance(5) {
            rules = rule_set(&mut rng);
        }
        if policy && rng.chance(15) {
            let until = |rng: &mut Rng| now + rng.below(4_000) as i64 - 2_000;
            match rng.below(if scoped { 8 } else { 6 }) {
                0 => set_record(
                    con,
                    &keys,
                    "s",
                    Some(format!("{} trusted", until(&mut rng))),
                ),
                1 => set_record(con, &keys, "b", Some(format!("{} spam", until(&mut rng)))),
                2 => {
                    let name = if rng.chance(70) && !tiers.is_empty() {
                        tiers[rng.below(tiers.len() as u64) as usize].0.clone()
                    } else {
                        "unknown".to_owned()
                    };
                    set_record(con, &keys, "t", Some(name))
                }
                3 => {
                    let text: Vec<String> = rule_set(&mut rng)
                        .iter()
                        .map(|(l, w)| format!("{l}:{w}"))
                        .collect();
                    set_record(con, &keys, "o", Some(text.join(";")))
                }
                6 => set_fields(
                    con,
                    &keys.scoped,
                    "b",
                    Some(format!("{} fail2ban login", until(&mut rng))),
                ),
                7 => set_fields(con, &keys.scoped, "b", None),
                _ => {
                    let field = rng.pick(&["s", "b", "t", "o"]);
                    set_record(con, &keys, field, None)
                }
            }
        }
        let limit_max = rules.iter().map(|r| r.0).max().unwrap();
        let cost = match rng.below(10) {
            0 => limit_max + 1 + rng.below(3),
            1..=2 => 1 + rng.below(5),
            3 => 1 + rng.below(limit_max.div_ceil(4)),
            _ => 1,
        };
        // every entry kept, in some trials (and a trial switching now and then)
        if rng.chance(3) {
            exact = !exact;
        }
        // now and then a settle of an earlier check: some units back, some
        // charged over, against the caller's rules alone (no record read)
        let settle = (!checked.is_empty() && rng.chance(12)).then(|| {
            let at = checked[rng.below(checked.len() as u64) as usize];
            let refund = match rng.below(4) {
                0 => 0,
                1 => cost,
                _ => rng.below(limit_max + 2),
            };
            let charged = if rng.chance(50) {
                0
            } else {
                rng.below(limit_max + 2)
            };
            settle_args(
                Settle {
                    at,
                    refund: refund as i64,
                },
                charged,
            )
        });
        let mode = match (rng.chance(15), exact, settle.is_some()) {
            (_, false, true) => "s",
            (_, true, true) => "sx",
            (true, false, _) => "p",
            (true, true, _) => "px",
            (false, false, _) => "c",
            (false, true, _) => "cx",
        };
        if mode.starts_with('c') {
            checked.push(now);
        }
        let policy = policy && settle.is_none();
        // the server clock now and then: both calls must then fall in one ms
        let clock = rng.chance(8);
        let mut args: Vec<Vec<u8>> = vec![
            mode.into(),
            match &settle {
                Some((text, _, _)) => text.clone().into_bytes(),
                None => cost.to_string().into_bytes(),
            },
            if clock {
                Vec::new()
            } else {
                now.to_string().into_bytes()
            },
        ];
        rule_args(&mut args, &rules);
        if policy {
            for (name, tier) in &tiers {
                args.push(name.clone().into_bytes());
                rule_args(&mut args, tier);
            }
        }
        let with = |log: &str, i: usize| -> Vec<String> {
            match (policy, scoped) {
                (true, true) => vec![
                    log.to_owned(),
                    keys.records[i].clone(),
                    keys.scoped[i].clone(),
                ],
                (true, false) => vec![log.to_owned(), keys.records[i].clone()],
                _ => vec![log.to_owned()],
            }
        };
        let tier_rules: Vec<(&[u8], Rules)> = tiers
            .iter()
            .filter(|_| policy)
            .map(|(name, tier)| (name.as_bytes(), engine_rules(tier)))
            .collect();
        let packed = match &settle {
            Some((_, charged, settle)) => pack_settle(
                mode.ends_with('x'),
                *charged,
                *settle,
                (!clock).then_some(now as u64),
                &engine_rules(&rules),
            ),
            None => pack_check(
                mode.starts_with('c'),
                mode.ends_with('x'),
                cost,
                (!clock).then_some(now as u64),
                &engine_rules(&rules),
                tier_rules.iter().map(|(name, tier)| (*name, tier)),
            ),
        };
        let ks = with(&keys.script, 0);
        let km = with(&keys.module, 1);
        let kx = with(&keys.mixed, 2);
        let through_module = rng.chance(50);
        let before = server_ms(con);
        let a = call(con, sha, false, &refs(&ks), &args);
        let b = match rng.chance(50) {
            true => call_packed(con, &refs(&km), &packed),
            false => call(con, sha, true, &refs(&km), &args),
        };
        let x = call(con, sha, through_module, &refs(&kx), &args);
        widest = widest.max(server_ms(con).saturating_sub(before) as i64 + 1);
        let at = format!(
            "seed {seed} step {step}: args {:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
        );
        if clock && server_ms(con) != before {
            // a millisecond passed between the calls: start the keys again alike
            copy(con, &keys.script, &keys.module);
            copy(con, &keys.script, &keys.mixed);
            stats[3] += 1;
            continue;
        }
        let (sa, sb, sx) = (
            bytes(con, &keys.script),
            bytes(con, &keys.module),
            bytes(con, &keys.mixed),
        );
        let (ta, tb, tx) = (
            expires_at(con, &keys.script),
            expires_at(con, &keys.module),
            expires_at(con, &keys.mixed),
        );
        // a key may have expired while the step ran (a machine stalled past
        // the margin above), or one the step wrote (a log's TTL is a second
        // at least: once, in CI, the script's key was gone when read, the
        // module's, written after it, not): no comparison; the keys start again
        let read_at = server_ms(con);
        if read_at.saturating_sub(before) >= MIN_TTL_MS - 100
            || ends
                .iter()
                .any(|&end| end >= 0 && end <= read_at as i64 + 50)
        {
            delete(con, &keys);
            stats[3] += 1;
            continue;
        }
        match (&a, &b) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "replies differ at {at}"),
            (Err(_), Err(_)) => {}
            _ => panic!("one failed at {at}: script {a:?}, module {b:?}"),
        }
        assert_eq!(a.is_ok(), x.is_ok(), "the mixed key differs at {at}");
        if let (Ok(a), Ok(x)) = (&a, &x) {
            assert_eq!(a, x, "the mixed key's reply differs at {at}");
        }
        assert_eq!(sa, sb, "stored bytes differ at {at}");
        assert_eq!(sa, sx, "the mixed key's bytes differ at {at}");
        if std::env::var("RK_DIFF_DEBUG").is_ok() {
            let pt = |con: &mut redis::Connection, k: &str| -> i64 {
                redis::cmd("PTTL").arg(k).query(con).unwrap()
            };
            eprintln!(
                "step {step} now {now} cost {cost} {mode} pttl {} {} len {:?} reply {:?}",
                pt(con, &keys.script),
                pt(con, &keys.module),
                sa.as_ref().map(|v| v.len()),
                a
            );
        }
        assert!(
            same_ttl(ta, tb, widest),
            "TTLs differ at {at}: {ta} {tb} (calls up to {widest} ms apart)"
        );
        assert!(
            same_ttl(ta, tx, widest),
            "the mixed key's TTL differs at {at}: {ta} {tx} (calls up to {widest} ms apart)"
        );
        stats[0] += 1;
        if let Ok(Value::Array(items)) = &a {
            if items.get(1) == Some(&Value::Int(0)) {
                stats[1] += 1;
            }
            if matches!(items.get(2), Some(Value::Int(1 | 2))) {
                stats[2] += 1;
            }
            if matches!(items.get(3), Some(Value::BulkString(d)) if !d.is_empty() && items.get(2) == Some(&Value::Int(0)))
            {
                stats[4] += 1;
            }
        }
    }
    let _: () = redis::cmd("DEL")
        .arg(&keys.script)
        .arg(&keys.module)
        .arg(&keys.mixed)
        .arg(&keys.records)
        .query(con)
        .unwrap();
}

/// A connection to the test Redis that has the module, and the script's SHA-1 there.
fn module_redis() -> Option<(redis::Connection, String)> {
    let url = common::configured("RATEKEEPER_TEST_REDIS_MODULE")?;
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    let sha = loaded(&mut con, REDIS_SCRIPT);
    Some((con, sha))
}

/// Loads a script's `source` into the server; its SHA-1.
pub(crate) fn loaded(con: &mut redis::Connection, source: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query(con)
        .unwrap()
}

#[test]
fn the_script_and_the_module_give_equal_replies_and_bytes() {
    let Some((mut con, sha)) = module_redis() else {
        return;
    };
    // compared steps, denials, listed answers, clock steps started again,
    // steps a tier or an override decided
    let mut stats = [0u64; 5];
    let seeds = match std::env::var("RK_DIFF_DEBUG") {
        Ok(seed) => seed.parse().unwrap()..=seed.parse().unwrap(),
        Err(_) => 1..=250,
    };
    for seed in seeds {
        run_sequence(&mut con, &sha, seed, &mut stats);
    }
    eprintln!(
        "differential: {} steps compared ({} denied, {} listed, {} by a tier or an override), \
         {} steps not compared (a clock step split by a ms, or a key expiring in a stalled step)",
        stats[0], stats[1], stats[2], stats[4], stats[3]
    );
    assert!(
        stats[0] > 12_000 && stats[1] > 1_000 && stats[2] > 100 && stats[4] > 500,
        "{stats:?}"
    );
}

/// Logs that are not ratekeeper's (another program's string, a truncated
/// log): the module answers as the script does, or, where the script fails,
/// with an error too; Redis stays up.
#[test]
fn foreign_and_damaged_logs_are_answered_alike() {
    let Some((mut con, sha)) = module_redis() else {
        return;
    };
    let tag = common::unique_prefix();
    let (ka, kb) = (format!("{tag}:a"), format!("{tag}:b"));
    let mut rng = Rng(77);
    let rules = vec![(5, 1_000), (50, 60_000)];
    let mut compared = 0;
    for round in 0..300 {
        // a valid log, grown for a while, then cut or overwritten
        let _: () = redis::cmd("DEL").arg(&ka).arg(&kb).query(&mut con).unwrap();
        let mut args: Vec<Vec<u8>> = vec!["c".into(), "1".into(), "1000".into()];
        rule_args(&mut args, &rules);
        for _ in 0..rng.below(60) {
            call(&mut con, &sha, false, &[&ka], &args).unwrap();
        }
        // now and then a check that can never pass (a denied rebuild)
        if rng.chance(30) {
            args[1] = b"99".to_vec();
        }
        let mut stored = bytes(&mut con, &ka).unwrap_or_default();
        match round % 3 {
            0 => stored.truncate(rng.below(stored.len() as u64 + 1) as usize),
            1 => {
                stored = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
            }
            _ => {
                for _ in 0..3 {
                    if !stored.is_empty() {
                        let i = rng.below(stored.len() as u64) as usize;
                        stored[i] = rng.next() as u8;
                    }
                }
            }
        }
        for key in [&ka, &kb] {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg(&stored)
                .query(&mut con)
                .unwrap();
        }
        let a = call(&mut con, &sha, false, &[&ka], &args);
        let b = call(&mut con, &sha, true, &[&kb], &args);
        match (&a, &b) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "round {round}: replies differ");
                assert_eq!(bytes(&mut con, &ka), bytes(&mut con, &kb), "round {round}");
                compared += 1;
            }
            (Err(_), Err(_)) => {}
            _ => panic!("round {round}: script {a:?}, module {b:?} on {stored:?}"),
        }
    }
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    assert!(compared > 50, "only {compared} rounds answered");
}

/// The previous release's check script (log format 4, a timestamp per unit),
/// as it shipped: `tests/cases/previous/check.lua`.
const PREVIOUS_SCRIPT: &str = include_str!("../../../tests/cases/previous/check.lua");

/// A fleet mid-upgrade on one Redis: the previous release's script writes a
/// log of its format; this release reads it with no unit lost or granted and
/// rewrites it in its own; the previous release then refuses the new log
/// with an error (its `on_error` outcome) and leaves it as it is; this
/// release, through the script and through the module, counts on.
#[test]
fn the_previous_release_and_this_one_share_a_redis() {
    for (url, module) in [
        (common::configured("RATEKEEPER_TEST_REDIS"), false),
        (common::configured("RATEKEEPER_TEST_REDIS_MODULE"), true),
    ] {
        let Some(url) = url else { continue };
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        let (previous, this) = (
            loaded(&mut con, PREVIOUS_SCRIPT),
            loaded(&mut con, REDIS_SCRIPT),
        );
        let key = format!("{}:upgrade", common::unique_prefix());
        let args = |cost: u64, now: u64| {
            let mut args: Vec<Vec<u8>> =
                vec!["c".into(), cost.to_string().into(), now.to_string().into()];
            rule_args(&mut args, &[(5, 1_000), (10, 60_000)]);
            args
        };
        let counts = |reply: &Value| -> (i64, Vec<i64>) {
            let Value::Array(items) = reply else {
                panic!("{reply:?}")
            };
            let int = |v: &Value| match v {
                Value::Int(n) => *n,
                other => panic!("{other:?}"),
            };
            (int(&items[1]), vec![int(&items[5]), int(&items[8])])
        };
        // the previous release: 2 units at 1,000 ms, 3 at 1,500
        for (cost, now) in [(2, 1_000), (3, 1_500)] {
            let reply = call(&mut con, &previous, false, &[&key], &args(cost, now)).unwrap();
            assert_eq!(counts(&reply).0, 1);
        }
        let old = bytes(&mut con, &key).unwrap();
        assert_eq!(old[0], 4, "the previous format");
        // this release reads every unit, admits 2 more, and writes its format
        let reply = call(&mut con, &this, module, &[&key], &args(2, 2_100)).unwrap();
        assert_eq!(counts(&reply), (1, vec![3, 5]), "module: {module}");
        let new = bytes(&mut con, &key).unwrap();
        assert_eq!(&new[..12], &ratekeeper_core::engine::layout::GUARD);
        // the previous release refuses it, and writes nothing
        let refused = call(&mut con, &previous, false, &[&key], &args(1, 2_200));
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(bytes(&mut con, &key).unwrap(), new);
        // the window of 60 s holds 7 units: 3 more pass, the fourth does not
        for (cost, allowed, counted) in [(3, 1, 7), (1, 0, 10)] {
            let reply = call(&mut con, &this, module, &[&key], &args(cost, 3_300)).unwrap();
            assert_eq!(counts(&reply).0, allowed);
            assert_eq!(counts(&reply).1[1], counted);
        }
    }
}
