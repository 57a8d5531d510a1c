//! Which way a check goes: the Redis module's `RATEKEEPER.CHECK` when the
//! server has it loaded, else the script's `EVALSHA` (option `redis_module`).
//!
//! Both take the same keys and arguments and give the same reply (the
//! module runs [`crate::engine`], the script its Lua twin), so a process
//! switches between them at any time: it tries the module first; a server
//! that answers "unknown command" has none (the command did not run), and
//! the check goes through the script at once, without an error; so does a
//! Redis user whose ACL lacks the module's commands. The process then uses
//! the script and asks again after [`PROBE_AGAIN`] (a module loaded later, or
//! a server restarted with it, is picked up by then).

use crate::error::{Error, Result};
use redis::RedisError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The module's check command.
pub const CHECK_COMMAND: &str = "RATEKEEPER.CHECK";
/// The module's policy command.
pub const POLICY_COMMAND: &str = "RATEKEEPER.POLICY";
/// How long a process that found no module uses the script before it asks again.
pub const PROBE_AGAIN: Duration = Duration::from_secs(10);

/// Whether checks use the Redis module (the option `redis_module`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModuleUse {
    /// The module when the server has it, else the script (the default).
    #[default]
    Auto,
    /// Always the script.
    Off,
    /// Only the module: a server without it fails the check (and `on_error` decides).
    Require,
}

impl ModuleUse {
    /// The option's value as written.
    pub fn name(self) -> &'static str {
        match self {
            ModuleUse::Auto => "auto",
            ModuleUse::Off => "off",
            ModuleUse::Require => "require",
        }
    }
}

impl std::str::FromStr for ModuleUse {
    type Err = Error;

    fn from_str(text: &str) -> Result<ModuleUse> {
        match text {
            "auto" => Ok(ModuleUse::Auto),
            "off" => Ok(ModuleUse::Off),
            "require" => Ok(ModuleUse::Require),
            other => Err(Error::config(format!(
                "invalid redis_module '{}': give auto, off or require",
                other.escape_debug()
            ))),
        }
    }
}

/// The way one call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// `RATEKEEPER.CHECK` / `RATEKEEPER.POLICY`.
    Module,
    /// `EVALSHA`.
    Script,
}

/// One process's view of whether its Redis has the module, and how many
/// calls went each way.
#[derive(Debug)]
pub struct Paths {
    wanted: ModuleUse,
    /// When the server last answered that it has no module (None: it has, or
    /// it was not asked yet).
    absent_since: Mutex<Option<Instant>>,
    module_calls: AtomicU64,
    script_calls: AtomicU64,
}

impl Paths {
    /// The paths of a store with the option `wanted`.
    pub fn new(wanted: ModuleUse) -> Paths {
        Paths {
            wanted,
            absent_since: Mutex::new(None),
            module_calls: AtomicU64::new(0),
            script_calls: AtomicU64::new(0),
        }
    }

    /// The way the next call goes.
    pub fn choose(&self) -> Path {
        match self.wanted {
            ModuleUse::Off => Path::Script,
            ModuleUse::Require => Path::Module,
            ModuleUse::Auto => {
                let absent = self.absent_since.lock().unwrap_or_else(|p| p.into_inner());
                match *absent {
                    Some(since) if since.elapsed() < PROBE_AGAIN => Path::Script,
                    _ => Path::Module,
                }
            }
        }
    }

    /// Whether a module call's error says the server has no module, or this
    /// Redis user may not run it (an ACL without its commands); notes it.
    /// (The command then did not run.)
    pub fn lacks_module(&self, e: &RedisError) -> bool {
        let text = e.to_string().to_ascii_lowercase();
        let unknown = (text.contains("unknown command") || text.contains("noperm"))
            && text.contains("'ratekeeper.");
        if unknown {
            *self.absent_since.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
        unknown
    }

    /// Whether only the module may answer (`redis_module` is "require").
    pub fn required(&self) -> bool {
        self.wanted == ModuleUse::Require
    }

    /// What a check gets when `redis_module` is "require" and the server has none.
    pub fn missing(&self, shown: &str) -> Error {
        Error::storage(format!(
            "Redis at {shown} has no ratekeeper module loaded (redis_module is \"require\"): \
             load it with redis-server --loadmodule /path/to/libratekeeper_module.so \
             (or MODULE LOAD), or set redis_module to \"auto\""
        ))
    }

    /// Counts one call answered by `path`.
    pub fn answered(&self, path: Path) {
        let counter = match path {
            Path::Module => &self.module_calls,
            Path::Script => &self.script_calls,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Calls answered by the module and by the script, and the way the next goes.
    pub fn counts(&self) -> (u64, u64, Path) {
        (
            self.module_calls.load(Ordering::Relaxed),
            self.script_calls.load(Ordering::Relaxed),
            self.choose(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(name: &str) -> RedisError {
        let text = format!("-ERR unknown command '{name}', with args beginning with: '2' 'a' \r\n");
        let mut parser = redis::Parser::new();
        match parser.parse_value(text.as_bytes()).unwrap() {
            redis::Value::ServerError(e) => e.into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_module_command_switches_auto_to_the_script() {
        let paths = Paths::new(ModuleUse::Auto);
        assert_eq!(paths.choose(), Path::Module);
        assert!(!paths.lacks_module(&unknown("EVALSHA")));
        assert_eq!(paths.choose(), Path::Module);
        assert!(paths.lacks_module(&unknown("RATEKEEPER.CHECK")));
        assert_eq!(paths.choose(), Path::Script);
        assert_eq!(Paths::new(ModuleUse::Off).choose(), Path::Script);
        let required = Paths::new(ModuleUse::Require);
        assert!(required.lacks_module(&unknown("ratekeeper.check")));
        assert_eq!(required.choose(), Path::Module);
    }

    #[test]
    fn the_option_reads_its_three_values() {
        assert_eq!("require".parse::<ModuleUse>().unwrap(), ModuleUse::Require);
        let e = "on".parse::<ModuleUse>().unwrap_err().to_string();
        assert!(e.contains("invalid redis_module 'on'"), "{e}");
    }
}
