//! The value classes Ruby sees: `Ratekeeper::Rule`, `RuleState`, `Decision`
//! and `Fail2Ban`, and `Ratekeeper.parse_rules`; each class registers its
//! methods in its own `init`. A rule set and a limiter's meters are read
//! here (`rule_set`, `limits`), beside the `Rule` they may hold; the scalar
//! conversions they use are `convert`'s.

use crate::errors::{guard, to_ruby, type_error};
use magnus::typed_data::Obj;
use magnus::{
    function, method, prelude::*, Error, Integer, RArray, RHash, RModule, RString, Ruby, Value,
};
use ratekeeper_core as core;
use ratekeeper_core::time::seconds;
use ratekeeper_core::{RuleSet, RuleSpec};

/// One rule: `limit` units per `window` seconds.
#[magnus::wrap(class = "Ratekeeper::Rule", free_immediately, size)]
pub struct Rule {
    pub inner: core::Rule,
}

impl Rule {
    /// `Rule.new("20/minute")` or `Rule.new(20, 60)` (window in seconds).
    fn new(ruby: &Ruby, args: &[Value]) -> Result<Rule, Error> {
        let inner = match args {
            [text] => {
                let text: String = String::try_convert(*text).map_err(|_| {
                    type_error(
                        ruby,
                        "Rule.new takes a String such as \"20/minute\", or (limit, window_seconds)",
                    )
                })?;
                core::rule::parse_rule(&text).map_err(|e| to_ruby(ruby, e))?
            }
            [limit, window] => {
                let limit = Integer::from_value(*limit)
                    .ok_or_else(|| type_error(ruby, "limit must be an Integer"))?;
                let window = crate::convert::seconds(ruby, "window", *window)?
                    .ok_or_else(|| type_error(ruby, "window must be a number of seconds"))?;
                let limit = limit.to_i64().map(i128::from).unwrap_or(i128::MAX);
                guard(ruby, || core::Rule::from_seconds(limit, window))?
            }
            _ => return Err(type_error(ruby, "Rule.new takes 1 or 2 arguments")),
        };
        Ok(Rule { inner })
    }

    fn limit(&self) -> u64 {
        self.inner.limit
    }

    fn window(&self) -> f64 {
        seconds(self.inner.window_ms)
    }

    fn window_name(&self) -> String {
        self.inner.window_name()
    }

    fn to_s(&self) -> String {
        self.inner.to_string()
    }

    fn inspect(&self) -> String {
        format!("#<Ratekeeper::Rule {}>", self.inner)
    }

    fn eq(&self, other: Value) -> bool {
        magnus::typed_data::Obj::<Rule>::try_convert(other).is_ok_and(|o| self.inner == o.inner)
    }

    fn hash(&self) -> u64 {
        self.inner
            .limit
            .wrapping_mul(31)
            .wrapping_add(self.inner.window_ms)
    }

    fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
        let class = module.define_class("Rule", ruby.class_object())?;
        class.define_singleton_method("new", function!(Rule::new, -1))?;
        class.define_method("limit", method!(Rule::limit, 0))?;
        class.define_method("window", method!(Rule::window, 0))?;
        class.define_method("window_name", method!(Rule::window_name, 0))?;
        class.define_method("to_s", method!(Rule::to_s, 0))?;
        class.define_method("inspect", method!(Rule::inspect, 0))?;
        class.define_method("==", method!(Rule::eq, 1))?;
        class.define_method("eql?", method!(Rule::eq, 1))?;
        class.define_method("hash", method!(Rule::hash, 0))?;
        Ok(())
    }
}

/// The state of one rule after a check.
#[magnus::wrap(class = "Ratekeeper::RuleState", free_immediately, size)]
pub struct RuleState {
    inner: core::RuleState,
}

impl RuleState {
    fn limit(&self) -> u64 {
        self.inner.limit
    }

    fn window(&self) -> f64 {
        seconds(self.inner.window_ms)
    }

    fn remaining(&self) -> u64 {
        self.inner.remaining
    }

    fn used(&self) -> u64 {
        self.inner.used()
    }

