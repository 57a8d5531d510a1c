//! The safelist and blocklist kinds: entries that name requests (paths,
//! methods, a predicate the door holds) that skip every throttle, or are
//! refused (403), before anything else: as written, checked, and their part
//! of a request's step (the first entry that names it).

use super::RequestMatch;
use crate::gate::source::Facts;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListFile {
    pub(super) name: String,
    #[serde(default)]
    pub(super) paths: Vec<String>,
    #[serde(default)]
    pub(super) methods: Vec<String>,
    #[serde(rename = "match")]
    pub(super) matcher: Option<String>,
}

/// A safelist or blocklist entry: the requests it names.
#[derive(Debug, Clone)]
pub struct ListSpec {
    /// Its name (in notifications and logs).
    pub name: String,
    /// The requests it names.
    pub when: RequestMatch,
}

/// The first entry of `entries` (a policy's safelists, or its blocklists)
/// that names the request `facts` make.
pub fn first_naming(entries: &[ListSpec], facts: &dyn Facts) -> Option<usize> {
    entries.iter().position(|l| l.when.names(facts))
}

pub(super) fn list(l: ListFile, callables: usize) -> std::result::Result<ListSpec, String> {
    let when = RequestMatch::read(&l.paths, &l.methods, l.matcher.as_deref(), callables)?;
    if when.paths.is_empty() && when.methods.is_empty() && when.matcher.is_none() {
        return Err("give paths, methods or match: the requests it names".into());
    }
    Ok(ListSpec { name: l.name, when })
}
