//! The Redis store: one call per check, whatever the number of rules: the
//! ratekeeper module's `RATEKEEPER.CHECK` when the server has it loaded, else
//! one EVALSHA of the script (see [`module`] for the choice).
//!
//! Connections come from a pool of this process's own ([`super::pool`]) with
//! connect and command timeouts; the script ([`SCRIPT`]) is run by its SHA-1
//! and sent again on `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).
//! `redis+cluster://` routes each check to the slot of its key's `{tag}`. The
//! pool and the circuit breaker belong to one process: a forked child builds
//! its own (see [`crate::process`]).
//! `rediss://` (and `rediss+cluster://`, `rediss+sentinel://`) speak TLS
//! through rustls (see [`super::url`] for the CA and client-certificate
//! parameters).
//!
//! Its parts: `connect` (what a URL points at, the connections and the
//! pool's manager), `wire` (the commands and their replies), `failure` (how
//! a failed call is told apart and worded), [`module`] (the module or the
//! script, per process), `controls` (the control calls, written once for the
//! blocking and the awaited side) and `aio` (the awaited side).

#[cfg(feature = "async")]
mod aio;
mod connect;
mod controls;
mod failure;
mod leases;
mod module;
mod target;
mod wire;

use self::connect::{Conn, Connections, Manager};
use self::failure::{describe, storage_error, unreachable, unreadable, Step};
pub use self::module::ModuleUse;
use self::module::{probe, Path, Paths, CHECK_COMMAND, METERS_COMMAND, RECORD_COMMAND};
use self::wire::{
    check_args, is_noscript, parse_reply, parse_together, pipeline_replies, Lua, Via,
};
use crate::store::one_wait;

