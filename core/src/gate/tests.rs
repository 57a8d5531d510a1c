use super::*;

mod descriptors;

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

impl Request {
    fn with_peer(mut self, peer: &str) -> Request {
        self.head.peer = peer.to_owned();
        self
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
    assert_eq!(
        (v.ending, v.reason),
        (
            Ending::Block,
            Reason::Banned {
                ban: 0,
                banned: false
            }
        )
    );
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
fn a_tier_a_trusted_proxy_names_applies_and_a_clients_claim_is_ignored() {
    let gate = gate(
        "trusted_proxies = [\"127.0.0.1\"]\n[[throttle]]\nscope = \"api\"\nrules = \"1/minute\"\nkey = \"header:X-Key\"\ntiers = { pro = \"3/minute\" }\ntier = \"header:X-Plan\"\n",
    );
    // through the trusted proxy (which set X-Plan)
    let proxied = |key: &'static str, plan: &'static str| Request {
        head: source::Head::new(
            "GET",
            "/".into(),
            "example.com",
            "127.0.0.1".into(),
            String::new(),
        ),
        headers: vec![
            ("X-Key", key),
            ("X-Plan", plan),
            ("X-Forwarded-For", "203.0.113.9"),
        ],
    };
    for _ in 0..3 {
        assert_eq!(
            gate.decide(&proxied("k1", "pro")).unwrap().ending,
            Ending::Pass
        );
    }
    assert_eq!(
        gate.decide(&proxied("k1", "pro")).unwrap().ending,
        Ending::Deny
    );
    assert_eq!(
        gate.decide(&proxied("k2", "platinum")).unwrap().ending,
        Ending::Pass
    );
    assert_eq!(
        gate.decide(&proxied("k2", "platinum")).unwrap().ending,
        Ending::Deny,
        "an unknown tier: the main rules"
    );
    // a client that connects itself claims a tier: the main rules
    let direct = Request {
        headers: vec![("X-Key", "k3"), ("X-Plan", "pro")],
        ..get("/")
    };
    let first = gate.decide(&direct).unwrap();
    assert_eq!(first.ending, Ending::Pass);
    assert_eq!(
        first.decision.unwrap().binding_state().limit,
        1,
        "the main rules"
    );
    assert_eq!(gate.decide(&direct).unwrap().ending, Ending::Deny);
    // no key: the throttle does not apply
    assert_eq!(gate.decide(&get("/")).unwrap().checked.len(), 0);
}

#[test]
fn a_repeated_query_field_counts_against_every_value() {
    let gate =
        gate("[[throttle]]\nscope = \"api\"\nrules = \"2/minute\"\nkey = \"query:api_key\"\n");
    for _ in 0..2 {
        assert_eq!(
            gate.decide(&get_q("api_key=VICTIM")).unwrap().ending,
            Ending::Pass
        );
    }
    assert_eq!(
        gate.decide(&get_q("api_key=VICTIM")).unwrap().ending,
        Ending::Deny
    );
    // the spent key beside fresh junk, in either order: denied, and the
    // junk is counted too
    for query in [
        "api_key=junk1&api_key=VICTIM",
        "api_key=VICTIM&api_key=junk2",
    ] {
        let v = gate.decide(&get_q(query)).unwrap();
        assert_eq!(v.ending, Ending::Deny, "{query}");
        assert_eq!(v.checked.len(), 2, "{query}");
    }
    let twice = gate.decide(&get_q("api_key=k&api_key=k&api_key=")).unwrap();
    assert_eq!(
        twice.checked.len(),
        1,
        "one value counted once, an empty one not at all"
    );
    let after: Vec<Ending> = (0..2)
        .map(|_| gate.decide(&get_q("api_key=k")).unwrap().ending)
        .collect();
    assert_eq!(after, [Ending::Pass, Ending::Deny], "k was counted once");
}

fn get_q(query: &str) -> Request {
    request("GET", "/", query)
}

/// A request with a body a door read (or could not).
struct Posted {
    head: source::Head,
    body: source::BodyField,
}

impl Facts for Posted {
    fn head(&self) -> &source::Head {
        &self.head
    }
    fn header(&self, _name: &str) -> Option<Vec<u8>> {
        None
    }
    fn body_field(&self, _field: &str) -> source::BodyField {
        self.body.clone()
    }
}

#[test]
fn an_identity_is_normalised_and_an_unreadable_body_counts_the_client() {
    let gate =
        gate("[[throttle]]\nscope = \"login\"\nrules = \"2/minute\"\nkey = \"identity:email\"\n");
    let posted = |peer: &str, body: source::BodyField| Posted {
        head: source::Head::new("POST", "/login".into(), "", peer.into(), String::new()),
        body,
    };
    let said = |values: &[&str]| {
        source::BodyField::Values(values.iter().map(|v| v.as_bytes().to_vec()).collect())
    };
    let alice = [" Alice", "\u{ff41}lice", "alic\u{ff45}"];
    for (i, spelled) in alice.iter().enumerate() {
        let v = gate
            .decide(&posted("203.0.113.9", said(&[spelled])))
            .unwrap();
        assert_eq!(
            v.ending,
            if i < 2 { Ending::Pass } else { Ending::Deny },
            "{spelled}"
        );
        assert_eq!(v.checked[0].key, b"email=alice");
    }
    let repeated = gate
        .decide(&posted("203.0.113.9", said(&["junk", "alice"])))
        .unwrap();
    assert_eq!(
        repeated.ending,
        Ending::Deny,
        "a repeated field counts every value"
    );
    // a body the door could not read: the client's own quota, never skipped
    for i in 0..3 {
        let v = gate
            .decide(&posted("198.51.100.4", source::BodyField::Unreadable))
            .unwrap();
        assert_eq!(v.checked[0].key, b"email@ip:198.51.100.4");
        assert_eq!(v.ending, if i < 2 { Ending::Pass } else { Ending::Deny });
    }
    let absent = gate
        .decide(&posted("198.51.100.4", source::BodyField::Absent))
        .unwrap();
    assert!(
        absent.checked.is_empty(),
        "no such field: the throttle does not apply"
    );
}

#[test]
fn a_peer_that_is_no_address_is_counted_not_skipped() {
    let gate = gate("[[throttle]]\nscope = \"req\"\nrules = \"2/minute\"\nkey = \"ip\"\n");
    let from = |peer: &str| request("GET", "/", "").with_peer(peer);
    let answers: Vec<Ending> = ["", "unix:/run/gunicorn.sock", " ", ""]
        .iter()
        .map(|peer| gate.decide(&from(peer)).unwrap().ending)
        .collect();
    assert_eq!(
        answers,
        [Ending::Pass, Ending::Pass, Ending::Deny, Ending::Deny]
    );
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
            (v.ending, v.reason, v.checked.len()),
            (Ending::Pass, Reason::Safelisted(Some(0)), 0)
        );
    }
    let v = gate.decide(&get("/x.php")).unwrap();
    assert_eq!(
        (v.ending, v.reason, v.answer.status),
        (Ending::Block, Reason::Blocked(Some(0)), Some(403))
    );
    let post = request("POST", "/x.php", "");
    assert_eq!(gate.decide(&post).unwrap().blocklist(), None, "GET only");
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

#[test]
fn a_shadow_throttle_counts_reports_and_logs_but_never_refuses() {
    let gate = gate(
        r#"
[[throttle]]
scope = "trial"
rules = "2/minute"
key = "ip"
shadow = true
[[throttle]]
scope = "enforced"
rules = "4/minute"
key = "ip"
"#,
    );
    let reasons: Vec<Reason> = (0..5)
        .map(|_| gate.decide(&get("/")).unwrap())
        .map(|v| {
            if v.reason == Reason::Shadowed(Some(0)) {
                // let through, logged as a shadow denial, none of its headers shown
                assert_eq!(v.ending, Ending::Pass);
                assert_eq!(v.answer.status, None);
                let line = v.log.as_ref().expect("logged");
                assert!(
                    line.text.starts_with("rate_limited scope=\"trial\""),
                    "{}",
                    line.text
                );
                assert!(line.text.ends_with(" shadow=true"), "{}", line.text);
                assert_eq!(v.throttle, Some(1), "the enforced throttle's headers");
                assert!(v.checked[0].decision.shadowed());
            }
            v.reason
        })
        .collect();
    assert_eq!(
        reasons,
        [
            Reason::Admitted,
            Reason::Admitted,
            Reason::Shadowed(Some(0)),
            Reason::Shadowed(Some(0)),
            Reason::Throttled(1),
        ],
        "the trial throttle refuses nothing; the enforced one still does"
    );
    let limiters = gate.limiters();
    assert_eq!(
        limiters[0].stats().denied,
        3,
        "counted as the denials they would be (the last request's too)"
    );
    assert!(Spec::parse(
        "[[throttle]]\nscope = \"a\"\nrules = \"1/s\"\nkey = \"ip\"\nshadow = \"yes\"\n"
    )
    .unwrap_err()
    .to_string()
    .contains(
        "shadow = \"yes\"\n  |          ^^^^^\ninvalid type: string \"yes\", expected a boolean"
    ));
}

#[test]
fn every_way_through_the_gate_names_its_reason() {
    let gate = gate(&format!(
        "exempt_paths = [\"/static\"]\n[[safelist]]\nname = \"up\"\npaths = [\"^/up$\"]\n{LAYERED}"
    ));
    assert_eq!(
        gate.decide(&get("/static/a.css")).unwrap().reason,
        Reason::Exempt
    );
    assert_eq!(gate.decide(&get("/up")).unwrap().safelist(), Some(0));
    let reasons: Vec<&str> = (0..4)
        .map(|_| gate.decide(&get("/")).unwrap().reason.name())
        .collect();
    assert_eq!(reasons, ["admitted", "admitted", "admitted", "throttled"]);
}
