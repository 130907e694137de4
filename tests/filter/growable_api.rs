//! The batch calls, `count`, `Extend`, `CuckooSet` and `Debug` on a growable filter, across
//! its doublings: the same answers as on a fixed filter.

use atomic_cuckoo::{CuckooFilter, CuckooSet};

use crate::common;

/// A growable filter built for `capacity` items with the widest lanes (31-bit entries), so
/// that a distinct key matching another's entry is negligible and counts are exact.
fn wide(capacity: usize) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .false_positive_rate(4e-8)
        .growable(true)
        .build()
        .unwrap()
}

/// `insert_many_unique` of a batch in which each key comes three times adds each once and
/// reports how many it added; `insert_many` then adds a copy of each; `count` sees both
/// copies and `contains_many` finds every key, though the table doubled within the batches.
#[test]
fn insert_many_unique_insert_many_count_and_contains_many_across_doublings() {
    let seed = common::seed("growable batch calls");
    let keys = common::distinct_keys(seed, 20_000);
    let filter = wide(100);
    let tripled: Vec<u64> = keys.iter().flat_map(|&k| [k, k, k]).collect();
    assert_eq!(filter.insert_many_unique(&tripled), Ok(keys.len()));
    let after_unique = filter.doublings();
    assert!(after_unique >= 6, "seed={seed}: {after_unique} doublings");
    assert_eq!(filter.len(), keys.len(), "seed={seed}");
    assert!(keys.iter().all(|k| filter.count(k) == 1), "seed={seed}");
    // A second unique batch of the same keys adds nothing.
    assert_eq!(filter.insert_many_unique(&keys), Ok(0), "seed={seed}");

    filter.insert_many(&keys).unwrap();
    assert_eq!(filter.len(), 2 * keys.len(), "seed={seed}");
    assert!(filter.doublings() > after_unique, "seed={seed}");
    let miscounted = keys.iter().filter(|k| filter.count(*k) != 2).count();
    assert_eq!(miscounted, 0, "seed={seed}: keys not counted twice");

    let mut found = Vec::new();
    filter.contains_many(&keys, &mut found);
    assert_eq!(found.len(), keys.len());
    assert!(found.iter().all(|&f| f), "seed={seed}: a false negative");
    let absent = common::distinct_keys(!seed, 20_000);
    filter.contains_many(&absent, &mut found);
    for (k, &f) in absent.iter().zip(&found) {
        assert_eq!(f, filter.contains(k), "seed={seed}: {k}");
    }
    // One removed copy leaves one.
    assert!(keys.iter().all(|k| filter.remove(k)));
    assert!(keys.iter().all(|k| filter.count(k) == 1), "seed={seed}");
}

/// `Extend` (by value and by reference) has set semantics on a growable filter too, and
/// doubles it as needed instead of panicking.
#[test]
fn extend_doubles_a_growable_filter_and_stores_each_item_once() {
    let mut filter = wide(10);
    filter.extend(0..5_000u64);
    filter.extend(&[7u64, 7, 7]);
    filter.extend((0..5_000u64).rev());
    filter.extend(std::iter::repeat_n(5_000u64, 100));
    assert!(filter.doublings() >= 6, "{} doublings", filter.doublings());
    assert_eq!(filter.len(), 5_001);
    assert!((0..=5_000u64).all(|i| filter.count(&i) == 1));
}

/// A set built on a growable filter keeps set semantics while it doubles: the first insert of
/// an item adds it, the next ones do not, `len` counts the items, and removes take them out.
#[test]
fn a_growable_set_adds_each_item_once_across_doublings() {
    let set: CuckooSet<str> = CuckooFilter::builder()
        .capacity(16)
        .false_positive_rate(4e-8)
        .growable(true)
        .build_set()
        .unwrap();
    let items: Vec<String> = (0..3_000).map(|i| format!("item {i}")).collect();
    for item in &items {
        assert_eq!(set.insert(item.as_str()), Ok(true), "{item}");
    }
    assert!(set.as_filter().doublings() >= 6);
    assert_eq!(set.insert_many(items.iter().map(String::as_str)), Ok(0));
    for item in &items {
        assert_eq!(set.insert(item.as_str()), Ok(false), "{item}");
    }
    assert_eq!(set.len(), items.len());
    assert!(set.capacity() >= items.len());
    let mut found = Vec::new();
    set.contains_many(items.iter().map(String::as_str), &mut found);
    assert!(found.iter().all(|&f| f));
    for item in items.iter().step_by(2) {
        assert!(set.remove(item.as_str()), "{item}");
    }
    assert_eq!(set.len(), items.len() / 2);
    for (i, item) in items.iter().enumerate() {
        assert_eq!(set.contains(item.as_str()), i % 2 == 1, "{item}");
    }
}

/// `Debug` of a growable filter says it is growable and how often it has doubled; a fixed
/// filter's says neither.
#[test]
fn debug_of_a_growable_filter_shows_growable_and_doublings() {
    let filter = wide(100);
    filter.insert_many(0..1_000u32).unwrap();
    filter.finish_doubling();
    let doublings = filter.doublings();
    assert!(doublings >= 3);
    let shown = format!("{filter:?}");
    println!("{shown}");
    assert!(shown.contains("growable: true"), "{shown}");
    assert!(
        shown.contains(&format!("doublings: {doublings}")),
        "{shown}"
    );
    assert!(shown.contains(&format!("len: {}", filter.len())), "{shown}");

    let fixed = format!("{:?}", CuckooFilter::with_capacity(100));
    assert!(!fixed.contains("growable"), "{fixed}");
    assert!(!fixed.contains("doublings"), "{fixed}");
}
