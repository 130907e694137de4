//! The growable `CuckooFilter` through the builder and the standard traits: the settings it
//! refuses, `Extend`, `insert_unique`, `Clone` and `Debug`.

use atomic_cuckoo::{BuildError, CuckooFilter, Layout};

use crate::growable_sizes::GrowableSizes;

/// A growable filter chooses its own lane width and packs its lanes: a fingerprint width, or a
/// layout other than `Packed`, is refused by name; `Packed` and a rate are taken.
#[test]
fn settings_a_growable_filter_does_not_take_are_refused_by_name() {
    let growable = || CuckooFilter::builder().capacity(1_000).growable(true);
    for bits in [4, 8, 16, 32] {
        assert_eq!(
            growable().fingerprint_bits(bits).build().unwrap_err(),
            BuildError::NotForGrowable {
                setting: "fingerprint_bits"
            },
            "fingerprint_bits({bits})"
        );
    }
    for layout in [Layout::OneWord, Layout::Compact] {
        assert_eq!(
            growable().layout(layout).build().unwrap_err(),
            BuildError::NotForGrowable { setting: "layout" },
            "{layout:?}"
        );
    }
    let packed = growable()
        .layout(Layout::Packed)
        .false_positive_rate(0.001)
        .build()
        .unwrap();
    assert!(packed.is_growable());
    assert_eq!(packed.layout(), Layout::Packed);
    assert_eq!(packed.target_false_positive_rate(), Some(0.001));
    let message = BuildError::NotForGrowable { setting: "layout" }.to_string();
    assert!(message.contains("layout"), "{message}");
    // The same settings build a fixed filter.
    let fixed = CuckooFilter::builder()
        .fingerprint_bits(8)
        .layout(Layout::OneWord)
        .growable(false)
        .build()
        .unwrap();
    assert!(!fixed.is_growable());
}

/// `extend` stores each new item once (set semantics) and grows instead of panicking; items
/// already there, repeated and in any order, are not stored again.
#[test]
fn extend_keeps_one_copy_of_repeated_items_and_grows() {
    let seed = crate::common::seed("growable extend");
    let mut filter = CuckooFilter::builder()
        .growable(true)
        .capacity(10)
        .build()
        .unwrap();
    filter.extend(["a", "b", "c", "a"]);
    filter.extend(std::iter::repeat_n("hot", 100));
    assert_eq!(filter.len(), 4);
    assert!(filter.contains("b") && filter.contains("hot"));

    let keys = crate::common::distinct_keys(seed, 10_000);
    filter.extend(keys.iter());
    assert!(filter.doublings() >= 8, "{filter:?}");
    assert!(keys.iter().all(|k| filter.contains(k)));
    let len = filter.len();
    filter.extend(keys.iter().chain(keys.iter().rev()));
    assert_eq!(len, filter.len(), "items already there stored again");
}

#[test]
fn insert_unique_adds_each_item_once_through_doublings() {
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(100)
        .build()
        .unwrap();
    for round in 0..3 {
        for x in 0..20_000u64 {
            let added = filter.insert_unique(&x).unwrap();
            // A new item may already match another's entry (a false positive), never later.
            assert!(!(round > 0 && added), "round {round}: {x} added again");
        }
    }
    assert!(filter.doublings() >= 7);
    assert!(
        filter.len() <= 20_000 && filter.len() >= 19_700,
        "{}",
        filter.len()
    );
    assert!((0..20_000u64).all(|x| filter.contains(&x)));
}

/// `Debug` names the growable filter's sizes; a clone has the same ones and is independent.
#[test]
fn debug_and_clone_of_a_growable_filter_report_its_doublings() {
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(100)
        .build()
        .unwrap();
    filter.insert_many(0..2_000u64).unwrap();
    let debug = format!("{filter:?}");
    for field in [
        "growable: true",
        "doublings",
        "buckets",
        "doubling_in_progress",
    ] {
        assert!(debug.contains(field), "{field} not in {debug}");
    }
    let copy = filter.clone();
    assert_eq!(
        (
            copy.doublings(),
            copy.buckets(),
            copy.lane_bits(),
            copy.len()
        ),
        (
            filter.doublings(),
            filter.buckets(),
            filter.lane_bits(),
            filter.len()
        )
    );
    copy.insert_many(2_000..20_000u64).unwrap();
    assert!(copy.doublings() > filter.doublings());
    assert_eq!(filter.len(), 2_000);
}
