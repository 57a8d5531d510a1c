//! `RATEKEEPER.LEASES 1 leases r|e|l id lease-ms now`: `leases.lua`'s call,
//! with its key, arguments and reply: a lease released ("r") or extended
//! ("e", to lapse `lease-ms` from now), answered with its lapse time (the
//! one it had, or its new one; 0 when it was not held), or the live leases
//! listed ("l": id, lapse time, ...), read and changed in place and sent to
//! replicas and the AOF as the script's commands. A lease that lapsed is
//! gone: releasing or extending it changes nothing (and drops its entry).

use crate::api::{self, reply, Arg, Ctx, Key, Kind, ScoresFrom};
use crate::guard::{self, Failure};
use crate::hold::MOST_LEASE_MS;
use ratekeeper_engine::command::number;
use ratekeeper_engine::ArgError;
use std::os::raw::c_int;

/// The command's entry point.
pub extern "C" fn command(ctx: Ctx, argv: *mut Arg, argc: c_int) -> c_int {
    guard::entry(ctx, argv, argc, run)
}

fn run(ctx: Ctx, argv: &[Arg]) -> Result<(), Failure> {
    let arg = |i: usize| api::bytes(argv[i]);
    if argv.len() != 7 || number(arg(1)?, "numkeys", 1, 1).is_err() {
        return Err(bad(
            "wrong number of arguments: RATEKEEPER.LEASES 1 leases r|e|l id lease-ms now",
        ));
    }
    let (call, id) = (arg(3)?, arg(4)?);
    let lease_ms = match call {
        b"e" => number(arg(5)?, "the lease time", 1, MOST_LEASE_MS)?,
        b"r" | b"l" => 0,
        _ => return Err(bad("give r (release), e (extend) or l (list)")),
    };
    let clock = api::clock_ms()?;
    let now = match arg(6)? {
        b"" => clock,
        now => number(now, "now", 0, i64::MAX)?,
    };
    let mut key = Key::open(ctx, argv[2], call != b"l")?;
    if !matches!(key.kind()?, Kind::Empty | Kind::Sorted) {
        return Err(Failure::WrongType);
    }
    if call == b"l" {
        let live = key.scored(ScoresFrom::Above(now as f64), f64::INFINITY)?;
        reply::array(ctx, 2 * live.len())?;
        for (member, lapse) in &live {
            reply::bulk(ctx, member)?;
            reply::bulk(ctx, (*lapse as i64).to_string().as_bytes())?;
        }
        return Ok(());
    }
    let lapse = match key.score_of(id)? {
        None => 0,
        Some(lapse) if lapse as i64 <= now => {
            key.zrem(id)?;
            0
        }
        Some(lapse) if call == b"r" => {
            key.zrem(id)?;
            lapse as i64
        }
        Some(_) => {
            let until = now + lease_ms;
            key.zadd(until, id)?;
            key.live_at_least(lease_ms, clock)?;
            until
        }
    };
    Ok(reply::int(ctx, lapse)?)
}

fn bad(text: &str) -> Failure {
    Failure::Arg(ArgError(text.into()))
}
