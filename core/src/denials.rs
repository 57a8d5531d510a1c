//! The record of denials: who is limited now. Each process tallies the
//! throttle denials its limiters make (a remembered denial too), per minute,
//! by key and by client address, each with its limiter's scope; an
//! admitted check touches nothing. The tally is written to the store as one
//! value per process and minute (`<prefix>:denials:<minute>`, a hash of
//! process to its tally, which expires after an hour): on the memory store
//! as it changes, on Redis by the process's controls reader every
//! `controls_refresh` (one write a refresh, however many keys were denied).
//! `Admin::top_denied` reads the minutes of a window back from every process: the most
//! denied keys, addresses and the networks they share (an IPv4 /24, an IPv6
//! /64), and the denials of each minute. A key is kept as its tag (the key
//! itself for most keys; `#` and its SHA-1 for a key over 128 bytes or
//! holding braces), and a tag that is not UTF-8 with its stored form
//! besides, so that a row names the very key a block then acts on
//! ([`crate::controls::stored_form`]).

use crate::controls::target::{decode_stored, stored_form};
use crate::error::{Error, Result};
use crate::net::Cidr;
use crate::store::{AsyncControlStore, ControlStore};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// One minute, in ms.
const MINUTE_MS: u64 = 60_000;

/// How long a minute's record is kept, in seconds (the longest window read, and a minute).
pub const KEPT_SECONDS: u64 = 3_660;

/// The longest window `Admin::top_denied` reads, in seconds.
pub const MAX_WINDOW: u64 = 3_600;

/// Most entries a process keeps of one minute (the most denied first).
const MAX_ENTRIES: usize = 500;

/// Most keys (and addresses) a process tallies in one scope and minute:
/// the denials of others are counted, not by whom (a flood of distinct
/// keys cannot grow the tally without bound).
const MAX_TALLIED: usize = 4_096;

/// Most rows [`top`] gives of each kind.
const TOP: usize = 50;

/// What a denial is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Kind {
    /// The key checked.
    #[serde(rename = "k")]
    Key,
    /// The client address the check was made for.
    #[serde(rename = "a")]
    Address,
    /// Denials of keys past the tally's bound, counted in their scope only.
    #[serde(rename = "o")]
    Other,
}

/// One tallied count, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Counted {
    #[serde(rename = "k")]
    kind: Kind,
    #[serde(rename = "s")]
    scope: String,
    #[serde(rename = "v")]
    value: String,
    /// A key's stored form ([`stored_form`]) when `value` (its text, made
    /// valid UTF-8) is not its tag; absent in rows written before it was
    /// kept, and passed over by their readers.
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    exact: Option<String>,
    #[serde(rename = "n")]
    count: u64,
}

impl Counted {
    /// The value as it was tallied: a key's tag, exact when the row kept it.
    fn tallied(&self) -> Vec<u8> {
        self.exact
            .as_deref()
            .and_then(|form| decode_stored(form.as_bytes()))
            .unwrap_or_else(|| self.value.as_bytes().to_vec())
    }
}

/// Counts by scope, then by key or address (a denial of a key counted
/// before allocates nothing).
type Counts = HashMap<String, HashMap<Vec<u8>, u64>>;

/// This process's tally of the current minute.
#[derive(Debug, Default)]
struct Minute {
    /// The minute's start (ms since the epoch).
    start_ms: u64,
    keys: Counts,
    addresses: Counts,
    /// Denials of keys the tally had no room for, by scope.
    others: HashMap<String, u64>,
    /// Denials noted, and how many of them the store holds (written once a
    /// write of them succeeded: one that failed is made again next time).
    noted: u64,
    written: u64,
}

impl Minute {
    /// Whether it holds denials the store does not.
    fn unwritten(&self) -> bool {
        self.noted != self.written
    }
}

/// Adds one to `value`'s count in `scope`; false when the scope has no room
/// for a value it does not count yet.
fn bump(counts: &mut Counts, scope: &str, value: &[u8]) -> bool {
    let in_scope = match counts.get_mut(scope) {
        Some(found) => found,
        None => counts.entry(scope.to_owned()).or_default(),
    };
    if let Some(count) = in_scope.get_mut(value) {
        *count += 1;
        return true;
    }
    if in_scope.len() >= MAX_TALLIED {
        return false;
    }
    in_scope.insert(value.to_vec(), 1);
    true
}

/// A process's tally of denials (see the module docs).
#[derive(Debug)]
pub(crate) struct Tally {
    /// This process in the store's record (random: a forked child has its own).
    process: u64,
    current: Mutex<Minute>,
    /// A minute that ended before it was written.
    ended: Mutex<Option<Minute>>,
}

