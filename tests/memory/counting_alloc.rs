//! The counting global allocator of the `memory` binary (one allocator per binary, so this binary
//! holds only tests that measure; `redis-tests/tests/bridge_memory.rs` includes it too).
//!
//! It counts the bytes live, the most live since a reset, the largest single request since a
//! reset, and the bytes its reallocations copy. `realloc` copies as `GlobalAlloc::realloc`'s
//! default does (allocate anew, copy, free), so a peak counts old and new blocks together. Any
//! single request over 1 GiB is refused: Rust then aborts the process, a failure that no test
//! here can cause without asking for an absurd amount.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Requests larger than this are refused (the allocator returns null).
pub const REFUSE_OVER: usize = 1 << 30;

struct Counting;

/// Bytes live now, the most live since the last reset, the largest single request since then,
/// and bytes copied by reallocations since then.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);
static COPIED: AtomicUsize = AtomicUsize::new(0);

/// Counts a request for `bytes`, whether or not it is granted; `false` if it is refused.
fn asked(bytes: usize) -> bool {
    LARGEST.fetch_max(bytes, Ordering::Relaxed);
    bytes <= REFUSE_OVER
}

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: `alloc`, `alloc_zeroed` and `dealloc` forward to the system allocator unchanged (or
// return null, which GlobalAlloc allows for any request). `realloc` follows GlobalAlloc's
// default: a new block of `new_size` with the old alignment, the smaller of the two sizes
// copied into it, the old block freed with its layout; on failure the old block is left as it
// was and null returned. The counters are bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !asked(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: our caller's contract: `layout` has a non-zero size.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !asked(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as in `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` (through us) with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `new_layout` has a non-zero size (GlobalAlloc::realloc's contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            let kept = layout.size().min(new_size);
            COPIED.fetch_add(kept, Ordering::Relaxed);
            // SAFETY: both blocks are live and distinct, the old one holds `layout.size()`
            // bytes and the new one `new_size`, so `kept` bytes are in bounds of each.
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, kept) };
            // SAFETY: `ptr` was allocated by us with `layout`, and is freed once.
            unsafe { self.dealloc(ptr, layout) };
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test at a time: the counters, the resident set and the huge pages are the whole
/// process's. Every test that measures holds this guard for its whole run.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What `f` cost: (bytes copied by reallocations, peak bytes live above the start, largest
/// single request).
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, usize, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    LARGEST.store(0, Ordering::Relaxed);
    COPIED.store(0, Ordering::Relaxed);
    let out = f();
    let copied = COPIED.load(Ordering::Relaxed);
    let peak = PEAK.load(Ordering::Relaxed) - base;
    (out, copied, peak, LARGEST.load(Ordering::Relaxed))
}

/// Peak bytes allocated beyond what was live when `f` started.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let (out, _, peak, _) = measure(f);
    (out, peak)
}

/// The largest single request `f` made (refused ones included).
pub fn largest_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let (out, _, _, largest) = measure(f);
    (out, largest)
}
