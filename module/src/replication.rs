//! Whether anything receives what the commands replicate: a replica, the
//! replication backlog a replica resumes from, or an AOF.
//!
//! `RedisModule_Replicate` looks its command up by name and builds every
//! argument as a Redis object, about a third of a check's cost inside
//! Redis, and Redis then drops the result when nothing receives it. So the
//! commands build their replication only while something may: they start
//! out doing so, and stop only after Redis's own state (`INFO`) shows a
//! master with no replica, no backlog and no AOF, read when the module
//! loads, when a load of the data ends (an RDB that holds the replication
//! offset leaves a backlog) and whenever a child process (a save, an AOF
//! rewrite, a full sync) ends. Everything that can start receiving writes
//! announces itself first through an event that turns building back on
//! before the next command runs: a full sync forks the child whose
//! snapshot holds every earlier write (and the replica's stream starts
//! there), so do an AOF switched on and a rewrite, and a change of role (a
//! replica promoted with its backlog) is an event of its own. While nothing
//! receives them, each write is still counted where Redis counts writes
//! (`RedisModule_ReplicateVerbatim`, which Redis drops as it would the
//! built command), so that `save` points see it. `INFO ratekeeper` says
//! which (`ratekeeper_replicating`).

use crate::Ctx;
use redis_module::raw;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether anything may receive replicated writes (true until Redis's state
/// shows otherwise; the commands run on Redis's main thread, where every
/// change is made).
static RECEIVED: AtomicBool = AtomicBool::new(true);

/// Whether the commands must build what they replicate.
pub fn received() -> bool {
    RECEIVED.load(Ordering::Relaxed)
}

/// The events after which something may receive writes (any subevent),
/// or, for a child that ended and a load that ended, the state must be
/// read again. (A master that loads an RDB holding its replication offset
/// keeps a backlog from then on: the load ends after the module loaded.)
const EVENTS: [u64; 6] = [
    raw::REDISMODULE_EVENT_FORK_CHILD,
    raw::REDISMODULE_EVENT_LOADING,
    raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
    raw::REDISMODULE_EVENT_REPLICA_CHANGE,
    raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE,
    raw::REDISMODULE_EVENT_PERSISTENCE,
];

/// Subscribes to the events above and reads Redis's state. Should a
/// subscription fail (a Redis without the event), writes are always built.
pub fn watch(ctx: Ctx) {
    let Some(subscribe) = (unsafe { raw::RedisModule_SubscribeToServerEvent }) else {
        return;
    };
    for id in EVENTS {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        if unsafe { subscribe(ctx, event, Some(on_event)) } != raw::REDISMODULE_OK as c_int {
            return;
        }
    }
    read_state(ctx);
}

extern "C" fn on_event(ctx: Ctx, event: raw::RedisModuleEvent, subevent: u64, _data: *mut c_void) {
    let ended = match event.id {
        raw::REDISMODULE_EVENT_FORK_CHILD => subevent == raw::REDISMODULE_SUBEVENT_FORK_CHILD_DIED,
        raw::REDISMODULE_EVENT_LOADING => matches!(
            subevent,
            raw::REDISMODULE_SUBEVENT_LOADING_ENDED | raw::REDISMODULE_SUBEVENT_LOADING_FAILED
        ),
        _ => false,
    };
    if ended {
        read_state(ctx);
    } else {
        RECEIVED.store(true, Ordering::Relaxed);
    }
}

/// `INFO ratekeeper`: `ratekeeper_replicating:1` while the commands build
/// what they replicate, 0 while they only count their writes.
pub extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    // (what the module crate's own handler adds: a trace in a crash report)
    redis_module::basic_info_command_handler(
        &redis_module::InfoContext::new(ctx),
        for_crash_report == 1,
    );
    let (Some(section), Some(field)) = (unsafe { raw::RedisModule_InfoAddSection }, unsafe {
        raw::RedisModule_InfoAddFieldLongLong
    }) else {
        return;
    };
    unsafe {
        section(ctx, std::ptr::null());
        field(ctx, c"replicating".as_ptr(), i64::from(received()));
    }
}

/// Nothing receives writes when this server is a master with no replica,
/// no replication backlog and no AOF (anything unreadable counts as a
/// receiver).
fn read_state(ctx: Ctx) {
    let quiet = section(ctx, c"replication", |info| {
        info.text(c"role") == Some(b"master".as_slice())
            && info.number(c"connected_slaves") == Some(0)
            && info.number(c"repl_backlog_active") == Some(0)
    }) && section(ctx, c"persistence", |info| {
        info.number(c"aof_enabled") == Some(0)
    });
    RECEIVED.store(!quiet, Ordering::Relaxed);
}

/// An `INFO` section, read by `judge` (false when Redis gives none).
fn section(ctx: Ctx, name: &std::ffi::CStr, judge: impl FnOnce(&Info) -> bool) -> bool {
    let (Some(get), Some(free)) = (unsafe { raw::RedisModule_GetServerInfo }, unsafe {
        raw::RedisModule_FreeServerInfo
    }) else {
        return false;
    };
    let data = unsafe { get(ctx, name.as_ptr()) };
    if data.is_null() {
        return false;
    }
    let verdict = judge(&Info(data));
    unsafe { free(ctx, data) };
    verdict
}

/// The fields of an `INFO` section.
struct Info(*mut raw::RedisModuleServerInfoData);

impl Info {
    fn number(&self, field: &std::ffi::CStr) -> Option<i64> {
        let get = unsafe { raw::RedisModule_ServerInfoGetFieldSigned }?;
        let mut err: c_int = 0;
        let n = unsafe { get(self.0, field.as_ptr(), &mut err) };
        (err == 0).then_some(n)
    }

    fn text(&self, field: &std::ffi::CStr) -> Option<&[u8]> {
        let get = unsafe { raw::RedisModule_ServerInfoGetFieldC }?;
        let ptr: *const c_char = unsafe { get(self.0, field.as_ptr()) };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: Redis gives a NUL-terminated string owned by the section data.
        Some(unsafe { std::ffi::CStr::from_ptr(ptr) }.to_bytes())
    }
}
