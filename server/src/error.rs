//! What the server fails with. Each message names the problem; none quotes
//! a store URL.

/// Everything the server can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The policy file, an option or a command-line argument is wrong.
    #[error("{0}")]
    Config(String),
    /// A forwarded request the server cannot read (a bad method, URI or address).
    #[error("{0}")]
    BadRequest(String),
    /// The core refused or failed (a store error under `on_error = "raise"`).
    #[error(transparent)]
    Core(#[from] ratekeeper_core::Error),
    /// A listener could not be bound or served.
    #[error("{0}")]
    Io(String),
}
