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

#[cfg(feature = "async")]
mod aio;
mod module;

pub use self::module::ModuleUse;
use self::module::{probe, Path, Paths, CHECK_COMMAND, POLICY_COMMAND};

use super::breaker::{Breaker, Failure, StoreStats};
use super::pool::{Connect, GetError, Lent, Pool};
use super::url::{StoreUrl, Tls};
#[cfg(feature = "async")]
use super::AsyncLogStore;
use super::{LogStore, Mode, PolicyStore, Request, StoreOptions};
use crate::decision::{Observation, RuleObservation};
use crate::error::{Error, Result};
use crate::keys::{log_key, record_key, strikes_key};
use crate::policy::{
    version_key, Applied, DecidedBy, Fail2Ban, Field, Listing, RawRecord, SharedHash, Strike,
};
use crate::process::ProcessLocal;
use crate::rule::RuleSet;
use redis::{ConnectionLike, RedisError, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The Lua script that checks and logs one key against a rule set (the
/// engine's twin, `engine/lua/check.lua`).
pub const SCRIPT: &str = ratekeeper_engine::lua::CHECK_SCRIPT;
/// The Lua script that changes a key's policy record and counts fail2ban
/// strikes (`engine/lua/policy.lua`).
pub const POLICY_SCRIPT: &str = ratekeeper_engine::lua::POLICY_SCRIPT;

/// A script and its SHA-1, run by EVALSHA and sent again on NOSCRIPT, and
/// the module's command that does what it does.
struct Lua {
    source: &'static str,
    sha: String,
    module: &'static str,
}

impl Lua {
    fn new(source: &'static str, module: &'static str) -> Lua {
        Lua {
            source,
            sha: sha1_smol::Sha1::from(source).digest().to_string(),
            module,
        }
    }

    /// The call with these keys, as `via` says; the arguments follow, the
    /// same for all three.
    fn command(&self, via: Via, keys: &[&[u8]]) -> redis::Cmd {
        let mut cmd = match via {
            Via::Sha => redis::cmd("EVALSHA"),
            Via::Source => redis::cmd("EVAL"),
            Via::Module => redis::cmd(self.module),
        };
        match via {
            Via::Sha => cmd.arg(&self.sha),
            Via::Source => cmd.arg(self.source),
            Via::Module => &mut cmd,
        };
        cmd.arg(keys.len());
        for key in keys {
            cmd.arg(*key);
        }
        cmd
    }
}

/// How a script's call is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// EVALSHA: the script by its SHA-1.
    Sha,
    /// EVAL: the script's source (after NOSCRIPT).
    Source,
    /// The module's command (same keys, arguments and reply).
    Module,
}

impl Via {
    /// The way a call sent so is counted.
    fn path(self) -> Path {
        match self {
            Via::Module => Path::Module,
            Via::Sha | Via::Source => Path::Script,
        }
    }
}

/// A Redis connection of either kind, as the pool hands it out.
struct Conn {
    link: Link,
    /// Set after a timeout or I/O error: a late reply may still arrive, so the
    /// pool must drop this connection rather than hand it out again.
    broken: bool,
    /// The manager's generation when this connection was made.
    generation: u64,
}

enum Link {
    Single(redis::Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl Conn {
    /// Makes the next command wait at most until `deadline`: what is left of
    /// the one call's `timeout` after getting this connection.
    fn limit(&mut self, deadline: Instant) -> redis::RedisResult<()> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        match &self.link {
            Link::Single(c) => {
                c.set_read_timeout(Some(left))?;
                c.set_write_timeout(Some(left))
            }
            Link::Cluster(c) => {
                c.set_read_timeout(Some(left))?;
                c.set_write_timeout(Some(left))
            }
        }
    }

    fn as_like(&mut self) -> &mut dyn ConnectionLike {
        match &mut self.link {
            Link::Single(c) => c,
            Link::Cluster(c) => c.as_mut(),
        }
    }

    /// The replies of a pipeline of checks, each read by `deadline`: the
    /// client's own pipeline would wait a whole timeout for every reply once
    /// Redis stops answering. The outer error when Redis did not answer (the
    /// rest are not waited for), each reply's own error inside.
    fn pipeline(
        &mut self,
        pipe: &redis::Pipeline,
        count: usize,
        deadline: Instant,
    ) -> redis::RedisResult<Vec<redis::RedisResult<Vec<Value>>>> {
        let Link::Single(con) = &mut self.link else {
            return pipe.query(self.as_like());
        };
        con.send_packed_command(&pipe.get_packed_pipeline())?;
        let mut replies = Vec::with_capacity(count);
        for _ in 0..count {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out());
            }
            con.set_read_timeout(Some(left))?;
            replies.push(match con.recv_response()? {
                Value::ServerError(e) => Err(e.into()),
                value => redis::from_redis_value(value).map_err(Into::into),
            });
        }
        Ok(replies)
    }

    /// Runs `cmd`; on a Cluster, on the master of `route`'s slot when given
    /// (the module's commands name their keys after a count, which the
    /// client's own routing does not read).
    fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
        route: Option<&[u8]>,
    ) -> redis::RedisResult<T> {
        match (&mut self.link, route) {
            (Link::Cluster(c), Some(key)) => {
                let value = c.route_command(cmd, routing(key))?.extract_error()?;
                redis::from_redis_value(value).map_err(Into::into)
            }
            _ => cmd.query(self.as_like()),
        }
    }
}

