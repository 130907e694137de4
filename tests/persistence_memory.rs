//! Restoring never allocates more than the data it has read justifies: a header that claims a
//! huge table costs nothing, and a real restore needs the filter's size plus a small constant.
//! The measurement uses a counting global allocator, so this binary holds one test only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use atomic_cuckoo::{CuckooFilter, PersistError};

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

#[test]
fn restoring_allocates_only_what_the_data_justifies() {
    const MIB: usize = 1 << 20;

    // 1. A real restore of a million-item filter: its size plus a small constant.
    let filter = CuckooFilter::with_capacity(1_000_000);
    for i in 0..1_000_000u64 {
        filter.insert(&i).unwrap();
    }
    let bytes = filter.to_bytes();
    let (restored, peak) = peak_during(|| CuckooFilter::from_bytes(&bytes).unwrap());
    println!(
        "restore of {} bytes: peak {peak} bytes allocated, filter holds {}",
        bytes.len(),
        restored.memory_usage()
    );
    // from_bytes: the table, allocated once, plus the 1 MiB read buffer.
    assert!(
        peak <= restored.memory_usage() + MIB + 64 * 1024,
        "peak {peak}"
    );
    // read_from grows the table as data arrives; reallocations are counted here as if they
    // copied (old and new block both live), an upper bound.
    let (restored_stream, peak) = peak_during(|| CuckooFilter::read_from(&bytes[..]).unwrap());
    println!("stream restore: peak {peak} bytes allocated (reallocations counted as copies)");
    assert!(
        peak <= 2 * restored_stream.memory_usage() + MIB + 64 * 1024,
        "stream peak {peak}"
    );
    drop((restored, restored_stream));

    // 2. A header whose plan and first level claim a table of 10^9 items (1.7 GB) behind a few
    // bytes of data. Level shapes follow from the plan, so take the bucket count from a filter
    // built for that capacity (its memory is reserved, never touched) and patch a small
    // snapshot's capacity (bytes 40..48) and first level's buckets (72..80).
    const HUGE_ITEMS: usize = 1_000_000_000;
    let huge_buckets = {
        let big = CuckooFilter::with_capacity(HUGE_ITEMS);
        // Four fingerprints a bucket.
        big.slots() / 4
    };
    let small = CuckooFilter::with_capacity(10);
    let mut huge = small.to_bytes();
    huge[40..48].copy_from_slice(&(HUGE_ITEMS as u64).to_le_bytes());
    huge[72..80].copy_from_slice(&(huge_buckets as u64).to_le_bytes());
    let (result, peak) = peak_during(|| CuckooFilter::from_bytes(&huge));
    assert!(matches!(result, Err(PersistError::Truncated)));
    assert!(
        peak < 64 * 1024,
        "from_bytes allocated {peak} bytes before refusing"
    );
    let (result, peak) = peak_during(|| CuckooFilter::read_from(&huge[..]));
    assert!(matches!(result, Err(PersistError::Truncated)));
    assert!(
        peak <= 3 * MIB,
        "read_from allocated {peak} bytes for a {}-byte input",
        huge.len()
    );
    println!("huge-table header: refused after at most {peak} bytes allocated");
}
