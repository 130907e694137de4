//! `read_from` under an allocator whose `realloc` copies (as `GlobalAlloc::realloc`'s default
//! does: allocate anew, copy, free): a snapshot of `N` bytes is copied a bounded number of times,
//! not once per growth step (which would be quadratic), and a header that claims a huge table
//! is refused without that table being asked for.
//!
//! The allocator counts what it is asked for and what its reallocations copy; it is global to
//! this binary, so its tests run one at a time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use atomic_cuckoo::{CuckooFilter, PersistError};

const MIB: usize = 1 << 20;

/// Allocates through `System`, and reallocates by allocating, copying and freeing.
struct CopyingRealloc;

/// Bytes live now, the most live since the last reset, the largest single request since then,
/// and bytes copied by reallocations since then.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);
static COPIED: AtomicUsize = AtomicUsize::new(0);

/// Counts a request for `bytes`, whether or not it is granted.
fn asked(bytes: usize) {
    LARGEST.fetch_max(bytes, Ordering::Relaxed);
}

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: `alloc`, `alloc_zeroed` and `dealloc` forward to the system allocator unchanged.
// `realloc` follows GlobalAlloc's default: a new block of `new_size` with the old alignment from
// `System`, the smaller of the two sizes copied into it, the old block freed with its layout;
// on failure the old block is left as it was and null returned. The counters are bookkeeping.
unsafe impl GlobalAlloc for CopyingRealloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        asked(layout.size());
        // SAFETY: our caller's contract: `layout` has a non-zero size.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        asked(layout.size());
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
        // SAFETY: `new_layout` has a non-zero size.
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
static ALLOCATOR: CopyingRealloc = CopyingRealloc;

/// One test at a time: the counters are the whole process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What `f` cost: (bytes copied by reallocations, peak bytes live above the start, largest
/// single request).
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, usize, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    LARGEST.store(0, Ordering::Relaxed);
    COPIED.store(0, Ordering::Relaxed);
    let out = f();
    let copied = COPIED.load(Ordering::Relaxed);
    let peak = PEAK.load(Ordering::Relaxed) - base;
    (out, copied, peak, LARGEST.load(Ordering::Relaxed))
}

#[test]
fn read_from_copies_a_snapshot_a_bounded_number_of_times() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // About 26 MiB of snapshot, in one level; the table's content does not matter here.
    let filter = CuckooFilter::builder()
        .capacity(16_000_000)
        .huge_pages(false)
        .build()
        .unwrap();
    filter.insert_many(0..100_000u32).unwrap();
    let bytes = filter.to_bytes();
    drop(filter);
    let n = bytes.len();

    let (restored, copied, peak, _) = measure(|| CuckooFilter::read_from(&bytes[..]).unwrap());
    println!(
        "read_from of {} MiB: {} MiB copied by reallocations ({:.2} N), peak {} MiB live",
        n / MIB,
        copied / MIB,
        copied as f64 / n as f64,
        peak / MIB
    );
    assert_eq!(restored.len(), 100_000);
    assert!(
        copied <= 3 * n,
        "read_from copied {copied} bytes in reallocations for a {n}-byte snapshot"
    );
    // The table, plus the block it grew from while both were live, plus buffers.
    assert!(
        peak <= 2 * n + 2 * MIB,
        "peak {peak} bytes for a {n}-byte snapshot"
    );
}

/// A one-level snapshot of a filter that may grow 65,536-fold in one step, with 16-bit
/// fingerprints in every level: level 1 then has exactly 2^16 times level 0's buckets.
fn snapshot_and_level_1_buckets() -> (Vec<u8>, u64) {
    let filter = CuckooFilter::builder()
        .capacity(50_000)
        .fingerprint_bits(16)
        .expansion(1 << 16)
        .max_levels(2)
        .build()
        .unwrap();
    let level_0_buckets = filter.slots() as u64 / 4;
    (filter.to_bytes(), level_0_buckets << 16)
}

/// `snapshot` with its checksum cut off and a second level announced: the level count (bytes
/// 28..32) set to 2, and a level header of `buckets` 16-bit buckets appended.
fn claim_a_second_level(mut snapshot: Vec<u8>, buckets: u64) -> Vec<u8> {
    snapshot.truncate(snapshot.len() - 8);
    snapshot[28..32].copy_from_slice(&2u32.to_le_bytes());
    snapshot.extend_from_slice(&16u64.to_le_bytes());
    snapshot.extend_from_slice(&buckets.to_le_bytes());
    snapshot.extend_from_slice(&0u64.to_le_bytes());
    snapshot
}

#[test]
fn a_claimed_table_is_allocated_only_as_its_bytes_arrive() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (snapshot, buckets) = snapshot_and_level_1_buckets();
    println!(
        "level 1 claims {buckets} buckets ({} GiB)",
        (buckets * 8) >> 30
    );
    assert!(
        buckets * 8 >= 4 << 30,
        "a claim far beyond this test's memory"
    );

    // Nothing after the level header.
    let forged = claim_a_second_level(snapshot.clone(), buckets);
    let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
    println!("no data: {result:?}, peak {peak} bytes, largest request {largest}");
    assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
    assert!(largest <= 2 * MIB, "asked for {largest} bytes at once");

    // 16 MiB of empty buckets, then the end: memory follows what was read.
    let mut forged = claim_a_second_level(snapshot.clone(), buckets);
    let data = 16 * MIB;
    forged.resize(forged.len() + data, 0);
    let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
    println!("{data} bytes of data: {result:?}, peak {peak} bytes, largest request {largest}");
    assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
    assert!(
        largest <= 2 * data + 2 * MIB,
        "asked for {largest} bytes at once after {data} bytes"
    );
    assert!(peak <= 3 * data + 4 * MIB, "peak {peak} after {data} bytes");

    // A bucket count beyond any table is refused from the level header alone.
    let forged = claim_a_second_level(snapshot, 1 << 60);
    let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
    assert!(
        matches!(result, Err(PersistError::InvalidParameter { .. })),
        "{result:?}"
    );
    assert!(largest <= 2 * MIB && peak <= 2 * MIB, "{largest} {peak}");
}

/// A claimed level fed data just around each doubling of its room (1 MiB, 2 MiB, 4 MiB, a
/// word either side): the room asked for stays within twice what was supplied plus the first
/// 1 MiB step; the peak within three times (old and new block side by side while this test's
/// copying allocator reallocates) plus 2 MiB.
#[test]
fn a_claimed_table_gets_room_for_at_most_twice_its_bytes_around_each_doubling() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (snapshot, buckets) = snapshot_and_level_1_buckets();
    for step in [MIB, 2 * MIB, 4 * MIB] {
        for data in [step - 8, step, step + 8] {
            let mut forged = claim_a_second_level(snapshot.clone(), buckets);
            forged.resize(forged.len() + data, 0);
            let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
            println!("{data} bytes of data: peak {peak}, largest request {largest}");
            assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
            assert!(
                largest <= 2 * data + MIB,
                "asked for {largest} bytes at once after {data} bytes"
            );
            assert!(peak <= 3 * data + 2 * MIB, "peak {peak} after {data} bytes");
        }
    }
}
