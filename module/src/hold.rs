//! `RATEKEEPER.HOLD numkeys leases [log [record [scope-record]]] h|q limit
//! lease-ms id now [check]`: `hold.lua`'s call, with its keys, arguments
//! and reply (the check's arguments as the check script takes them, or, as
//! clients send them, packed into one, the check's reply then packed too):
//! a key's live leases counted and its rates checked by the engine, the
//! check's writes held back, and, when a slot is free and every rate
//! admits, the writes made and a lease taken, in one step. The leases are a
//! sorted set (lease id scored by the time it lapses at), read and changed
//! in place ([`crate::api`]), sent to replicas and the AOF as the script's
//! commands.

use crate::api::{self, reply, Arg, Ctx, Key, Kind};
use crate::check::{apply, check_log, send, with_selected};
use crate::guard::{self, Failure};
use ratekeeper_engine::command::{listed_reply, number, CheckedReply, Selected};
use ratekeeper_engine::packed::parse_packed;
use ratekeeper_engine::{parse_check, ArgError, Scratch};
use std::os::raw::c_int;

/// The longest lease (a day, in ms), as the client bounds it.
pub const MOST_LEASE_MS: i64 = 86_400_000;
/// The most slots an in-flight rule has, as the client bounds it.
const MOST_SLOTS: i64 = 1_000_000;
/// The longest random part of a lease id.
const MOST_ID: usize = 64;

/// The command's entry point.
pub extern "C" fn command(ctx: Ctx, argv: *mut Arg, argc: c_int) -> c_int {
    guard::entry(ctx, argv, argc, run)
}

/// The hold's own arguments.
struct Hold<'a> {
    /// "h": take a lease when a slot is free and the rates admit; "q": peek.
    taking: bool,
    limit: i64,
    lease_ms: i64,
    id: &'a [u8],
    now: Option<i64>,
}

impl<'a> Hold<'a> {
    fn parse(args: &[&'a [u8]]) -> Result<Hold<'a>, Failure> {
        let taking = match args[0] {
            b"h" => true,
            b"q" => false,
            _ => return Err(bad("give h (hold) or q (peek)")),
        };
        let id = args[3];
        if id.is_empty() || id.len() > MOST_ID {
            return Err(bad("the lease id must be 1 to 64 bytes"));
        }
        Ok(Hold {
            taking,
            limit: number(args[1], "the in-flight limit", 1, MOST_SLOTS)?,
            lease_ms: number(args[2], "the lease time", 1, MOST_LEASE_MS)?,
            id,
            now: match args[4] {
                b"" => None,
                now => Some(number(now, "now", 0, i64::MAX)?),
            },
        })
    }
}

/// What the lease step found and did: the live leases before it, whether
/// it took one, and when the soonest live lease lapses (-1: none).
struct Leased {
    live: i64,
    taken: bool,
    soonest: i64,
}

fn run(ctx: Ctx, argv: &[Arg]) -> Result<(), Failure> {
    let args = argv
        .iter()
        .map(|a| api::bytes(*a))
        .collect::<Result<Vec<&[u8]>, _>>()?;
    let Some(numkeys) = args.get(1) else {
        return Err(wrong_arity());
    };
    let numkeys = number(numkeys, "numkeys", 1, 4)? as usize;
    let rest = args.get(2 + numkeys..).unwrap_or_default();
    let rates = numkeys > 1;
    if rest.len() < 5 || rates == (rest.len() == 5) {
        return Err(wrong_arity());
    }
    let hold = Hold::parse(&rest[..5])?;
    let clock = api::clock_ms()?;
    if !rates {
        let now = hold.now.unwrap_or(clock);
        let leased = take(ctx, argv[2], &hold, (now, clock), true, || Ok(()))?;
        reply::array(ctx, 5)?;
        reply::int(ctx, 0)?;
        return answer(ctx, &leased, now);
    }
    let check = &rest[5..];
    let packed = check.len() == 1 && check[0] != b"c" && check[0] != b"p";
    let mut scratch = Scratch::default();
    let parsed = match packed {
        true => parse_packed(check[0], &mut scratch)?,
        false => parse_check(check)?,
    };
    let now = parsed.now.unwrap_or(clock);
    let keys = &argv[3..2 + numkeys];
    with_selected(ctx, keys, &parsed, now, |selected| {
        let (rules, detail) = match selected {
            Selected::Listed {
                kind,
                reason,
                until,
            } => {
                // a listed key takes no lease
                reply::array(ctx, 5)?;
                send(ctx, packed, &listed_reply(now, kind, reason, until)[..])?;
                let none = Leased {
                    live: 0,
                    taken: false,
                    soonest: -1,
                };
                return answer(ctx, &none, now);
            }
            Selected::Rules { rules, detail } => (rules, detail),
        };
        let mut log = Key::open(ctx, keys[0], parsed.writing)?;
        let (stored_len, seen, write) =
            check_log(&log, &parsed, &rules, (now, clock), &mut scratch)?;
        // the check's writes wait for the lease: a hold refused for want
        // of a slot logs nothing
        let leased = take(ctx, argv[2], &hold, (seen.now, clock), seen.allowed, || {
            apply(ctx, &mut log, stored_len, &write, clock)
        })?;
        reply::array(ctx, 5)?;
        send(
            ctx,
            packed,
            &CheckedReply {
                seen: &seen,
                detail: &detail,
            },
        )?;
        answer(ctx, &leased, seen.now)
    })
}

/// The lease step at `now`: counts the live leases and, when taking, the
/// rates `admitted` and a slot is free, makes the check's writes (`write`),
/// drops the lapsed leases and takes one lapsing `lease_ms` from now, the
/// sorted set kept at least that long (from `clock`).
fn take(
    ctx: Ctx,
    leases: Arg,
    hold: &Hold<'_>,
    (now, clock): (i64, i64),
    admitted: bool,
    write: impl FnOnce() -> Result<(), Failure>,
) -> Result<Leased, Failure> {
    let mut key = Key::open(ctx, leases, hold.taking)?;
    if !matches!(key.kind()?, Kind::Empty | Kind::Sorted) {
        return Err(Failure::WrongType);
    }
    let (live, soonest) = key.count_above(now as f64)?;
    let mut soonest = soonest.map_or(-1, |score| score as i64);
    let mut taken = false;
    if hold.taking && admitted && live < hold.limit {
        write()?;
        key.zrem_upto(now)?;
        let until = now + hold.lease_ms;
        let mut member = format!("{now}-").into_bytes();
        member.extend_from_slice(hold.id);
        key.zadd(until, &member)?;
        key.live_at_least(hold.lease_ms, clock)?;
        taken = true;
        if soonest < 0 {
            soonest = until;
        }
    }
    Ok(Leased {
        live,
        taken,
        soonest,
    })
}

/// The reply's four numbers after the check's reply.
fn answer(ctx: Ctx, leased: &Leased, now: i64) -> Result<(), Failure> {
    for n in [leased.live, i64::from(leased.taken), leased.soonest, now] {
        reply::int(ctx, n)?;
    }
    Ok(())
}

fn bad(text: &str) -> Failure {
    Failure::Arg(ArgError(text.into()))
}

fn wrong_arity() -> Failure {
    bad("wrong number of arguments: RATEKEEPER.HOLD numkeys leases [log [record [scope-record]]] h|q limit lease-ms id now [packed-check|(c|p cost now rules...)]")
}
