//! `RATEKEEPER.POLICY 1 key ARGV...`: the record script's call (a record
//! change, a fail2ban strike) with the same key, arguments and reply. These
//! run on admin actions and failed logins, not on every request, so they go
//! through Redis's own commands, replicated as they are.

use crate::api::{self, Arg, Ctx};
use crate::check::send;
use crate::guard::{self, Failure};
use ratekeeper_engine::command::{number, Item};
use ratekeeper_engine::record::{
    bans, lifetime, parse_record, strikes_within, Lifetime, RecordArgs,
};
use ratekeeper_engine::ArgError;
use redis_module::{CallOptionsBuilder, CallReply, CallResult, Context};
use std::os::raw::c_int;

/// The command's entry point.
pub extern "C" fn command(ctx: Ctx, argv: *mut Arg, argc: c_int) -> c_int {
    guard::entry(ctx, argv, argc, run)
}

/// Runs one command through Redis, replicated; its reply, or its error.
fn call<'c>(context: &'c Context, name: &str, args: &[&[u8]]) -> Result<CallReply<'c>, Failure> {
    let options = CallOptionsBuilder::new()
        .replicate()
        .errors_as_replies()
        .build();
    let result: CallResult<'static> = context.call_ext(name, &options, args);
    result.map_err(|e| Failure::Reply(e.to_utf8_string().unwrap_or_else(|| "ERR".into())))
}

/// The string elements of an array reply (absent ones as `None`).
fn strings(reply: &CallReply<'_>) -> Vec<Option<Vec<u8>>> {
    match reply {
        CallReply::Array(items) => items
            .iter()
            .map(|item| match item {
                Ok(CallReply::String(s)) => Some(s.as_bytes().to_vec()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn run(ctx: Ctx, argv: &[Arg]) -> Result<(), Failure> {
    let args = argv
        .iter()
        .map(|a| api::bytes(*a))
        .collect::<Result<Vec<&[u8]>, _>>()?;
    if args.len() < 3 || number(args[1], "numkeys", 1, 1).is_err() {
        return Err(Failure::Arg(ArgError(
            "wrong number of arguments: RATEKEEPER.POLICY 1 key set|strike ...".into(),
        )));
    }
    let key = args[2];
    let context = Context::new(ctx);
    match parse_record(&args[3..])? {
        RecordArgs::Set { now, field, value } => {
            match value {
                Some(value) => call(&context, "HSET", &[key, field, value])?,
                None => call(&context, "HDEL", &[key, field])?,
            };
            let fields = strings(&call(&context, "HMGET", &[key, b"s", b"b", b"t", b"o"])?);
            let get = |i: usize| fields.get(i).and_then(|f| f.as_deref());
            match lifetime([get(0), get(1), get(2), get(3)], now) {
                Lifetime::Persist => call(&context, "PERSIST", &[key])?,
                Lifetime::Expire(ms) => {
                    call(&context, "PEXPIRE", &[key, ms.to_string().as_bytes()])?
                }
                Lifetime::Delete => call(&context, "DEL", &[key])?,
            };
            Ok(api::reply::int(ctx, 1)?)
        }
        RecordArgs::Strike {
            now,
            maxretry,
            findtime,
        } => {
            let now = match now {
                Some(now) => now,
                None => api::clock_ms()?,
            };
            call(&context, "LPUSH", &[key, now.to_string().as_bytes()])?;
            let last = (maxretry - 1).to_string();
            call(&context, "LTRIM", &[key, b"0", last.as_bytes()])?;
            let stored = strings(&call(&context, "LRANGE", &[key, b"0", b"-1"])?);
            let stored: Vec<&[u8]> = stored.iter().flatten().map(Vec::as_slice).collect();
            let count = strikes_within(&stored, now, findtime);
            let banned = bans(count, maxretry);
            if banned {
                call(&context, "DEL", &[key])?;
            } else {
                call(&context, "PEXPIRE", &[key, findtime.to_string().as_bytes()])?;
            }
            send(
                ctx,
                false,
                &[
                    Item::Int(now),
                    Item::Int(count),
                    Item::Int(i64::from(banned)),
                ][..],
            )
        }
    }
}
