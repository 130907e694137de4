//! `CuckooSet`: a filter of one item type with set semantics, over the same engine as
//! `CuckooFilter`.

use std::sync::{Arc, Barrier};
use std::thread;

use atomic_cuckoo::{AHashBuilder, CuckooFilter, CuckooSet, InsertError};

#[test]
fn a_set_of_u64_finds_unsuffixed_literals() {
    // The mistake a set prevents: an untyped filter looks an unsuffixed literal up as an i32.
    let filter = CuckooFilter::with_capacity(1_000);
    filter.insert(&42u64).unwrap();
    assert!(!filter.contains(&42), "42 is an i32 here, another item");

    let set = CuckooSet::<u64>::with_capacity(1_000);
    set.insert(&42).unwrap();
    assert!(set.contains(&42));
    assert!(set.as_filter().contains(&42u64), "the same hash as the u64");
}

#[test]
fn borrowed_forms_hash_as_the_item_type() {
    let names = CuckooSet::<String>::with_capacity(1_000);
    assert_eq!(names.insert(&"alice".to_string()), Ok(true));
    assert_eq!(names.insert("alice"), Ok(false), "a &str is the same item");
    assert!(names.contains("alice") && names.contains(&"alice".to_string()));

    let keys = CuckooSet::<Vec<u8>>::with_capacity(1_000);
    keys.insert(&b"key".to_vec()).unwrap();
    assert!(keys.contains(&b"key"[..]));

    // Batch calls take items and references, hashed like the single calls.
    let ids = CuckooSet::<u64>::with_capacity(1_000);
    assert_eq!(ids.insert_many([1u64, 2]).unwrap(), 2);
    let more = [2u64, 3];
    assert_eq!(ids.insert_many(more.iter()).unwrap(), 1, "references");
    let mut found = Vec::new();
    ids.contains_many([1u64, 2, 3], &mut found);
    assert_eq!(found, [true, true, true]);
    ids.contains_many(more.iter(), &mut found);
    assert_eq!(found, [true, true]);
    assert!((1..=3u64).all(|i| ids.as_filter().count(&i) == 1));
}

#[test]
fn insert_has_set_semantics() {
    let set = CuckooSet::<u64>::with_capacity(100);
    assert_eq!(set.insert(&7), Ok(true));
    for _ in 0..100 {
        assert_eq!(set.insert(&7), Ok(false));
    }
    assert_eq!((set.len(), set.as_filter().count(&7u64)), (1, 1));
    assert!(set.remove(&7));
    assert!(!set.contains(&7) && set.is_empty());
}

#[test]
fn collect_and_extend_keep_one_copy_of_each_item() {
    let mut set: CuckooSet<u64> = [7u64, 7, 7, 8].into_iter().collect();
    assert_eq!(set.len(), 2);
    set.extend(std::iter::repeat_n(5u64, 1_000));
    set.extend(&[8u64, 9]);
    assert_eq!(set.len(), 4);
    let names: CuckooSet<str, AHashBuilder> = ["a", "b", "a"].into_iter().collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains("a"));
}

#[test]
fn a_full_set_reports_the_failing_item() {
    let set: CuckooSet<u64> = CuckooFilter::builder()
        .capacity(100)
        .fingerprint_bits(16)
        .build_set()
        .unwrap();
    let err = set.insert_many(0..100_000u64).unwrap_err();
    assert_eq!(err.error, InsertError::Full);
    assert_eq!(err.index, set.len());
    assert!((0..err.index as u64).all(|i| set.contains(&i)));
}

#[test]
fn racing_inserts_of_one_item_have_exactly_one_winner() {
    const THREADS: usize = 4;
    let set = Arc::new(CuckooSet::<u64>::with_capacity(10_000));
    for item in 0..200u64 {
        let start = Arc::new(Barrier::new(THREADS));
        let winners: usize = (0..THREADS)
            .map(|_| {
                let (set, start) = (Arc::clone(&set), Arc::clone(&start));
                thread::spawn(move || {
                    start.wait();
                    set.insert(&item).unwrap()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| usize::from(t.join().unwrap()))
            .sum();
        assert_eq!(winners, 1, "item {item}");
    }
    assert_eq!(set.len(), 200);
}

#[test]
fn a_set_round_trips_through_the_filters_snapshot() {
    let set: CuckooSet<u64> = (0..1_000u64).collect();
    let bytes = set.as_filter().to_bytes();
    let restored = CuckooSet::<u64>::from_filter(CuckooFilter::from_bytes(&bytes).unwrap());
    assert!((0..1_000u64).all(|i| restored.contains(&i)));
    assert_eq!(restored.len(), 1_000);
    let copy = restored.clone();
    restored.clear();
    assert_eq!(copy.len(), 1_000);
    assert!(format!("{copy:?}").contains("u64"));
}

/// Compiles only if `T` can be shared across threads and across `catch_unwind`.
fn assert_shareable<T: Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}

#[test]
fn sets_are_send_and_sync_whatever_their_item_type() {
    assert_shareable::<CuckooSet<u64>>();
    // The set holds no items: a type that is neither `Send` nor `Sync` is fine as its key.
    assert_shareable::<CuckooSet<std::rc::Rc<u64>>>();
    assert_shareable::<CuckooSet<str, AHashBuilder>>();
}

/// What `remove` promises for a set: removing an item whose `insert` returned `Ok(true)` never
/// makes another such item disappear (each is stored once). An item refused as present
/// (`Ok(false)`) because it shares its fingerprint and buckets with an earlier item has no
/// entry of its own: it is found through that item's, and removing either removes the entry
/// of both (the identity hasher makes 1 and 2 such a pair).
#[test]
fn an_item_refused_as_colliding_shares_the_entry_of_the_item_it_matched() {
    use crate::common::Identity;
    let set: CuckooSet<u64, Identity> = CuckooFilter::builder()
        .capacity(100)
        .hasher(Identity)
        .build_set()
        .unwrap();
    assert_eq!(set.insert(&1), Ok(true));
    assert_eq!(set.insert(&2), Ok(false), "2 matches 1's entry");
    assert_eq!(set.len(), 1);
    assert!(set.contains(&2));
    assert!(set.remove(&2));
    assert!(
        !set.contains(&1) && !set.contains(&2),
        "one entry, removed for both"
    );
    assert!(!set.remove(&1));

    // Items whose inserts returned `Ok(true)` are each stored once: removing some never
    // removes another (32-bit fingerprints, distinct keys).
    let seed = crate::common::seed("set removes of winners");
    let set: CuckooSet<u64> = CuckooFilter::builder()
        .capacity(2_000)
        .fingerprint_bits(32)
        .build_set()
        .unwrap();
    let keys = crate::common::distinct_keys(seed, 2_000);
    let won: Vec<u64> = keys
        .iter()
        .copied()
        .filter(|k| set.insert(k) == Ok(true))
        .collect();
    for (i, k) in won.iter().enumerate() {
        if i % 2 == 0 {
            assert!(set.remove(k));
        }
    }
    assert!(won.iter().skip(1).step_by(2).all(|k| set.contains(k)));
    assert_eq!(set.len(), won.len() / 2);
}