    fn reset_after(&self) -> f64 {
        seconds(self.inner.reset_after_ms)
    }

    fn inspect(&self) -> String {
        format!(
            "#<Ratekeeper::RuleState rule={}/{} remaining={} reset_after={:?}>",
            self.inner.limit,
            self.inner.window_name(),
            self.inner.remaining,
            seconds(self.inner.reset_after_ms)
        )
    }

    fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
        let class = module.define_class("RuleState", ruby.class_object())?;
        class.define_method("limit", method!(RuleState::limit, 0))?;
        class.define_method("window", method!(RuleState::window, 0))?;
        class.define_method("remaining", method!(RuleState::remaining, 0))?;
        class.define_method("used", method!(RuleState::used, 0))?;
        class.define_method("reset_after", method!(RuleState::reset_after, 0))?;
        class.define_method("inspect", method!(RuleState::inspect, 0))?;
        Ok(())
    }
}

/// The answer to a check or a peek.
#[magnus::wrap(class = "Ratekeeper::Decision", free_immediately, size)]
pub struct Decision {
    pub inner: core::Decision,
}

impl Decision {
    fn allowed(&self) -> bool {
        self.inner.allowed()
    }

    fn outcome(&self) -> &'static str {
        self.inner.outcome.name()
    }

    fn retry_after(&self) -> Option<f64> {
        self.inner.retry_after_ms.map(seconds)
    }

    fn limit(&self) -> u64 {
        self.inner.binding_state().limit
    }

    fn remaining(&self) -> u64 {
        self.inner.binding_state().remaining
    }

    fn reset_after(&self) -> f64 {
        seconds(self.inner.binding_state().reset_after_ms)
    }

    fn window(&self) -> f64 {
        seconds(self.inner.binding_state().window_ms)
    }

    fn now(&self) -> f64 {
        seconds(self.inner.now_ms)
    }

    fn in_flight(&self) -> Option<u64> {
        self.inner.in_flight.map(|f| f.held)
    }

    fn degraded(&self) -> bool {
        self.inner.degraded()
    }

    fn cached(&self) -> bool {
        self.inner.cached
    }

    fn blocked(&self) -> bool {
        self.inner.blocked()
    }

    fn safelisted(&self) -> bool {
        self.inner.safelisted()
    }

    fn reason(&self) -> Option<String> {
        self.inner.reason.clone()
    }

    fn shadowed(&self) -> bool {
        self.inner.shadowed()
    }

    fn tier(&self) -> Option<String> {
        self.inner.tier.clone()
    }

    fn overridden(&self) -> bool {
        self.inner.overridden
    }

    fn rules(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let out = ruby.ary_new_capa(rb_self.inner.rules.len());
        for &inner in &rb_self.inner.rules {
            out.push(RuleState { inner })?;
        }
        Ok(out)
    }

    /// A metered limiter's rule states by the meter the check charged (empty without meters).
    fn meters(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let out = ruby.hash_new();
        for meter in &rb_self.inner.meters {
            let states = ruby.ary_new();
            for &inner in &rb_self.inner.rules[meter.rules.clone()] {
                states.push(RuleState { inner })?;
            }
            out.aset(ruby.to_symbol(&meter.name), states)?;
        }
        Ok(out)
    }

    /// The binding rule's meter, a Symbol (nil without meters).
    fn meter(ruby: &Ruby, rb_self: &Self) -> Option<magnus::Symbol> {
        rb_self.inner.meter().map(|name| ruby.to_symbol(name))
    }

    fn headers(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        crate::http::headers_hash(ruby, &rb_self.inner.headers())
    }

    fn to_h(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        crate::plain::to_hash(ruby, &rb_self.inner.plain())
    }

    fn inspect(&self) -> String {
        let bind = self.inner.binding_state();
        let retry = match self.inner.retry_after_ms {
            Some(ms) => format!("{:?}", seconds(ms)),
            None => "nil".to_owned(),
        };
        let meter = match self.inner.meter() {
            Some(name) => format!("{name} "),
            None => String::new(),
        };
        format!(
            "#<Ratekeeper::Decision allowed={} retry_after={retry} limit={} remaining={} reset_after={:?} rule={meter}{}/{}{}>",
            self.inner.allowed(),
            bind.limit,
            bind.remaining,
            seconds(bind.reset_after_ms),
            bind.limit,
            bind.window_name(),
            if self.inner.degraded() { " degraded" } else { "" }
        )
    }

    fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
        let class = module.define_class("Decision", ruby.class_object())?;
        class.define_method("allowed?", method!(Decision::allowed, 0))?;
        class.define_method("allowed", method!(Decision::allowed, 0))?;
        class.define_method("outcome", method!(Decision::outcome, 0))?;
        class.define_method("retry_after", method!(Decision::retry_after, 0))?;
        class.define_method("limit", method!(Decision::limit, 0))?;
        class.define_method("remaining", method!(Decision::remaining, 0))?;
        class.define_method("reset_after", method!(Decision::reset_after, 0))?;
        class.define_method("window", method!(Decision::window, 0))?;
        class.define_method("now", method!(Decision::now, 0))?;
        class.define_method("in_flight", method!(Decision::in_flight, 0))?;
        class.define_method("degraded?", method!(Decision::degraded, 0))?;
        class.define_method("cached?", method!(Decision::cached, 0))?;
        class.define_method("blocked?", method!(Decision::blocked, 0))?;
        class.define_method("safelisted?", method!(Decision::safelisted, 0))?;
        class.define_method("reason", method!(Decision::reason, 0))?;
        class.define_method("shadowed?", method!(Decision::shadowed, 0))?;
        class.define_method("tier", method!(Decision::tier, 0))?;
        class.define_method("overridden?", method!(Decision::overridden, 0))?;
        class.define_method("rules", method!(Decision::rules, 0))?;
        class.define_method("meters", method!(Decision::meters, 0))?;
        class.define_method("meter", method!(Decision::meter, 0))?;
        class.define_method("headers", method!(Decision::headers, 0))?;
        class.define_method("to_h", method!(Decision::to_h, 0))?;
        class.define_method("inspect", method!(Decision::inspect, 0))?;
        Ok(())
    }
}

