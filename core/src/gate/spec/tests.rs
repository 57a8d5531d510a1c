use super::*;

fn error(text: &str) -> String {
    Spec::parse(text).unwrap_err().to_string()
}

#[test]
fn a_whole_file_is_read() {
    let spec = Spec::parse(
        r#"
        listen = "127.0.0.1:9000"
        grpc = "127.0.0.1:9001"
        trusted_proxies = ["127.0.0.1", "10.0.0.0/8"]
        exempt_paths = ["/health"]
        headers = "draft"
        [store]
        url = "memory://"
        prefix = "edge"
        timeout = 1
        on_error = "deny"
        [[throttle]]
        scope = "api"
        rules = "100/minute"
        key = "header:X-Api-Key"
        paths = ["/api/"]
        methods = ["get", "POST"]
        tiers = { free = "10/minute", pro = "1000/minute" }
        tier = "header:X-Plan"
        envoy = { domain = "edge", key = "api_key", match = { generic_key = "api" } }
        [[fail2ban]]
        name = "php"
        paths = ['\.php$']
        maxretry = 3
        "#,
    )
    .unwrap();
    assert_eq!(spec.listen.unwrap().port(), 9000);
    assert_eq!(spec.settings.prefix, "edge");
    assert_eq!(spec.throttles[0].methods, vec!["GET", "POST"]);
    assert_eq!(spec.throttles[0].tiers.len(), 2);
    assert_eq!(spec.throttles[0].envoy.as_ref().unwrap().matches.len(), 1);
    assert_eq!(spec.bans[0].rule.maxretry, 3);
    assert!(spec.enabled);
}

#[test]
fn problems_are_named_where_they_are() {
    for (text, words) in [
        ("listen = 5", &["listen"][..]),
        ("listen = \"nowhere\"", &["listen", "nowhere"]),
        ("bogus = 1", &["bogus"]),
        ("[store]\ntimeout = -1", &["[store]", "timeout"]),
        ("[store]\nurl = \"redis://:hunter2@h:1/0?x\"\npool_size = 0", &["pool_size"]),
        ("[store]\nflavour = 1", &["[store]", "flavour"]),
        ("[[throttle]]\nscope = \"a\"\nrules = \"5/fortnight\"\nkey = \"ip\"", &["throttle[0]", "\"a\"", "fortnight"]),
        ("[[throttle]]\nscope = \"a b\"\nrules = \"5/s\"\nkey = \"ip\"", &["scope"]),
        ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"cookie:x\"", &["cookie:x"]),
        ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"call:0\"", &["call:0"]),
        ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"", &["key", "envoy"]),
        ("[[throttle]]\nkey = \"ip\"\nrules = \"5/s\"", &["throttle[0]", "scope"]),
        ("[[throttle]]\nkey = \"ip\"\nscope = \"a\"", &["throttle[0]", "rules"]),
        ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"\nmethods = [\"GE T\"]", &["methods", "GE T"]),
        ("[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"\n[[throttle]]\nscope = \"a\"\nrules = \"5/s\"\nkey = \"ip\"", &["throttle[1]", "same scope"]),
        ("[[fail2ban]]\npaths = [\"(\"]", &["fail2ban[0]", "pattern"]),
        ("[[allow2ban]]\npaths = [\"x\"]\nmaxretry = 0", &["allow2ban[0]", "maxretry"]),
        ("status = 200", &["status"]),
        ("trusted_proxies = [\"banana\"]", &["trusted_proxies", "banana"]),
        ("exempt_paths = [\"health\"]", &["exempt_paths", "health"]),
    ] {
        let e = error(text);
        for word in words {
            assert!(e.contains(word), "{text:?}: {e}");
        }
        assert!(!e.contains("hunter2"), "{e}");
    }
}

#[test]
fn methods_and_header_names_are_checked_once() {
    assert_eq!(method("post").unwrap(), "POST");
    assert!(method(" post").is_err());
    assert!(method("GET\r\n").is_err());
    assert!(method("").is_err());
    assert_eq!(header_name("X-Api-Key").as_deref(), Some("x-api-key"));
    assert_eq!(header_name("a b"), None);
    assert_eq!(header_name(""), None);
}
