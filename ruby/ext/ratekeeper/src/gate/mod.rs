//! `Ratekeeper::Gate`: the core's one decision flow (see
//! `ratekeeper_core::gate`) for the Rack middleware and any Ruby door.
//! `lib/ratekeeper/gate.rb` turns the door's callables into `call:N` and
//! holds them; this side converts the policy (`table`) and the request's
//! facts (`request`), calls the core (the store without the GVL) and hands
//! back the `verdict`.

mod request;
mod table;
mod verdict;

use self::request::{text, Request};
use self::table::table;
pub use self::verdict::Verdict;
use crate::call::run_core;
use crate::errors::{guard, type_error};
use magnus::{function, method, prelude::*, Error, RArray, RHash, RModule, RString, Ruby, Value};
use ratekeeper_core as core;
use ratekeeper_core::gate::source::{self, Head};
use ratekeeper_core::gate::{Spec, Step};
use std::cell::RefCell;

#[magnus::wrap(class = "Ratekeeper::Gate", free_immediately, size)]
pub struct Gate {
    inner: std::sync::Arc<core::gate::Gate>,
}

impl Gate {
    /// `Gate._new(policy, callables)`: a policy Hash (its callables already
    /// `call:N`, `callables` of them) or a policy file's path.
    fn new(ruby: &Ruby, policy: Value, callables: usize) -> Result<Gate, Error> {
        let spec = match RHash::from_value(policy) {
            Some(hash) => {
                let table = table(ruby, "", hash)?;
                guard(ruby, || Spec::from_table(table, callables))?
            }
            None => {
                let path = String::try_convert(policy).map_err(|_| {
                    type_error(ruby, "policy must be a Hash or the path of a policy file")
                })?;
                guard(ruby, || Spec::load(std::path::Path::new(&path)))?
            }
        };
        // opening a Redis store may wait up to its connect timeout
        let inner = run_core(ruby, true, || core::gate::Gate::bind(spec, None))?;
        Ok(Gate {
            inner: std::sync::Arc::new(inner),
        })
    }

    /// `_decide(method, path, host, peer, env, query, context, callables,
    /// body, user, cost)`: the verdict on a request.
    fn decide(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<Verdict, Error> {
        let [method, path, host, peer, env, query, context, callables, body, user, cost] =
            <[Value; 11]>::try_from(args)
                .map_err(|_| type_error(ruby, "_decide takes 11 arguments"))?;
        let request = Request {
            ruby,
            head: Head::new(
                &text(method)?,
                text(path)?,
                &text(host)?,
                text(peer)?,
                text(query)?,
            ),
            env: RHash::try_convert(env)?,
            context,
            callables: RArray::try_convert(callables)?,
            body,
            user,
            cost: if cost.is_nil() {
                1
            } else {
                crate::convert::cost(ruby, cost)?
            },
            failed: RefCell::new(None),
        };
        let step = rb_self.inner.prepare(&request);
        if let Some(e) = request.failed.into_inner() {
            return Err(e);
        }
        let inner = match step {
            Step::Done(verdict) => *verdict,
            Step::Ask(plan) => {
                let waits = rb_self.inner.warden().waits_on_io();
                run_core(ruby, waits, || rb_self.inner.run(plan))?
            }
        };
        for warning in &inner.warnings {
            crate::call::log_warning(ruby, warning)?;
        }
        Ok(Verdict::of(&rb_self.inner, inner))
    }

    /// `_penalize(name, peer, env)`: a strike of the fail2ban or allow2ban
    /// entry `name` against the client of a request from `peer` with the
    /// Rack env `env` (its `X-Forwarded-For` believed from the policy's
    /// trusted proxies); whether it banned the client.
    fn penalize(
        ruby: &Ruby,
        rb_self: &Self,
        name: String,
        peer: String,
        env: RHash,
    ) -> Result<bool, Error> {
        let request = Request {
            ruby,
            head: Head::new("", String::new(), "", peer, String::new()),
            env,
            context: ruby.qnil().as_value(),
            callables: ruby.ary_new(),
            body: ruby.qnil().as_value(),
            user: ruby.qnil().as_value(),
            cost: 1,
            failed: RefCell::new(None),
        };
        let client = rb_self.inner.client(&request);
        let waits = rb_self.inner.warden().waits_on_io();
        run_core(ruby, waits, || rb_self.inner.penalize(&name, &client))
    }

    /// `stats`: each throttle's limiter stats, by scope.
    fn stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let out = ruby.hash_new();
        let spec = rb_self.inner.spec();
        for (t, limiter) in spec.throttles.iter().zip(rb_self.inner.limiters()) {
            out.aset(
                t.scope.as_str(),
                crate::plain::to_hash(ruby, &limiter.stats().plain())?,
            )?;
        }
        Ok(out)
    }

