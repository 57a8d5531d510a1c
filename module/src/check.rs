//! `RATEKEEPER.CHECK numkeys log [record [scope-record]] ARGV...`: the check script's call
//! (`EVALSHA <sha> numkeys ...`) with the same keys, arguments, reply and
//! stored bytes, run by the engine inside Redis; or, as clients send it,
//! `RATEKEEPER.CHECK numkeys keys... packed`: the same arguments as one
//! string, answered with the same reply as one string
//! ([`ratekeeper_engine::packed`]).

use crate::api::{self, reply, Arg, Ctx, Key, Kind};
use crate::guard::{self, Failure};
use ratekeeper_engine::command::{
    listed_reply, number, CheckArgs, CheckedReply, Item, Reply, Selected,
};
use ratekeeper_engine::packed::{pack_reply, parse_packed};
use ratekeeper_engine::{
    check_in, parse_check, select, Check, Record, Rules, Scratch, Seen, Write,
};
use std::os::raw::c_int;

/// The command's entry point.
pub extern "C" fn command(ctx: Ctx, argv: *mut Arg, argc: c_int) -> c_int {
    guard::entry(ctx, argv, argc, |ctx, argv| {
        with_scratch(|scratch| run(ctx, argv, scratch))
    })
}

/// Runs `body` with the buffers checks are made in, kept between commands
/// (a check or a hold's check allocates none of them again).
pub fn with_scratch<R>(body: impl FnOnce(&mut Scratch) -> R) -> R {
    let mut scratch = SCRATCH.take();
    let outcome = body(&mut scratch);
    SCRATCH.set(scratch);
    outcome
}

thread_local! {
    /// The buffers checks are made in, kept between them so that a check
    /// allocates none (commands run on Redis's main thread).
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
}

fn run(ctx: Ctx, argv: &[Arg], scratch: &mut Scratch) -> Result<(), Failure> {
    let Some(&numkeys) = argv.get(1) else {
        return Err(wrong_arity());
    };
    let numkeys = number(api::bytes(numkeys)?, "numkeys", 1, 3)? as usize;
    let Some(after_keys) = argv.get(2 + numkeys..).filter(|rest| !rest.is_empty()) else {
        return Err(wrong_arity());
    };
    let (parsed, packed) = check_args(after_keys, scratch)?;
    let clock = api::clock_ms()?;
    let now = parsed.now.unwrap_or(clock);
    let outcome = with_selected(ctx, &argv[2..2 + numkeys], &parsed, now, |selected| {
        let (rules, detail) = match selected {
            Selected::Listed {
                kind,
                reason,
                until,
            } => return send(ctx, packed, &listed_reply(now, kind, reason, until)[..]),
            Selected::Rules { rules, detail } => (rules, detail),
        };
        let mut log = Key::open(ctx, argv[2], parsed.writing)?;
        let (stored_len, seen, write) = check_log(&log, &parsed, &rules, (now, clock), scratch)?;
        apply(ctx, &mut log, stored_len, &write, clock)?;
        let reply = CheckedReply {
            seen: &seen,
            detail: &detail,
        };
        send(ctx, packed, &reply)?;
        kept(scratch, seen, write, rules);
        Ok(())
    });
    scratch.keep_args(parsed);
    outcome
}

/// A check's arguments (at least one): the script's (its mode first), or,
/// as clients send them, one packed argument (answered packed: the bool).
pub fn check_args<'a>(
    args: &[Arg],
    scratch: &mut Scratch,
) -> Result<(CheckArgs<'a>, bool), Failure> {
    let first = api::bytes(args[0])?;
    // one argument, not the script's mode: a packed check
    let packed = args.len() == 1 && first != b"c" && first != b"p";
    let parsed = match packed {
        true => parse_packed(first, scratch)?,
        false => parse_check(
            &args
                .iter()
                .map(|a| api::bytes(*a))
                .collect::<Result<Vec<&[u8]>, _>>()?,
        )?,
    };
    Ok((parsed, packed))
}

/// Hands a check's buffers back to `scratch` (its results, what it wrote,
/// rules it made), for the next check.
pub fn kept(scratch: &mut Scratch, seen: Seen, write: Write, rules: std::borrow::Cow<'_, Rules>) {
    scratch.keep(seen, write);
    if let std::borrow::Cow::Owned(rules) = rules {
        scratch.keep_rules(rules);
    }
}

/// Gives `body` what a check of `keys` (its log, then the key's record and
/// the record of the bans it earned in the check's scope, when given) at
/// `now` comes to by the records: the key's listing, or the rules it is
/// checked against (the caller's, a tier's or an override) and what the
/// reply's detail says of them.
pub fn with_selected<R>(
    ctx: Ctx,
    keys: &[Arg],
    parsed: &CheckArgs<'_>,
    now: i64,
    body: impl FnOnce(Selected<'_>) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let open = |at: usize| -> Result<Option<Key>, Failure> {
        keys.get(at)
            .map(|name| Key::open(ctx, *name, false))
            .transpose()
            .map_err(Failure::from)
    };
    let (record_key, scope_key) = (open(1)?, open(2)?);
    let read = |key: &Option<Key>| -> Result<_, Failure> {
        match key {
            Some(key) => match key.kind()? {
                Kind::Empty => Ok(None),
                Kind::Hash => Ok(Some(key.record_fields()?)),
                _ => Err(Failure::WrongType),
            },
            None => Ok(None),
        }
    };
    let (fields, scope_fields) = (read(&record_key)?, read(&scope_key)?);
    let scope_block = match &scope_fields {
        Some(f) => f.get(1)?,
        None => None,
    };
    let field = |i: usize| match &fields {
        Some(f) => f.get(i),
        None => Ok(None),
    };
    let record = match fields.is_some() || scope_block.is_some() {
        true => Some(Record {
            safe: field(0)?,
            block: field(1)?,
            tier: field(2)?,
            overrides: field(3)?,
            scope_block,
        }),
        false => None,
    };
    body(select(
        &parsed.rules,
        parsed.tier_rules(),
        record.as_ref(),
        now,
    )?)
}

