//! What a forward-auth request comes to, in the order the Rack middleware
//! decides: exempt paths; client addresses listed in the store (held
//! in-process); fail2ban and allow2ban strikes; then every throttle that
//! applies, checked in ONE round trip (each atomically on its own): each
//! that admits the request counts it, and the first denial, in file order,
//! answers. Every answer is the core's ([`Responses`]).

use crate::original::Original;
use crate::policy::Policy;
use ratekeeper_core::http::{Answer, Responses};
use ratekeeper_core::limiter::Offender;
use ratekeeper_core::{check_batch_async, BatchItem, Decision};

/// What the server answers the proxy.
#[derive(Debug)]
pub enum Verdict {
    /// Let the request through, with these headers for the proxy to pass on.
    Pass(Vec<(&'static str, String)>),
    /// A throttle denied it: the core's 429 answer.
    Denied(Answer),
    /// The client is blocked (a listing or a ban): the core's 403 answer.
    Blocked(Answer),
}

impl Verdict {
    /// Its name in the server's request counters: `pass`, `deny` or `block`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pass(_) => "pass",
            Verdict::Denied(_) => "deny",
            Verdict::Blocked(_) => "block",
        }
    }
}

/// Decides a forward-auth request under `policy`.
pub async fn decide(
    policy: &Policy,
    request: &Original,
) -> Result<Verdict, ratekeeper_core::Error> {
    let responses = &policy.spec.responses;
    if policy.exempt(&request.path) {
        return Ok(Verdict::Pass(Vec::new()));
    }
    if let Some(listed) = policy.base.screen(&request.ip) {
        return Ok(listed_verdict(responses, &listed));
    }
    for ban in &policy.spec.bans {
        let matched = ban.paths.iter().any(|p| p.is_match(&request.path))
            && (ban.methods.is_empty() || ban.methods.contains(&request.method));
        if !matched {
            continue;
        }
        let (base, rule, ip) = (
            policy.base.clone(),
            ban.rule.clone(),
            request.client.clone(),
        );
        // a strike reads and writes the store with blocking calls: off the workers
        let strike =
            tokio::task::spawn_blocking(move || base.penalize(Offender::Address(&ip), &rule, None))
                .await
                .map_err(|e| ratekeeper_core::Error::storage(format!("a strike failed: {e}")))??;
        if strike.banned || !ban.allow {
            return Ok(Verdict::Blocked(responses.blocked()));
        }
    }
    let matched: Vec<(usize, Vec<u8>, Option<String>)> = policy
        .throttles
        .iter()
        .enumerate()
        .filter(|(_, t)| t.applies_to(request))
        .filter_map(|(i, t)| {
            let key = request.value(t.spec.key.as_ref()?)?;
            Some((i, key, t.tier_of(request)))
        })
        .collect();
    if matched.is_empty() {
        return Ok(Verdict::Pass(Vec::new()));
    }
    let items: Vec<BatchItem<'_>> = matched
        .iter()
        .map(|(i, key, tier)| BatchItem {
            tier: tier.as_deref(),
            ip: Some(&request.ip),
            ..BatchItem::new(&policy.throttles[*i].limiter, key, 1)
        })
        .collect();
    let decisions = check_batch_async(&items, None).await?;
    let mut shown: Option<&Decision> = None;
    for ((i, key, _), decision) in matched.iter().zip(&decisions) {
        warn_once(decision);
        if decision.is_listed() {
            return Ok(listed_verdict(responses, decision));
        }
        if !decision.allowed() {
            let scope = &policy.throttles[*i].spec.scope;
            log_denial(policy, decision, scope, key, &request.method, &request.path);
            return Ok(Verdict::Denied(responses.answer(decision)));
        }
        shown = least_remaining(shown, decision);
    }
    Ok(Verdict::Pass(
        shown.map(|d| responses.pass_headers(d)).unwrap_or_default(),
    ))
}

/// Of the decision shown so far and an admitting one, the one whose binding
/// rule has less left (the first on a tie): its headers are the pass's.
pub fn least_remaining<'d>(
    shown: Option<&'d Decision>,
    decision: &'d Decision,
) -> Option<&'d Decision> {
    match shown {
        Some(s) if s.binding_state().remaining <= decision.binding_state().remaining => Some(s),
        _ => Some(decision),
    }
}

/// A listed client or key: 403 when blocked (unless shadow mode let it
/// through), else pass without rate-limit headers.
fn listed_verdict(responses: &Responses, decision: &Decision) -> Verdict {
    if decision.allowed() {
        Verdict::Pass(Vec::new())
    } else {
        Verdict::Blocked(responses.blocked())
    }
}

/// The outage warning the core hands the first fallback decision, logged once.
pub fn warn_once(decision: &Decision) {
    if let Some(warning) = &decision.warning {
        log::warn!("{warning}");
    }
}

/// One line per denial, as the middlewares write it (keys hashed unless
/// `log_keys`).
pub fn log_denial(
    policy: &Policy,
    decision: &Decision,
    scope: &str,
    key: &[u8],
    method: &str,
    path: &str,
) {
    if policy.spec.log_denials {
        let line = policy
            .spec
            .responses
            .denial_log(decision, scope, key, method, path);
        log::info!("{}", line.text);
    }
}
