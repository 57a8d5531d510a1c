//! # ratekeeper-server
//!
//! ratekeeper at the edge: one server that answers reverse proxies on the
//! quotas the applications share. Run with a policy file (TOML, see
//! docs/edge.md) and a store:
//!
//! ```text
//! ratekeeper-server --config policy.toml --store redis://127.0.0.1:6379/0
//! ```
//!
//! - HTTP forward auth ([`forward`]) for nginx `auth_request`, Caddy
//!   `forward_auth` and Traefik `ForwardAuth`;
//! - Envoy's rate limit service over gRPC ([`envoy`]);
//! - `/healthz`, `/metrics` ([`metrics`]), reload on SIGHUP ([`state`]),
//!   graceful shutdown, `--check-config`.
//!
//! A throttle's quota is (prefix, scope, key), as in the Django and Rack
//! middlewares: a throttle named `api` keyed by `header:X-Api-Key` shares
//! its quota with a Django `PATHS` entry of scope `api` keyed the same way,
//! on the same store. Blocks, safelists, tiers, overrides and switches come
//! from the store, as the command line and the admin page set them.
//!
//! It may use the core (every decision is the core's gate: the server reads
//! the request, calls it and writes its answer), tokio, axum and tonic for
//! its doors, and the policy file's TOML; never a binding.

pub mod asked;
pub mod config;
pub mod envoy;
pub mod error;
pub mod forward;
pub mod logging;
pub mod metrics;
pub mod state;

/// The messages and service of Envoy's rate limit protocol, generated from
/// the vendored protos (`proto/`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    /// `envoy.config.core.v3`.
    pub mod config {
        /// `envoy.config.core.v3`.
        pub mod core {
            /// `envoy.config.core.v3`.
            pub mod v3 {
                tonic::include_proto!("envoy.config.core.v3");
            }
        }
    }
    /// `envoy.extensions.common.ratelimit.v3`.
    pub mod extensions {
        /// `envoy.extensions.common`.
        pub mod common {
            /// `envoy.extensions.common.ratelimit`.
            pub mod ratelimit {
                /// `envoy.extensions.common.ratelimit.v3`.
                pub mod v3 {
                    tonic::include_proto!("envoy.extensions.common.ratelimit.v3");
                }
            }
        }
    }
    /// `envoy.service.ratelimit.v3`.
    pub mod service {
        /// `envoy.service.ratelimit`.
        pub mod ratelimit {
            /// `envoy.service.ratelimit.v3`.
            pub mod v3 {
                tonic::include_proto!("envoy.service.ratelimit.v3");
            }
        }
    }
}
