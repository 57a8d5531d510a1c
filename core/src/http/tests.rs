use super::*;
use crate::controls::{List, Listing};
use crate::limiter::{Limiter, OnError};
use crate::rule::RuleSet;
use crate::store::StoreOptions;

/// The second check of "1/s; 20/m" within half a second: denied, 0.5 s to wait.
fn denied() -> Decision {
    let rules = RuleSet::parse("1/s; 20/m").unwrap();
    let options = StoreOptions::default();
    let limiter = Limiter::open(rules, "memory://", &options, OnError::Allow).unwrap();
    limiter.check(b"k", 1, Some(1_700_000_000.0)).unwrap();
    limiter.check(b"k", 1, Some(1_700_000_000.5)).unwrap()
}

fn names(headers: &[(&'static str, String)]) -> Vec<&'static str> {
    headers.iter().map(|(name, _)| *name).collect()
}

#[test]
fn every_header_name_is_listed() {
    let decision = denied();
    let answers = [
        Responses::default().answer(&decision),
        Responses::default().blocked(),
        store_error(),
    ];
    let made = (answers.iter().flat_map(|a| names(&a.headers)))
        .chain(names(&decision.headers()))
        .chain(names(&Responses::default().pass_headers(&decision)));
    for name in made {
        assert!(
            HEADER_NAMES.contains(&name),
            "{name} is not in HEADER_NAMES"
        );
    }
}

#[test]
fn a_denial_is_429_json_with_retry_after() {
    let answer = Responses::default().answer(&denied());
    assert_eq!(answer.status, Some(429));
    assert_eq!(answer.body, br#"{"error":"rate_limited","retry_after":1}"#);
    let h: std::collections::HashMap<_, _> = answer.headers.iter().cloned().collect();
    assert_eq!(h["Retry-After"], "1");
    assert_eq!(h["Content-Type"], "application/json");
    assert_eq!(h["Content-Length"], answer.body.len().to_string());
    assert_eq!(h["X-RateLimit-Remaining"], "0");
}

#[test]
fn styles_choose_the_headers() {
    let style = |name: &str| Responses {
        headers: name.parse().unwrap(),
        ..Responses::default()
    };
    let decision = denied();
    assert_eq!(
        names(&style("draft").rate_headers(&decision)),
        ["RateLimit-Policy", "RateLimit", "Retry-After"]
    );
    assert_eq!(
        names(&style("legacy").rate_headers(&decision)),
        [
            "X-RateLimit-Limit",
            "X-RateLimit-Remaining",
            "X-RateLimit-Used",
            "X-RateLimit-Reset",
            "Retry-After"
        ]
    );
    let none = style("none").answer(&decision);
    assert_eq!(
        names(&none.headers),
        ["Retry-After", "Content-Type", "Content-Length"]
    );
    assert!("loud".parse::<HeaderStyle>().is_err());
}

#[test]
fn lists_answer_without_rate_headers() {
    let rules = RuleSet::parse("5/s").unwrap();
    let listing = Listing {
        until_ms: 9_000,
        reason: "scanner".into(),
    };
    let blocked = Decision::listed(&rules, 1_000, List::Block, &listing);
    let answer = Responses::default().answer(&blocked);
    assert_eq!(answer.status, Some(403));
    assert_eq!(answer.body, br#"{"error":"blocked"}"#);
    let safe = Decision::listed(&rules, 1_000, List::Safe, &listing);
    assert_eq!(
        Responses::default().answer(&safe),
        Answer {
            status: None,
            headers: vec![],
            body: vec![]
        }
    );
    let shadowed = Responses::default().answer(&blocked.shadow());
    assert!(shadowed.passes() && shadowed.headers.is_empty());
    let admitted = Responses::default().answer(&Decision::unlimited(&rules, 1_000));
    assert!(admitted.passes() && !admitted.headers.is_empty());
}

#[test]
fn statuses_are_checked() {
    assert!(Responses::new(429, 403, "all", false).is_ok());
    for (status, blocked) in [(200, 403), (429, 600), (-1, 403)] {
        assert!(Responses::new(status, blocked, "all", false).is_err());
    }
}

#[test]
fn the_log_line_hashes_keys_and_escapes_text() {
    let decision = denied();
    let line = Responses::default().denial_log(&decision, "api", b"user:1", "GET", "/x\n\"y\"");
    assert_eq!(
        line.text,
        format!(
            "rate_limited scope=\"api\" key=\"{}\" limit=1 window=1.0 retry_after=0.5 method=\"GET\" path=\"/x\\n\\\"y\\\"\"",
            hashed_key(b"user:1")
        )
    );
    // the SHA-256 of "abc" starts ba7816bf8f01cfea
    assert_eq!(hashed_key(b"abc"), "sha256:ba7816bf8f01cfea");
    let shown = Responses {
        log_keys: true,
        ..Responses::default()
    };
    let line = shown.denial_log(&decision, "api", b"caf\xc3\xa9\xff", "", "");
    assert!(
        line.text.contains(r#"key="caf\u00e9\\xff""#),
        "{}",
        line.text
    );
}

#[test]
fn json_is_compact_and_printable_ascii() {
    let value = serde_json::json!({
        "text": "a\u{7f}b\u{0}\r\n\té😀\"\\",
        "n": 3,
        "f": 0.5,
        "none": null,
    });
    let text = json(&value);
    assert!(text.bytes().all(|b| (0x20..0x7f).contains(&b)), "{text}");
    assert!(
        text.contains(r#""a\u007fb\u0000\r\n\t\u00e9\ud83d\ude00\"\\""#),
        "{text}"
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        value
    );
    let answer = bad_request("no \"X-Forwarded-Uri\"\n");
    assert_eq!(
        (answer.status, answer.headers[0].1.as_str()),
        (Some(400), "application/json")
    );
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"error": "bad_request", "detail": "no \"X-Forwarded-Uri\"\n"})
    );
    assert_eq!(healthy().body, br#"{"status":"ok"}"#);
    assert_eq!(store_error().status, Some(500));
}
