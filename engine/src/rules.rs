//! The rules a check applies, as a log's header stores them.

use crate::layout::enc5;

/// The rules a check applies, shortest window first, as the header stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// Each rule's limit (1 to 2^40 - 1).
    pub limits: Vec<i64>,
    /// Each rule's window in ms (1 to 2^40 - 1).
    pub windows: Vec<i64>,
    /// The windows as 5-byte big-endian numbers, as the header holds them.
    pub encoded: Vec<u8>,
}

impl Rules {
    /// Rules from (limit, window ms) pairs.
    pub fn new(pairs: &[(i64, i64)]) -> Rules {
        let mut rules = Rules::with_capacity(pairs.len());
        for &(limit, window) in pairs {
            rules.push(limit, window);
        }
        rules
    }

    /// No rules yet, with room for `n`.
    pub fn with_capacity(n: usize) -> Rules {
        Rules {
            limits: Vec::with_capacity(n),
            windows: Vec::with_capacity(n),
            encoded: Vec::with_capacity(5 * n),
        }
    }

    /// Adds a rule (its window the longest so far).
    pub fn push(&mut self, limit: i64, window: i64) {
        self.limits.push(limit);
        self.windows.push(window);
        self.encoded.extend_from_slice(&enc5(window));
    }

    /// How many rules.
    pub fn len(&self) -> usize {
        self.limits.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// Forgets every rule, keeping the room they took.
    pub fn clear(&mut self) {
        self.limits.clear();
        self.windows.clear();
        self.encoded.clear();
    }
}
