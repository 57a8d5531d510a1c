//! Turning what a store observed into a [`Decision`]: the one place where
//! admission, `retry_after`, `remaining`, `reset_after`, the binding rule and the
//! HTTP headers are worked out, for every store and every binding.

use crate::controls::{Applied, DecidedBy, List, Listing};
use crate::in_flight::{InFlight, LeasesSeen};
use crate::rule::{push_number, RuleSet};
use crate::time::ceil_seconds;

/// What a store saw for one rule of one check, before the check was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuleObservation {
    /// Units in the window `(now - W, now]`, not counting this check.
    pub count: u64,
    /// Timestamp (ms) of the oldest unit in that window, if any.
    pub oldest_ms: Option<u64>,
    /// When this rule alone was violated: the time (ms) at which enough units
    /// will have left the window for the check to fit. `None` otherwise.
    pub free_at_ms: Option<u64>,
}

/// What a store saw for one check: the time it used, whether it admitted the
/// check (and logged it), and one observation per rule in window order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The time of the check (ms since the epoch), as the store used it.
    pub now_ms: u64,
    /// Whether the check was admitted and logged.
    pub allowed: bool,
    /// One entry per rule that decided, shortest window first (none for a listed key).
    pub rules: Vec<RuleObservation>,
    /// Which rules decided, or the list the key is on.
    pub decided_by: DecidedBy,
    /// What a hold (or a peek) saw of the key's leases, for a rule set with
    /// an in-flight rule.
    pub leases: Option<LeasesSeen>,
}

/// The state of one rule after a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleState {
    /// The rule's limit.
    pub limit: u64,
    /// The rule's window in ms.
    pub window_ms: u64,
    /// Units still available in the window after this check (never below 0).
    pub remaining: u64,
    /// Time until the oldest unit in the window leaves it (0 if the window is empty).
    pub reset_after_ms: u64,
}

impl RuleState {
    /// Units in use in the window: `limit - remaining`.
    pub fn used(&self) -> u64 {
        self.limit - self.remaining
    }

    /// The short name of the window (`1s`, `5m`, `1d`).
    pub fn window_name(&self) -> String {
        crate::rule::window_name(self.window_ms)
    }
}

/// What a check came to: one of six outcomes, so that no impossible mix
/// (blocked and safelisted, degraded and shadowed) can be represented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The rules admitted the check and logged it (or limiting is switched off).
    Admitted,
    /// The rules denied the check; nothing was logged.
    Denied,
    /// The key or the client address is on the blocklist (or banned):
    /// denied, with `retry_after` the time until the entry lapses.
    Blocked,
    /// The key or the client address is on the safelist: admitted, not counted.
    Safelisted,
    /// The store failed and this is the `on_error` fallback: admitted
    /// (`allow`) or denied (`deny`).
    Degraded {
        /// Whether the fallback admits.
        allowed: bool,
    },
    /// Shadow mode: the rules denied (or a list blocked), and the check is
    /// admitted anyway.
    Shadowed {
        /// Whether a list blocked it (rather than the rules denying it).
        blocked: bool,
    },
}

impl Outcome {
    /// Whether the check may go on.
    pub fn allowed(self) -> bool {
        match self {
            Outcome::Admitted | Outcome::Safelisted | Outcome::Shadowed { .. } => true,
            Outcome::Denied | Outcome::Blocked => false,
            Outcome::Degraded { allowed } => allowed,
        }
    }

    /// Its name as the bindings give it: `admitted`, `denied`, `blocked`,
    /// `safelisted`, `degraded` or `shadowed`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Denied => "denied",
            Outcome::Blocked => "blocked",
            Outcome::Safelisted => "safelisted",
            Outcome::Degraded { .. } => "degraded",
            Outcome::Shadowed { .. } => "shadowed",
        }
    }
}

