//! The request a proxy asks about: its method, host, path and query as the
//! forward-auth headers give them, its headers, and the client address by
//! the trusted proxies; and where in it a key or a tier name is found.

use crate::error::ServerError;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use ratekeeper_core::TrustedProxies;
use std::net::SocketAddr;

/// Longest forwarded URI read (longer ones are refused).
pub const MAX_URI: usize = 16 * 1024;

/// Where a key (or a tier name) is read from a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The client address.
    Ip,
    /// A header's bytes, as they came (Django's `header:NAME`, Rack's
    /// `get_header`): one key for the edge and both apps.
    Header(String),
    /// A query string field, percent-decoded (Django's `get:FIELD`).
    Query(String),
    /// A query string field that names a person, trimmed and lower-cased,
    /// as `FIELD=value` (Django's `identity:FIELD`, Rack's `req.identity`).
    Identity(String),
}

impl Source {
    /// Parses `ip`, `header:NAME`, `query:FIELD` (or `get:FIELD`) or
    /// `identity:FIELD`.
    pub fn parse(text: &str) -> Result<Source, String> {
        let bad = || {
            format!(
                "invalid key '{}': use 'ip', 'header:NAME', 'query:FIELD' or 'identity:FIELD'",
                text.escape_debug()
            )
        };
        if text == "ip" {
            return Ok(Source::Ip);
        }
        let (kind, name) = text.split_once(':').ok_or_else(bad)?;
        if name.is_empty() {
            return Err(bad());
        }
        match kind {
            "header" => axum::http::HeaderName::from_bytes(name.as_bytes())
                .map(|n| Source::Header(n.as_str().to_owned()))
                .map_err(|_| bad()),
            "query" | "get" => Ok(Source::Query(name.to_owned())),
            "identity" => Ok(Source::Identity(name.to_owned())),
            _ => Err(bad()),
        }
    }
}

/// The original request, as the proxy forwarded it.
#[derive(Debug, Clone)]
pub struct Original {
    /// Upper-case method.
    pub method: String,
    /// Lower-case host, without a port.
    pub host: String,
    /// The path, percent-decoded (as Django's `path_info`), for matching.
    pub path: String,
    /// The query string, as it came.
    pub query: String,
    /// The headers the proxy passed on.
    pub headers: HeaderMap,
    /// The client address (the peer, or by `X-Forwarded-For` through trusted proxies).
    pub ip: String,
    /// The client as keys of kind `ip` and address bans name it: the
    /// address's network by the policy's prefixes (an IPv6 client's /64).
    pub client: String,
}

fn header<'h>(headers: &'h HeaderMap, names: &[&str]) -> Option<&'h [u8]> {
    names
        .iter()
        .find_map(|n| headers.get(*n))
        .map(|v| v.as_bytes())
}

impl Original {
    /// Reads a forward-auth request: `X-Forwarded-Method` (or nginx's
    /// `X-Original-Method`), `X-Forwarded-Uri` (or `X-Original-URI`),
    /// `X-Forwarded-Host` (or `Host`), each falling back to the auth
    /// request's own; the client address from the peer and
    /// `X-Forwarded-For` by `proxies`.
    pub fn from_forward_auth(
        parts: &Parts,
        peer: SocketAddr,
        proxies: &TrustedProxies,
    ) -> Result<Original, ServerError> {
        let headers = &parts.headers;
        let method = match header(headers, &["x-forwarded-method", "x-original-method"]) {
            Some(m) => std::str::from_utf8(m)
                .ok()
                .filter(|m| {
                    !m.is_empty() && m.len() <= 32 && m.bytes().all(|b| b.is_ascii_alphabetic())
                })
                .ok_or_else(|| {
                    ServerError::BadRequest("X-Forwarded-Method is not an HTTP method".into())
                })?
                .to_ascii_uppercase(),
            None => parts.method.as_str().to_owned(),
        };
        let uri = match header(headers, &["x-forwarded-uri", "x-original-uri"]) {
            Some(u) => std::str::from_utf8(u)
                .map_err(|_| ServerError::BadRequest("the forwarded URI is not UTF-8".into()))?
                .to_owned(),
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
            return Err(ServerError::BadRequest(
                "the forwarded URI is not a path: give X-Forwarded-Uri (or X-Original-URI) as /path?query"
                    .into(),
            ));
        }
        let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
        let host = header(headers, &["x-forwarded-host", "host"])
            .and_then(|h| std::str::from_utf8(h).ok())
            .map(host_name)
            .unwrap_or_default();
        let forwarded_for = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        let forwarded_for = (!forwarded_for.is_empty()).then_some(forwarded_for.as_str());
        Ok(Original {
            method,
            host,
            path: String::from_utf8_lossy(&percent_decode(path.as_bytes(), false)).into_owned(),
            query: query.to_owned(),
            headers: headers.clone(),
            ip: proxies.client_ip(&peer.ip().to_string(), forwarded_for),
            client: proxies.client_key(&peer.ip().to_string(), forwarded_for),
        })
    }

