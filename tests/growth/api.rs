//! `ExpandingFilter`'s standard traits: `Default`, `Extend`, `FromIterator`, `Clone`, `Debug`.

use atomic_cuckoo::{AHashBuilder, DefaultHashBuilder, ExpandingFilter};

#[test]
fn collect_holds_one_copy_of_each_item_and_grows_past_its_hint() {
    let filter: ExpandingFilter = (0..50_000u64).filter(|x| x % 2 == 0).collect();
    assert_eq!(filter.len(), 25_000);
    assert!(filter.doublings() > 0, "the hint was 0: it grew from 1,000");
    assert!((0..50_000u64).step_by(2).all(|x| filter.contains(&x)));
    let sized: ExpandingFilter<AHashBuilder> = (0..50_000u64).collect();
    assert_eq!(sized.doublings(), 0, "sized by its exact hint");
    assert!(sized.capacity() >= 50_000);
}

#[test]
fn extend_keeps_one_copy_of_repeated_items_and_panics_naming_extend_when_full() {
    let mut filter = ExpandingFilter::builder().capacity(10).build().unwrap();
    filter.extend(["a", "b", "c", "a"]);
    filter.extend(std::iter::repeat_n("hot", 100));
    assert_eq!(filter.len(), 4);
    assert!(filter.contains("b") && filter.contains("hot"));
    let mut full = ExpandingFilter::builder()
        .capacity(10)
        .max_doublings(0)
        .build()
        .unwrap();
    let refused = std::panic::catch_unwind(move || full.extend(0..1_000u32));
    let message = refused.expect_err("a filter that may not double fills up");
    let message = message
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(message.starts_with("ExpandingFilter::extend"), "{message}");
}

#[test]
fn collect_keeps_one_copy_of_repeated_items() {
    let ids: ExpandingFilter = [7u64, 7, 7, 8].iter().collect();
    assert_eq!(ids.len(), 2);
    let hot: ExpandingFilter = std::iter::repeat_n(5u64, 20).collect();
    assert_eq!(hot.len(), 1);
    assert!(hot.contains(&5u64));
}

#[test]
fn default_is_the_builder_default() {
    let filter: ExpandingFilter<DefaultHashBuilder> = ExpandingFilter::default();
    let built = ExpandingFilter::builder().build().unwrap();
    assert_eq!(filter.capacity(), built.capacity());
    assert_eq!(filter.lane_bits(), built.lane_bits());
    assert_eq!(filter.max_doublings(), built.max_doublings());
    assert_eq!(format!("{filter:?}"), format!("{built:?}"));
}

#[test]
fn insert_unique_adds_each_item_once_through_doublings() {
    let filter = ExpandingFilter::builder().capacity(100).build().unwrap();
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

/// `extend` of a filter that may not double any more, with items it holds (repeated, in any
/// order): found, so never stored again and never a panic; `collect` of distinct items and
/// repeats holds each once; a filter at its doubling limit refuses only new items.
#[test]
fn extend_of_a_filter_at_its_doubling_limit_with_its_own_items_never_panics() {
    let seed = crate::common::seed("expanding extend at its limit");
    let mut full = ExpandingFilter::builder()
        .capacity(10)
        .max_doublings(1)
        .build()
        .unwrap();
    let keys = crate::common::distinct_keys(seed, 10_000);
    let stored: Vec<u64> = keys
        .iter()
        .copied()
        .take_while(|k| full.insert_unique(k).is_ok())
        .collect();
    assert!(stored.len() >= 10 && stored.len() < keys.len());
    let len = full.len();
    full.extend(stored.iter().chain(stored.iter().rev()));
    full.extend(stored.iter().copied());
    assert_eq!(full.len(), len, "items already there stored again");
    assert!(stored.iter().all(|k| full.contains(k)));

    let twice: Vec<u64> = keys[..3_000]
        .iter()
        .chain(&keys[..3_000])
        .copied()
        .collect();
    let collected: ExpandingFilter = twice.iter().collect();
    assert_eq!(collected.len(), 3_000);
    assert!(keys[..3_000].iter().all(|k| collected.contains(k)));
}
