//! The HTTP door: forward auth as Traefik `ForwardAuth`, Caddy
//! `forward_auth` and nginx `auth_request` ask it, `/healthz` and
//! `/metrics`.
//!
//! - `/nginx`: for nginx's `auth_request`, which takes any answer but 2xx,
//!   401 and 403 for an error: a denial comes as 401 (with `Retry-After`,
//!   the rate-limit headers and the JSON body), which the docs' nginx recipe (docs/edge.md) turns
//!   back into the client's 429. The original request is read from
//!   `X-Original-Method` and `X-Original-URI` only ([`Door::Nginx`]).
//! - every other path (say `/auth`): a pass is 200 with the rate-limit
//!   headers, a denial the core's 429 (`Retry-After`, JSON body), a block
//!   its 403; proxies hand these to the client as they are. The original
//!   request is read from `X-Forwarded-Method` and `X-Forwarded-Uri` only
//!   ([`Door::ForwardAuth`]).
//!
//! A forwarded request the server cannot read is answered 400 with a JSON
//! body naming the problem.

use crate::asked::{Door, Forwarded};
use crate::metrics;
use crate::state::State;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use ratekeeper_core::gate::{Ending, Step, Verdict};
use ratekeeper_core::http::{self, Answer};
use std::net::SocketAddr;
use std::sync::Arc;

/// The HTTP door's routes.
pub fn router(state: Arc<State>) -> Router {
    let metrics_state = state.clone();
    let nginx_state = state.clone();
    Router::new()
        .route("/healthz", get(healthz))
        .route(
            "/metrics",
            get(move || async move { metrics_response(&metrics_state) }),
        )
        .route(
            "/nginx",
            axum::routing::any(move |info, request| {
                forward_auth(nginx_state.clone(), Door::Nginx, info, request)
            }),
        )
        .fallback(move |info, request| {
            forward_auth(state.clone(), Door::ForwardAuth, info, request)
        })
}

async fn healthz() -> Response {
    answered(http::healthy())
}

fn metrics_response(state: &State) -> Response {
    let mut response = Response::new(Body::from(metrics::render(state)));
    response.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

async fn forward_auth(
    state: Arc<State>,
    door: Door,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let policy = state.policy();
    let (parts, _) = request.into_parts();
    let forwarded = match Forwarded::from_forward_auth(&parts, peer, door) {
        Ok(forwarded) => forwarded,
        Err(e) => {
            state.counters.request(door.name(), "bad_request");
            log::warn!("bad forwarded request from {peer}: {e}");
            return answered(http::bad_request(&e.to_string()));
        }
    };
    let decided = match policy.prepare(&forwarded) {
        Step::Done(verdict) => Ok(*verdict),
        Step::Ask(plan) => policy.run_async(plan).await,
    };
    match decided {
        Ok(verdict) => {
            crate::logging::verdict(&verdict);
            state.counters.request(door.name(), verdict.ending.name());
            rendered(verdict, door == Door::Nginx)
        }
        Err(e) => {
            state.counters.request(door.name(), "error");
            log::error!("check failed (on_error = \"raise\"): {e}");
            answered(http::store_error())
        }
    }
}

/// The verdict as the proxy gets it (`for_nginx`: a denial as 401, a block
/// as 403, whatever statuses the policy gives them).
fn rendered(verdict: Verdict, for_nginx: bool) -> Response {
    let answer = verdict.answer;
    match verdict.ending {
        Ending::Pass => with_headers(Response::new(Body::empty()), answer.headers),
        Ending::Deny if for_nginx => answered(Answer {
            status: Some(401),
            ..answer
        }),
        Ending::Block if for_nginx => answered(Answer {
            status: Some(403),
            ..answer
        }),
        Ending::Deny | Ending::Block => answered(answer),
    }
}

fn answered(answer: Answer) -> Response {
    let mut response = with_headers(Response::new(Body::from(answer.body)), answer.headers);
    *response.status_mut() =
        StatusCode::from_u16(answer.status.unwrap_or(200)).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    response
}

fn with_headers(mut response: Response, headers: Vec<(&'static str, String)>) -> Response {
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
