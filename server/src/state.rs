//! The server's state: the policy in force (swapped whole by a reload, so a
//! request keeps the policy it started under), where it came from, and the
//! server's own counters.

use crate::config;
use crate::error::ServerError;
use ratekeeper_core::gate::{Gate, Spec};
use ratekeeper_core::settings::OptionValue;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// What the command line and the environment say over the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--store` (or `$RATEKEEPER_STORE`): the store URL.
    pub store: Option<String>,
    /// `--listen`: the HTTP door's address.
    pub listen: Option<String>,
    /// `--grpc`: the gRPC door's address.
    pub grpc: Option<String>,
}

impl Overrides {
    /// The file's spec with these applied (each checked as the file's would be).
    pub fn apply(&self, mut spec: Spec) -> Result<Spec, ServerError> {
        if let Some(url) = &self.store {
            spec.settings
                .set("store", OptionValue::Text(url.clone()))
                .map_err(|e| ServerError::Config(format!("--store: {e}")))?;
        }
        let address = config::address;
        if let Some(listen) = &self.listen {
            spec.listen = Some(address("--listen", listen)?);
        }
        if let Some(grpc) = &self.grpc {
            spec.grpc = Some(address("--grpc", grpc)?);
        }
        Ok(spec)
    }
}

/// The doors a request can come through, for the counters.
pub const DOORS: [&str; 3] = ["forward_auth", "nginx", "envoy"];
/// What a request can come to, for the counters.
pub const ANSWERS: [&str; 5] = ["pass", "deny", "block", "bad_request", "error"];

/// The server's own counters (the limiters keep theirs).
#[derive(Debug, Default)]
pub struct Counters {
    requests: [[AtomicU64; ANSWERS.len()]; DOORS.len()],
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
}

impl Counters {
    /// Counts one request through `door` answered `answer` (names from
    /// [`DOORS`] and [`ANSWERS`]).
    pub fn request(&self, door: &str, answer: &str) {
        let d = DOORS.iter().position(|n| *n == door).expect("a known door");
        let a = ANSWERS
            .iter()
            .position(|n| *n == answer)
            .expect("a known answer");
        self.requests[d][a].fetch_add(1, Ordering::Relaxed);
    }

    /// The requests counted, by door and answer.
    pub fn requests(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = Vec::new();
        for (d, door) in DOORS.iter().enumerate() {
            for (a, answer) in ANSWERS.iter().enumerate() {
                out.push((*door, *answer, self.requests[d][a].load(Ordering::Relaxed)));
            }
        }
        out
    }

    /// Reloads that took, and reloads refused (the old policy kept).
    pub fn reloads(&self) -> (u64, u64) {
        (
            self.reloads_ok.load(Ordering::Relaxed),
            self.reloads_failed.load(Ordering::Relaxed),
        )
    }
}

/// The policy in force, and how to read it again.
pub struct State {
    policy: RwLock<Arc<Gate>>,
    path: PathBuf,
    overrides: Overrides,
    reloading: Mutex<()>,
    /// The server's own counters.
    pub counters: Counters,
}

/// Reads the policy file and applies the overrides, opening nothing.
pub fn read_spec(path: &std::path::Path, overrides: &Overrides) -> Result<Spec, ServerError> {
    overrides.apply(config::load(path)?)
}

impl State {
    /// The state for the policy file at `path`, bound to its store (opening
    /// it may wait up to its connect timeout).
    pub fn open(path: PathBuf, overrides: Overrides) -> Result<State, ServerError> {
        let policy = Gate::bind(read_spec(&path, &overrides)?, None)?;
        Ok(State {
            policy: RwLock::new(Arc::new(policy)),
            path,
            overrides,
            reloading: Mutex::new(()),
            counters: Counters::default(),
        })
    }

    /// The policy in force now (a request holds it to the end).
    pub fn policy(&self) -> Arc<Gate> {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the file again and puts the new policy in force; on any
    /// problem keeps the old one and says why. Requests under way finish
    /// under the policy they started with. Blocking (it may open a store).
    pub fn reload(&self) -> Result<(), ServerError> {
        let _one_at_a_time = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.policy();
        let outcome = read_spec(&self.path, &self.overrides).and_then(|spec| {
            if spec.listen != current.spec().listen || spec.grpc != current.spec().grpc {
                log::warn!(
                    "reload: listen and grpc changes take a restart; the doors stay where they are"
                );
            }
            Ok(Gate::bind(spec, Some(&current))?)
        });
        match outcome {
            Ok(policy) => {
                *self.policy.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
                self.counters.reloads_ok.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                self.counters.reloads_failed.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }
}
