//! `Ratekeeper::Gate` and `Ratekeeper::Verdict`: the core's one decision
//! flow (see `ratekeeper_core::gate`) for the Rack middleware and any Ruby
//! door. `lib/ratekeeper/gate.rb` turns the door's callables into
//! `call:N` and holds them; this side converts the policy and the
//! request's facts, calls the core (the store without the GVL) and hands
//! back the verdict.

use crate::call::run_core;
use crate::errors::{guard, type_error};
use crate::http::Answer;
use crate::types::Decision;
use magnus::{
    function, method, prelude::*, r_hash::ForEach, Error, Float, Integer, RArray, RHash, RModule,
    RString, Ruby, Symbol, Value,
};
use ratekeeper_core as core;
use ratekeeper_core::gate::source::{self, cgi_name, BodyField, Head};
use ratekeeper_core::gate::spec::{Table, Value as PolicyValue};
use ratekeeper_core::gate::{Facts, Spec, Step};
use std::cell::RefCell;

#[magnus::wrap(class = "Ratekeeper::Gate", free_immediately, size)]
pub struct Gate {
    inner: core::gate::Gate,
}

#[magnus::wrap(class = "Ratekeeper::Verdict", free_immediately, size)]
pub struct Verdict {
    inner: core::gate::Verdict,
    scope: Option<String>,
    ban: Option<String>,
    safelist: Option<String>,
    blocklist: Option<String>,
    scopes: Vec<String>,
}

fn class_name(value: Value) -> String {
    // SAFETY: the class name is copied out at once.
    unsafe { value.classname() }.into_owned()
}

/// A Ruby value of the policy as a policy value (nil: left out).
fn value(ruby: &Ruby, path: &str, v: Value) -> Result<Option<PolicyValue>, Error> {
    if v.is_nil() {
        return Ok(None);
    }
    if v.is_kind_of(ruby.class_true_class()) || v.is_kind_of(ruby.class_false_class()) {
        return Ok(Some(PolicyValue::Boolean(v.to_bool())));
    }
    if let Some(int) = Integer::from_value(v) {
        let n = int
            .to_i64()
            .map_err(|_| crate::errors::config_error(ruby, format!("{path}: out of range")))?;
        return Ok(Some(PolicyValue::Integer(n)));
    }
    if let Some(float) = Float::from_value(v) {
        return Ok(Some(PolicyValue::Float(float.to_f64())));
    }
    if let Some(symbol) = Symbol::from_value(v) {
        return Ok(Some(PolicyValue::String(symbol.name()?.into_owned())));
    }
    if let Some(text) = RString::from_value(v) {
        return Ok(Some(PolicyValue::String(text.to_string()?)));
    }
    if let Some(hash) = RHash::from_value(v) {
        return Ok(Some(PolicyValue::Table(table(ruby, path, hash)?)));
    }
    if let Some(array) = RArray::from_value(v) {
        let mut out = Vec::new();
        for (i, item) in array.into_iter().enumerate() {
            if let Some(item) = value(ruby, &format!("{path}[{i}]"), item)? {
                out.push(item);
            }
        }
        return Ok(Some(PolicyValue::Array(out)));
    }
    Err(type_error(
        ruby,
        format!(
            "{path}: a policy holds strings, numbers, booleans, arrays, hashes and callables, not {}",
            class_name(v)
        ),
    ))
}