/// The answer to a check or a peek.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What the check came to.
    pub outcome: Outcome,
    /// 0 when admitted; the least wait after which the same check would be
    /// admitted; `None` when the cost exceeds a limit and can never pass.
    pub retry_after_ms: Option<u64>,
    /// The time of the decision, ms since the epoch.
    pub now_ms: u64,
    /// One state per rule, shortest window first.
    pub rules: Vec<RuleState>,
    /// Index into `rules` of the binding rule (least remaining; ties: shortest window).
    pub binding: usize,
    /// Set on the first fallback decision of an outage: what to log, once.
    pub warning: Option<String>,
    /// True when this denial was remembered in-process, not asked of the store.
    pub cached: bool,
    /// Why the key or address is listed (empty when no reason was given).
    pub reason: Option<String>,
    /// The tier whose rules decided (named by the caller or stored for the key).
    pub tier: Option<String>,
    /// True when the key's stored override decided.
    pub overridden: bool,
    /// A metered limiter's meters the check charged, in order, each with its
    /// rules' span of `rules` (empty for a limiter of one rule set; see
    /// [`crate::meter`]).
    pub meters: Vec<MeterSpan>,
    /// The in-flight rule's state, for a rule set that holds one (see
    /// [`crate::in_flight`]).
    pub in_flight: Option<InFlight>,
}

/// One meter's part of a [`Decision`]: its name and where its rules are in
/// [`Decision::rules`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterSpan {
    /// The meter's name.
    pub name: String,
    /// Its rules' indexes in `rules` (shortest window first).
    pub rules: std::ops::Range<usize>,
}

impl Decision {
    /// Builds the decision of a check (`logged = true` when it would add its
    /// cost on admission) or of a peek (`logged = false`) from an observation.
    pub fn from_observation(
        rules: &RuleSet,
        cost: u64,
        obs: &Observation,
        logged: bool,
    ) -> Decision {
        let now = obs.now_ms;
        let added = if obs.allowed && logged { cost } else { 0 };
        let states: Vec<RuleState> = rules
            .rules()
            .iter()
            .zip(&obs.rules)
            .map(|(rule, seen)| {
                let used = seen.count.saturating_add(added);
                let reset_after_ms = match seen.oldest_ms {
                    Some(oldest) if seen.count > 0 => (oldest + rule.window_ms).saturating_sub(now),
                    _ if added > 0 => rule.window_ms,
                    _ => 0,
                };
                RuleState {
                    limit: rule.limit,
                    window_ms: rule.window_ms,
                    remaining: rule.limit.saturating_sub(used),
                    reset_after_ms,
                }
            })
            .collect();
        let in_flight = rules.in_flight().map(|limit| {
            let seen = obs.leases.unwrap_or_default();
            InFlight {
                limit,
                held: seen.held + u64::from(seen.taken),
                lapse_after_ms: seen.soonest_lapse_ms.map(|at| at.saturating_sub(now)),
            }
        });
        let retry_after_ms = if obs.allowed {
            Some(0)
        } else if rules.rules().iter().any(|r| cost > r.limit) {
            None
        } else {
            let rates = obs
                .rules
                .iter()
                .filter_map(|seen| seen.free_at_ms)
                .map(|at| at.saturating_sub(now))
                .max()
                .unwrap_or(0);
            // a full in-flight rule: a slot frees when the soonest lease lapses, at latest
            let slot = in_flight
                .filter(|f| f.remaining() == 0)
                .map_or(0, |f| f.lapse_after_ms.unwrap_or(0));
            Some(rates.max(slot))
        };
        Decision {
            outcome: if obs.allowed {
                Outcome::Admitted
            } else {
                Outcome::Denied
            },
            retry_after_ms,
            now_ms: now,
            binding: binding_index(&states),
            rules: states,
            warning: None,
            cached: false,
            reason: None,
            tier: None,
            overridden: false,
            meters: Vec::new(),
            in_flight,
        }
    }

