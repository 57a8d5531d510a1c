//! The request a proxy asks about: its method, host, path and query as the
//! forward-auth headers give them, its headers and the peer, as the gate's
//! [`Facts`].

use crate::error::ServerError;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use ratekeeper_core::gate::source::{decoded_path, joined, BodyField, Head};
use ratekeeper_core::gate::Facts;
use std::net::SocketAddr;

/// Longest forwarded URI read (longer ones are refused).
pub const MAX_URI: usize = 16 * 1024;

/// The original request, as the proxy forwarded it.
#[derive(Debug, Clone)]
pub struct Forwarded {
    /// The method, the path (percent-decoded, as Django's `path_info`), the
    /// host, the address that connected (the proxy) and the query string.
    pub head: Head,
    /// The headers the proxy passed on.
    pub headers: HeaderMap,
}

/// Which proxy asks, and so which of the auth request's headers name the
/// original request. Each door believes only the headers its proxy sets
/// (and overwrites) on every auth request: a header a client sent that the
/// proxy passes on untouched is never read as the request's method, path or
/// host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// nginx's `auth_request` (`/nginx`): `X-Original-Method` and
    /// `X-Original-URI`, which the docs' recipe sets with
    /// `proxy_set_header` (nginx passes every other header of the client's
    /// to the subrequest as it came), and `X-Forwarded-Host`, which it sets
    /// too. Without `X-Original-URI` the request is refused: the path of
    /// the auth request itself (`/nginx`) is not the client's.
    Nginx,
    /// Caddy's `forward_auth` and Traefik's `ForwardAuth` (any other path):
    /// `X-Forwarded-Method`, `X-Forwarded-Uri` and `X-Forwarded-Host`,
    /// which both set on every auth request, replacing a client's own.
    ForwardAuth,
}

/// The headers a door reads the original request from (as the docs spell
/// them; a header's name is matched whatever its case).
struct Names {
    method: &'static str,
    uri: &'static str,
    host: &'static str,
    /// Whether a request without the URI header is refused (else the auth
    /// request's own path and query are read).
    uri_required: bool,
}

impl Door {
    /// The door's name in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Door::Nginx => "nginx",
            Door::ForwardAuth => "forward_auth",
        }
    }

    fn names(self) -> Names {
        match self {
            Door::Nginx => Names {
                method: "X-Original-Method",
                uri: "X-Original-URI",
                host: "X-Forwarded-Host",
                uri_required: true,
            },
            Door::ForwardAuth => Names {
                method: "X-Forwarded-Method",
                uri: "X-Forwarded-Uri",
                host: "X-Forwarded-Host",
                uri_required: false,
            },
        }
    }
}

impl Forwarded {
    /// Reads a forward-auth request as `door`'s proxy forwards it (see
    /// [`Door`]): the method, URI and host from the headers that proxy
    /// sets, the method falling back to the auth request's own, the host
    /// to `Host`; the client is found by the gate from the peer and
    /// `X-Forwarded-For`.
    pub fn from_forward_auth(
        parts: &Parts,
        peer: SocketAddr,
        door: Door,
    ) -> Result<Forwarded, ServerError> {
        let headers = &parts.headers;
        let names = door.names();
        let first = |name: &str| headers.get(name).map(|v| v.as_bytes());
        let method = match first(names.method) {
            Some(m) => std::str::from_utf8(m)
                .ok()
                .filter(|m| {
                    !m.is_empty() && m.len() <= 32 && m.bytes().all(|b| b.is_ascii_alphabetic())
                })
                .ok_or_else(|| {
                    ServerError::BadRequest(format!("{} is not an HTTP method", names.method))
                })?
                .to_ascii_uppercase(),
            None => parts.method.as_str().to_owned(),
        };
        let uri = match first(names.uri) {
            Some(u) => std::str::from_utf8(u)
                .map_err(|_| ServerError::BadRequest(format!("{} is not UTF-8", names.uri)))?
                .to_owned(),
            None if names.uri_required => {
                return Err(ServerError::BadRequest(format!(
                    "the {} door reads the original request from {}, which the proxy did not set",
                    door.name(),
                    names.uri
                )))
            }
            None => parts
                .uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
        };
        if uri.len() > MAX_URI {
            return Err(ServerError::BadRequest(format!(
                "the forwarded URI is longer than {MAX_URI} bytes"
            )));
        }
        let uri = strip_origin(&uri);
        if !uri.starts_with('/') && uri != "*" {
            return Err(ServerError::BadRequest(format!(
                "the forwarded URI is not a path: give {} as /path?query",
                names.uri
            )));
        }
        let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
        let host = first(names.host)
            .or_else(|| first("host"))
            .and_then(|h| std::str::from_utf8(h).ok())
            .unwrap_or_default();
        Ok(Forwarded {
            head: Head::new(
                &method,
                decoded_path(path.as_bytes()),
                host,
                peer.ip().to_string(),
                query.to_owned(),
            ),
            headers: headers.clone(),
        })
    }
}

impl Facts for Forwarded {
    fn head(&self) -> &Head {
        &self.head
    }

    fn header(&self, name: &str) -> Option<Vec<u8>> {
        joined(self.headers.get_all(name).iter().map(|v| v.as_bytes()))
    }

    /// The edge sees no body: an `identity:FIELD` is the query's field
    /// (each of its values).
    fn body_field(&self, field: &str) -> BodyField {
        BodyField::of(self.query(field))
    }
}

