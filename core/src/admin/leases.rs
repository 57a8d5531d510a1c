//! What operators see and do of a key's leases (its in-flight rule's
//! slots, see [`crate::in_flight`]): list them, and release one a holder
//! hangs on to, the release recorded in the audit trail.

use super::Admin;
use crate::audit::Change;
use crate::error::{Error, Result};
use crate::in_flight::{Held, LeaseCall};
use crate::keys::{check_scope, key_tag};

impl Admin {
    /// The live leases of `key` in `scope` (a limiter's scope; "" for
    /// none): (id, lapse time in ms) pairs; each id tells when it was taken
    /// ([`crate::in_flight::taken_at_of`]).
    pub fn leases(&self, key: &[u8], scope: &str) -> Result<Vec<Held>> {
        check_scope(scope)?;
        self.store
            .leases(&key_tag(key), scope, LeaseCall::List, None)
    }

    /// [`Admin::leases`], awaited.
    #[cfg(feature = "async")]
    pub async fn leases_async(&self, key: &[u8], scope: &str) -> Result<Vec<Held>> {
        check_scope(scope)?;
        let tag = key_tag(key);
        match self.store.as_async() {
            Some(log) => log.leases_async(&tag, scope, LeaseCall::List, None).await,
            None => self.store.leases(&tag, scope, LeaseCall::List, None),
        }
    }

    /// Releases `key`'s lease `id` in `scope` (a holder that hangs), with a
    /// reason: whether it was held. A release is recorded in the audit
    /// trail (action `release`, the lease's id as its detail).
    pub fn release_lease(&self, key: &[u8], scope: &str, id: &str, reason: &str) -> Result<bool> {
        let (tag, change) = self.lease_release(key, scope, id, reason)?;
        let gone = self
            .store
            .leases(&tag, scope, LeaseCall::Release(id), None)?;
        if gone.is_empty() {
            return Ok(false);
        }
        let now_ms = self.store.clock_ms()?;
        self.record(change, now_ms)?;
        Ok(true)
    }

    /// [`Admin::release_lease`], awaited.
    #[cfg(feature = "async")]
    pub async fn release_lease_async(
        &self,
        key: &[u8],
        scope: &str,
        id: &str,
        reason: &str,
    ) -> Result<bool> {
        let (tag, change) = self.lease_release(key, scope, id, reason)?;
        let call = LeaseCall::Release(id);
        let gone = match self.store.as_async() {
            Some(log) => log.leases_async(&tag, scope, call, None).await?,
            None => self.store.leases(&tag, scope, call, None)?,
        };
        if gone.is_empty() {
            return Ok(false);
        }
        let calls = self.awaited();
        let now_ms = crate::store::AsyncControlStore::clock_ms_async(&calls).await?;
        crate::audit::append(&calls, change, now_ms).await?;
        Ok(true)
    }

    /// A release's arguments checked: the key's tag, and the change to record.
    fn lease_release(
        &self,
        key: &[u8],
        scope: &str,
        id: &str,
        reason: &str,
    ) -> Result<(Vec<u8>, Change)> {
        check_scope(scope)?;
        if key.is_empty() || id.is_empty() {
            return Err(Error::config("a release names a key and a lease id"));
        }
        let change = Change::new(&self.actor, "release", key, scope)
            .detail(id)
            .reason(reason);
        Ok((key_tag(key), change))
    }
}
