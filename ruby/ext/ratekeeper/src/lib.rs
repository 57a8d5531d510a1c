//! The `ratekeeper` Ruby extension: magnus glue over ratekeeper-core. It
//! converts arguments, releases the GVL around store I/O, calls the core and
//! maps its errors; every decision is made in the core.

mod admin;
mod convert;
mod errors;
mod gvl;
mod limiter;
mod net;
mod types;

use magnus::{function, method, prelude::*, Error, Ruby};

/// `Ratekeeper._panic_for_tests`: panics without the GVL, as a check against
/// Redis would; tests prove it surfaces as `Ratekeeper::Error`, never a crash.
fn panic_for_tests(ruby: &Ruby) -> Result<(), Error> {
    let outcome = gvl::without_gvl(|| -> ratekeeper_core::Result<()> {
        panic!("deliberate panic for tests")
    });
    errors::settle(ruby, outcome)
}

#[magnus::init(name = "ratekeeper")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let module = ruby.define_module("Ratekeeper")?;
    module.define_singleton_method("_panic_for_tests", function!(panic_for_tests, 0))?;
    module.define_singleton_method("_check_all", function!(limiter::check_all, 3))?;
    module.define_singleton_method("identity", function!(identity, 1))?;

    let limiter = module.define_class("Limiter", ruby.class_object())?;
    limiter.define_singleton_method("_new", function!(limiter::Limiter::native_new, 13))?;
    limiter.define_method("_check", method!(limiter::Limiter::check, -1))?;
    limiter.define_method("_peek", method!(limiter::Limiter::peek, -1))?;
    limiter.define_method("_penalize", method!(limiter::Limiter::penalize, -1))?;
    limiter.define_method("admin", method!(limiter::Limiter::admin, 0))?;
    limiter.define_method("screen", method!(limiter::Limiter::screen, 1))?;
    limiter.define_method("scope", method!(limiter::Limiter::scope, 0))?;
    limiter.define_method("_reset", method!(limiter::Limiter::reset, 1))?;
    limiter.define_method("_check_many", method!(limiter::Limiter::check_many, 3))?;
    limiter.define_method("_with_rules", method!(limiter::Limiter::with_rules, 3))?;
    limiter.define_method("rules", method!(limiter::Limiter::rules, 0))?;
    limiter.define_method("error_count", method!(limiter::Limiter::error_count, 0))?;
    limiter.define_method("store_stats", method!(limiter::Limiter::store_stats, 0))?;
    limiter.define_method("stats", method!(limiter::Limiter::stats, 0))?;
    limiter.define_method("inspect", method!(limiter::Limiter::inspect, 0))?;

    let decision = module.define_class("Decision", ruby.class_object())?;
    decision.define_method("allowed?", method!(types::Decision::allowed, 0))?;
    decision.define_method("retry_after", method!(types::Decision::retry_after, 0))?;
    decision.define_method("limit", method!(types::Decision::limit, 0))?;
    decision.define_method("remaining", method!(types::Decision::remaining, 0))?;
    decision.define_method("reset_after", method!(types::Decision::reset_after, 0))?;
    decision.define_method("window", method!(types::Decision::window, 0))?;
    decision.define_method("now", method!(types::Decision::now, 0))?;
    decision.define_method("degraded?", method!(types::Decision::degraded, 0))?;
    decision.define_method("cached?", method!(types::Decision::cached, 0))?;
    decision.define_method("blocked?", method!(types::Decision::blocked, 0))?;
    decision.define_method("safelisted?", method!(types::Decision::safelisted, 0))?;
    decision.define_method("reason", method!(types::Decision::reason, 0))?;
    decision.define_method("shadowed?", method!(types::Decision::shadowed, 0))?;
    decision.define_method("tier", method!(types::Decision::tier, 0))?;
    decision.define_method("overridden?", method!(types::Decision::overridden, 0))?;
    decision.define_method("rules", method!(types::Decision::rules, 0))?;
    decision.define_method("headers", method!(types::Decision::headers, 0))?;
    decision.define_method("inspect", method!(types::Decision::inspect, 0))?;

    let state = module.define_class("RuleState", ruby.class_object())?;
    state.define_method("limit", method!(types::RuleState::limit, 0))?;
    state.define_method("window", method!(types::RuleState::window, 0))?;
    state.define_method("remaining", method!(types::RuleState::remaining, 0))?;
    state.define_method("used", method!(types::RuleState::used, 0))?;
    state.define_method("reset_after", method!(types::RuleState::reset_after, 0))?;
    state.define_method("inspect", method!(types::RuleState::inspect, 0))?;

    let rule = module.define_class("Rule", ruby.class_object())?;
    rule.define_method("limit", method!(types::Rule::limit, 0))?;
    rule.define_method("window", method!(types::Rule::window, 0))?;
    rule.define_method("to_s", method!(types::Rule::to_s, 0))?;
    rule.define_method("inspect", method!(types::Rule::inspect, 0))?;
    rule.define_method("==", method!(types::Rule::eq, 1))?;

    let admin = module.define_class("Admin", ruby.class_object())?;
    admin.define_singleton_method("_open", function!(admin::Admin::open, 2))?;
    admin.define_method("_add", method!(admin::Admin::add, 7))?;
    admin.define_method("_remove", method!(admin::Admin::remove, 3))?;
    admin.define_method("_entries", method!(admin::Admin::entries, 1))?;
    admin.define_method("_inspect", method!(admin::Admin::inspect, 2))?;
    admin.define_method("_set_tier", method!(admin::Admin::set_tier, 2))?;
    admin.define_method("_set_override", method!(admin::Admin::set_override, 2))?;
    admin.define_method("switches", method!(admin::Admin::switches, 0))?;
    admin.define_method("_set_switches", method!(admin::Admin::set_switches, 3))?;

    let proxies = module.define_class("TrustedProxies", ruby.class_object())?;
    proxies.define_singleton_method("new", function!(net::TrustedProxies::new, 1))?;
    proxies.define_method("client_ip", method!(net::TrustedProxies::client_ip, 2))?;
    proxies.define_method("trusts?", method!(net::TrustedProxies::trusts, 1))?;
    Ok(())
}

/// `Ratekeeper.identity(text)`: a key that names a person (an e-mail address,
/// a user name typed into a form), trimmed and lower-cased; nil when blank, so
/// an absent field is not limited by it rather than sharing one key.
fn identity(text: String) -> Option<String> {
    ratekeeper_core::identity(&text)
}
