//! One caller's call, one `timeout`: every store command a call makes (a
//! gate's decision with its screen, strikes and checks; a check with the
//! process's first read of the shared policies and the module probe) ends
//! by `timeout` after the outermost call began, so a frozen Redis holds a
//! request one timeout, never one per command.
//!
//! A call marks when it began ([`within`], or [`within_async`] for an
//! awaited one); a store reads it ([`began`]) to set each command's
//! deadline. A command made outside any call (the policy reader's thread,
//! an admin's) is timed from its own start.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    static BEGAN: Cell<Option<Instant>> = const { Cell::new(None) };
}

#[cfg(feature = "async")]
tokio::task_local! {
    static BEGAN_ASYNC: Instant;
}

/// When the call being made on this thread (or in this task) began.
pub fn began() -> Option<Instant> {
    if let Some(at) = BEGAN.with(Cell::get) {
        return Some(at);
    }
    #[cfg(feature = "async")]
    if let Ok(at) = BEGAN_ASYNC.try_with(|at| *at) {
        return Some(at);
    }
    None
}

/// Runs `f` as one call: begun now, unless a call that encloses it began
/// already (whose time it shares).
pub fn within<T>(f: impl FnOnce() -> T) -> T {
    if BEGAN.with(Cell::get).is_some() {
        return f();
    }
    /// Ends the call, however `f` ends (a panic caught by a binding included).
    struct Ended;
    impl Drop for Ended {
        fn drop(&mut self) {
            BEGAN.with(|b| b.set(None));
        }
    }
    BEGAN.with(|b| b.set(Some(Instant::now())));
    let _ended = Ended;
    f()
}

/// [`within`] for an awaited call: the time is the task's while `work` runs.
#[cfg(feature = "async")]
pub async fn within_async<F: std::future::Future>(work: F) -> F::Output {
    if BEGAN_ASYNC.try_with(|_| ()).is_ok() {
        return work.await;
    }
    BEGAN_ASYNC.scope(Instant::now(), work).await
}

/// A command's deadline: `timeout` after the call began (after now, outside one).
pub fn of(timeout: std::time::Duration) -> Instant {
    began().unwrap_or_else(Instant::now) + timeout
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_inner_call_shares_the_outer_calls_time() {
        assert_eq!(began(), None);
        let outer = within(|| {
            let outer = began().unwrap();
            std::thread::sleep(Duration::from_millis(5));
            within(|| assert_eq!(began(), Some(outer)));
            assert!(of(Duration::from_millis(100)) <= outer + Duration::from_millis(100));
            outer
        });
        assert_eq!(began(), None);
        let again = within(|| began().unwrap());
        assert!(again > outer);
    }
}
