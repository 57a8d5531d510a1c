//! [`Admin`]: what operators change while the application runs — safelist
//! and blocklist entries, a key's tier or override, the global switches —
//! and what they read back (`list`, `inspect`). The command-line tool, the
//! Django commands and admin page, and `Ratekeeper::Admin` all call this.
//! What an event loop awaits (`add_with_async`...) is the same definition as
//! what a thread blocks on (`calls`), made over the store's awaitable calls
//! ([`ControlCalls`]). Every change is appended to the audit trail
//! ([`crate::audit`]) with who made it: the admin's actor.

mod calls;
mod leases;

use self::calls::{add_entry, inspect_key, list_entries, named_key, remove_entry, top_denied};
use crate::audit::{self, Change};
use crate::controls::encoding::mark;
pub use crate::controls::Entry;
use crate::controls::TargetOptions;
use crate::controls::{self, encode_rules, Field, List, Listing, Record, SharedHash, Switches};
use crate::decision::Decision;
use crate::denials::Top;
use crate::error::{Error, Result};
use crate::keys::key_tag;
use crate::rule::RuleSet;
use crate::store::{self, in_place, ControlCalls, Mode, ModuleUse, Request, Store, StoreOptions};
use std::sync::Arc;

/// The style sheet of the operations consoles (the Django page and
/// `Ratekeeper::Web`), one for both: `ratekeeper.CONSOLE_STYLE`,
/// `Ratekeeper::CONSOLE_STYLE`.
pub const CONSOLE_STYLE: &str = include_str!("console.css");

/// The `Content-Security-Policy` of every response of the operations
/// consoles (sent with `X-Frame-Options: DENY`), one for both:
/// `ratekeeper.CONSOLE_CSP`, `Ratekeeper::CONSOLE_CSP`. The pages load
/// nothing, run no script, style themselves inline and post to themselves.
pub const CONSOLE_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'";

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
    /// The key's live leases in `scope` (id, lapse time in ms): the slots
    /// of an in-flight rule it holds.
    pub leases: Vec<crate::in_flight::Held>,
}

/// Changes and reads the controls of one store (and prefix), each change
/// recorded as its actor's.
#[derive(Clone)]
pub struct Admin {
    store: Arc<dyn Store>,
    /// Who makes the changes, as the audit trail names them ("" for none given).
    actor: String,
}

impl Admin {
    /// Controls kept in `store`.
    pub fn new(store: Arc<dyn Store>) -> Admin {
        Admin {
            store,
            actor: String::new(),
        }
    }

    /// This admin, its changes recorded as `actor`'s (the signed-in user of
    /// an admin page, the OS user of the command line).
    pub fn with_actor(mut self, actor: &str) -> Admin {
        self.actor = actor.to_owned();
        self
    }

    /// Who this admin's changes are recorded as.
    pub fn actor(&self) -> &str {
        &self.actor
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

    fn blocking(&self) -> ControlCalls<'_> {
        ControlCalls::blocking(&*self.store)
    }

