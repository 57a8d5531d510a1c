//! Response header values as Ruby strings, the ones that repeat made once:
//! a count below 1,000 (a limit, the units remaining or used, a retry
//! time) and the value of a steady header (`STEADY_HEADERS`: a rule set's
//! limit and policy) are frozen, interned Strings kept for the process, so
//! most responses' rate-limit headers cost one new String (the reset
//! time) rather than six. Any other value is a new String.

use crate::kept::{forever, Kept};
use magnus::value::Opaque;
use magnus::{RString, Ruby};
use ratekeeper_core::http::STEADY_HEADERS;
use std::sync::OnceLock;

/// The counts below this are made once, in `init`.
const SMALL: usize = 1_000;
/// The most steady values kept (a process has a few rule sets).
const MOST_STEADY: usize = 256;

static COUNTS: OnceLock<Vec<Opaque<RString>>> = OnceLock::new();
static STEADY: Kept = Kept::new(MOST_STEADY);

/// Makes the small counts (in `init`, holding the GVL), kept alive for the process.
pub fn init(ruby: &Ruby) {
    COUNTS.get_or_init(|| {
        (0..SMALL)
            .map(|count| forever(ruby, &count.to_string()))
            .collect()
    });
}

/// Header `name`'s `value` as a Ruby String (frozen when kept).
pub fn header_value(ruby: &Ruby, name: &str, value: &str) -> RString {
    if let Some(count) = small_count(value) {
        if let Some(counts) = COUNTS.get() {
            return ruby.get_inner(counts[count]);
        }
    }
    if !STEADY_HEADERS.contains(&name) {
        return ruby.str_new(value);
    }
    STEADY.get(ruby, value, str::to_owned)
}

/// `value` as a count below [`SMALL`] written as Ruby writes it (no sign,
/// no leading zero).
fn small_count(value: &str) -> Option<usize> {
    let bytes = value.as_bytes();
    let plain = !bytes.is_empty()
        && bytes.len() <= 3
        && bytes.iter().all(u8::is_ascii_digit)
        && (bytes.len() == 1 || bytes[0] != b'0');
    plain.then(|| value.parse().ok()).flatten()
}
