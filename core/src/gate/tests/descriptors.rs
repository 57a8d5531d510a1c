//! The gate answering Envoy's descriptors (`prepare_envoy`).

use super::*;

/// Envoy's answer to a descriptor of one entry, `api_key`, in `domain`.
fn api_key(gate: &Gate, domain: &str, key: &str) -> Verdict {
    let descriptors = [envoy::Descriptor {
        entries: vec![("api_key".into(), key.into())],
        hits: None,
    }];
    answered(gate, gate.prepare_envoy(domain, &descriptors, 0))
}

/// The verdict a step comes to: at once, or after the store is asked.
fn answered(gate: &Gate, step: Step) -> Verdict {
    match step {
        Step::Done(v) => *v,
        Step::Ask(plan) => gate.run(plan).unwrap(),
    }
}

#[test]
fn envoy_descriptors_map_onto_the_same_throttles() {
    let gate = gate(
        "[[throttle]]\nscope = \"api\"\nrules = \"2/minute\"\nkey = \"header:X-Key\"\nenvoy = { domain = \"edge\", key = \"api_key\" }\n",
    );
    let http = Request {
        headers: vec![("X-Key", "k1")],
        ..get("/")
    };
    assert_eq!(gate.decide(&http).unwrap().ending, Ending::Pass);
    let v = api_key(&gate, "edge", "k1");
    assert_eq!(
        v.ending,
        Ending::Pass,
        "the HTTP door's unit and this one: 2"
    );
    let v = api_key(&gate, "edge", "k1");
    assert_eq!(v.ending, Ending::Deny, "one quota for both doors");
    let v = api_key(&gate, "other", "k1");
    assert_eq!((v.ending, v.checked.len()), (Ending::Pass, 0));
}

#[test]
fn a_throttle_with_meters_answers_envoy_at_its_fixed_costs_and_the_http_doors_alike() {
    let gate = gate(
        "[[throttle]]\nscope = \"llm\"\nkey = \"header:X-Key\"\nmeters = { requests = \"9/minute\", tokens = \"100/minute\" }\n\
         cost = { tokens = 40 }\nenvoy = { domain = \"edge\", key = \"api_key\" }\n",
    );
    let http = Request {
        headers: vec![("X-Key", "k1")],
        ..get("/")
    };
    let v = gate.decide(&http).unwrap();
    assert_eq!(v.ending, Ending::Pass);
    assert!(!v.awaits_end, "fixed costs, settled by nothing");
    let v = api_key(&gate, "edge", "k1");
    assert_eq!(v.ending, Ending::Pass, "80 tokens of 100");
    let v = api_key(&gate, "edge", "k1");
    assert_eq!(
        v.ending,
        Ending::Deny,
        "80 + 40 > 100: one quota for both doors"
    );
    assert_eq!(v.decision.unwrap().meter(), Some("tokens"));
}

#[test]
fn an_envoy_request_that_gives_its_path_meets_the_whole_policy() {
    let gate = gate(&format!(
        "exempt_paths = [\"/health\"]\n[[blocklist]]\nname = \"admin\"\npaths = [\"^/admin\"]\n{LAYERED}"
    ));
    let described = |method: &str, path: &str| {
        [envoy::Descriptor {
            entries: vec![
                ("remote_address".into(), "203.0.113.9".into()),
                (":method".into(), method.into()),
                (":path".into(), path.into()),
            ],
            hits: None,
        }]
    };
    let run = |step| answered(&gate, step);
    let v = run(gate.prepare_envoy("edge", &described("post", "/login?email=a%40x.io"), 0));
    assert_eq!(v.ending, Ending::Pass);
    assert_eq!(
        v.checked
            .iter()
            .map(|c| (c.throttle, c.origin, c.key.clone()))
            .collect::<Vec<_>>(),
        vec![(0, 0, b"203.0.113.9".to_vec()), (1, 0, b"a@x.io".to_vec())],
        "the throttles without an envoy table, from the entries, on the describing descriptor"
    );
    let v = run(gate.prepare_envoy("edge", &described("POST", "/login?email=a%40x.io"), 0));
    assert_eq!((v.ending, v.throttle), (Ending::Deny, Some(1)));
    let http = request("POST", "/login", "email=a%40x.io");
    assert_eq!(
        gate.decide(&http).unwrap().ending,
        Ending::Deny,
        "the quota an HTTP door counts"
    );
    let v = run(gate.prepare_envoy("edge", &described("GET", "/admin/x"), 0));
    assert_eq!((v.ending, v.blocklist()), (Ending::Block, Some(0)));
    let v = run(gate.prepare_envoy("edge", &described("GET", "/health"), 0));
    assert_eq!((v.ending, v.checked.len()), (Ending::Pass, 0), "exempt");
}
