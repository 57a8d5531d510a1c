//! [`Admin`]: what operators change while the application runs — safelist
//! and blocklist entries, a key's tier or override, the global switches —
//! and what they read back (`list`, `inspect`). The command-line tool, the
//! Django commands and admin page, and `Ratekeeper::Admin` all call this.
//! What an event loop awaits (`add_with_async`...) is the same definition as
//! what a thread blocks on, made over the store's awaitable calls
//! ([`PolicyCalls`]).

use crate::error::{Error, Result};
use crate::keys::check_scope;
use crate::keys::key_tag;
use crate::policy::encoding::{mark, scoped_mark, unmark};
pub use crate::policy::Entry;
use crate::policy::{
    self, check_listing, encode_rules, Field, List, Listing, Record, SharedHash, Switches, Target,
    TargetOptions,
};
use crate::rule::RuleSet;
use crate::store::{self, in_place, AsyncPolicyStore, ModuleUse, PolicyCalls, Store, StoreOptions};
use crate::time::now_to_ms;
use std::sync::Arc;

/// What is stored for one key or address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The key's record (standing listings, tier, override).
    pub record: Record,
    /// When the key is an address: the listing of it or a range holding it.
    pub address: Option<(List, Listing)>,
    /// The scope asked about ("" for none), and the ban the key earned there.
    pub scope: String,
    /// A standing ban of the key in `scope`.
    pub scope_block: Option<Listing>,
    /// The store's time of the inspection (ms).
    pub now_ms: u64,
}

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

/// Changes and reads the policies of one store (and prefix).
#[derive(Clone)]
pub struct Admin {
    store: Arc<dyn Store>,
}

impl Admin {
    /// Policies kept in `store`.
    pub fn new(store: Arc<dyn Store>) -> Admin {
        Admin { store }
    }

    /// Opens the store a URL names, with `prefix` as the limiters use it;
    /// `redis_module` as the limiters' option of that name (`auto`, `off`,
    /// `require`; None: auto).
    pub fn open(url: &str, prefix: &str, redis_module: Option<&str>) -> Result<Admin> {
        let options = StoreOptions {
            prefix: prefix.to_owned(),
            redis_module: redis_module.map_or(Ok(ModuleUse::Auto), str::parse)?,
            timeout: std::time::Duration::from_secs(2),
            connect_timeout: std::time::Duration::from_secs(2),
            pool_size: 2,
            ..StoreOptions::default()
        };
        Ok(Admin::new(store::open(url, &options)?))
    }

