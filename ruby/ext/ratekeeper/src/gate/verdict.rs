//! `Ratekeeper::Verdict`: what the gate decided of a request, as a door
//! renders it, with the names the policy gives its parts.

use crate::call::run_core;
use crate::http::Answer;
use crate::types::Decision;
use magnus::{method, prelude::*, Error, RArray, RModule, Ruby};
use ratekeeper_core as core;
use std::sync::Arc;

#[magnus::wrap(class = "Ratekeeper::Verdict", free_immediately, size)]
pub struct Verdict {
    inner: core::gate::Verdict,
    /// The gate that decided it (which a response's status is told to).
    gate: Arc<core::gate::Gate>,
    scope: Option<String>,
    /// The name of the list or ban entry the reason names.
    entry: Option<String>,
    scopes: Vec<String>,
}

impl Verdict {
    /// The verdict `inner` of `gate`, with the names its policy gives.
    pub(super) fn of(gate: &Arc<core::gate::Gate>, inner: core::gate::Verdict) -> Verdict {
        let named = gate.named(&inner);
        Verdict {
            scope: named.scope,
            entry: named.entry,
            scopes: named.scopes,
            inner,
            gate: gate.clone(),
        }
    }

    /// `awaits_end?`: whether the door is to tell the gate when the
    /// response ends (`finish`): a throttle with an in-flight rule holds a
    /// slot for this request, or one that counts only some responses
    /// counted it.
    fn awaits_end(&self) -> bool {
        self.inner.awaits_end
    }

    /// `finish(status)`: tells the gate that the response to a request it
    /// let through ended (its last byte sent, or the client gone), with its
    /// status (`nil`: the application raised): every slot the request held
    /// is released, and a throttle that counts only some responses
    /// (`count`, say "failures") gives back the unit it counted when this
    /// one is not among them (a request the application raised on stays
    /// counted). A door calls it once, when `awaits_end?` (else it does
    /// nothing).
    fn finish(ruby: &Ruby, rb_self: &Self, status: Option<u16>) -> Result<(), Error> {
        let waits = rb_self.inner.awaits_end && rb_self.gate.warden().waits_on_io();
        run_core(ruby, waits, || rb_self.gate.finish(&rb_self.inner, status))
    }

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

    /// `reason`: why the request ends as it does ("admitted", "exempt",
    /// "safelisted", "blocked", "banned", "throttled", "degraded" or
    /// "shadowed").
    fn reason(&self) -> &'static str {
        self.inner.reason.name()
    }

    fn ban(&self) -> Option<String> {
        self.inner.ban().and(self.entry.clone())
    }

    /// `shadow`: the scope of the throttle whose refusal shadow mode let
    /// through, or nil.
    fn shadow(&self) -> Option<String> {
        self.inner.shadowed().and(self.entry.clone())
    }

    fn banned(&self) -> bool {
        self.inner.ban().is_some_and(|(_, banned)| banned)
    }

    fn safelist(&self) -> Option<String> {
        self.inner.safelist().and(self.entry.clone())
    }

    fn blocklist(&self) -> Option<String> {
        self.inner.blocklist().and(self.entry.clone())
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
            "#<Ratekeeper::Verdict {} reason={} status={:?} scope={:?}>",
            self.inner.ending.name(),
            self.inner.reason.name(),
            self.inner.answer.status,
            self.scope
        )
    }
}

/// Defines `Ratekeeper::Verdict`'s methods.
pub(super) fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let verdict = module.define_class("Verdict", ruby.class_object())?;
    verdict.define_method("ending", method!(Verdict::ending, 0))?;
    verdict.define_method("reason", method!(Verdict::reason, 0))?;
    verdict.define_method("shadow", method!(Verdict::shadow, 0))?;
    verdict.define_method("answer", method!(Verdict::answer, 0))?;
    verdict.define_method("decision", method!(Verdict::decision, 0))?;
    verdict.define_method("scope", method!(Verdict::scope, 0))?;
    verdict.define_method("ban", method!(Verdict::ban, 0))?;
    verdict.define_method("banned?", method!(Verdict::banned, 0))?;
    verdict.define_method("safelist", method!(Verdict::safelist, 0))?;
    verdict.define_method("blocklist", method!(Verdict::blocklist, 0))?;
    verdict.define_method("log", method!(Verdict::log, 0))?;
    verdict.define_method("checked", method!(Verdict::checked, 0))?;
    verdict.define_method("awaits_end?", method!(Verdict::awaits_end, 0))?;
    verdict.define_method("finish", method!(Verdict::finish, 1))?;
    verdict.define_method("inspect", method!(Verdict::inspect, 0))?;
    Ok(())
}
