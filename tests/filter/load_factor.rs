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

/// A filter built for `n` items takes `n` distinct items, for every width and a range of sizes
/// (but 4 bits in four-lane buckets, which promise no capacity: see
/// `four_bit_four_lane_filters_may_fall_short_of_capacity_and_keep_every_item`).
#[test]
fn a_filter_takes_the_capacity_it_was_built_for() {
    let seed = common::seed("capacity promise");
    let promised = |&(bits, layout): &(u32, Layout)| bits > 4 || layout == Layout::OneWord;
    for (bits, layout) in (4..=32)
        .flat_map(|b| [Layout::Packed, Layout::Compact, Layout::OneWord].map(|l| (b, l)))
        .filter(promised)
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

/// The narrow widths that promise their capacity (5 to 7 bits in every layout, 4 bits in
/// one-word buckets) take `capacity()` distinct items, not just the capacity asked for, in
/// small and mid-sized tables, for a few item sets each.
#[test]
fn narrow_fingerprints_take_their_capacity() {
    let seed = common::seed("narrow capacity");
    let widths = [(4, Layout::OneWord)].into_iter().chain(
        (5..=7).flat_map(|b| [Layout::Packed, Layout::Compact, Layout::OneWord].map(|l| (b, l))),
    );
    for (bits, layout) in widths {
        for capacity in [64usize, 1_000, 20_000] {
            for set in 0..3u64 {
                let filter = CuckooFilter::builder()
                    .capacity(capacity)
                    .fingerprint_bits(bits)
                    .layout(layout)
                    .build()
                    .unwrap();
                let set_seed = seed ^ (capacity as u64) << 16 ^ u64::from(bits) << 8 ^ set;
                for (i, key) in common::distinct_keys(set_seed, filter.capacity())
                    .iter()
                    .enumerate()
                {
                    if let Err(e) = filter.insert(key) {
                        panic!(
                            "bits={bits} {layout:?} capacity({capacity}) (capacity() {}): \
                             insert {i} failed with {e:?} (item set {set_seed})",
                            filter.capacity()
                        );
                    }
                }
                assert_eq!(filter.len(), filter.capacity());
            }
        }
    }
}

/// 4-bit fingerprints in four-lane buckets may fall short of `capacity()` (as `InsertError`'s
/// docs say): a known item set whose 19,412th insert fails, with 20,002 promised. The failed
/// insert changes nothing: every item stored before is still found. (If a change to the
/// search makes this set fit, the docs' measurements need measuring again.)
#[test]
fn four_bit_four_lane_filters_may_fall_short_of_capacity_and_keep_every_item() {
    let set_seed = 2958u64.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xabc;
    for layout in [Layout::Packed, Layout::Compact] {
        let filter = CuckooFilter::builder()
            .capacity(20_000)
            .fingerprint_bits(4)
            .layout(layout)
            .build()
            .unwrap();
        let keys = common::distinct_keys(set_seed, filter.capacity());
        let failed = keys.iter().position(|k| filter.insert(k).is_err());
        println!(
            "{layout:?}: first failure at insert {failed:?} of capacity() {}, load {:.3}",
            filter.capacity(),
            filter.load_factor()
        );
        let failed = failed.expect("this item set falls short of capacity()");
        assert!(failed < filter.capacity());
        assert_eq!(filter.len(), failed);
        assert!(keys[..failed].iter().all(|k| filter.contains(k)));
    }
}