/// `http://host/path` as `/path` (a proxy may forward the absolute form).
fn strip_origin(uri: &str) -> &str {
    for scheme in ["http://", "https://"] {
        if let Some(rest) = uri.strip_prefix(scheme) {
            return rest.find('/').map_or("/", |i| &rest[i..]);
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratekeeper_core::gate::source::{percent_decode, value_of, Client};
    use ratekeeper_core::gate::Source;
    use ratekeeper_core::TrustedProxies;

    fn forwarded(
        uri: &str,
        headers: &[(&str, &str)],
        peer: &str,
        trusted: &[&str],
    ) -> Result<(Forwarded, Client), ServerError> {
        let mut builder = axum::http::Request::builder().uri("/auth");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let (mut parts, _) = builder.body(()).unwrap().into_parts();
        if !uri.is_empty() {
            parts
                .headers
                .insert("x-forwarded-uri", uri.parse().unwrap());
        }
        let o = Forwarded::from_forward_auth(&parts, peer.parse().unwrap(), Door::ForwardAuth)?;
        let client = Client::of(&o, &TrustedProxies::parse(trusted).unwrap());
        Ok((o, client))
    }

    #[test]
    fn forwarded_requests_are_read() {
        let (o, client) = forwarded(
            "/api/x%2Fy?key=a%20b&plan=pro+plus&email=%20Alice@Example.com",
            &[
                ("x-forwarded-method", "post"),
                ("x-forwarded-host", "API.example.com:8443"),
                ("x-forwarded-for", "203.0.113.9, 127.0.0.1"),
            ],
            "127.0.0.1:5000",
            &["127.0.0.1"],
        )
        .unwrap();
        assert_eq!(o.head.method, "POST");
        assert_eq!(o.head.host, "api.example.com");
        assert_eq!(o.head.path, "/api/x/y");
        assert_eq!(client.ip, "203.0.113.9");
        let value = |s: Source| value_of(&s, &o, &client);
        assert_eq!(value(Source::Query("key".into())).unwrap(), b"a b");
        assert_eq!(value(Source::Query("plan".into())).unwrap(), b"pro plus");
        assert_eq!(
            value(Source::Identity("email".into())).unwrap(),
            b"email=alice@example.com"
        );
        assert_eq!(value(Source::Query("none".into())), None);
    }

    /// The auth request nginx sends for `headers` (what the recipe sets
    /// beside what the client sent).
    fn nginx(headers: &[(&str, &str)]) -> Result<Forwarded, ServerError> {
        let mut builder = axum::http::Request::builder().uri("/nginx");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let (parts, _) = builder.body(()).unwrap().into_parts();
        Forwarded::from_forward_auth(&parts, "127.0.0.1:1".parse().unwrap(), Door::Nginx)
    }

    #[test]
    fn each_door_believes_only_what_its_proxy_sets() {
        // nginx passes the client's own X-Forwarded-* to the subrequest
        let o = nginx(&[
            ("x-forwarded-uri", "/health"),
            ("x-forwarded-method", "GET"),
            ("x-original-uri", "/login?next=%2F"),
            ("x-original-method", "POST"),
        ])
        .unwrap();
        assert_eq!(
            (o.head.method.as_str(), o.head.path.as_str()),
            ("POST", "/login")
        );
        assert_eq!(o.head.query, "next=%2F");
        let e = nginx(&[("x-forwarded-uri", "/health")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("X-Original-URI") && e.contains("did not set"),
            "{e}"
        );
        // Caddy and Traefik set X-Forwarded-*: a client's X-Original-* is nothing
        let (o, _) = forwarded(
            "/login",
            &[
                ("x-original-uri", "/health"),
                ("x-original-method", "GET"),
                ("x-forwarded-method", "POST"),
            ],
            "127.0.0.1:1",
            &[],
        )
        .unwrap();
        assert_eq!(
            (o.head.method.as_str(), o.head.path.as_str()),
            ("POST", "/login")
        );
    }

    #[test]
    fn an_ipv6_client_is_keyed_by_its_64() {
        let keys: std::collections::HashSet<String> = (1..=100)
            .map(|i| {
                let peer = format!("[2001:db8:7:7::{i:x}]:4000");
                forwarded("/", &[], &peer, &[]).unwrap().1.key
            })
            .collect();
        assert_eq!(keys.len(), 1, "100 addresses of one /64 are one client");
        assert!(keys.contains("2001:db8:7:7::/64"));
        let (_, c) = forwarded("/", &[], "[2001:db8:7:8::1]:4000", &[]).unwrap();
        assert_eq!(c.key, "2001:db8:7:8::/64");
        assert_eq!(c.ip, "2001:db8:7:8::1", "the address itself is screened");
        let (_, c) = forwarded("/", &[], "[::ffff:203.0.113.7]:4000", &[]).unwrap();
        assert_eq!(c.key, "203.0.113.7");
    }

    #[test]
    fn untrusted_peers_are_the_client() {
        let (_, c) = forwarded(
            "/",
            &[("x-forwarded-for", "1.2.3.4")],
            "198.51.100.1:1",
            &["127.0.0.1"],
        )
        .unwrap();
        assert_eq!(c.ip, "198.51.100.1");
        let (_, c) = forwarded(
            "/",
            &[("x-forwarded-for", "garbage, ::1]")],
            "127.0.0.1:1",
            &["127.0.0.1"],
        )
        .unwrap();
        assert_eq!(c.ip, "127.0.0.1");
    }

    #[test]
    fn hostile_forwarded_requests_are_refused_by_name() {
        for (uri, headers, word) in [
            (
                "",
                &[("x-forwarded-method", "GE T")][..],
                "X-Forwarded-Method",
            ),
            ("no-slash", &[][..], "not a path"),
            (&"/a".repeat(MAX_URI) as &str, &[][..], "longer"),
        ] {
            let e = forwarded(uri, headers, "127.0.0.1:1", &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains(word), "{e}");
        }
        assert_eq!(percent_decode(b"%zz%4", false), b"%zz%4");
    }
}
