//! A throttle that counts only some responses (`count`): a request is
//! counted before the application runs and given back when its response
//! is not one counted, on every store; what `count` may say; the doors that
//! never see a response refuse it.

use crate::common;
use ratekeeper_core::gate::source::Head;
use ratekeeper_core::gate::{Ending, Facts, Gate, Spec};

/// A login request for `email`, from one client.
struct Login(Head);

impl Facts for Login {
    fn head(&self) -> &Head {
        &self.0
    }
    fn header(&self, _: &str) -> Option<Vec<u8>> {
        None
    }
}

fn login(email: &str) -> Login {
    let query = format!("email={email}");
    Login(Head::new(
        "POST",
        "/login".into(),
        "example.com",
        "203.0.113.9".into(),
        query,
    ))
}

fn policy(url: &str, count: &str) -> String {
    format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{}\"\n\n[[throttle]]\nscope = \"logins\"\nrules = \"5/5minutes\"\nkey = \"query:email\"\npaths = [\"/login\"]\ncount = {count}\n",
        common::unique_prefix()
    )
}

fn urls() -> Vec<String> {
    let mut urls = vec!["memory://".to_owned(), common::redis_url()];
    urls.extend(common::configured("RATEKEEPER_TEST_CLUSTER"));
    urls
}

#[test]
fn good_logins_pass_and_the_sixth_bad_one_is_refused_on_every_store() {
    for url in urls() {
        let gate = Gate::bind(Spec::parse(&policy(&url, "\"failures\"")).unwrap(), None).unwrap();
        for i in 0..100 {
            let verdict = gate.decide(&login("ann@example.com")).unwrap();
            assert_eq!(verdict.ending, Ending::Pass, "{url}: good login {i}");
            assert!(verdict.awaits_end, "{url}");
            gate.finish(&verdict, Some(200), &[]).unwrap();
        }
        for i in 0..5 {
            let verdict = gate.decide(&login("ann@example.com")).unwrap();
            assert_eq!(verdict.ending, Ending::Pass, "{url}: bad login {i}");
            gate.finish(&verdict, Some(401), &[]).unwrap();
        }
        let sixth = gate.decide(&login("ann@example.com")).unwrap();
        assert_eq!(
            sixth.ending,
            Ending::Deny,
            "{url}: the sixth failure is refused"
        );
        assert!(!sixth.awaits_end, "{url}: a refusal gives nothing back");
        let other = gate.decide(&login("bob@example.com")).unwrap();
        assert_eq!(other.ending, Ending::Pass, "{url}: another e-mail address");
    }
}

#[test]
fn a_list_of_statuses_counts_those_alone() {
    let gate = Gate::bind(
        Spec::parse(&policy("memory://", "[401, 403]")).unwrap(),
        None,
    )
    .unwrap();
    for status in [200, 500, 404, 302, 500, 200] {
        let verdict = gate.decide(&login("k")).unwrap();
        assert_eq!(verdict.ending, Ending::Pass, "{status}");
        gate.finish(&verdict, Some(status), &[]).unwrap();
    }
    for _ in 0..5 {
        let verdict = gate.decide(&login("k")).unwrap();
        gate.finish(&verdict, Some(403), &[]).unwrap();
    }
    assert_eq!(gate.decide(&login("k")).unwrap().ending, Ending::Deny);
    // a response never told (the application raised) stays counted
    let counted = Gate::bind(
        Spec::parse(&policy("memory://", "\"failures\"")).unwrap(),
        None,
    )
    .unwrap();
    for _ in 0..5 {
        assert_eq!(counted.decide(&login("k")).unwrap().ending, Ending::Pass);
    }
    assert_eq!(counted.decide(&login("k")).unwrap().ending, Ending::Deny);
}

#[test]
fn count_says_failures_or_statuses_and_doors_without_a_response_refuse_it() {
    for (count, wanted) in [
        ("\"errors\"", "count: give \"failures\""),
        ("[]", "count: give \"failures\""),
        ("[99]", "99 is not a status"),
        ("[600]", "600 is not a status"),
        ("[\"401\"]", "is not a status"),
        ("true", "count: give \"failures\""),
    ] {
        let message = Spec::parse(&policy("memory://", count))
            .unwrap_err()
            .to_string();
        assert!(message.contains(wanted), "{count}: {message}");
    }
    let spec = Spec::parse(&policy("memory://", "\"failures\"")).unwrap();
    let message = spec.check_unanswered().unwrap_err().to_string();
    assert!(
        message.contains("throttle 'logins' counts only some responses"),
        "{message}"
    );
    Spec::parse("[[throttle]]\nscope = \"a\"\nrules = \"1/s\"\nkey = \"ip\"\n")
        .unwrap()
        .check_unanswered()
        .unwrap();
}

#[test]
fn a_request_another_throttle_refuses_is_not_counted_as_a_failure() {
    let text = format!(
        "[store]\nprefix = \"{}\"\n\n[[throttle]]\nscope = \"per-client\"\nrules = \"3/minute\"\nkey = \"ip\"\n\n\
         [[throttle]]\nscope = \"logins\"\nrules = \"5/5minutes\"\nkey = \"query:email\"\ncount = \"failures\"\n",
        common::unique_prefix()
    );
    let gate = Gate::bind(Spec::parse(&text).unwrap(), None).unwrap();
    for _ in 0..3 {
        let verdict = gate.decide(&login("k")).unwrap();
        assert_eq!(verdict.ending, Ending::Pass);
        gate.finish(&verdict, Some(401), &[]).unwrap();
    }
    for _ in 0..5 {
        let refused = gate.decide(&login("k")).unwrap();
        assert_eq!(
            refused.ending,
            Ending::Deny,
            "the client's own throttle refuses"
        );
        assert!(!refused.awaits_end, "the gate gave its unit back itself");
    }
    let logins = &gate.limiters()[1];
    let left = logins.peek(b"k", 1, None).unwrap();
    assert_eq!(
        left.rules[0].remaining, 2,
        "three failed logins, none of the refused requests"
    );
}
