//! The awaitable Redis log ([`AsyncLogStore`]) and controls
//! ([`AsyncControlStore`]): the same module command or
//! script, keys, arguments and replies as the blocking one, over ONE multiplexed
//! connection per process (a Cluster connection for `redis+cluster://`),
//! which concurrent checks share and pipeline naturally. It shares the
//! process's circuit breaker with the blocking path, retries a Cluster
//! redirect once and resends the script on `NOSCRIPT`, waits at most
//! `timeout` for a reply, and speaks TLS as the URL says. A forked child
//! makes its own connection (it belongs to the process's [`super::Connections`]).

use super::controls::{self, Wire};
use super::failure::{describe, storage_error, unreachable, unreadable, Step};
use super::module::{probe, Path, Paths};
use super::target::{routing, Target};
use super::wire::{is_noscript, parse_reply, parse_together, pipeline_replies, Via};
use super::RedisStore;
use crate::controls::{Fail2Ban, Field, RawRecord, SharedHash, Strike};
use crate::decision::Observation;
use crate::error::{Error, Result};
use crate::in_flight::{Held, LeaseCall};
use crate::store::breaker::Failure;
use crate::store::{AsyncControlStore, AsyncLogStore, BoxFuture, HashFields, Request};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisError, RedisFuture, Value};
use std::time::Duration;
use tokio::time::Instant;

/// One connection, of either kind; a clone shares it.
#[derive(Clone)]
enum Conn {
    Single(MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The awaitable side of one process's connections.
pub(super) struct AsyncSide {
    target: Target,
    held: tokio::sync::Mutex<Option<Conn>>,
    timeout: Duration,
    connect_timeout: Duration,
}

fn timed_out(what: &str) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} timed out"),
    ))
}

impl AsyncSide {
    pub(super) fn new(target: Target, timeout: Duration, connect_timeout: Duration) -> AsyncSide {
        AsyncSide {
            target,
            held: tokio::sync::Mutex::new(None),
            timeout,
            connect_timeout,
        }
    }

    /// The process's connection, made on first use (or after a failure) by
    /// `deadline`; waiting for another caller's attempt counts in
    /// `connect_timeout`, so callers queued behind a dead Redis each give up
    /// within it, and within the call's deadline.
    async fn connection(&self, deadline: Instant) -> std::result::Result<Conn, RedisError> {
        let attempt = async {
            let mut held = self.held.lock().await;
            if let Some(conn) = held.as_ref() {
                return Ok(conn.clone());
            }
            let made = self.connect().await?;
            *held = Some(made.clone());
            Ok(made)
        };
        let by = deadline.min(Instant::now() + self.connect_timeout);
        tokio::time::timeout_at(by, attempt)
            .await
            .map_err(|_| timed_out("connecting"))?
    }

    async fn connect(&self) -> std::result::Result<Conn, RedisError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.timeout));
        match &self.target {
            Target::Single(client) => client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .map(Conn::Single),
            Target::Cluster(client) => client.get_async_connection().await.map(Conn::Cluster),
            Target::Sentinel(sentinel) => {
                // asking the sentinels is a short blocking exchange, made
                // only when (re)connecting
                let client = tokio::task::block_in_place(|| {
                    sentinel
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_client()
                })?;
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map(Conn::Single)
            }
        }
    }

    /// Drops the connection after a failure to reach Redis: the next call
    /// makes a new one. A caller making one now holds the lock: that one is
    /// new, and no caller waits for its attempt to end here.
    fn forget(&self) {
        if let Ok(mut held) = self.held.try_lock() {
            *held = None;
        }
    }
}

/// What one call sends: a command (on a Cluster, to the master of a key's
/// slot when one is given) or a pipeline.
enum Work<'w> {
    One(&'w Cmd, Option<&'w [u8]>),
    Many(&'w Pipeline),
}

impl RedisStore {
    /// Runs `work` behind the circuit breaker, as [`RedisStore::on_connection`]
    /// does: the outer error when Redis could not be reached (counted by the
    /// breaker; the connection is dropped), the inner one when it answered
    /// with an error (or with a reply that could not be read: the connection
    /// is dropped, no outage counted). Each call counts once with the
    /// breaker, and ends within `timeout`, the connection made included.
    /// After an earlier command of the caller's call found Redis not
    /// answering, that error at once ([`crate::store::one_wait`]).
    async fn on_async(
        &self,
        work: &Work<'_>,
    ) -> Result<std::result::Result<Vec<Value>, RedisError>> {
        if let Some(earlier) = crate::store::one_wait::unanswered() {
            return Err(earlier);
        }
        let outcome = self.on_async_now(work).await;
        if let Err(e) = &outcome {
            crate::store::one_wait::note(e);
        }
        outcome
    }

