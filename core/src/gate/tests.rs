use super::*;

/// A request as a test gives it.
#[derive(Default)]
struct Request {
    head: source::Head,
    headers: Vec<(&'static str, &'static str)>,
}

impl Facts for Request {
    fn head(&self) -> &source::Head {
        &self.head
    }
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        source::joined(
            self.headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_bytes()),
        )
    }
}

fn request(method: &str, path: &str, query: &str) -> Request {
    Request {
        head: source::Head::new(
            method,
            path.into(),
            "example.com",
            "203.0.113.9".into(),
            query.into(),
        ),
        headers: Vec::new(),
    }
}

fn get(path: &str) -> Request {
    request("GET", path, "")
}

fn gate(text: &str) -> Gate {
    Gate::bind(Spec::parse(text).unwrap(), None).unwrap()
}

const LAYERED: &str = r#"
[[throttle]]
scope = "req-ip"
rules = "3/minute"
key = "ip"
[[throttle]]
scope = "login-email"
rules = "1/minute"
key = "query:email"
paths = ["/login"]
methods = ["POST"]
"#;

#[test]
fn every_throttle_that_applies_counts_and_the_first_denial_answers() {
    let gate = gate(LAYERED);
    let login = || request("POST", "/login", "email=a@example.com");
    let first = gate.decide(&login()).unwrap();
    assert_eq!(first.ending, Ending::Pass);
    assert_eq!(first.checked.len(), 2, "both throttles apply");
    assert_eq!(
        first.throttle,
        Some(1),
        "the headers of the one with least left"
    );
    let second = gate.decide(&login()).unwrap();
    assert_eq!(second.ending, Ending::Deny);
    assert_eq!(second.answer.status, Some(429));
    assert_eq!(second.throttle, Some(1));
    assert!(second.log.unwrap().text.contains("scope=\"login-email\""));
    // the per-IP throttle counted both: one more anywhere and it is spent
    assert_eq!(gate.decide(&get("/")).unwrap().ending, Ending::Pass);
    let fourth = gate.decide(&get("/")).unwrap();
    assert_eq!((fourth.ending, fourth.throttle), (Ending::Deny, Some(0)));
}

#[test]
fn exempt_paths_and_a_disabled_policy_pass_unmarked() {
    let gate = gate(&format!("exempt_paths = [\"/health\"]\n{LAYERED}"));
    for _ in 0..5 {
        let v = gate.decide(&get("/health/db")).unwrap();
        assert_eq!((v.ending, v.checked.len()), (Ending::Pass, 0));
        assert!(v.answer.headers.is_empty());
    }
    let off = self::gate(&format!("enabled = false\n{LAYERED}"));
    for _ in 0..5 {
        assert_eq!(off.decide(&get("/")).unwrap().ending, Ending::Pass);
    }
}

#[test]
fn a_fail2ban_request_is_refused_and_bans_the_client() {
    let gate = gate(
        "[[fail2ban]]\nname = \"php\"\npaths = ['\\.php$']\nmaxretry = 2\nfindtime = 60\nbantime = 600\n",
    );
    let v = gate.decide(&get("/x.php")).unwrap();
    assert_eq!((v.ending, v.ban), (Ending::Block, Some(0)));
    assert_eq!(v.answer.status, Some(403));
    assert_eq!(gate.decide(&get("/")).unwrap().ending, Ending::Pass);
    gate.decide(&get("/y.php")).unwrap();
    // banned now: the address lists screen every request
    gate.warden().screen("203.0.113.9").expect("listed");
    assert_eq!(gate.decide(&get("/")).unwrap().ending, Ending::Block);
}

