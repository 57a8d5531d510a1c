//! State that belongs to one process: rebuilt, not inherited, after `fork`.
//!
//! A pre-forking server (gunicorn `--preload`, puma `preload_app!`, uWSGI,
//! Celery's prefork pool, `multiprocessing` with fork) builds a limiter in
//! its master, then forks workers. The child gets a copy of the master's
//! memory but none of its threads, and shares its sockets: a connection pool
//! copied that way waits forever on worker threads that do not exist, and two
//! processes reading one socket read each other's replies. So whatever holds
//! connections, threads or locks is kept in a [`ProcessLocal`], which a child
//! rebuilds the first time it uses it. The copy inherited from the parent is
//! never touched again (its sockets, threads and locks are the parent's); it
//! is leaked, once per fork.
//!
//! A fork is seen through a `pthread_atfork` child handler, registered once
//! by the first [`ProcessLocal`]: `fork()` from Python (`os.fork`,
//! `multiprocessing`), Ruby (`Process.fork`) or C runs it, and it only bumps
//! an atomic counter, so a check pays one atomic load to know it is in the
//! process that built its state.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Once;

/// How many times this process's ancestors and itself have been forked into
/// a child: bumped in the child by the `pthread_atfork` handler.
static FORKS: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

extern "C" fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::SeqCst);
}

/// Registers the at-fork handler once per process (children inherit it).
fn watch_forks() {
    REGISTER.call_once(|| {
        // SAFETY: the handler only bumps an atomic, which is async-signal-safe.
        let failed = unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
        if failed != 0 {
            log::warn!("pthread_atfork failed ({failed}): ratekeeper cannot tell a forked child");
        }
    });
}

/// The fork generation of the running process: it changes in a forked child.
pub fn generation() -> u64 {
    FORKS.load(Ordering::Acquire)
}

struct Slot<T> {
    generation: u64,
    value: T,
}

/// A value built anew in each process that uses it (see the module docs).
pub struct ProcessLocal<T> {
    slot: AtomicPtr<Slot<T>>,
    make: Box<dyn Fn() -> T + Send + Sync>,
}

impl<T> ProcessLocal<T> {
    /// Builds the value now, and again in any forked child that asks for it.
    pub fn new(make: impl Fn() -> T + Send + Sync + 'static) -> ProcessLocal<T> {
        watch_forks();
        let slot = Box::new(Slot {
            generation: generation(),
            value: make(),
        });
        ProcessLocal {
            slot: AtomicPtr::new(Box::into_raw(slot)),
            make: Box::new(make),
        }
    }

    /// The value of this process: the parent's copy is replaced by a fresh
    /// one the first time a forked child asks.
    pub fn get(&self) -> &T {
        let now = generation();
        loop {
            let current = self.slot.load(Ordering::Acquire);
            // SAFETY: a slot is freed only by `drop`, which takes `&mut self`.
            let slot = unsafe { &*current };
            if slot.generation == now {
                return &slot.value;
            }
            let fresh = Box::into_raw(Box::new(Slot {
                generation: now,
                value: (self.make)(),
            }));
            match self
                .slot
                .compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // The parent's slot is leaked: its threads, sockets and locks
                // are not this process's to use, close or wait on.
                // SAFETY: `fresh` is now owned by `self.slot`.
                Ok(_) => return unsafe { &(*fresh).value },
                // Another thread of this child installed its own first.
                // SAFETY: `fresh` was never shared.
                Err(_) => drop(unsafe { Box::from_raw(fresh) }),
            }
        }
    }
}

impl<T> Drop for ProcessLocal<T> {
    fn drop(&mut self) {
        let current = *self.slot.get_mut();
        // SAFETY: no other reference to the slot outlives `&mut self`.
        let slot = unsafe { Box::from_raw(current) };
        if slot.generation != generation() {
            // built by the parent: leave its resources alone
            std::mem::forget(slot);
        }
    }
}

// SAFETY: the slot is only read through `&T` (so `T: Sync` is needed) and
// built or dropped from any thread (so `T: Send`).
unsafe impl<T: Send + Sync> Sync for ProcessLocal<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Send for ProcessLocal<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_fork_runs_the_handler() {
        let local = ProcessLocal::new(std::process::id);
        let parent = *local.get();
        // SAFETY: the child only reads atomics and calls getpid, then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // the child builds its own value once, and keeps it
            let ok = *local.get() == std::process::id()
                && *local.get() != parent
                && std::ptr::eq(local.get(), local.get());
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just made.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(*local.get(), parent);
    }
}
