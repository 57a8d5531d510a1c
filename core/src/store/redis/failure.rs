//! How a failed call to Redis is told apart and worded: a timeout, a server
//! that cannot serve checks (unreachable, a replica, loading), a reply that
//! could not be read, and the storage error that names the URL without its
//! password.

use super::module::Paths;
use crate::error::{Error, Result};
use redis::RedisError;

/// Sends the next call through the probe again when a call's reply could not be read.
pub(super) fn unreadable<T>(answered: &Result<std::result::Result<T, RedisError>>, paths: &Paths) {
    if matches!(answered, Ok(Err(e)) if e.kind() == redis::ErrorKind::Parse) {
        paths.unsettle();
    }
}

/// The error of a call that ran out of its time.
pub(super) fn timed_out() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no answer within the timeout",
    ))
}

/// Whether an error means this connection cannot serve checks: Redis did not
/// answer, or answered that it is not (or no longer) a writable master, as
/// after a failover, or that it is still loading.
pub(super) fn unreachable(e: &RedisError) -> bool {
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
pub(super) enum Step {
    /// Opening a plain-text connection.
    Connect,
    /// Opening a TLS connection.
    TlsConnect,
    /// A command on an open connection.
    Command,
}

/// What a failure to reach Redis says, naming the URL as `shown` (without
/// its password) and, for a TLS failure, its likely cause.
pub(super) fn describe(shown: &str, e: &RedisError, step: Step) -> String {
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

pub(super) fn storage_error(e: RedisError) -> Error {
    Error::storage(e.to_string())
}
