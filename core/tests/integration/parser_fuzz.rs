//! The rule parser never panics, whatever the text: random strings and
//! random mixes of the grammar's own pieces either parse into valid rules or
//! fail with a configuration error.

use proptest::prelude::*;
use ratekeeper_core::rule::{MAX_LIMIT, MAX_WINDOW_MS};
use ratekeeper_core::{Error, RuleSet};

fn check(text: &str) {
    match RuleSet::parse(text) {
        Ok(set) => {
            assert!(!set.rules().is_empty());
            for rule in set.rules() {
                assert!((1..=MAX_LIMIT).contains(&rule.limit), "{text:?}");
                assert!((1..=MAX_WINDOW_MS).contains(&rule.window_ms), "{text:?}");
            }
            // what parses prints back to text that parses to the same rules
            assert_eq!(RuleSet::parse(&set.to_string()).unwrap(), set, "{text:?}");
        }
        Err(Error::Config(message)) => assert!(!message.is_empty()),
        Err(other) => panic!("{text:?}: unexpected {other:?}"),
    }
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,25}",
        Just("-".to_owned()),
        Just("+".to_owned()),
        Just("/".to_owned()),
        Just(" per ".to_owned()),
        Just(";".to_owned()),
        Just(",".to_owned()),
        Just(" ".to_owned()),
        prop::sample::select(vec![
            "ms",
            "s",
            "sec",
            "seconds",
            "m",
            "min",
            "minutes",
            "h",
            "hour",
            "d",
            "days",
            "fortnight",
            "µs",
            "\u{0}",
            "é"
        ])
        .prop_map(str::to_owned),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5000, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in "\\PC{0,40}") {
        check(&text);
    }

    #[test]
    fn grammar_pieces_never_panic(pieces in prop::collection::vec(piece(), 0..12)) {
        check(&pieces.concat());
    }
}
