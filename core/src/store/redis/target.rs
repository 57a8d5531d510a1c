//! What a store URL points at (one node, a Cluster, a master that
//! Sentinel watches; TLS), how a client of one node is made, and the route
//! a key takes in a Cluster: what the blocking and the awaited connections
//! ([`super::connect`], [`super::aio`]) both reach.

use crate::error::{Error, Result};
use crate::store::url::{StoreUrl, Tls};
use crate::store::StoreOptions;

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
