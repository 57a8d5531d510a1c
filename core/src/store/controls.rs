//! The controls in a store, read and written as their model says: the
//! shared controls a process holds, and the one way a safelist or blocklist
//! entry is written, whether an operator makes it (`Admin`) or a limiter's
//! fail2ban ban does. Written once over an [`AsyncControlStore`]: awaited
//! as they are, or made in place ([`super::in_place`]) by a blocking caller.

use super::AsyncControlStore;
use crate::controls::encoding::{mark, scoped_mark, tag_mark, unmark};
use crate::controls::{bump_epoch, Entry, Field, List, Listing, Shared, SharedHash, Target};
use crate::error::Result;
use crate::keys::key_tag;

/// Reads the shared controls (switches, address lists) from `store` at `version`.
pub async fn load_shared(store: &dyn AsyncControlStore, version: u64) -> Result<Shared> {
    Ok(Shared::from_hashes(
        version,
        &store.shared_async(SharedHash::Nets).await?,
        &store.shared_async(SharedHash::Switches).await?,
    ))
}

/// Puts `target`, as it is said to be, on `list` until `until_ms`, with
/// `reason`; `now_ms` (the store's clock when `None`) judges which address
/// entries have lapsed and which record fields still stand. A key is listed
/// in `scope` (its checks by limiters of that scope only; "" everywhere);
/// an address or range always everywhere. Replaces an entry already there
/// and returns the entry made.
pub async fn put_target(
    store: &dyn AsyncControlStore,
    list: List,
    target: Target,
    scope: &str,
    until_ms: u64,
    reason: &str,
    now_ms: Option<u64>,
) -> Result<Entry> {
    let listing = Listing {
        until_ms,
        reason: reason.to_owned(),
    };
    let stored = listing.encode();
    let now_ms = match now_ms {
        Some(now_ms) => now_ms,
        None => store.clock_ms_async().await?,
    };
    let (target, network, by_tag, scope) = match target {
        Target::Net(net) => {
            let text = net.to_string();
            prune_nets(store, now_ms).await?;
            store
                .set_shared_async(
                    SharedHash::Nets,
                    &mark(list.field(), text.as_bytes()),
                    Some(stored.as_bytes()),
                )
                .await?;
            (text.into_bytes(), true, false, "")
        }
        Target::Key(key) => {
            let tag = key_tag(&key);
            store
                .set_record_async(&tag, scope, list.field(), Some(&stored), now_ms)
                .await?;
            store
                .set_shared_async(
                    SharedHash::Directory,
                    &scoped_mark(list.field(), scope, &key),
                    Some(stored.as_bytes()),
                )
                .await?;
            if tag != key {
                // (an entry made by its tag before is this one now)
                store
                    .set_shared_async(
                        SharedHash::Directory,
                        &tag_mark(list.field(), scope, &tag),
                        None,
                    )
                    .await?;
            }
            (key, false, false, scope)
        }
        Target::Tag(tag) => {
            store
                .set_record_async(&tag, scope, list.field(), Some(&stored), now_ms)
                .await?;
            // the entry of the key itself, when the directory holds one, is
            // this one (it shows the key); else an entry of the tag
            let keyed = keys_of_tag(store, list.field(), scope, &tag).await?;
            for field in &keyed {
                store
                    .set_shared_async(SharedHash::Directory, field, Some(stored.as_bytes()))
                    .await?;
            }
            if keyed.is_empty() {
                store
                    .set_shared_async(
                        SharedHash::Directory,
                        &tag_mark(list.field(), scope, &tag),
                        Some(stored.as_bytes()),
                    )
                    .await?;
            }
            (tag, false, true, scope)
        }
    };
    bump_epoch();
    Ok(Entry {
        field: list.field(),
        target,
        network,
        by_tag,
        until_ms: Some(until_ms),
        detail: listing.reason,
        scope: scope.to_owned(),
    })
}

/// The directory fields of `field` in `scope` that name a key (not its
/// tag) whose tag is `tag`: a key listed by itself, then named by its tag.
pub async fn keys_of_tag(
    store: &dyn AsyncControlStore,
    field: Field,
    scope: &str,
    tag: &[u8],
) -> Result<Vec<Vec<u8>>> {
    Ok(store
        .shared_async(SharedHash::Directory)
        .await?
        .into_iter()
        .filter(|(name, _)| {
            unmark(name).is_some_and(|(kind, within, key, by_tag)| {
                kind == field && within == scope && !by_tag && key_tag(key) == tag
            })
        })
        .map(|(name, _)| name)
        .collect())
}

/// Drops lapsed address entries (so fail2ban bans do not pile up).
async fn prune_nets(store: &dyn AsyncControlStore, now_ms: u64) -> Result<()> {
    for (field, value) in store.shared_async(SharedHash::Nets).await? {
        let lapsed = std::str::from_utf8(&value)
            .ok()
            .and_then(Listing::decode)
            .is_none_or(|l| !l.stands_at(now_ms));
        if lapsed {
            store
                .set_shared_async(SharedHash::Nets, &field, None)
                .await?;
        }
    }
    Ok(())
}