/// Fail2ban parameters, checked when made (see `Limiter#penalize`).
#[magnus::wrap(class = "Ratekeeper::Fail2Ban", free_immediately, size)]
pub struct Fail2Ban {
    pub inner: core::Fail2Ban,
}

impl Fail2Ban {
    /// `Fail2Ban._new(name, maxretry, findtime, bantime)`: nil takes the default.
    fn new(
        ruby: &Ruby,
        name: Value,
        maxretry: Value,
        findtime: Value,
        bantime: Value,
    ) -> Result<Fail2Ban, Error> {
        let name = crate::convert::optional_text(name)?;
        let maxretry = if maxretry.is_nil() {
            None
        } else {
            Some(
                i64::try_convert(maxretry)
                    .map_err(|_| type_error(ruby, "maxretry must be an Integer"))?,
            )
        };
        let findtime = crate::convert::seconds(ruby, "findtime", findtime)?;
        let bantime = crate::convert::seconds(ruby, "bantime", bantime)?;
        let inner = guard(ruby, || {
            core::Fail2Ban::given(name.as_deref(), maxretry, findtime, bantime)
        })?;
        Ok(Fail2Ban { inner })
    }

    fn name(&self) -> String {
        self.inner.name.clone()
    }

    fn maxretry(&self) -> u64 {
        self.inner.maxretry
    }

    fn findtime(&self) -> f64 {
        seconds(self.inner.findtime_ms)
    }

    fn bantime(&self) -> f64 {
        seconds(self.inner.bantime_ms)
    }

    fn inspect(&self) -> String {
        format!(
            "#<Ratekeeper::Fail2Ban {} maxretry={} findtime={:?} bantime={:?}>",
            self.inner.name,
            self.inner.maxretry,
            seconds(self.inner.findtime_ms),
            seconds(self.inner.bantime_ms)
        )
    }

    fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
        let class = module.define_class("Fail2Ban", ruby.class_object())?;
        class.define_singleton_method("_new", function!(Fail2Ban::new, 4))?;
        class.define_method("name", method!(Fail2Ban::name, 0))?;
        class.define_method("maxretry", method!(Fail2Ban::maxretry, 0))?;
        class.define_method("findtime", method!(Fail2Ban::findtime, 0))?;
        class.define_method("bantime", method!(Fail2Ban::bantime, 0))?;
        class.define_method("inspect", method!(Fail2Ban::inspect, 0))?;
        Ok(())
    }
}

/// `Ratekeeper.parse_rules(rules)`: the Rules a String (or an Array of
/// Strings, Rules and pairs) holds, shortest window first.
fn parse_rules(ruby: &Ruby, rules: Value) -> Result<RArray, Error> {
    let set = rule_set(ruby, rules)?;
    let out = ruby.ary_new();
    for &inner in set.rules() {
        out.push(Rule { inner })?;
    }
    Ok(out)
}

/// A rule set from a String, a `Ratekeeper::Rule`, or an Array of Strings,
/// Rules and [limit, window_seconds] pairs.
pub fn rule_set(ruby: &Ruby, rules: Value) -> Result<RuleSet, Error> {
    let mut specs = Vec::new();
    if RString::from_value(rules).is_some() || Obj::<Rule>::try_convert(rules).is_ok() {
        specs.push(rule_spec(ruby, rules)?);
    } else if let Some(items) = RArray::from_value(rules) {
        for item in items.into_iter() {
            specs.push(rule_spec(ruby, item)?);
        }
    } else {
        return Err(type_error(
            ruby,
            format!(
                "rules must be a String such as \"10/minute\", a Ratekeeper::Rule or an Array of them, not {}",
                crate::convert::class_name(rules)
            ),
        ));
    }
    RuleSet::from_specs(specs).map_err(|e| to_ruby(ruby, e))
}

fn rule_spec(ruby: &Ruby, item: Value) -> Result<RuleSpec, Error> {
    if let Some(text) = RString::from_value(item) {
        return Ok(RuleSpec::Text(text.to_string()?));
    }
    if let Ok(rule) = Obj::<Rule>::try_convert(item) {
        return Ok(RuleSpec::Rule(rule.inner));
    }
    if let Some(pair) = RArray::from_value(item) {
        if pair.len() == 2 {
            let limit: Value = pair.entry(0)?;
            let window: Value = pair.entry(1)?;
            if let (Some(limit), Some(window)) = (
                Integer::from_value(limit),
                crate::convert::now(ruby, window).ok().flatten(),
            ) {
                let limit = limit.to_i64().map(i128::from).unwrap_or(i128::MAX);
                return Ok(RuleSpec::Pair(limit, window));
            }
        }
    }
    Err(type_error(
        ruby,
        format!(
            "each rule must be a String such as \"10/minute\" or a [limit (Integer), window_seconds (Numeric)] pair, not {}",
            item.inspect()
        ),
    ))
}

/// What a limiter limits: a Hash of meter names to rule sets (each as
/// [`rule_set`] takes it, in its order), else one rule set.
pub fn limits(ruby: &Ruby, rules: Value) -> Result<ratekeeper_core::Limits, Error> {
    let Some(hash) = RHash::from_value(rules) else {
        return Ok(ratekeeper_core::Limits::Rules(rule_set(ruby, rules)?));
    };
    let mut meters = Vec::new();
    hash.foreach(|name: Value, set: Value| {
        meters.push((
            crate::convert::meter_name(ruby, name)?,
            rule_set(ruby, set)?,
        ));
        Ok(magnus::r_hash::ForEach::Continue)
    })?;
    Ok(ratekeeper_core::Limits::Meters(meters))
}

/// Defines the value classes and `Ratekeeper.parse_rules`.
pub fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    Rule::init(ruby, module)?;
    RuleState::init(ruby, module)?;
    Decision::init(ruby, module)?;
    Fail2Ban::init(ruby, module)?;
    module.define_singleton_method("parse_rules", function!(parse_rules, 1))?;
    Ok(())
}
