//! The `ratekeeper` Ruby extension: magnus glue over ratekeeper-core. It
//! converts arguments, releases the GVL around store I/O, calls the core and
//! maps its errors; every decision is made in the core.

mod admin;
mod call;
mod convert;
mod errors;
mod gate;
mod gvl;
mod http;
mod kept;
mod lease;
mod limiter;
mod net;
mod plain;
mod reservation;
mod settings;
mod types;
mod values;
mod words;

use magnus::{function, prelude::*, Error, Ruby, TypedData};

/// `Ratekeeper._panic_for_tests`: panics without the GVL, as a check against
/// Redis would; tests prove it surfaces as `Ratekeeper::Error`, never a crash.
fn panic_for_tests(ruby: &Ruby) -> Result<(), Error> {
    let outcome = gvl::without_gvl(|| -> ratekeeper_core::Result<()> {
        panic!("deliberate panic for tests")
    });
    errors::settle(ruby, outcome)
}

/// `Ratekeeper.identity(text)`: a key that names a person (an e-mail address,
/// a user name typed into a form), trimmed and lower-cased; nil when blank, so
/// an absent field is not limited by it rather than sharing one key.
fn identity(text: String) -> Option<String> {
    ratekeeper_core::identity(&text)
}

/// `Ratekeeper.scope_name(name)`: a limiter scope from a name (a throttle's):
/// characters outside printable ASCII, and spaces, become `_`; at most 128 kept.
fn scope_name(name: String) -> String {
    ratekeeper_core::scope_name(&name)
}

/// `Ratekeeper.flush_denials`: writes this process's record of denials now
/// (without the GVL; one `timeout` at most), as the gem does at exit.
fn flush_denials() {
    let _ = gvl::without_gvl(ratekeeper_core::flush_denials);
}

/// `Ratekeeper._readable_length(content_length, transfer_encoding)`: how
/// much of a request's body a door reads for a field (the core's one cap):
/// the length, 0 for no body, nil for a body it may not read.
fn readable_length(
    content_length: Option<String>,
    transfer_encoding: Option<String>,
) -> Option<usize> {
    ratekeeper_core::gate::readable_length(content_length.as_deref(), transfer_encoding.as_deref())
}

/// `Ratekeeper._flush_denials_at_exit`: `flush_denials` as the process
/// exits (once, however many hooks call it).
fn flush_denials_at_exit() {
    let _ = gvl::without_gvl(ratekeeper_core::flush_denials_at_exit);
}

/// `Ratekeeper._testing_freeze(now)`: the process's clock (what every
/// limiter reads unless given another) frozen at `now` seconds (nil: the
/// store's clock again); see lib/ratekeeper/testing.rb.
fn testing_freeze(ruby: &Ruby, now: Option<f64>) -> Result<(), Error> {
    let ms = match now {
        Some(now) => Some(errors::guard(ruby, || {
            ratekeeper_core::time::now_to_ms(now)
        })?),
        None => None,
    };
    ratekeeper_core::Clock::process().freeze(ms);
    Ok(())
}

/// `Ratekeeper._testing_disable(flag)`: every check of the limiters on the
/// process's clock admitted without a store, or limited again.
fn testing_disable(disabled: bool) {
    ratekeeper_core::Clock::process().set_limiting(!disabled);
}

/// `Ratekeeper._testing_reset`: every memory store emptied at its next use.
fn testing_reset() {
    ratekeeper_core::testing::reset();
}

/// Each class registers its own methods beside its code.
#[magnus::init(name = "ratekeeper")]
fn init(ruby: &Ruby) -> Result<(), Error> {
    let module = ruby.define_module("Ratekeeper")?;
    module.define_singleton_method("_panic_for_tests", function!(panic_for_tests, 0))?;
    module.define_singleton_method("identity", function!(identity, 1))?;
    module.define_singleton_method("scope_name", function!(scope_name, 1))?;
    module.define_singleton_method("flush_denials", function!(flush_denials, 0))?;
    module.define_singleton_method(
        "_flush_denials_at_exit",
        function!(flush_denials_at_exit, 0),
    )?;
    module.define_singleton_method("_readable_length", function!(readable_length, 2))?;
    module.define_singleton_method("_testing_freeze", function!(testing_freeze, 1))?;
    module.define_singleton_method("_testing_disable", function!(testing_disable, 1))?;
    module.define_singleton_method("_testing_reset", function!(testing_reset, 0))?;
    words::init(ruby);
    values::init(ruby);
    settings::init(ruby, module)?;
    types::init(ruby, module)?;
    limiter::init(ruby, module)?;
    reservation::init(ruby, module)?;
    lease::init(ruby, module)?;
    admin::init(ruby, module)?;
    http::init(ruby, module)?;
    gate::init(ruby, module)?;
    net::init(ruby, module)?;
    resolve_lazy(ruby);
    Ok(())
}

/// Every class `#[magnus::wrap]` names, resolved while `init` holds the GVL
/// and no other thread runs Ruby. magnus looks a wrapped class up lazily, by
/// calling Ruby inside a once-lock: two threads making their first check at
/// once (a threaded Puma worker at boot) could otherwise deadlock, one
/// waiting for the GVL inside the lock, the other holding the GVL and waiting
/// for the lock. tests/ruby/test_cold_start.rb holds this list to the source.
fn resolve_lazy(ruby: &Ruby) {
    errors::init(ruby);
    admin::Admin::class(ruby);
    gate::Gate::class(ruby);
    gate::Verdict::class(ruby);
    http::Responses::class(ruby);
    http::Answer::class(ruby);
    limiter::Limiter::class(ruby);
    reservation::Reservation::class(ruby);
    lease::Lease::class(ruby);
    net::TrustedProxies::class(ruby);
    types::Rule::class(ruby);
    types::RuleState::class(ruby);
    types::Decision::class(ruby);
    types::Fail2Ban::class(ruby);
}
