//! `RATEKEEPER.METERS numkeys log [log ...] packed [packed ...]`: a key's
//! several meters (`meters.lua`'s call, as clients send it to the module):
//! one packed check, peek or settle per meter's log
//! ([`ratekeeper_engine::packed`]), each run by the engine, whose writes are
//! made only when every meter admits (a settle's always), so that a check
//! logs its cost on every meter or on none; answered with each meter's
//! packed reply, in order.

use crate::api::{self, reply, Arg, Ctx, Key};
use crate::check::{apply, check_log, send};
use crate::guard::{self, Failure};
use ratekeeper_engine::command::{number, CheckedReply, MAX_RULES};
use ratekeeper_engine::packed::parse_packed;
use ratekeeper_engine::{Scratch, Seen, Write};
use std::os::raw::c_int;

/// The command's entry point.
pub extern "C" fn command(ctx: Ctx, argv: *mut Arg, argc: c_int) -> c_int {
    guard::entry(ctx, argv, argc, run)
}

/// One meter's log, checked, its writes held until every meter is.
struct Checked {
    log: Key,
    stored_len: usize,
    seen: Seen,
    write: Write,
}

fn run(ctx: Ctx, argv: &[Arg]) -> Result<(), Failure> {
    let Some(&numkeys) = argv.get(1) else {
        return Err(wrong_arity());
    };
    let meters = number(api::bytes(numkeys)?, "numkeys", 1, MAX_RULES as i64)? as usize;
    if argv.len() != 2 + 2 * meters {
        return Err(wrong_arity());
    }
    let clock = api::clock_ms()?;
    let mut checked = Vec::with_capacity(meters);
    let mut settles = false;
    for i in 0..meters {
        let mut scratch = Scratch::default();
        let parsed = parse_packed(api::bytes(argv[2 + meters + i])?, &mut scratch)?;
        settles |= parsed.settle.is_some();
        let log = Key::open(ctx, argv[2 + i], parsed.writing)?;
        let now = parsed.now.unwrap_or(clock);
        let (stored_len, seen, write) =
            check_log(&log, &parsed, &parsed.rules, (now, clock), &mut scratch)?;
        checked.push(Checked {
            log,
            stored_len,
            seen,
            write,
        });
    }
    if settles || checked.iter().all(|c| c.seen.allowed) {
        for c in &mut checked {
            apply(ctx, &mut c.log, c.stored_len, &c.write, clock)?;
        }
    }
    reply::array(ctx, meters)?;
    for c in &checked {
        let answer = CheckedReply {
            seen: &c.seen,
            detail: b"",
        };
        send(ctx, true, &answer)?;
    }
    Ok(())
}

fn wrong_arity() -> Failure {
    Failure::Arg(ratekeeper_engine::ArgError(
        "wrong number of arguments: RATEKEEPER.METERS numkeys log [log ...] packed [packed ...] (one packed check per log)"
            .into(),
    ))
}