use super::breaker::{Failure, StoreStats};
use super::pool::{GetError, Lent};
use super::signals::SignalsHeld;
use super::url::StoreUrl;
#[cfg(feature = "async")]
use super::{AsyncControlStore, AsyncLogStore};
use super::{LogStore, Request, StoreAccess, StoreOptions};
use crate::decision::Observation;
use crate::error::{Error, Result};
use crate::in_flight::{Held, LeaseCall};
use crate::keys::{lease_key, log_key, record_key};
use crate::process::ProcessLocal;
use redis::{RedisError, Value};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The Lua script that checks and logs one key against a rule set (the
/// engine's twin: `engine/lua/bands.lua`, `log.lua`, then `check.lua`).
pub const SCRIPT: &str = ratekeeper_engine::lua::CHECK_SCRIPT;
/// The Lua script that checks a key's several meters, all or nothing
/// (`bands.lua` and `log.lua`, then `engine/lua/meters.lua`).
pub const METERS_SCRIPT: &str = ratekeeper_engine::lua::METERS_SCRIPT;
/// The Lua script that changes a key's record and counts fail2ban
/// strikes (`engine/lua/record.lua`).
pub const RECORD_SCRIPT: &str = ratekeeper_engine::lua::RECORD_SCRIPT;

/// A store in Redis, single node or Cluster.
pub struct RedisStore {
    local: ProcessLocal<Result<Connections>>,
    prefix: String,
    check: Lua,
    meters: Lua,
    record: Lua,
    leases: leases::LeaseScripts,
    /// A Cluster spreads keys over nodes: batches go one by one.
    cluster: bool,
    /// The URL as errors show it (no password).
    shown: String,
    /// Whether connections speak TLS.
    tls: bool,
}

impl RedisStore {
    /// Opens a pool for `url`: `redis://`, `rediss://`, `redis+cluster://h:p,h:p`
    /// or `redis+sentinel://h:p,h:p/master[/db]`.
    /// Connections are made lazily, so this succeeds while Redis is down.
    pub fn open(url: &str, options: &StoreOptions) -> Result<RedisStore> {
        let url = StoreUrl::parse(url)?;
        let cluster = url.scheme.ends_with("+cluster");
        let shown = url.shown.clone();
        let tls = url.tls.is_some();
        let opts = options.clone();
        let local = ProcessLocal::new(move || Connections::open(&url, &opts));
        if let Err(e) = local.get() {
            return Err(e.clone());
        }
        Ok(RedisStore {
            local,
            prefix: options.prefix.clone(),
            check: Lua::new(SCRIPT, Some(CHECK_COMMAND)),
            meters: Lua::new(METERS_SCRIPT, Some(METERS_COMMAND)),
            record: Lua::new(RECORD_SCRIPT, Some(RECORD_COMMAND)),
            leases: leases::LeaseScripts::default(),
            cluster,
            shown,
            tls,
        })
    }

    /// This process's connections (built on first use in a forked child).
    fn connections(&self) -> Result<&Connections> {
        self.local.get().as_ref().map_err(Clone::clone)
    }

    /// Records a failure to reach Redis with the breaker, and the error to return.
    fn failed(&self, local: &Connections, e: &RedisError, step: Step) -> Error {
        let kind = if e.is_timeout() {
            Failure::Slow
        } else {
            // Reset or refused, as after a restart or failover: the other
            // pooled connections are suspect too. (A timeout says only that
            // Redis was slow: they stay.)
            local.generation.fetch_add(1, Ordering::AcqRel);
            Failure::Down
        };
        let why = describe(&self.shown, e, step);
        local.breaker.failed(&why, kind);
        Error::storage(why)
    }

    /// A pooled connection made since Redis last failed to answer, had by
    /// `deadline`; older ones are dropped on the way.
    fn fresh_connection<'c>(
        &self,
        local: &'c Connections,
        deadline: Instant,
    ) -> Result<Lent<'c, Manager>> {
        loop {
            let mut con = match local.pool.get(deadline) {
                Ok(con) => con,
                Err(GetError::Connect(e)) => {
                    let step = if self.tls {
                        Step::TlsConnect
                    } else {
                        Step::Connect
                    };
                    return Err(self.failed(local, &e, step));
                }
                Err(GetError::Busy(why)) => {
                    let why = format!("Redis at {}: {why}", self.shown);
                    local.breaker.failed(&why, Failure::Slow);
                    return Err(Error::storage(why));
                }
            };
            if con.generation >= local.generation.load(Ordering::Acquire) {
                return Ok(con);
            }
            con.broken = true;
        }
    }

    /// Runs one command: the outer error when Redis could not be reached (the
    /// circuit breaker counts those), the inner one when it answered with an
    /// error. A Cluster redirect (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: the
    /// command did not run) is retried once on a new connection, which reads
    /// the slot map afresh.
    fn run<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        route: Option<&[u8]>,
    ) -> Result<std::result::Result<T, RedisError>> {
        match self.run_once(cmd, route)? {
            Err(e) if e.is_cluster_error() => self.run_once(cmd, route),
            answered => Ok(answered),
        }
    }

    fn run_once<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        route: Option<&[u8]>,
    ) -> Result<std::result::Result<T, RedisError>> {
        self.on_connection(|con, _| con.query::<T>(cmd, route))
    }

    /// [`RedisStore::on_connection_now`], unless an earlier command of the
    /// caller's call found Redis not answering: then that error at once,
    /// Redis neither asked again nor blamed twice ([`crate::store::one_wait`]).
    fn on_connection<T>(
        &self,
        f: impl FnOnce(&mut Conn, Instant) -> redis::RedisResult<T>,
    ) -> Result<std::result::Result<T, RedisError>> {
        if let Some(earlier) = one_wait::unanswered() {
            return Err(earlier);
        }
        let outcome = self.on_connection_now(f);
        if let Err(e) = &outcome {
            one_wait::note(e);
        }
        outcome
    }

    /// Runs `f` on a fresh pooled connection, behind the circuit breaker: the
    /// outer error when Redis could not be reached, the inner one when it
    /// answered with an error. Each call counts once with the breaker. The
    /// whole call (waiting for a connection, making and setting it up, the
    /// command) ends within `timeout`, the thread's signals held back
    /// meanwhile ([`SignalsHeld`]: one would end a wait with EINTR). A reply
    /// that cannot be read (as a server quoting bytes that are not UTF-8 in
    /// an error) is that call's error alone: Redis answered, so the breaker
    /// is not told of an outage.
    fn on_connection_now<T>(
        &self,
        f: impl FnOnce(&mut Conn, Instant) -> redis::RedisResult<T>,
    ) -> Result<std::result::Result<T, RedisError>> {
        let _held = SignalsHeld::now();
        let local = self.connections()?;
        local.breaker.allow()?;
        let deadline = Instant::now() + local.timeout;
        let mut con = self.fresh_connection(local, deadline)?;
        match con.limit(deadline).and_then(|()| f(&mut con, deadline)) {
            Err(e) if e.kind() == redis::ErrorKind::Parse => {
                // what is left of that reply would be read as the next one's
                con.broken = true;
                local.breaker.succeeded();
                Ok(Err(e))
            }
            Err(e) if unreachable(&e) => {
                // A late reply may still arrive on this connection: never reuse it.
                con.broken = true;
                Err(self.failed(local, &e, Step::Command))
            }
            answered => {
                if matches!(&answered, Err(e) if e.is_cluster_error()) {
                    con.broken = true;
                }
                local.breaker.succeeded();
                Ok(answered)
            }
        }
    }

    /// The call of one check, as `via` says.
    fn check_command(&self, r: &Request<'_>, via: Via) -> redis::Cmd {
        let log = log_key(&self.prefix, r.tag, r.scope);
        let record = record_key(&self.prefix, r.tag, "");
        let banned = record_key(&self.prefix, r.tag, r.scope);
        let keys: &[&[u8]] = match (r.read_record, r.scope.is_empty()) {
            (false, _) => &[&log],
            (true, true) => &[&log, &record],
            // the bans the key earned in this scope, read in the same call
            (true, false) => &[&log, &record, &banned],
        };
        let mut cmd = self.check.command(via, keys);
        check_args(&mut cmd, r, via);
        cmd
    }

    /// The call of a key's meters checked together (see
    /// [`LogStore::apply_together`]), as `via` says: the module's command
    /// with each meter's packed check, or the meters script with each
    /// meter's arguments as the check script takes them, after their count.
    fn together_command(&self, requests: &[Request<'_>], via: Via) -> redis::Cmd {
        let logs: Vec<Vec<u8>> = requests
            .iter()
            .map(|r| log_key(&self.prefix, r.tag, r.scope))
            .collect();
        let keys: Vec<&[u8]> = logs.iter().map(Vec::as_slice).collect();
        let mut cmd = self.meters.command(via, &keys);
        if via == Via::Module {
            for request in requests {
                check_args(&mut cmd, request, via);
            }
            return cmd;
        }
        cmd.arg(requests.len());
        for request in requests {
            let mut one = redis::Cmd::new();
            check_args(&mut one, request, via);
            let args: Vec<&[u8]> = one
                .args_iter()
                .filter_map(|arg| match arg {
                    redis::Arg::Simple(bytes) => Some(bytes),
                    _ => None, // (a check's arguments are all simple)
                })
                .collect();
            cmd.arg(args.len());
            for arg in args {
                cmd.arg(arg);
            }
        }
        cmd
    }

    /// Where a key's meters' module command goes on a Cluster: their log
    /// keys' slot (one `{tag}`), as [`RedisStore::route`].
    fn route_together(&self, requests: &[Request<'_>]) -> Option<Vec<u8>> {
        requests.first().and_then(|r| self.route(r))
    }

    /// A pipeline of these checks, each as this process's calls go now (the
    /// module or the script), or, when its connections cannot be had, the
    /// error each check gets. (Callers settle the paths first:
    /// [`RedisStore::settled_paths`].)
    fn batch(
        &self,
        requests: &[Request<'_>],
    ) -> std::result::Result<(redis::Pipeline, Via, &Paths), Vec<Result<Observation>>> {
        let paths = match self.connections() {
            Ok(local) => &local.paths,
            Err(e) => return Err(requests.iter().map(|_| Err(e.clone())).collect()),
        };
        let via = match paths.choose() {
            Path::Module => Via::Module,
            Path::Script => Via::Sha,
        };
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for request in requests {
            pipe.add_command(self.check_command(request, via));
        }
        Ok((pipe, via, paths))
    }

    /// Runs a script's call built by `command(via)`, whose first key is
    /// `key`: through the module when this process uses it (falling back to
    /// the script, with no error, on a server that has none), else by the
    /// script's SHA-1, and once more by its source on NOSCRIPT (after a
    /// restart or `SCRIPT FLUSH`: the script did not run).
    fn script<T: redis::FromRedisValue>(
        &self,
        route: Option<&[u8]>,
        command: impl Fn(Via) -> redis::Cmd,
    ) -> Result<T> {
        let paths = self.settled_paths()?;
        if paths.choose() == Path::Module {
            let answered = self.run(&command(Via::Module), route)?;
            if let Some(answer) = self.module_answer(paths, answered)? {
                return Ok(answer);
            }
        }
        let answer = self.lua(command)?;
        paths.answered(Path::Script);
        Ok(answer)
    }

    /// Runs a script's call by its SHA-1, and once more by its source on
    /// NOSCRIPT (the script of a call the module does not answer).
    fn lua<T: redis::FromRedisValue>(&self, command: impl Fn(Via) -> redis::Cmd) -> Result<T> {
        match self.run(&command(Via::Sha), None)? {
            Err(e) if is_noscript(&e) => self.run(&command(Via::Source), None)?,
            other => other,
        }
        .map_err(storage_error)
    }

    /// This process's paths, the server asked first ([`probe`]) when they
    /// are due: whether it has the module is learnt from a fixed command,
    /// never from a caller's key (see [`module`]).
    fn settled_paths(&self) -> Result<&Paths> {
        let paths = &self.connections()?.paths;
        if paths.due() {
            paths.probed(&self.run::<Value>(&probe(), None)?);
        }
        Ok(paths)
    }

    /// What a module call's answer comes to: its reply, `None` when the
    /// script is to answer instead (the server, or this Redis user, has no
    /// module, and `redis_module` allows the script), or the error. A reply
    /// that could not be read sends the next call through the probe again.
    fn module_answer<T>(
        &self,
        paths: &Paths,
        answered: std::result::Result<T, RedisError>,
    ) -> Result<Option<T>> {
        match answered {
            Ok(answer) => {
                paths.answered(Path::Module);
                Ok(Some(answer))
            }
            Err(e) => match paths.lacks_module(&e) {
                Some(lack) if paths.required() => Err(paths.missing(&self.shown, lack)),
                Some(_) => Ok(None),
                None => {
                    if e.kind() == redis::ErrorKind::Parse {
                        paths.unsettle();
                    }
                    Err(storage_error(e))
                }
            },
        }
    }

    /// Where a check's module command goes on a Cluster: its log key's slot
    /// (None on a single Redis, where nothing needs routing).
    fn route(&self, r: &Request<'_>) -> Option<Vec<u8>> {
        self.cluster.then(|| log_key(&self.prefix, r.tag, r.scope))
    }

    /// The call that forgets a key's log and leases in `scope` (one slot).
    fn reset_command(&self, tag: &[u8], scope: &str) -> redis::Cmd {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(log_key(&self.prefix, tag, scope))
            .arg(lease_key(&self.prefix, tag, scope));
        cmd
    }

    /// A command answered by Redis (or a storage error).
    fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.run(cmd, None)?.map_err(storage_error)
    }
}

impl LogStore for RedisStore {
    fn apply(&self, request: &Request<'_>) -> Result<Observation> {
        let route = self.route(request);
        let reply: Value = self.script(route.as_deref(), |via| self.check_command(request, via))?;
        parse_reply(&reply, request)
    }

    /// One pipeline of checks on a single Redis; the Cluster, whose keys
    /// live on several nodes, takes them one by one.
    fn apply_many(&self, requests: &[Request<'_>]) -> Vec<Result<Observation>> {
        if requests.len() < 2 || self.cluster {
            return requests.iter().map(|r| self.apply(r)).collect();
        }
        if let Err(e) = self.settled_paths() {
            return requests.iter().map(|_| Err(e.clone())).collect();
        }
        let (pipe, via, paths) = match self.batch(requests) {
            Ok(batch) => batch,
            Err(every) => return every,
        };
        let path = via.path();
        let answered =
            self.on_connection(|con, deadline| con.pipeline(&pipe, requests.len(), deadline));
        unreadable(&answered, paths);
        let replies = match pipeline_replies(requests.len(), answered) {
            Ok(replies) => replies,
            Err(every) => return every,
        };
        requests
            .iter()
            .zip(replies)
            .map(|(request, reply)| {
                let reply = match reply {
                    // each on its own again: through the script now (or,
                    // when the module is required, with its error)
                    Err(e) if via == Via::Module && paths.lacks_module(&e).is_some() => {
                        return self.apply(request)
                    }
                    Err(e) if is_noscript(&e) => {
                        self.query(&self.check_command(request, Via::Source))?
                    }
                    other => other.map_err(storage_error)?,
                };
                paths.answered(path);
                parse_reply(&reply, request)
            })
            .collect()
    }

    fn apply_together(&self, requests: &[Request<'_>]) -> Result<Vec<Observation>> {
        let route = self.route_together(requests);
        let reply: Value =
            self.script(route.as_deref(), |via| self.together_command(requests, via))?;
        parse_together(&reply, requests)
    }

    fn hold(&self, request: &Request<'_>, id: &str, lease_ms: u64) -> Result<Observation> {
        self.hold_now(request, id, lease_ms)
    }

    fn leases(
        &self,
        tag: &[u8],
        scope: &str,
        call: LeaseCall<'_>,
        now_ms: Option<u64>,
    ) -> Result<Vec<Held>> {
        self.leases_now(tag, scope, call, now_ms)
    }

    fn reset(&self, tag: &[u8], scope: &str) -> Result<()> {
        self.query(&self.reset_command(tag, scope))
    }
}

impl StoreAccess for RedisStore {
    fn clock_ms(&self) -> Result<u64> {
        crate::store::in_place(controls::clock_ms(&controls::Blocking(self)))
    }

    fn stats(&self) -> StoreStats {
        let Ok(local) = self.connections() else {
            return StoreStats::default();
        };
        let (module_calls, script_calls, next) = local.paths.counts();
        StoreStats {
            module_calls,
            script_calls,
            path: match next {
                Path::Module => "module",
                Path::Script => "script",
            },
            ..local.breaker.stats()
        }
    }

    #[cfg(feature = "async")]
    fn as_async(&self) -> Option<&dyn AsyncLogStore> {
        Some(self)
    }

    #[cfg(feature = "async")]
    fn as_async_controls(&self) -> Option<&dyn AsyncControlStore> {
        Some(self)
    }
}
