//! [`Admin`]: what operators change while the application runs — safelist
//! and blocklist entries, a key's tier or override, the global switches —
//! and what they read back (`list`, `inspect`). The command-line tool, the
//! Django commands and admin page, and `Ratekeeper::Admin` all call this.

use crate::error::{Error, Result};
use crate::keys::key_tag;
use crate::policy::encoding::mark;
pub use crate::policy::Entry;
use crate::policy::{
    self, check_listing, encode_rules, Field, List, Listing, Record, SharedHash, Switches, Target,
    TargetOptions,
};
use crate::rule::RuleSet;
use crate::store::{self, ModuleUse, Store, StoreOptions};
use crate::time::now_to_ms;
use std::sync::Arc;

/// What is stored for one key or address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The key's record (standing listings, tier, override).
    pub record: Record,
    /// When the key is an address: the listing of it or a range holding it.
    pub address: Option<(List, Listing)>,
    /// The store's time of the inspection (ms).
    pub now_ms: u64,
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

    fn now_ms(&self, now: Option<f64>) -> Result<u64> {
        match now {
            Some(now) => now_to_ms(now),
            None => self.store.clock_ms(),
        }
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
            ttl_seconds,
            reason,
            now,
        )
    }

    /// [`Admin::add`], with `options` saying how to read the target (an
    /// exact key; a range wider than a /8 allowed).
    pub fn add_with(
        &self,
        list: List,
        target: &[u8],
        options: TargetOptions,
        ttl_seconds: Option<f64>,
        reason: &str,
        now: Option<f64>,
    ) -> Result<Entry> {
        let target = Target::given(target, options)?;
        let ttl_ms = check_listing(ttl_seconds, reason)?;
        let now_ms = self.now_ms(now)?;
        store::policies::put_target(
            &*self.store,
            list,
            target,
            now_ms + ttl_ms,
            reason,
            Some(now_ms),
        )
    }

    /// Takes `target` off `list`; returns whether it was on it (lapsed or not).
    pub fn remove(&self, list: List, target: &[u8]) -> Result<bool> {
        let any_width = TargetOptions {
            key: false,
            force: true,
        };
        self.remove_with(list, target, any_width)
    }

    /// [`Admin::remove`], with `options` saying how to read the target.
    pub fn remove_with(&self, list: List, target: &[u8], options: TargetOptions) -> Result<bool> {
        let existed = match Target::given(target, options)? {
            Target::Net(net) => self.store.set_shared(
                SharedHash::Nets,
                &mark(list.field(), net.to_string().as_bytes()),
                None,
            )?,
            Target::Key(key) => {
                let tag = key_tag(&key);
                let now_ms = self.store.clock_ms()?;
                let slot = if list == List::Safe { 0 } else { 1 };
                let was = self.store.record(&tag)?[slot].is_some();
                self.store.set_record(&tag, list.field(), None, now_ms)?;
                self.store
                    .set_shared(SharedHash::Directory, &mark(list.field(), &key), None)?;
                was
            }
        };
        policy::bump_epoch();
        Ok(existed)
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
        self.store.set_record(&key_tag(key), field, value, now_ms)?;
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
        let now_ms = self.now_ms(now)?;
        let mut out = Vec::new();
        for (hash, network) in [(SharedHash::Directory, false), (SharedHash::Nets, true)] {
            for (field, value) in self.store.shared(hash)? {
                let Some((&code, target)) = field.split_first() else {
                    continue;
                };
                let (Some(kind), Ok(value)) = (Field::from_code(code), String::from_utf8(value))
                else {
                    continue;
                };
                let entry = match kind {
                    Field::Safe | Field::Block => match Listing::decode(&value) {
                        Some(l) if l.stands_at(now_ms) => Entry {
                            field: kind,
                            target: target.to_vec(),
                            network,
                            until_ms: Some(l.until_ms),
                            detail: l.reason,
                        },
                        _ => {
                            // lapsed: forget it (a lapsed address entry changes nothing held)
                            if hash == SharedHash::Directory {
                                self.store.set_shared(hash, &field, None)?;
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
                    },
                    Field::Override => Entry {
                        field: kind,
                        target: target.to_vec(),
                        network,
                        until_ms: None,
                        detail: policy::decode_rules(&value)
                            .map_or(value, |rules| rules.to_string()),
                    },
                };
                out.push(entry);
            }
        }
        out.sort_by(|a, b| {
            (a.network, &a.target, a.field.code()).cmp(&(b.network, &b.target, b.field.code()))
        });
        Ok(out)
    }

    /// What is stored for `key`: its record, and for an address, how the
    /// address lists judge it.
    pub fn inspect(&self, key: &[u8], now: Option<f64>) -> Result<Inspection> {
        let now_ms = self.now_ms(now)?;
        let record = Record::decode(&self.store.record(&key_tag(key))?, now_ms);
        let address = match std::str::from_utf8(key).ok().and_then(|k| k.parse().ok()) {
            Some(ip) => {
                let version = self.store.policy_version()?;
                let shared = store::policies::load_shared(&*self.store, version)?;
                shared
                    .judge_ip(ip, now_ms)
                    .map(|(list, listing)| (list, listing.clone()))
            }
            None => None,
        };
        Ok(Inspection {
            record,
            address,
            now_ms,
        })
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
