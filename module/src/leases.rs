//! `RATEKEEPER.LEASES 1 leases r|e|l id lease-ms now`: `leases.lua`'s call,
//! with its key, arguments and reply: a lease released ("r") or extended
//! ("e", to lapse `lease-ms` from now), or the live leases listed ("l"),
//! read and changed in place and sent to replicas and the AOF as the
//! script's commands. A lease that lapsed is gone: releasing or extending
//! it changes nothing (and drops its entry).

use crate::api::{self, reply, Arg, Ctx, Key, Kind};
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
    let args = argv
        .iter()
        .map(|a| api::bytes(*a))
        .collect::<Result<Vec<&[u8]>, _>>()?;
    if args.len() != 7 || number(args[1], "numkeys", 1, 1).is_err() {
        return Err(bad(
            "wrong number of arguments: RATEKEEPER.LEASES 1 leases r|e|l id lease-ms now",
        ));
    }
    let (call, id) = (args[3], args[4]);
    let lease_ms = match call {
        b"e" => number(args[5], "the lease time", 1, MOST_LEASE_MS)?,
        b"r" | b"l" => 0,
        _ => return Err(bad("give r (release), e (extend) or l (list)")),
    };
    let clock = api::clock_ms()?;
    let now = match args[6] {
        b"" => clock,
        now => number(now, "now", 0, i64::MAX)?,
    };
    let mut key = Key::open(ctx, argv[2], call != b"l")?;
    if !matches!(key.kind()?, Kind::Empty | Kind::Sorted) {
        return Err(Failure::WrongType);
    }
    let answer: Vec<Vec<u8>> = match (call, key.score_of(id)?) {
        (b"l", _) => key
            .scored(Some(now as f64), f64::INFINITY)?
            .into_iter()
            .flat_map(|(member, score)| [member, whole(score)])
            .collect(),
        (_, None) => Vec::new(),
        (_, Some(lapse)) if lapse as i64 <= now => {
            key.zrem(id)?;
            Vec::new()
        }
        (b"r", Some(lapse)) => {
            key.zrem(id)?;
            vec![id.to_vec(), whole(lapse)]
        }
        (_, Some(_)) => {
            let until = now + lease_ms;
            key.zadd(until, id)?;
            key.live_at_least(lease_ms, clock)?;
            vec![id.to_vec(), until.to_string().into_bytes()]
        }
    };
    reply::array(ctx, answer.len())?;
    for item in &answer {
        reply::bulk(ctx, item)?;
    }
    Ok(())
}

/// A score (a whole number of ms) as the scripts write it.
fn whole(score: f64) -> Vec<u8> {
    (score as i64).to_string().into_bytes()
}

fn bad(text: &str) -> Failure {
    Failure::Arg(ArgError(text.into()))
}