#[test]
fn an_app_penalizes_the_client_by_the_entrys_name_through_trusted_proxies() {
    let gate = gate(
        "trusted_proxies = [\"203.0.113.9\"]\n[[fail2ban]]\nname = \"logins\"\npaths = [\"^/never$\"]\nmaxretry = 2\nfindtime = 60\nbantime = 600\n",
    );
    let behind = Request {
        headers: vec![("X-Forwarded-For", "198.51.100.4")],
        ..request("POST", "/login", "")
    };
    let client = gate.client(&behind);
    assert_eq!(
        client.ip, "198.51.100.4",
        "the proxy's client, not the proxy"
    );
    assert!(!gate.penalize("logins", &client).unwrap());
    assert_eq!(
        gate.decide(&behind).unwrap().ending,
        Ending::Pass,
        "one strike bans no one"
    );
    assert!(gate.penalize("logins", &client).unwrap(), "the second bans");
    assert_eq!(gate.decide(&behind).unwrap().ending, Ending::Block);
    assert_eq!(
        gate.decide(&get("/")).unwrap().ending,
        Ending::Pass,
        "the proxy itself is not banned"
    );
    let unknown = gate.penalize("login", &client).unwrap_err().to_string();
    assert!(
        unknown.contains("named 'login'") && unknown.contains("[\"logins\"]"),
        "{unknown}"
    );
}

#[test]
fn a_tier_the_request_names_applies_and_an_unknown_one_is_ignored() {
    let gate = gate(
        "[[throttle]]\nscope = \"api\"\nrules = \"1/minute\"\nkey = \"header:X-Key\"\ntiers = { pro = \"3/minute\" }\ntier = \"header:X-Plan\"\n",
    );
    let with = |plan: &'static str| Request {
        headers: vec![("X-Key", "k1"), ("X-Plan", plan)],
        ..get("/")
    };
    for _ in 0..3 {
        assert_eq!(gate.decide(&with("pro")).unwrap().ending, Ending::Pass);
    }
    assert_eq!(gate.decide(&with("pro")).unwrap().ending, Ending::Deny);
    let other = Request {
        headers: vec![("X-Key", "k2"), ("X-Plan", "platinum")],
        ..get("/")
    };
    assert_eq!(gate.decide(&other).unwrap().ending, Ending::Pass);
    let other = Request {
        headers: vec![("X-Key", "k2"), ("X-Plan", "platinum")],
        ..get("/")
    };
    assert_eq!(
        gate.decide(&other).unwrap().ending,
        Ending::Deny,
        "the main rules"
    );
    // no key: the throttle does not apply
    assert_eq!(gate.decide(&get("/")).unwrap().checked.len(), 0);
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
    let descriptors = [envoy::Descriptor {
        entries: vec![("api_key".into(), "k1".into())],
        hits: None,
    }];
    let run = |step| match step {
        Step::Done(v) => *v,
        Step::Ask(plan) => gate.run(plan).unwrap(),
    };
    let v = run(gate.prepare_envoy("edge", &descriptors, 0));
    assert_eq!(
        v.ending,
        Ending::Pass,
        "the HTTP door's unit and this one: 2"
    );
    let v = run(gate.prepare_envoy("edge", &descriptors, 0));
    assert_eq!(v.ending, Ending::Deny, "one quota for both doors");
    let v = run(gate.prepare_envoy("other", &descriptors, 0));
    assert_eq!((v.ending, v.checked.len()), (Ending::Pass, 0));
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
    let run = |step| match step {
        Step::Done(v) => *v,
        Step::Ask(plan) => gate.run(plan).unwrap(),
    };
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
    assert_eq!((v.ending, v.blocklist), (Ending::Block, Some(0)));
    let v = run(gate.prepare_envoy("edge", &described("GET", "/health"), 0));
    assert_eq!((v.ending, v.checked.len()), (Ending::Pass, 0), "exempt");
}

