//! A throttle with meters (`meters`, `cost`, `usage`): a request reserves
//! each meter's estimate before the application runs, all or nothing, and
//! the response's `usage` header settles a meter to what it really cost,
//! on every store; what a policy may say of meters; the doors that never
//! see a response refuse `usage`.

use crate::common;
use ratekeeper_core::gate::source::Head;
use ratekeeper_core::gate::{Ending, Facts, Gate, Spec};

/// A call of the API with `key`, from one client.
struct Call(Head, Vec<u8>);

impl Facts for Call {
    fn head(&self) -> &Head {
        &self.0
    }
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        (name == "x-api-key").then(|| self.1.clone())
    }
}

fn call(key: &str) -> Call {
    let head = Head::new(
        "POST",
        "/v1/chat".into(),
        "example.com",
        "203.0.113.9".into(),
        String::new(),
    );
    Call(head, key.as_bytes().to_vec())
}

/// The stores a gate is bound to by URL: memory, Redis through the script,
/// and (when configured) Redis through the module and the Cluster.
fn stores() -> Vec<(String, &'static str)> {
    let mut stores = vec![
        ("memory://".to_owned(), "auto"),
        (common::redis_url(), "off"),
    ];
    if let Some(url) = common::configured("RATEKEEPER_TEST_REDIS_MODULE") {
        stores.push((url, "require"));
    }
    if let Some(url) = common::configured("RATEKEEPER_TEST_CLUSTER") {
        stores.push((url, "auto"));
    }
    stores
}

/// A policy on `url` whose one throttle has `meters` (its table's lines).
/// (Its store waits up to 5 s: these tests are about what is settled, and a
/// Redis busy with the parallel tests' long scripts must not degrade them.)
fn policy(url: &str, module: &str, meters: &str) -> String {
    format!(
        "[store]\nurl = \"{url}\"\nredis_module = \"{module}\"\ntimeout = 5.0\nprefix = \"{}\"\n\n\
         [[throttle]]\nscope = \"llm\"\nkey = \"header:X-Api-Key\"\npaths = [\"/v1/\"]\n{meters}\n",
        common::unique_prefix()
    )
}

const LLM: &str = "meters = { requests = \"5/minute\", tokens = \"100/minute\" }\n\
                   cost = { tokens = 40 }\nusage = { tokens = \"X-Tokens-Used\" }";

fn used(tokens: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (b"Content-Type".to_vec(), b"application/json".to_vec()),
        (b"x-TOKENS-used".to_vec(), tokens.as_bytes().to_vec()),
    ]
}

#[test]
fn a_response_settles_each_meter_to_what_its_header_says_on_every_store() {
    for (url, module) in stores() {
        let gate = Gate::bind(Spec::parse(&policy(&url, module, LLM)).unwrap(), None).unwrap();
        let first = gate.decide(&call("ann")).unwrap();
        assert_eq!(first.ending, Ending::Pass, "{url}");
        assert!(first.awaits_end, "{url}: a usage header is awaited");
        let shown = first.decision.as_ref().unwrap();
        assert_eq!(
            shown.meters.len(),
            2,
            "{url}: the decision shows each meter"
        );
        gate.finish(&first, Some(200), &used("10")).unwrap();
        // 10 tokens spent: two more estimates of 40 fit in 100, a third not
        let held: Vec<_> = (0..2)
            .map(|i| {
                let v = gate.decide(&call("ann")).unwrap();
                assert_eq!(v.ending, Ending::Pass, "{url}: reservation {i}");
                v
            })
            .collect();
        let third = gate.decide(&call("ann")).unwrap();
        assert_eq!(third.ending, Ending::Deny, "{url}: 10 + 40 + 40 + 40 > 100");
        let binding = third.decision.as_ref().unwrap().meter();
        assert_eq!(binding, Some("tokens"), "{url}: the tokens meter refused");
        for v in &held {
            gate.finish(v, Some(200), &used(" 5 ")).unwrap();
        }
        // 20 tokens spent: the next estimate fits; a request the tokens
        // meter refused spent no request either (all or nothing)
        let fourth = gate.decide(&call("ann")).unwrap();
        assert_eq!(fourth.ending, Ending::Pass, "{url}: refunds returned quota");
        let left = fourth.decision.as_ref().unwrap();
        let requests = left.meters.iter().find(|m| m.name == "requests").unwrap();
        assert_eq!(
            left.rules[requests.rules.start].remaining, 1,
            "{url}: four requests logged, the refused one not"
        );
        let other = gate.decide(&call("bob")).unwrap();
        assert_eq!(other.ending, Ending::Pass, "{url}: another key");
    }
}

#[test]
fn a_response_without_a_readable_usage_keeps_the_estimate() {
    let url = "memory://";
    let gate = Gate::bind(Spec::parse(&policy(url, "auto", LLM)).unwrap(), None).unwrap();
    for (i, headers) in [Vec::new(), used("many")].into_iter().enumerate() {
        let v = gate.decide(&call("k")).unwrap();
        assert_eq!(v.ending, Ending::Pass, "{i}");
        gate.finish(&v, Some(200), &headers).unwrap();
    }
    // two estimates of 40 stand: a third does not fit
    let third = gate.decide(&call("k")).unwrap();
    assert_eq!(
        third.ending,
        Ending::Deny,
        "80 + 40 > 100: the estimates stood"
    );
    let gate = Gate::bind(Spec::parse(&policy(url, "auto", LLM)).unwrap(), None).unwrap();
    for bad in ["many", "-3", "12.5", "", "1e3"] {
        let key = format!("key-{bad}");
        let v = gate.decide(&call(&key)).unwrap();
        gate.finish(&v, Some(200), &used(bad)).unwrap();
        let again = gate.decide(&call(&key)).unwrap();
        gate.finish(&again, None, &[]).unwrap();
        let refused = gate.decide(&call(&key)).unwrap();
        assert_eq!(refused.ending, Ending::Deny, "{bad:?}: its estimate stood");
    }
    let v = gate.decide(&call("latin")).unwrap();
    gate.finish(
        &v,
        Some(200),
        &[(b"x-tokens-used".to_vec(), vec![0xff, b'7'])],
    )
    .unwrap();
    let v = gate.decide(&call("latin")).unwrap();
    gate.finish(&v, Some(200), &used("0")).unwrap();
    let fits = gate.decide(&call("latin")).unwrap();
    assert_eq!(fits.ending, Ending::Pass, "40 + 0 + 40 <= 100");
}

