//! Running Rust without the GVL, so other Ruby threads run while the core
//! waits on Redis; and waits that Ruby can interrupt (`Thread#raise`,
//! `Timeout`, Ctrl-C, `Thread#kill`), for `acquire`.

use magnus::{Error, Ruby};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// A call made without the GVL: the closure, then its outcome.
struct Call<F, R> {
    f: Option<F>,
    out: Option<std::thread::Result<R>>,
}

/// Runs a [`Call`]'s closure, catching a panic there (it never unwinds
/// through Ruby's C frames).
unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(data: *mut c_void) -> *mut c_void {
    // SAFETY: `data` is the caller's `Call`, alive for the whole call.
    let call = unsafe { &mut *(data as *mut Call<F, R>) };
    if let Some(f) = call.f.take() {
        call.out = Some(catch_unwind(AssertUnwindSafe(f)));
    }
    std::ptr::null_mut()
}

/// Runs `f` without the GVL; `f` must not touch any Ruby object. A panic in
/// `f` is caught there (never unwinding through Ruby's C frames) and returned.
pub fn without_gvl<F, R>(f: F) -> std::thread::Result<R>
where
    F: FnOnce() -> R,
{
    let mut call = Call {
        f: Some(f),
        out: None,
    };
    // SAFETY: the trampoline only touches `call`, which outlives the call; no
    // unblocking function is given, so the call runs to completion.
    unsafe {
        rb_sys::rb_thread_call_without_gvl(
            Some(trampoline::<F, R>),
            &mut call as *mut Call<F, R> as *mut c_void,
            None,
            std::ptr::null_mut(),
        );
    }
    call.out
        .unwrap_or_else(|| Err(Box::new("the call without the GVL did not run")))
}

/// Wakes a wait made without the GVL when Ruby interrupts its thread: Ruby
/// calls [`wake`] (the unblocking function) from the interrupting thread.
#[derive(Default)]
pub struct Wakeup {
    woken: Mutex<bool>,
    signal: Condvar,
}

impl Wakeup {
    /// Sleeps until `until`, or until Ruby interrupts this thread: `true`
    /// when it did (the interruption is then taken).
    pub fn sleep_until(&self, until: Instant) -> bool {
        let mut woken = self.woken.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if *woken {
                *woken = false;
                return true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            woken = self
                .signal
                .wait_timeout(woken, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The unblocking function Ruby calls to interrupt a thread waiting in
/// [`without_gvl_interruptible`].
unsafe extern "C" fn wake(data: *mut c_void) {
    // SAFETY: `data` is the `Wakeup` given with the call, alive until it returns.
    let wakeup = unsafe { &*(data as *const Wakeup) };
    *wakeup.woken.lock().unwrap_or_else(|p| p.into_inner()) = true;
    wakeup.signal.notify_all();
}

/// Runs `f` without the GVL; when Ruby interrupts this thread meanwhile,
/// `wakeup` is woken (`f` sleeps on it and hears Ruby with
/// [`interrupts_with_gvl`]). Afterwards Ruby's pending interrupts run with
/// the GVL held, so what `Thread#raise`, `Timeout` or Ctrl-C sent is
/// returned as the error (never raised across Rust frames).
pub fn without_gvl_interruptible<F, R>(
    ruby: &Ruby,
    wakeup: &Wakeup,
    f: F,
) -> Result<std::thread::Result<R>, Error>
where
    F: FnOnce() -> R,
{
    let mut call = Call {
        f: Some(f),
        out: None,
    };
    loop {
        // SAFETY: the trampoline only touches `call` and `wake` only
        // `wakeup`, both alive for the whole call. The `2` variant neither
        // runs `f` when an interrupt is pending nor raises afterwards:
        // interrupts are run below, through magnus, as a Result.
        unsafe {
            rb_sys::rb_thread_call_without_gvl2(
                Some(trampoline::<F, R>),
                &mut call as *mut Call<F, R> as *mut c_void,
                Some(wake),
                wakeup as *const Wakeup as *mut c_void,
            );
        }
        ruby.thread_check_ints()?;
        if let Some(out) = call.out.take() {
            return Ok(out);
        }
        // an interrupt that raised nothing (a signal's trap ran): `f` not run yet
    }
}

/// From a thread that released the GVL: takes the GVL and runs Ruby's
/// pending interrupts (a trap handler, or what `Thread#raise`, `Timeout` or
/// Ctrl-C sent, as the error).
pub fn interrupts_with_gvl() -> Result<(), Error> {
    unsafe extern "C" fn check(data: *mut c_void) -> *mut c_void {
        // SAFETY: `data` is `out` below, alive for the whole call.
        let out = unsafe { &mut *(data as *mut Option<Result<(), Error>>) };
        *out = Some(match Ruby::get() {
            Ok(ruby) => ruby.thread_check_ints(),
            Err(_) => Ok(()),
        });
        std::ptr::null_mut()
    }

    let mut out: Option<Result<(), Error>> = None;
    // SAFETY: called only without the GVL, from a Ruby thread; `check` only
    // touches `out`.
    unsafe {
        rb_sys::rb_thread_call_with_gvl(
            Some(check),
            &mut out as *mut Option<Result<(), Error>> as *mut c_void,
        );
    }
    out.unwrap_or(Ok(()))
}
