//! What every HTTP adapter answers, from one function: the rate-limit
//! headers in a chosen style, the 429 denial (JSON body, `Retry-After`), the
//! 403 for a blocked client, and the one log line per denial. The WSGI,
//! Django and Rack middlewares render [`Responses::answer`] as it is; a new
//! adapter does the same.

use crate::decision::{Decision, Outcome};
use crate::error::{Error, Result};
use crate::plain::{Key, Plain};
use crate::time::{ceil_seconds, seconds};
use std::fmt::Write;
use std::str::FromStr;

/// Which rate-limit headers a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeaderStyle {
    /// `X-RateLimit-Limit/-Remaining/-Used/-Reset` and the IETF draft's
    /// `RateLimit-Policy` and `RateLimit` (the default).
    #[default]
    All,
    /// The IETF draft's `RateLimit-Policy` and `RateLimit` only.
    Draft,
    /// `X-RateLimit-*` only, as GitHub and most APIs send them.
    Legacy,
    /// No rate-limit headers (a denial still carries `Retry-After`).
    None,
}

impl HeaderStyle {
    /// Its name: `all`, `draft`, `legacy` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            HeaderStyle::All => "all",
            HeaderStyle::Draft => "draft",
            HeaderStyle::Legacy => "legacy",
            HeaderStyle::None => "none",
        }
    }

    /// Whether a header of the decision's belongs to this style.
    fn keeps(self, name: &str) -> bool {
        match self {
            HeaderStyle::All => true,
            HeaderStyle::Draft => name.starts_with("RateLimit"),
            HeaderStyle::Legacy => name.starts_with("X-RateLimit"),
            HeaderStyle::None => false,
        }
    }
}

impl FromStr for HeaderStyle {
    type Err = Error;

    fn from_str(text: &str) -> Result<HeaderStyle> {
        match text {
            "all" => Ok(HeaderStyle::All),
            "draft" => Ok(HeaderStyle::Draft),
            "legacy" => Ok(HeaderStyle::Legacy),
            "none" => Ok(HeaderStyle::None),
            other => Err(Error::config(format!(
                "invalid headers '{}': use 'all', 'draft', 'legacy' or 'none'",
                other.escape_debug()
            ))),
        }
    }
}

/// Every header name a decision's headers and an [`Answer`]'s use (a
/// binding may make each one once, as its language's string).
pub const HEADER_NAMES: [&str; 9] = [
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Used",
    "X-RateLimit-Reset",
    "RateLimit-Policy",
    "RateLimit",
    "Retry-After",
    "Content-Type",
    "Content-Length",
];

/// The headers whose value is the same in every response of one rule set
/// (its limit, its policy, a denial's body type): a binding may keep each
/// value it made once, as it keeps the names.
pub const STEADY_HEADERS: [&str; 3] = ["X-RateLimit-Limit", "RateLimit-Policy", "Content-Type"];

/// The status of a denial unless one is given.
pub const DEFAULT_STATUS: u16 = 429;
/// The status of a blocked client's answer unless one is given.
pub const DEFAULT_BLOCKED_STATUS: u16 = 403;

/// How an adapter answers: the statuses, the header style, and whether
/// denial log lines show keys as they are (else hashed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Responses {
    /// The status of a denial (429).
    pub status: u16,
    /// The status of a blocked client's answer (403).
    pub blocked_status: u16,
    /// Which rate-limit headers to send.
    pub headers: HeaderStyle,
    /// Log keys as they are rather than as `sha256:` and 16 hex digits.
    pub log_keys: bool,
}

impl Default for Responses {
    fn default() -> Self {
        Responses {
            status: DEFAULT_STATUS,
            blocked_status: DEFAULT_BLOCKED_STATUS,
            headers: HeaderStyle::All,
            log_keys: false,
        }
    }
}

/// What to do with a request, as headers and maybe a whole response (the
/// default: pass, adding nothing).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    /// The status to answer with, or `None` to pass the request on to the
    /// application (adding `headers` to its response, without replacing any
    /// it set).
    pub status: Option<u16>,
    /// The headers, in order.
    pub headers: Vec<(&'static str, String)>,
    /// The body of an answer (empty when the request passes on).
    pub body: Vec<u8>,
}

impl Answer {
    /// Whether the request goes on to the application.
    pub fn passes(&self) -> bool {
        self.status.is_none()
    }
}

