//! `/metrics`: the throttles' counters under the names the Python collector
//! exports (rendered by the core), the store's calls, and the server's own
//! requests and reloads, in the Prometheus text format.

use crate::state::State;
use ratekeeper_core::metrics::{family, label, prometheus_text};

/// The metrics page now.
pub fn render(state: &State) -> String {
    let policy = state.policy();
    let stats: Vec<(&str, _)> = policy
        .spec()
        .throttles
        .iter()
        .zip(policy.limiters())
        .map(|(t, limiter)| (t.scope.as_str(), limiter.stats()))
        .collect();
    let mut out = prometheus_text(&stats);
    family(
        &mut out,
        "ratekeeper_store_calls_total",
        "counter",
        "Calls to the store, by what became of them.",
    );
    for (what, count) in policy.warden().store_stats().counts() {
        out.push_str(&format!(
            "ratekeeper_store_calls_total{{kind=\"{what}\"}} {count}\n"
        ));
    }
    family(
        &mut out,
        "ratekeeper_server_requests_total",
        "counter",
        "Requests the server answered, by door and answer.",
    );
    for (door, answer, count) in state.counters.requests() {
        out.push_str(&format!(
            "ratekeeper_server_requests_total{{door=\"{}\",answer=\"{}\"}} {count}\n",
            label(door),
            label(answer)
        ));
    }
    let (ok, failed) = state.counters.reloads();
    family(
        &mut out,
        "ratekeeper_server_reloads_total",
        "counter",
        "Policy reloads, by result.",
    );
    out.push_str(&format!(
        "ratekeeper_server_reloads_total{{result=\"ok\"}} {ok}\n"
    ));
    out.push_str(&format!(
        "ratekeeper_server_reloads_total{{result=\"failed\"}} {failed}\n"
    ));
    out
}