impl Tally {
    /// An empty tally of a process of its own.
    pub(crate) fn new() -> Tally {
        let state = std::collections::hash_map::RandomState::new();
        let process = std::hash::BuildHasher::hash_one(&state, crate::time::system_now_ms());
        Tally {
            process,
            current: Mutex::new(Minute::default()),
            ended: Mutex::new(None),
        }
    }

    /// Counts one denial at `now_ms` of `key` (its tag) in `scope`, made
    /// for the client address `ip` when one was given.
    pub(crate) fn note(&self, scope: &str, key: &[u8], ip: Option<&str>, now_ms: u64) {
        let start_ms = now_ms - now_ms % MINUTE_MS;
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.start_ms != start_ms {
            let ended = std::mem::replace(
                &mut *current,
                Minute {
                    start_ms,
                    ..Minute::default()
                },
            );
            if ended.unwritten() {
                *self.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(ended);
            }
        }
        if !bump(&mut current.keys, scope, key) {
            match current.others.get_mut(scope) {
                Some(count) => *count += 1,
                None => {
                    current.others.insert(scope.to_owned(), 1);
                }
            }
        }
        if let Some(ip) = ip {
            // an address counted before, as given (the doors give it canonical)
            let counted = current
                .addresses
                .get_mut(scope)
                .and_then(|a| a.get_mut(ip.as_bytes()));
            match counted {
                Some(count) => *count += 1,
                None => {
                    if let Some(ip) = crate::net::parse_hop(ip) {
                        bump(&mut current.addresses, scope, ip.to_string().as_bytes());
                    }
                }
            }
        }
        current.noted += 1;
    }

    /// Whether it holds denials not written yet.
    pub(crate) fn unwritten(&self) -> bool {
        self.ended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
            || self
                .current
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .unwritten()
    }

    /// Writes what changed since the last write (a minute that ended, then
    /// the current one) to `store`. What a failed write held stays to be
    /// written by the next flush.
    pub(crate) fn flush(&self, store: &dyn ControlStore) -> Result<()> {
        let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(minute) = ended {
            if let Err(e) = self.write(store, &minute) {
                // (unless a minute that ended since took its place)
                let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
                ended.get_or_insert(minute);
                return Err(e);
            }
        }
        let (start_ms, noted, blob) = {
            let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            if !current.unwritten() {
                return Ok(());
            }
            (current.start_ms, current.noted, encode(&current))
        };
        store.put_denials(start_ms, self.process, &blob, KEPT_SECONDS)?;
        // the store holds what was noted up to the write (the minute may
        // have ended meanwhile); what came since, the next flush writes
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.start_ms == start_ms {
            current.written = noted;
            return Ok(());
        }
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(minute) = ended.as_mut().filter(|m| m.start_ms == start_ms) {
            minute.written = noted;
            if !minute.unwritten() {
                *ended = None;
            }
        }
        Ok(())
    }

    fn write(&self, store: &dyn ControlStore, minute: &Minute) -> Result<()> {
        store.put_denials(minute.start_ms, self.process, &encode(minute), KEPT_SECONDS)
    }
}

/// A minute's counts as the store keeps them: the most denied first, at most [`MAX_ENTRIES`].
fn encode(minute: &Minute) -> Vec<u8> {
    let mut entries: Vec<Counted> = [
        (Kind::Key, &minute.keys),
        (Kind::Address, &minute.addresses),
    ]
    .into_iter()
    .flat_map(|(kind, counts)| {
        counts.iter().flat_map(move |(scope, values)| {
            values.iter().map(move |(value, &count)| {
                let text = String::from_utf8_lossy(value).into_owned();
                Counted {
                    kind,
                    scope: scope.clone(),
                    exact: (text.as_bytes() != value.as_slice()).then(|| stored_form(value)),
                    value: text,
                    count,
                }
            })
        })
    })
    .collect();
    entries.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.value.cmp(&b.value)));
    entries.truncate(MAX_ENTRIES);
    entries.extend(minute.others.iter().map(|(scope, &count)| Counted {
        kind: Kind::Other,
        scope: scope.clone(),
        value: String::new(),
        exact: None,
        count,
    }));
    serde_json::to_vec(&entries).unwrap_or_default()
}

/// One row of [`Top`]: what was denied (a key, an address or a network), in
/// which scope, and how many times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The limiter's scope ("" for none).
    pub scope: String,
    /// The key, the address, or the network (`198.51.100.0/24`, `2001:db8:1:2::/64`):
    /// a key as text (bytes that are not UTF-8 shown as U+FFFD), its tag
    /// when the key was hashed.
    pub target: String,
    /// A key's tag, exact (`None` for an address or network): its stored
    /// form ([`stored_form`]) names the very key, whatever the text shows.
    pub tag: Option<Vec<u8>>,
    /// The denials counted.
    pub count: u64,
}

