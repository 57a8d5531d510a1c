//! The audit trail: every change an operator made through [`crate::Admin`]
//! (a listing added or lifted, a key's tier or override, the switches), who
//! made it, when and why. The store keeps the newest [`KEEP`] of them (a
//! Redis list, `<prefix>:audit`; the memory store, in-process), shared by
//! every process and both languages; an admin page, `Admin.history()` and
//! `ratekeeper history` read them back, newest first.

use crate::error::{Error, Result};
use crate::store::AsyncControlStore;
use serde::{Deserialize, Serialize};

/// How many changes the trail keeps (the oldest are dropped).
pub const KEEP: usize = 1000;

/// The longest text a change keeps of each field (a key or a reason may be
/// anything a client or an operator typed).
const FIELD_BYTES: usize = 512;

/// One change an operator made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// When, in ms since the epoch (the store's clock).
    pub at_ms: u64,
    /// Who: the signed-in user of an admin page, the OS user of the
    /// command line, or what the application named ("" when none was).
    pub actor: String,
    /// What: `block`, `safelist`, `unblock`, `unsafelist`, `tier`,
    /// `override` or `switches`.
    pub action: String,
    /// The key, address or range changed ("" for the switches).
    pub target: String,
    /// The scope of a key's ban ("" for none).
    pub scope: String,
    /// What it became: a listing's expiry, the tier, the rules, the switches.
    pub detail: String,
    /// Why, as the operator said.
    pub reason: String,
}

/// `text` cut to at most [`FIELD_BYTES`] bytes, on a character boundary.
fn bounded(text: &str) -> String {
    if text.len() <= FIELD_BYTES {
        return text.to_owned();
    }
    let mut end = FIELD_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

impl Change {
    /// A change of `action` on `target` (bytes, read as UTF-8 with
    /// replacement), each text field bounded.
    pub fn new(actor: &str, action: &str, target: &[u8], scope: &str) -> Change {
        Change {
            at_ms: 0,
            actor: bounded(actor),
            action: action.to_owned(),
            target: bounded(&String::from_utf8_lossy(target)),
            scope: scope.to_owned(),
            detail: String::new(),
            reason: String::new(),
        }
    }

    /// This change, with what it became.
    pub fn detail(mut self, detail: &str) -> Change {
        self.detail = bounded(detail);
        self
    }

    /// This change, with why it was made.
    pub fn reason(mut self, reason: &str) -> Change {
        self.reason = bounded(reason);
        self
    }

    /// As the store keeps it (JSON).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A change as the store kept it; `None` for what no change encodes.
    pub fn decode(bytes: &[u8]) -> Option<Change> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Appends `change`, made at the store's time `at_ms`, to the trail.
pub(crate) async fn append(
    store: &dyn AsyncControlStore,
    change: Change,
    at_ms: u64,
) -> Result<()> {
    let change = Change { at_ms, ..change };
    store.push_change_async(&change.encode(), KEEP).await
}

/// The newest `limit` changes (1 to [`KEEP`]), newest first.
pub(crate) async fn read(store: &dyn AsyncControlStore, limit: usize) -> Result<Vec<Change>> {
    if !(1..=KEEP).contains(&limit) {
        return Err(Error::config(format!(
            "invalid limit {limit}: give 1 to {KEEP} changes"
        )));
    }
    let kept = store.changes_async(limit).await?;
    Ok(kept
        .iter()
        .filter_map(|bytes| Change::decode(bytes))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_survives_its_encoding_whatever_its_text() {
        let change = Change::new("ops\u{202e}", "block", b"\xff<script>\r\n", "api")
            .detail("until 2026-12-02T00:00:00Z")
            .reason(&"x".repeat(2000));
        let back = Change::decode(&change.encode()).expect("decoded");
        assert_eq!(back, change);
        assert_eq!(back.target, "\u{fffd}<script>\r\n");
        assert_eq!(back.reason.len(), FIELD_BYTES);
        assert!(Change::decode(b"not json").is_none());
        assert_eq!(bounded(&"é".repeat(400)).len(), FIELD_BYTES);
    }
}
