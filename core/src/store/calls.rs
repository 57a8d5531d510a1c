//! A store's control calls as the core's controls code makes them: that code
//! (an operator's change, a fail2ban strike and its ban, reading the shared
//! controls) is written once, as `async fn`s over an [`AsyncControlStore`];
//! [`ControlCalls`] gives them the store's awaitable calls (Redis, in an
//! event loop) or its blocking ones made in place, and [`in_place`] runs
//! them to their end on the caller's thread when every call is blocking.

use super::{AsyncControlStore, BoxFuture, HashFields, Store};
use crate::controls::{Fail2Ban, Field, RawRecord, SharedHash, Strike};
use crate::error::Result;
use std::future::{ready, Future};
use std::task::{Context, Poll, Waker};

/// A store's control calls: awaited where the store has an awaitable form
/// and the caller awaits, else its blocking calls, made in place.
#[derive(Clone, Copy)]
pub struct ControlCalls<'s> {
    store: &'s dyn Store,
    // read only where stores can be awaited (the `async` feature)
    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    awaited: bool,
}

impl<'s> ControlCalls<'s> {
    /// The store's blocking calls (for a caller on a thread of its own;
    /// run what is written over them with [`in_place`]).
    pub fn blocking(store: &'s dyn Store) -> ControlCalls<'s> {
        ControlCalls {
            store,
            awaited: false,
        }
    }

    /// The store's awaitable calls, for a caller in an event loop: Redis's
    /// answer without blocking a thread; a store without an awaitable form
    /// (memory) answers in place, at once.
    pub fn awaited(store: &'s dyn Store) -> ControlCalls<'s> {
        ControlCalls {
            store,
            awaited: true,
        }
    }

    fn awaitable(&self) -> Option<&'s dyn AsyncControlStore> {
        #[cfg(feature = "async")]
        if self.awaited {
            return self.store.as_async_controls();
        }
        None
    }
}

impl AsyncControlStore for ControlCalls<'_> {
    fn clock_ms_async(&self) -> BoxFuture<'_, Result<u64>> {
        match self.awaitable() {
            Some(store) => store.clock_ms_async(),
            None => Box::pin(ready(self.store.clock_ms())),
        }
    }

    fn record_async<'a>(
        &'a self,
        tag: &'a [u8],
        scope: &'a str,
    ) -> BoxFuture<'a, Result<RawRecord>> {
        match self.awaitable() {
            Some(store) => store.record_async(tag, scope),
            None => Box::pin(ready(self.store.record(tag, scope))),
        }
    }

    fn set_record_async<'a>(
        &'a self,
        tag: &'a [u8],
        scope: &'a str,
        field: Field,
        value: Option<&'a str>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<()>> {
        match self.awaitable() {
            Some(store) => store.set_record_async(tag, scope, field, value, now_ms),
            None => Box::pin(ready(
                self.store.set_record(tag, scope, field, value, now_ms),
            )),
        }
    }

    fn shared_async(&self, hash: SharedHash) -> BoxFuture<'_, Result<HashFields>> {
        match self.awaitable() {
            Some(store) => store.shared_async(hash),
            None => Box::pin(ready(self.store.shared(hash))),
        }
    }

    fn set_shared_async<'a>(
        &'a self,
        hash: SharedHash,
        field: &'a [u8],
        value: Option<&'a [u8]>,
    ) -> BoxFuture<'a, Result<bool>> {
        match self.awaitable() {
            Some(store) => store.set_shared_async(hash, field, value),
            None => Box::pin(ready(self.store.set_shared(hash, field, value))),
        }
    }

    fn controls_version_async(&self) -> BoxFuture<'_, Result<u64>> {
        match self.awaitable() {
            Some(store) => store.controls_version_async(),
            None => Box::pin(ready(self.store.controls_version())),
        }
    }

    fn strike_async<'a>(
        &'a self,
        tag: &'a [u8],
        rule: &'a Fail2Ban,
        now_ms: Option<u64>,
    ) -> BoxFuture<'a, Result<Strike>> {
        match self.awaitable() {
            Some(store) => store.strike_async(tag, rule, now_ms),
            None => Box::pin(ready(self.store.strike(tag, rule, now_ms))),
        }
    }

    fn push_change_async<'a>(&'a self, change: &'a [u8], keep: usize) -> BoxFuture<'a, Result<()>> {
        match self.awaitable() {
            Some(store) => store.push_change_async(change, keep),
            None => Box::pin(ready(self.store.push_change(change, keep))),
        }
    }

    fn changes_async(&self, limit: usize) -> BoxFuture<'_, Result<Vec<Vec<u8>>>> {
        match self.awaitable() {
            Some(store) => store.changes_async(limit),
            None => Box::pin(ready(self.store.changes(limit))),
        }
    }

    fn denials_async<'a>(&'a self, minutes: &'a [u64]) -> BoxFuture<'a, Result<Vec<Vec<Vec<u8>>>>> {
        match self.awaitable() {
            Some(store) => store.denials_async(minutes),
            None => Box::pin(ready(self.store.denials(minutes))),
        }
    }
}

/// Runs `work`, whose every store call is made in place
/// ([`ControlCalls::blocking`]), to its end on this thread.
///
/// # Panics
///
/// When `work` waits on something else (an awaitable store call): a bug.
pub fn in_place<T>(work: impl Future<Output = T>) -> T {
    let mut work = std::pin::pin!(work);
    match work.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(answer) => answer,
        Poll::Pending => panic!("in_place: the work awaited something not made in place"),
    }
}
