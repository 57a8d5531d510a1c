//! How this process reaches Redis: the connections the pool lends (each
//! call bound by its deadline), the pool's manager that opens them, and the
//! connections one process holds (what they reach is [`super::target`]).

#[cfg(feature = "async")]
use super::aio;
use super::failure::timed_out;
use super::module::Paths;
use super::target::{parse_target, routing, setup_replies, Target};
use crate::error::Result;
use crate::store::breaker::Breaker;
use crate::store::pool::{Connect, Pool};
use crate::store::url::StoreUrl;
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
