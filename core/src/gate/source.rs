//! A request as the gate sees it ([`Facts`]: what every door reads from
//! its framework's request) and where in it a key or a tier name is found
//! ([`Source`]). Every door names a request's keys the same way, so one
//! quota is shared by the apps and the edge.

use crate::keys::identity;

/// Where a key (or a tier name) is read from a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The client: its address's network by the client prefixes (an IPv6
    /// client as its /64).
    Ip,
    /// The signed-in user as `user:ID`, else the client as `ip:CLIENT`
    /// (each framework says who is signed in).
    User,
    /// A header's bytes, as they came.
    Header(String),
    /// A query string field, percent-decoded.
    Query(String),
    /// A form or JSON body field that names a person, trimmed and
    /// lower-cased, as `FIELD=value` (no address or `user:` key can equal
    /// it, so a ban of what a client typed never bans an address or a user).
    Identity(String),
    /// A callable the door holds (a Python function, a Ruby block), by its index.
    Call(usize),
}

impl Source {
    /// Parses `ip`, `user`, `header:NAME`, `query:FIELD` (or `get:FIELD`),
    /// `identity:FIELD`, or `call:N` for one of the `callables` the door holds.
    pub fn parse(text: &str, callables: usize) -> Result<Source, String> {
        let bad = || {
            format!(
                "invalid key '{}': use 'ip', 'user', 'header:NAME', 'query:FIELD', 'identity:FIELD'{}",
                text.escape_debug(),
                if callables > 0 { " or a callable" } else { "" }
            )
        };
        match text {
            "ip" => return Ok(Source::Ip),
            "user" => return Ok(Source::User),
            _ => {}
        }
        let (kind, name) = text.split_once(':').ok_or_else(bad)?;
        if name.is_empty() {
            return Err(bad());
        }
        match kind {
            "header" => super::spec::header_name(name)
                .map(Source::Header)
                .ok_or_else(bad),
            "query" | "get" => Ok(Source::Query(name.to_owned())),
            "identity" => Ok(Source::Identity(name.to_owned())),
            "call" => name
                .parse::<usize>()
                .ok()
                .filter(|n| *n < callables)
                .map(Source::Call)
                .ok_or_else(bad),
            _ => Err(bad()),
        }
    }
}

/// What every door reads of a request the same way.
#[derive(Debug, Clone, Default)]
pub struct Head {
    /// The method, upper case.
    pub method: String,
    /// The path, percent-decoded (Django's `path_info`; a Rack door decodes
    /// `PATH_INFO`, [`decoded_path`]), each run of slashes one slash (as
    /// Rails routes `//login` to `/login`: a policy's `/login` holds there).
    pub path: String,
    /// The host, lower case, without a port.
    pub host: String,
    /// The address that connected (a proxy's, when one is in front).
    pub peer: String,
    /// The query string, as it came.
    pub query: String,
}

impl Head {
    /// A request's head as a door read it: the method is upper-cased, each
    /// run of slashes in the path made one, and the Host header's name kept
    /// (lower case, no port).
    pub fn new(method: &str, path: String, host: &str, peer: String, query: String) -> Head {
        Head {
            method: method.to_ascii_uppercase(),
            path: single_slashes(path),
            host: host_name(host),
            peer,
            query,
        }
    }
}

/// What a door knows of a request. The gate asks for what the policy needs
/// and nothing more: a header, a body field, the user or a callable only
/// when an entry that applies reads one.
pub trait Facts {
    /// The method, path, host, peer and query string.
    fn head(&self) -> &Head;
    /// The method, upper case.
    fn method(&self) -> &str {
        &self.head().method
    }
    /// The path, percent-decoded.
    fn path(&self) -> &str {
        &self.head().path
    }
    /// The host, lower case, without a port.
    fn host(&self) -> &str {
        &self.head().host
    }
    /// The address that connected (a proxy's, when one is in front).
    fn peer(&self) -> &str {
        &self.head().peer
    }
    /// A header's value, as it came; `name` is lower case. A repeated
    /// header's values are joined with `, ` (see [`joined`]).
    fn header(&self, name: &str) -> Option<Vec<u8>>;
    /// Every value of query field `field`, in order, decoded as a form
    /// field (a repeated field has several: frameworks serve one of them,
    /// Django, Rack and Starlette the last, Flask the first).
    fn query(&self, field: &str) -> Vec<Vec<u8>> {
        query_fields(&self.head().query, field)
    }
    /// Field `field` of a posted form or JSON object body, as the door
    /// read it.
    fn body_field(&self, _field: &str) -> BodyField {
        BodyField::Absent
    }
    /// The signed-in user's id, when the framework has one.
    fn user(&self) -> Option<String> {
        None
    }
    /// What the door's callable `index` says of the request (a key, a tier
    /// name; for a ban's match, any value means true).
    fn call(&self, _index: usize) -> Option<Vec<u8>> {
        None
    }
    /// Units the request costs (1 unless the door says otherwise).
    fn cost(&self) -> u64 {
        1
    }
}

/// The most of a request body a door reads for an `identity:FIELD` key
/// (every door, in both languages: one cap, one answer).
pub const MAX_BODY: usize = 64 * 1024;

