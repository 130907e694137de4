//! Removing an item from a grown filter must never make another item unfindable: a remove
//! that took another item's entry (two items alike in the bits a doubling left them) would
//! be a false negative for an item that was inserted and never removed. These tests remove
//! only items that were inserted.

use std::collections::HashMap;

use crate::common;
use crate::common::Rng;
use atomic_cuckoo::{CuckooFilter, InsertError};

/// Inserts `0..n`, removes every even item, and checks that every odd item is still found and
/// every remove found its item.
fn assert_removing_evens_keeps_odds(filter: &CuckooFilter, n: u64, what: &str) {
    for i in 0..n {
        if let Err(e) = filter.insert(&i) {
            panic!("{what}: insert {i} failed: {e}");
        }
    }
    let levels = filter.doublings();
    let failed_removes: Vec<u64> = (0..n).step_by(2).filter(|i| !filter.remove(i)).collect();
    let lost: Vec<u64> = (1..n).step_by(2).filter(|i| !filter.contains(i)).collect();
    println!(
        "{what}: {levels} doublings, {} items inserted, {} removed; {} removes of inserted items \
         returned false, {} of {} never-removed items not found",
        n,
        n / 2,
        failed_removes.len(),
        lost.len(),
        n / 2
    );
    assert!(
        failed_removes.is_empty() && lost.is_empty(),
        "{what}: after removing the {} even items of 0..{n} from a filter of {levels} doublings, \
         {} removes returned false (first {:?}) and {} of the {} odd items are no longer found \
         (first {:?})",
        n / 2,
        failed_removes.len(),
        &failed_removes[..failed_removes.len().min(5)],
        lost.len(),
        n / 2,
        &lost[..lost.len().min(5)],
    );
}

#[test]
fn removing_an_item_keeps_other_items_findable_in_grown_filters_with_narrow_lanes() {
    // A coarse rate: narrow lanes, whose first entries run out of tail bits and are copied.
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .false_positive_rate(0.3)
        .growable(true)
        .build()
        .unwrap();
    assert_removing_evens_keeps_odds(&filter, 200_000, "rate 0.3, doubling from 1,000");
}

#[test]
fn removing_an_item_keeps_other_items_findable_in_grown_filters_at_the_default_rate() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .growable(true)
        .build()
        .unwrap();
    assert_removing_evens_keeps_odds(&filter, 200_000, "default rate, doubling from 1,000");
}

/// Random interleavings of inserts and removes of live items on tiny growing filters, checked
/// against a multiset model: every remove of a live item returns true, and after each remove
/// every live item is still found.
#[test]
fn removing_live_items_keeps_every_other_live_item_findable_in_tiny_growing_filters() {
    let seed = common::seed_or("grown remove model", 0x06e0_7e30);
    let mut rng = Rng::new(seed);
    let cases = 300;
    let (mut removes, mut max_doublings) = (0usize, 0u32);
    for case in 0..cases {
        let capacity = 10 + rng.below(191) as usize;
        let rate = [0.3, 0.01, 1e-4][rng.below(3) as usize];
        let filter = CuckooFilter::builder()
            .capacity(capacity)
            .false_positive_rate(rate)
            .growable(true)
            .build()
            .unwrap();
        // Keys repeat (a multiset), from a space a few times the first table's capacity.
        let key_space = 4 * capacity as u64;
        let steps = 1_500;
        let mut live: Vec<u64> = Vec::new(); // one entry per stored copy
        let mut copies: HashMap<u64, usize> = HashMap::new();
        for step in 0..steps {
            let ctx = || {
                format!(
                    "seed={seed} case={case} capacity={capacity} rate={rate} step={step} \
                     doublings={}",
                    filter.doublings()
                )
            };
            // Inserts 60 %, removes 40 %: the filter doubles a few times.
            if live.is_empty() || rng.below(10) < 6 {
                let key = rng.below(key_space);
                let len = filter.len();
                match filter.insert(&key) {
                    Ok(()) => {
                        live.push(key);
                        *copies.entry(key).or_default() += 1;
                    }
                    // Keys repeat in a small universe: repeats of a few keys can fill both of
                    // an item's buckets, and a growable filter does not double for them (it
                    // separates entries by their next bit, never copies). Such a refusal
                    // changes nothing.
                    Err(InsertError::ItemBucketsFull) => {
                        assert_eq!(
                            filter.len(),
                            len,
                            "a refused insert changed len ({})",
                            ctx()
                        )
                    }
                    Err(e) => panic!("insert of {key} failed: {e} ({})", ctx()),
                }
            } else {
                let at = rng.below(live.len() as u64) as usize;
                let key = live.swap_remove(at);
                let held = copies.get_mut(&key).unwrap();
                *held -= 1;
                if *held == 0 {
                    copies.remove(&key);
                }
                removes += 1;
                assert!(
                    filter.remove(&key),
                    "remove of live item {key} returned false ({})",
                    ctx()
                );
                // `count` never undercounts a live item (collisions may add to it): a remove
                // that took another item's copy shows here even while that item has copies left.
                for (k, &held) in &copies {
                    let counted = filter.count(k);
                    assert!(
                        counted >= held && filter.contains(k),
                        "removing {key} took a copy of live item {k}: {held} copies inserted and \
                         not removed, count {counted}, contains {} ({})",
                        filter.contains(k),
                        ctx()
                    );
                }
            }
        }
        max_doublings = max_doublings.max(filter.doublings());
    }
    println!("{cases} cases, {removes} removes checked, up to {max_doublings} doublings");
    assert!(max_doublings >= 2, "the filters barely grew");
}
