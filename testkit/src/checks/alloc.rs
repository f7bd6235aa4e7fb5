//! Heap accounting for the "no allocation beyond input-proportional
//! bounds" property: a thin wrapper over the system allocator that counts
//! the bytes live on the threads that ask for it, and their peak.
//!
//! The crate root of each fuzz target and of the corpus test installs
//! [`Counting`] as the global allocator. Decoders run single-threaded
//! in the checks (worker counts 0 or 1, inputs below the parallel-load
//! thresholds), so a thread-local count sees all their allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The counting allocator.
pub struct Counting;

thread_local! {
    static TRACK: Cell<bool> = const { Cell::new(false) };
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn account(delta: isize) {
    // `try_with`: allocations during thread teardown must not panic.
    let _ = TRACK.try_with(|track| {
        if track.get() {
            let _ = CURRENT.try_with(|current| {
                let now = current.get() + delta;
                current.set(now);
                let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
            });
        }
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the accounting
// only touches const-initialised thread-local cells (no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        account(-(layout.size() as isize));
        System.dealloc(ptr, layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        account(new_size as isize - layout.size() as isize);
        System.realloc(ptr, layout, new_size)
    }
}

/// Runs `f` and returns its result with the peak of the bytes it had
/// allocated and not yet freed (on this thread) at any moment.
pub fn peak_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let was = TRACK.with(|t| t.replace(true));
    let base = CURRENT.with(|c| c.get());
    let outer_peak = PEAK.with(|p| p.replace(base));
    let result = f();
    let peak = PEAK.with(|p| p.get()) - base;
    PEAK.with(|p| p.set(outer_peak.max(p.get())));
    TRACK.with(|t| t.set(was));
    (result, peak.max(0) as usize)
}

/// Fixed allowance every decode may use whatever its input (tables,
/// error texts, a first block's buffers).
pub const BASE_BYTES: usize = 4 << 20;

/// Panics when `peak` exceeds [`BASE_BYTES`] plus `per_input_byte` times
/// the input's length.
pub fn assert_bounded(what: &str, peak: usize, input_len: usize, per_input_byte: usize) {
    let cap = BASE_BYTES + per_input_byte * input_len;
    assert!(
        peak <= cap,
        "{what}: peak heap {peak} bytes for {input_len} input bytes (cap {cap})"
    );
}
