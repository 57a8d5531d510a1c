//! What the gate comes to: a request's [`Verdict`] (how it ends, the
//! answer, the decision shown, every check made) for a door to render.

use crate::decision::Decision;
use crate::http::{Answer, DenialLog, Responses};
use crate::in_flight::Lease;
use crate::limiter::Reservation;
use std::sync::Arc;

/// How a request ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It goes on to the application.
    Pass,
    /// A throttle denied it (429).
    Deny,
    /// The client or its key is blocked, or a ban refused it (403).
    Block,
}

impl Ending {
    /// Every ending's name, as [`Ending::name`] gives it (what a binding
    /// makes once, as its own strings).
    pub const NAMES: [&'static str; 3] = ["pass", "deny", "block"];

    /// Its name in counters and logs: `pass`, `deny` or `block`.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Pass => "pass",
            Ending::Deny => "deny",
            Ending::Block => "block",
        }
    }
}

/// Why a request ends as it does: the one thing a door matches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Every throttle that applied admitted it (or none applied).
    Admitted,
    /// The policy is switched off, or the path or the door's predicate is
    /// exempt: never limited, unmarked.
    Exempt,
    /// A safelist entry of the policy (its index) named the request, or
    /// (`None`) the store lists the client or the key as safe.
    Safelisted(Option<usize>),
    /// A blocklist entry of the policy (its index) named the request, or
    /// (`None`) the store lists the client or the key as blocked.
    Blocked(Option<usize>),
    /// A fail2ban or allow2ban entry refused the request.
    Banned {
        /// The entry's index.
        ban: usize,
        /// Whether this request's strike banned the client.
        banned: bool,
    },
    /// This throttle (its index) denied the request.
    Throttled(usize),
    /// The store failed, and this throttle's `on_error` decided.
    Degraded(usize),
    /// The request would have been refused, but shadow mode let it through
    /// (a throttle's own `shadow = true`, or the operator's switch): counted,
    /// reported and logged, never refused. The throttle (its index) that
    /// would have refused it; none for a listed client address the
    /// operator's switch let through before any throttle was asked.
    Shadowed(Option<usize>),
}

impl Reason {
    /// Every reason's name, as [`Reason::name`] gives it (what a binding
    /// makes once, as its own strings).
    pub const NAMES: [&'static str; 8] = [
        "admitted",
        "exempt",
        "safelisted",
        "blocked",
        "banned",
        "throttled",
        "degraded",
        "shadowed",
    ];

    /// Its name as the bindings give it: `admitted`, `exempt`, `safelisted`,
    /// `blocked`, `banned`, `throttled`, `degraded` or `shadowed`.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Admitted => "admitted",
            Reason::Exempt => "exempt",
            Reason::Safelisted(_) => "safelisted",
            Reason::Blocked(_) => "blocked",
            Reason::Banned { .. } => "banned",
            Reason::Throttled(_) => "throttled",
            Reason::Degraded(_) => "degraded",
            Reason::Shadowed(_) => "shadowed",
        }
    }

    /// The reason a throttle's decision gives (a listing, a fallback, shadow
    /// mode, a denial or an admission).
    pub(super) fn of(decision: &Decision, throttle: usize) -> Reason {
        if decision.shadowed() {
            Reason::Shadowed(Some(throttle))
        } else if decision.degraded() {
            Reason::Degraded(throttle)
        } else if decision.safelisted() {
            Reason::Safelisted(None)
        } else if decision.blocked() {
            Reason::Blocked(None)
        } else if decision.allowed() {
            Reason::Admitted
        } else {
            Reason::Throttled(throttle)
        }
    }
}

