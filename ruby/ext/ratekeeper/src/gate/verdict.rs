//! `Ratekeeper::Verdict`: what the gate decided of a request, as a door
//! renders it, with the names the policy gives its parts.

use crate::call::run_core;
use crate::http::Answer;
use crate::types::Decision;
use crate::values::header_value;
use crate::words::word;
use magnus::rb_sys::{protect, AsRawValue};
use magnus::{method, prelude::*, Error, RArray, RHash, RModule, RString, Ruby, Value};
use ratekeeper_core as core;
use std::sync::Arc;

#[magnus::wrap(class = "Ratekeeper::Verdict", free_immediately, size)]
pub struct Verdict {
    inner: core::gate::Verdict,
    /// The gate that decided it (which a response's status is told to, and
    /// whose policy names the verdict's parts when a door asks).
    gate: Arc<core::gate::Gate>,
}

impl Verdict {
    /// The verdict `inner` of `gate`.
    pub(super) fn of(gate: &Arc<core::gate::Gate>, inner: core::gate::Verdict) -> Verdict {
        Verdict {
            inner,
            gate: gate.clone(),
        }
    }

    /// The scope of throttle `i` of the policy.
    fn scope_of(&self, i: usize) -> String {
        self.gate.scope_of(i).to_owned()
    }

    /// The name of the list or ban entry the reason names.
    fn entry(&self) -> Option<String> {
        self.gate.entry_name(self.inner.reason).map(str::to_owned)
    }

    /// `awaits_end?`: whether the door is to tell the gate when the
    /// response ends (`finish`): a throttle with an in-flight rule holds a
    /// slot for this request, or one that counts only some responses
    /// counted it.
    fn awaits_end(&self) -> bool {
        self.inner.awaits_end
    }

