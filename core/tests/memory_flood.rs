//! A flood of 2,000,000 distinct keys against the memory store stays within
//! its `max_keys` bound and a fixed memory budget (live heap bytes, counted
//! by this test binary's allocator).

use ratekeeper_core::store::Request;
use ratekeeper_core::{LogStore, MemoryStore, Mode, RuleSet};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: defers to the system allocator, only counting bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MAX_KEYS: usize = 100_000;
const BUDGET_BYTES: isize = 48 << 20;

#[test]
fn two_million_distinct_keys_stay_within_bounds() {
    let before = LIVE.load(Ordering::Relaxed);
    let store = MemoryStore::new(MAX_KEYS);
    let rules = RuleSet::parse("10/minute; 100/day").unwrap();
    let mut peak = 0;
    for i in 0..2_000_000u64 {
        // keys an attacker controls: long-ish and all different, all in one day
        let key = format!("flood:{i:016x}:{}", "x".repeat(40));
        let d = store
            .apply(&Request::plain(
                key.as_bytes(),
                &rules,
                1,
                Some(1_700_000_000_000 + i / 50),
                Mode::Check,
            ))
            .unwrap();
        assert!(d.allowed);
        if i % 100_000 == 0 {
            peak = peak.max(LIVE.load(Ordering::Relaxed) - before);
            assert!(
                store.len() <= MAX_KEYS + 32,
                "{} keys held after {i}",
                store.len()
            );
        }
    }
    let live = LIVE.load(Ordering::Relaxed) - before;
    peak = peak.max(live);
    println!(
        "{} keys held; live heap {} MiB, peak {} MiB",
        store.len(),
        live >> 20,
        peak >> 20
    );
    assert!(store.len() <= MAX_KEYS + 32, "{} keys held", store.len());
    assert!(
        peak <= BUDGET_BYTES,
        "peak heap {peak} bytes over the {BUDGET_BYTES} budget"
    );
}
