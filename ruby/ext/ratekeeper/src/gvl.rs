//! Running Rust without the GVL, so other Ruby threads run while the core waits on Redis.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f` without the GVL; `f` must not touch any Ruby object. A panic in
/// `f` is caught there (never unwinding through Ruby's C frames) and returned.
pub fn without_gvl<F, R>(f: F) -> std::thread::Result<R>
where
    F: FnOnce() -> R,
{
    struct Call<F, R> {
        f: Option<F>,
        out: Option<std::thread::Result<R>>,
    }

    unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(data: *mut c_void) -> *mut c_void {
        // SAFETY: `data` is the `Call` below, alive for the whole call.
        let call = unsafe { &mut *(data as *mut Call<F, R>) };
        if let Some(f) = call.f.take() {
            call.out = Some(catch_unwind(AssertUnwindSafe(f)));
        }
        std::ptr::null_mut()
    }

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