    /// [`RedisStore::on_async`]'s command, made now.
    async fn on_async_now(
        &self,
        work: &Work<'_>,
    ) -> Result<std::result::Result<Vec<Value>, RedisError>> {
        let local = self.connections()?;
        local.breaker.allow()?;
        let side = &local.aio;
        let deadline = Instant::now() + side.timeout;
        let mut conn = match side.connection(deadline).await {
            Ok(conn) => conn,
            Err(e) => {
                let step = if self.tls {
                    Step::TlsConnect
                } else {
                    Step::Connect
                };
                return Err(self.failed_async(local, &e, step));
            }
        };
        let sent = async {
            match work {
                Work::One(cmd, route) => match (&mut conn, route) {
                    (Conn::Cluster(c), Some(key)) => c
                        .route_command((*cmd).clone(), routing(key))
                        .await
                        .map(|v| vec![v]),
                    _ => conn.req_packed_command(cmd).await.map(|v| vec![v]),
                },
                Work::Many(pipe) => pipe.query_async::<Vec<Value>>(&mut conn).await,
            }
        };
        let answered = match tokio::time::timeout_at(deadline, sent).await {
            Ok(answered) => answered,
            Err(_) => Err(timed_out("the command")),
        };
        match answered {
            Err(e) if e.kind() == redis::ErrorKind::Parse => {
                side.forget();
                local.breaker.succeeded();
                Ok(Err(e))
            }
            Err(e) if unreachable(&e) => {
                // as the blocking path does: a connection that did not answer
                // in time may be half-open (a partition, a paused host); the
                // next call makes a new one (checks in flight keep theirs)
                side.forget();
                Err(self.failed_async(local, &e, Step::Command))
            }
            answered => {
                local.breaker.succeeded();
                Ok(answered)
            }
        }
    }

    fn failed_async(&self, local: &super::Connections, e: &RedisError, step: Step) -> Error {
        let kind = if e.is_timeout() {
            Failure::Slow
        } else {
            Failure::Down
        };
        let why = describe(&self.shown, e, step);
        local.breaker.failed(&why, kind);
        Error::storage(why)
    }

    /// One command's reply; a Cluster redirect is retried once.
    async fn run_async(
        &self,
        cmd: &Cmd,
        route: Option<&[u8]>,
    ) -> Result<std::result::Result<Value, RedisError>> {
        let once = |reply: std::result::Result<Vec<Value>, RedisError>| {
            reply.and_then(|mut v| {
                v.pop()
                    .ok_or_else(|| timed_out("an empty reply"))
                    .and_then(|v| v.extract_error())
            })
        };
        let work = Work::One(cmd, route);
        match once(self.on_async(&work).await?) {
            Err(e) if e.is_cluster_error() => Ok(once(self.on_async(&work).await?)),
            answered => Ok(answered),
        }
    }

    /// This process's paths, the server asked first when they are due, as
    /// [`RedisStore::settled_paths`] does.
    async fn settled_paths_async(&self) -> Result<&Paths> {
        let paths = &self.connections()?.paths;
        if paths.due() {
            paths.probed(&self.run_async(&probe(), None).await?);
        }
        Ok(paths)
    }

    /// A script's call built by `command(via)`, as [`RedisStore::script`]
    /// makes it: through the module when this process uses it (the script
    /// on a server without one), else by the script's SHA-1, and by its
    /// source on NOSCRIPT.
    pub(super) async fn script_async(
        &self,
        route: Option<&[u8]>,
        command: impl Fn(Via) -> Cmd,
    ) -> Result<Value> {
        let paths = self.settled_paths_async().await?;
        if paths.choose() == Path::Module {
            let answered = self.run_async(&command(Via::Module), route).await?;
            if let Some(answer) = self.module_answer(paths, answered)? {
                return Ok(answer);
            }
        }
        let answer = self.lua_async(command).await?;
        paths.answered(Path::Script);
        Ok(answer)
    }

    /// [`RedisStore::lua`], awaited.
    pub(super) async fn lua_async(&self, command: impl Fn(Via) -> Cmd) -> Result<Value> {
        match self.run_async(&command(Via::Sha), None).await? {
            Err(e) if is_noscript(&e) => self.run_async(&command(Via::Source), None).await?,
            other => other,
        }
        .map_err(storage_error)
    }

    /// One check, by [`RedisStore::script_async`].
    async fn check_async(&self, request: &Request<'_>) -> Result<Observation> {
        let route = self.route(request);
        let reply = self
            .script_async(route.as_deref(), |via| self.check_command(request, via))
            .await?;
        parse_reply(&reply, request)
    }

