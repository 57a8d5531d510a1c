//! Each of [`super::Admin`]'s calls, written once over the store's control
//! calls ([`crate::store::ControlCalls`]): awaited by the `_async` methods,
//! made in place by the others; every change appended to the audit trail
//! ([`crate::audit`]) with who made it.

use super::Inspection;
use crate::audit::{self, Change};
use crate::controls::encoding::{mark, scoped_mark, tag_mark, unmark};
use crate::controls::{
    self, check_listing, Entry, Field, List, Listing, Record, SharedHash, Target, TargetOptions,
};
use crate::error::{Error, Result};
use crate::keys::{check_scope, key_tag};
use crate::store::{self, AsyncControlStore};
use crate::time::now_to_ms;

/// The target an operator named, on `list` in `scope`: a scope holds only
/// a key's blocklist entry (a ban); addresses, ranges and safelist entries
/// are listed everywhere.
fn scoped_target(list: List, target: &[u8], options: TargetOptions, scope: &str) -> Result<Target> {
    check_scope(scope)?;
    let target = Target::given(target, options)?;
    if !scope.is_empty() && list == List::Safe {
        return Err(Error::config(format!(
            "a scope ('{scope}') holds only bans: a safelist entry holds everywhere"
        )));
    }
    if !scope.is_empty() && matches!(target, Target::Net(_)) {
        return Err(Error::config(format!(
            "a scope ('{scope}') holds only a key's entry: addresses and ranges are listed \
             everywhere (give the target as a key to list that text in the scope)"
        )));
    }
    Ok(target)
}

/// The store's time `now` names (its clock when `None`), in ms.
pub(super) async fn now_ms(store: &dyn AsyncControlStore, now: Option<f64>) -> Result<u64> {
    match now {
        Some(now) => now_to_ms(now),
        None => store.clock_ms_async().await,
    }
}

/// [`Admin::add_with`]'s one definition.
#[allow(clippy::too_many_arguments)]
pub(super) async fn add_entry(
    store: &dyn AsyncControlStore,
    actor: &str,
    list: List,
    given: &[u8],
    options: TargetOptions,
    scope: &str,
    ttl_seconds: Option<f64>,
    reason: &str,
    now: Option<f64>,
) -> Result<Entry> {
    let target = scoped_target(list, given, options, scope)?;
    let ttl_ms = check_listing(ttl_seconds, reason)?;
    let now_ms = now_ms(store, now).await?;
    let entry = store::controls::put_target(
        store,
        list,
        target,
        scope,
        now_ms + ttl_ms,
        reason,
        Some(now_ms),
    )
    .await?;
    let change = Change::new(actor, list.action(), &entry.target, scope)
        .detail(&format!("for {}", duration(ttl_ms)))
        .reason(reason);
    audit::append(store, change, now_ms).await?;
    Ok(entry)
}

/// A listing's time to live as an operator writes it: `1w`, `2d`, `3h`, `45m`, `30s`.
fn duration(ms: u64) -> String {
    let seconds = ms / 1000;
    for (unit, size) in [("w", 604_800), ("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds >= size && seconds.is_multiple_of(size) {
            return format!("{}{unit}", seconds / size);
        }
    }
    match ms % 1000 {
        0 => format!("{seconds}s"),
        _ => format!("{}s", ms as f64 / 1000.0),
    }
}

/// [`Admin::remove_with`]'s one definition.
pub(super) async fn remove_entry(
    store: &dyn AsyncControlStore,
    actor: &str,
    list: List,
    given: &[u8],
    options: TargetOptions,
    scope: &str,
    reason: &str,
) -> Result<bool> {
    let target = scoped_target(list, given, options, scope)?;
    let named = match &target {
        Target::Net(net) => net.to_string().into_bytes(),
        Target::Key(key) | Target::Tag(key) => key.clone(),
    };
    let existed = match target {
        Target::Net(net) => {
            store
                .set_shared_async(
                    SharedHash::Nets,
                    &mark(list.field(), net.to_string().as_bytes()),
                    None,
                )
                .await?
        }
        Target::Key(_) | Target::Tag(_) => {
            let tag = target.key_tag().unwrap_or_default();
            let now_ms = store.clock_ms_async().await?;
            let slot = if list == List::Safe { 0 } else { 1 };
            let was = store.record_async(&tag, scope).await?[slot].is_some();
            store
                .set_record_async(&tag, scope, list.field(), None, now_ms)
                .await?;
            // the key's entry and its tag's (a key listed by either, or both)
            let mut fields = match &target {
                Target::Key(key) => vec![scoped_mark(list.field(), scope, key)],
                _ => store::controls::keys_of_tag(store, list.field(), scope, &tag).await?,
            };
            if tag.first() == Some(&b'#') {
                fields.push(tag_mark(list.field(), scope, &tag));
            }
            for field in fields {
                store
                    .set_shared_async(SharedHash::Directory, &field, None)
                    .await?;
            }
            was
        }
    };
    controls::bump_epoch();
    let action = match list {
        List::Safe => "unsafelist",
        List::Block => "unblock",
    };
    let change = Change::new(actor, action, &named, scope)
        .detail(if existed { "lifted" } else { "was not listed" })
        .reason(reason);
    let at = store.clock_ms_async().await?;
    audit::append(store, change, at).await?;
    Ok(existed)
}