/// One log line of a denial: its fields, and the line as text
/// (`rate_limited scope="api" key="sha256:…" limit=5 …`, logfmt with
/// JSON values).
#[derive(Debug, Clone, PartialEq)]
pub struct DenialLog {
    /// `scope`, `key`, `limit`, `window`, `retry_after`, `method`, `path`
    /// (and `shadow`, true, for a denial shadow mode let through).
    pub fields: Plain,
    /// The line.
    pub text: String,
}

impl DenialLog {
    /// The line of a denial that shadow mode let through: ` shadow=true` at
    /// its end, and the field.
    pub fn shadowed(mut self) -> DenialLog {
        self.text.push_str(" shadow=true");
        if let Plain::Map(fields) = &mut self.fields {
            fields.push((Key::Name("shadow"), Plain::Bool(true)));
        }
        self
    }
}

/// A status an adapter may answer with: an HTTP error, 400 to 599.
pub fn check_status(name: &str, status: i64) -> Result<u16> {
    if (400..=599).contains(&status) {
        Ok(status as u16)
    } else {
        Err(Error::config(format!(
            "invalid {name} {status}: give an HTTP error status, 400 to 599"
        )))
    }
}

impl Responses {
    /// Checked responses: statuses 400 to 599, a header style by name.
    pub fn new(status: i64, blocked_status: i64, headers: &str, log_keys: bool) -> Result<Self> {
        Ok(Responses {
            status: check_status("status", status)?,
            blocked_status: check_status("blocked_status", blocked_status)?,
            headers: headers.parse()?,
            log_keys,
        })
    }

    /// The answer to a request the decision decided:
    /// - blocked (and not shadowed): `blocked_status`, `{"error": "blocked"}`;
    /// - denied (by the rules, or by `on_error = deny`): `status`, the
    ///   headers of the style, `Retry-After` (whole seconds, rounded up; 1
    ///   when the cost can never pass) and `{"error": "rate_limited",
    ///   "retry_after": N}`;
    /// - safelisted, or a block let through by shadow mode: pass, no headers
    ///   (no rule counted the request);
    /// - otherwise: pass, with the headers of the style.
    pub fn answer(&self, decision: &Decision) -> Answer {
        match decision.outcome {
            Outcome::Blocked => self.blocked(),
            _ if decision.allowed() => Answer {
                status: None,
                headers: self.pass_headers(decision),
                body: Vec::new(),
            },
            _ => self.denial(decision),
        }
    }

    /// The headers to add to the application's response when the request
    /// goes on (admitted, or denied but let through by the adapter, as
    /// Django's `@ratelimit(block=False)` does): none when a list decided
    /// (no rule counted the request), else the style's rate-limit headers
    /// (with `Retry-After` for a denial).
    pub fn pass_headers(&self, decision: &Decision) -> Vec<(&'static str, String)> {
        if decision.is_listed() {
            Vec::new()
        } else {
            self.rate_headers(decision)
        }
    }

    /// The answer to a blocked client (a listing, a ban, or an adapter's own
    /// blocklist rule).
    pub fn blocked(&self) -> Answer {
        json_answer(
            self.blocked_status,
            Vec::new(),
            &serde_json::json!({"error": "blocked"}),
        )
    }

    /// The headers of a denial, for an adapter's own responder to add where
    /// its response lacks them: the style's, `Retry-After`, the JSON type.
    pub fn denial_headers(&self, decision: &Decision) -> Vec<(&'static str, String)> {
        self.denial(decision).headers
    }

    fn denial(&self, decision: &Decision) -> Answer {
        let wait = retry_after_seconds(decision);
        let mut headers = self.rate_headers(decision);
        if !headers.iter().any(|(name, _)| *name == "Retry-After") {
            headers.push(("Retry-After", wait.to_string()));
        }
        json_answer(
            self.status,
            headers,
            &serde_json::json!({"error": "rate_limited", "retry_after": wait}),
        )
    }

    /// The decision's rate-limit headers in this style (a denial's
    /// `Retry-After` whatever the style).
    pub fn rate_headers(&self, decision: &Decision) -> Vec<(&'static str, String)> {
        decision
            .headers()
            .into_iter()
            .filter(|(name, _)| *name == "Retry-After" || self.headers.keeps(name))
            .collect()
    }