fn table(ruby: &Ruby, path: &str, hash: RHash) -> Result<Table, Error> {
    let mut out = Table::new();
    let mut failed = None;
    hash.foreach(|k: Value, v: Value| {
        let name = match Symbol::from_value(k) {
            Some(symbol) => symbol.name()?.into_owned(),
            None => String::try_convert(k)?,
        };
        let place = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        match value(ruby, &place, v) {
            Ok(Some(v)) => {
                out.insert(name, v);
            }
            Ok(None) => {}
            Err(e) => {
                failed = Some(e);
                return Ok(ForEach::Stop);
            }
        }
        Ok(ForEach::Continue)
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// A request as the Rack middleware gives it.
struct Request<'r> {
    ruby: &'r Ruby,
    head: Head,
    env: RHash,
    context: Value,
    callables: RArray,
    body: Value,
    user: Value,
    cost: u64,
    failed: RefCell<Option<Error>>,
}

impl Request<'_> {
    /// A door's answer: a String as its bytes, nil and false as none, true
    /// as "1", anything else as its `to_s`; an exception is kept.
    fn answered(&self, got: Result<Value, Error>) -> Option<Vec<u8>> {
        let got = match got {
            Ok(got) => got,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                return None;
            }
        };
        if got.is_nil() || got.is_kind_of(self.ruby.class_false_class()) {
            return None;
        }
        if got.is_kind_of(self.ruby.class_true_class()) {
            return Some(b"1".to_vec());
        }
        let text = match RString::from_value(got) {
            Some(s) => s,
            None => match got.funcall::<_, _, RString>("to_s", ()) {
                Ok(s) => s,
                Err(e) => {
                    self.failed.borrow_mut().get_or_insert(e);
                    return None;
                }
            },
        };
        // SAFETY: the bytes are copied before any Ruby code can run.
        Some(unsafe { text.as_slice() }.to_vec())
    }
}

impl Facts for Request<'_> {
    fn head(&self) -> &Head {
        &self.head
    }
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        let found: Option<RString> = self.env.lookup(cgi_name(name)).ok()?;
        // SAFETY: the bytes are copied before any Ruby code can run.
        found.map(|s| unsafe { s.as_slice() }.to_vec())
    }
    /// What the door's body reader says of `field`: a value (a String),
    /// an Array of them (a repeated field), nil when the body has no such
    /// field, false when the door could not read the body.
    fn body_field(&self, field: &str) -> BodyField {
        if self.body.is_nil() {
            return BodyField::Absent;
        }
        let got: Value = match self.body.funcall("call", (field,)) {
            Ok(got) => got,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(e);
                return BodyField::Absent;
            }
        };
        if got.is_kind_of(self.ruby.class_false_class()) {
            return BodyField::Unreadable;
        }
        let values: Vec<Vec<u8>> = match RArray::from_value(got) {
            Some(items) => items
                .into_iter()
                .filter_map(|item| self.answered(Ok(item)))
                .collect(),
            None => self.answered(Ok(got)).into_iter().collect(),
        };
        BodyField::of(values)
    }
    fn user(&self) -> Option<String> {
        if self.user.is_nil() {
            return None;
        }
        let got = self.answered(self.user.funcall("call", ()))?;
        Some(String::from_utf8_lossy(&got).into_owned())
    }
    fn call(&self, index: usize) -> Option<Vec<u8>> {
        let callable = self.callables.entry::<Value>(index as isize).ok()?;
        self.answered(callable.funcall("call", (self.context,)))
    }
    fn cost(&self) -> u64 {
        self.cost
    }
}