    /// Several checks in one pipeline (a single Redis), each on its own.
    async fn check_many_async(&self, requests: &[Request<'_>]) -> Vec<Result<Observation>> {
        if requests.len() < 2 || self.cluster {
            let mut out = Vec::with_capacity(requests.len());
            for request in requests {
                out.push(self.check_async(request).await);
            }
            return out;
        }
        if let Err(e) = self.settled_paths_async().await {
            return requests.iter().map(|_| Err(e.clone())).collect();
        }
        let (pipe, via, paths) = match self.batch(requests) {
            Ok(batch) => batch,
            Err(every) => return every,
        };
        let path = via.path();
        let answered = self.on_async(&Work::Many(&pipe)).await;
        unreadable(&answered, paths);
        let replies = match pipeline_replies(requests.len(), answered) {
            Ok(replies) => replies,
            Err(every) => return every,
        };
        let mut out = Vec::with_capacity(requests.len());
        for (request, reply) in requests.iter().zip(replies) {
            out.push(match reply.extract_error() {
                // each on its own again: through the script now, or by its source
                Err(e) if via == Via::Module && paths.lacks_module(&e).is_some() => {
                    self.check_async(request).await
                }
                Err(e) if is_noscript(&e) => self.check_async(request).await,
                Err(e) => Err(storage_error(e)),
                Ok(reply) => {
                    paths.answered(path);
                    parse_reply(&reply, request)
                }
            });
        }
        out
    }
}

impl AsyncLogStore for RedisStore {
    fn apply_async<'a>(&'a self, request: &'a Request<'a>) -> BoxFuture<'a, Result<Observation>> {
        Box::pin(self.check_async(request))
    }

    fn apply_many_async<'a>(
        &'a self,
        requests: &'a [Request<'a>],
    ) -> BoxFuture<'a, Vec<Result<Observation>>> {
        Box::pin(self.check_many_async(requests))
    }

    fn apply_together_async<'a>(
        &'a self,
        requests: &'a [Request<'a>],
    ) -> BoxFuture<'a, Result<Vec<Observation>>> {
        Box::pin(async move {
            let route = self.route_together(requests);
            let reply = self
                .script_async(route.as_deref(), |via| self.together_command(requests, via))
                .await?;
            parse_together(&reply, requests)
        })
    }

    fn hold_async<'a>(
        &'a self,
        request: &'a Request<'a>,
        id: &'a str,
        lease_ms: u64,
    ) -> BoxFuture<'a, Result<Observation>> {
        Box::pin(self.hold_awaited(request, id, lease_ms))
    }

    fn leases_async<'a>(
        &'a self,
        tag: &'a [u8],
        scope: &'a str,
        call: LeaseCall<'a>,
        now_ms: Option<u64>,
    ) -> BoxFuture<'a, Result<Vec<Held>>> {
        Box::pin(self.leases_awaited(tag, scope, call, now_ms))
    }

    fn reset_async<'a>(&'a self, tag: &'a [u8], scope: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let cmd = self.reset_command(tag, scope);
            self.run_async(&cmd, None).await?.map_err(storage_error)?;
            Ok(())
        })
    }
}

/// The awaited calls of the controls code ([`super::controls`]).
struct Awaited<'s>(&'s RedisStore);

impl Wire for Awaited<'_> {
    fn store(&self) -> &RedisStore {
        self.0
    }

    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move { self.0.run_async(cmd, None).await?.map_err(storage_error) })
    }

    fn record_script<'a>(
        &'a self,
        key: &'a [u8],
        args: &'a [Vec<u8>],
    ) -> BoxFuture<'a, Result<Value>> {
        let store = self.0;
        Box::pin(store.script_async(Some(key), move |via| store.record_call(via, key, args)))
    }
}

impl AsyncControlStore for RedisStore {
    fn clock_ms_async(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move { controls::clock_ms(&Awaited(self)).await })
    }

    fn record_async<'a>(
        &'a self,
        tag: &'a [u8],
        scope: &'a str,
    ) -> BoxFuture<'a, Result<RawRecord>> {
        Box::pin(async move { controls::record(&Awaited(self), tag, scope).await })
    }

    fn set_record_async<'a>(
        &'a self,
        tag: &'a [u8],
        scope: &'a str,
        field: Field,
        value: Option<&'a str>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            controls::set_record(&Awaited(self), tag, scope, field, value, now_ms).await
        })
    }

    fn shared_async(&self, hash: SharedHash) -> BoxFuture<'_, Result<HashFields>> {
        Box::pin(async move { controls::shared(&Awaited(self), hash).await })
    }

    fn set_shared_async<'a>(
        &'a self,
        hash: SharedHash,
        field: &'a [u8],
        value: Option<&'a [u8]>,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move { controls::set_shared(&Awaited(self), hash, field, value).await })
    }

    fn controls_version_async(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move { controls::controls_version(&Awaited(self)).await })
    }

    fn strike_async<'a>(
        &'a self,
        tag: &'a [u8],
        rule: &'a Fail2Ban,
        now_ms: Option<u64>,
    ) -> BoxFuture<'a, Result<Strike>> {
        Box::pin(async move { controls::strike(&Awaited(self), tag, rule, now_ms).await })
    }

    fn push_change_async<'a>(&'a self, change: &'a [u8], keep: usize) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { controls::push_change(&Awaited(self), change, keep).await })
    }

    fn changes_async(&self, limit: usize) -> BoxFuture<'_, Result<Vec<Vec<u8>>>> {
        Box::pin(async move { controls::changes(&Awaited(self), limit).await })
    }

    fn denials_async<'a>(&'a self, minutes: &'a [u64]) -> BoxFuture<'a, Result<Vec<Vec<Vec<u8>>>>> {
        Box::pin(async move { controls::denials(&Awaited(self), minutes).await })
    }
}
