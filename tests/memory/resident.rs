//! The memory a filter keeps resident is the memory `memory_usage` reports: after `clear`,
//! `shrink_to_fit`, a clone and a restore, the process's resident set grows by about that and no
//! more. A new filter's table takes memory as items arrive (unless the builder prefaults it), as
//! does an empty restored one. A growing filter prepares its next level ahead (a background thread allocates it and
//! faults in its pages once the newest level is 90 % full); that level must not outlive a
//! `clear` or a `shrink_to_fit` unseen.
//!
//! Measured as the process's resident set (Linux `/proc/self/status`), so the tests run one at
//! a time, and margins are a few MiB against a prepared level of 67 MiB.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use atomic_cuckoo::CuckooFilter;

use crate::common;
use crate::counting_alloc::one_at_a_time;

const MIB: usize = 1 << 20;
/// What the resident set may exceed `memory_usage` by: huge-page rounding of a 2.1 MiB level
/// (two 2 MiB pages), allocator caches, the test harness.
const SLACK: usize = 8 * MIB;
/// Level 0's capacity; with expansion 32 the next level is 68 MiB of bucket words, large enough
/// to be prepared ahead.
const CAPACITY: usize = 1_000_000;

fn growing_filter() -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(CAPACITY)
        .expansion(32)
        .build()
        .unwrap()
}

/// Fills `filter` to 95 % of its capacity, still on one level, and waits until the level it
/// prepares ahead (32 × about 1.5 MiB) is resident: at least 40 MiB above `base` and its own memory,
/// and no longer growing.
fn fill_until_next_level_is_prepared(filter: &CuckooFilter, base: usize) {
    let items = filter.capacity() as u64 * 95 / 100;
    filter.insert_many(0..items).unwrap();
    assert_eq!(
        filter.levels(),
        1,
        "95 % of the first level's capacity fits in it"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = 0;
    loop {
        let held = common::resident().saturating_sub(base);
        if held >= filter.memory_usage() + 40 * MIB && held == last {
            println!(
                "filled: {} MiB resident above the start, memory_usage {} MiB",
                held / MIB,
                filter.memory_usage() / MIB
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the next level was not prepared: {held} bytes resident above the start, \
             memory_usage {}",
            filter.memory_usage()
        );
        last = held;
        std::thread::sleep(Duration::from_millis(50));
    }
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
fn clear_frees_the_level_prepared_ahead() {
    let _one = one_at_a_time();
    let fresh = growing_filter().memory_usage();
    let base = common::resident();
    let filter = growing_filter();
    fill_until_next_level_is_prepared(&filter, base);
    filter.clear();
    assert_eq!(
        filter.memory_usage(),
        fresh,
        "a cleared filter counts as a fresh one"
    );
    assert_resident_is_counted("after clear", &filter, base);
    // It prepares again when it fills again, and frees that again.
    fill_until_next_level_is_prepared(&filter, base);
    filter.clear();
    assert_resident_is_counted("after the second clear", &filter, base);
}

#[test]
fn shrink_to_fit_frees_the_level_prepared_ahead() {
    let _one = one_at_a_time();
    let base = common::resident();
    let mut filter = growing_filter();
    fill_until_next_level_is_prepared(&filter, base);
    filter.shrink_to_fit();
    assert_eq!(filter.levels(), 1);
    assert_resident_is_counted("after shrink_to_fit", &filter, base);
}

#[test]
fn copies_hold_only_the_levels_they_count() {
    let _one = one_at_a_time();
    let start = common::resident();
    let filter = growing_filter();
    fill_until_next_level_is_prepared(&filter, start);
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