    /// The store.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    fn blocking(&self) -> PolicyCalls<'_> {
        PolicyCalls::blocking(&*self.store)
    }

    #[cfg(feature = "async")]
    fn awaited(&self) -> PolicyCalls<'_> {
        PolicyCalls::awaited(&*self.store)
    }

    /// Puts `target` (a key, an address or a CIDR range, read as
    /// [`Target::given`] reads it with the default options) on `list` for
    /// `ttl_seconds` (a week when `None`), with a reason. Replaces an entry
    /// already there; returns the entry made.
    pub fn add(
        &self,
        list: List,
        target: &[u8],
        ttl_seconds: Option<f64>,
        reason: &str,
        now: Option<f64>,
    ) -> Result<Entry> {
        self.add_with(
            list,
            target,
            TargetOptions::default(),
            "",
            ttl_seconds,
            reason,
            now,
        )
    }

    /// [`Admin::add`], with `options` saying how to read the target (an
    /// exact key; a range wider than a /8 allowed), and a key listed in
    /// `scope` only ("": everywhere; an address or range is always listed
    /// everywhere, so a scope with one is refused).
    #[allow(clippy::too_many_arguments)]
    pub fn add_with(
        &self,
        list: List,
        target: &[u8],
        options: TargetOptions,
        scope: &str,
        ttl_seconds: Option<f64>,
        reason: &str,
        now: Option<f64>,
    ) -> Result<Entry> {
        let calls = self.blocking();
        in_place(add_entry(
            &calls,
            list,
            target,
            options,
            scope,
            ttl_seconds,
            reason,
            now,
        ))
    }

    /// [`Admin::add_with`], awaited.
    #[cfg(feature = "async")]
    #[allow(clippy::too_many_arguments)]
    pub async fn add_with_async(
        &self,
        list: List,
        target: &[u8],
        options: TargetOptions,
        scope: &str,
        ttl_seconds: Option<f64>,
        reason: &str,
        now: Option<f64>,
    ) -> Result<Entry> {
        let calls = self.awaited();
        add_entry(
            &calls,
            list,
            target,
            options,
            scope,
            ttl_seconds,
            reason,
            now,
        )
        .await
    }

    /// Takes `target` off `list`; returns whether it was on it (lapsed or not).
    pub fn remove(&self, list: List, target: &[u8]) -> Result<bool> {
        let any_width = TargetOptions {
            key: false,
            force: true,
        };
        self.remove_with(list, target, any_width, "")
    }

    /// [`Admin::remove`], with `options` saying how to read the target, and
    /// a key's entry in `scope` ("": its own, which holds everywhere).
    pub fn remove_with(
        &self,
        list: List,
        target: &[u8],
        options: TargetOptions,
        scope: &str,
    ) -> Result<bool> {
        in_place(remove_entry(&self.blocking(), list, target, options, scope))
    }

    /// [`Admin::remove_with`], awaited.
    #[cfg(feature = "async")]
    pub async fn remove_with_async(
        &self,
        list: List,
        target: &[u8],
        options: TargetOptions,
        scope: &str,
    ) -> Result<bool> {
        remove_entry(&self.awaited(), list, target, options, scope).await
    }

    /// Stores `tier` for `key` (`None` removes it): checks of the key by a
    /// limiter that has this tier use its rules from the next check on.
    pub fn set_tier(&self, key: &[u8], tier: Option<&str>) -> Result<()> {
        if let Some(tier) = tier {
            policy::check_tier_name(tier)?;
        }
        self.set_assignment(key, Field::Tier, tier)
    }

    /// Stores `rules` as `key`'s own (`None` restores the configured rules),
    /// from the next check on, in every process.
    pub fn set_override(&self, key: &[u8], rules: Option<&RuleSet>) -> Result<()> {
        let encoded = rules.map(encode_rules);
        self.set_assignment(key, Field::Override, encoded.as_deref())
    }

    fn set_assignment(&self, key: &[u8], field: Field, value: Option<&str>) -> Result<()> {
        if key.is_empty() {
            return Err(Error::config("the key is empty"));
        }
        let now_ms = self.store.clock_ms()?;
        self.store
            .set_record(&key_tag(key), "", field, value, now_ms)?;
        self.store.set_shared(
            SharedHash::Directory,
            &mark(field, key),
            value.map(str::as_bytes),
        )?;
        policy::bump_epoch();
        Ok(())
    }

    /// Every standing listing, tier and override, keys first, each group by target.
    pub fn entries(&self, now: Option<f64>) -> Result<Vec<Entry>> {
        in_place(list_entries(&self.blocking(), now))
    }

    /// [`Admin::entries`], awaited.
    #[cfg(feature = "async")]
    pub async fn entries_async(&self, now: Option<f64>) -> Result<Vec<Entry>> {
        list_entries(&self.awaited(), now).await
    }

    /// What is stored for `key`: its record, and for an address, how the
    /// address lists judge it.
    pub fn inspect(&self, key: &[u8], now: Option<f64>) -> Result<Inspection> {
        self.inspect_in(key, "", now)
    }

    /// [`Admin::inspect`], with the ban the key earned in `scope` ("": none asked).
    pub fn inspect_in(&self, key: &[u8], scope: &str, now: Option<f64>) -> Result<Inspection> {
        in_place(inspect_key(&self.blocking(), key, scope, now))
    }

    /// [`Admin::inspect_in`], awaited.
    #[cfg(feature = "async")]
    pub async fn inspect_in_async(
        &self,
        key: &[u8],
        scope: &str,
        now: Option<f64>,
    ) -> Result<Inspection> {
        inspect_key(&self.awaited(), key, scope, now).await
    }

    /// The global switches as stored.
    pub fn switches(&self) -> Result<Switches> {
        Ok(Switches::from_fields(
            &self.store.shared(SharedHash::Switches)?,
        ))
    }

    /// Turns limiting on or off everywhere (processes see it within their
    /// policy refresh; this one at once).
    pub fn set_enabled(&self, enabled: bool) -> Result<Switches> {
        self.set_switch("enabled", if enabled { "1" } else { "0" })
    }

    /// Turns shadow mode (decide and report, never deny) on or off.
    pub fn set_shadow(&self, shadow: bool) -> Result<Switches> {
        self.set_switch("shadow", if shadow { "1" } else { "0" })
    }

    /// Multiplies every configured and tier limit (not overrides) by `m`
    /// (above 0, at most 1000; 1 restores them).
    pub fn set_multiplier(&self, m: f64) -> Result<Switches> {
        if !policy::valid_multiplier(m) {
            return Err(Error::config(format!(
                "invalid multiplier {m}: give a number above 0 and at most {}",
                policy::MAX_MULTIPLIER
            )));
        }
        self.set_switch("multiplier", &m.to_string())
    }

    /// Changes the switches given (`None` leaves one as it is; the multiplier
    /// is checked first, so a bad one changes nothing) and returns them all.
    pub fn set_switches(
        &self,
        enabled: Option<bool>,
        shadow: Option<bool>,
        multiplier: Option<f64>,
    ) -> Result<Switches> {
        if let Some(m) = multiplier {
            self.set_multiplier(m)?;
        }
        if let Some(enabled) = enabled {
            self.set_enabled(enabled)?;
        }
        if let Some(shadow) = shadow {
            self.set_shadow(shadow)?;
        }
        self.switches()
    }

    fn set_switch(&self, name: &str, value: &str) -> Result<Switches> {
        self.store.set_shared(
            SharedHash::Switches,
            name.as_bytes(),
            Some(value.as_bytes()),
        )?;
        policy::bump_epoch();
        self.switches()
    }
}