    /// The decision for a key or address on a list: no rule counted it; the
    /// rules show their full limit; a block's `retry_after` is the time until
    /// the entry lapses.
    pub fn listed(rules: &RuleSet, now_ms: u64, list: List, listing: &Listing) -> Decision {
        let safe = list == List::Safe;
        let mut decision = Decision::fallback(rules, now_ms, true);
        decision.outcome = if safe {
            Outcome::Safelisted
        } else {
            Outcome::Blocked
        };
        decision.retry_after_ms = Some(if safe {
            0
        } else {
            listing.until_ms.saturating_sub(now_ms).max(1)
        });
        decision.reason = Some(listing.reason.clone());
        decision
    }

    /// An admitted decision that asked no store (limiting is switched off).
    pub fn unlimited(rules: &RuleSet, now_ms: u64) -> Decision {
        let mut decision = Decision::fallback(rules, now_ms, true);
        decision.outcome = Outcome::Admitted;
        decision
    }

    /// Notes which rules decided: a stored or named tier, or an override.
    pub fn with_applied(mut self, applied: &Applied, named_tier: Option<&str>) -> Decision {
        match applied {
            Applied::Given => self.tier = named_tier.map(str::to_owned),
            Applied::Tier(name) => self.tier = Some(name.clone()),
            Applied::Override(_) => self.overridden = true,
        }
        self
    }

    /// The fallback decision when the store cannot answer: every rule shows
    /// its full limit, and the check is allowed or denied as `on_error` says.
    pub fn fallback(rules: &RuleSet, now_ms: u64, allowed: bool) -> Decision {
        let states: Vec<RuleState> = rules
            .rules()
            .iter()
            .map(|rule| RuleState {
                limit: rule.limit,
                window_ms: rule.window_ms,
                remaining: if allowed { rule.limit } else { 0 },
                reset_after_ms: 0,
            })
            .collect();
        Decision {
            outcome: Outcome::Degraded { allowed },
            retry_after_ms: if allowed { Some(0) } else { Some(1_000) },
            now_ms,
            binding: 0,
            rules: states,
            warning: None,
            cached: false,
            reason: None,
            tier: None,
            overridden: false,
            meters: Vec::new(),
            in_flight: rules.in_flight().map(|limit| InFlight {
                limit,
                held: if allowed { 0 } else { limit },
                lapse_after_ms: None,
            }),
        }
    }

    /// Whether the check may go on (see [`Outcome::allowed`]).
    pub fn allowed(&self) -> bool {
        self.outcome.allowed()
    }

    /// Whether the store failed and this is the `on_error` fallback.
    pub fn degraded(&self) -> bool {
        matches!(self.outcome, Outcome::Degraded { .. })
    }