    /// `finish(status, headers = nil)`: tells the gate that the response
    /// to a request it let through ended (its last byte sent, or the
    /// client gone), with its status (`nil`: the application raised) and
    /// its headers (a Hash, or Rack's header hashes): every slot the
    /// request held is released, a throttle that counts only some
    /// responses (`count`, say "failures") gives back the unit it counted
    /// when this one is not among them (a request the application raised
    /// on stays counted), and a throttle with meters settles each meter
    /// that has a `usage` header to what the response's header says. A
    /// door calls it once, when `awaits_end?` (else it does nothing).
    fn finish(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<(), Error> {
        let args =
            magnus::scan_args::scan_args::<(Option<u16>,), (Option<Value>,), (), (), (), ()>(args)?;
        let (status,) = args.required;
        let (headers,) = args.optional;
        let headers = response_headers(ruby, headers)?;
        let waits = rb_self.inner.awaits_end && rb_self.gate.warden().waits_on_io();
        run_core(ruby, waits, || {
            rb_self.gate.finish(&rb_self.inner, status, &headers)
        })
    }

    fn ending(ruby: &Ruby, rb_self: &Self) -> RString {
        word(ruby, rb_self.inner.ending.name())
    }

    fn answer(&self) -> Answer {
        Answer::from(self.inner.answer.clone())
    }

    /// `with_headers(headers)`: the response headers `headers` (a Hash, or
    /// a Hash-like such as Rack's header hashes) with the answer's headers
    /// the application did not set itself, as a copy; `headers` itself when
    /// the answer has none (an exempt, safelisted or unlimited request).
    fn with_headers(ruby: &Ruby, rb_self: &Self, headers: Value) -> Result<Value, Error> {
        let extra = &rb_self.inner.answer.headers;
        if extra.is_empty() {
            return Ok(headers);
        }
        // a plain Hash directly, in one protected step (each name looked
        // up and each value made in it, held by the new Hash at once); a
        // subclass (Rack's case-insensitive header hashes) by its own methods
        if let Some(hash) =
            RHash::from_value(headers).filter(|h| h.class().as_raw() == ruby.class_hash().as_raw())
        {
            let out = protect(|| unsafe {
                let out = rb_sys::rb_hash_dup(hash.as_raw());
                for (name, value) in extra {
                    let name_word = word(ruby, name).as_raw();
                    if rb_sys::rb_hash_lookup2(out, name_word, rb_sys::Qundef as rb_sys::VALUE)
                        == rb_sys::Qundef as rb_sys::VALUE
                    {
                        rb_sys::rb_hash_aset(
                            out,
                            name_word,
                            header_value(ruby, name, value).as_raw(),
                        );
                    }
                }
                out
            })?;
            // SAFETY: a VALUE Ruby just returned
            return Ok(unsafe { <Value as magnus::rb_sys::FromRawValue>::from_raw(out) });
        }
        let out: Value = headers.funcall("dup", ())?;
        for (name, value) in extra {
            let name_word = word(ruby, name);
            if !out.funcall::<_, _, bool>("key?", (name_word,))? {
                let _: Value = out.funcall("[]=", (name_word, header_value(ruby, name, value)))?;
            }
        }
        Ok(out)
    }

    fn decision(&self) -> Option<Decision> {
        self.inner.decision.clone().map(|inner| Decision { inner })
    }

    fn scope(&self) -> Option<String> {
        self.inner.throttle.map(|i| self.scope_of(i))
    }

    /// `reason`: why the request ends as it does ("admitted", "exempt",
    /// "safelisted", "blocked", "banned", "throttled", "degraded" or
    /// "shadowed").
    fn reason(ruby: &Ruby, rb_self: &Self) -> RString {
        word(ruby, rb_self.inner.reason.name())
    }

    fn ban(&self) -> Option<String> {
        self.inner.ban().and_then(|_| self.entry())
    }

    /// `shadow`: the scope of the throttle whose refusal shadow mode let
    /// through, or nil.
    fn shadow(&self) -> Option<String> {
        self.inner.shadowed().and_then(|_| self.entry())
    }

    fn banned(&self) -> bool {
        self.inner.ban().is_some_and(|(_, banned)| banned)
    }

    fn safelist(&self) -> Option<String> {
        self.inner.safelist().and_then(|_| self.entry())
    }

    fn blocklist(&self) -> Option<String> {
        self.inner.blocklist().and_then(|_| self.entry())
    }

    /// `log`: the denial's line, or nil.
    fn log(&self) -> Option<String> {
        self.inner.log.as_ref().map(|line| line.text.clone())
    }

    /// `checked`: `[[scope, key, decision], ...]`, in order.
    fn checked(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let out = ruby.ary_new();
        for c in &rb_self.inner.checked {
            let row = ruby.ary_new();
            row.push(rb_self.scope_of(c.throttle))?;
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
            self.scope()
        )
    }
}

/// A response's headers as a Rack door gives them (a Hash of names to a
/// String, or to an Array of them: its first), as name and value bytes;
/// none for `nil`.
fn response_headers(ruby: &Ruby, headers: Option<Value>) -> Result<Vec<core::gate::Header>, Error> {
    let Some(headers) = headers.filter(|h| !h.is_nil()) else {
        return Ok(Vec::new());
    };
    let bad = || {
        Error::new(
            ruby.exception_type_error(),
            "response headers must be a Hash of names to Strings",
        )
    };
    let pairs: RArray = headers.funcall("to_a", ()).map_err(|_| bad())?;
    let mut out = Vec::with_capacity(pairs.len());
    for pair in pairs.into_iter() {
        let pair = RArray::from_value(pair)
            .filter(|p| p.len() == 2)
            .ok_or_else(bad)?;
        let name: Value = pair.entry(0)?;
        let mut value: Value = pair.entry(1)?;
        if let Some(values) = RArray::from_value(value) {
            value = values.entry(0)?;
        }
        let name: magnus::RString = name.funcall("to_s", ())?;
        let Some(value) = magnus::RString::from_value(value) else {
            continue;
        };
        // SAFETY: the bytes are copied before any Ruby code can run.
        out.push(unsafe { (name.as_slice().to_vec(), value.as_slice().to_vec()) });
    }
    Ok(out)
}

/// Defines `Ratekeeper::Verdict`'s methods.
pub(super) fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let verdict = module.define_class("Verdict", ruby.class_object())?;
    verdict.define_method("ending", method!(Verdict::ending, 0))?;
    verdict.define_method("reason", method!(Verdict::reason, 0))?;
    verdict.define_method("shadow", method!(Verdict::shadow, 0))?;
    verdict.define_method("answer", method!(Verdict::answer, 0))?;
    verdict.define_method("with_headers", method!(Verdict::with_headers, 1))?;
    verdict.define_method("decision", method!(Verdict::decision, 0))?;
    verdict.define_method("scope", method!(Verdict::scope, 0))?;
    verdict.define_method("ban", method!(Verdict::ban, 0))?;
    verdict.define_method("banned?", method!(Verdict::banned, 0))?;
    verdict.define_method("safelist", method!(Verdict::safelist, 0))?;
    verdict.define_method("blocklist", method!(Verdict::blocklist, 0))?;
    verdict.define_method("log", method!(Verdict::log, 0))?;
    verdict.define_method("checked", method!(Verdict::checked, 0))?;
    verdict.define_method("awaits_end?", method!(Verdict::awaits_end, 0))?;
    verdict.define_method("finish", method!(Verdict::finish, -1))?;
    verdict.define_method("inspect", method!(Verdict::inspect, 0))?;
    Ok(())
}
