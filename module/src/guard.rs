//! How a command call ends: with its reply, or an error reply that names
//! what went wrong; a panic is caught here and never crosses into Redis.

use crate::api::{self, reply, ApiError, Arg, Ctx};
use ratekeeper_engine::{ArgError, Damaged};
use redis_module::raw;
use std::os::raw::c_int;

/// Why a command call failed.
#[derive(Debug)]
pub enum Failure {
    /// Bad arguments (or a bad stored override), named.
    Arg(ArgError),
    /// A key holds another type than the command needs.
    WrongType,
    /// A log this release cannot read: damaged, or of a newer format.
    Damaged(Damaged),
    /// The module API refused something.
    Api(ApiError),
    /// A command the module ran answered with an error.
    Reply(String),
}

impl From<ArgError> for Failure {
    fn from(e: ArgError) -> Failure {
        Failure::Arg(e)
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        Failure::Api(e)
    }
}

impl From<Damaged> for Failure {
    fn from(e: Damaged) -> Failure {
        Failure::Damaged(e)
    }
}

impl Failure {
    fn text(&self) -> String {
        match self {
            Failure::Arg(e) => format!("ERR ratekeeper: {e}"),
            Failure::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value".into()
            }
            Failure::Damaged(e) => format!("ERR ratekeeper: {e}"),
            Failure::Api(e) => format!("ERR ratekeeper: {}", e.0),
            Failure::Reply(text) => text.clone(),
        }
    }
}

/// A command's entry point: the keys of a call when Redis asks for them,
/// else `run`'s reply, or an error reply for its failure or a panic.
pub fn entry(
    ctx: Ctx,
    argv: *mut Arg,
    argc: c_int,
    run: fn(Ctx, &[Arg]) -> Result<(), Failure>,
) -> c_int {
    let args = self::argv(argv, argc);
    if keys_request(ctx, args) {
        return raw::REDISMODULE_OK as c_int;
    }
    self::run(ctx, || run(ctx, args))
}

/// The arguments of a call, as Redis passed them.
fn argv<'a>(argv: *mut Arg, argc: c_int) -> &'a [Arg] {
    if argv.is_null() || argc <= 0 {
        return &[];
    }
    // SAFETY: Redis passes `argc` strings that live for the whole call.
    unsafe { std::slice::from_raw_parts(argv, argc as usize) }
}

/// Answers a "which arguments are keys" request for a command laid out as
/// `NAME numkeys key [key ...] arg ...`; true when this call was one.
fn keys_request(ctx: Ctx, args: &[Arg]) -> bool {
    let (Some(is_request), Some(key_at)) =
        (unsafe { raw::RedisModule_IsKeysPositionRequest }, unsafe {
            raw::RedisModule_KeyAtPos
        })
    else {
        return false;
    };
    if unsafe { is_request(ctx) } == 0 {
        return false;
    }
    let numkeys = args
        .get(1)
        .and_then(|a| api::bytes(*a).ok())
        .and_then(|b| std::str::from_utf8(b).ok()?.parse::<usize>().ok())
        .unwrap_or(0);
    for pos in 2..(2 + numkeys).min(args.len()) {
        unsafe { key_at(ctx, pos as c_int) };
    }
    true
}

/// Runs `body`, which writes its own reply when it succeeds; a failure or a
/// panic becomes an error reply.
fn run(ctx: Ctx, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(failure)) => reply::error(ctx, &failure.text()),
        Err(_) => reply::error(ctx, "ERR ratekeeper: internal error (please report it)"),
    }
    raw::REDISMODULE_OK as c_int
}