    /// The log line of a denial of `key` under `scope` (a throttle, a path,
    /// a view), with the request's method and path.
    pub fn denial_log(
        &self,
        decision: &Decision,
        scope: &str,
        key: &[u8],
        method: &str,
        path: &str,
    ) -> DenialLog {
        let key = if self.log_keys {
            escaped_bytes(key)
        } else {
            hashed_key(key)
        };
        let bind = decision.binding_state();
        let fields: Vec<(&'static str, Plain)> = vec![
            ("scope", scope.into()),
            ("key", Plain::Text(key)),
            ("limit", bind.limit.into()),
            ("window", seconds(bind.window_ms).into()),
            ("retry_after", decision.retry_after_ms.map(seconds).into()),
            ("method", method.into()),
            ("path", path.into()),
        ];
        let mut text = String::from("rate_limited");
        for (name, value) in &fields {
            let _ = write!(text, " {name}={}", json(&plain_json(value)));
        }
        DenialLog {
            fields: Plain::Map(
                fields
                    .into_iter()
                    .map(|(name, value)| (Key::Name(name), value))
                    .collect(),
            ),
            text,
        }
    }
}

/// `Retry-After` of a denial in whole seconds, rounded up (1 when the cost
/// can never pass).
pub fn retry_after_seconds(decision: &Decision) -> u64 {
    decision.retry_after_ms.map_or(1, ceil_seconds)
}

/// The answer of the edge server's health check: `200 {"status":"ok"}`.
pub fn healthy() -> Answer {
    json_answer(200, Vec::new(), &serde_json::json!({"status": "ok"}))
}

/// The answer to a request whose facts cannot be read (a forwarded header
/// that is not one): `400`, with what was wrong.
pub fn bad_request(detail: &str) -> Answer {
    json_answer(
        400,
        Vec::new(),
        &serde_json::json!({"error": "bad_request", "detail": detail}),
    )
}

/// The answer when the store failed and `on_error` is `raise`: `500`.
pub fn store_error() -> Answer {
    json_answer(
        500,
        Vec::new(),
        &serde_json::json!({"error": "store_error"}),
    )
}

fn json_answer(
    status: u16,
    mut headers: Vec<(&'static str, String)>,
    body: &serde_json::Value,
) -> Answer {
    let body = json(body);
    headers.push(("Content-Type", "application/json".to_owned()));
    headers.push(("Content-Length", body.len().to_string()));
    Answer {
        status: Some(status),
        headers,
        body: body.into_bytes(),
    }
}

/// A key as a log shows it unless keys are logged as they are:
/// `sha256:` and the first 16 hex digits of its SHA-256, which tell keys
/// apart without revealing them.
pub fn hashed_key(key: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, key);
    let mut out = String::from("sha256:");
    for byte in &digest.as_ref()[..8] {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Bytes as text: UTF-8 as it is, any other byte as `\xNN`.
fn escaped_bytes(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// A plain value as a JSON value (seconds keys as their decimal text).
fn plain_json(value: &Plain) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Plain::Null => Value::Null,
        Plain::Bool(b) => Value::Bool(*b),
        Plain::Int(n) => Value::from(*n),
        Plain::Float(f) => Value::from(*f), // (not finite: null)
        Plain::Text(text) => Value::from(text.as_str()),
        Plain::Map(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        Key::Name(name) => (*name).to_owned(),
                        Key::Seconds(s) => format!("{s:?}"),
                    };
                    (key, plain_json(value))
                })
                .collect(),
        ),
        Plain::List(items) => Value::Array(items.iter().map(plain_json).collect()),
    }
}

/// JSON as ratekeeper writes it, in the log line and every body: compact,
/// and printable ASCII only (`\uXXXX` beyond), so that no key or path can
/// break a line.
pub fn json(value: &serde_json::Value) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let mut writer = serde_json::Serializer::with_formatter(&mut out, AsciiOnly);
    value
        .serialize(&mut writer)
        .expect("a JSON value always serializes");
    String::from_utf8(out).expect("ASCII")
}

/// serde_json's compact form, with every character beyond ASCII escaped.
struct AsciiOnly;

impl serde_json::ser::Formatter for AsciiOnly {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let escaped = |c: char| !c.is_ascii() || c == '\u{7f}';
        for part in fragment.split_inclusive(escaped) {
            let (plain, last) = match part.chars().last() {
                Some(c) if escaped(c) => (&part[..part.len() - c.len_utf8()], Some(c)),
                _ => (part, None),
            };
            writer.write_all(plain.as_bytes())?;
            if let Some(c) = last {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