/// The Cluster route to the master of `key`'s slot.
fn routing(key: &[u8]) -> redis::cluster_routing::RoutingInfo {
    use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(
        key,
        SlotAddr::Master,
    )))
}

enum Target {
    Single(redis::Client),
    Cluster(redis::cluster::ClusterClient),
    /// Each new connection asks the sentinels where the master is now.
    Sentinel(std::sync::Mutex<redis::sentinel::SentinelClient>),
}

/// Opens connections with the configured timeouts, for the pool.
struct Manager {
    target: Target,
    connect_timeout: Duration,
    /// Bumped whenever Redis fails to answer: connections made before are
    /// suspect (a restarted Redis reset them all) and are not used again.
    generation: Arc<AtomicU64>,
}

impl Manager {
    /// How long making a connection of `client` may take: `connect_timeout`,
    /// and no longer than the call's deadline allows. The client waits up to
    /// that for the connection and then up to what is left of it for each
    /// setup reply, so with two replies to wait for it is given half.
    fn connect_wait(
        &self,
        client: &redis::Client,
        deadline: Instant,
    ) -> std::result::Result<Duration, RedisError> {
        let wait = self
            .connect_timeout
            .min(deadline.saturating_duration_since(Instant::now()))
            / setup_replies(client).max(1);
        if wait.is_zero() {
            return Err(timed_out());
        }
        Ok(wait)
    }

    /// A connection, set up (TLS, AUTH, SELECT) by `deadline`; each command
    /// on it is bounded by [`Conn::limit`].
    fn open(&self, deadline: Instant) -> std::result::Result<Conn, RedisError> {
        let link = match &self.target {
            Target::Single(client) => Link::Single(
                client.get_connection_with_timeout(self.connect_wait(client, deadline)?)?,
            ),
            Target::Cluster(client) => Link::Cluster(Box::new(client.get_connection()?)),
            Target::Sentinel(sentinel) => {
                let client = sentinel
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_client()?;
                Link::Single(
                    client.get_connection_with_timeout(self.connect_wait(&client, deadline)?)?,
                )
            }
        };
        Ok(Conn {
            generation: self.generation.load(Ordering::Acquire),
            link,
            broken: false,
        })
    }
}

impl Connect for Manager {
    type Conn = Conn;
    type Error = RedisError;

    fn connect(&self, deadline: Instant) -> std::result::Result<Conn, RedisError> {
        self.open(deadline)
    }

    fn is_broken(&self, con: &mut Conn) -> bool {
        con.broken || !con.as_like().is_open()
    }
}

/// The connections of one process: its pool, the circuit breaker, and the
/// generation of connections still trusted.
struct Connections {
    pool: Pool<Manager>,
    /// The bound on one call: getting a connection, its setup and the command.
    timeout: Duration,
    breaker: Breaker,
    generation: Arc<AtomicU64>,
    /// Whether this process's checks use the module or the script.
    paths: Paths,
    /// The one multiplexed connection awaitable checks share.
    #[cfg(feature = "async")]
    aio: aio::AsyncSide,
}

impl Connections {
    fn open(url: &StoreUrl, options: &StoreOptions) -> Result<Connections> {
        let target = parse_target(url, options)?;
        let generation = Arc::new(AtomicU64::new(0));
        let manager = Manager {
            target,
            connect_timeout: options.connect_timeout,
            generation: generation.clone(),
        };
        let pool = Pool::new(manager, options.pool_size, options.connect_timeout);
        Ok(Connections {
            pool,
            timeout: options.timeout,
            breaker: Breaker::default(),
            generation,
            paths: Paths::new(options.redis_module),
            #[cfg(feature = "async")]
            aio: aio::AsyncSide::new(
                parse_target(url, options)?,
                options.timeout,
                options.connect_timeout,
            ),
        })
    }
}

