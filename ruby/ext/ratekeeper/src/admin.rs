//! `Ratekeeper::Admin`'s native half: safelist and blocklist entries, a
//! key's tier or override, and the global switches, through the core's
//! `Admin`. lib/ratekeeper/admin.rb adds the keyword-argument methods;
//! entries and inspections come back as Hashes with Symbol keys.

use crate::call::run_core;
use crate::convert;
use crate::errors::{guard, type_error};
use crate::plain::to_hash;
use magnus::{function, method, prelude::*, Error, RArray, RHash, RModule, Ruby, Value};
use ratekeeper_core as core;

#[magnus::wrap(class = "Ratekeeper::Admin", free_immediately, size)]
pub struct Admin {
    inner: core::Admin,
}

fn list(ruby: &Ruby, name: &str) -> Result<core::List, Error> {
    match name {
        "block" => Ok(core::List::Block),
        "safe" => Ok(core::List::Safe),
        other => Err(type_error(ruby, format!("unknown list {other:?}"))),
    }
}

fn entry_hash(ruby: &Ruby, entry: &core::Entry) -> Result<RHash, Error> {
    to_hash(ruby, &entry.plain())
}

impl Admin {
    /// Wraps a core admin (for `Limiter#admin`).
    pub fn wrap(inner: core::Admin) -> Admin {
        Admin { inner }
    }

    /// `Admin._open(store, prefix, redis_module, actor)`.
    fn open(
        ruby: &Ruby,
        store: String,
        prefix: String,
        redis_module: Option<String>,
        actor: Option<String>,
    ) -> Result<Admin, Error> {
        let inner = guard(ruby, || {
            core::Admin::open(&store, &prefix, redis_module.as_deref())
        })?;
        Ok(Admin {
            inner: inner.with_actor(actor.as_deref().unwrap_or_default()),
        })
    }

    /// `_add(list, target, ttl, reason, now, key, force, scope, tag)`: list
    /// is "block" or "safe"; `key` lists the target as an exact key, `force`
    /// allows a range wider than a /8 (IPv6: /32), `tag` reads the target as
    /// a key's stored form.
    #[allow(clippy::too_many_arguments)]
    fn add(
        ruby: &Ruby,
        rb_self: &Self,
        which: String,
        target: Value,
        ttl: Option<f64>,
        reason: String,
        now: Value,
        key: bool,
        force: bool,
        scope: Option<String>,
        tag: bool,
    ) -> Result<RHash, Error> {
        let which = list(ruby, &which)?;
        let target = convert::key_bytes(ruby, target)?;
        let now = convert::now(ruby, now)?;
        let admin = &rb_self.inner;
        let options = core::TargetOptions { key, force, tag };
        let scope = scope.unwrap_or_default();
        let entry = run_core(ruby, true, || {
            admin.add_with(which, &target, options, &scope, ttl, &reason, now)
        })?;
        entry_hash(ruby, &entry)
    }

    /// `_remove(list, target, key, scope, reason, tag)`: whether it was listed.
    #[allow(clippy::too_many_arguments)]
    fn remove(
        ruby: &Ruby,
        rb_self: &Self,
        which: String,
        target: Value,
        key: bool,
        scope: Option<String>,
        reason: String,
        tag: bool,
    ) -> Result<bool, Error> {
        let which = list(ruby, &which)?;
        let target = convert::key_bytes(ruby, target)?;
        let admin = &rb_self.inner;
        let options = core::TargetOptions {
            key,
            force: true,
            tag,
        };
        let scope = scope.unwrap_or_default();
        run_core(ruby, true, || {
            admin.remove_with(which, &target, options, &scope, &reason)
        })
    }

    /// `_top_denied(window)`: who was limited over the last `window` seconds.
    fn top_denied(ruby: &Ruby, rb_self: &Self, window: u64) -> Result<RHash, Error> {
        let admin = &rb_self.inner;
        let top = run_core(ruby, true, || admin.top_denied(window))?;
        to_hash(ruby, &top.plain())
    }

    /// `_history(limit)`: the newest changes operators made, newest first.
    fn history(ruby: &Ruby, rb_self: &Self, limit: usize) -> Result<RArray, Error> {
        let admin = &rb_self.inner;
        let changes = run_core(ruby, true, || admin.history(limit))?;
        let out = ruby.ary_new_capa(changes.len());
        for change in &changes {
            out.push(to_hash(ruby, &change.plain())?)?;
        }
        Ok(out)
    }

    /// `_entries(now)`: every standing listing, tier and override.
    fn entries(ruby: &Ruby, rb_self: &Self, now: Value) -> Result<RArray, Error> {
        let now = convert::now(ruby, now)?;
        let admin = &rb_self.inner;
        let entries = run_core(ruby, true, || admin.entries(now))?;
        let out = ruby.ary_new_capa(entries.len());
        for entry in &entries {
            out.push(entry_hash(ruby, entry)?)?;
        }
        Ok(out)
    }

