//! `RATEKEEPER.HOLD numkeys leases [log [record [scope-record]]] h|q limit
//! lease-ms id now [check]`: `hold.lua`'s call, with its keys, arguments
//! and reply (the check's arguments as the check script takes them, or, as
//! clients send them, packed into one, the whole reply then packed too): a
//! key's live leases counted and its rates checked by the engine, the
//! check's writes held back, and, when a slot is free and every rate
//! admits, the writes made and a lease taken, in one step. The leases are a
//! sorted set (lease id scored by the time it lapses at, and [`ANCHOR`]),
//! read and changed in place ([`crate::api`]), sent to replicas and the AOF
//! as the script's commands.

use crate::api::{self, reply, Arg, Ctx, Key, Kind};
use crate::check::{apply, check_args, check_log, kept, send, with_scratch, with_selected};
use crate::guard::{self, Failure};
use ratekeeper_engine::command::{listed_reply, number, CheckedReply, Item, Reply, Selected};
use ratekeeper_engine::{ArgError, Scratch};
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
    let Some(&numkeys) = argv.get(1) else {
        return Err(wrong_arity());
    };
    let numkeys = number(api::bytes(numkeys)?, "numkeys", 1, 4)? as usize;
    let rest = argv.get(2 + numkeys..).unwrap_or_default();
    let rates = numkeys > 1;
    if rest.len() < 5 || rates == (rest.len() == 5) {
        return Err(wrong_arity());
    }
    let mut own: [&[u8]; 5] = [&[]; 5];
    for (arg, given) in own.iter_mut().zip(rest) {
        *arg = api::bytes(*given)?;
    }
    let hold = Hold::parse(&own)?;
    let clock = api::clock_ms()?;
    if !rates {
        let now = hold.now.unwrap_or(clock);
        let leased = take(ctx, argv[2], &hold, (now, clock), true, || Ok(()))?;
        reply::array(ctx, 5)?;
        reply::int(ctx, 0)?;
        return answer(ctx, &leased, now);
    }
    with_scratch(|scratch| hold_checked(ctx, argv, numkeys, &hold, clock, scratch))
}

/// A hold whose rule set has rates: the key's leases (`argv[2]`) and its
/// check (the keys after them, and the arguments after the hold's own).
fn hold_checked(
    ctx: Ctx,
    argv: &[Arg],
    numkeys: usize,
    hold: &Hold<'_>,
    clock: i64,
    scratch: &mut Scratch,
) -> Result<(), Failure> {
    // (a packed check is answered with the check's reply and the lease's
    // numbers packed into one string)
    let (parsed, packed) = check_args(&argv[2 + numkeys + 5..], scratch)?;
    let now = parsed.now.unwrap_or(clock);
    let keys = &argv[3..2 + numkeys];
    let outcome = with_selected(ctx, keys, &parsed, now, |selected| {
        let (rules, detail) = match selected {
            Selected::Listed {
                kind,
                reason,
                until,
            } => {
                // a listed key takes no lease
                let none = Leased {
                    live: 0,
                    taken: false,
                    soonest: -1,
                };
                let listed = listed_reply(now, kind, reason, until);
                return held(ctx, packed, &listed[..], &none, now);
            }
            Selected::Rules { rules, detail } => (rules, detail),
        };
        let mut log = Key::open(ctx, keys[0], parsed.writing)?;
        let (stored_len, seen, write) = check_log(&log, &parsed, &rules, (now, clock), scratch)?;
        // the check's writes wait for the lease: a hold refused for want
        // of a slot logs nothing
        let leased = take(ctx, argv[2], hold, (seen.now, clock), seen.allowed, || {
            apply(ctx, &mut log, stored_len, &write, clock)
        })?;
        let checked = CheckedReply {
            seen: &seen,
            detail: &detail,
        };
        held(ctx, packed, &checked, &leased, seen.now)?;
        kept(scratch, seen, write, rules);
        Ok(())
    });
    scratch.keep_args(parsed);
    outcome
}

/// The hold's reply: `{check's reply, live, taken, soonest, now}`, or, when
/// the check came packed, the check's reply and those four numbers packed
/// into one string (see [`ratekeeper_engine::packed`]).
fn held<'a, R: Reply<'a> + ?Sized>(
    ctx: Ctx,
    packed: bool,
    check: &R,
    leased: &Leased,
    now: i64,
) -> Result<(), Failure> {
    if packed {
        return send(ctx, true, &WithLease { check, leased, now });
    }
    reply::array(ctx, 5)?;
    send(ctx, false, check)?;
    answer(ctx, leased, now)
}

/// A check's reply followed by the lease step's four numbers, as one reply.
struct WithLease<'r, R: ?Sized> {
    check: &'r R,
    leased: &'r Leased,
    now: i64,
}

impl<'a, R: Reply<'a> + ?Sized> Reply<'a> for WithLease<'_, R> {
    fn len(&self) -> usize {
        self.check.len() + 4
    }

    fn each(&self, mut put: impl FnMut(Item<'a>)) {
        self.check.each(&mut put);
        for n in self.leased.numbers(self.now) {
            put(Item::Int(n));
        }
    }
}

/// The member a key's leases keep beside them (`""`, scored -1: never
/// live, and never lapsed, as lapsed leases are those scored from 0 to
/// now), so that the sorted set is not made on every hold and deleted on
/// every release; it goes with the key's expiry. (Made with the set here;
/// `hold.lua` sets it with every lease it takes.)
pub const ANCHOR: &[u8] = b"";
/// [`ANCHOR`]'s score.
pub const ANCHOR_SCORE: i64 = -1;

/// A lease's member in the sorted set: `<now ms>-<id>`, held since `now`.
fn lease_member(now: i64, id: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut member = Vec::with_capacity(21 + id.len());
    // (a Vec takes any write)
    let _ = write!(member, "{now}-");
    member.extend_from_slice(id);
    member
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
    let kind = key.kind()?;
    if !matches!(kind, Kind::Empty | Kind::Sorted) {
        return Err(Failure::WrongType);
    }
    let (live, soonest) = key.count_above(now as f64)?;
    let mut soonest = soonest.map_or(-1, |score| score as i64);
    let mut taken = false;
    if hold.taking && admitted && live < hold.limit {
        write()?;
        key.zrem_lapsed(now)?;
        if kind == Kind::Empty {
            key.zadd(ANCHOR_SCORE, ANCHOR)?;
        }
        let until = now + hold.lease_ms;
        key.zadd(until, &lease_member(now, hold.id))?;
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
    for n in leased.numbers(now) {
        reply::int(ctx, n)?;
    }
    Ok(())
}

impl Leased {
    /// The reply's four numbers: live, taken (0/1), soonest, `now`.
    fn numbers(&self, now: i64) -> [i64; 4] {
        [self.live, i64::from(self.taken), self.soonest, now]
    }
}

fn bad(text: &str) -> Failure {
    Failure::Arg(ArgError(text.into()))
}

fn wrong_arity() -> Failure {
    bad("wrong number of arguments: RATEKEEPER.HOLD numkeys leases [log [record [scope-record]]] h|q limit lease-ms id now [packed-check|(c|p cost now rules...)]")
}
