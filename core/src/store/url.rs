//! Store URLs as users write them: the TLS query parameters redis-py reads
//! (`ssl_ca_certs`, `ssl_certfile`, `ssl_keyfile`, `ssl_cert_reqs`), and the
//! URL as it may be shown (its password hidden).

use crate::error::{Error, Result};

/// The URL with any password replaced by `***`: in the userinfo
/// (`redis://user:***@host`, `redis://***@host`) and in a `password=` query
/// parameter. Every message and `repr` that names a store URL shows this.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let mut out = String::with_capacity(url.len());
    if let Some(scheme) = scheme {
        out.push_str(scheme);
        out.push_str("://");
    }
    // everything up to the last `@` is the user and password: a password
    // may hold an unencoded `?`, `#` or `/` (a query's `@` hides more, never less)
    let rest = match rest.rsplit_once('@') {
        Some((userinfo, tail)) => {
            match userinfo.split_once(':') {
                Some((user, _)) if !user.contains(['/', '?', '#']) => {
                    out.push_str(user);
                    out.push_str(":***@");
                }
                _ => out.push_str("***@"),
            }
            tail
        }
        None => rest,
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    out.push_str(before_query);
    if let Some(query) = query {
        out.push('?');
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}=***"),
                _ => param.to_owned(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

/// TLS settings from a `rediss` URL's query parameters.
#[derive(Clone, Default)]
pub struct Tls {
    /// PEM of the CAs to trust instead of the system's (`ssl_ca_certs`).
    pub ca: Option<Vec<u8>>,
    /// PEM of the client certificate and its key, for mutual TLS
    /// (`ssl_certfile`, `ssl_keyfile`).
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    /// Whether the server's certificate is checked (`ssl_cert_reqs=none` turns it off).
    pub verify: bool,
}

impl Tls {
    /// The certificates as the Redis client takes them, when any were given.
    pub(crate) fn certificates(&self) -> Option<redis::TlsCertificates> {
        if self.ca.is_none() && self.client.is_none() {
            return None;
        }
        Some(redis::TlsCertificates {
            client_tls: self
                .client
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.ca.clone(),
        })
    }
}

/// A store URL split into what the Redis client reads and ratekeeper's own
/// TLS parameters (files read once, when the store is opened).
#[derive(Clone)]
pub struct StoreUrl {
    /// The scheme, lower case (`redis`, `rediss+cluster`, ...).
    pub scheme: String,
    /// What follows `://`, without the TLS parameters (other query
    /// parameters and a fragment stay).
    pub rest: String,
    /// TLS settings when the scheme is a `rediss` one.
    pub tls: Option<Tls>,
    /// The URL as it may be shown.
    pub shown: String,
}

const TLS_PARAMS: [&str; 4] = [
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cert_reqs",
];

impl StoreUrl {
    /// Parses `url`, reading the files its TLS parameters name.
    pub fn parse(url: &str) -> Result<StoreUrl> {
        let shown = redact(url);
        let bad = |why: String| Error::config(format!("invalid store URL '{shown}': {why}"));
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("no scheme".into()))?;
        let scheme = scheme.to_ascii_lowercase();
        let (body, fragment) = match rest.split_once('#') {
            Some((body, fragment)) => (body, Some(fragment)),
            None => (rest, None),
        };
        let (path, query) = body.split_once('?').unwrap_or((body, ""));
        let mut kept = Vec::new();
        let mut given: Vec<(&str, String)> = Vec::new();
        for param in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = param.split_once('=').unwrap_or((param, ""));
            if TLS_PARAMS.contains(&name) {
                if given.iter().any(|(n, _)| *n == name) {
                    return Err(bad(format!("{name} is given twice")));
                }
                given.push((name, percent_decode(value).map_err(&bad)?));
            } else if name.starts_with("ssl_") {
                return Err(bad(format!(
                    "unknown parameter {name}: use {}",
                    TLS_PARAMS.join(", ")
                )));
            } else {
                kept.push(param);
            }
        }
        let secure = scheme.starts_with("rediss");
        let tls = if secure {
            Some(tls_from(&given).map_err(bad)?)
        } else if let Some((name, _)) = given.first() {
            return Err(bad(format!(
                "{name} is a TLS parameter: use a rediss:// URL for TLS"
            )));
        } else {
            None
        };
        let mut rest = path.to_owned();
        if !kept.is_empty() {
            rest.push('?');
            rest.push_str(&kept.join("&"));
        }
        if let Some(fragment) = fragment {
            rest.push('#');
            rest.push_str(fragment);
        }
        Ok(StoreUrl {
            scheme,
            rest,
            tls,
            shown,
        })
    }
}