    /// `_inspect(key, now, scope, tag)`: what is stored for the key (and
    /// its ban in `scope`); `tag`: the key named by its stored form.
    fn inspect(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        now: Value,
        scope: Option<String>,
        tag: bool,
    ) -> Result<RHash, Error> {
        let key = convert::key_bytes(ruby, key)?;
        let now = convert::now(ruby, now)?;
        let admin = &rb_self.inner;
        let scope = scope.unwrap_or_default();
        let seen = run_core(ruby, true, || admin.inspect_with(&key, tag, &scope, now))?;
        to_hash(ruby, &seen.plain())
    }

    /// `_release_lease(key, lease_id, scope, reason)`: whether it was held.
    fn release_lease(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        id: String,
        scope: Option<String>,
        reason: String,
    ) -> Result<bool, Error> {
        let key = convert::key_bytes(ruby, key)?;
        let admin = &rb_self.inner;
        let scope = scope.unwrap_or_default();
        run_core(ruby, true, || {
            admin.release_lease(&key, &scope, &id, &reason)
        })
    }

    /// `_set_tier(key, tier, reason)`: nil removes it.
    fn set_tier(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        tier: Option<String>,
        reason: String,
    ) -> Result<(), Error> {
        let key = convert::key_bytes(ruby, key)?;
        let admin = &rb_self.inner;
        run_core(ruby, true, || {
            admin.set_tier(&key, tier.as_deref(), &reason)
        })
    }

    /// `_usage(key, rules, scope, tag)`: what the key used of each rule in the scope.
    fn usage(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        rules: Value,
        scope: Option<String>,
        tag: bool,
    ) -> Result<crate::types::Decision, Error> {
        let key = convert::key_bytes(ruby, key)?;
        let rules = crate::types::rule_set(ruby, rules)?;
        let admin = &rb_self.inner;
        let scope = scope.unwrap_or_default();
        let decision = run_core(ruby, true, || admin.usage_with(&key, tag, &scope, &rules))?;
        crate::call::deliver(ruby, decision)
    }

    /// `_set_override(key, rules, reason)`: nil restores the configured rules.
    fn set_override(
        ruby: &Ruby,
        rb_self: &Self,
        key: Value,
        rules: Value,
        reason: String,
    ) -> Result<(), Error> {
        let key = convert::key_bytes(ruby, key)?;
        let rules = if rules.is_nil() {
            None
        } else {
            Some(crate::types::rule_set(ruby, rules)?)
        };
        let admin = &rb_self.inner;
        run_core(ruby, true, || {
            admin.set_override(&key, rules.as_ref(), &reason)
        })
    }

    /// `switches`: {enabled:, shadow:, multiplier:}.
    fn switches(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let admin = &rb_self.inner;
        let switches = run_core(ruby, true, || admin.switches())?;
        to_hash(ruby, &switches.plain())
    }

    /// `_set_switches(enabled, shadow, multiplier, reason)`: nil leaves one as it is.
    fn set_switches(
        ruby: &Ruby,
        rb_self: &Self,
        enabled: Option<bool>,
        shadow: Option<bool>,
        multiplier: Option<f64>,
        reason: String,
    ) -> Result<RHash, Error> {
        let admin = &rb_self.inner;
        let switches = run_core(ruby, true, || {
            admin.set_switches(enabled, shadow, multiplier, &reason)
        })?;
        to_hash(ruby, &switches.plain())
    }
}

/// Defines `Ratekeeper::Admin`'s native methods,
/// `Ratekeeper::CONSOLE_STYLE` (the consoles' style sheet) and
/// `Ratekeeper::CONSOLE_CSP` (their Content-Security-Policy).
pub fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    module.const_set("CONSOLE_STYLE", core::admin::CONSOLE_STYLE)?;
    module.const_set("CONSOLE_CSP", core::admin::CONSOLE_CSP)?;
    let class = module.define_class("Admin", ruby.class_object())?;
    class.define_singleton_method("_open", function!(Admin::open, 4))?;
    class.define_method("_add", method!(Admin::add, 9))?;
    class.define_method("_remove", method!(Admin::remove, 6))?;
    class.define_method("_history", method!(Admin::history, 1))?;
    class.define_method("_top_denied", method!(Admin::top_denied, 1))?;
    class.define_method("_usage", method!(Admin::usage, 4))?;
    class.define_method("_entries", method!(Admin::entries, 1))?;
    class.define_method("_inspect", method!(Admin::inspect, 4))?;
    class.define_method("_release_lease", method!(Admin::release_lease, 4))?;
    class.define_method("_set_tier", method!(Admin::set_tier, 3))?;
    class.define_method("_set_override", method!(Admin::set_override, 3))?;
    class.define_method("switches", method!(Admin::switches, 0))?;
    class.define_method("_set_switches", method!(Admin::set_switches, 4))?;
    Ok(())
}
