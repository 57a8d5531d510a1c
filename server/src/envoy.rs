//! The gRPC door: Envoy's rate limit service
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`).
//!
//! A request's descriptors select the policy's throttles and the core's gate
//! decides, as for every door ([`ratekeeper_core::gate::envoy`] says how a
//! descriptor selects a throttle, its key and its cost). The request is
//! OVER_LIMIT when the gate blocks or denies it. Each status of a checked
//! descriptor carries the binding rule (`current_limit`), what remains, and
//! the time until it resets (a denial: until it would pass); a blocked
//! client gets every status OVER_LIMIT. The response carries the rate-limit
//! headers (and `Retry-After`, and the JSON body as `raw_body`, when over
//! limit). A descriptor's `limit` override is ignored: limits come from the
//! policy file and the store.

use crate::error::ServerError;
use crate::proto::config::core::v3::HeaderValue;
use crate::proto::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit, Code, DescriptorStatus, RateLimit,
};
use crate::proto::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use crate::proto::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use crate::state::State;
use ratekeeper_core::gate::envoy::Descriptor;
use ratekeeper_core::gate::{Ending, Gate, Step};
use ratekeeper_core::Decision;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// Most descriptors, and entries per descriptor, one request may carry.
pub const MAX_DESCRIPTORS: usize = 64;

/// The rate limit service on the server's state.
pub struct Rls {
    state: Arc<State>,
}

impl Rls {
    /// The service, ready for a tonic server.
    pub fn service(state: Arc<State>) -> RateLimitServiceServer<Rls> {
        RateLimitServiceServer::new(Rls { state })
    }
}

#[tonic::async_trait]
impl RateLimitService for Rls {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let policy = self.state.policy();
        match answer(&policy, request.into_inner()).await {
            Ok((response, what)) => {
                self.state.counters.request("envoy", what);
                Ok(Response::new(response))
            }
            Err(ServerError::BadRequest(why)) => {
                self.state.counters.request("envoy", "bad_request");
                Err(Status::invalid_argument(why))
            }
            Err(e) => {
                self.state.counters.request("envoy", "error");
                log::error!("check failed (on_error = \"raise\"): {e}");
                Err(Status::unavailable("the store did not answer"))
            }
        }
    }
}

/// The descriptors, checked.
fn descriptors(request: &RateLimitRequest) -> Result<Vec<Descriptor>, ServerError> {
    let bad = |why: String| Err(ServerError::BadRequest(why));
    if request.domain.is_empty() {
        return bad("the domain is empty: give the domain of the throttles to apply".into());
    }
    if request.descriptors.is_empty() || request.descriptors.len() > MAX_DESCRIPTORS {
        return bad(format!("give 1 to {MAX_DESCRIPTORS} descriptors"));
    }
    let mut out = Vec::with_capacity(request.descriptors.len());
    for (i, descriptor) in request.descriptors.iter().enumerate() {
        if descriptor.entries.is_empty() || descriptor.entries.len() > MAX_DESCRIPTORS {
            return bad(format!(
                "descriptor {i}: give 1 to {MAX_DESCRIPTORS} entries"
            ));
        }
        if descriptor.entries.iter().any(|e| e.key.is_empty()) {
            return bad(format!("descriptor {i}: an entry has an empty key"));
        }
        out.push(Descriptor {
            entries: descriptor
                .entries
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect(),
            hits: descriptor.hits_addend,
        });
    }
    Ok(out)
}

/// The answer to one request, and what it came to (`pass`, `deny`, `block`).
pub async fn answer(
    gate: &Gate,
    request: RateLimitRequest,
) -> Result<(RateLimitResponse, &'static str), ServerError> {
    let all = descriptors(&request)?;
    let verdict = match gate.prepare_envoy(&request.domain, &all, u64::from(request.hits_addend)) {
        Step::Done(verdict) => *verdict,
        Step::Ask(plan) => gate.run_async(plan).await?,
    };
    crate::logging::verdict(&verdict);
    let what = verdict.ending.name();
    if verdict.ending == Ending::Block && verdict.checked.is_empty() {
        return Ok((
            uniform(all.len(), Code::OverLimit, verdict.answer.body),
            what,
        ));
    }
    let mut statuses = vec![
        DescriptorStatus {
            code: Code::Ok as i32,
            ..DescriptorStatus::default()
        };
        all.len()
    ];
    // a descriptor checked more than once (the one that describes the
    // request, selecting a throttle too) shows its first denial
    for checked in &verdict.checked {
        let scope = &gate.spec().throttles[checked.throttle].scope;
        if statuses[checked.origin].code != Code::OverLimit as i32 {
            statuses[checked.origin] = status(scope, &checked.decision);
        }
    }
    let (code, headers) = match verdict.ending {
        Ending::Pass => (Code::Ok, verdict.answer.headers),
        Ending::Deny => (Code::OverLimit, verdict.answer.headers),
        Ending::Block => (Code::OverLimit, Vec::new()),
    };
    Ok((
        RateLimitResponse {
            overall_code: code as i32,
            statuses,
            response_headers_to_add: headers
                .into_iter()
                .filter(|(name, _)| !matches!(*name, "Content-Type" | "Content-Length"))
                .map(|(key, value)| HeaderValue {
                    key: key.to_owned(),
                    value,
                    raw_value: Vec::new(),
                })
                .collect(),
            request_headers_to_add: Vec::new(),
            raw_body: verdict.answer.body,
        },
        what,
    ))
}

/// Every status `code`, no limits, and `body` when over limit.
fn uniform(count: usize, code: Code, body: Vec<u8>) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: code as i32,
        statuses: vec![
            DescriptorStatus {
                code: code as i32,
                ..DescriptorStatus::default()
            };
            count
        ],
        raw_body: body,
        ..RateLimitResponse::default()
    }
}

/// A decided descriptor's status: its binding rule, what remains, and the
/// time until it resets (denied: until the same check would pass).
fn status(scope: &str, decision: &Decision) -> DescriptorStatus {
    let bind = decision.binding_state();
    let wait_ms = if decision.allowed() {
        bind.reset_after_ms
    } else {
        decision.retry_after_ms.unwrap_or(bind.window_ms)
    };
    DescriptorStatus {
        code: if decision.allowed() {
            Code::Ok
        } else {
            Code::OverLimit
        } as i32,
        current_limit: (!decision.is_listed()).then(|| RateLimit {
            name: format!("{scope} {}/{}", bind.limit, bind.window_name()),
            requests_per_unit: u32::try_from(bind.limit).unwrap_or(u32::MAX),
            unit: unit(bind.window_ms) as i32,
        }),
        limit_remaining: u32::try_from(bind.remaining).unwrap_or(u32::MAX),
        duration_until_reset: Some(prost_types::Duration {
            seconds: (wait_ms / 1000) as i64,
            nanos: ((wait_ms % 1000) * 1_000_000) as i32,
        }),
    }
}

/// Envoy's unit for a window, when it is exactly one (else UNKNOWN: the
/// limit's name still says it, as `api 5/10s`).
fn unit(window_ms: u64) -> Unit {
    match window_ms {
        1_000 => Unit::Second,
        60_000 => Unit::Minute,
        3_600_000 => Unit::Hour,
        86_400_000 => Unit::Day,
        _ => Unit::Unknown,
    }
}
