//! Which way a check goes: the Redis module's `RATEKEEPER.CHECK` when the
//! server has it loaded, else the script's `EVALSHA` (option `redis_module`).
//!
//! Both take the same keys and arguments and give the same reply (the
//! module runs [`crate::engine`], the script its Lua twin), so a process
//! switches between them at any time. Before its first module call a
//! process asks whether the server has the module with a fixed probe
//! ([`probe`]: the module's command with no arguments, which a server with
//! the module refuses for its arity and one without answers "unknown
//! command"), never with a caller's key: Redis quotes a command's arguments
//! in that answer, and a key that is not UTF-8 would make it unreadable.
//! A module call that meets "unknown command" later (a server restarted
//! without it) goes through the script at once, without an error; so does a
//! Redis user whose ACL lacks the module's commands, and a module older than
//! the client, which asks a packed check for the script's arguments. The process then uses
//! the script and asks again after [`PROBE_AGAIN`] (a module loaded later, or
//! a server restarted with it, is picked up by then). A reply that cannot be
//! read fails that one call and sends the next through the probe again.

use crate::error::{Error, Result};
use redis::RedisError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The module's check command.
pub const CHECK_COMMAND: &str = "RATEKEEPER.CHECK";
/// The module's command that checks a key's several meters together.
pub const METERS_COMMAND: &str = "RATEKEEPER.METERS";
/// The module's hold command (an in-flight rule's slot, with the rates).
pub const HOLD_COMMAND: &str = "RATEKEEPER.HOLD";
/// The module's command that releases, extends or lists a key's leases.
pub const LEASES_COMMAND: &str = "RATEKEEPER.LEASES";
/// The module's record command.
pub const RECORD_COMMAND: &str = "RATEKEEPER.POLICY";
/// How long a process that found no module uses the script before it asks again.
pub const PROBE_AGAIN: Duration = Duration::from_secs(10);

/// The probe: the module's check command with no arguments. It never runs a
/// check; its answer is ASCII whatever the server (an arity error from the
/// module, "unknown command" without it, `NOPERM` for a user without it).
pub fn probe() -> redis::Cmd {
    redis::cmd(CHECK_COMMAND)
}

/// What a module older than packed checks answers one (lowercase).
const OUTDATED: &str = "ratekeeper: wrong number of arguments: give c|p, cost, now";

/// `Paths::state` before the server was asked.
const UNKNOWN: u64 = 0;
/// `Paths::state` once the server answered that it has the module.
const PRESENT: u64 = 1;

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

/// Why the module cannot answer a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lack {
    /// The server has no module loaded.
    NotLoaded,
    /// The Redis user's ACL does not let it run the module's commands.
    NotPermitted,
    /// The module is older than this client: it takes no packed check.
    Outdated,
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
    /// What `state` counts from.
    epoch: Instant,
    /// [`UNKNOWN`], [`PRESENT`], or when (ms after `epoch`, plus two) the
    /// server last answered that the module cannot answer. (An atomic: every
    /// check reads it.)
    state: AtomicU64,
    module_calls: AtomicU64,
    script_calls: AtomicU64,
}

impl Paths {
    /// The paths of a store with the option `wanted`.
    pub fn new(wanted: ModuleUse) -> Paths {
        Paths {
            wanted,
            epoch: Instant::now(),
            state: AtomicU64::new(UNKNOWN),
            module_calls: AtomicU64::new(0),
            script_calls: AtomicU64::new(0),
        }
    }

    /// The way the next call goes (after the probe, when [`Paths::due`]).
    pub fn choose(&self) -> Path {
        match self.wanted {
            ModuleUse::Off => Path::Script,
            ModuleUse::Require => Path::Module,
            ModuleUse::Auto => match self.state.load(Ordering::Relaxed) {
                PRESENT | UNKNOWN => Path::Module,
                at if self.now_ms() + 2 - at < PROBE_AGAIN.as_millis() as u64 => Path::Script,
                _ => Path::Module,
            },
        }
    }

    /// Whether the server is to be asked ([`probe`]) before the next call:
    /// with `redis_module` "auto", when it was not asked yet, or said it has
    /// no module [`PROBE_AGAIN`] ago.
    pub fn due(&self) -> bool {
        self.wanted == ModuleUse::Auto && self.choose() == Path::Module && !self.present()
    }

    fn present(&self) -> bool {
        self.state.load(Ordering::Relaxed) == PRESENT
    }

    /// Notes the probe's answer: "unknown command" or `NOPERM`, the module
    /// cannot answer; any other answer (its arity error), it can. A probe
    /// that was not answered changes nothing.
    pub fn probed<T>(&self, answered: &std::result::Result<T, RedisError>) {
        let lacking = match answered {
            Err(e) => self.lacks_module(e).is_some(),
            Ok(_) => false,
        };
        if !lacking {
            self.state.store(PRESENT, Ordering::Relaxed);
        }
    }

    /// Forgets what the server said: the next call asks again (after a
    /// module call whose reply could not be read).
    pub fn unsettle(&self) {
        if self.wanted == ModuleUse::Auto {
            self.state.store(UNKNOWN, Ordering::Relaxed);
        }
    }