/// The engine's check of `log` against `rules` at `now` (the server's
/// `clock` read once for the call), as `parsed` asks: the bytes the log
/// held, what the check saw, and what it is to write ([`apply`]).
pub fn check_log(
    log: &Key,
    parsed: &CheckArgs<'_>,
    rules: &Rules,
    (now, clock): (i64, i64),
    scratch: &mut Scratch,
) -> Result<(usize, Seen, Write), Failure> {
    let stored = stored(log)?;
    let (seen, write) = check_in(
        Check {
            stored,
            rules,
            cost: parsed.cost,
            now,
            clock: parsed.now.is_none().then_some(clock),
            writing: parsed.writing,
            exact: parsed.exact,
            settle: parsed.settle,
        },
        scratch,
    )?;
    Ok((stored.len(), seen, write))
}

/// The bytes a log key holds (none when it is empty), or the error of a
/// key of another type.
pub fn stored(log: &Key) -> Result<&[u8], Failure> {
    match log.kind()? {
        Kind::Empty => Ok(&[]),
        Kind::Text => Ok(log.bytes()?),
        _ => Err(Failure::WrongType),
    }
}

fn wrong_arity() -> Failure {
    Failure::Arg(ratekeeper_engine::ArgError(
        "wrong number of arguments: RATEKEEPER.CHECK numkeys log [record [scope-record]] packed-check|(c|p cost now rules...)"
            .into(),
    ))
}

/// The widest span of a log one `SETRANGE` sends to replicas and the AOF in
/// place of a check's separate ranges: a command replicated alone needs no
/// MULTI/EXEC around it, which costs Redis more than the copy of up to 1 KB
/// (the header and the newest unit of a log that holds fewer than ~190 units).
const MERGED_SPAN: usize = 1024;

/// Writes what the check logged to the log of `stored_len` bytes, and sends
/// the same effects (plain string commands, with absolute expiry times) to
/// replicas and the AOF: the ranges written as one `SETRANGE` when they lie
/// within [`MERGED_SPAN`], else one each.
pub fn apply(
    ctx: Ctx,
    log: &mut Key,
    stored_len: usize,
    write: &Write,
    clock: i64,
) -> Result<(), Failure> {
    match write {
        Write::Nothing => {}
        Write::Patch { edits, ttl_ms } => {
            let needed = edits.iter().map(|(at, b)| at + b.len()).max().unwrap_or(0);
            if stored_len < needed {
                log.truncate(needed)?;
            }
            let name = log.name();
            let buffer = log.bytes_mut()?;
            for (at, bytes) in edits.iter() {
                buffer[at..at + bytes.len()].copy_from_slice(bytes);
            }
            let start = edits.iter().map(|(at, _)| at).min().unwrap_or(0);
            if needed == start {
                // nothing written: only the expiry, below
            } else if needed - start <= MERGED_SPAN {
                // (the bytes between the ranges are the replicas' already)
                api::replicate_setrange(ctx, name, start, &buffer[start..needed])?;
            } else {
                for (at, bytes) in edits.iter() {
                    api::replicate_setrange(ctx, name, at, bytes)?;
                }
            }
            if let Some(ttl) = ttl_ms {
                log.expire_at(clock + ttl)?;
                api::replicate_pexpireat(ctx, log.name(), clock + ttl)?;
            }
        }
        Write::Rewrite { bytes, ttl_ms } => {
            log.set(bytes)?;
            log.expire_at(clock + ttl_ms)?;
            api::replicate_set(ctx, log.name(), bytes, clock + ttl_ms)?;
        }
    }
    Ok(())
}

thread_local! {
    /// Where a packed reply is made (kept, so that a check allocates none;
    /// commands run on Redis's main thread).
    static PACKED_REPLY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Sends a reply of integers and bulk strings: as one string when `packed`
/// (see [`ratekeeper_engine::packed`]), else as an array.
pub fn send<'a, R: Reply<'a> + ?Sized>(ctx: Ctx, packed: bool, items: &R) -> Result<(), Failure> {
    if packed {
        return PACKED_REPLY.with_borrow_mut(|buffer| {
            buffer.clear();
            pack_reply(items, buffer);
            Ok(reply::bulk(ctx, buffer)?)
        });
    }
    reply::array(ctx, items.len())?;
    let mut sent = Ok(());
    items.each(|item| {
        if sent.is_ok() {
            sent = match item {
                Item::Int(n) => reply::int(ctx, n),
                Item::Bytes(b) => reply::bulk(ctx, b),
            };
        }
    });
    Ok(sent?)
}
