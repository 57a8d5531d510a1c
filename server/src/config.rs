//! The policy file: the core's [`Spec`] (the one policy every door reads),
//! and where the server's doors listen unless it says.

use crate::error::ServerError;
use ratekeeper_core::gate::Spec;
use std::net::SocketAddr;

/// Where the HTTP door listens unless the file or `--listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8070";

/// Reads and checks the policy file at `path`, as a door that never sees
/// the response can hold it.
pub fn load(path: &std::path::Path) -> Result<Spec, ServerError> {
    Spec::load(path)
        .and_then(|spec| spec.check_unanswered().map(|()| spec))
        .map_err(|e| ServerError::Config(e.to_string()))
}

/// A listening address, or an error naming `name` (a key or a flag).
pub fn address(name: &str, text: &str) -> Result<SocketAddr, ServerError> {
    ratekeeper_core::gate::spec::address(name, text).map_err(|e| ServerError::Config(e.to_string()))
}

/// The HTTP door's address: the file's `listen`, else [`DEFAULT_LISTEN`].
pub fn listen(spec: &Spec) -> SocketAddr {
    spec.listen
        .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("a socket address"))
}
