//! Log lines on stderr, one per event: `LEVEL message` (a denial's line is
//! the core's logfmt, as the middlewares log it). `$RATEKEEPER_LOG` sets
//! the level: `error`, `warn`, `info` (the default) or `off`.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            let level = match record.level() {
                Level::Error => "ERROR",
                Level::Warn => "WARN",
                Level::Info => "INFO",
                Level::Debug => "DEBUG",
                Level::Trace => "TRACE",
            };
            let _ = writeln!(std::io::stderr().lock(), "{level} {}", record.args());
        }
    }

    fn flush(&self) {}
}

/// Sends the `log` crate's records (the core's warnings among them) to
/// stderr at the level `$RATEKEEPER_LOG` names.
pub fn init() -> Result<(), String> {
    let level = match std::env::var("RATEKEEPER_LOG").as_deref() {
        Err(_) | Ok("") | Ok("info") => LevelFilter::Info,
        Ok("warn") | Ok("warning") => LevelFilter::Warn,
        Ok("error") => LevelFilter::Error,
        Ok("off") => LevelFilter::Off,
        Ok("debug") => LevelFilter::Debug,
        Ok(other) => {
            return Err(format!(
                "invalid RATEKEEPER_LOG '{}': use error, warn, info, debug or off",
                other.escape_debug()
            ))
        }
    };
    log::set_logger(&Stderr).map_err(|e| e.to_string())?;
    log::set_max_level(level);
    Ok(())
}

/// What a verdict leaves in the log: the outage warnings the core hands the
/// first fallback decisions, and the denial's line (when denials are logged).
pub fn verdict(verdict: &ratekeeper_core::gate::Verdict) {
    for warning in &verdict.warnings {
        log::warn!("{warning}");
    }
    if let Some(line) = &verdict.log {
        log::info!("{}", line.text);
    }
}