    /// Whether a list blocks the key or address (in shadow mode too).
    pub fn blocked(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Blocked | Outcome::Shadowed { blocked: true }
        )
    }

    /// Whether the key or address is on the safelist.
    pub fn safelisted(&self) -> bool {
        self.outcome == Outcome::Safelisted
    }

    /// Whether shadow mode let through what would have been refused.
    pub fn shadowed(&self) -> bool {
        matches!(self.outcome, Outcome::Shadowed { .. })
    }

    /// Whether a list decided (no rule counted the check).
    pub fn is_listed(&self) -> bool {
        self.safelisted() || self.blocked()
    }

    /// This decision in shadow mode: what would be refused is admitted, and
    /// says so (a fail-closed fallback stays degraded, now admitting);
    /// anything else is unchanged.
    pub fn shadow(mut self) -> Decision {
        self.outcome = match self.outcome {
            Outcome::Denied => Outcome::Shadowed { blocked: false },
            Outcome::Blocked => Outcome::Shadowed { blocked: true },
            Outcome::Degraded { .. } => Outcome::Degraded { allowed: true },
            other => other,
        };
        self
    }

    /// The binding rule's state: the rate rule with the least remaining,
    /// or the in-flight rule when it has fewer slots free (or is the only
    /// rule; its window is 0).
    pub fn binding_state(&self) -> RuleState {
        let rate = self.rules.get(self.binding).copied();
        match (rate, self.in_flight) {
            (Some(rate), Some(f)) if f.remaining() < rate.remaining => in_flight_state(&f),
            (Some(rate), _) => rate,
            (None, Some(f)) => in_flight_state(&f),
            (None, None) => RuleState {
                limit: 0,
                window_ms: 0,
                remaining: 0,
                reset_after_ms: 0,
            },
        }
    }

    /// The response headers for this decision: `X-RateLimit-*` for the binding
    /// rule, the IETF draft `RateLimit-Policy` (all rules) and `RateLimit`
    /// (binding rule), and `Retry-After` (whole seconds, rounded up) when denied.
    /// A degraded decision (the store did not answer) knows the rules but not
    /// their use: it carries `RateLimit-Policy` (and `Retry-After`) only,
    /// never a remaining quota it cannot vouch for.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        // (written straight into each value: a request's headers are made
        // on every admitted request at every door)
        let bind = self.binding_state();
        let mut headers = Vec::with_capacity(7);
        let policy = (!self.rules.is_empty()).then(|| {
            let mut text = String::with_capacity(32 * self.rules.len());
            for (i, r) in self.rules.iter().enumerate() {
                if i > 0 {
                    text.push_str(", ");
                }
                text.push('"');
                self.push_policy_name(&mut text, i);
                text.push_str("\";q=");
                push_number(&mut text, r.limit);
                text.push_str(";w=");
                push_number(&mut text, ceil_seconds(r.window_ms).max(1));
            }
            // (the IETF draft's policies are quotas over windows: an in-flight
            // rule has none, and appears only in the X-RateLimit-* headers)
            ("RateLimit-Policy", text)
        });
        if self.degraded() {
            headers.extend(policy);
        } else {
            let reset_at = ceil_seconds(self.now_ms + bind.reset_after_ms);
            headers.extend([
                ("X-RateLimit-Limit", number(bind.limit)),
                ("X-RateLimit-Remaining", number(bind.remaining)),
                ("X-RateLimit-Used", number(bind.used())),
                ("X-RateLimit-Reset", number(reset_at)),
            ]);
            headers.extend(policy);
            if let Some(rate) = self.rules.get(self.binding) {
                let mut text = String::with_capacity(24);
                text.push('"');
                self.push_policy_name(&mut text, self.binding);
                text.push_str("\";r=");
                push_number(&mut text, rate.remaining);
                text.push_str(";t=");
                push_number(&mut text, ceil_seconds(rate.reset_after_ms));
                headers.push(("RateLimit", text));
            }
        }
        if let (false, Some(wait)) = (self.allowed(), self.retry_after_ms) {
            headers.push(("Retry-After", number(ceil_seconds(wait))));
        }
        headers
    }
}

/// `n` in decimal.
fn number(n: u64) -> String {
    itoa::Buffer::new().format(n).to_owned()
}

/// The in-flight rule as a rule's state: its limit, the slots free, the
/// time until the soonest lease lapses, and no window (0).
fn in_flight_state(f: &InFlight) -> RuleState {
    RuleState {
        limit: f.limit,
        window_ms: 0,
        remaining: f.remaining(),
        reset_after_ms: f.lapse_after_ms.unwrap_or(0),
    }
}

