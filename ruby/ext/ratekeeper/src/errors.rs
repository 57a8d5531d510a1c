//! Core errors and panics as the Ruby exceptions lib/ratekeeper/errors.rb defines:
//! `Ratekeeper::ConfigurationError` (an `ArgumentError`), `Ratekeeper::StorageError`
//! and `Ratekeeper::Error`.

use magnus::value::Lazy;
use magnus::{prelude::*, Error, ExceptionClass, RModule, Ruby};
use ratekeeper_core as core;

fn lookup(ruby: &Ruby, name: &str) -> ExceptionClass {
    ruby.class_object()
        .const_get::<_, RModule>("Ratekeeper")
        .and_then(|m| m.const_get::<_, ExceptionClass>(name))
        .unwrap_or_else(|_| ruby.exception_standard_error())
}

static BASE: Lazy<ExceptionClass> = Lazy::new(|ruby| lookup(ruby, "Error"));
static CONFIGURATION: Lazy<ExceptionClass> = Lazy::new(|ruby| lookup(ruby, "ConfigurationError"));
static STORAGE: Lazy<ExceptionClass> = Lazy::new(|ruby| lookup(ruby, "StorageError"));

/// Resolves the three exception classes now, in the extension's `init`
/// (lib/ratekeeper/errors.rb is loaded before it): a `Lazy` first resolved
/// later would call Ruby inside its once-lock, where a thread switch while
/// another thread holds the GVL and waits on the same lock hangs the process.
pub fn init(ruby: &Ruby) {
    for class in [&BASE, &CONFIGURATION, &STORAGE] {
        Lazy::force(class, ruby);
    }
}

/// A core error as the matching Ruby exception.
pub fn to_ruby(ruby: &Ruby, err: core::Error) -> Error {
    match err {
        core::Error::Config(message) => Error::new(ruby.get_inner(&CONFIGURATION), message),
        storage @ core::Error::Storage(_) => {
            Error::new(ruby.get_inner(&STORAGE), storage.to_string())
        }
    }
}

/// A `Ratekeeper::ConfigurationError` with this message.
pub fn config_error(ruby: &Ruby, message: impl Into<String>) -> Error {
    Error::new(ruby.get_inner(&CONFIGURATION), message.into())
}

/// A `TypeError` with this message.
pub fn type_error(ruby: &Ruby, message: impl Into<String>) -> Error {
    Error::new(ruby.exception_type_error(), message.into())
}

/// The result of core code run without the GVL, with a panic as `Ratekeeper::Error`.
pub fn settle<T>(ruby: &Ruby, outcome: std::thread::Result<core::Result<T>>) -> Result<T, Error> {
    match outcome {
        Ok(result) => result.map_err(|e| to_ruby(ruby, e)),
        Err(panic) => Err(Error::new(
            ruby.get_inner(&BASE),
            format!("internal error: {}", panic_message(&panic)),
        )),
    }
}

/// Runs core code with the GVL held, catching any panic.
pub fn guard<T>(ruby: &Ruby, f: impl FnOnce() -> core::Result<T>) -> Result<T, Error> {
    settle(
        ruby,
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)),
    )
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}