#[test]
fn a_rebind_keeps_what_did_not_change() {
    let two = |second: &str| {
        Spec::parse(&format!(
            "[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"\n[[throttle]]\nscope = \"b\"\nrules = \"{second}\"\nkey = \"ip\"",
        ))
        .unwrap()
    };
    let old = Gate::bind(two("5/s"), None).unwrap();
    let new = Gate::bind(two("6/s"), Some(&old)).unwrap();
    let same_store = |a: &Gate, b: &Gate| Arc::ptr_eq(&a.warden().store(), &b.warden().store());
    assert!(same_store(&old, &new));
    assert!(Arc::ptr_eq(&old.limiters()[0], &new.limiters()[0]));
    assert!(!Arc::ptr_eq(&old.limiters()[1], &new.limiters()[1]));
    let moved = Spec::parse("[store]\nprefix = \"other\"\n").unwrap();
    assert!(!same_store(&old, &Gate::bind(moved, Some(&old)).unwrap()));
}

#[test]
fn safelists_and_blocklists_name_requests_before_anything_else() {
    let gate = gate(&format!(
        "[[safelist]]\nname = \"health\"\npaths = [\"^/up$\"]\n[[blocklist]]\nname = \"php\"\npaths = ['\\.php$']\nmethods = [\"GET\"]\n{LAYERED}"
    ));
    for _ in 0..5 {
        let v = gate.decide(&get("/up")).unwrap();
        assert_eq!(
            (v.ending, v.safelist, v.checked.len()),
            (Ending::Pass, Some(0), 0)
        );
    }
    let v = gate.decide(&get("/x.php")).unwrap();
    assert_eq!(
        (v.ending, v.blocklist, v.answer.status),
        (Ending::Block, Some(0), Some(403))
    );
    let post = request("POST", "/x.php", "");
    assert_eq!(gate.decide(&post).unwrap().blocklist, None, "GET only");
    assert!(Spec::parse("[[safelist]]\nname = \"x\"\n")
        .unwrap_err()
        .to_string()
        .contains("safelist[0]"));
}

#[test]
fn a_listed_clients_decision_shows_the_first_throttle_that_applies() {
    let gate = gate(&format!(
        "{LAYERED}\n[[throttle]]\nscope = \"api\"\nrules = \"9/second\"\nkey = \"ip\"\npaths = [\"/api/\"]\n"
    ));
    let admin = crate::Admin::new(gate.warden().store());
    let listed = |list, ip: &str| {
        admin.add(list, ip.as_bytes(), None, "test", None).unwrap();
    };
    listed(crate::List::Block, "203.0.113.9");
    let v = gate.decide(&get("/")).unwrap();
    assert_eq!((v.ending, v.answer.status), (Ending::Block, Some(403)));
    let decision = v.decision.expect("a throttle applies");
    assert_eq!(decision.rules.len(), 1);
    assert_eq!(decision.binding_state().limit, 3, "req-ip's 3/minute");
    assert_eq!(decision.reason.as_deref(), Some("test"));
    assert!(v.checked.is_empty(), "nothing counted");

    let mut other = get("/");
    other.head = source::Head::new(
        "GET",
        "/".into(),
        "example.com",
        "198.51.100.7".into(),
        String::new(),
    );
    listed(crate::List::Safe, "198.51.100.7");
    let v = gate.decide(&other).unwrap();
    assert_eq!(v.ending, Ending::Pass);
    assert!(v.answer.headers.is_empty(), "a listed client is unmarked");
    assert_eq!(v.decision.expect("req-ip applies").binding_state().limit, 3);

    let only_api = self::gate(
        "[[throttle]]\nscope = \"api\"\nrules = \"9/second\"\nkey = \"ip\"\npaths = [\"/api/\"]\n",
    );
    crate::Admin::new(only_api.warden().store())
        .add(crate::List::Block, b"203.0.113.9", None, "test", None)
        .unwrap();
    let v = only_api.decide(&get("/")).unwrap();
    assert_eq!(
        (v.ending, v.decision.is_none()),
        (Ending::Block, true),
        "no throttle applies"
    );
    let v = only_api.decide(&get("/api/x")).unwrap();
    assert_eq!(v.decision.expect("api applies").binding_state().limit, 9);
}