#[test]
fn a_metered_throttle_that_counts_failures_gives_every_meter_back_for_a_success() {
    let meters = format!("{LLM}\ncount = \"failures\"");
    let gate = Gate::bind(
        Spec::parse(&policy(&common::redis_url(), "off", &meters)).unwrap(),
        None,
    )
    .unwrap();
    for i in 0..20 {
        let v = gate.decide(&call("k")).unwrap();
        assert_eq!(v.ending, Ending::Pass, "success {i}");
        gate.finish(&v, Some(200), &used("30")).unwrap();
    }
    for i in 0..3 {
        let v = gate.decide(&call("k")).unwrap();
        assert_eq!(v.ending, Ending::Pass, "failure {i}");
        gate.finish(&v, Some(500), &used("30")).unwrap();
    }
    // 90 tokens of failures: the next estimate of 40 does not fit
    assert_eq!(gate.decide(&call("k")).unwrap().ending, Ending::Deny);
}

#[test]
fn a_request_another_throttle_refuses_keeps_its_meters_estimates() {
    let text = format!(
        "{}\n[[throttle]]\nscope = \"per-client\"\nrules = \"2/minute\"\nkey = \"ip\"\n",
        policy("memory://", "auto", LLM)
    );
    let gate = Gate::bind(Spec::parse(&text).unwrap(), None).unwrap();
    for _ in 0..2 {
        let v = gate.decide(&call("k")).unwrap();
        gate.finish(&v, Some(200), &used("1")).unwrap();
    }
    let refused = gate.decide(&call("k")).unwrap();
    assert_eq!(refused.ending, Ending::Deny);
    assert!(!refused.awaits_end, "a refused request awaits no end");
    let costs = [0, 1];
    let options = ratekeeper_core::CheckOptions {
        meter_costs: Some(&costs),
        ..Default::default()
    };
    let peeked = gate.limiters()[0].peek_with(b"k", &options).unwrap();
    assert_eq!(peeked.meter(), Some("tokens"));
    let peeked = peeked.rules[peeked.binding].remaining;
    assert_eq!(
        peeked,
        100 - 1 - 1 - 40,
        "the refused request's estimate stands"
    );
}

#[test]
fn what_a_policy_says_of_meters_is_checked() {
    for (meters, wanted) in [
        (
            "rules = \"5/s\"\nmeters = { a = \"5/s\" }",
            "give rules or meters, not both",
        ),
        ("meters = { \"a b\" = \"5/s\" }", "invalid meter name"),
        ("meters = { a = 5 }", "meters.a: give rules as a string"),
        ("meters = { a = \"5/fortnight\" }", "meters.a"),
        ("meters = { a = \"3 concurrent\" }", "meters.a"),
        (
            "meters = { a = \"5/s\" }\ncost = { b = 1 }",
            "cost.b: no meter is named so (the meters: a)",
        ),
        (
            "meters = { a = \"5/s\" }\ncost = { a = -1 }",
            "cost.a: give a whole number",
        ),
        (
            "meters = { a = \"5/s\" }\ncost = { a = \"1\" }",
            "cost.a: give a whole number",
        ),
        (
            "meters = { a = \"5/s\" }\ncost = { a = 0 }",
            "at least 1 unit of at least one meter",
        ),
        (
            "meters = { a = \"5/s\" }\nusage = { a = \"X Used\" }",
            "usage.a: give the name of a response header",
        ),
        (
            "meters = { a = \"5/s\" }\nusage = { b = \"X-Used\" }",
            "usage.b: no meter is named so",
        ),
        (
            "rules = \"5/s\"\ncost = { a = 1 }",
            "cost: give meters first",
        ),
        (
            "rules = \"5/s\"\nusage = { a = \"X-Used\" }",
            "usage: give meters first",
        ),
        (
            "meters = { a = \"5/s\" }\ntiers = { pro = \"9/s\" }",
            "a throttle with meters takes no tiers",
        ),
    ] {
        let text = format!("[[throttle]]\nscope = \"m\"\nkey = \"ip\"\n{meters}\n");
        let message = Spec::parse(&text).unwrap_err().to_string();
        assert!(
            message.contains("throttle[0] (\"m\")"),
            "{meters}: {message}"
        );
        assert!(message.contains(wanted), "{meters}: {message}");
    }
    let spec = Spec::parse(&policy("memory://", "auto", LLM)).unwrap();
    let message = spec.check_unanswered().unwrap_err().to_string();
    assert!(
        message.contains("throttle 'llm' settles its meter 'tokens' to a response header"),
        "{message}"
    );
    let fixed =
        "meters = { requests = \"5/minute\", tokens = \"100/minute\" }\ncost = { tokens = 40 }";
    let spec = Spec::parse(&policy("memory://", "auto", fixed)).unwrap();
    spec.check_unanswered().unwrap();
    let gate = Gate::bind(spec, None).unwrap();
    let v = gate.decide(&call("k")).unwrap();
    assert_eq!(v.ending, Ending::Pass);
    assert!(!v.awaits_end, "fixed costs await no response");
}