    #[cfg(feature = "async")]
    fn awaited(&self) -> ControlCalls<'_> {
        ControlCalls::awaited(&*self.store)
    }

    /// Puts `target` (a key, an address or a CIDR range, read as
    /// [`Target::given`](crate::controls::Target::given) reads it with the default options) on `list` for
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
            &self.actor,
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
            &self.actor,
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
            force: true,
            ..TargetOptions::default()
        };
        self.remove_with(list, target, any_width, "", "")
    }

    /// [`Admin::remove`], with `options` saying how to read the target, a
    /// key's entry in `scope` ("": its own, which holds everywhere), and why.
    pub fn remove_with(
        &self,
        list: List,
        target: &[u8],
        options: TargetOptions,
        scope: &str,
        reason: &str,
    ) -> Result<bool> {
        let calls = self.blocking();
        in_place(remove_entry(
            &calls,
            &self.actor,
            list,
            target,
            options,
            scope,
            reason,
        ))
    }

    /// [`Admin::remove_with`], awaited.
    #[cfg(feature = "async")]
    pub async fn remove_with_async(
        &self,
        list: List,
        target: &[u8],
        options: TargetOptions,
        scope: &str,
        reason: &str,
    ) -> Result<bool> {
        let calls = self.awaited();
        remove_entry(&calls, &self.actor, list, target, options, scope, reason).await
    }

    /// Stores `tier` for `key` (`None` removes it): checks of the key by a
    /// limiter that has this tier use its rules from the next check on.
    pub fn set_tier(&self, key: &[u8], tier: Option<&str>, reason: &str) -> Result<()> {
        if let Some(tier) = tier {
            controls::check_tier_name(tier)?;
        }
        self.set_assignment(key, Field::Tier, tier, tier, reason)
    }

    /// Stores `rules` as `key`'s own (`None` restores the configured rules),
    /// from the next check on, in every process.
    pub fn set_override(&self, key: &[u8], rules: Option<&RuleSet>, reason: &str) -> Result<()> {
        let encoded = rules.map(encode_rules);
        let shown = rules.map(RuleSet::to_string);
        self.set_assignment(
            key,
            Field::Override,
            encoded.as_deref(),
            shown.as_deref(),
            reason,
        )
    }

    /// Sets (or clears) a key's tier or override, recorded as `shown`.
    fn set_assignment(
        &self,
        key: &[u8],
        field: Field,
        value: Option<&str>,
        shown: Option<&str>,
        reason: &str,
    ) -> Result<()> {
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
        controls::bump_epoch();
        let change = Change::new(&self.actor, field.name(), key, "")
            .detail(shown.unwrap_or("cleared"))
            .reason(reason);
        self.record(change, now_ms)
    }

    /// Appends `change`, made at `now_ms`, to the audit trail.
    fn record(&self, change: Change, now_ms: u64) -> Result<()> {
        in_place(audit::append(&self.blocking(), change, now_ms))
    }

    /// The newest `limit` changes operators made (1 to
    /// [`audit::KEEP`]), newest first: who, when, what and why.
    pub fn history(&self, limit: usize) -> Result<Vec<Change>> {
        in_place(audit::read(&self.blocking(), limit))
    }

    /// [`Admin::history`], awaited.
    #[cfg(feature = "async")]
    pub async fn history_async(&self, limit: usize) -> Result<Vec<Change>> {
        audit::read(&self.awaited(), limit).await
    }

    /// What `key` has used of each of `rules` in `scope` ("" for none), as a
    /// limiter of those rules would see its log now, whatever its listings,
    /// tier or override (an operator's look at a key, logging nothing).
    pub fn usage(&self, key: &[u8], scope: &str, rules: &RuleSet) -> Result<Decision> {
        self.usage_with(key, false, scope, rules)
    }

    /// [`Admin::usage`] of the key `key` names: the key itself, or with
    /// `tag` its stored form ([`crate::controls::stored_form`]).
    pub fn usage_with(
        &self,
        key: &[u8],
        tag: bool,
        scope: &str,
        rules: &RuleSet,
    ) -> Result<Decision> {
        crate::keys::check_scope(scope)?;
        if key.is_empty() {
            return Err(Error::config("the key is empty"));
        }
        let (_, tag) = named_key(key, tag)?;
        let request = Request {
            scope,
            ..Request::plain(&tag, rules, 1, None, Mode::Peek)
        };
        let seen = self.store.apply(&request)?;
        Ok(Decision::from_observation(rules, 1, &seen, false))
    }

    /// Who was limited over the last `window_s` seconds (1 to
    /// [`crate::denials::MAX_WINDOW`]), by every process on this store: the most
    /// denied keys, client addresses and their networks, and the denials
    /// of each minute. A process's denials reach the store within its
    /// `controls_refresh` (at once on the memory store).
    pub fn top_denied(&self, window_s: u64) -> Result<Top> {
        in_place(top_denied(&self.blocking(), window_s))
    }

    /// [`Admin::top_denied`], awaited.
    #[cfg(feature = "async")]
    pub async fn top_denied_async(&self, window_s: u64) -> Result<Top> {
        top_denied(&self.awaited(), window_s).await
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
        self.inspect_with(key, false, scope, now)
    }

    /// [`Admin::inspect_in`] of the key `key` names: the key itself, or
    /// with `tag` its stored form ([`crate::controls::stored_form`]).
    pub fn inspect_with(
        &self,
        key: &[u8],
        tag: bool,
        scope: &str,
        now: Option<f64>,
    ) -> Result<Inspection> {
        let mut seen = in_place(inspect_key(&self.blocking(), key, tag, scope, now))?;
        let (_, tag) = named_key(key, tag)?;
        seen.leases = self.store.leases(
            &tag,
            scope,
            crate::in_flight::LeaseCall::List,
            Some(seen.now_ms),
        )?;
        Ok(seen)
    }

    /// [`Admin::inspect_in`], awaited.
    #[cfg(feature = "async")]
    pub async fn inspect_in_async(
        &self,
        key: &[u8],
        scope: &str,
        now: Option<f64>,
    ) -> Result<Inspection> {
        self.inspect_with_async(key, false, scope, now).await
    }

    /// [`Admin::inspect_with`], awaited.
    #[cfg(feature = "async")]
    pub async fn inspect_with_async(
        &self,
        key: &[u8],
        tag: bool,
        scope: &str,
        now: Option<f64>,
    ) -> Result<Inspection> {
        let mut seen = inspect_key(&self.awaited(), key, tag, scope, now).await?;
        let (_, tag) = named_key(key, tag)?;
        let (list, at) = (crate::in_flight::LeaseCall::List, Some(seen.now_ms));
        seen.leases = match self.store.as_async() {
            Some(log) => log.leases_async(&tag, scope, list, at).await?,
            None => self.store.leases(&tag, scope, list, at)?,
        };
        Ok(seen)
    }

    /// The global switches as stored.
    pub fn switches(&self) -> Result<Switches> {
        Ok(Switches::from_fields(
            &self.store.shared(SharedHash::Switches)?,
        ))
    }

    /// Turns limiting on or off everywhere (processes see it within their
    /// controls refresh; this one at once).
    pub fn set_enabled(&self, enabled: bool, reason: &str) -> Result<Switches> {
        self.set_switches(Some(enabled), None, None, reason)
    }

    /// Turns shadow mode (decide and report, never deny) on or off.
    pub fn set_shadow(&self, shadow: bool, reason: &str) -> Result<Switches> {
        self.set_switches(None, Some(shadow), None, reason)
    }

    /// Multiplies every configured and tier limit (not overrides) by `m`
    /// (above 0, at most 1000; 1 restores them).
    pub fn set_multiplier(&self, m: f64, reason: &str) -> Result<Switches> {
        self.set_switches(None, None, Some(m), reason)
    }

    /// Changes the switches given (`None` leaves one as it is; the multiplier
    /// is checked first, so a bad one changes nothing), records the change
    /// once, and returns them all.
    pub fn set_switches(
        &self,
        enabled: Option<bool>,
        shadow: Option<bool>,
        multiplier: Option<f64>,
        reason: &str,
    ) -> Result<Switches> {
        let flag = |on: bool| if on { "1" } else { "0" };
        let mut changed: Vec<(&str, String)> = Vec::new();
        if let Some(m) = multiplier {
            if !controls::valid_multiplier(m) {
                return Err(Error::config(format!(
                    "invalid multiplier {m}: give a number above 0 and at most {}",
                    controls::MAX_MULTIPLIER
                )));
            }
            changed.push(("multiplier", m.to_string()));
        }
        if let Some(enabled) = enabled {
            changed.push(("enabled", flag(enabled).to_owned()));
        }
        if let Some(shadow) = shadow {
            changed.push(("shadow", flag(shadow).to_owned()));
        }
        for (name, value) in &changed {
            self.store.set_shared(
                SharedHash::Switches,
                name.as_bytes(),
                Some(value.as_bytes()),
            )?;
        }
        if !changed.is_empty() {
            controls::bump_epoch();
            let detail: Vec<String> = changed.iter().map(|(n, v)| format!("{n}={v}")).collect();
            let change = Change::new(&self.actor, "switches", b"", "")
                .detail(&detail.join(" "))
                .reason(reason);
            self.record(change, self.store.clock_ms()?)?;
        }
        self.switches()
    }
}