/// A store in Redis, single node or Cluster.
pub struct RedisStore {
    local: ProcessLocal<Result<Connections>>,
    prefix: String,
    check: Lua,
    policy: Lua,
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
            check: Lua::new(SCRIPT, CHECK_COMMAND),
            policy: Lua::new(POLICY_SCRIPT, POLICY_COMMAND),
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

    /// Runs `f` on a fresh pooled connection, behind the circuit breaker: the
    /// outer error when Redis could not be reached, the inner one when it
    /// answered with an error. Each call counts once with the breaker. The
    /// whole call (waiting for a connection, making and setting it up, the
    /// command) ends within `timeout`. A reply that cannot be read (as a
    /// server quoting bytes that are not UTF-8 in an error) is that call's
    /// error alone: Redis answered, so the breaker is not told of an outage.
    fn on_connection<T>(
        &self,
        f: impl FnOnce(&mut Conn, Instant) -> redis::RedisResult<T>,
    ) -> Result<std::result::Result<T, RedisError>> {
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
        let keys: &[&[u8]] = match (r.policy, r.scope.is_empty()) {
            (false, _) => &[&log],
            (true, true) => &[&log, &record],
            // the bans the key earned in this scope, read in the same call
            (true, false) => &[&log, &record, &banned],
        };
        let mut cmd = self.check.command(via, keys);
        script_args(&mut cmd, r);
        cmd
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
        let answer = match self.run(&command(Via::Sha), None)? {
            Err(e) if is_noscript(&e) => self.run(&command(Via::Source), None)?,
            other => other,
        }
        .map_err(storage_error)?;
        paths.answered(Path::Script);
        Ok(answer)
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

    /// A command answered by Redis (or a storage error).
    fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        self.run(cmd, None)?.map_err(storage_error)
    }
}

/// Sends the next call through the probe again when a call's reply could not be read.
fn unreadable<T>(answered: &Result<std::result::Result<T, RedisError>>, paths: &Paths) {
    if matches!(answered, Ok(Err(e)) if e.kind() == redis::ErrorKind::Parse) {
        paths.unsettle();
    }
}

/// The error of a call that ran out of its time.
fn timed_out() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no answer within the timeout",
    ))
}

/// Whether an error means this connection cannot serve checks: Redis did not
/// answer, or answered that it is not (or no longer) a writable master, as
/// after a failover, or that it is still loading.
fn unreachable(e: &RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.is_unrecoverable_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_io_error()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::ReadOnly
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::BusyLoading
            )
        )
}

/// Where a call to Redis failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Opening a plain-text connection.
    Connect,
    /// Opening a TLS connection.
    TlsConnect,
    /// A command on an open connection.
    Command,
}

/// What a failure to reach Redis says, naming the URL as `shown` (without
/// its password) and, for a TLS failure, its likely cause.
fn describe(shown: &str, e: &RedisError, step: Step) -> String {
    let mut text = e.to_string();
    if e.is_timeout() {
        text = format!("no answer in time ({text})");
    }
    let hint = if e.is_timeout() && step == Step::TlsConnect {
        " (no TLS handshake: is this port a plain-text one? A TLS port serves rediss://)"
    } else if text.contains("UnknownIssuer") || text.contains("invalid peer certificate") {
        " (the server's certificate is not signed by a CA this client trusts: \
         give the CA's file as ssl_ca_certs)"
    } else if text.contains("corrupt message") || text.contains("InvalidContentType") {
        " (TLS got a reply that is not TLS: is this port a plain-text one?)"
    } else if text.contains("DB index is out of range") {
        " (this Redis has fewer databases: the /number at the end of the URL is past them)"
    } else if text.contains("ClusterConnectionNotFound")
        || text.contains("cluster support disabled")
    {
        " (no Redis Cluster answered: for a single Redis use redis://host:port/db, not redis+cluster://)"
    } else if text.contains("CertificateRequired") || text.contains("certificate required") {
        " (the server asks for a client certificate: give ssl_certfile and ssl_keyfile)"
    } else {
        ""
    };
    format!("Redis at {shown}: {text}{hint}")
}

