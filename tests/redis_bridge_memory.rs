//! Heap used by the Redis bridge: the peak bytes allocated during an export, beyond what was
//! live before it, over the filter's [`memory_usage`](RedisCuckooFilter::memory_usage), against
//! a real server (see `redis_util`). The measurement uses a counting global allocator, so this
//! binary holds one test only.

mod redis_util;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use atomic_cuckoo::redisbloom::{ExportMode, RedisCuckooFilter};
use redis_util::Server;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged,
// so it upholds GlobalAlloc's contract exactly as System does; the counters are side bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: same contract as our caller's: `layout` has non-zero size.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by System (through us) with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as if old and new blocks coexisted: an upper bound on a copying realloc.
        grew(new_size);
        // SAFETY: `ptr`/`layout` come from a System allocation made through us; `new_size` is
        // the caller's, valid per GlobalAlloc::realloc's contract.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak bytes allocated beyond what was live when `f` started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

/// The bound `export_to`'s docs give for `LoadChunk`: the snapshot (the filter's size) plus
/// one pipeline of at most 16 MiB of chunks.
fn loadchunk_bound(filter: &RedisCuckooFilter) -> f64 {
    let size = filter.memory_usage() as f64;
    1.0 + (16u64 << 20).min(filter.info().size) as f64 / size
}

#[test]
fn exports_stay_within_their_documented_heap_bounds() {
    let Some(server) = Server::start("exports_stay_within_their_documented_heap_bounds") else {
        return;
    };
    let mut conn = server.conn();
    // Before any measurement: the connection's buffers are allocated by its first replies.
    let _: String = redis::cmd("PING").query(&mut conn).unwrap();
    for (capacity, bucket_size) in [(1u64 << 22, 4u64), (1 << 25, 1), (1 << 26, 2)] {
        let filter = RedisCuckooFilter::builder()
            .capacity(capacity)
            .bucket_size(bucket_size)
            .build()
            .unwrap();
        for i in 0..200_000 {
            filter.insert(format!("m{i}")).unwrap();
        }
        let size = filter.memory_usage();
        let mib = filter.info().size as f64 / f64::from(1 << 20);
        for (key, mode) in [
            ("r", ExportMode::Restore { replace: true }),
            ("l", ExportMode::LoadChunkReplace),
        ] {
            let (sent, peak) = peak_during(|| filter.export_to(&mut conn, key, mode).unwrap());
            let ratio = peak as f64 / size as f64;
            println!(
                "{mib:.0} MiB filter ({size} bytes held), {mode:?}: peak {peak} bytes above the \
                 baseline = {ratio:.3}x memory_usage ({sent:?})"
            );
            let bound = match mode {
                ExportMode::Restore { .. } => 2.0,
                _ => loadchunk_bound(&filter),
            };
            assert!(ratio <= bound, "{mode:?}: {ratio:.3}x > {bound:.3}x");
        }
        let (back, peak) = peak_during(|| RedisCuckooFilter::import_from(&mut conn, "r").unwrap());
        assert_eq!(back.info(), filter.info());
        println!(
            "{mib:.0} MiB filter, import (the new filter included): {:.3}x memory_usage",
            peak as f64 / size as f64
        );
    }
}