    /// `store_stats`: the calls made to the store every throttle shares.
    fn store_stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        crate::plain::to_hash(ruby, &rb_self.inner.warden().store_stats().plain())
    }

    /// `scopes`: the throttles' scopes, in order.
    fn scopes(&self) -> Vec<String> {
        self.inner.scopes()
    }

    /// `throttle_rules`: `{scope => rules}` of each log the policy's
    /// throttles keep a key's usage in, in order (a throttle with meters:
    /// each meter's, `"scope@meter"`), the rules as text, as Admin#usage
    /// takes them.
    fn throttle_rules(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let out = ruby.hash_new();
        for (scope, rules) in rb_self.inner.throttle_rules() {
            out.aset(scope, rules.to_string())?;
        }
        Ok(out)
    }

    /// `_admin(actor)`: the admin interface to this gate's store (its Redis
    /// or its memory), its changes recorded as `actor`'s.
    fn admin(&self, actor: Option<String>) -> crate::admin::Admin {
        let admin = core::Admin::new(self.inner.warden().store());
        crate::admin::Admin::wrap(admin.with_actor(actor.as_deref().unwrap_or_default()))
    }

    /// `enabled?`: whether the policy limits at all.
    fn enabled(&self) -> bool {
        self.inner.spec().enabled
    }

    /// `reads_body?`: whether a throttle keys requests by a field of their
    /// body (`identity:FIELD`), so that a door hands the gate a body reader.
    fn reads_body(&self) -> bool {
        self.inner.spec().reads_body()
    }

    fn inspect(&self) -> String {
        let spec = self.inner.spec();
        format!(
            "#<Ratekeeper::Gate {} throttle(s), {} ban(s) store={}>",
            spec.throttles.len(),
            spec.bans.len(),
            core::store::redact(&spec.settings.store)
        )
    }
}

/// `Gate._decoded_path(raw)`: the path a Rack server hands over
/// (`PATH_INFO`, as the request spelled it, `%XX` and all) as every door
/// gives it to the gate: percent-decoded, as Python's servers and the edge
/// server decode it (`source::decoded_path`); nil as "". A path that
/// decoding leaves as it is (UTF-8 without a `%`, as most are) is `raw`
/// itself, no new String.
fn decoded_path(ruby: &Ruby, raw: Value) -> Result<Value, Error> {
    let Some(s) = RString::from_value(raw) else {
        return Ok(ruby.str_new(&text(raw)?).as_value());
    };
    // SAFETY: the bytes are read before any Ruby code can run.
    let bytes = unsafe { s.as_slice() };
    if !bytes.contains(&b'%') && std::str::from_utf8(bytes).is_ok() {
        return Ok(raw);
    }
    Ok(ruby.str_new(&source::decoded_path(bytes)).as_value())
}

/// Defines `Ratekeeper::Gate` and `Ratekeeper::Verdict`.
pub fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let class = module.define_class("Gate", ruby.class_object())?;
    class.define_singleton_method("_new", function!(Gate::new, 2))?;
    class.define_method("_decide", method!(Gate::decide, -1))?;
    class.define_singleton_method("_decoded_path", function!(decoded_path, 1))?;
    class.define_method("_penalize", method!(Gate::penalize, 3))?;
    class.define_method("stats", method!(Gate::stats, 0))?;
    class.define_method("store_stats", method!(Gate::store_stats, 0))?;
    class.define_method("scopes", method!(Gate::scopes, 0))?;
    class.define_method("throttle_rules", method!(Gate::throttle_rules, 0))?;
    class.define_method("_admin", method!(Gate::admin, 1))?;
    class.define_method("enabled?", method!(Gate::enabled, 0))?;
    class.define_method("reads_body?", method!(Gate::reads_body, 0))?;
    class.define_method("inspect", method!(Gate::inspect, 0))?;
    verdict::init(ruby, module)
}
