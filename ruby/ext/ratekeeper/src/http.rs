//! `Ratekeeper::Responses` and `Ratekeeper::Answer`: the core's one HTTP
//! answer (see `ratekeeper_core::http`) for the Rack middleware and any
//! other Ruby adapter.

use crate::errors::guard;
use crate::types::Decision;
use crate::values::header_value;
use crate::words::word;
use magnus::{function, method, prelude::*, Error, RHash, RModule, RString, Ruby, Value};
use ratekeeper_core as core;

#[magnus::wrap(class = "Ratekeeper::Responses", free_immediately, size)]
pub struct Responses {
    inner: core::Responses,
}

#[magnus::wrap(class = "Ratekeeper::Answer", free_immediately, size)]
pub struct Answer {
    inner: core::Answer,
}

/// Response headers as a Hash, each name the interned one ([`word`]).
pub(crate) fn headers_hash(
    ruby: &Ruby,
    headers: &[(&'static str, String)],
) -> Result<RHash, Error> {
    let out = ruby.hash_new();
    for (name, value) in headers {
        out.aset(word(ruby, name), header_value(ruby, name, value))?;
    }
    Ok(out)
}

impl Responses {
    /// `Responses._new(status, blocked_status, headers, log_keys)`: nil takes the default.
    fn new(
        ruby: &Ruby,
        status: Option<i64>,
        blocked_status: Option<i64>,
        headers: Value,
        log_keys: bool,
    ) -> Result<Responses, Error> {
        let d = core::Responses::default();
        let style = crate::convert::optional_text(headers)?;
        let inner = guard(ruby, || {
            core::Responses::new(
                status.unwrap_or(d.status.into()),
                blocked_status.unwrap_or(d.blocked_status.into()),
                style.as_deref().unwrap_or(d.headers.name()),
                log_keys,
            )
        })?;
        Ok(Responses { inner })
    }

    fn status(&self) -> u16 {
        self.inner.status
    }

    fn blocked_status(&self) -> u16 {
        self.inner.blocked_status
    }

    fn headers(&self) -> &'static str {
        self.inner.headers.name()
    }

    fn log_keys(&self) -> bool {
        self.inner.log_keys
    }

    /// `answer(decision)`: the answer to a request the decision decided.
    fn answer(&self, decision: &Decision) -> Answer {
        Answer {
            inner: self.inner.answer(&decision.inner),
        }
    }

    /// `blocked`: the answer to a blocked client.
    fn blocked(&self) -> Answer {
        Answer {
            inner: self.inner.blocked(),
        }
    }

    /// `pass_headers(decision)`: the headers to add to the app's response
    /// when the request goes on (none when a list decided).
    fn pass_headers(ruby: &Ruby, rb_self: &Self, decision: &Decision) -> Result<RHash, Error> {
        headers_hash(ruby, &rb_self.inner.pass_headers(&decision.inner))
    }

    /// `denial_headers(decision)`: the headers a custom responder's denial lacks.
    fn denial_headers(ruby: &Ruby, rb_self: &Self, decision: &Decision) -> Result<RHash, Error> {
        headers_hash(ruby, &rb_self.inner.denial_headers(&decision.inner))
    }

    /// `_denial_log(decision, scope, key, method, path)`: `[text, fields]`.
    fn denial_log(ruby: &Ruby, rb_self: &Self, args: &[Value]) -> Result<(String, RHash), Error> {
        let [decision, scope, key, method, path] = <[Value; 5]>::try_from(args)
            .map_err(|_| crate::errors::type_error(ruby, "_denial_log takes 5 arguments"))?;
        let decision = magnus::typed_data::Obj::<Decision>::try_convert(decision)?;
        let key = crate::convert::key_bytes(ruby, key)?;
        let (scope, method, path) = (
            String::try_convert(scope)?,
            String::try_convert(method)?,
            String::try_convert(path)?,
        );
        let line = rb_self
            .inner
            .denial_log(&decision.inner, &scope, &key, &method, &path);
        Ok((line.text, crate::plain::to_hash(ruby, &line.fields)?))
    }

    fn inspect(&self) -> String {
        format!(
            "#<Ratekeeper::Responses status={} blocked_status={} headers={} log_keys={}>",
            self.inner.status,
            self.inner.blocked_status,
            self.inner.headers.name(),
            self.inner.log_keys
        )
    }
}

impl From<core::Answer> for Answer {
    fn from(inner: core::Answer) -> Answer {
        Answer { inner }
    }
}

impl Answer {
    fn status(&self) -> Option<u16> {
        self.inner.status
    }

    fn headers(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        headers_hash(ruby, &rb_self.inner.headers)
    }

    fn body(ruby: &Ruby, rb_self: &Self) -> RString {
        ruby.str_from_slice(&rb_self.inner.body)
    }

    fn passes(&self) -> bool {
        self.inner.passes()
    }
}

/// Defines `Ratekeeper::Responses` and `Ratekeeper::Answer`.
pub fn init(ruby: &Ruby, module: RModule) -> Result<(), Error> {
    let class = module.define_class("Responses", ruby.class_object())?;
    class.define_singleton_method("_new", function!(Responses::new, 4))?;
    class.define_method("status", method!(Responses::status, 0))?;
    class.define_method("blocked_status", method!(Responses::blocked_status, 0))?;
    class.define_method("headers", method!(Responses::headers, 0))?;
    class.define_method("log_keys?", method!(Responses::log_keys, 0))?;
    class.define_method("answer", method!(Responses::answer, 1))?;
    class.define_method("blocked", method!(Responses::blocked, 0))?;
    class.define_method("denial_headers", method!(Responses::denial_headers, 1))?;
    class.define_method("pass_headers", method!(Responses::pass_headers, 1))?;
    class.define_method("_denial_log", method!(Responses::denial_log, -1))?;
    class.define_method("inspect", method!(Responses::inspect, 0))?;
    let answer = module.define_class("Answer", ruby.class_object())?;
    answer.define_method("status", method!(Answer::status, 0))?;
    answer.define_method("headers", method!(Answer::headers, 0))?;
    answer.define_method("body", method!(Answer::body, 0))?;
    answer.define_method("passes?", method!(Answer::passes, 0))?;
    Ok(())
}