fn storage_error(e: RedisError) -> Error {
    Error::storage(e.to_string())
}

/// The TLS mode of a `rediss` URL's settings.
fn tls_mode(tls: &Tls) -> redis::TlsMode {
    if tls.verify {
        redis::TlsMode::Secure
    } else {
        redis::TlsMode::Insecure
    }
}

/// A node's URL for the Redis client: `#insecure` when certificates are not checked.
fn node_url(scheme: &str, auth: &str, host: &str, tls: Option<&Tls>) -> String {
    let insecure = if tls.is_some_and(|t| !t.verify) && !host.contains('#') {
        "#insecure"
    } else {
        ""
    };
    format!("{scheme}://{auth}{host}{insecure}")
}

/// A client for one node URL, with the CA and client certificate when given.
/// Its connections send no `CLIENT SETINFO` as they are set up: the client
/// pipelines those and then waits a whole timeout for each reply when Redis
/// does not answer, so a new connection to a frozen Redis would hold a check
/// for several timeouts (and a healthy one pays a round trip for them).
fn node_client(url: &str, tls: Option<&Tls>) -> redis::RedisResult<redis::Client> {
    use redis::IntoConnectionInfo;
    let info = url.into_connection_info()?;
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    let info = info.set_redis_settings(settings);
    match tls.and_then(Tls::certificates) {
        Some(certificates) => redis::Client::build_with_tls(info, certificates),
        None => redis::Client::open(info),
    }
}

/// How many replies setting up a connection of `client` waits for (`AUTH`
/// with a password, `SELECT` for a database other than 0, and the two
/// `CLIENT SETINFO` of a client made elsewhere, as Sentinel's): each waits up
/// to what is left of the connect timeout.
fn setup_replies(client: &redis::Client) -> u32 {
    let settings = client.get_connection_info().redis_settings();
    u32::from(settings.password().is_some())
        + u32::from(settings.db() != 0)
        + 2 * u32::from(!settings.skip_set_lib_name())
}