impl Denied {
    /// A key's stored form ([`stored_form`]), what a `tag` target takes to
    /// act on the very key (`None` for an address or network).
    pub fn stored(&self) -> Option<String> {
        self.tag.as_deref().map(stored_form)
    }
}

/// Who was limited over a window, most denied first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Top {
    /// The window, in seconds.
    pub window_s: u64,
    /// The keys.
    pub keys: Vec<Denied>,
    /// The client addresses.
    pub addresses: Vec<Denied>,
    /// The networks the addresses share: an IPv4 /24, an IPv6 /64.
    pub networks: Vec<Denied>,
    /// Each minute that holds a moment of the window (the first and the
    /// last in part), oldest first: its start (ms) and its denials.
    pub per_minute: Vec<(u64, u64)>,
}

/// The network an address shares with its neighbours: its /24 or /64.
fn network_of(address: &str) -> Option<String> {
    let ip: IpAddr = address.parse().ok()?;
    let prefix = if ip.is_ipv4() { 24 } else { 64 };
    Cidr::parse(&format!("{ip}/{prefix}"))
        .ok()
        .map(|net| net.network_range().to_string())
}

/// Rows of addresses or networks, by scope and text.
fn texts(counts: HashMap<(String, String), u64>) -> impl Iterator<Item = Denied> {
    counts.into_iter().map(|((scope, target), count)| Denied {
        scope,
        target,
        tag: None,
        count,
    })
}

/// Rows of keys, by scope and tag.
fn tags(counts: HashMap<(String, Vec<u8>), u64>) -> impl Iterator<Item = Denied> {
    counts.into_iter().map(|((scope, tag), count)| Denied {
        scope,
        target: String::from_utf8_lossy(&tag).into_owned(),
        tag: Some(tag),
        count,
    })
}

/// The rows, most first, at most [`TOP`].
fn ranked(rows: impl Iterator<Item = Denied>) -> Vec<Denied> {
    let mut rows: Vec<Denied> = rows.collect();
    rows.sort_by(|a, b| {
        (b.count, &a.scope, &a.target, &a.tag).cmp(&(a.count, &b.scope, &b.target, &b.tag))
    });
    rows.truncate(TOP);
    rows
}

/// Who was limited over the `window_s` seconds (1 to [`MAX_WINDOW`]) up to
/// `now_ms`, by every process that writes to `store`.
pub(crate) async fn top(store: &dyn AsyncControlStore, window_s: u64, now_ms: u64) -> Result<Top> {
    if !(1..=MAX_WINDOW).contains(&window_s) {
        return Err(Error::config(format!(
            "invalid window {window_s}: give 1 to {MAX_WINDOW} seconds"
        )));
    }
    // every minute that holds a moment of (now - window, now]
    let minute_of = |ms: u64| ms - ms % MINUTE_MS;
    let (first, last) = (
        minute_of((now_ms + 1).saturating_sub(window_s * 1000)),
        minute_of(now_ms),
    );
    let minutes: Vec<u64> = (first..=last).step_by(MINUTE_MS as usize).collect();
    let written = store.denials_async(&minutes).await?;
    let mut keys = HashMap::new();
    let mut addresses = HashMap::new();
    let mut networks = HashMap::new();
    let mut per_minute = Vec::with_capacity(minutes.len());
    for (&start_ms, blobs) in minutes.iter().zip(written) {
        let mut total = 0;
        for blob in blobs {
            let Ok(entries) = serde_json::from_slice::<Vec<Counted>>(&blob) else {
                continue;
            };
            for e in entries {
                match e.kind {
                    Kind::Key => {
                        total += e.count;
                        *keys.entry((e.scope.clone(), e.tallied())).or_insert(0) += e.count;
                    }
                    Kind::Address => {
                        if let Some(net) = network_of(&e.value) {
                            *networks.entry((e.scope.clone(), net)).or_insert(0) += e.count;
                        }
                        *addresses.entry((e.scope, e.value)).or_insert(0) += e.count;
                    }
                    Kind::Other => total += e.count,
                }
            }
        }
        per_minute.push((start_ms, total));
    }
    Ok(Top {
        window_s,
        keys: ranked(tags(keys)),
        addresses: ranked(texts(addresses)),
        networks: ranked(texts(networks)),
        per_minute,
    })
}

#[cfg(test)]
mod tests;
