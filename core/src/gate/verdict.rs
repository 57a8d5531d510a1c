//! What the gate comes to: a request's [`Verdict`] (how it ends, the
//! answer, the decision shown, every check made) for a door to render.

use crate::decision::Decision;
use crate::http::{Answer, DenialLog, Responses};

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
    /// Its name in counters and logs: `pass`, `deny` or `block`.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Pass => "pass",
            Ending::Deny => "deny",
            Ending::Block => "block",
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
    /// What the throttle decided.
    pub decision: Decision,
}

/// What the gate decided of a request, ready for a door to render.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// How the request ends.
    pub ending: Ending,
    /// The answer: for a pass, no status and the headers to add to the
    /// application's response; else the status, headers and body to send.
    pub answer: Answer,
    /// The decision that answered, or whose headers a pass shows (a listed
    /// client's too); none for an exempt or unlimited request or a ban.
    pub decision: Option<Decision>,
    /// The index of the throttle whose decision that is.
    pub throttle: Option<usize>,
    /// The index of the safelist entry that let the request through.
    pub safelist: Option<usize>,
    /// The index of the blocklist entry that refused the request.
    pub blocklist: Option<usize>,
    /// The index of the fail2ban or allow2ban entry that refused the request.
    pub ban: Option<usize>,
    /// Whether that entry's strike banned the client.
    pub banned: bool,
    /// The denial's log line, when denials are logged.
    pub log: Option<DenialLog>,
    /// Every check made, in order.
    pub checked: Vec<Checked>,
    /// Outage warnings the store's first fallback decisions carry (log each once).
    pub warnings: Vec<String>,
}

impl Verdict {
    pub(super) fn pass(answer: Answer, decision: Option<Decision>) -> Verdict {
        Verdict {
            ending: Ending::Pass,
            answer,
            decision,
            throttle: None,
            safelist: None,
            blocklist: None,
            ban: None,
            banned: false,
            log: None,
            checked: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub(super) fn unmarked() -> Verdict {
        Verdict::pass(Answer::default(), None)
    }

    pub(super) fn blocked(responses: &Responses, decision: Option<Decision>) -> Verdict {
        Verdict {
            ending: Ending::Block,
            ..Verdict::pass(responses.blocked(), decision)
        }
    }
}