fn is_noscript(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Splits `[auth@]h1:p1,h2:p2[/path]` into the auth part (with its `@`), the
/// hosts, and the path.
fn split_hosts(rest: &str) -> (String, Vec<String>, &str) {
    let (auth, tail) = match rest.rsplit_once('@') {
        Some((auth, tail)) => (format!("{auth}@"), tail),
        None => (String::new(), rest),
    };
    let (hosts, path) = tail.split_once('/').unwrap_or((tail, ""));
    let hosts = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect();
    (auth, hosts, path)
}

/// What a store URL points at.
fn parse_target(url: &StoreUrl, options: &StoreOptions) -> Result<Target> {
    let bad = |why: &str| Error::config(format!("invalid store URL '{}': {why}", url.shown));
    let tls = url.tls.as_ref();
    let rest = url.rest.as_str();
    if let Some(node_scheme) = url.scheme.strip_suffix("+cluster") {
        let (auth, hosts, path) = split_hosts(rest);
        if hosts.is_empty() || !path.is_empty() {
            return Err(bad(
                "give the cluster nodes as host:port,host:port, with no database",
            ));
        }
        let nodes: Vec<String> = hosts
            .iter()
            .map(|h| node_url(node_scheme, &auth, h, tls))
            .collect();
        let mut builder = redis::cluster::ClusterClientBuilder::new(nodes)
            .connection_timeout(options.connect_timeout)
            .response_timeout(options.timeout)
            // The client would resend a timed-out script (logging it twice)
            // and multiply the wait; redirects are retried in `run` instead.
            .retries(0);
        if let Some(tls) = tls {
            builder = builder.tls(tls_mode(tls));
            if let Some(certificates) = tls.certificates() {
                builder = builder.certs(certificates);
            }
        }
        let client = builder.build().map_err(|e| bad(&e.to_string()))?;
        return Ok(Target::Cluster(client));
    }
    if let Some(node_scheme) = url.scheme.strip_suffix("+sentinel") {
        let (auth, hosts, path) = split_hosts(rest);
        let mut parts = path.split('/');
        let master = parts.next().unwrap_or("");
        let db = match parts.next() {
            None | Some("") => 0,
            Some(db) => db
                .parse::<i64>()
                .map_err(|_| bad("the database must be a number"))?,
        };
        if hosts.is_empty() || master.is_empty() {
            return Err(bad("give the sentinels and the master name: redis+sentinel://host:port,host:port/mymaster[/db]"));
        }
        let sentinels = hosts
            .iter()
            .map(|h| {
                node_client(&node_url(node_scheme, "", h, tls), tls)
                    .map(|client| client.get_connection_info().addr().clone())
            })
            .collect::<redis::RedisResult<Vec<_>>>()
            .map_err(|e| bad(&e.to_string()))?;
        let mut builder = redis::sentinel::SentinelClientBuilder::new(
            sentinels,
            master,
            redis::sentinel::SentinelServerType::Master,
        )
        .map_err(|e| bad(&e.to_string()))?
        .set_client_to_redis_db(db);
        let credentials = auth.trim_end_matches('@');
        if let Some((user, password)) = credentials.split_once(':') {
            if !user.is_empty() {
                builder = builder.set_client_to_redis_username(user);
            }
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(tls) = tls {
            builder = builder
                .set_client_to_redis_tls_mode(tls_mode(tls))
                .set_client_to_sentinel_tls_mode(tls_mode(tls));
            if let Some(certificates) = tls.certificates() {
                builder = builder.set_client_to_redis_certificates(certificates);
            }
        }
        let client = builder.build().map_err(|e| bad(&e.to_string()))?;
        return Ok(Target::Sentinel(std::sync::Mutex::new(client)));
    }
    if rest.is_empty() {
        return Err(bad("no host"));
    }
    let node = node_url(&url.scheme, "", rest, tls);
    Ok(Target::Single(
        node_client(&node, tls).map_err(|e| bad(&e.to_string()))?,
    ))
}

/// Appends a check's arguments (see [`SCRIPT`]) to `cmd`.
fn script_args(cmd: &mut redis::Cmd, r: &Request<'_>) {
    cmd.arg(if r.mode == Mode::Check { "c" } else { "p" })
        .arg(r.cost);
    match r.now_ms {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    rule_args(cmd, r.rules);
    if r.policy {
        for (name, rules) in r.tiers {
            cmd.arg(name.as_str());
            rule_args(cmd, rules);
        }
    }
}

/// A rule set as the check script takes it: the count, the windows as the
/// log's header stores them (5 bytes each, big-endian, so the script tells
/// whether a log fits these rules with one comparison), the limits, the windows.
fn rule_args(cmd: &mut redis::Cmd, rules: &RuleSet) {
    cmd.arg(rules.rules().len())
        .arg(rules.log_rules().encoded.as_slice());
    for rule in rules.rules() {
        cmd.arg(rule.limit);
    }
    for rule in rules.rules() {
        cmd.arg(rule.window_ms);
    }
}

impl LogStore for RedisStore {
    #[cfg(feature = "async")]
    fn as_async(&self) -> Option<&dyn AsyncLogStore> {
        Some(self)
    }

    fn apply(&self, request: &Request<'_>) -> Result<Observation> {
        let route = self.route(request);
        let reply: Vec<Value> =
            self.script(route.as_deref(), |via| self.check_command(request, via))?;
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

    fn reset(&self, tag: &[u8], scope: &str) -> Result<()> {
        self.query(redis::cmd("DEL").arg(log_key(&self.prefix, tag, scope)))
    }

    fn clock_ms(&self) -> Result<u64> {
        let (secs, micros): (u64, u64) = self.query(&redis::cmd("TIME"))?;
        Ok(secs * 1000 + micros / 1000)
    }
}

impl PolicyStore for RedisStore {
    fn record(&self, tag: &[u8], scope: &str) -> Result<RawRecord> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(record_key(&self.prefix, tag, scope));
        for field in Field::ALL {
            cmd.arg(field.code());
        }
        let values: Vec<Option<String>> = self.query(&cmd)?;
        let mut raw = RawRecord::default();
        for (slot, value) in raw.iter_mut().zip(values) {
            *slot = value;
        }
        Ok(raw)
    }

    fn set_record(
        &self,
        tag: &[u8],
        scope: &str,
        field: Field,
        value: Option<&str>,
        now_ms: u64,
    ) -> Result<()> {
        let key = record_key(&self.prefix, tag, scope);
        self.script::<i64>(Some(&key), |via| {
            let mut cmd = self.policy.command(via, &[&key]);
            cmd.arg("set").arg(now_ms).arg(field.code());
            if let Some(value) = value {
                cmd.arg(value);
            }
            cmd
        })?;
        Ok(())
    }

    fn shared(&self, hash: SharedHash) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.query(redis::cmd("HGETALL").arg(hash.key(&self.prefix)))
    }

    fn set_shared(&self, hash: SharedHash, field: &[u8], value: Option<&[u8]>) -> Result<bool> {
        let key = hash.key(&self.prefix);
        let existed = match value {
            Some(value) => {
                let added: i64 = self.query(redis::cmd("HSET").arg(&key).arg(field).arg(value))?;
                added == 0
            }
            None => self.query::<i64>(redis::cmd("HDEL").arg(&key).arg(field))? == 1,
        };
        if hash.held_in_process() {
            self.query::<i64>(redis::cmd("INCR").arg(version_key(&self.prefix)))?;
        }
        Ok(existed)
    }

    fn policy_version(&self) -> Result<u64> {
        let version: Option<u64> = self.query(redis::cmd("GET").arg(version_key(&self.prefix)))?;
        Ok(version.unwrap_or(0))
    }

    fn strike(&self, tag: &[u8], rule: &Fail2Ban, now_ms: Option<u64>) -> Result<Strike> {
        let key = strikes_key(&self.prefix, tag, &rule.name);
        let (now, strikes, banned): (u64, u64, i64) = self.script(Some(&key), |via| {
            let mut cmd = self.policy.command(via, &[&key]);
            cmd.arg("strike");
            match now_ms {
                Some(now) => cmd.arg(now),
                None => cmd.arg(""),
            };
            cmd.arg(rule.maxretry).arg(rule.findtime_ms);
            cmd
        })?;
        let banned = banned == 1;
        Ok(Strike {
            strikes,
            banned,
            until_ms: banned.then_some(now + rule.bantime_ms),
        })
    }
}

/// The replies of a pipeline of `count` checks, or, when the pipeline as a
/// whole failed (Redis unreachable, an error, replies missing), the outcome
/// each of its checks gets.
fn pipeline_replies<T>(
    count: usize,
    answered: Result<std::result::Result<Vec<T>, RedisError>>,
) -> std::result::Result<Vec<T>, Vec<Result<Observation>>> {
    let failed = match answered {
        Ok(Ok(replies)) if replies.len() == count => return Ok(replies),
        Ok(Ok(replies)) => Error::storage(format!(
            "a pipeline of {count} checks got {} replies",
            replies.len()
        )),
        Ok(Err(e)) => storage_error(e),
        Err(e) => e,
    };
    Err((0..count).map(|_| Err(failed.clone())).collect())
}

/// The observation in the check script's reply (see [`SCRIPT`]).
fn parse_reply(reply: &[Value], request: &Request<'_>) -> Result<Observation> {
    let bad = || {
        Error::storage(format!(
            "unexpected reply from the ratekeeper script: {reply:?}"
        ))
    };
    let int = |v: &Value| match v {
        Value::Int(i) if *i >= -1 => Ok(*i),
        _ => Err(bad()),
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        _ => Err(bad()),
    };
    if reply.len() < 5 {
        return Err(bad());
    }
    let now_ms = int(&reply[0])? as u64;
    let allowed = int(&reply[1])? == 1;
    let detail = text(&reply[3])?;
    let decided_by = match int(&reply[2])? {
        0 => DecidedBy::Limited(Applied::from_detail(&detail)?),
        kind @ (1 | 2) => {
            let listing = Listing {
                until_ms: int(&reply[4])? as u64,
                reason: detail,
            };
            let list = if kind == 1 {
                crate::policy::List::Safe
            } else {
                crate::policy::List::Block
            };
            return Ok(Observation {
                now_ms,
                allowed,
                rules: Vec::new(),
                decided_by: DecidedBy::Listed(list, listing),
            });
        }
        _ => return Err(bad()),
    };
    let expected = match &decided_by {
        DecidedBy::Limited(Applied::Override(rules)) => rules.rules().len(),
        DecidedBy::Limited(Applied::Tier(name)) => request
            .tiers
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, r)| r.rules().len()),
        _ => request.rules.rules().len(),
    };
    let numbers = reply[5..].iter().map(int).collect::<Result<Vec<i64>>>()?;
    if numbers.len() != 3 * expected {
        return Err(bad());
    }
    let at = |v: i64| (v >= 0).then_some(v as u64);
    Ok(Observation {
        now_ms,
        allowed,
        rules: numbers
            .chunks_exact(3)
            .map(|c| RuleObservation {
                count: c[0] as u64,
                oldest_ms: at(c[1]),
                free_at_ms: at(c[2]),
            })
            .collect(),
        decided_by,
    })
}