/// How much of a request's body a door reads for a field, from its
/// `Content-Length` and `Transfer-Encoding` headers: the length (1 to
/// [`MAX_BODY`] bytes), `Some(0)` when the request has no body, `None` when
/// it has one the door may not read (longer, chunked without a length, a
/// length that is not a number): the throttle then counts the client.
pub fn readable_length(
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> Option<usize> {
    let given = content_length.map(str::trim).filter(|l| !l.is_empty());
    let Some(given) = given else {
        let chunked = transfer_encoding.is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
        return if chunked { None } else { Some(0) };
    };
    match given.parse::<i128>() {
        Ok(0) => Some(0),
        Ok(length) if length > 0 && length <= MAX_BODY as i128 => Some(length as usize),
        _ => None,
    }
}

/// What a door found of a body field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyField {
    /// The request has no such field (or no body).
    Absent,
    /// Its values, as bytes (a repeated form field has several).
    Values(Vec<Vec<u8>>),
    /// The request has a body the door could not read (too large, without
    /// a length, of a type it does not parse) while the app may: the
    /// throttle counts the client instead of skipping the request.
    Unreadable,
}

impl BodyField {
    /// The values a door found: [`BodyField::Absent`] when none.
    pub fn of(values: Vec<Vec<u8>>) -> BodyField {
        if values.is_empty() {
            BodyField::Absent
        } else {
            BodyField::Values(values)
        }
    }
}

/// The client a request comes from: its address, and its name in keys of
/// kind `ip` and address bans (the network by the client prefixes).
#[derive(Debug, Clone)]
pub struct Client {
    /// The address (the peer, or by `X-Forwarded-For` through trusted proxies).
    pub ip: String,
    /// The address's network by the client prefixes (an IPv6 client's /64).
    pub key: String,
}

impl Client {
    /// The client of `facts` by `proxies`.
    pub fn of(facts: &dyn Facts, proxies: &crate::net::TrustedProxies) -> Client {
        let forwarded = facts
            .header("x-forwarded-for")
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        let (ip, key) = proxies.client_ip_and_key(facts.peer(), forwarded.as_deref());
        Client { ip, key }
    }
}

/// Every value the request holds for `source`, each once, in order: none
/// when it has none (an absent or empty header, field or key: the
/// throttle does not apply). A repeated query or body field has one per
/// distinct value, and a throttle keyed by it counts the request against
/// each: which value an app serves is the framework's choice, never the
/// client's way out of a spent quota. An `identity:FIELD` in a body the
/// door could not read is the client, as `FIELD@ip:CLIENT` (a quota of its
/// own, which no identity or address can equal).
pub fn values_of(source: &Source, facts: &dyn Facts, client: &Client) -> Vec<Vec<u8>> {
    let mut values = match source {
        Source::Ip => vec![client.key.clone().into_bytes()],
        Source::User => vec![match facts.user() {
            Some(id) => format!("user:{id}").into_bytes(),
            None => format!("ip:{}", client.key).into_bytes(),
        }],
        Source::Header(name) => facts.header(name).into_iter().collect(),
        Source::Query(field) => facts.query(field),
        Source::Identity(field) => match facts.body_field(field) {
            BodyField::Absent => Vec::new(),
            BodyField::Values(found) => found
                .iter()
                .filter_map(|v| identity(&String::from_utf8_lossy(v)))
                .map(|v| format!("{field}={v}").into_bytes())
                .collect(),
            BodyField::Unreadable => vec![format!("{field}@ip:{}", client.key).into_bytes()],
        },
        Source::Call(index) => facts.call(*index).into_iter().collect(),
    };
    values.retain(|v| !v.is_empty());
    if values.len() > 1 {
        let mut seen = std::collections::HashSet::new();
        values.retain(|v| seen.insert(v.clone()));
    }
    values
}

/// The request's one value of `source`: `None` when it has none, or when
/// a repeated field holds different values (a tier is not chosen by the
/// order of a client's fields).
pub fn value_of(source: &Source, facts: &dyn Facts, client: &Client) -> Option<Vec<u8>> {
    let mut values = values_of(source, facts, client);
    (values.len() == 1).then(|| values.remove(0))
}

/// A repeated header's values as one (joined with `, `); `None` for none.
pub fn joined<'v>(values: impl IntoIterator<Item = &'v [u8]>) -> Option<Vec<u8>> {
    let mut values = values.into_iter();
    let mut out = values.next()?.to_vec();
    for more in values {
        out.extend_from_slice(b", ");
        out.extend_from_slice(more);
    }
    Some(out)
}

/// Where a WSGI environ, Django's `META` or a Rack env holds header `name`
/// (lower case): `HTTP_X_API_KEY`, and `CONTENT_TYPE`, `CONTENT_LENGTH`.
pub fn cgi_name(name: &str) -> String {
    let upper = name.to_ascii_uppercase().replace('-', "_");
    match name {
        "content-type" | "content-length" => upper,
        _ => format!("HTTP_{upper}"),
    }
}

