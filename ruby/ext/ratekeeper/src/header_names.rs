//! The core's header names (`ratekeeper_core::http::HEADER_NAMES`) as
//! frozen, interned Ruby strings, made once in `init`: a Hash keyed by
//! one neither copies nor freezes it, so a response's rate-limit headers
//! cost one String (the value) each.

use magnus::value::Opaque;
use magnus::{RString, Ruby};
use ratekeeper_core::http::HEADER_NAMES;
use std::sync::OnceLock;

static NAMES: OnceLock<Vec<Opaque<RString>>> = OnceLock::new();

/// Makes the names (in `init`, holding the GVL), kept alive for the process.
pub fn init(ruby: &Ruby) {
    NAMES.get_or_init(|| {
        HEADER_NAMES
            .iter()
            .map(|name| {
                let interned = ruby.str_new(name).to_interned_str();
                ruby.gc_register_mark_object(interned);
                Opaque::from(interned)
            })
            .collect()
    });
}

/// Header `name` as a Ruby String: the interned one for a core header
/// name, else a new one.
pub fn header_name(ruby: &Ruby, name: &str) -> RString {
    let interned = HEADER_NAMES
        .iter()
        .position(|known| *known == name)
        .and_then(|i| NAMES.get().map(|names| ruby.get_inner(names[i])));
    interned.unwrap_or_else(|| ruby.str_new(name))
}
