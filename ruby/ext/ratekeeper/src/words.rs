//! The core's fixed words (its header names, a verdict's ending and
//! reason) as frozen, interned Ruby strings, made once in `init`: a Hash
//! keyed by one neither copies nor freezes it, so a response's rate-limit
//! headers cost one String (the value) each, and a verdict's `ending` and
//! `reason` cost none.

use crate::kept::forever;
use magnus::value::Opaque;
use magnus::{RString, Ruby};
use ratekeeper_core::gate::{Ending, Reason};
use ratekeeper_core::http::HEADER_NAMES;
use std::sync::OnceLock;

static WORDS: OnceLock<Vec<(&'static str, Opaque<RString>)>> = OnceLock::new();

/// Makes the words (in `init`, holding the GVL), kept alive for the process.
pub fn init(ruby: &Ruby) {
    WORDS.get_or_init(|| {
        HEADER_NAMES
            .iter()
            .chain(Ending::NAMES.iter())
            .chain(Reason::NAMES.iter())
            .map(|word| (*word, forever(ruby, word)))
            .collect()
    });
}

/// `word` as a Ruby String: the interned one for a core word, else a new one.
pub fn word(ruby: &Ruby, word: &str) -> RString {
    let interned = WORDS
        .get()
        .and_then(|words| words.iter().find(|(known, _)| *known == word));
    match interned {
        Some((_, string)) => ruby.get_inner(*string),
        None => ruby.str_new(word),
    }
}
