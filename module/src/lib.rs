//! # ratekeeper-module
//!
//! ratekeeper's check inside Redis: a Redis module whose commands take the
//! same keys and arguments as the Lua scripts, give the same replies and
//! leave the same bytes, so that clients use it when a server has it
//! loaded and the script when it has not, and a fleet can switch at any
//! time. The log itself is [`ratekeeper_engine`]'s.
//!
//! It may use the engine and `redis-module` (the Redis module API), and
//! nothing of the core: the module runs inside Redis, which gives it its
//! clock, its allocator and its keys.
//!
//! * `RATEKEEPER.CHECK numkeys log [record [scope-record]] c|p cost now n
//!   windows limits... windows... [tier n windows limits... windows...]...`:
//!   `check.lua`; or, as clients send it, `RATEKEEPER.CHECK numkeys keys...
//!   packed`: the same arguments packed into one and the same reply as one
//!   string (`ratekeeper_engine::packed`), which spares Redis most of a
//!   call's cost of parsing arguments and building a reply.
//! * `RATEKEEPER.METERS numkeys log... packed...`: `meters.lua` as clients
//!   send it: a key's several meters, one packed check per meter's log, all
//!   or nothing, answered with one packed reply each.
//! * `RATEKEEPER.HOLD numkeys leases [log [record [scope-record]]] h|q
//!   limit lease-ms id now [check]`: `hold.lua` (an in-flight rule's slot
//!   taken with the rates' check, its writes made only when a lease is), and
//!   `RATEKEEPER.LEASES 1 leases r|e|l id lease-ms now`: `leases.lua`.
//! * `RATEKEEPER.POLICY 1 key set now field [value]` and
//!   `RATEKEEPER.POLICY 1 key strike now maxretry findtime`: `record.lua`.
//!
//! Build it with `cargo build --release -p ratekeeper-module` and load
//! `target/release/libratekeeper_module.so` with `redis-server --loadmodule`
//! (or `MODULE LOAD`). The commands read the server clock, declare their
//! keys (so Cluster routes them and ACLs apply), send replicas and the AOF
//! plain string commands with absolute expiry times (so a server without
//! the module can still load the AOF), built only while something receives
//! them (`replication`), allocate through Redis, and answer
//! bad arguments, keys of another type and damaged logs with an error reply;
//! a panic is caught and answered as an error too.

mod api;
mod check;
mod guard;
mod hold;
mod leases;
mod meters;
mod record;
mod replication;

use redis_module::{raw, Context, RedisString, Status};
use std::ffi::CStr;
use std::os::raw::c_int;

/// A module context of one command call (or of an event, or of the load).
pub(crate) type Ctx = *mut raw::RedisModuleCtx;

type Handler =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Registers one command whose keys the module names on request.
fn register(ctx: &Context, name: &CStr, handler: Handler, flags: &CStr) -> Status {
    let Some(create) = (unsafe { raw::RedisModule_CreateCommand }) else {
        return Status::Err;
    };
    let status = unsafe {
        create(
            ctx.ctx,
            name.as_ptr(),
            Some(handler),
            flags.as_ptr(),
            0,
            0,
            0,
        )
    };
    if status == raw::REDISMODULE_OK as c_int {
        Status::Ok
    } else {
        ctx.log_warning(&format!("ratekeeper: could not register {name:?}"));
        Status::Err
    }
}

/// The module API functions the commands call, each present or not in this
/// Redis (`RedisModule_SetAbsExpire` needs 6.2): the module loads only
/// where all are, so no command fails half-way for a missing one.
fn missing_api() -> Vec<&'static str> {
    macro_rules! present {
        ($($name:ident),* $(,)?) => {
            [$((stringify!($name), unsafe { raw::$name }.is_some())),*]
        };
    }
    present![
        RedisModule_OpenKey,
        RedisModule_CloseKey,
        RedisModule_KeyType,
        RedisModule_StringDMA,
        RedisModule_StringTruncate,
        RedisModule_StringSet,
        RedisModule_StringPtrLen,
        RedisModule_CreateString,
        RedisModule_FreeString,
        RedisModule_SetAbsExpire,
        RedisModule_HashGet,
        RedisModule_Milliseconds,
        RedisModule_Replicate,
        RedisModule_ReplicateVerbatim,
        RedisModule_Call,
        RedisModule_ReplyWithArray,
        RedisModule_ReplyWithLongLong,
        RedisModule_ReplyWithStringBuffer,
        RedisModule_ReplyWithError,
        RedisModule_IsKeysPositionRequest,
        RedisModule_KeyAtPos,
    ]
    .into_iter()
    .filter(|(_, present)| !present)
    .map(|(name, _)| name)
    .collect()
}

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    let missing = missing_api();
    if !missing.is_empty() {
        ctx.log_warning(&format!(
            "ratekeeper: this Redis lacks {} (the module needs Redis 6.2 or newer)",
            missing.join(", ")
        ));
        return Status::Err;
    }
    let flags = c"write deny-oom getkeys-api";
    for (name, handler) in [
        (c"ratekeeper.check", check::command as Handler),
        (c"ratekeeper.meters", meters::command as Handler),
        (c"ratekeeper.hold", hold::command as Handler),
        (c"ratekeeper.leases", leases::command as Handler),
        (c"ratekeeper.policy", record::command as Handler),
    ] {
        if register(ctx, name, handler, flags) == Status::Err {
            return Status::Err;
        }
    }
    replication::watch(ctx.ctx);
    if let Some(register_info) = unsafe { raw::RedisModule_RegisterInfoFunc } {
        unsafe { register_info(ctx.ctx, Some(replication::info)) };
    }
    Status::Ok
}

redis_module::redis_module! {
    name: "ratekeeper",
    version: 1,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [],
    init: init,
    commands: [],
}
