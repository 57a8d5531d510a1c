//! One caller's call waits on a store that does not answer once: after one
//! command of a call (a gate's decision with its screen, strikes and
//! checks; a check with the process's first read of the shared controls
//! and the module probe) found Redis not answering within `timeout`, every
//! later command of that call fails at once with the same error, so a
//! frozen Redis holds a request one timeout, never one per command. A
//! command after one that was answered has a `timeout` of its own (a slow
//! first connection over TLS does not starve the check).
//!
//! A call is marked by [`within`] (or [`within_async`] for an awaited one);
//! a store asks [`unanswered`] before a command and tells [`note`] of one
//! that went unanswered. A command made outside any call (the controls
//! reader's thread, an admin's) stands alone.

use crate::error::Error;
use std::cell::RefCell;

thread_local! {
    /// `None`: no call on this thread; `Some(None)`: a call, answered so far.
    static CALL: RefCell<Option<Option<Error>>> = const { RefCell::new(None) };
}

#[cfg(feature = "async")]
tokio::task_local! {
    static CALL_ASYNC: RefCell<Option<Error>>;
}

/// The error an earlier command of the call being made on this thread (or
/// in this task) met when the store did not answer.
pub fn unanswered() -> Option<Error> {
    if let Some(call) = CALL.with(|c| c.borrow().clone()) {
        return call;
    }
    #[cfg(feature = "async")]
    if let Ok(found) = CALL_ASYNC.try_with(|c| c.borrow().clone()) {
        return found;
    }
    None
}

/// Notes that a command of the current call (if any) found the store not
/// answering, with `error`.
pub fn note(error: &Error) {
    let noted = CALL.with(|c| match c.borrow_mut().as_mut() {
        Some(slot) => {
            slot.get_or_insert_with(|| error.clone());
            true
        }
        None => false,
    });
    #[cfg(feature = "async")]
    if !noted {
        let _ = CALL_ASYNC.try_with(|c| {
            c.borrow_mut().get_or_insert_with(|| error.clone());
        });
    }
    #[cfg(not(feature = "async"))]
    let _ = noted;
}

/// Runs `f` as one call, unless a call that encloses it is being made
/// (whose wait it shares).
pub fn within<T>(f: impl FnOnce() -> T) -> T {
    if CALL.with(|c| c.borrow().is_some()) {
        return f();
    }
    /// Ends the call, however `f` ends (a panic caught by a binding included).
    struct Ended;
    impl Drop for Ended {
        fn drop(&mut self) {
            CALL.with(|c| *c.borrow_mut() = None);
        }
    }
    CALL.with(|c| *c.borrow_mut() = Some(None));
    let _ended = Ended;
    f()
}

/// [`within`] for an awaited call: the call is the task's while `work` runs.
#[cfg(feature = "async")]
pub async fn within_async<F: std::future::Future>(work: F) -> F::Output {
    if CALL_ASYNC.try_with(|_| ()).is_ok() {
        return work.await;
    }
    CALL_ASYNC.scope(RefCell::new(None), work).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_remembers_the_store_not_answering_until_it_ends() {
        let down = Error::storage("no answer in time");
        note(&down); // outside a call: nothing kept
        assert!(unanswered().is_none());
        within(|| {
            assert!(unanswered().is_none());
            note(&down);
            within(|| assert_eq!(unanswered().unwrap().to_string(), down.to_string()));
            note(&Error::storage("another"));
            assert_eq!(unanswered().unwrap().to_string(), down.to_string());
        });
        assert!(unanswered().is_none());
        within(|| assert!(unanswered().is_none()));
    }
}
