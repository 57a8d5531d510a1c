//! `/metrics`: the throttles' counters under the names the Python collector
//! exports (rendered by the core), the store's calls, and the server's own
//! requests and reloads, in the Prometheus text format.

use crate::state::State;
use ratekeeper_core::metrics::{label, prometheus_text};

/// The metrics page now.
pub fn render(state: &State) -> String {
    let policy = state.policy();
    let stats: Vec<(&str, _)> = policy
        .throttles
        .iter()
        .map(|t| (t.spec.scope.as_str(), t.limiter.stats()))
        .collect();
    let mut out = prometheus_text(&stats);
    out.push_str(
        "# HELP ratekeeper_store_calls_total Calls to the store, by what became of them.\n",
    );
    out.push_str("# TYPE ratekeeper_store_calls_total counter\n");
    for (what, count) in policy.base.store_stats().counts() {
        out.push_str(&format!(
            "ratekeeper_store_calls_total{{kind=\"{what}\"}} {count}\n"
        ));
    }
    out.push_str("# HELP ratekeeper_server_requests_total Requests the server answered, by door and answer.\n");
    out.push_str("# TYPE ratekeeper_server_requests_total counter\n");
    for (door, answer, count) in state.counters.requests() {
        out.push_str(&format!(
            "ratekeeper_server_requests_total{{door=\"{}\",answer=\"{}\"}} {count}\n",
            label(door),
            label(answer)
        ));
    }
    let (ok, failed) = state.counters.reloads();
    out.push_str("# HELP ratekeeper_server_reloads_total Policy reloads, by result.\n");
    out.push_str("# TYPE ratekeeper_server_reloads_total counter\n");
    out.push_str(&format!(
        "ratekeeper_server_reloads_total{{result=\"ok\"}} {ok}\n"
    ));
    out.push_str(&format!(
        "ratekeeper_server_reloads_total{{result=\"failed\"}} {failed}\n"
    ));
    out
}
