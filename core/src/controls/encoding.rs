//! How the controls are stored: the Redis key names of the shared hashes,
//! one-letter field codes, and the text of listings, overrides and switches.
//! The Lua scripts (`engine/lua/*.lua`) and the memory store read and write
//! exactly these forms.

use super::{valid_multiplier, Field, Listing, Record, Switches};
use crate::error::{Error, Result};
use crate::rule::RuleSet;

impl Field {
    /// The one-letter name stored in Redis.
    pub fn code(self) -> &'static str {
        match self {
            Field::Safe => "s",
            Field::Block => "b",
            Field::Tier => "t",
            Field::Override => "o",
        }
    }

    /// The field a one-letter name stands for.
    pub fn from_code(code: u8) -> Option<Field> {
        Field::ALL
            .into_iter()
            .find(|f| f.code().as_bytes()[0] == code)
    }
}

impl Listing {
    /// As stored: `"<until_ms> <reason>"`.
    pub fn encode(&self) -> String {
        format!("{} {}", self.until_ms, self.reason)
    }

    /// From its stored form, read as the engine reads it; `None` when it
    /// does not start with a time.
    pub fn decode(text: &str) -> Option<Listing> {
        let (until, reason) = ratekeeper_engine::command::listing(text.as_bytes())?;
        Some(Listing {
            until_ms: until as u64,
            // (the reason is the text's tail, after ASCII digits and a space)
            reason: text[text.len() - reason.len()..].to_owned(),
        })
    }
}

impl Switches {
    /// The switches from the stored hash (missing or unreadable fields keep their defaults).
    pub fn from_fields(fields: &[(Vec<u8>, Vec<u8>)]) -> Switches {
        let mut switches = Switches::default();
        for (name, value) in fields {
            let value = String::from_utf8_lossy(value);
            match name.as_slice() {
                b"enabled" => switches.enabled = value != "0",
                b"shadow" => switches.shadow = value == "1",
                b"multiplier" => {
                    if let Some(m) = value.parse::<f64>().ok().filter(|m| valid_multiplier(*m)) {
                        switches.multiplier = m;
                    }
                }
                _ => {}
            }
        }
        switches
    }
}

/// A key's stored record, as read (fields in [`Field::ALL`] order).
pub type RawRecord = [Option<String>; 4];

impl Record {
    /// Decodes a raw record, keeping listings that stand at `now_ms`.
    pub fn decode(raw: &RawRecord, now_ms: u64) -> Record {
        let listing = |v: &Option<String>| {
            v.as_deref()
                .and_then(Listing::decode)
                .filter(|l| l.stands_at(now_ms))
        };
        Record {
            safe: listing(&raw[0]),
            block: listing(&raw[1]),
            tier: raw[2].clone(),
            rules: raw[3].as_deref().and_then(|o| decode_rules(o).ok()),
        }
    }
}

/// The hashes shared by every key, in the `{=policy}` slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedHash {
    /// Address and range listings.
    Nets,
    /// The switches.
    Switches,
    /// An index of listed keys, tiers and overrides, for `list`.
    Directory,
}

impl SharedHash {
    /// The Redis key of this hash.
    pub fn key(self, prefix: &str) -> String {
        let name = match self {
            SharedHash::Nets => "nets",
            SharedHash::Switches => "switches",
            SharedHash::Directory => "dir",
        };
        format!("{prefix}:{{=policy}}:{name}")
    }

    /// Whether a change to it must move the version (processes hold it).
    pub fn held_in_process(self) -> bool {
        self != SharedHash::Directory
    }
}

/// The Redis key of the version counter of the shared controls.
pub fn version_key(prefix: &str) -> String {
    format!("{prefix}:{{=policy}}:version")
}

/// A rule set as an override is stored: `limit:window_ms` pairs joined by `;`.
pub fn encode_rules(rules: &RuleSet) -> String {
    let parts: Vec<String> = rules
        .rules()
        .iter()
        .map(|r| format!("{}:{}", r.limit, r.window_ms))
        .collect();
    parts.join(";")
}

/// A stored override back as a rule set, read as the engine reads it.
pub fn decode_rules(text: &str) -> Result<RuleSet> {
    let bad = || Error::storage(format!("unreadable stored override '{text}'"));
    let rules = ratekeeper_engine::command::parse_override(text.as_bytes()).map_err(|_| bad())?;
    RuleSet::from_log_rules(&rules).map_err(|_| bad())
}

/// A shared-hash field: the field's one-letter code, then the target.
pub fn mark(field: Field, target: &[u8]) -> Vec<u8> {
    let mut out = field.code().as_bytes().to_vec();
    out.extend_from_slice(target);
    out
}

/// The directory field of a key's listing earned in `scope` (a ban by
/// `penalize` in a scoped limiter): the field's code in upper case, the
/// scope, a space (a scope has none), then the key. "" is the key's own:
/// [`mark`]. (An older reader knows no upper-case code and passes it over.)
pub fn scoped_mark(field: Field, scope: &str, target: &[u8]) -> Vec<u8> {
    if scope.is_empty() {
        return mark(field, target);
    }
    let mut out = field.code().to_ascii_uppercase().into_bytes();
    out.extend_from_slice(scope.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target);
    out
}

/// The directory field of a listing made by a key's tag ([`Target::Tag`](super::Target::Tag):
/// the key itself is not known): `#`, the field's code, the scope ("" for
/// the key's own), a space, then the tag. (An older reader knows no `#`
/// code and passes it over.)
pub fn tag_mark(field: Field, scope: &str, tag: &[u8]) -> Vec<u8> {
    let mut out = b"#".to_vec();
    out.extend_from_slice(field.code().as_bytes());
    out.extend_from_slice(scope.as_bytes());
    out.push(b' ');
    out.extend_from_slice(tag);
    out
}

/// A directory or address-list field read back: its field, its scope (""
/// for the key's own), its target, and whether the target is a key's tag
/// ([`tag_mark`]) rather than the key.
pub fn unmark(field: &[u8]) -> Option<(Field, &str, &[u8], bool)> {
    let (&code, rest) = field.split_first()?;
    if let Some(kind) = Field::from_code(code) {
        return Some((kind, "", rest, false));
    }
    let (kind, rest, tagged) = match code {
        b'#' => {
            let (&code, rest) = rest.split_first()?;
            (Field::from_code(code)?, rest, true)
        }
        _ => (Field::from_code(code.to_ascii_lowercase())?, rest, false),
    };
    let space = rest.iter().position(|&b| b == b' ')?;
    let scope = std::str::from_utf8(&rest[..space]).ok()?;
    Some((kind, scope, &rest[space + 1..], tagged))
}
