//! `Ratekeeper::Limiter`'s native half and `Ratekeeper.check_all`: convert
//! arguments, call the core (see `call`), hand back its decisions.
//! lib/ratekeeper/limiter.rb adds the keyword-argument methods users call.

use crate::call::{deliver, run_core};
use crate::convert::{self, optional_text};
use crate::errors::{guard, type_error};
use crate::gvl;
use crate::types::{Decision, Fail2Ban, Rule};
use magnus::{
    function, method, prelude::*, typed_data::Obj, Error, RArray, RHash, RModule, Ruby, Value,
};
use ratekeeper_core as core;

#[magnus::wrap(class = "Ratekeeper::Limiter", free_immediately, size)]
pub struct Limiter {
    /// Shared with the reservations it makes (which settle through it).
    inner: std::sync::Arc<core::Limiter>,
    /// The store URL as `inspect` shows it (no password).
    store: String,
}

/// Runs a batch of checks and delivers their decisions as an Array.
fn run_batch(
    ruby: &Ruby,
    items: &[core::BatchItem<'_>],
    now: Option<f64>,
) -> Result<RArray, Error> {
    let waits = items.iter().any(|item| item.limiter.waits_on_io());
    let decisions = run_core(ruby, waits, || core::check_batch(items, now))?;
    let out = ruby.ary_new_capa(decisions.len());
    for inner in decisions {
        out.push(deliver(ruby, inner)?)?;
    }
    Ok(out)
}

/// An optional argument of a Ruby type (nil: none).
fn optional<T: magnus::TryConvert>(value: Value) -> Result<Option<T>, Error> {
    if value.is_nil() {
        Ok(None)
    } else {
        T::try_convert(value).map(Some)
    }
}

/// A check's cost by `limiter`: an Integer, or for a metered limiter a Hash
/// of meter names to units (then the core's units per meter).
fn costs(
    ruby: &Ruby,
    limiter: &core::Limiter,
    cost: Value,
) -> Result<(u64, Option<Vec<u64>>), Error> {
    match convert::meter_units(ruby, cost)? {
        Some(units) => Ok((1, Some(guard(ruby, || limiter.meter_costs(&units))?))),
        None => Ok((convert::cost(ruby, cost)?, None)),
    }
}

/// Runs `wait` without the GVL, its waits made by the pause it is given:
/// each ends at once when Ruby interrupts the thread (Thread#raise, Timeout,
/// Ctrl-C), whose pending interrupts then run with the GVL (their error is
/// the call's); what it came to (for `errors::settle`).
fn waiting<T>(
    ruby: &Ruby,
    wait: impl FnOnce(&mut dyn FnMut(std::time::Duration) -> core::Result<()>) -> core::Result<T>,
) -> Result<std::thread::Result<core::Result<T>>, Error> {
    let wakeup = gvl::Wakeup::default();
    let interrupted: std::cell::RefCell<Option<Error>> = std::cell::RefCell::new(None);
    let mut pause = |wait: std::time::Duration| -> core::Result<()> {
        let until = std::time::Instant::now() + wait;
        while wakeup.sleep_until(until) {
            if let Err(e) = gvl::interrupts_with_gvl() {
                *interrupted.borrow_mut() = Some(e);
                return Err(core::Error::storage("the wait was interrupted"));
            }
        }
        Ok(())
    };
    let outcome = gvl::without_gvl_interruptible(ruby, &wakeup, || wait(&mut pause))?;
    match interrupted.take() {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

/// The arguments of one check by `limiter` (key, cost, now, tier, ip), converted.
fn asked(ruby: &Ruby, limiter: &core::Limiter, args: &[Value]) -> Result<core::Asked, Error> {
    let [key, cost, now, tier, ip] =
        <[Value; 5]>::try_from(args).map_err(|_| type_error(ruby, "expected 5 arguments"))?;
    let (cost, meter_costs) = costs(ruby, limiter, cost)?;
    Ok(core::Asked {
        key: convert::key_bytes(ruby, key)?,
        cost,
        now: convert::now(ruby, now)?,
        tier: optional_text(tier)?,
        ip: optional_text(ip)?,
        meter_costs,
    })
}

impl Limiter {
    /// `Limiter._new(rules, options)`: options is a Hash; each not given
    /// takes the core's default (`Ratekeeper::DEFAULTS`).
    fn native_new(ruby: &Ruby, rules: Value, options: RHash) -> Result<Limiter, Error> {
        let limits = crate::types::limits(ruby, rules)?;
        let settings = crate::settings::from_hash(ruby, options)?;
        let inner = guard(ruby, || core::Limiter::from_limits(limits, &settings))?;
        Ok(Limiter {
            inner: std::sync::Arc::new(inner),
            store: core::store::redact(&settings.store),
        })
    }

    fn decide(ruby: &Ruby, rb_self: &Self, args: &[Value], check: bool) -> Result<Decision, Error> {
        let asked = asked(ruby, &rb_self.inner, args)?;
        let (key, options) = (&asked.key, asked.options());
        let limiter = &rb_self.inner;
        let inner = run_core(ruby, limiter.waits_on_io(), || {
            if check {
                limiter.check_with(key, &options)
            } else {
                limiter.peek_with(key, &options)
            }
        })?;
        deliver(ruby, inner)
    }

    /// `_check(key, cost, now, tier, ip)`.
    fn check(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<Decision, Error> {
        Limiter::decide(ruby, rb_self, args, true)
    }

    /// `_reserve(key, cost, now, tier, ip, wait, timeout)`: a Reservation,
    /// made at once, or when `wait` waited for (without the GVL) as
    /// `_acquire` waits for a check.
    fn reserve(
        ruby: &Ruby,
        rb_self: &Self,
        args: &[Value],
    ) -> Result<crate::reservation::Reservation, Error> {
        let [key, cost, now, tier, ip, wait, timeout] = <[Value; 7]>::try_from(args)
            .map_err(|_| type_error(ruby, "_reserve takes 7 arguments"))?;
        let asked = asked(ruby, &rb_self.inner, &[key, cost, now, tier, ip])?;
        let limiter = &rb_self.inner;
        let inner = if wait.to_bool() {
            let timeout = convert::seconds(ruby, "timeout", timeout)?;
            let timeout = guard(ruby, || core::limiter::wait::check_timeout(timeout))?;
            let options = asked.options();
            let outcome = waiting(ruby, |pause| {
                limiter.reserve_pausing(&asked.key, &options, timeout, pause)
            })?;
            crate::errors::settle(ruby, outcome)?.1
        } else {
            run_core(ruby, limiter.waits_on_io(), || {
                limiter.reserve(&asked.key, &asked.options())
            })?
        };
        if let Some(warning) = &inner.decision.warning {
            crate::call::log_warning(ruby, warning)?;
        }
        Ok(crate::reservation::Reservation::wrap(
            limiter.clone(),
            inner,
        ))
    }

    /// `_hold(key, cost, now, lease, wait, timeout)`: a Lease, taken at
    /// once, or when `wait` waited for (without the GVL) until a slot frees.
    fn hold(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<crate::lease::Lease, Error> {
        let [key, cost, now, lease, wait, timeout] = <[Value; 6]>::try_from(args)
            .map_err(|_| type_error(ruby, "_hold takes 6 arguments"))?;
        let nil = ruby.qnil().as_value();
        let asked = asked(ruby, &rb_self.inner, &[key, cost, now, nil, nil])?;
        let lease_ms = convert::seconds(ruby, "lease", lease)?
            .map(|seconds| guard(ruby, || core::in_flight::lease_ms_from(seconds)))
            .transpose()?;
        let limiter = &rb_self.inner;
        let options = asked.options();
        let inner = if wait.to_bool() {
            let timeout = convert::seconds(ruby, "timeout", timeout)?;
            let timeout = guard(ruby, || core::limiter::wait::check_timeout(timeout))?;
            let outcome = waiting(ruby, |pause| {
                limiter.hold_pausing(&asked.key, &options, lease_ms, timeout, pause)
            })?;
            crate::errors::settle(ruby, outcome)?.1
        } else {
            run_core(ruby, limiter.waits_on_io(), || {
                limiter.hold(&asked.key, &options, lease_ms)
            })?
        };
        if let Some(warning) = &inner.decision.warning {
            crate::call::log_warning(ruby, warning)?;
        }
        Ok(crate::lease::Lease::wrap(limiter.clone(), inner))
    }

    /// `_leases(key)`: the key's live leases, [id, lapse time (seconds)] pairs.
    fn leases(ruby: &Ruby, rb_self: &Self, key: Value) -> Result<Vec<(String, f64)>, Error> {
        let key = convert::key_bytes(ruby, key)?;
        let limiter = &rb_self.inner;
        let held = run_core(ruby, limiter.waits_on_io(), || limiter.leases(&key))?;
        Ok(held
            .into_iter()
            .map(|(id, ms)| (id, ms as f64 / 1000.0))
            .collect())
    }

    /// `_peek(key, cost, now, tier, ip)`.
    fn peek(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<Decision, Error> {
        Limiter::decide(ruby, rb_self, args, false)
    }

    /// `_penalize(key, ip, ban, maxretry, findtime, bantime, name, now)`:
    /// one fail2ban strike against the key or (key nil) the client address
    /// `ip`, by `ban` (a Fail2Ban) or the parameters given; true when it
    /// banned it.
    fn penalize(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<bool, Error> {
        let [key, ip, ban, maxretry, findtime, bantime, name, now] =
            <[Value; 8]>::try_from(args)
                .map_err(|_| type_error(ruby, "_penalize takes 8 arguments"))?;
        let key = if key.is_nil() {
            None
        } else {
            Some(convert::key_bytes(ruby, key)?)
        };
        let ip = optional_text(ip)?;
        let now = convert::now(ruby, now)?;
        let parts = (
            optional_text(name)?,
            optional::<i64>(maxretry)?,
            convert::seconds(ruby, "findtime", findtime)?,
            convert::seconds(ruby, "bantime", bantime)?,
        );
        let rule = match optional::<Obj<Fail2Ban>>(ban)? {
            Some(ban) if parts == (None, None, None, None) => ban.inner.clone(),
            Some(_) => {
                return Err(type_error(
                    ruby,
                    "penalize takes ban: or maxretry/findtime/bantime/name, not both",
                ))
            }
            None => guard(ruby, || {
                core::Fail2Ban::given(parts.0.as_deref(), parts.1, parts.2, parts.3)
            })?,
        };
        let offender = match (&key, &ip) {
            (Some(key), None) => core::Offender::Key(key),
            (None, Some(ip)) => core::Offender::Address(ip),
            _ => return Err(type_error(ruby, "penalize takes a key or ip:, one of them")),
        };
        let limiter = &rb_self.inner;
        let strike = run_core(ruby, limiter.waits_on_io(), || {
            limiter.penalize(offender, &rule, now)
        })?;
        Ok(strike.banned)
    }

    /// `_acquire(key, cost, timeout, tier, ip)`: waits (without the GVL)
    /// until a check is admitted; `[decision, refusal]`, the refusal (why
    /// there is no slot) nil when admitted (lib/ratekeeper/limiter.rb raises
    /// with it).
    fn acquire(
        ruby: &Ruby,
        rb_self: &Self,
        args: &[Value],
    ) -> Result<(Decision, Option<String>), Error> {
        let [key, cost, timeout, tier, ip] = <[Value; 5]>::try_from(args)
            .map_err(|_| type_error(ruby, "_acquire takes 5 arguments"))?;
        let key = convert::key_bytes(ruby, key)?;
        let (tier, ip) = (optional_text(tier)?, optional_text(ip)?);
        let (cost, meter_costs) = costs(ruby, &rb_self.inner, cost)?;
        let options = core::CheckOptions {
            cost,
            now: None,
            tier: tier.as_deref(),
            ip: ip.as_deref(),
            meter_costs: meter_costs.as_deref(),
        };
        let timeout = convert::seconds(ruby, "timeout", timeout)?;
        let timeout = guard(ruby, || core::limiter::wait::check_timeout(timeout))?;
        let limiter = &rb_self.inner;
        let outcome = waiting(ruby, |pause| {
            limiter.acquire_pausing(&key, &options, timeout, pause)
        })?;
        let acquired = crate::errors::settle(ruby, outcome)?;
        let refusal = acquired.refusal();
        Ok((deliver(ruby, acquired.decision())?, refusal))
    }

    /// `screen(ip)`: how the address lists judge the client address now (a
    /// blocked or safelisted Decision), or nil. Asks no store.
    /// (Without the GVL: the first read of the lists in a process may wait on the store.)
    fn screen(ruby: &Ruby, rb_self: &Self, ip: String) -> Result<Option<Decision>, Error> {
        let limiter = &rb_self.inner;
        let listed = run_core(ruby, limiter.waits_on_io(), || Ok(limiter.screen(&ip)))?;
        listed.map(|inner| deliver(ruby, inner)).transpose()
    }

    /// `_admin(actor)`: the admin interface to this limiter's store, its
    /// changes recorded as `actor`'s.
    fn admin(&self, actor: Option<String>) -> crate::admin::Admin {
        let admin = core::Admin::new(self.inner.store());
        crate::admin::Admin::wrap(admin.with_actor(actor.as_deref().unwrap_or_default()))
    }

    /// `_check_many(keys, cost, now)`: one Redis round trip (a pipeline).
    fn check_many(
        ruby: &Ruby,
        rb_self: &Self,
        keys: RArray,
        cost: Value,
        now: Value,
    ) -> Result<RArray, Error> {
        let cost = convert::cost(ruby, cost)?;
        let now = convert::now(ruby, now)?;
        let keys: Vec<Vec<u8>> = keys
            .into_iter()
            .map(|key| convert::key_bytes(ruby, key))
            .collect::<Result<_, _>>()?;
        let items: Vec<core::BatchItem<'_>> = keys
            .iter()
            .map(|k| core::BatchItem::new(&rb_self.inner, k, cost))
            .collect();
        run_batch(ruby, &items, now)
    }

    /// `_reset(key)`.
    fn reset(ruby: &Ruby, rb_self: &Self, key: Value) -> Result<(), Error> {
        let key = convert::key_bytes(ruby, key)?;
        let limiter = &rb_self.inner;
        run_core(ruby, limiter.waits_on_io(), || limiter.reset(&key))
    }

    /// `_with_rules(rules, options)`: another limiter on the same store;
    /// options may hold `scope` and `tiers`.
    fn with_rules(
        ruby: &Ruby,
        rb_self: &Self,
        rules: Value,
        options: RHash,
    ) -> Result<Limiter, Error> {
        let limits = crate::types::limits(ruby, rules)?;
        let given = crate::settings::from_hash(ruby, options)?;
        let inner = guard(ruby, || {
            rb_self
                .inner
                .with_limits(limits)?
                .with_scope(&given.scope)?
                .with_tiers(given.tiers)
        })?;
        Ok(Limiter {
            inner: std::sync::Arc::new(inner),
            store: rb_self.store.clone(),
        })
    }

    /// `controls_ready?`: whether the address lists and switches are held
    /// in this process as of its last change.
    fn controls_ready(&self) -> bool {
        self.inner.controls_ready()
    }

    /// `policies_ready?`: the old name of `controls_ready?`, with a
    /// deprecation warning.
    fn policies_ready(ruby: &Ruby, rb_self: &Self) -> Result<bool, Error> {
        crate::settings::deprecated(ruby, "policies_ready? is now called controls_ready?")?;
        Ok(rb_self.inner.controls_ready())
    }

    /// `scope`: the scope ("" for none).
    fn scope(&self) -> String {
        self.inner.scope().to_owned()
    }

    /// `tiers`: the tiers' names.
    fn tiers(&self) -> Vec<String> {
        self.inner.tiers().iter().map(|(n, _)| n.clone()).collect()
    }

    /// `meters`: a metered limiter's rules by meter, in order (empty without meters).
    fn meters(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let out = ruby.hash_new();
        for meter in rb_self.inner.meters() {
            let rules = ruby.ary_new();
            for &inner in meter.rules.rules() {
                rules.push(Rule { inner })?;
            }
            out.aset(ruby.to_symbol(&meter.name), rules)?;
        }
        Ok(out)
    }

    /// `rules`: the rules, shortest window first (a metered limiter's first meter's).
    /// `in_flight`: the limit of the in-flight rule, or nil without one.
    fn in_flight(&self) -> Option<u64> {
        self.inner.rules().in_flight()
    }

    fn rules(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let out = ruby.ary_new();
        for &inner in rb_self.inner.rules().rules() {
            out.push(Rule { inner })?;
        }
        Ok(out)
    }

    /// `store_stats`: {attempts:, failures:, short_circuits:} of the store.
    fn store_stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        crate::plain::to_hash(ruby, &rb_self.inner.store_stats().plain())
    }

    /// `stats`: {allowed:, denied:, cached_denials:, errors:, fail_open:,
    /// fail_closed:, blocked:, safelisted:, peak_used: {window_seconds => units}}.
    fn stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        crate::plain::to_hash(ruby, &rb_self.inner.stats().plain())
    }

    /// `error_count`: checks that fell back to on_error.
    fn error_count(&self) -> u64 {
        self.inner.error_count()
    }

    /// `inspect`: the rules and the store URL without its password.
    fn inspect(&self) -> String {
        let meters = self.inner.meters();
        let rules = match meters.is_empty() {
            true => self.inner.rules().to_string(),
            false => meters
                .iter()
                .map(|m| format!("{}: {}", m.name, m.rules))
                .collect::<Vec<_>>()
                .join(", "),
        };
        format!("#<Ratekeeper::Limiter {rules} store={}>", self.store)
    }
}

/// One converted `check_all` item: limiter, key, cost, tier.
type Item = (Obj<Limiter>, Vec<u8>, u64, Option<String>);

/// `Ratekeeper._check_all(items, now, ip)`: items are [limiter, key, cost,
/// tier] Arrays (cost and tier optional); limiters sharing a store are asked
/// in one round trip; `ip` (the client address, or nil) is matched against
/// listed addresses.
fn check_all(ruby: &Ruby, items: RArray, now: Value, ip: Value) -> Result<RArray, Error> {
    let now = convert::now(ruby, now)?;
    let ip = optional_text(ip)?;
    let mut owned: Vec<Item> = Vec::with_capacity(items.len());
    for item in items.into_iter() {
        let shape = || {
            type_error(
                ruby,
                "each item must be [limiter, key], [limiter, key, cost] or [limiter, key, cost, tier]",
            )
        };
        let parts = RArray::from_value(item).ok_or_else(shape)?;
        if !(2..=4).contains(&parts.len()) {
            return Err(shape());
        }
        let limiter = Obj::<Limiter>::try_convert(parts.entry(0)?).map_err(|_| {
            type_error(
                ruby,
                "the first element of each item must be a Ratekeeper::Limiter",
            )
        })?;
        let key = convert::key_bytes(ruby, parts.entry(1)?)?;
        let cost = if parts.len() >= 3 {
            convert::cost(ruby, parts.entry(2)?)?
        } else {
            1
        };
        let tier = if parts.len() == 4 {
            optional_text(parts.entry(3)?)?
        } else {
            None
        };
        owned.push((limiter, key, cost, tier));
    }
    let items: Vec<core::BatchItem<'_>> = owned
        .iter()
        .map(|(l, k, c, tier)| core::BatchItem {
            ip: ip.as_deref(),
            tier: tier.as_deref(),
            ..core::BatchItem::new(&l.inner, k, *c)
        })
        .collect();
    run_batch(ruby, &items, now)
}

/// Defines `Ratekeeper::Limiter`'s native methods and `Ratekeeper._check_all`.
pub fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    module.define_singleton_method("_check_all", function!(check_all, 3))?;
    let class = module.define_class("Limiter", ruby.class_object())?;
    class.define_singleton_method("_new", function!(Limiter::native_new, 2))?;
    class.define_method("_check", method!(Limiter::check, -1))?;
    class.define_method("_peek", method!(Limiter::peek, -1))?;
    class.define_method("_penalize", method!(Limiter::penalize, -1))?;
    class.define_method("_acquire", method!(Limiter::acquire, -1))?;
    class.define_method("_admin", method!(Limiter::admin, 1))?;
    class.define_method("screen", method!(Limiter::screen, 1))?;
    class.define_method("scope", method!(Limiter::scope, 0))?;
    class.define_method("controls_ready?", method!(Limiter::controls_ready, 0))?;
    class.define_method("_reserve", method!(Limiter::reserve, -1))?;
    class.define_method("_hold", method!(Limiter::hold, -1))?;
    class.define_method("_leases", method!(Limiter::leases, 1))?;
    class.define_method("policies_ready?", method!(Limiter::policies_ready, 0))?;
    class.define_method("tiers", method!(Limiter::tiers, 0))?;
    class.define_method("_reset", method!(Limiter::reset, 1))?;
    class.define_method("_check_many", method!(Limiter::check_many, 3))?;
    class.define_method("_with_rules", method!(Limiter::with_rules, 2))?;
    class.define_method("rules", method!(Limiter::rules, 0))?;
    class.define_method("meters", method!(Limiter::meters, 0))?;
    class.define_method("in_flight", method!(Limiter::in_flight, 0))?;
    class.define_method("error_count", method!(Limiter::error_count, 0))?;
    class.define_method("store_stats", method!(Limiter::store_stats, 0))?;
    class.define_method("stats", method!(Limiter::stats, 0))?;
    class.define_method("inspect", method!(Limiter::inspect, 0))?;
    Ok(())
}
