//! What a check saw: per rule, the units in its window, the oldest entry's
//! time and when the check would fit; and whether every rule admits it.

/// What a check saw of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleSeen {
    /// Units in the window before this check.
    pub count: i64,
    /// The time of the oldest entry in the window (-1: none).
    pub oldest: i64,
    /// When the check would fit (-1: it does or never will).
    pub free_at: i64,
}

/// What a check saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The check's time, never before the log's newest entry.
    pub now: i64,
    /// Whether every rule admits it.
    pub allowed: bool,
    /// Per rule, in order.
    pub rules: Vec<RuleSeen>,
}
