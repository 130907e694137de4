//! The memory a filter keeps resident is the memory `memory_usage` reports: after
//! a doubling, a clone and a restore, the process's resident set grows by about that and no
//! more. A new filter's table takes memory as items arrive (unless the builder prefaults it), as
//! does an empty restored one.
//!
//! Measured as the process's resident set (Linux `/proc/self/status`), so the tests run one at
//! a time, and margins are a few MiB against tables of tens of MiB.
#![cfg(target_os = "linux")]

use atomic_cuckoo::CuckooFilter;

use crate::common;
use crate::counting_alloc::one_at_a_time;

const MIB: usize = 1 << 20;
/// What the resident set may exceed `memory_usage` by: huge-page rounding of the table's
/// segments (a 2 MiB page each), allocator caches, the test harness.
const SLACK: usize = 8 * MIB;

/// A growable filter grown through a few doublings to tens of MiB, the last one in progress.
fn grown_filter() -> CuckooFilter {
    let filter = CuckooFilter::builder()
        .capacity(500_000)
        // Wide lanes: tens of MiB from a few million items.
        .false_positive_rate(1e-6)
        .growable(true)
        .build()
        .unwrap();
    let mut i = 0u64;
    while filter.doublings() < 3 || !filter.is_doubling() {
        filter.insert(&i).unwrap();
        i += 1;
    }
    println!(
        "{i} items, {} doublings, memory_usage {} MiB",
        filter.doublings(),
        filter.memory_usage() / MIB
    );
    assert!(filter.memory_usage() >= 12 * MIB);
    filter
}

/// Asserts that the resident set grew by at most `filter`'s `memory_usage` (plus `SLACK`) since
/// `base`.
fn assert_resident_is_counted(what: &str, filter: &CuckooFilter, base: usize) {
    let held = common::resident().saturating_sub(base);
    let counted = filter.memory_usage();
    println!("{what}: {held} bytes resident above the start, memory_usage {counted}");
    assert!(
        held <= counted + SLACK,
        "{what}: {} MiB resident above the start, memory_usage {} MiB",
        held / MIB,
        counted / MIB
    );
}

#[test]
fn a_grown_filter_and_its_copies_hold_only_what_they_count() {
    let _one = one_at_a_time();
    let start = common::resident();
    let filter = grown_filter();
    assert_resident_is_counted("grown", &filter, start);
    let bytes = filter.to_bytes();

    let base = common::resident();
    let clone = filter.clone();
    assert_resident_is_counted("clone", &clone, base);
    drop(clone);

    let base = common::resident();
    let restored = CuckooFilter::from_bytes(&bytes).unwrap();
    assert_resident_is_counted("from_bytes", &restored, base);
    drop(restored);

    let base = common::resident();
    let streamed = CuckooFilter::read_from(&bytes[..]).unwrap();
    assert_resident_is_counted("read_from", &streamed, base);
}

/// Restoring an empty filter of 29 MiB of bucket words with `from_bytes` touches none of them:
/// it writes only the non-zero words into memory the kernel zeroes on first touch, so the
/// resident set grows by a few MiB at most (the snapshot bytes are made and held before the
/// measurement). `read_from` is not measured here: its buffer, which grows as data arrives,
/// goes back to the allocator, which may keep it resident.
#[test]
fn restoring_an_empty_filter_keeps_its_buckets_off_the_resident_set() {
    let _one = one_at_a_time();
    let filter = CuckooFilter::builder()
        .capacity(24_000_000)
        .huge_pages(false)
        .build()
        .unwrap();
    let bytes = filter.to_bytes();
    drop(filter);
    assert!(bytes.len() > 28 * MIB, "{} bytes", bytes.len());
    let base = common::resident();
    let restored = CuckooFilter::from_bytes(&bytes).unwrap();
    let grown = common::resident().saturating_sub(base);
    println!(
        "from_bytes: resident set grew by {} KiB for {} MiB of buckets",
        grown >> 10,
        restored.memory_usage() / MIB
    );
    assert!(grown < SLACK / 2, "{grown} bytes resident");
    assert!(restored.is_empty() && !restored.contains(&1u64));
}

/// Bucket words of the filters built below: 24M items at 1 %, 29 MiB.
const LARGE_CAPACITY: usize = 24_000_000;

/// `build()` with the defaults (huge pages advised) writes none of the table: the kernel backs
/// each page when an insert first touches it, so a generously sized filter costs its memory
/// only as it fills, and building it takes no time proportional to its size.
#[test]
fn build_leaves_the_table_off_the_resident_set() {
    let _one = one_at_a_time();
    for huge_pages in [true, false] {
        let base = common::resident();
        let filter = CuckooFilter::builder()
            .capacity(LARGE_CAPACITY)
            .huge_pages(huge_pages)
            .build()
            .unwrap();
        let grown = common::resident().saturating_sub(base);
        println!(
            "huge pages {huge_pages}: build() grew the resident set by {} KiB for {} MiB",
            grown >> 10,
            filter.memory_usage() / MIB
        );
        assert!(filter.memory_usage() > 28 * MIB);
        assert!(
            grown < SLACK / 2,
            "huge pages {huge_pages}: {grown} bytes resident after build()"
        );
        // The first inserts take the memory they touch, and the table works as usual.
        filter.insert_many(0..1_000_000u64).unwrap();
        assert!((0..1_000_000u64).all(|k| filter.contains(&k)));
    }
}

/// With `prefault(true)`, `build()` makes the whole table resident, on huge pages or not: the
/// resident set grows by about the filter's `memory_usage`.
#[test]
fn prefault_makes_the_whole_table_resident_at_build() {
    let _one = one_at_a_time();
    for huge_pages in [true, false] {
        let base = common::resident();
        let filter = CuckooFilter::builder()
            .capacity(LARGE_CAPACITY)
            .huge_pages(huge_pages)
            .prefault(true)
            .build()
            .unwrap();
        let grown = common::resident().saturating_sub(base);
        let counted = filter.memory_usage();
        println!(
            "huge pages {huge_pages}, prefault: build() grew the resident set by {} KiB, \
             memory_usage {} KiB",
            grown >> 10,
            counted >> 10
        );
        assert!(
            grown + SLACK / 2 >= counted,
            "huge pages {huge_pages}: {} MiB resident after build(), memory_usage {} MiB",
            grown / MIB,
            counted / MIB
        );
    }
}
