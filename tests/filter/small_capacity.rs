//! The capacity promise of fixed filters at the smallest sizes: `capacity() - len()` more
//! distinct items always fit (`CuckooFilter::capacity`), whatever the items, for every layout
//! and a few widths, checked over many item sets.

use atomic_cuckoo::{CuckooFilter, Layout};

use crate::common::{distinct_keys, seed};

#[test]
fn small_fixed_filters_take_their_capacity_of_distinct_items_in_every_item_set() {
    let seed = seed("small fixed capacity promise");
    let mut failures = Vec::new();
    for layout in [Layout::Packed, Layout::Compact, Layout::OneWord] {
        for rate in [0.01, 1e-4] {
            for capacity in [1, 2, 3, 5, 8, 13, 40, 100] {
                for set in 0..60u64 {
                    let filter = CuckooFilter::builder()
                        .capacity(capacity)
                        .false_positive_rate(rate)
                        .layout(layout)
                        .build()
                        .unwrap();
                    let room = filter.capacity();
                    assert!(room >= capacity, "{layout:?} {rate} {capacity}: {room}");
                    let keys = distinct_keys(seed.wrapping_add(set * 977 + capacity as u64), room);
                    if let Err(e) = filter.insert_many(&keys) {
                        failures.push(format!(
                            "{layout:?} rate {rate} capacity {capacity} set {set}: item {} of \
                             {room}: {}",
                            e.index, e.error
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} failures: {:#?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
}
