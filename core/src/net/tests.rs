use super::*;

#[test]
fn a_gate_beside_another_keeps_each_part_of_the_client_it_does_not_name() {
    let base = TrustedProxies::parse(&["10.0.0.0/8", "unix"])
        .unwrap()
        .with_prefixes(ClientPrefixes::new(Some(24), Some(48)).unwrap());
    let own = TrustedProxies::parse(&["192.0.2.1"])
        .unwrap()
        .with_prefixes(ClientPrefixes::new(None, Some(56)).unwrap());
    let kept = own.clone().or_from(&base, (false, false, false));
    assert_eq!(kept, base);
    let mixed = own.clone().or_from(&base, (false, false, true));
    assert_eq!(
        mixed.client_key("10.0.0.1", Some("203.0.113.9")),
        "203.0.113.0/24"
    );
    assert_eq!(mixed.prefixes.v6, 56);
    let named = own.clone().or_from(&base, (true, true, true));
    assert_eq!(named, own);
}

fn proxies(ranges: &[&str]) -> TrustedProxies {
    TrustedProxies::parse(ranges).unwrap()
}

#[test]
fn cidr_ranges() {
    let net = Cidr::parse("10.0.0.0/8").unwrap();
    assert!(net.contains("10.200.1.1".parse().unwrap()));
    assert!(!net.contains("11.0.0.1".parse().unwrap()));
    assert!(net.contains("::ffff:10.1.2.3".parse().unwrap()));
    let v6 = Cidr::parse("2001:db8::/32").unwrap();
    assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
    assert!(!v6.contains("2001:db9::5".parse().unwrap()));
    assert!(Cidr::parse("0.0.0.0/0")
        .unwrap()
        .contains("8.8.8.8".parse().unwrap()));
    assert!(Cidr::parse("1.2.3.4")
        .unwrap()
        .contains("1.2.3.4".parse().unwrap()));
    for bad in ["10.0.0.0/33", "banana", "10.0.0.0/x", "::/129", ""] {
        assert!(
            Cidr::parse(bad).unwrap_err().to_string().contains(bad),
            "{bad}"
        );
    }
}

#[test]
fn ranges_are_shown_canonically() {
    assert_eq!(
        Cidr::parse("10.1.2.3/8")
            .unwrap()
            .network_range()
            .to_string(),
        "10.0.0.0/8"
    );
    assert_eq!(
        Cidr::parse("203.0.113.7")
            .unwrap()
            .network_range()
            .to_string(),
        "203.0.113.7/32"
    );
    assert_eq!(
        Cidr::parse("::ffff:10.0.0.1/104")
            .unwrap()
            .network_range()
            .to_string(),
        "10.0.0.0/8"
    );
    assert_eq!(
        Cidr::parse("2001:db8::1/32")
            .unwrap()
            .network_range()
            .to_string(),
        "2001:db8::/32"
    );
    assert_eq!(
        Cidr::parse("0.0.0.0/0")
            .unwrap()
            .network_range()
            .to_string(),
        "0.0.0.0/0"
    );
    assert!(Cidr::parse("1.2.3.4").unwrap().single_address().is_some());
}

#[test]
fn untrusted_peers_cannot_spoof() {
    let none = TrustedProxies::default();
    assert_eq!(
        none.client_ip("203.0.113.9", Some("1.1.1.1")),
        "203.0.113.9"
    );
    let lb = proxies(&["10.0.0.0/8"]);
    assert_eq!(lb.client_ip("203.0.113.9", Some("1.1.1.1")), "203.0.113.9");
}

#[test]
fn trusted_proxies_are_walked_from_the_right() {
    let lb = proxies(&["10.0.0.0/8", "127.0.0.1"]);
    assert_eq!(
        lb.client_ip("10.0.0.2", Some("6.6.6.6, 198.51.100.7, 10.0.0.9")),
        "198.51.100.7"
    );
    assert_eq!(
        lb.client_ip("127.0.0.1", Some("198.51.100.7:5555")),
        "198.51.100.7"
    );
    assert_eq!(
        lb.client_ip("10.0.0.2", Some("[2001:db8::1]:443")),
        "2001:db8::1"
    );
    assert_eq!(
        lb.client_ip("10.0.0.2", Some("10.1.1.1, 10.2.2.2")),
        "10.1.1.1"
    );
    assert_eq!(lb.client_ip("10.0.0.2", None), "10.0.0.2");
}

#[test]
fn an_ipv6_client_is_its_64_and_an_ipv4_client_its_address() {
    let lb = proxies(&["10.0.0.0/8"]);
    let keys: std::collections::HashSet<String> = (1..=100)
        .map(|i| lb.client_key(&format!("2001:db8:1:2::{i:x}"), None))
        .collect();
    assert_eq!(
        keys.into_iter().collect::<Vec<_>>(),
        ["2001:db8:1:2::/64"],
        "100 addresses of one /64 are one client"
    );
    assert_ne!(
        lb.client_key("2001:db8:1:3::1", None),
        lb.client_key("2001:db8:1:2::1", None),
        "two /64s are two clients"
    );
    assert_eq!(lb.client_key("::ffff:203.0.113.7", None), "203.0.113.7");
    assert_eq!(lb.client_key("203.0.113.7", None), "203.0.113.7");
    assert_eq!(
        lb.client_key("10.0.0.2", Some("[2001:db8::9]:443")),
        "2001:db8::/64"
    );
    assert_eq!(lb.client_ip("2001:db8:1:2::5", None), "2001:db8:1:2::5");
    assert_eq!(lb.client_key("not-an-ip", None), UNKNOWN_PEER);
    let wide = lb
        .clone()
        .with_prefixes(ClientPrefixes::new(Some(24), Some(48)).unwrap());
    assert_eq!(wide.client_key("203.0.113.7", None), "203.0.113.0/24");
    assert_eq!(wide.client_key("2001:db8:1:2::5", None), "2001:db8:1::/48");
    let exact = lb.with_prefixes(ClientPrefixes::new(None, Some(128)).unwrap());
    assert_eq!(exact.client_key("2001:db8::5", None), "2001:db8::5");
}

