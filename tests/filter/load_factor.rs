//! How full a table gets before its first failed insert, and whether a filter takes the capacity
//! it was built for.

use atomic_cuckoo::{CuckooFilter, Layout};

use crate::common;

/// Fills a table of at least a million slots with distinct keys until the first `Full` and
/// returns the load at that point.
fn first_failure_load(bits: u32, layout: Layout, seed: u64) -> f64 {
    // Enough items that the table has >= 1M slots whatever the sizing load.
    let filter = CuckooFilter::builder()
        .capacity(1_000_000)
        .fingerprint_bits(bits)
        .layout(layout)
        .build()
        .unwrap();
    assert!(filter.capacity() >= 1_000_000, "bits={bits}");
    let keys = common::distinct_keys(seed, filter.slots());
    let mut stored = 0;
    for key in &keys {
        if filter.insert(key).is_err() {
            break;
        }
        stored += 1;
    }
    let load = filter.load_factor();
    println!(
        "bits={bits} {layout:?} slots={} first failure after {stored} items: load {load:.4}",
        filter.slots()
    );
    assert_eq!(filter.len(), stored);
    // The sizing load is under the first failure: the capacity was taken.
    assert!(stored >= filter.capacity(), "bits={bits} {layout:?}");
    load
}

#[test]
fn packed_buckets_fill_past_96_percent() {
    for bits in [10, 13, 17] {
        let seed = common::fixed_seed("load packed", u64::from(bits));
        assert!(first_failure_load(bits, Layout::Packed, seed) >= 0.96);
    }
}

#[test]
fn packed_buckets_of_8_bit_fingerprints_fill_past_95_percent() {
    let seed = common::fixed_seed("load packed 8-bit", 8);
    assert!(first_failure_load(8, Layout::Packed, seed) >= 0.95);
}

#[test]
fn compact_buckets_fill_past_96_percent() {
    for bits in [10, 13, 17] {
        let seed = common::fixed_seed("load compact", u64::from(bits));
        assert!(first_failure_load(bits, Layout::Compact, seed) >= 0.96);
    }
}

#[test]
fn one_word_four_slot_buckets_fill_past_95_percent() {
    let seed = common::fixed_seed("load 16-bit", 16);
    assert!(first_failure_load(16, Layout::OneWord, seed) >= 0.95);
}

#[test]
fn one_word_eight_slot_buckets_fill_past_96_percent() {
    let seed = common::fixed_seed("load 8-bit", 8);
    assert!(first_failure_load(8, Layout::OneWord, seed) >= 0.96);
}

#[test]
fn one_word_five_slot_buckets_fill_past_96_percent() {
    let seed = common::fixed_seed("load 12-bit", 12);
    assert!(first_failure_load(12, Layout::OneWord, seed) >= 0.96);
}

#[test]
fn one_word_two_slot_buckets_fill_past_84_percent() {
    let seed = common::fixed_seed("load 32-bit", 32);
    assert!(first_failure_load(32, Layout::OneWord, seed) >= 0.84);
}

/// A filter built for `n` items takes `n` distinct items, for every width and a range of sizes.
#[test]
fn a_filter_takes_the_capacity_it_was_built_for() {
    let seed = common::seed("capacity promise");
    for (bits, layout) in
        (4..=32).flat_map(|b| [Layout::Packed, Layout::Compact, Layout::OneWord].map(|l| (b, l)))
    {
        for capacity in [1usize, 7, 100, 2_500, 40_000] {
            let filter = CuckooFilter::builder()
                .capacity(capacity)
                .fingerprint_bits(bits)
                .layout(layout)
                .build()
                .unwrap();
            let keys =
                common::distinct_keys(seed ^ (capacity as u64) << 8 ^ u64::from(bits), capacity);
            for (i, key) in keys.iter().enumerate() {
                assert!(
                    filter.insert(key).is_ok(),
                    "bits={bits} {layout:?} capacity={capacity}: insert {i} failed"
                );
            }
            assert_eq!(filter.len(), capacity);
        }
    }
}