/// A fact of a request's head as text: a String's bytes whatever its
/// encoding (a server hands Rack the request's bytes as they came, binary;
/// bytes that are not UTF-8 as U+FFFD, as the edge server reads them), a
/// Symbol's name; nil as "".
fn text(value: Value) -> Result<String, Error> {
    match RString::from_value(value) {
        // SAFETY: the bytes are copied before any Ruby code can run.
        Some(s) => Ok(String::from_utf8_lossy(unsafe { s.as_slice() }).into_owned()),
        None => Ok(crate::limiter::optional_text(value)?.unwrap_or_default()),
    }
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
        Ok(Gate { inner })
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
        let module: RModule = ruby.class_object().const_get("Ratekeeper")?;
        for warning in &inner.warnings {
            let _: Value = module.funcall("log_warning", (warning.as_str(),))?;
        }
        let spec = rb_self.inner.spec();
        Ok(Verdict {
            scope: inner.throttle.map(|i| spec.throttles[i].scope.clone()),
            ban: inner.ban.map(|i| spec.bans[i].rule.name.clone()),
            safelist: inner.safelist.map(|i| spec.safelists[i].name.clone()),
            blocklist: inner.blocklist.map(|i| spec.blocklists[i].name.clone()),
            scopes: inner
                .checked
                .iter()
                .map(|c| spec.throttles[c.throttle].scope.clone())
                .collect(),
            inner,
        })
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
        self.inner
            .spec()
            .throttles
            .iter()
            .map(|t| t.scope.clone())
            .collect()
    }

    /// `throttle_rules`: `{scope => rules}` of the policy's throttles, in
    /// order (the rules as text, as Admin#usage takes them).
    fn throttle_rules(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let out = ruby.hash_new();
        for t in &rb_self.inner.spec().throttles {
            out.aset(t.scope.as_str(), t.rules.to_string())?;
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

impl Verdict {
    fn ending(&self) -> &'static str {
        self.inner.ending.name()
    }

    fn answer(&self) -> Answer {
        Answer::from(self.inner.answer.clone())
    }

    fn decision(&self) -> Option<Decision> {
        self.inner.decision.clone().map(|inner| Decision { inner })
    }

    fn scope(&self) -> Option<String> {
        self.scope.clone()
    }

    fn ban(&self) -> Option<String> {
        self.ban.clone()
    }

    fn banned(&self) -> bool {
        self.inner.banned
    }

    fn safelist(&self) -> Option<String> {
        self.safelist.clone()
    }

    fn blocklist(&self) -> Option<String> {
        self.blocklist.clone()
    }

    /// `log`: the denial's line, or nil.
    fn log(&self) -> Option<String> {
        self.inner.log.as_ref().map(|line| line.text.clone())
    }

    /// `checked`: `[[scope, key, decision], ...]`, in order.
    fn checked(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let out = ruby.ary_new();
        for (c, scope) in rb_self.inner.checked.iter().zip(&rb_self.scopes) {
            let row = ruby.ary_new();
            row.push(scope.as_str())?;
            row.push(ruby.str_from_slice(&c.key))?;
            row.push(Decision {
                inner: c.decision.clone(),
            })?;
            out.push(row)?;
        }
        Ok(out)
    }

    fn inspect(&self) -> String {
        format!(
            "#<Ratekeeper::Verdict {} status={:?} scope={:?}>",
            self.inner.ending.name(),
            self.inner.answer.status,
            self.scope
        )
    }
}

/// `Gate._decoded_path(raw)`: the path a Rack server hands over
/// (`PATH_INFO`, as the request spelled it, `%XX` and all) as every door
/// gives it to the gate: percent-decoded, as Python's servers and the edge
/// server decode it (`source::decoded_path`); nil as "".
fn decoded_path(raw: Value) -> Result<String, Error> {
    match RString::from_value(raw) {
        // SAFETY: the bytes are copied before any Ruby code can run.
        Some(s) => Ok(source::decoded_path(unsafe { s.as_slice() })),
        None => text(raw),
    }
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
    class.define_method("inspect", method!(Gate::inspect, 0))?;
    let verdict = module.define_class("Verdict", ruby.class_object())?;
    verdict.define_method("ending", method!(Verdict::ending, 0))?;
    verdict.define_method("answer", method!(Verdict::answer, 0))?;
    verdict.define_method("decision", method!(Verdict::decision, 0))?;
    verdict.define_method("scope", method!(Verdict::scope, 0))?;
    verdict.define_method("ban", method!(Verdict::ban, 0))?;
    verdict.define_method("banned?", method!(Verdict::banned, 0))?;
    verdict.define_method("safelist", method!(Verdict::safelist, 0))?;
    verdict.define_method("blocklist", method!(Verdict::blocklist, 0))?;
    verdict.define_method("log", method!(Verdict::log, 0))?;
    verdict.define_method("checked", method!(Verdict::checked, 0))?;
    verdict.define_method("inspect", method!(Verdict::inspect, 0))?;
    Ok(())
}