    /// The request's value of `source`: `None` when it has none (an absent
    /// or empty header or field: the throttle does not apply).
    pub fn value(&self, source: &Source) -> Option<Vec<u8>> {
        match source {
            Source::Ip => Some(self.client.clone().into_bytes()),
            Source::Header(name) => self
                .headers
                .get(name.as_str())
                .map(|v| v.as_bytes().to_vec())
                .filter(|v| !v.is_empty()),
            Source::Query(field) => self.query(field).filter(|v| !v.is_empty()),
            Source::Identity(field) => {
                let value = self.query(field)?;
                let found = ratekeeper_core::identity(&String::from_utf8_lossy(&value))?;
                Some(format!("{field}={found}").into_bytes())
            }
        }
    }

    /// The first value of query field `field`, decoded as a form field
    /// (`+` is a space).
    pub fn query(&self, field: &str) -> Option<Vec<u8>> {
        self.query.split('&').find_map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(name.as_bytes(), true) == field.as_bytes())
                .then(|| percent_decode(value.as_bytes(), true))
        })
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

/// A Host header's name: lower case, without the port.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if host.starts_with('[') {
        host.split_once(']')
            .map_or(host, |(v6, _)| v6)
            .trim_start_matches('[')
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(host, |(name, _)| name)
    };
    name.to_ascii_lowercase()
}

/// `%XX` decoded (a malformed escape kept as it is); `+` as a space in a form field.
fn percent_decode(bytes: &[u8], form: bool) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if form => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn original(
        uri: &str,
        headers: &[(&str, &str)],
        peer: &str,
        trusted: &[&str],
    ) -> Result<Original, ServerError> {
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
        Original::from_forward_auth(
            &parts,
            peer.parse().unwrap(),
            &TrustedProxies::parse(trusted).unwrap(),
        )
    }

    #[test]
    fn forwarded_requests_are_read() {
        let o = original(
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
        assert_eq!(o.method, "POST");
        assert_eq!(o.host, "api.example.com");
        assert_eq!(o.path, "/api/x/y");
        assert_eq!(o.ip, "203.0.113.9");
        assert_eq!(o.value(&Source::Query("key".into())).unwrap(), b"a b");
        assert_eq!(o.value(&Source::Query("plan".into())).unwrap(), b"pro plus");
        assert_eq!(
            o.value(&Source::Identity("email".into())).unwrap(),
            b"email=alice@example.com"
        );
        assert_eq!(o.value(&Source::Query("none".into())), None);
    }

    #[test]
    fn an_ipv6_client_is_keyed_by_its_64() {
        let keys: std::collections::HashSet<Vec<u8>> = (1..=100)
            .map(|i| {
                let peer = format!("[2001:db8:7:7::{i:x}]:4000");
                original("/", &[], &peer, &[])
                    .unwrap()
                    .value(&Source::Ip)
                    .unwrap()
            })
            .collect();
        assert_eq!(keys.len(), 1, "100 addresses of one /64 are one client");
        assert!(keys.contains(b"2001:db8:7:7::/64".as_slice()));
        let o = original("/", &[], "[2001:db8:7:8::1]:4000", &[]).unwrap();
        assert_eq!(o.value(&Source::Ip).unwrap(), b"2001:db8:7:8::/64");
        assert_eq!(o.ip, "2001:db8:7:8::1", "the address itself is screened");
        let o = original("/", &[], "[::ffff:203.0.113.7]:4000", &[]).unwrap();
        assert_eq!(o.value(&Source::Ip).unwrap(), b"203.0.113.7");
    }

    #[test]
    fn untrusted_peers_are_the_client() {
        let o = original(
            "/",
            &[("x-forwarded-for", "1.2.3.4")],
            "198.51.100.1:1",
            &["127.0.0.1"],
        )
        .unwrap();
        assert_eq!(o.ip, "198.51.100.1");
        let o = original(
            "/",
            &[("x-forwarded-for", "garbage, ::1]")],
            "127.0.0.1:1",
            &["127.0.0.1"],
        )
        .unwrap();
        assert_eq!(o.ip, "127.0.0.1");
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
            let e = original(uri, headers, "127.0.0.1:1", &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains(word), "{e}");
        }
        assert_eq!(percent_decode(b"%zz%4", false), b"%zz%4");
        assert_eq!(percent_decode(b"%41%", false), b"A%");
    }

    #[test]
    fn sources_parse() {
        assert_eq!(
            Source::parse("header:X-Api-Key").unwrap(),
            Source::Header("x-api-key".into())
        );
        for bad in ["", "header:", "cookie:a", "header:a b"] {
            assert!(
                Source::parse(bad).unwrap_err().contains("invalid key"),
                "{bad}"
            );
        }
    }
}
