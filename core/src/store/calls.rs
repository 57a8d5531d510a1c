//! A store's control calls, declared once: [`ControlStore`] (blocking),
//! [`AsyncControlStore`] (awaited) and [`ControlCalls`], which gives the
//! core's control code (an operator's change, a fail2ban strike and its ban,
//! reading the shared controls) the store's awaitable calls (Redis, in an
//! event loop) or its blocking ones made in place; that code is written once,
//! as `async fn`s over an [`AsyncControlStore`], and [`in_place`] runs it to
//! its end on the caller's thread when every call is blocking.

use super::{BoxFuture, Store};
use crate::controls::{Fail2Ban, Field, RawRecord, SharedHash, Strike};
use crate::error::Result;
use std::future::{ready, Future};
use std::task::{Context, Poll, Waker};

/// Every field of a hash and its value, as [`ControlStore::shared`] reads them.
pub type HashFields = Vec<(Vec<u8>, Vec<u8>)>;

/// Declares the control calls: each awaitable one becomes a method of
/// [`ControlStore`], its `_async` twin in [`AsyncControlStore`], and the
/// twin's dispatch in [`ControlCalls`]; each blocking-only one a method of
/// [`ControlStore`].
macro_rules! control_calls {
    (
        awaitable {$(
            $(#[doc = $doc:literal])*
            fn $name:ident / $awaited:ident ($($arg:ident: $ty:ty),*) -> $out:ty;
        )*}
        blocking {$(
            $(#[doc = $bdoc:literal])*
            fn $bname:ident ($($barg:ident: $bty:ty),*) -> $bout:ty;
        )*}
    ) => {
        /// The controls half of a store: each key's record, the shared hashes
        /// every process holds, their version, fail2ban strikes, the audit
        /// trail and the record of denials.
        #[allow(clippy::needless_lifetimes)] // (the awaited twins need them; one list names both)
        pub trait ControlStore: Send + Sync {
            $($(#[doc = $doc])* fn $name<'a>(&'a self, $($arg: $ty),*) -> Result<$out>;)*
            $($(#[doc = $bdoc])* fn $bname<'a>(&'a self, $($barg: $bty),*) -> Result<$bout>;)*
        }

        /// The awaitable form of a store's controls (see [`ControlStore`])
        /// and of its clock, by which they are written: the same calls,
        /// answered without blocking a thread (Redis: the multiplexed
        /// connection the awaited checks share).
        pub trait AsyncControlStore: Send + Sync {
            /// [`super::StoreAccess::clock_ms`], awaited.
            fn clock_ms_async(&self) -> BoxFuture<'_, Result<u64>>;
            $(
                #[doc = concat!("[`ControlStore::", stringify!($name), "`], awaited.")]
                fn $awaited<'a>(&'a self, $($arg: $ty),*) -> BoxFuture<'a, Result<$out>>;
            )*
        }

        impl AsyncControlStore for ControlCalls<'_> {
            fn clock_ms_async(&self) -> BoxFuture<'_, Result<u64>> {
                match self.awaitable() {
                    Some(store) => store.clock_ms_async(),
                    None => Box::pin(ready(self.store.clock_ms())),
                }
            }
            $(
                fn $awaited<'a>(&'a self, $($arg: $ty),*) -> BoxFuture<'a, Result<$out>> {
                    match self.awaitable() {
                        Some(store) => store.$awaited($($arg),*),
                        None => Box::pin(ready(self.store.$name($($arg),*))),
                    }
                }
            )*
        }
    };
}

control_calls! {
    awaitable {
        /// The record of `tag`, fields in [`Field::ALL`] order: the key's own
        /// (`scope` ""), or the bans it earned in `scope` (only its
        /// blocklist field is used there).
        fn record / record_async(tag: &'a [u8], scope: &'a str) -> RawRecord;

        /// Sets (`Some`) or removes (`None`) one field of the record of `tag`
        /// in `scope` ("": the key's own). The record lasts while it holds a
        /// tier or override, else until its last listing lapses (judged at
        /// `now_ms`).
        fn set_record / set_record_async(
            tag: &'a [u8],
            scope: &'a str,
            field: Field,
            value: Option<&'a str>,
            now_ms: u64
        ) -> ();

        /// Every field of one of the shared hashes.
        fn shared / shared_async(hash: SharedHash) -> HashFields;

        /// Sets or removes one field of a shared hash; for a hash processes
        /// hold, moves the version so that they read it again. Returns
        /// whether the field existed before.
        fn set_shared / set_shared_async(
            hash: SharedHash,
            field: &'a [u8],
            value: Option<&'a [u8]>
        ) -> bool;

        /// The version of the shared controls (moves on every change).
        fn controls_version / controls_version_async() -> u64;

        /// Counts one fail2ban strike against `tag` at `now_ms` (the store's
        /// clock when `None`); the strike that makes `maxretry` within
        /// `findtime` clears the count and reports that the key is to be
        /// banned.
        fn strike / strike_async(tag: &'a [u8], rule: &'a Fail2Ban, now_ms: Option<u64>) -> Strike;

        /// Appends one change (encoded, see [`crate::audit`]) to the audit
        /// trail, which keeps the newest `keep`.
        fn push_change / push_change_async(change: &'a [u8], keep: usize) -> ();

        /// The newest `limit` changes of the audit trail, newest first.
        fn changes / changes_async(limit: usize) -> Vec<Vec<u8>>;

        /// Every process's tally of each of `minutes`, in their order.
        fn denials / denials_async(minutes: &'a [u64]) -> Vec<Vec<Vec<u8>>>;
    }
    blocking {
        /// Sets process `process`'s tally of the denials of the minute that
        /// starts at `minute_ms` (encoded, see [`crate::denials`]), kept
        /// `ttl_s` seconds (written by each process's own reader thread).
        fn put_denials(minute_ms: u64, process: u64, tally: &'a [u8], ttl_s: u64) -> ();
    }
}

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
