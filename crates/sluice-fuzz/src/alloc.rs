//! A global allocator that counts, per thread, the bytes live and their peak, so a harness
//! can tell how much one parse took at most.
//!
//! Tests run on many threads at once; counting per thread keeps one target's figure free of
//! another's. Memory freed on another thread than the one that took it makes the figures
//! drift a little; they are read as a bound, never as an exact amount.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// The system allocator, counting. A test binary installs it with
/// `#[global_allocator] static A: sluice_fuzz::Counting = sluice_fuzz::Counting;`.
pub struct Counting;

fn grew(by: isize) {
    // `try_with`: a thread being torn down has no counters left, and loses nothing by it.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + by;
        live.set(now);
        let _ = PEAK.try_with(|peak| {
            if now > peak.get() {
                peak.set(now);
            }
        });
    });
}

fn size(layout: Layout) -> isize {
    isize::try_from(layout.size()).unwrap_or(isize::MAX)
}

// SAFETY: every call is passed to `System` unchanged; only the counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(size(layout));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(size(layout));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`, as the caller promises.
        unsafe { System.dealloc(ptr, layout) };
        grew(-size(layout));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the caller promises for `realloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grew(isize::try_from(new_size).unwrap_or(isize::MAX) - size(layout));
        }
        p
    }
}

/// Runs `f` and returns what it gave with the most bytes it held at once beyond what the
/// thread held before (0 unless [`Counting`] is the global allocator).
pub fn peak_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    let peak = PEAK.with(Cell::get);
    (out, usize::try_from(peak - start).unwrap_or(0))
}
