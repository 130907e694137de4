//! A failed insert changes nothing: no stored item is dropped to make room.

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common;

#[test]
fn failed_insert_keeps_every_item() {
    let seed = common::seed("failed_insert_keeps_every_item");
    for bits in [8u32, 12, 16, 32] {
        let filter = CuckooFilter::builder()
            .capacity(20_000)
            .fingerprint_bits(bits)
            .build()
            .unwrap();
        let keys = common::distinct_keys(seed ^ u64::from(bits), filter.slots() * 2);
        let mut stored = Vec::new();
        let mut failures = 0;
        for key in &keys {
            match filter.insert(key) {
                Ok(()) => stored.push(*key),
                Err(InsertError::Full) => failures += 1,
                Err(e) => panic!("{e}"),
            }
        }
        println!(
            "bits={bits}: {} stored, {failures} failed, load {:.4}",
            stored.len(),
            filter.load_factor()
        );
        assert!(failures > 0, "the table never filled up");
        assert_eq!(filter.len(), stored.len());
        let lost = stored.iter().filter(|k| !filter.contains(*k)).count();
        assert_eq!(lost, 0, "bits={bits}: {lost} stored items lost");
    }
}

/// The multiset seen through `count` is identical before and after a failed insert.
#[test]
fn failed_insert_changes_no_count() {
    let seed = common::seed("failed_insert_changes_no_count");
    let filter = CuckooFilter::builder()
        .capacity(2_000)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    let keys = common::distinct_keys(seed, filter.slots() * 2);
    let mut stored = Vec::new();
    let mut rejected = None;
    for key in &keys {
        if filter.insert(key).is_ok() {
            stored.push(*key);
        } else {
            rejected = Some(*key);
            break;
        }
    }
    let rejected = rejected.expect("the table never filled up");
    let before: Vec<usize> = stored.iter().map(|k| filter.count(k)).collect();
    let len_before = filter.len();
    let rejected_count = filter.count(&rejected);
    for _ in 0..10 {
        assert_eq!(filter.insert(&rejected), Err(InsertError::Full));
    }
    let after: Vec<usize> = stored.iter().map(|k| filter.count(k)).collect();
    assert_eq!(before, after);
    assert_eq!(filter.len(), len_before);
    assert_eq!(filter.count(&rejected), rejected_count);
}