/// [`Admin::entries`]'s one definition.
pub(super) async fn list_entries(
    store: &dyn AsyncControlStore,
    now: Option<f64>,
) -> Result<Vec<Entry>> {
    let now_ms = now_ms(store, now).await?;
    let mut out = Vec::new();
    for (hash, network) in [(SharedHash::Directory, false), (SharedHash::Nets, true)] {
        for (field, value) in store.shared_async(hash).await? {
            let Some((kind, scope, target, by_tag)) = unmark(&field) else {
                continue;
            };
            let Ok(value) = String::from_utf8(value) else {
                continue;
            };
            let scope = scope.to_owned();
            let entry = match kind {
                Field::Safe | Field::Block => match Listing::decode(&value) {
                    Some(l) if l.stands_at(now_ms) => Entry {
                        field: kind,
                        target: target.to_vec(),
                        network,
                        by_tag,
                        until_ms: Some(l.until_ms),
                        detail: l.reason,
                        scope,
                    },
                    _ => {
                        // lapsed: forget it (a lapsed address entry changes nothing held)
                        if hash == SharedHash::Directory {
                            store.set_shared_async(hash, &field, None).await?;
                        }
                        continue;
                    }
                },
                Field::Tier => Entry {
                    field: kind,
                    target: target.to_vec(),
                    network,
                    by_tag,
                    until_ms: None,
                    detail: value,
                    scope,
                },
                Field::Override => Entry {
                    field: kind,
                    target: target.to_vec(),
                    network,
                    by_tag,
                    until_ms: None,
                    detail: controls::decode_rules(&value).map_or(value, |rules| rules.to_string()),
                    scope,
                },
            };
            out.push(entry);
        }
    }
    out.sort_by(|a, b| {
        (a.network, &a.target, a.field.code(), &a.scope).cmp(&(
            b.network,
            &b.target,
            b.field.code(),
            &b.scope,
        ))
    });
    Ok(out)
}

/// The key an operator named (`None` when named by its tag only) and its
/// tag: `given` is the key itself, or with `tag` its stored form
/// ([`crate::controls::stored_form`]).
pub(super) fn named_key(given: &[u8], tag: bool) -> Result<(Option<Vec<u8>>, Vec<u8>)> {
    if !tag {
        return Ok((Some(given.to_vec()), key_tag(given)));
    }
    match Target::stored(given)? {
        Target::Key(key) => {
            let tag = key_tag(&key);
            Ok((Some(key), tag))
        }
        other => Ok((None, other.key_tag().unwrap_or_default())),
    }
}

/// [`Admin::inspect_in`]'s one definition.
pub(super) async fn inspect_key(
    store: &dyn AsyncControlStore,
    given: &[u8],
    tag: bool,
    scope: &str,
    now: Option<f64>,
) -> Result<Inspection> {
    check_scope(scope)?;
    let (key, tag) = named_key(given, tag)?;
    let key = key.as_deref().unwrap_or_default();
    let now_ms = now_ms(store, now).await?;
    let record = Record::decode(&store.record_async(&tag, "").await?, now_ms);
    let scope_block = match scope {
        "" => None,
        scope => Record::decode(&store.record_async(&tag, scope).await?, now_ms).block,
    };
    let address = match std::str::from_utf8(key).ok().and_then(|k| k.parse().ok()) {
        Some(ip) => {
            let version = store.controls_version_async().await?;
            let shared = store::controls::load_shared(store, version).await?;
            shared
                .judge_ip(ip, now_ms)
                .map(|(list, listing)| (list, listing.clone()))
        }
        None => None,
    };
    Ok(Inspection {
        record,
        address,
        scope: scope.to_owned(),
        scope_block,
        now_ms,
        leases: Vec::new(),
    })
}

/// [`super::Admin::top_denied`]'s one definition, at the store's time.
pub(super) async fn top_denied(
    store: &dyn AsyncControlStore,
    window_s: u64,
) -> Result<crate::denials::Top> {
    let now_ms = store.clock_ms_async().await?;
    crate::denials::top(store, window_s, now_ms).await
}
