//! Ruby strings kept for the process by the text they are made for: each
//! made once, frozen and interned, and registered with the GC, up to a
//! bound (past it a string is made each time). The lock is only held to
//! look up and to push: nothing calls into Ruby while it is held.

use magnus::value::Opaque;
use magnus::{RString, Ruby};
use std::sync::{Mutex, PoisonError};

/// `text` as a frozen, interned String kept for the process (registered
/// with the GC: Ruby's one String of that text, never collected).
pub fn forever(ruby: &Ruby, text: &str) -> Opaque<RString> {
    let interned = ruby.str_new(text).to_interned_str();
    ruby.gc_register_mark_object(interned);
    Opaque::from(interned)
}

/// Strings kept by their text, at most `most` of them.
pub struct Kept {
    made: Mutex<Vec<(String, Opaque<RString>)>>,
    most: usize,
}

impl Kept {
    /// An empty set that keeps at most `most` strings.
    pub const fn new(most: usize) -> Kept {
        Kept {
            made: Mutex::new(Vec::new()),
            most,
        }
    }

    /// The string kept for `text`, else `make(text)` interned (and kept
    /// while there is room).
    pub fn get(&self, ruby: &Ruby, text: &str, make: impl FnOnce(&str) -> String) -> RString {
        let known = |made: &[(String, Opaque<RString>)]| {
            made.iter()
                .find(|(known, _)| known == text)
                .map(|(_, string)| *string)
        };
        let found = known(&self.made.lock().unwrap_or_else(PoisonError::into_inner));
        if let Some(string) = found {
            return ruby.get_inner(string);
        }
        let string = ruby.str_new(&make(text)).to_interned_str();
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        if known(&made).is_none() && made.len() < self.most {
            // (an interned String is Ruby's one of its text: registering it
            // keeps it, and the lock is only a Vec's push)
            made.push((text.to_owned(), Opaque::from(string)));
            drop(made);
            ruby.gc_register_mark_object(string);
        }
        string
    }
}
