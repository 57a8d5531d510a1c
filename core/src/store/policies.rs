//! The policies in a store, read and written as the policy model says: the
//! shared policies a process holds, and the one way a safelist or blocklist
//! entry is written, whether an operator makes it (`Admin`) or a limiter's
//! fail2ban ban does.

use super::Store;
use crate::error::Result;
use crate::keys::key_tag;
use crate::policy::encoding::{mark, scoped_mark};
use crate::policy::{bump_epoch, Entry, List, Listing, Shared, SharedHash, Target};

/// Reads the shared policies (switches, address lists) from `store` at `version`.
pub fn load_shared(store: &dyn Store, version: u64) -> Result<Shared> {
    Ok(Shared::from_hashes(
        version,
        &store.shared(SharedHash::Nets)?,
        &store.shared(SharedHash::Switches)?,
    ))
}

/// Puts `target`, as it is said to be, on `list` until `until_ms`, with
/// `reason`; `now_ms` (the store's clock when `None`) judges which address
/// entries have lapsed and which record fields still stand. A key is listed
/// in `scope` (its checks by limiters of that scope only; "" everywhere);
/// an address or range always everywhere. Replaces an entry already there
/// and returns the entry made.
pub fn put_target(
    store: &dyn Store,
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
    let now_ms = now_ms.map_or_else(|| store.clock_ms(), Ok)?;
    let (target, network, scope) = match target {
        Target::Net(net) => {
            let text = net.to_string();
            prune_nets(store, now_ms)?;
            store.set_shared(
                SharedHash::Nets,
                &mark(list.field(), text.as_bytes()),
                Some(stored.as_bytes()),
            )?;
            (text.into_bytes(), true, "")
        }
        Target::Key(key) => {
            store.set_record(&key_tag(&key), scope, list.field(), Some(&stored), now_ms)?;
            store.set_shared(
                SharedHash::Directory,
                &scoped_mark(list.field(), scope, &key),
                Some(stored.as_bytes()),
            )?;
            (key, false, scope)
        }
    };
    bump_epoch();
    Ok(Entry {
        field: list.field(),
        target,
        network,
        until_ms: Some(until_ms),
        detail: listing.reason,
        scope: scope.to_owned(),
    })
}

/// Drops lapsed address entries (so fail2ban bans do not pile up).
fn prune_nets(store: &dyn Store, now_ms: u64) -> Result<()> {
    for (field, value) in store.shared(SharedHash::Nets)? {
        let lapsed = std::str::from_utf8(&value)
            .ok()
            .and_then(Listing::decode)
            .is_none_or(|l| !l.stands_at(now_ms));
        if lapsed {
            store.set_shared(SharedHash::Nets, &field, None)?;
        }
    }
    Ok(())
}
