//! A throttle with an in-flight rule ("2 concurrent"): the gate holds a
//! slot for each request it lets through until the door tells it the
//! response ended, on every store; a refused request gives its slot back at
//! once; what cannot hold a slot honestly is refused by name.

use crate::common;
use ratekeeper_core::gate::source::Head;
use ratekeeper_core::gate::{Ending, Facts, Gate, Reason, Spec};

/// An export request from `ip`.
struct Export(Head);

impl Facts for Export {
    fn head(&self) -> &Head {
        &self.0
    }
    fn header(&self, _: &str) -> Option<Vec<u8>> {
        None
    }
}

fn export(ip: &str) -> Export {
    Export(Head::new(
        "GET",
        "/export".into(),
        "example.com",
        ip.into(),
        String::new(),
    ))
}

fn policy(url: &str, throttles: &str) -> String {
    format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{}\"\n\n{throttles}",
        common::unique_prefix()
    )
}

const EXPORTS: &str =
    "[[throttle]]\nscope = \"exports\"\nrules = \"2 concurrent; 600/minute\"\nkey = \"ip\"\n";

fn urls() -> Vec<String> {
    let mut urls = vec!["memory://".to_owned(), common::redis_url()];
    urls.extend(common::configured("RATEKEEPER_TEST_REDIS_MODULE"));
    urls.extend(common::configured("RATEKEEPER_TEST_CLUSTER"));
    urls
}

#[test]
fn a_slot_is_held_until_the_response_ends_on_every_store() {
    for url in urls() {
        let gate = Gate::bind(Spec::parse(&policy(&url, EXPORTS)).unwrap(), None).unwrap();
        let exports = &gate.limiters()[0];
        let first = gate.decide(&export("203.0.113.9")).unwrap();
        let second = gate.decide(&export("203.0.113.9")).unwrap();
        for verdict in [&first, &second] {
            assert_eq!(verdict.ending, Ending::Pass, "{url}");
            assert!(verdict.awaits_end, "{url}: a slot is held");
            assert!(verdict.checked[0].lease.is_some(), "{url}");
        }
        assert_eq!(exports.leases(b"203.0.113.9").unwrap().len(), 2, "{url}");
        let third = gate.decide(&export("203.0.113.9")).unwrap();
        assert_eq!(third.ending, Ending::Deny, "{url}: both slots are held");
        assert_eq!(third.reason, Reason::Throttled(0), "{url}");
        assert!(!third.awaits_end, "{url}: a refusal holds nothing");
        assert_eq!(third.answer.status, Some(429), "{url}");
        assert_eq!(
            gate.decide(&export("198.51.100.7")).unwrap().ending,
            Ending::Pass,
            "{url}: another client has slots of its own"
        );
        // the end of a response (or of a request the app raised on) gives its slot back
        gate.finish(&first, Some(200), &[]).unwrap();
        assert_eq!(exports.leases(b"203.0.113.9").unwrap().len(), 1, "{url}");
        let fourth = gate.decide(&export("203.0.113.9")).unwrap();
        assert_eq!(fourth.ending, Ending::Pass, "{url}: the slot is reused");
        gate.finish(&second, None, &[]).unwrap();
        gate.finish(&fourth, Some(500), &[]).unwrap();
        assert!(exports.leases(b"203.0.113.9").unwrap().is_empty(), "{url}");
        // told twice (a door's slip), nothing more is given back
        gate.finish(&fourth, Some(200), &[]).unwrap();
        let rates = exports.peek(b"203.0.113.9", 1, None).unwrap();
        assert_eq!(
            rates.rules[0].remaining, 597,
            "{url}: three admitted requests, each counted once"
        );
    }
}

#[test]
fn a_request_another_throttle_refuses_gives_its_slot_back_at_once() {
    let throttles = format!(
        "{EXPORTS}\n[[throttle]]\nscope = \"per-client\"\nrules = \"1/minute\"\nkey = \"ip\"\n"
    );
    for url in ["memory://".to_owned(), common::redis_url()] {
        let gate = Gate::bind(Spec::parse(&policy(&url, &throttles)).unwrap(), None).unwrap();
        let first = gate.decide(&export("203.0.113.9")).unwrap();
        assert_eq!(first.ending, Ending::Pass, "{url}");
        for _ in 0..3 {
            let refused = gate.decide(&export("203.0.113.9")).unwrap();
            assert_eq!(refused.reason, Reason::Throttled(1), "{url}");
            assert!(!refused.awaits_end, "{url}");
        }
        let leases = gate.limiters()[0].leases(b"203.0.113.9").unwrap();
        assert_eq!(
            leases.len(),
            1,
            "{url}: only the request let through holds a slot"
        );
    }
}

#[test]
fn a_shadow_in_flight_throttle_reports_and_lets_through() {
    let text = "[[throttle]]\nscope = \"exports\"\nrules = \"1 concurrent\"\nkey = \"ip\"\nshadow = true\n";
    let gate = Gate::bind(Spec::parse(&policy("memory://", text)).unwrap(), None).unwrap();
    let first = gate.decide(&export("203.0.113.9")).unwrap();
    assert!(first.awaits_end);
    let second = gate.decide(&export("203.0.113.9")).unwrap();
    assert_eq!(second.ending, Ending::Pass);
    assert_eq!(second.reason, Reason::Shadowed(Some(0)));
    assert!(
        !second.awaits_end,
        "let through by shadow mode, it holds no slot"
    );
    gate.finish(&first, Some(200), &[]).unwrap();
    let third = gate.decide(&export("203.0.113.9")).unwrap();
    assert_eq!(third.reason, Reason::Admitted);
}

#[test]
fn what_cannot_hold_a_slot_honestly_is_refused_by_name() {
    for (throttle, wanted) in [
        (
            "rules = \"2 concurrent\"\nkey = \"ip\"\ncount = \"failures\"\n",
            "count: a throttle with an in-flight rule ('2 concurrent') counts every request",
        ),
        (
            "rules = \"2 concurrent\"\nkey = \"ip\"\ntier = \"header:x-plan\"\n[throttle.tiers]\ngold = \"5/minute\"\n",
            "takes no tiers",
        ),
        (
            "rules = \"2/minute\"\nkey = \"ip\"\ntier = \"header:x-plan\"\n[throttle.tiers]\ngold = \"5 concurrent\"\n",
            "tiers.gold: a tier cannot hold an in-flight rule",
        ),
        (
            "rules = \"2 concurrent; 3 at once\"\nkey = \"ip\"\n",
            "the rule set has 2 in-flight rules",
        ),
    ] {
        let text = format!("[[throttle]]\nscope = \"x\"\n{throttle}");
        let message = Spec::parse(&text).unwrap_err().to_string();
        assert!(message.contains(wanted), "{throttle}: {message}");
    }
    let spec = Spec::parse(EXPORTS).unwrap();
    let message = spec.check_unanswered().unwrap_err().to_string();
    assert!(
        message.contains("throttle 'exports' holds a slot while a request is under way"),
        "{message}"
    );
}
