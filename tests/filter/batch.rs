//! `contains_many` and `insert_many`: the same answers as one item at a time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use atomic_cuckoo::{CuckooFilter, InsertError, InsertManyError};

use crate::common;

#[test]
fn contains_many_agrees_with_contains_at_every_batch_boundary() {
    let seed = common::seed("contains_many");
    for growable in [false, true] {
        // Many false positives, so those must agree too: 8-bit fingerprints, and a growable
        // filter's narrowest entries doubling past their planned doublings.
        let builder = CuckooFilter::builder().capacity(2_000);
        let filter = if growable {
            builder.capacity(10).false_positive_rate(0.3).growable(true)
        } else {
            builder.fingerprint_bits(8)
        }
        .build()
        .unwrap();
        let keys = common::distinct_keys(seed, 6_000);
        let stored = if growable { 5_000 } else { 1_900 };
        filter.insert_many(&keys[..stored]).unwrap();
        let mut found = vec![true; 3]; // cleared by the call
        for len in [0usize, 1, 63, 64, 65, 127, 128, 129, 1_000, 6_000] {
            let probe = &keys[keys.len() - len..];
            filter.contains_many(probe, &mut found);
            assert_eq!(found.len(), len);
            for (k, &f) in probe.iter().zip(&found) {
                assert_eq!(f, filter.contains(k), "growable={growable} len={len}");
            }
        }
        filter.contains_many(&keys[..stored], &mut found);
        assert!(
            found.iter().all(|&f| f),
            "a false negative from contains_many"
        );
    }
}

#[test]
fn insert_many_reports_the_first_item_that_does_not_fit() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    let keys: Vec<u64> = (0..5_000).collect();
    let err = filter.insert_many(&keys).unwrap_err();
    let InsertManyError { index, error, .. } = err;
    assert_eq!(error, InsertError::Full);
    assert_eq!(
        filter.len(),
        index,
        "exactly the items before the failing one are in"
    );
    assert!(keys[..index].iter().all(|k| filter.contains(k)));
    assert!(err.to_string().contains(&index.to_string()));
    assert!(std::error::Error::source(&err).is_some());
    // Everything fits in a growable filter.
    let growing = CuckooFilter::builder()
        .capacity(100)
        .growable(true)
        .build()
        .unwrap();
    growing.insert_many(&keys).unwrap();
    assert_eq!(growing.len(), keys.len());
    assert!(growing.doublings() >= 5);
    assert!(growing.insert_many(std::iter::empty::<u64>()).is_ok());
}

/// A stable set looked up in batches while another thread churns near full: no false negative.
#[test]
fn contains_many_never_misses_while_a_writer_churns() {
    let seed = common::seed("contains_many under churn");
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(50_000)
            .fingerprint_bits(16)
            .build()
            .unwrap(),
    );
    let slots = filter.slots();
    let keys = common::distinct_keys(seed, slots * 10);
    let stable = keys[..slots * 85 / 100].to_vec();
    filter.insert_many(&stable).unwrap();
    let churn = keys[slots..].to_vec();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (filter, done) = (Arc::clone(&filter), Arc::clone(&done));
        thread::spawn(move || {
            let mut window = std::collections::VecDeque::new();
            for k in churn.iter().take(300_000) {
                if filter.insert(k).is_ok() {
                    window.push_back(*k);
                }
                while filter.len() > slots * 94 / 100 {
                    assert!(filter.remove(&window.pop_front().unwrap()));
                }
            }
            done.store(true, Ordering::Release);
        })
    };
    let (mut rounds, mut found) = (0, Vec::new());
    while !done.load(Ordering::Acquire) || rounds == 0 {
        filter.contains_many(&stable, &mut found);
        let missed = found.iter().filter(|&&f| !f).count();
        assert_eq!(missed, 0, "false negatives in a batch lookup under churn");
        rounds += 1;
    }
    writer.join().unwrap();
    println!("{rounds} batch rounds over {} stable items", stable.len());
}
