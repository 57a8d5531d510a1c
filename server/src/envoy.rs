//! The gRPC door: Envoy's rate limit service
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`).
//!
//! Each descriptor selects the first throttle (file order) whose
//! `envoy.domain` is the request's domain, whose `envoy.match` entries it
//! holds, and which holds the throttle's `envoy.key` entry: that entry's
//! value is the key. A descriptor no throttle selects is OK, unlimited. The
//! cost is the descriptor's `hits_addend`, else the request's, else 1. All
//! selected throttles are checked in one round trip; each that admits
//! counts; the request is OVER_LIMIT when any is denied. A `remote_address`
//! entry is the client address: listed in the store, it blocks (every
//! status OVER_LIMIT, the blocked body) or safelists (every status OK).
//! Each status carries the binding rule (`current_limit`), what remains,
//! and the time until it resets (a denial: until it would pass); the
//! response carries the rate-limit headers (and `Retry-After`, and the JSON
//! body as `raw_body`, when over limit). A descriptor's `limit` override is
//! ignored: limits come from the policy file and the store.

use crate::error::ServerError;
use crate::gate::{least_remaining, log_denial, warn_once};
use crate::policy::Policy;
use crate::proto::config::core::v3::HeaderValue;
use crate::proto::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit, Code, DescriptorStatus, RateLimit,
};
use crate::proto::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use crate::proto::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use crate::state::State;
use ratekeeper_core::{check_batch_async, BatchItem, Decision};
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

/// The descriptors' entries, checked.
fn entries(request: &RateLimitRequest) -> Result<Vec<Vec<(String, String)>>, ServerError> {
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
        out.push(
            descriptor
                .entries
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect(),
        );
    }
    Ok(out)
}

fn remote_address(entries: &[(String, String)]) -> Option<&str> {
    entries
        .iter()
        .find(|(k, _)| k == "remote_address")
        .map(|(_, v)| v.as_str())
}

/// The answer to one request, and what it came to (`pass`, `deny`, `block`).
pub async fn answer(
    policy: &Policy,
    request: RateLimitRequest,
) -> Result<(RateLimitResponse, &'static str), ServerError> {
    let all = entries(&request)?;
    let responses = &policy.spec.responses;
    let client = all.iter().find_map(|e| remote_address(e));
    if let Some(listed) = client.and_then(|ip| policy.base.screen(ip)) {
        return Ok(if listed.allowed() {
            (uniform(all.len(), Code::Ok, Vec::new()), "pass")
        } else {
            (
                uniform(all.len(), Code::OverLimit, responses.blocked().body),
                "block",
            )
        });
    }
    let selected: Vec<_> = all
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let (throttle, _, key) = policy.envoy_throttle(&request.domain, e)?;
            let cost = request.descriptors[i]
                .hits_addend
                .filter(|n| *n > 0)
                .or((request.hits_addend > 0).then_some(u64::from(request.hits_addend)))
                .unwrap_or(1);
            Some((i, throttle, key, cost, remote_address(e).or(client)))
        })
        .collect();
    let items: Vec<BatchItem<'_>> = selected
        .iter()
        .map(|(_, throttle, key, cost, ip)| BatchItem {
            ip: *ip,
            ..BatchItem::new(&throttle.limiter, key, *cost)
        })
        .collect();
    let decisions = if items.is_empty() {
        Vec::new()
    } else {
        check_batch_async(&items, None).await?
    };
    let mut statuses = vec![
        DescriptorStatus {
            code: Code::Ok as i32,
            ..DescriptorStatus::default()
        };
        all.len()
    ];
    let mut denied: Option<&Decision> = None;
    let mut blocked = false;
    let mut shown: Option<&Decision> = None;
    for ((i, throttle, key, _, _), decision) in selected.iter().zip(&decisions) {
        warn_once(decision);
        statuses[*i] = status(&throttle.spec.scope, decision);
        if decision.blocked() && !decision.allowed() {
            blocked = true;
        } else if !decision.allowed() {
            if denied.is_none() {
                log_denial(policy, decision, &throttle.spec.scope, key, "", "");
                denied = Some(decision);
            }
        } else if !decision.is_listed() {
            shown = least_remaining(shown, decision);
        }
    }
    let (code, headers, body, what) = if blocked {
        (
            Code::OverLimit,
            Vec::new(),
            responses.blocked().body,
            "block",
        )
    } else if let Some(decision) = denied {
        let answer = responses.answer(decision);
        (Code::OverLimit, answer.headers, answer.body, "deny")
    } else {
        let headers = shown.map(|d| responses.pass_headers(d)).unwrap_or_default();
        (Code::Ok, headers, Vec::new(), "pass")
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
            raw_body: body,
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
