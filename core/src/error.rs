//! The one error type of the core. Each binding maps it to its own exception
//! hierarchy: `Config` to `ConfigurationError`, `Storage` to `StorageError`.

/// Everything the core can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Bad rules, store URL, option or argument: the message names the offending text.
    #[error("{0}")]
    Config(String),
    /// The store could not answer (unreachable, timed out, bad reply).
    #[error("storage error: {0}")]
    Storage(String),
}

impl Error {
    /// A configuration error with the given message.
    pub fn config(msg: impl Into<String>) -> Self {
        Error::Config(msg.into())
    }

    /// A storage error with the given message.
    pub fn storage(msg: impl Into<String>) -> Self {
        Error::Storage(msg.into())
    }
}

/// Result alias for the core.
pub type Result<T> = std::result::Result<T, Error>;