/// TLS settings from the TLS parameters given.
fn tls_from(given: &[(&str, String)]) -> std::result::Result<Tls, String> {
    let value = |name: &str| {
        given
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    };
    let read = |name: &str| -> std::result::Result<Option<Vec<u8>>, String> {
        match value(name) {
            None => Ok(None),
            Some("") => Err(format!("{name} is empty: give a file path")),
            Some(path) => std::fs::read(path)
                .map(Some)
                .map_err(|e| format!("cannot read {name} file '{path}': {e}")),
        }
    };
    let verify = match value("ssl_cert_reqs")
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("required" | "optional" | "cert_required" | "cert_optional") => true,
        Some("none" | "cert_none") => false,
        Some(other) => {
            return Err(format!(
                "invalid ssl_cert_reqs '{other}': use required (the default), optional or none"
            ))
        }
    };
    match (value("ssl_certfile"), value("ssl_keyfile")) {
        (Some(_), None) => return Err("ssl_certfile needs ssl_keyfile (the client key)".into()),
        (None, Some(_)) => {
            return Err("ssl_keyfile needs ssl_certfile (the client certificate)".into())
        }
        _ => {}
    }
    let client = read("ssl_certfile")?.zip(read("ssl_keyfile")?);
    Ok(Tls {
        ca: read("ssl_ca_certs")?,
        client,
        verify,
    })
}

/// `%XX` escapes decoded (a file path may hold them).
fn percent_decode(text: &str) -> std::result::Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad %-escape in '{text}'"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("'{text}' is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        for (url, shown) in [
            ("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0"),
            ("redis://user:s3cret@h/0", "redis://user:***@h/0"),
            ("rediss://s3cret@h", "rediss://***@h"),
            (
                "redis+cluster://u:p@a:1,b:2",
                "redis+cluster://u:***@a:1,b:2",
            ),
            (
                "redis://h/0?password=s3cret&db=1",
                "redis://h/0?password=***&db=1",
            ),
            ("redis://h:6379/0", "redis://h:6379/0"),
            ("not a url :x@", "not a url :***@"),
            (
                "redis://u:s3cret?@127.0.0.1:1/0",
                "redis://u:***@127.0.0.1:1/0",
            ),
            ("redis://:a#b/c?d@h:1/0?db=1", "redis://:***@h:1/0?db=1"),
            ("redis://s3c?ret@h/0", "redis://***@h/0"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn reads_tls_parameters_and_names_bad_ones() {
        let dir = std::env::temp_dir().join(format!("rk-url-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, b"CA").unwrap();
        let url = StoreUrl::parse(&format!(
            "rediss://:pw@h:6380/0?ssl_ca_certs={}&protocol=resp3",
            ca.display()
        ))
        .unwrap();
        assert_eq!(url.rest, ":pw@h:6380/0?protocol=resp3");
        let tls = url.tls.unwrap();
        assert_eq!(tls.ca.as_deref(), Some(&b"CA"[..]));
        assert!(tls.verify && tls.client.is_none());
        assert!(
            !StoreUrl::parse("rediss://h?ssl_cert_reqs=none")
                .unwrap()
                .tls
                .unwrap()
                .verify
        );
        for (url, says) in [
            ("redis://:pw@h?ssl_ca_certs=/x", "use a rediss:// URL"),
            (
                "rediss://:pw@h?ssl_ca_certs=/no/such/file",
                "cannot read ssl_ca_certs",
            ),
            ("rediss://:pw@h?ssl_certfile=/x", "needs ssl_keyfile"),
            (
                "rediss://:pw@h?ssl_cert_reqs=maybe",
                "invalid ssl_cert_reqs",
            ),
            (
                "rediss://:pw@h?ssl_verify=1",
                "unknown parameter ssl_verify",
            ),
        ] {
            let message = StoreUrl::parse(url).err().unwrap().to_string();
            assert!(message.contains(says), "{url}: {message}");
            assert!(!message.contains("pw"), "{url}: {message}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