fn binding_index(states: &[RuleState]) -> usize {
    let mut best = 0;
    for (i, state) in states.iter().enumerate() {
        if state.remaining < states[best].remaining {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> RuleSet {
        RuleSet::parse(text).unwrap()
    }

    #[test]
    fn admitted_decision_arithmetic() {
        let rules = set("1/s; 20/m");
        let obs = Observation {
            decided_by: Default::default(),
            leases: None,
            now_ms: 10_000,
            allowed: true,
            rules: vec![
                RuleObservation::default(),
                RuleObservation {
                    count: 5,
                    oldest_ms: Some(1_000),
                    free_at_ms: None,
                },
            ],
        };
        let d = Decision::from_observation(&rules, 1, &obs, true);
        assert!(d.allowed());
        assert_eq!(d.retry_after_ms, Some(0));
        assert_eq!(d.rules[0].remaining, 0);
        assert_eq!(d.rules[0].reset_after_ms, 1000);
        assert_eq!(d.rules[1].remaining, 14);
        assert_eq!(d.rules[1].reset_after_ms, 51_000);
        assert_eq!(d.binding, 0);
    }

    #[test]
    fn denied_decision_takes_the_longest_wait() {
        let rules = set("2/s; 3/m");
        let obs = Observation {
            decided_by: Default::default(),
            leases: None,
            now_ms: 10_000,
            allowed: false,
            rules: vec![
                RuleObservation {
                    count: 2,
                    oldest_ms: Some(9_500),
                    free_at_ms: Some(10_500),
                },
                RuleObservation {
                    count: 3,
                    oldest_ms: Some(1_000),
                    free_at_ms: Some(61_000),
                },
            ],
        };
        let d = Decision::from_observation(&rules, 1, &obs, true);
        assert!(!d.allowed());
        assert_eq!(d.retry_after_ms, Some(51_000));
        assert_eq!(d.rules[0].remaining, 0);
        assert_eq!(d.binding, 0, "ties go to the shortest window");
    }

    #[test]
    fn cost_above_a_limit_never_passes() {
        let rules = set("2/s; 30/m");
        let obs = Observation {
            decided_by: Default::default(),
            leases: None,
            now_ms: 1,
            allowed: false,
            rules: vec![RuleObservation::default(); 2],
        };
        let d = Decision::from_observation(&rules, 3, &obs, true);
        assert_eq!(d.retry_after_ms, None);
        assert_eq!(d.rules[0].remaining, 2);
        assert!(!d.headers().iter().any(|(name, _)| *name == "Retry-After"));
    }

    #[test]
    fn headers_follow_the_binding_rule() {
        let rules = set("1/s; 20/m");
        let obs = Observation {
            decided_by: Default::default(),
            leases: None,
            now_ms: 1_700_000_000_000,
            allowed: false,
            rules: vec![
                RuleObservation {
                    count: 1,
                    oldest_ms: Some(1_699_999_999_500),
                    free_at_ms: Some(1_700_000_000_500),
                },
                RuleObservation {
                    count: 17,
                    oldest_ms: Some(1_699_999_952_000),
                    free_at_ms: None,
                },
            ],
        };
        let d = Decision::from_observation(&rules, 1, &obs, true);
        let h: std::collections::HashMap<_, _> = d.headers().into_iter().collect();
        assert_eq!(h["X-RateLimit-Limit"], "1");
        assert_eq!(h["X-RateLimit-Remaining"], "0");
        assert_eq!(h["X-RateLimit-Used"], "1");
        assert_eq!(h["X-RateLimit-Reset"], "1700000001");
        assert_eq!(h["RateLimit-Policy"], "\"1s\";q=1;w=1, \"1m\";q=20;w=60");
        assert_eq!(h["RateLimit"], "\"1s\";r=0;t=1");
        assert_eq!(h["Retry-After"], "1");
    }

    #[test]
    fn fallback_is_marked_degraded() {
        let rules = set("5/s");
        let open = Decision::fallback(&rules, 5, true);
        assert!(open.allowed() && open.degraded() && open.rules[0].remaining == 5);
        let closed = Decision::fallback(&rules, 5, false);
        assert!(!closed.allowed() && closed.degraded() && closed.retry_after_ms == Some(1000));
    }

    #[test]
    fn a_degraded_decision_claims_no_quota() {
        let rules = set("5/s; 20/m");
        let open: Vec<_> = Decision::fallback(&rules, 5, true)
            .headers()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(open, ["RateLimit-Policy"]);
        let closed: Vec<_> = Decision::fallback(&rules, 5, false)
            .headers()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(closed, ["RateLimit-Policy", "Retry-After"]);
    }
}