/// One check the gate made: the throttle, and where the check came from
/// (the throttle's index for an HTTP door, the descriptor's for Envoy).
#[derive(Debug, Clone)]
pub struct Checked {
    /// The throttle's index in the policy.
    pub throttle: usize,
    /// The throttle's index (HTTP doors) or the descriptor's (Envoy).
    pub origin: usize,
    /// The key checked.
    pub key: Vec<u8>,
    /// The units the check cost.
    pub cost: u64,
    /// What the throttle decided.
    pub decision: Decision,
    /// The slot it holds until the response ends (a throttle with an
    /// in-flight rule that admitted the request).
    pub lease: Option<Lease>,
    /// A throttle with meters: its reservation of each meter's estimate,
    /// settled when the response ends (its `usage`, its `count`) or at once
    /// when the request is refused.
    pub reservation: Option<Arc<Reservation>>,
}

/// What the gate decided of a request, ready for a door to render.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// How the request ends.
    pub ending: Ending,
    /// Why.
    pub reason: Reason,
    /// The answer: for a pass, no status and the headers to add to the
    /// application's response; else the status, headers and body to send.
    pub answer: Answer,
    /// The decision that answered, or whose headers a pass shows (a listed
    /// client's too); none for an exempt or unlimited request or a ban.
    pub decision: Option<Decision>,
    /// The index of the throttle whose decision that is.
    pub throttle: Option<usize>,
    /// The denial's log line, when denials are logged.
    pub log: Option<DenialLog>,
    /// Every check made, in order.
    pub checked: Vec<Checked>,
    /// Outage warnings the store's first fallback decisions carry (log each once).
    pub warnings: Vec<String>,
    /// Whether the door is to tell the gate when the response ends, and its
    /// status ([`super::Gate::finish`]): a throttle with an in-flight rule
    /// holds a slot for this request, or one that counts only some
    /// responses (its `count`) counted it.
    pub awaits_end: bool,
}

impl Verdict {
    pub(super) fn pass(reason: Reason, answer: Answer, decision: Option<Decision>) -> Verdict {
        Verdict {
            ending: Ending::Pass,
            reason,
            answer,
            decision,
            throttle: None,
            log: None,
            checked: Vec::new(),
            warnings: Vec::new(),
            awaits_end: false,
        }
    }

    pub(super) fn unmarked(reason: Reason) -> Verdict {
        Verdict::pass(reason, Answer::default(), None)
    }

    pub(super) fn blocked(
        reason: Reason,
        responses: &Responses,
        decision: Option<Decision>,
    ) -> Verdict {
        Verdict {
            ending: Ending::Block,
            ..Verdict::pass(reason, responses.blocked(), decision)
        }
    }

    /// The index of the policy's safelist entry that let the request through.
    pub fn safelist(&self) -> Option<usize> {
        match self.reason {
            Reason::Safelisted(entry) => entry,
            _ => None,
        }
    }

    /// The index of the policy's blocklist entry that refused the request.
    pub fn blocklist(&self) -> Option<usize> {
        match self.reason {
            Reason::Blocked(entry) => entry,
            _ => None,
        }
    }

    /// The index of the throttle whose refusal shadow mode let through.
    pub fn shadowed(&self) -> Option<usize> {
        match self.reason {
            Reason::Shadowed(throttle) => throttle,
            _ => None,
        }
    }

    /// The index of the fail2ban or allow2ban entry that refused the
    /// request, and whether its strike banned the client.
    pub fn ban(&self) -> Option<(usize, bool)> {
        match self.reason {
            Reason::Banned { ban, banned } => Some((ban, banned)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Ending, Reason};

    #[test]
    fn every_name_is_listed_once() {
        let endings = [Ending::Pass, Ending::Deny, Ending::Block];
        let named: Vec<_> = endings.iter().map(|e| e.name()).collect();
        assert_eq!(named, Ending::NAMES);
        let reasons = [
            Reason::Admitted,
            Reason::Exempt,
            Reason::Safelisted(None),
            Reason::Blocked(Some(0)),
            Reason::Banned {
                ban: 0,
                banned: true,
            },
            Reason::Throttled(0),
            Reason::Degraded(0),
            Reason::Shadowed(None),
        ];
        let named: Vec<_> = reasons.iter().map(|r| r.name()).collect();
        assert_eq!(named, Reason::NAMES);
    }
}
