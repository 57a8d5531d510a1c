use super::*;

fn pairs(text: &str) -> Vec<(u64, u64)> {
    RuleSet::parse(text)
        .unwrap()
        .rules()
        .iter()
        .map(|r| (r.limit, r.window_ms))
        .collect()
}

fn err(text: &str) -> String {
    RuleSet::parse(text).unwrap_err().to_string()
}

#[test]
fn parses_every_spelling() {
    assert_eq!(pairs("20/minute"), vec![(20, 60_000)]);
    assert_eq!(pairs("20 per minute"), vec![(20, 60_000)]);
    assert_eq!(pairs("20 PER Minutes"), vec![(20, 60_000)]);
    assert_eq!(pairs("5/5min"), vec![(5, 300_000)]);
    assert_eq!(pairs("100/30s"), vec![(100, 30_000)]);
    assert_eq!(pairs("800/day"), vec![(800, 86_400_000)]);
    assert_eq!(pairs("2/500ms"), vec![(2, 500)]);
    assert_eq!(pairs("3 / 2 h"), vec![(3, 7_200_000)]);
    assert_eq!(pairs("1/sec"), vec![(1, 1000)]);
    assert_eq!(pairs("7/366d"), vec![(7, MAX_WINDOW_MS)]);
}

#[test]
fn sorts_sets_by_window() {
    assert_eq!(
        pairs("800/day; 1/second, 200/hour;20/minute;"),
        vec![(1, 1000), (20, 60_000), (200, 3_600_000), (800, 86_400_000)]
    );
}

#[test]
fn rejects_bad_rules_naming_the_text() {
    for (text, needle) in [
        ("0/minute", "0/minute"),
        ("5/fortnight", "fortnight"),
        ("-1/h", "-1/h"),
        ("99999999999999999999/s", "99999999999999999999/s"),
        ("10/367d", "366 days"),
        ("10/0s", "10/0s"),
        ("abc", "abc"),
        ("10/", "no unit"),
        ("/s", "missing"),
        ("1.5/s", "1.5/s"),
        ("1099511627776/s", "at most"),
    ] {
        let message = err(text);
        assert!(message.contains(needle), "{text}: {message}");
    }
}

#[test]
fn rejects_bad_sets() {
    assert!(err("").contains("empty"));
    assert!(err(" ; , ").contains("empty"));
    assert!(err("10/s;20/s").contains("same window"));
    assert!(err("10/60s; 5/minute").contains("same window"));
    // as written, not normalised
    assert!(err("10/60s; 5/minute").contains("'10/60s' and '5/minute'"));
    // the real bound, not "at least 1"
    let huge = err("18446744073709551616/s");
    assert!(
        huge.contains("at most") && huge.contains("'18446744073709551616/s'"),
        "{huge}"
    );
    let half = err("1/0.5s");
    assert!(half.contains("'0.5s'") && half.contains("500ms"), "{half}");
}

#[test]
fn rules_from_seconds() {
    assert_eq!(
        Rule::from_seconds(5, 0.5).unwrap(),
        Rule {
            limit: 5,
            window_ms: 500
        }
    );
    assert!(Rule::from_seconds(0, 1.0).is_err());
    assert!(Rule::from_seconds(5, 0.0).is_err());
    assert!(Rule::from_seconds(5, f64::NAN).is_err());
    assert!(Rule::from_seconds(5, 400.0 * 86400.0).is_err());
    assert!(Rule::from_seconds(i128::MAX, 1.0).is_err());
}

#[test]
fn sets_from_specs() {
    let set = RuleSet::from_specs(vec![
        RuleSpec::Text("1/s; 5/m".into()),
        RuleSpec::Pair(100, 3600.0),
        RuleSpec::Rule(Rule::new(800, DAY_MS).unwrap()),
    ])
    .unwrap();
    assert_eq!(set.to_string(), "1/1s; 5/1m; 100/1h; 800/1d");
    assert!(RuleSet::from_specs(vec![]).is_err());
    assert!(
        RuleSet::from_specs(vec![RuleSpec::Text("1/s".into()), RuleSpec::Pair(2, 1.0)]).is_err()
    );
}

#[test]
fn names_windows() {
    assert_eq!(window_name(1000), "1s");
    assert_eq!(window_name(60_000), "1m");
    assert_eq!(window_name(300_000), "5m");
    assert_eq!(window_name(90_000), "90s");
    assert_eq!(window_name(86_400_000), "1d");
    assert_eq!(window_name(1500), "1500ms");
    assert_eq!(Rule::new(20, 60_000).unwrap().to_string(), "20/1m");
}
