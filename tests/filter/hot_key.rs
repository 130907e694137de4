//! One key inserted over and over (a hot key) must not make a growing filter add levels: its
//! two buckets fill with its own copies, and another level would only hold a few more.

use atomic_cuckoo::{CuckooFilter, InsertError};

#[test]
fn a_hot_key_grows_a_filter_by_at_most_one_level() {
    let filter = CuckooFilter::builder()
        .capacity(1_000_000)
        .expansion(2)
        .build()
        .unwrap();
    let (levels_before, memory_before) = (filter.levels(), filter.memory_usage());
    let mut stored = 0usize;
    let mut refused = 0usize;
    for _ in 0..1_000_000 {
        match filter.insert("hot") {
            Ok(()) => stored += 1,
            Err(InsertError::ItemBucketsFull) => refused += 1,
            Err(e) => panic!("unexpected error after {stored} copies: {e}"),
        }
    }
    println!(
        "{stored} copies stored, {refused} refused; levels {levels_before} -> {}, memory {} -> {} bytes",
        filter.levels(),
        memory_before,
        filter.memory_usage()
    );
    assert!(
        filter.levels() <= levels_before + 1,
        "{} levels",
        filter.levels()
    );
    // Two buckets of 4 slots per level.
    assert!((8..=16).contains(&stored), "{stored} copies stored");
    assert_eq!(filter.count("hot"), stored);
    // Distinct keys still go in, and the hot key's copies are all there.
    for i in 0..100_000u64 {
        filter.insert(&i).unwrap();
    }
    assert!((0..100_000u64).all(|i| filter.contains(&i)));
    assert_eq!(filter.count("hot"), stored);
}

#[test]
fn a_fixed_filter_says_the_item_is_stuck_not_that_it_is_full() {
    let filter = CuckooFilter::with_capacity(10_000);
    let copies = (0..100)
        .take_while(|_| filter.insert(&7u64).is_ok())
        .count();
    assert_eq!(copies, 8, "two buckets of four slots");
    let error = filter.insert(&7u64).unwrap_err();
    assert_eq!(error, InsertError::ItemBucketsFull);
    assert!(!error.to_string().contains("is full"), "{error}");
    assert_eq!(filter.len(), 8);
    // Removing one copy makes room for one.
    assert!(filter.remove(&7u64));
    assert_eq!(filter.insert(&7u64), Ok(()));
}

/// A tiny table that is really full still reports `Full` (and a growing one grows): "stuck" is
/// only said of a table with room.
#[test]
fn a_full_tiny_table_is_full_not_stuck() {
    let filter = CuckooFilter::builder().capacity(1).build().unwrap();
    let stored = (0..1_000u64)
        .take_while(|i| filter.insert(i).is_ok())
        .count();
    assert!(stored >= 1);
    let next = stored as u64;
    assert_eq!(
        filter.insert(&next),
        Err(InsertError::Full),
        "{stored} stored"
    );

    let growing = CuckooFilter::builder()
        .capacity(1)
        .expansion(2)
        .build()
        .unwrap();
    for i in 0..1_000u64 {
        growing.insert(&i).unwrap();
    }
    assert!(growing.levels() > 3);
    assert!((0..1_000u64).all(|i| growing.contains(&i)));
}