    /// Why a module call's error says the module cannot answer: the server
    /// has none ("unknown command", quoted '...' by Redis 7 and `...` by
    /// Redis 6), this Redis user may not run it (an ACL without its
    /// commands), or the module predates packed checks (it asks for the
    /// script's arguments); notes it. (The command then did not run.)
    pub fn lacks_module(&self, e: &RedisError) -> Option<Lack> {
        let text = e.to_string().to_ascii_lowercase();
        let named = text.contains("ratekeeper.");
        let lack = if named && text.contains("unknown command") {
            Lack::NotLoaded
        } else if named && text.contains("noperm") {
            Lack::NotPermitted
        } else if text.contains(OUTDATED) {
            Lack::Outdated
        } else {
            return None;
        };
        self.state.store(self.now_ms() + 2, Ordering::Relaxed);
        Some(lack)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Whether only the module may answer (`redis_module` is "require").
    pub fn required(&self) -> bool {
        self.wanted == ModuleUse::Require
    }

    /// What a check gets when `redis_module` is "require" and the module cannot answer.
    pub fn missing(&self, shown: &str, lack: Lack) -> Error {
        Error::storage(match lack {
            Lack::NotLoaded => format!(
                "Redis at {shown} has no ratekeeper module loaded (redis_module is \"require\"): \
                 load it with redis-server --loadmodule /path/to/libratekeeper_module.so \
                 (or MODULE LOAD), or set redis_module to \"auto\""
            ),
            Lack::NotPermitted => format!(
                "the Redis user at {shown} may not run the ratekeeper module's commands \
                 (redis_module is \"require\"): add +ratekeeper.check +ratekeeper.policy to \
                 its ACL, or set redis_module to \"auto\""
            ),
            Lack::Outdated => format!(
                "the ratekeeper module at {shown} is older than this client and takes no \
                 packed checks (redis_module is \"require\"): load this version's module, \
                 or set redis_module to \"auto\""
            ),
        })
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

    fn server_error(text: &str) -> RedisError {
        let mut parser = redis::Parser::new();
        match parser
            .parse_value(format!("-{text}\r\n").as_bytes())
            .unwrap()
        {
            redis::Value::ServerError(e) => e.into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_module_command_switches_auto_to_the_script() {
        let redis7 = server_error(
            "ERR unknown command 'RATEKEEPER.CHECK', with args beginning with: '2' 'a' ",
        );
        let redis6 = server_error(
            "ERR unknown command `RATEKEEPER.CHECK`, with args beginning with: `2`, `a`, ",
        );
        let noperm = server_error(
            "NOPERM this user has no permissions to run the 'ratekeeper.check' command",
        );
        let other = server_error("ERR unknown command 'EVALSHA', with args beginning with: ");
        // what a module before packed checks answers one
        let outdated = server_error(
            "ERR ratekeeper: wrong number of arguments: give c|p, cost, now, then the rules",
        );
        let refused = server_error("ERR ratekeeper: the packed check's format is 9, not 1");
        for (e, lack) in [
            (&redis7, Some(Lack::NotLoaded)),
            (&redis6, Some(Lack::NotLoaded)),
            (&noperm, Some(Lack::NotPermitted)),
            (&outdated, Some(Lack::Outdated)),
            (&other, None),
            (&refused, None),
        ] {
            let paths = Paths::new(ModuleUse::Auto);
            assert_eq!(paths.choose(), Path::Module);
            assert_eq!(paths.lacks_module(e), lack, "{e}");
            let next = if lack.is_some() {
                Path::Script
            } else {
                Path::Module
            };
            assert_eq!(paths.choose(), next, "{e}");
        }
        assert_eq!(Paths::new(ModuleUse::Off).choose(), Path::Script);
        let required = Paths::new(ModuleUse::Require);
        assert!(required.lacks_module(&redis7).is_some());
        assert_eq!(required.choose(), Path::Module);
        let told = required
            .missing("redis://h:1/0", Lack::NotPermitted)
            .to_string();
        assert!(told.contains("+ratekeeper.check"), "{told}");
        let told = required
            .missing("redis://h:1/0", Lack::Outdated)
            .to_string();
        assert!(told.contains("older than this client"), "{told}");
    }

    #[test]
    fn the_probe_settles_auto_and_an_unreadable_reply_unsettles_it() {
        let arity = server_error("ERR wrong number of arguments: RATEKEEPER.CHECK numkeys ...");
        let unknown =
            server_error("ERR unknown command 'RATEKEEPER.CHECK', with args beginning with: ");
        let paths = Paths::new(ModuleUse::Auto);
        assert!(paths.due(), "asked before the first call");
        paths.probed::<()>(&Err(arity));
        assert!(!paths.due());
        assert_eq!(paths.choose(), Path::Module);
        paths.unsettle();
        assert!(paths.due(), "asked again after an unreadable reply");
        paths.probed::<()>(&Err(unknown));
        assert!(
            !paths.due(),
            "no module: the script, not asked again at once"
        );
        assert_eq!(paths.choose(), Path::Script);
        for wanted in [ModuleUse::Off, ModuleUse::Require] {
            let paths = Paths::new(wanted);
            assert!(!paths.due(), "{wanted:?} never probes");
            paths.unsettle();
            assert!(!paths.due());
        }
        let text = format!("{:?}", probe());
        assert!(
            !text.contains("numkeys"),
            "the probe has no arguments: {text}"
        );
    }

    #[test]
    fn the_option_reads_its_three_values() {
        assert_eq!("require".parse::<ModuleUse>().unwrap(), ModuleUse::Require);
        let e = "on".parse::<ModuleUse>().unwrap_err().to_string();
        assert!(e.contains("invalid redis_module 'on'"), "{e}");
    }
}
