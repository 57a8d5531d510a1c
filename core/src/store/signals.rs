//! A thread's signals, held back while it waits on Redis.
//!
//! A signal that reaches a thread blocked in `connect`, `read` or `poll`
//! ends that system call with EINTR (Python's and Ruby's handlers are
//! installed without `SA_RESTART`), and the redis crate gives up the call:
//! the check becomes a storage error that `on_error` answers — admitted, by
//! default. An app process takes signals often (SIGCHLD of its children,
//! its own traps, a profiler's timer), so a check waiting on Redis holds
//! them back: each is delivered when the call ends, which the store's
//! timeouts bound. The signals of a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL)
//! are never held.

/// While it lives, the calling thread's signals are held back; dropped, the
/// thread's mask is as it was.
pub(crate) struct SignalsHeld(libc::sigset_t);

impl SignalsHeld {
    /// Holds this thread's signals back until the value is dropped.
    pub(crate) fn now() -> SignalsHeld {
        // SAFETY: both sets are local and initialised (by sigfillset and by
        // pthread_sigmask) before they are read.
        unsafe {
            let mut held: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut held);
            for fault in [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL] {
                libc::sigdelset(&mut held, fault);
            }
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &held, &mut before);
            SignalsHeld(before)
        }
    }
}

impl Drop for SignalsHeld {
    fn drop(&mut self) {
        // SAFETY: restores the mask read when the signals were held.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}
