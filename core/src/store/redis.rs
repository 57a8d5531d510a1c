//! The Redis store: one EVALSHA per check, whatever the number of rules.
//!
//! Connections come from an r2d2 pool with connect and command timeouts; the
//! script ([`SCRIPT`]) is run by its SHA-1 and sent again on `NOSCRIPT` (after a
//! restart or `SCRIPT FLUSH`). `redis+cluster://` routes each check to the slot
//! of its key's `{tag}`.

use super::{Mode, Store, StoreOptions};
use crate::decision::{Observation, RuleObservation};
use crate::error::{Error, Result};
use crate::keys::log_key;
use crate::rule::RuleSet;
use redis::{ConnectionLike, RedisError};
use std::time::Duration;

/// The Lua script that checks and logs one key against a rule set.
pub const SCRIPT: &str = include_str!("../../lua/check.lua");

/// A Redis connection of either kind, as the pool hands it out.
struct Conn {
    link: Link,
    /// Set after a timeout or I/O error: a late reply may still arrive, so the
    /// pool must drop this connection rather than hand it out again.
    broken: bool,
}

enum Link {
    Single(redis::Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl Conn {
    fn as_like(&mut self) -> &mut dyn ConnectionLike {
        match &mut self.link {
            Link::Single(c) => c,
            Link::Cluster(c) => c.as_mut(),
        }
    }
}

enum Target {
    Single(redis::Client),
    Cluster(redis::cluster::ClusterClient),
}

/// Opens connections with the configured timeouts, for r2d2.
struct Manager {
    target: Target,
    timeout: Duration,
    connect_timeout: Duration,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = RedisError;

    fn connect(&self) -> std::result::Result<Conn, RedisError> {
        let link = match &self.target {
            Target::Single(client) => {
                let con = client.get_connection_with_timeout(self.connect_timeout)?;
                con.set_read_timeout(Some(self.timeout))?;
                con.set_write_timeout(Some(self.timeout))?;
                Link::Single(con)
            }
            Target::Cluster(client) => Link::Cluster(Box::new(client.get_connection()?)),
        };
        Ok(Conn {
            link,
            broken: false,
        })
    }

    fn is_valid(&self, con: &mut Conn) -> std::result::Result<(), RedisError> {
        redis::cmd("PING").query::<()>(con.as_like())
    }

    fn has_broken(&self, con: &mut Conn) -> bool {
        con.broken || !con.as_like().is_open()
    }
}

/// A store in Redis, single node or Cluster.
pub struct RedisStore {
    pool: r2d2::Pool<Manager>,
    prefix: String,
    sha: String,
}

impl RedisStore {
    /// Opens a pool for `url` (`redis://`, `rediss://`, `redis+cluster://h:p,h:p`).
    /// Connections are made lazily, so this succeeds while Redis is down.
    pub fn open(url: &str, options: &StoreOptions) -> Result<RedisStore> {
        let bad = |why: String| Error::config(format!("invalid store URL '{url}': {why}"));
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("no scheme".into()))?;
        let scheme = scheme.to_ascii_lowercase();
        let target = if let Some(single) = scheme.strip_suffix("+cluster") {
            let (auth, hosts) = match rest.rsplit_once('@') {
                Some((auth, hosts)) => (format!("{auth}@"), hosts),
                None => (String::new(), rest),
            };
            let hosts = hosts.trim_end_matches('/');
            if hosts.is_empty() || hosts.contains('/') {
                return Err(bad(
                    "give the cluster nodes as host:port,host:port with no database".into(),
                ));
            }
            let nodes: Vec<String> = hosts
                .split(',')
                .map(|h| format!("{single}://{auth}{}", h.trim()))
                .collect();
            let client = redis::cluster::ClusterClientBuilder::new(nodes)
                .connection_timeout(options.connect_timeout)
                .response_timeout(options.timeout)
                .build()
                .map_err(|e| bad(e.to_string()))?;
            Target::Cluster(client)
        } else {
            if rest.is_empty() {
                return Err(bad("no host".into()));
            }
            Target::Single(redis::Client::open(url).map_err(|e| bad(e.to_string()))?)
        };
        let manager = Manager {
            target,
            timeout: options.timeout,
            connect_timeout: options.connect_timeout,
        };
        let pool = r2d2::Pool::builder()
            .max_size(options.pool_size)
            .min_idle(Some(0))
            .test_on_check_out(false)
            .connection_timeout(options.connect_timeout + options.timeout)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(manager);
        Ok(RedisStore {
            pool,
            prefix: options.prefix.clone(),
            sha: sha1_smol::Sha1::from(SCRIPT).digest().to_string(),
        })
    }

    fn connection(&self) -> Result<r2d2::PooledConnection<Manager>> {
        self.pool
            .get()
            .map_err(|e| Error::storage(format!("no Redis connection: {e}")))
    }

    /// Runs one command on a pooled connection: the outer error when no
    /// connection could be had, the inner one when the command failed.
    fn run<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<std::result::Result<T, RedisError>> {
        let mut con = self.connection()?;
        let result = cmd.query::<T>(con.as_like());
        if let Err(e) = &result {
            con.broken = e.is_unrecoverable_error()
                || e.is_timeout()
                || e.is_connection_dropped()
                || e.is_io_error();
        }
        Ok(result)
    }
}

fn storage_error(e: RedisError) -> Error {
    Error::storage(e.to_string())
}

fn is_noscript(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Appends the script's keys and arguments (see [`SCRIPT`]) to `cmd`.
fn script_args(
    cmd: &mut redis::Cmd,
    key: &[u8],
    rules: &RuleSet,
    cost: u64,
    now_ms: Option<u64>,
    mode: Mode,
) {
    cmd.arg(1)
        .arg(key)
        .arg(if mode == Mode::Check { "c" } else { "p" })
        .arg(cost);
    match now_ms {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    for rule in rules.rules() {
        cmd.arg(rule.limit).arg(rule.window_ms);
    }
}

impl Store for RedisStore {
    fn apply(
        &self,
        tag: &[u8],
        rules: &RuleSet,
        cost: u64,
        now_ms: Option<u64>,
        mode: Mode,
    ) -> Result<Observation> {
        let key = log_key(&self.prefix, tag);
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(&self.sha);
        script_args(&mut evalsha, &key, rules, cost, now_ms, mode);
        let reply: Vec<i64> = match self.run(&evalsha)? {
            Err(e) if is_noscript(&e) => {
                // Redis restarted or its script cache was flushed: EVAL sends the
                // script and caches it again for the next EVALSHA.
                let mut eval = redis::cmd("EVAL");
                eval.arg(SCRIPT);
                script_args(&mut eval, &key, rules, cost, now_ms, mode);
                self.run(&eval)?.map_err(storage_error)?
            }
            other => other.map_err(storage_error)?,
        };
        parse_reply(&reply, rules.rules().len())
    }

    fn reset(&self, tag: &[u8]) -> Result<()> {
        let key = log_key(&self.prefix, tag);
        self.run::<()>(redis::cmd("DEL").arg(&key))?
            .map_err(storage_error)
    }
}

fn parse_reply(reply: &[i64], rules: usize) -> Result<Observation> {
    if reply.len() != 2 + 3 * rules || reply.iter().any(|&v| v < -1) {
        return Err(Error::storage(format!(
            "unexpected reply from the ratekeeper script: {reply:?}"
        )));
    }
    let at = |v: i64| (v >= 0).then_some(v as u64);
    Ok(Observation {
        now_ms: reply[0] as u64,
        allowed: reply[1] == 1,
        rules: reply[2..]
            .chunks_exact(3)
            .map(|c| RuleObservation {
                count: c[0] as u64,
                oldest_ms: at(c[1]),
                free_at_ms: at(c[2]),
            })
            .collect(),
    })
}
