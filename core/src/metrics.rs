//! Counters of what a limiter decided, for metrics: one set per limiter
//! (per rule set), read by the bindings' collectors and stats.

use crate::decision::Decision;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a limiter decided so far (checks only; peeks are not counted).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    /// Checks admitted by the store.
    pub allowed: u64,
    /// Checks denied by the store or by a remembered denial.
    pub denied: u64,
    /// Of the denials, those answered in-process by the denial cache.
    pub cached_denials: u64,
    /// Checks whose store failed (whatever `on_error` then did).
    pub errors: u64,
    /// Checks admitted because the store failed (`on_error = "allow"`).
    pub fail_open: u64,
    /// Checks refused because the key or address is on the blocklist (also counted as denied).
    pub blocked: u64,
    /// Checks admitted because the key or address is on the safelist (also counted as allowed).
    pub safelisted: u64,
    /// Checks denied because the store failed (`on_error = "deny"`).
    pub fail_closed: u64,
    /// Per rule (shortest window first): its window in ms and the most units
    /// seen in use in it by any key, at any check.
    pub peak_used: Vec<(u64, u64)>,
}

impl Stats {
    /// The counts by name, as the bindings expose them.
    pub fn counts(&self) -> [(&'static str, u64); 8] {
        [
            ("allowed", self.allowed),
            ("denied", self.denied),
            ("cached_denials", self.cached_denials),
            ("errors", self.errors),
            ("fail_open", self.fail_open),
            ("fail_closed", self.fail_closed),
            ("blocked", self.blocked),
            ("safelisted", self.safelisted),
        ]
    }
}

/// The counters, updated lock-free on every check.
#[derive(Debug)]
pub struct Metrics {
    allowed: AtomicU64,
    denied: AtomicU64,
    cached_denials: AtomicU64,
    errors: AtomicU64,
    fail_open: AtomicU64,
    fail_closed: AtomicU64,
    blocked: AtomicU64,
    safelisted: AtomicU64,
    windows: Vec<u64>,
    peak_used: Vec<AtomicU64>,
}

impl Metrics {
    /// Zeroed counters for rules with these windows (ms, shortest first).
    pub fn new(windows: Vec<u64>) -> Metrics {
        Metrics {
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            cached_denials: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            fail_open: AtomicU64::new(0),
            fail_closed: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
            safelisted: AtomicU64::new(0),
            peak_used: windows.iter().map(|_| AtomicU64::new(0)).collect(),
            windows,
        }
    }

