//! How this process reaches Redis: what a store URL points at (one node, a
//! Cluster, Sentinel; TLS), the connections the pool lends (each call bound
//! by its deadline), the pool's manager that opens them, and the
//! connections one process holds.

#[cfg(feature = "async")]
use super::aio;
use super::failure::timed_out;
use super::module::Paths;
use crate::error::{Error, Result};
use crate::store::breaker::Breaker;
use crate::store::pool::{Connect, Pool};
use crate::store::url::{StoreUrl, Tls};
use crate::store::StoreOptions;
use redis::{ConnectionLike, RedisError, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A Redis connection of either kind, as the pool hands it out.
pub(super) struct Conn {
    pub(super) link: Link,
    /// Set after a timeout or I/O error: a late reply may still arrive, so the
    /// pool must drop this connection rather than hand it out again.
    pub(super) broken: bool,
    /// The manager's generation when this connection was made.
    pub(super) generation: u64,
    /// The socket timeouts last set on it (reading, writing): each is set
    /// again only when a call's time left differs by more than
    /// [`timeout_slack`], saving two system calls a check.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

/// How far a socket timeout already set may be from what is left of a call
/// and still be kept: 1/64 of it, 1 ms at most (the wait for a pooled
/// connection is what makes them differ, usually by microseconds).
fn timeout_slack(left: Duration) -> Duration {
    (left / 64).min(Duration::from_millis(1))
}

/// Sets a socket timeout to `left` by `apply` unless the one last `set`
/// stands for a call with `left` to go (within [`timeout_slack`]); `set`
/// keeps what was set (forgotten first: a failed call leaves it unknown).
fn renew(
    set: &mut Option<Duration>,
    left: Duration,
    apply: impl FnOnce(Duration) -> redis::RedisResult<()>,
) -> redis::RedisResult<()> {
    if set.is_some_and(|set| set.abs_diff(left) <= timeout_slack(left)) {
        return Ok(());
    }
    *set = None;
    apply(left)?;
    *set = Some(left);
    Ok(())
}

pub(super) enum Link {
    Single(redis::Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl Link {
    fn set_read_timeout(&self, timeout: Duration) -> redis::RedisResult<()> {
        match self {
            Link::Single(c) => c.set_read_timeout(Some(timeout)),
            Link::Cluster(c) => c.set_read_timeout(Some(timeout)),
        }
    }

    fn set_write_timeout(&self, timeout: Duration) -> redis::RedisResult<()> {
        match self {
            Link::Single(c) => c.set_write_timeout(Some(timeout)),
            Link::Cluster(c) => c.set_write_timeout(Some(timeout)),
        }
    }
}

impl Conn {
    /// Makes the next command wait at most until `deadline` (give or take
    /// [`timeout_slack`]): what is left of the one call's `timeout` after
    /// getting this connection.
    pub(super) fn limit(&mut self, deadline: Instant) -> redis::RedisResult<()> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        let link = &self.link;
        renew(&mut self.read_timeout, left, |t| link.set_read_timeout(t))?;
        renew(&mut self.write_timeout, left, |t| link.set_write_timeout(t))
    }

    pub(super) fn as_like(&mut self) -> &mut dyn ConnectionLike {
        match &mut self.link {
            Link::Single(c) => c,
            Link::Cluster(c) => c.as_mut(),
        }
    }

    /// The replies of a pipeline of checks, each read by `deadline`: the
    /// client's own pipeline would wait a whole timeout for every reply once
    /// Redis stops answering. The outer error when Redis did not answer (the
    /// rest are not waited for), each reply's own error inside.
    pub(super) fn pipeline(
        &mut self,
        pipe: &redis::Pipeline,
        count: usize,
        deadline: Instant,
    ) -> redis::RedisResult<Vec<redis::RedisResult<Value>>> {
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
            renew(&mut self.read_timeout, left, |t| {
                con.set_read_timeout(Some(t))
            })?;
            replies.push(con.recv_response()?.extract_error());
        }
        Ok(replies)
    }

    /// Runs `cmd`; on a Cluster, on the master of `route`'s slot when given
    /// (the module's commands name their keys after a count, which the
    /// client's own routing does not read).
    pub(super) fn query<T: redis::FromRedisValue>(
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
pub(super) fn routing(key: &[u8]) -> redis::cluster_routing::RoutingInfo {
    use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(
        key,
        SlotAddr::Master,
    )))
}

pub(super) enum Target {
    Single(redis::Client),
    Cluster(redis::cluster::ClusterClient),
    /// Each new connection asks the sentinels where the master is now.
    Sentinel(std::sync::Mutex<redis::sentinel::SentinelClient>),
}

/// Opens connections with the configured timeouts, for the pool.
pub(super) struct Manager {
    pub(super) target: Target,
    pub(super) connect_timeout: Duration,
    /// Bumped whenever Redis fails to answer: connections made before are
    /// suspect (a restarted Redis reset them all) and are not used again.
    pub(super) generation: Arc<AtomicU64>,
}

impl Manager {
    /// How long making a connection of `client` may take: `connect_timeout`,
    /// and no longer than the call's deadline allows. The client waits up to
    /// that for the connection and then up to what is left of it for each
    /// setup reply, so with two replies to wait for it is given half.
    pub(super) fn connect_wait(
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
    pub(super) fn open(&self, deadline: Instant) -> std::result::Result<Conn, RedisError> {
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
            read_timeout: None,
            write_timeout: None,
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
pub(super) struct Connections {
    pub(super) pool: Pool<Manager>,
    /// The bound on one call: getting a connection, its setup and the command.
    pub(super) timeout: Duration,
    pub(super) breaker: Breaker,
    pub(super) generation: Arc<AtomicU64>,
    /// Whether this process's checks use the module or the script.
    pub(super) paths: Paths,
    /// The one multiplexed connection awaitable checks share.
    #[cfg(feature = "async")]
    pub(super) aio: aio::AsyncSide,
}

impl Connections {
    pub(super) fn open(url: &StoreUrl, options: &StoreOptions) -> Result<Connections> {
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

/// The TLS mode of a `rediss` URL's settings.
pub(super) fn tls_mode(tls: &Tls) -> redis::TlsMode {
    if tls.verify {
        redis::TlsMode::Secure
    } else {
        redis::TlsMode::Insecure
    }
}

/// A node's URL for the Redis client: `#insecure` when certificates are not checked.
pub(super) fn node_url(scheme: &str, auth: &str, host: &str, tls: Option<&Tls>) -> String {
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
pub(super) fn node_client(url: &str, tls: Option<&Tls>) -> redis::RedisResult<redis::Client> {
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
pub(super) fn setup_replies(client: &redis::Client) -> u32 {
    let settings = client.get_connection_info().redis_settings();
    u32::from(settings.password().is_some())
        + u32::from(settings.db() != 0)
        + 2 * u32::from(!settings.skip_set_lib_name())
}

/// Splits `[auth@]h1:p1,h2:p2[/path]` into the auth part (with its `@`), the
/// hosts, and the path.
pub(super) fn split_hosts(rest: &str) -> (String, Vec<String>, &str) {
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
pub(super) fn parse_target(url: &StoreUrl, options: &StoreOptions) -> Result<Target> {
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
