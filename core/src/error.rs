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

/// A number as a message quotes it: as written for everyday values, in
/// scientific notation for huge or tiny ones (`1e300`, not 301 digits).
pub fn shown(value: f64) -> String {
    if value != 0.0 && value.is_finite() && !(1e-6..1e15).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// Result alias for the core.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_are_shown_short() {
        assert_eq!(super::shown(0.25), "0.25");
        assert_eq!(super::shown(-1.0), "-1");
        assert_eq!(super::shown(1e300), "1e300");
        assert_eq!(super::shown(1e-9), "1e-9");
        assert_eq!(super::shown(f64::NAN), "NaN");
    }
}