    /// Counts one check's decision.
    pub fn record(&self, decision: &Decision) {
        let counter = match (decision.degraded(), decision.allowed()) {
            (true, true) => &self.fail_open,
            (true, false) => &self.fail_closed,
            (false, true) => &self.allowed,
            (false, false) => &self.denied,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if decision.degraded() {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if decision.cached {
            self.cached_denials.fetch_add(1, Ordering::Relaxed);
        }
        if decision.blocked() || decision.safelisted() {
            let counter = if decision.blocked() {
                &self.blocked
            } else {
                &self.safelisted
            };
            counter.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // peaks of the configured windows (a tier or override may have others)
        for ((peak, &window), state) in self
            .peak_used
            .iter()
            .zip(&self.windows)
            .zip(&decision.rules)
        {
            if state.window_ms == window {
                peak.fetch_max(state.used(), Ordering::Relaxed);
            }
        }
    }

    /// Counts a check whose store failed and whose error was raised to the caller.
    pub fn record_raised_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            allowed: get(&self.allowed),
            denied: get(&self.denied),
            cached_denials: get(&self.cached_denials),
            errors: get(&self.errors),
            fail_open: get(&self.fail_open),
            fail_closed: get(&self.fail_closed),
            blocked: get(&self.blocked),
            safelisted: get(&self.safelisted),
            peak_used: self
                .windows
                .iter()
                .zip(&self.peak_used)
                .map(|(&w, p)| (w, get(p)))
                .collect(),
        }
    }
}

/// The counters of named limiters in the Prometheus text format, under the
/// names Python's `RateKeeperCollector` exports:
/// `ratekeeper_checks_total{limiter, outcome}` (allowed, denied, fail_open,
/// fail_closed), `ratekeeper_cached_denials_total{limiter}`,
/// `ratekeeper_store_errors_total{limiter}` and
/// `ratekeeper_peak_used{limiter, window}` (window in seconds, as `60s`).
/// Label values are escaped as the format asks.
pub fn prometheus_text(limiters: &[(&str, Stats)]) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "ratekeeper_checks_total",
        "counter",
        "Checks decided, by outcome.",
    );
    for (name, stats) in limiters {
        for (outcome, count) in [
            ("allowed", stats.allowed),
            ("denied", stats.denied),
            ("fail_open", stats.fail_open),
            ("fail_closed", stats.fail_closed),
        ] {
            out.push_str(&format!(
                "ratekeeper_checks_total{{limiter=\"{}\",outcome=\"{outcome}\"}} {count}\n",
                label(name)
            ));
        }
    }
    let per_limiter = [
        (
            "ratekeeper_cached_denials_total",
            "Denials answered in-process by the denial cache.",
            (|s: &Stats| s.cached_denials) as fn(&Stats) -> u64,
        ),
        (
            "ratekeeper_store_errors_total",
            "Checks whose store failed.",
            |s: &Stats| s.errors,
        ),
    ];
    for (metric, help, value) in per_limiter {
        family(&mut out, metric, "counter", help);
        for (name, stats) in limiters {
            out.push_str(&format!(
                "{metric}{{limiter=\"{}\"}} {}\n",
                label(name),
                value(stats)
            ));
        }
    }
    family(
        &mut out,
        "ratekeeper_peak_used",
        "gauge",
        "Most units seen in use in a window by any key.",
    );
    for (name, stats) in limiters {
        for (window_ms, used) in &stats.peak_used {
            out.push_str(&format!(
                "ratekeeper_peak_used{{limiter=\"{}\",window=\"{}s\"}} {used}\n",
                label(name),
                crate::time::seconds(*window_ms)
            ));
        }
    }
    out
}

/// Starts a metric family in the Prometheus text format: its `# HELP` and
/// `# TYPE` (`counter`, `gauge`) lines.
pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
}

/// A label value escaped for the Prometheus text format.
pub fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Observation, RuleObservation};
    use crate::rule::RuleSet;

    #[test]
    fn counts_outcomes_and_peaks() {
        let rules = RuleSet::parse("2/s; 10/m").unwrap();
        let metrics = Metrics::new(vec![1000, 60_000]);
        let seen = |count: u64, allowed: bool| Observation {
            decided_by: Default::default(),
            leases: None,
            now_ms: 1,
            allowed,
            rules: vec![
                RuleObservation {
                    count,
                    oldest_ms: Some(1),
                    free_at_ms: None
                };
                2
            ],
        };
        metrics.record(&Decision::from_observation(&rules, 1, &seen(0, true), true));
        metrics.record(&Decision::from_observation(&rules, 1, &seen(1, true), true));
        metrics.record(&Decision::from_observation(
            &rules,
            1,
            &seen(2, false),
            true,
        ));
        let mut cached = Decision::from_observation(&rules, 1, &seen(2, false), true);
        cached.cached = true;
        metrics.record(&cached);
        metrics.record(&Decision::fallback(&rules, 1, true));
        metrics.record(&Decision::fallback(&rules, 1, false));
        metrics.record_raised_error();
        let stats = metrics.snapshot();
        assert_eq!(
            (stats.allowed, stats.denied, stats.cached_denials),
            (2, 2, 1)
        );
        assert_eq!(
            (stats.errors, stats.fail_open, stats.fail_closed),
            (3, 1, 1)
        );
        assert_eq!(stats.peak_used, vec![(1000, 2), (60_000, 2)]);
        let text = prometheus_text(&[("a\"b", stats)]);
        assert!(text.contains("ratekeeper_checks_total{limiter=\"a\\\"b\",outcome=\"denied\"} 2\n"));
        assert!(text.contains("ratekeeper_peak_used{limiter=\"a\\\"b\",window=\"60s\"} 2\n"));
        assert!(text.contains("ratekeeper_store_errors_total{limiter=\"a\\\"b\"} 3\n"));
    }
}
