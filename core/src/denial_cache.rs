//! Remembering denials in-process: a key denied with `retry_after = T` is
//! denied again, without asking the store, until the earlier of `T` and a short
//! cap. Other traffic can only make a denial truer, so this never admits what
//! the store would deny; it spares Redis a client hammering while denied.

use crate::decision::Decision;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The default cap on how long a denial is remembered.
pub const DEFAULT_CAP: Duration = Duration::from_secs(1);
/// Most denials remembered at once; past that, expired ones are dropped, then all.
const MAX_ENTRIES: usize = 100_000;

struct Remembered {
    /// When the denial was decided.
    at: Instant,
    /// Until when it stands.
    until: Instant,
    /// The cost it was decided for: a check of this cost or more is denied too.
    cost: u64,
    decision: Decision,
}

/// Denials remembered per key tag, each until the earlier of its retry_after and the cap.
pub struct DenialCache {
    cap: Duration,
    entries: Mutex<HashMap<Vec<u8>, Remembered>>,
}

impl DenialCache {
    /// A cache remembering denials for at most `cap` (zero: remembers nothing).
    pub fn new(cap: Duration) -> DenialCache {
        DenialCache {
            cap,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Whether this cache remembers anything at all.
    pub fn enabled(&self) -> bool {
        !self.cap.is_zero()
    }

    /// The cap.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Remembered>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The remembered denial of a check of `cost` on `tag`, aged to now, if it still stands.
    pub fn lookup(&self, tag: &[u8], cost: u64) -> Option<Decision> {
        if !self.enabled() {
            return None;
        }
        let now = Instant::now();
        let entries = self.lock();
        let seen = entries.get(tag)?;
        if now >= seen.until || cost < seen.cost {
            return None;
        }
        let elapsed = now.duration_since(seen.at).as_millis() as u64;
        let mut decision = seen.decision.clone();
        decision.now_ms += elapsed;
        decision.retry_after_ms = decision
            .retry_after_ms
            .map(|ms| ms.saturating_sub(elapsed).max(1));
        for rule in &mut decision.rules {
            rule.reset_after_ms = rule.reset_after_ms.saturating_sub(elapsed);
        }
        if decision.rules.iter().any(|rule| cost > rule.limit) {
            decision.retry_after_ms = None; // this cost can never pass, whatever the wait
        }
        decision.cached = true;
        Some(decision)
    }

    /// Forgets every remembered denial (after a change of the controls in this process).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Remembers a denial the store decided for a check of `cost` on `tag`.
    pub fn remember(&self, tag: &[u8], cost: u64, decision: &Decision) {
        let Some(retry) = decision.retry_after_ms.filter(|&ms| ms > 0) else {
            return;
        };
        if !self.enabled() || decision.allowed() || decision.degraded() {
            return;
        }
        let at = Instant::now();
        let until = at + Duration::from_millis(retry).min(self.cap);
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, seen| seen.until > at);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(
            tag.to_vec(),
            Remembered {
                at,
                until,
                cost,
                decision: decision.clone(),
            },
        );
    }

    /// Forgets the denial of `tag` (a reset or unblock in this process).
    pub fn forget(&self, tag: &[u8]) {
        if self.enabled() {
            self.lock().remove(tag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Observation, RuleObservation};
    use crate::rule::RuleSet;

    fn denial(retry_ms: u64) -> Decision {
        let rules = RuleSet::parse("1/minute").unwrap();
        let obs = Observation {
            decided_by: Default::default(),
            leases: None,
            now_ms: 100_000,
            allowed: false,
            rules: vec![RuleObservation {
                count: 1,
                oldest_ms: Some(100_000 + retry_ms - 60_000),
                free_at_ms: Some(100_000 + retry_ms),
            }],
        };
        Decision::from_observation(&rules, 1, &obs, true)
    }

    #[test]
    fn remembers_until_the_cap() {
        let cache = DenialCache::new(Duration::from_millis(50));
        cache.remember(b"k", 1, &denial(30_000));
        let again = cache.lookup(b"k", 1).unwrap();
        assert!(!again.allowed() && again.cached);
        assert!(again.retry_after_ms.unwrap() <= 30_000);
        assert!(
            cache.lookup(b"k", 2).is_some(),
            "a bigger cost is denied too"
        );
        assert!(cache.lookup(b"other", 1).is_none());
        std::thread::sleep(Duration::from_millis(60));
        assert!(cache.lookup(b"k", 1).is_none(), "the cap has passed");
    }

    #[test]
    fn remembers_until_retry_after() {
        let cache = DenialCache::new(Duration::from_secs(5));
        cache.remember(b"k", 1, &denial(20));
        assert!(cache.lookup(b"k", 1).is_some());
        std::thread::sleep(Duration::from_millis(30));
        assert!(cache.lookup(b"k", 1).is_none());
    }

    #[test]
    fn smaller_costs_reset_and_disabled_caches_go_to_the_store() {
        let cache = DenialCache::new(Duration::from_secs(1));
        cache.remember(b"k", 3, &denial(10_000));
        assert!(cache.lookup(b"k", 1).is_none(), "a smaller cost may fit");
        cache.forget(b"k");
        assert!(cache.lookup(b"k", 3).is_none());
        let off = DenialCache::new(Duration::ZERO);
        off.remember(b"k", 1, &denial(10_000));
        assert!(off.lookup(b"k", 1).is_none());
    }
}
