//! One key inserted over and over (a hot key) must not make a growable filter double: its
//! two buckets fill with its own copies, and a doubling never separates copies of one item.

use atomic_cuckoo::{CuckooFilter, InsertError};

#[test]
fn a_hot_key_does_not_double_a_growable_filter() {
    let filter = CuckooFilter::builder()
        .capacity(1_000_000)
        .growable(true)
        .build()
        .unwrap();
    let memory_before = filter.memory_usage();
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
        "{stored} copies stored, {refused} refused; {} doublings, memory {} -> {} bytes",
        filter.doublings(),
        memory_before,
        filter.memory_usage()
    );
    assert_eq!(filter.doublings(), 0);
    assert_eq!(filter.memory_usage(), memory_before);
    // Two buckets of 4 lanes.
    assert_eq!(stored, 8, "{stored} copies stored");
    assert_eq!(filter.count("hot"), stored);
    // Distinct keys still go in, and the hot key's copies are all there. A key whose two
    // buckets are both the hot key's (one of these keys is) finds no room and is refused while
    // the filter is below half its doubling load, as documented: removing one hot copy must
    // then make room for it.
    let mut blocked = Vec::new();
    for i in 0..100_000u64 {
        match filter.insert(&i) {
            Ok(()) => {}
            Err(InsertError::ItemBucketsFull) => {
                assert!(filter.remove("hot"));
                stored -= 1;
                filter.insert(&i).unwrap();
                blocked.push(i);
            }
            Err(e) => panic!("distinct key {i}: {e}"),
        }
    }
    println!("distinct keys in the hot key's buckets: {blocked:?}");
    assert!(blocked.len() <= 2, "{blocked:?}");
    assert_eq!(filter.doublings(), 0);
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

/// A tiny table that is really full still reports `Full` (and a growable one doubles): "stuck"
/// is only said of a table with room.
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
        .growable(true)
        .build()
        .unwrap();
    for i in 0..1_000u64 {
        growing.insert(&i).unwrap();
    }
    assert!(growing.doublings() > 3);
    assert!((0..1_000u64).all(|i| growing.contains(&i)));
}