#[test]
fn the_ip_and_key_found_together_are_the_ones_found_apart() {
    let lb = proxies(&["10.0.0.0/8"]);
    let wide = lb
        .clone()
        .with_prefixes(ClientPrefixes::new(Some(24), Some(48)).unwrap());
    for proxies in [&lb, &wide] {
        for (peer, forwarded) in [
            ("203.0.113.7", None),
            ("::ffff:203.0.113.7", None),
            ("2001:db8:1:2::5", None),
            ("10.0.0.2", Some("[2001:db8::9]:443")),
            ("10.0.0.2", Some("6.6.6.6, 198.51.100.7, 10.0.0.9")),
            ("203.0.113.9", Some("1.1.1.1")),
            ("not-an-ip", None),
            ("", Some("198.51.100.7")),
        ] {
            assert_eq!(
                proxies.client_ip_and_key(peer, forwarded),
                (
                    proxies.client_ip(peer, forwarded),
                    proxies.client_key(peer, forwarded)
                ),
                "{peer} {forwarded:?}"
            );
        }
    }
}

#[test]
fn prefixes_and_ban_networks_are_checked() {
    for (v4, v6, word) in [
        (Some(15), None, "ipv4_prefix 15: give 16 to 32"),
        (Some(33), None, "ipv4_prefix 33"),
        (None, Some(47), "ipv6_prefix 47: give 48 to 128"),
        (None, Some(-1), "ipv6_prefix -1"),
        (None, Some(300), "ipv6_prefix 300"),
    ] {
        let e = ClientPrefixes::new(v4, v6).unwrap_err().to_string();
        assert!(e.contains(word), "{e}");
    }
    assert_eq!(
        client_network("2001:db8::7").unwrap().to_string(),
        "2001:db8::/64"
    );
    assert_eq!(
        client_network("203.0.113.7").unwrap().to_string(),
        "203.0.113.7/32"
    );
    assert_eq!(
        client_network("::ffff:203.0.113.7").unwrap().to_string(),
        "203.0.113.7/32"
    );
    assert_eq!(
        client_network("203.0.113.0/24").unwrap().to_string(),
        "203.0.113.0/24"
    );
    for bad in ["10.0.0.0/8", "2001:db8::/32", "banana", "", "1.2.3.4x"] {
        let e = client_network(bad).unwrap_err().to_string();
        assert!(e.contains("invalid client address"), "{e}");
    }
}

#[test]
fn malformed_hops_stop_the_walk() {
    let lb = proxies(&["10.0.0.0/8"]);
    assert_eq!(
        lb.client_ip("10.0.0.2", Some("1.1.1.1, garbage")),
        "10.0.0.2"
    );
    assert_eq!(lb.client_ip("10.0.0.2", Some("")), "10.0.0.2");
    assert_eq!(lb.client_ip("10.0.0.2", Some(",,,")), "10.0.0.2");
    assert_eq!(lb.client_ip("not-an-ip", Some("1.1.1.1")), UNKNOWN_PEER);
}

#[test]
fn a_peer_that_is_no_address_is_one_known_key_or_a_trusted_unix_proxy() {
    let lb = proxies(&["127.0.0.1"]);
    for peer in ["", "  ", "unix:/run/gunicorn.sock", "testclient"] {
        assert_eq!(lb.client_key(peer, None), UNKNOWN_PEER, "{peer:?}");
        assert_eq!(lb.client_ip(peer, Some("203.0.113.9")), UNKNOWN_PEER);
        assert!(!lb.trusts_peer(peer));
    }
    let unix = proxies(&["unix", "10.0.0.0/8"]);
    assert!(unix.trusts_peer("unix:/run/gunicorn.sock") && unix.trusts_peer(""));
    assert_eq!(unix.client_ip("", Some("203.0.113.9")), "203.0.113.9");
    assert_eq!(
        unix.client_key("unix:/x", Some("6.6.6.6, 198.51.100.7, 10.0.0.9")),
        "198.51.100.7"
    );
    assert_eq!(unix.client_key("", None), UNKNOWN_PEER);
    assert_eq!(
        unix.client_key("203.0.113.1", Some("6.6.6.6")),
        "203.0.113.1"
    );
}

#[test]
fn an_address_is_written_as_display_writes_it() {
    for text in [
        "0.0.0.0",
        "10.0.3.7",
        "203.0.113.255",
        "255.255.255.255",
        "2001:db8::1",
        "::ffff:1.2.3.4",
    ] {
        let ip: IpAddr = text.parse().unwrap();
        assert_eq!(address_text(ip), ip.to_string());
    }
    let (ip, key) = proxies(&[]).client_ip_and_key("::ffff:10.0.0.9", None);
    assert_eq!((ip.as_str(), key.as_str()), ("10.0.0.9", "10.0.0.9"));
    let (ip, key) = proxies(&[]).client_ip_and_key("2001:db8:1:2::7", None);
    assert_eq!(
        (ip.as_str(), key.as_str()),
        ("2001:db8:1:2::7", "2001:db8:1:2::/64")
    );
}