/// The store's time `now` names (its clock when `None`), in ms.
async fn now_ms(store: &dyn AsyncPolicyStore, now: Option<f64>) -> Result<u64> {
    match now {
        Some(now) => now_to_ms(now),
        None => store.clock_ms_async().await,
    }
}

/// [`Admin::add_with`]'s one definition.
#[allow(clippy::too_many_arguments)]
async fn add_entry(
    store: &dyn AsyncPolicyStore,
    list: List,
    target: &[u8],
    options: TargetOptions,
    scope: &str,
    ttl_seconds: Option<f64>,
    reason: &str,
    now: Option<f64>,
) -> Result<Entry> {
    let target = scoped_target(list, target, options, scope)?;
    let ttl_ms = check_listing(ttl_seconds, reason)?;
    let now_ms = now_ms(store, now).await?;
    store::policies::put_target(
        store,
        list,
        target,
        scope,
        now_ms + ttl_ms,
        reason,
        Some(now_ms),
    )
    .await
}

/// [`Admin::remove_with`]'s one definition.
async fn remove_entry(
    store: &dyn AsyncPolicyStore,
    list: List,
    target: &[u8],
    options: TargetOptions,
    scope: &str,
) -> Result<bool> {
    let existed = match scoped_target(list, target, options, scope)? {
        Target::Net(net) => {
            store
                .set_shared_async(
                    SharedHash::Nets,
                    &mark(list.field(), net.to_string().as_bytes()),
                    None,
                )
                .await?
        }
        Target::Key(key) => {
            let tag = key_tag(&key);
            let now_ms = store.clock_ms_async().await?;
            let slot = if list == List::Safe { 0 } else { 1 };
            let was = store.record_async(&tag, scope).await?[slot].is_some();
            store
                .set_record_async(&tag, scope, list.field(), None, now_ms)
                .await?;
            store
                .set_shared_async(
                    SharedHash::Directory,
                    &scoped_mark(list.field(), scope, &key),
                    None,
                )
                .await?;
            was
        }
    };
    policy::bump_epoch();
    Ok(existed)
}

/// [`Admin::entries`]'s one definition.
async fn list_entries(store: &dyn AsyncPolicyStore, now: Option<f64>) -> Result<Vec<Entry>> {
    let now_ms = now_ms(store, now).await?;
    let mut out = Vec::new();
    for (hash, network) in [(SharedHash::Directory, false), (SharedHash::Nets, true)] {
        for (field, value) in store.shared_async(hash).await? {
            let Some((kind, scope, target)) = unmark(&field) else {
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
                    until_ms: None,
                    detail: value,
                    scope,
                },
                Field::Override => Entry {
                    field: kind,
                    target: target.to_vec(),
                    network,
                    until_ms: None,
                    detail: policy::decode_rules(&value).map_or(value, |rules| rules.to_string()),
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
/// [`Admin::inspect_in`]'s one definition.
async fn inspect_key(
    store: &dyn AsyncPolicyStore,
    key: &[u8],
    scope: &str,
    now: Option<f64>,
) -> Result<Inspection> {
    check_scope(scope)?;
    let now_ms = now_ms(store, now).await?;
    let tag = key_tag(key);
    let record = Record::decode(&store.record_async(&tag, "").await?, now_ms);
    let scope_block = match scope {
        "" => None,
        scope => Record::decode(&store.record_async(&tag, scope).await?, now_ms).block,
    };
    let address = match std::str::from_utf8(key).ok().and_then(|k| k.parse().ok()) {
        Some(ip) => {
            let version = store.policy_version_async().await?;
            let shared = store::policies::load_shared(store, version).await?;
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
    })
}
