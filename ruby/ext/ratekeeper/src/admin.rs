//! `Ratekeeper::Admin`'s native half: safelist and blocklist entries, a
//! key's tier or override, and the global switches, through the core's
//! `Admin`. lib/ratekeeper/admin.rb adds the keyword-argument methods;
//! entries and inspections come back as Hashes with Symbol keys.

use crate::convert;
use crate::errors::{guard, type_error};
use crate::limiter::run_core;
use magnus::{prelude::*, Error, RArray, RHash, Ruby, Value};
use ratekeeper_core as core;
use ratekeeper_core::policy::Listing;

#[magnus::wrap(class = "Ratekeeper::Admin", free_immediately, size)]
pub struct Admin {
    inner: core::Admin,
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

fn list(ruby: &Ruby, name: &str) -> Result<core::List, Error> {
    match name {
        "block" => Ok(core::List::Block),
        "safe" => Ok(core::List::Safe),
        other => Err(type_error(ruby, format!("unknown list {other:?}"))),
    }
}

fn entry_hash(ruby: &Ruby, entry: &core::Entry) -> Result<RHash, Error> {
    let out = ruby.hash_new();
    out.aset(ruby.to_symbol("kind"), entry.field.name())?;
    out.aset(
        ruby.to_symbol("target"),
        String::from_utf8_lossy(&entry.target).into_owned(),
    )?;
    out.aset(ruby.to_symbol("network"), entry.network)?;
    out.aset(ruby.to_symbol("expires_at"), entry.until_ms.map(seconds))?;
    out.aset(ruby.to_symbol("detail"), entry.detail.as_str())?;
    Ok(out)
}

fn listing_hash(ruby: &Ruby, listing: Option<&Listing>) -> Result<Option<RHash>, Error> {
    listing
        .map(|l| {
            let out = ruby.hash_new();
            out.aset(ruby.to_symbol("expires_at"), seconds(l.until_ms))?;
            out.aset(ruby.to_symbol("reason"), l.reason.as_str())?;
            Ok(out)
        })
        .transpose()
}

fn switches_hash(ruby: &Ruby, switches: core::Switches) -> Result<RHash, Error> {
    let out = ruby.hash_new();
    out.aset(ruby.to_symbol("enabled"), switches.enabled)?;
    out.aset(ruby.to_symbol("shadow"), switches.shadow)?;
    out.aset(ruby.to_symbol("multiplier"), switches.multiplier)?;
    Ok(out)
}

impl Admin {
    /// Wraps a core admin (for `Limiter#admin`).
    pub fn wrap(inner: core::Admin) -> Admin {
        Admin { inner }
    }

    /// `Admin._open(store, prefix)`.
    pub fn open(ruby: &Ruby, store: String, prefix: String) -> Result<Admin, Error> {
        Ok(Admin {
            inner: guard(ruby, || core::Admin::open(&store, &prefix))?,
        })
    }

    /// `_add(list, target, ttl, reason, now, key, force)`: list is "block"
    /// or "safe"; `key` lists the target as an exact key, `force` allows a
    /// range wider than a /8 (IPv6: /32).
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        ruby: &Ruby,
        rb_self: &Self,
        which: String,
        target: Value,
        ttl: Option<f64>,
        reason: String,
        now: Value,
        key: bool,
        force: bool,
    ) -> Result<RHash, Error> {
        let which = list(ruby, &which)?;
        let target = convert::key_bytes(ruby, target)?;
        let now = convert::now(ruby, now)?;
        let admin = &rb_self.inner;
        let options = core::TargetOptions { key, force };
        let entry = run_core(ruby, true, || {
            admin.add_with(which, &target, options, ttl, &reason, now)
        })?;
        entry_hash(ruby, &entry)
    }

    /// `_remove(list, target, key)`: whether it was listed.
    pub fn remove(
        ruby: &Ruby,
        rb_self: &Self,
        which: String,
        target: Value,
        key: bool,
    ) -> Result<bool, Error> {
        let which = list(ruby, &which)?;
        let target = convert::key_bytes(ruby, target)?;
        let admin = &rb_self.inner;
        let options = core::TargetOptions { key, force: true };
        run_core(ruby, true, || admin.remove_with(which, &target, options))
    }

    /// `_entries(now)`: every standing listing, tier and override.
    pub fn entries(ruby: &Ruby, rb_self: &Self, now: Value) -> Result<RArray, Error> {
        let now = convert::now(ruby, now)?;
        let admin = &rb_self.inner;
        let entries = run_core(ruby, true, || admin.entries(now))?;
        let out = ruby.ary_new_capa(entries.len());
        for entry in &entries {
            out.push(entry_hash(ruby, entry)?)?;
        }
        Ok(out)
    }

    /// `_inspect(key, now)`: what is stored for the key.
    pub fn inspect(ruby: &Ruby, rb_self: &Self, key: Value, now: Value) -> Result<RHash, Error> {
        let key = convert::key_bytes(ruby, key)?;
        let now = convert::now(ruby, now)?;
        let admin = &rb_self.inner;
        let seen = run_core(ruby, true, || admin.inspect(&key, now))?;
        let out = ruby.hash_new();
        out.aset(
            ruby.to_symbol("safelist"),
            listing_hash(ruby, seen.record.safe.as_ref())?,
        )?;
        out.aset(
            ruby.to_symbol("blocklist"),
            listing_hash(ruby, seen.record.block.as_ref())?,
        )?;
        out.aset(ruby.to_symbol("tier"), seen.record.tier.clone())?;
        out.aset(
            ruby.to_symbol("override"),
            seen.record.rules.as_ref().map(|r| r.to_string()),
        )?;
        let address = match &seen.address {
            Some((which, listing)) => {
                let hash = listing_hash(ruby, Some(listing))?.expect("a listing");
                hash.aset(ruby.to_symbol("kind"), which.name())?;
                Some(hash)
            }
            None => None,
        };
        out.aset(ruby.to_symbol("address"), address)?;
        out.aset(ruby.to_symbol("now"), seconds(seen.now_ms))?;
        Ok(out)
    }

    /// `_set_tier(key, tier)`: nil removes it.
    pub fn set_tier(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        tier: Option<String>,
    ) -> Result<(), Error> {
        let key = convert::key_bytes(ruby, key)?;
        let admin = &rb_self.inner;
        run_core(ruby, true, || admin.set_tier(&key, tier.as_deref()))
    }

    /// `_set_override(key, rules)`: nil restores the configured rules.
    pub fn set_override(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        rules: Value,
    ) -> Result<(), Error> {
        let key = convert::key_bytes(ruby, key)?;
        let rules = if rules.is_nil() {
            None
        } else {
            Some(convert::rule_set(ruby, rules)?)
        };
        let admin = &rb_self.inner;
        run_core(ruby, true, || admin.set_override(&key, rules.as_ref()))
    }

    /// `switches`: {enabled:, shadow:, multiplier:}.
    pub fn switches(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let admin = &rb_self.inner;
        let switches = run_core(ruby, true, || admin.switches())?;
        switches_hash(ruby, switches)
    }

    /// `_set_switches(enabled, shadow, multiplier)`: nil leaves one as it is.
    pub fn set_switches(
        ruby: &Ruby,
        rb_self: &Self,
        enabled: Option<bool>,
        shadow: Option<bool>,
        multiplier: Option<f64>,
    ) -> Result<RHash, Error> {
        let admin = &rb_self.inner;
        let switches = run_core(ruby, true, || {
            admin.set_switches(enabled, shadow, multiplier)
        })?;
        switches_hash(ruby, switches)
    }
}