/// Every value of `field` in a query string (or a form body), in order,
/// decoded as a form field (`+` is a space).
pub fn query_fields(query: &str, field: &str) -> Vec<Vec<u8>> {
    query
        .split('&')
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(name.as_bytes(), true) == field.as_bytes())
                .then(|| percent_decode(value.as_bytes(), true))
        })
        .collect()
}

/// `path` with each run of slashes made one.
fn single_slashes(path: String) -> String {
    if !path.contains("//") {
        return path;
    }
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

/// A path as the request spelled it (a proxy's forwarded URI, Rack's
/// `PATH_INFO`) as every door hands it to the gate: percent-decoded (a
/// malformed escape kept as it is), bytes that are not UTF-8 as U+FFFD.
pub fn decoded_path(raw: &[u8]) -> String {
    String::from_utf8_lossy(&percent_decode(raw, false)).into_owned()
}

/// `%XX` decoded (a malformed escape kept as it is); `+` as a space in a form field.
pub fn percent_decode(bytes: &[u8], form: bool) -> Vec<u8> {
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

/// A Host header's name: lower case, without the port and without one
/// trailing dot (`api.example.com.` is the same host, and Django serves it).
pub fn host_name(host: &str) -> String {
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
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// `api.example.com` matches itself; `*.example.com` matches its subdomains.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
        None => pattern == host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_door_reads_a_body_of_a_known_length_up_to_the_cap() {
        let read = |length: Option<&str>, encoding: Option<&str>| readable_length(length, encoding);
        assert_eq!(read(None, None), Some(0));
        assert_eq!(read(Some(""), None), Some(0));
        assert_eq!(read(Some("0"), None), Some(0));
        assert_eq!(read(Some(" 17 "), None), Some(17));
        assert_eq!(read(Some("65536"), None), Some(MAX_BODY));
        assert_eq!(read(Some("65537"), None), None);
        assert_eq!(read(Some("-1"), None), None);
        assert_eq!(read(Some("1e3"), None), None);
        assert_eq!(read(Some("99999999999999999999999999"), None), None);
        assert_eq!(read(None, Some("gzip, Chunked")), None);
        assert_eq!(read(Some("12"), Some("chunked")), Some(12));
    }

    #[test]
    fn a_head_holds_its_path_with_single_slashes() {
        let head = |path: &str| Head::new("get", path.to_owned(), "", String::new(), String::new());
        assert_eq!(head("//login").path, "/login");
        assert_eq!(head("/api///v1//x/").path, "/api/v1/x/");
        assert_eq!(head("/caf\u{e9}//x").path, "/caf\u{e9}/x");
        assert_eq!(head("").path, "");
        assert_eq!(head("/login").method, "GET");
    }

    #[test]
    fn a_spelled_path_is_decoded() {
        assert_eq!(decoded_path(b"/l%6Fgin"), "/login");
        assert_eq!(decoded_path(b"/caf%C3%A9"), "/caf\u{e9}");
        assert_eq!(decoded_path(b"/caf%E9%zz%"), "/caf\u{fffd}%zz%");
        assert_eq!(decoded_path(b"/a+b"), "/a+b"); // a path's + is a plus
    }

    #[test]
    fn sources_parse() {
        assert_eq!(
            Source::parse("header:X-Api-Key", 0).unwrap(),
            Source::Header("x-api-key".into())
        );
        assert_eq!(
            Source::parse("get:q", 0).unwrap(),
            Source::Query("q".into())
        );
        assert_eq!(Source::parse("call:1", 2).unwrap(), Source::Call(1));
        for bad in ["", "header:", "cookie:a", "header:a b", "call:0", "call:x"] {
            assert!(
                Source::parse(bad, 0).unwrap_err().contains("invalid key"),
                "{bad}"
            );
        }
        assert!(Source::parse("call:2", 2).is_err());
    }

    #[test]
    fn decoding_keeps_what_it_cannot_read() {
        assert_eq!(percent_decode(b"%zz%4", false), b"%zz%4");
        assert_eq!(percent_decode(b"%41%", false), b"A%");
        assert_eq!(query_fields("a=1&plan=pro+plus", "plan"), [b"pro plus"]);
        assert_eq!(
            query_fields("k=a&b=1&k=b&k", "k"),
            [&b"a"[..], &b"b"[..], &b""[..]]
        );
        assert!(query_fields("a=1", "b").is_empty());
        assert_eq!(host_name("API.example.com:8443"), "api.example.com");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("API.example.com.:443"), "api.example.com");
        assert_eq!(host_name("api.example.com."), "api.example.com");
        assert_eq!(cgi_name("x-api-key"), "HTTP_X_API_KEY");
        assert_eq!(cgi_name("content-type"), "CONTENT_TYPE");
        assert_eq!(joined([&b"a"[..], b"b"]).unwrap(), b"a, b");
        assert_eq!(joined(std::iter::empty::<&[u8]>()), None);
    }

    #[test]
    fn hosts_match_exactly_or_by_wildcard() {
        assert!(host_matches("api.example.com", "api.example.com"));
        assert!(host_matches("*.example.com", "a.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("*.example.com", "aexample.com"));
    }
}
