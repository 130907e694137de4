//! `ExpandingFilter`: every inserted item is found through every doubling, the measured rate
//! stays at the target for the planned doublings, removes and clears keep the rest, and the
//! limits (a hot key, the last doubling, bad settings) give typed errors with nothing lost.

use std::collections::HashMap;

use atomic_cuckoo::{BuildError, ExpandingFilter, InsertError};

use crate::common::{distinct_keys, seed, Rng};

fn grown(capacity: usize, rate: f64) -> ExpandingFilter {
    ExpandingFilter::builder()
        .capacity(capacity)
        .false_positive_rate(rate)
        .build()
        .unwrap()
}

#[test]
fn every_item_is_found_through_every_doubling() {
    let seed = seed("every_item_is_found_through_every_doubling");
    for rate in [0.1, 0.01, 0.001] {
        let keys = distinct_keys(seed, 60_000);
        let mut filter = grown(100, rate);
        let mut doublings = 0;
        for (i, key) in keys.iter().enumerate() {
            filter.insert(key).unwrap();
            if filter.doublings() != doublings {
                doublings = filter.doublings();
                // After each doubling, every item inserted so far is still found.
                let lost = keys[..=i].iter().filter(|k| !filter.contains(*k)).count();
                assert_eq!(lost, 0, "rate {rate}, after doubling {doublings}");
            }
        }
        assert!(
            doublings >= 9,
            "100 -> 60,000 items doubles at least 9 times"
        );
        assert_eq!(filter.len(), keys.len());
        assert!(keys.iter().all(|k| filter.contains(k)));
    }
}

#[test]
fn the_measured_rate_stays_at_the_target_while_growing_a_thousandfold() {
    let seed = seed("the_measured_rate_stays_at_the_target_while_growing_a_thousandfold");
    for rate in [0.05, 0.01] {
        let keys = distinct_keys(seed, 300_000 + 200_000);
        let (items, probes) = keys.split_at(300_000);
        let mut filter = grown(300, rate);
        for key in items {
            filter.insert(key).unwrap();
        }
        assert!(filter.doublings() >= 10);
        let measured = probes.iter().filter(|k| filter.contains(*k)).count() as f64 / 200_000.0;
        let expected = filter.false_positive_rate();
        assert!(expected <= rate, "expected {expected} over target {rate}");
        // 200,000 probes: a few standard deviations of slack over the target.
        assert!(
            measured <= rate * 1.1,
            "measured {measured} over target {rate}"
        );
        // The estimate follows the measurement (within 20 %, far beyond sampling noise).
        assert!(
            (measured - expected).abs() <= 0.2 * expected,
            "measured {measured}, expected {expected}"
        );
    }
}

#[test]
fn removing_inserted_items_never_hides_another() {
    let seed = seed("removing_inserted_items_never_hides_another");
    let mut rng = Rng::new(seed);
    // Coarse fingerprints (a 40 % target) make collisions between items common.
    let mut filter = grown(64, 0.4);
    let mut stored: HashMap<u64, usize> = HashMap::new();
    let universe = 3_000;
    for round in 0..60_000 {
        let key = rng.below(universe);
        if rng.below(3) == 0 {
            if let Some(copies) = stored.get_mut(&key) {
                assert!(
                    filter.remove(&key),
                    "round {round}: an inserted item is removed"
                );
                *copies -= 1;
                if *copies == 0 {
                    stored.remove(&key);
                }
            }
        } else {
            match filter.insert(&key) {
                Ok(()) => *stored.entry(key).or_insert(0) += 1,
                Err(InsertError::ItemBucketsFull) => {}
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        if round % 1000 == 0 {
            for k in stored.keys() {
                assert!(filter.contains(k), "round {round}: {k} lost");
            }
        }
    }
    assert_eq!(filter.len(), stored.values().sum::<usize>());
}

#[test]
fn a_hot_key_fills_its_buckets_and_does_not_grow_the_table() {
    let mut filter = grown(1_000, 0.01);
    let buckets = filter.buckets();
    let mut stored = 0;
    for _ in 0..1_000 {
        match filter.insert("hot") {
            Ok(()) => stored += 1,
            Err(e) => assert_eq!(e, InsertError::ItemBucketsFull),
        }
    }
    assert_eq!(stored, 8, "two buckets of four lanes");
    assert_eq!(filter.buckets(), buckets);
    for _ in 0..8 {
        assert!(filter.remove("hot"));
    }
    assert!(!filter.contains("hot"));
    assert!(filter.is_empty());
}

#[test]
fn a_full_filter_past_its_last_doubling_refuses_inserts_and_keeps_every_item() {
    let seed = seed("a_full_filter_past_its_last_doubling_refuses_inserts_and_keeps_every_item");
    // A 20 % target allows only a few doublings.
    let mut filter = ExpandingFilter::builder()
        .capacity(100)
        .false_positive_rate(0.2)
        .max_doublings(0)
        .build()
        .unwrap();
    let max = filter.max_doublings();
    let keys = distinct_keys(seed, 100 << (max + 2));
    let mut inserted = 0;
    let refusal = loop {
        match filter.insert(&keys[inserted]) {
            Ok(()) => inserted += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(refusal, InsertError::MaxDoublingsReached { doublings: max });
    assert_eq!(filter.doublings(), max);
    assert_eq!(filter.len(), inserted);
    assert!(keys[..inserted].iter().all(|k| filter.contains(k)));
    // Removing an item makes room for it again.
    assert!(filter.remove(&keys[0]));
    filter.insert(&keys[0]).unwrap();
    assert!(keys[..inserted].iter().all(|k| filter.contains(k)));
}

#[test]
fn clear_empties_and_clones_are_independent() {
    let keys = distinct_keys(7, 10_000);
    let mut filter = grown(500, 0.01);
    for key in &keys {
        filter.insert(key).unwrap();
    }
    let copy = filter.clone();
    filter.clear();
    assert!(filter.is_empty());
    assert_eq!(filter.false_positive_rate(), 0.0);
    assert!(keys.iter().all(|k| !filter.contains(k)));
    assert!(keys.iter().all(|k| copy.contains(k)));
    assert_eq!(copy.len(), keys.len());
    // The cleared table keeps its size and takes the items again without doubling.
    let doublings = filter.doublings();
    for key in &keys {
        filter.insert(key).unwrap();
    }
    assert_eq!(filter.doublings(), doublings);
}

#[test]
fn bad_settings_are_typed_errors() {
    let build = |capacity: usize, rate: f64, doublings: u32| {
        ExpandingFilter::builder()
            .capacity(capacity)
            .false_positive_rate(rate)
            .max_doublings(doublings)
            .build()
            .map(|_| ())
    };
    assert_eq!(build(0, 0.01, 12), Err(BuildError::ZeroCapacity));
    for rate in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            build(10, rate, 12),
            Err(BuildError::InvalidFalsePositiveRate { .. })
        ));
    }
    assert_eq!(
        build(10, 0.01, 33),
        Err(BuildError::InvalidMaxDoublings { doublings: 33 })
    );
    assert_eq!(
        build(10, 1e-9, 12),
        Err(BuildError::UnreachableFalsePositiveRate { rate: 1e-9 })
    );
    assert!(matches!(
        build(usize::MAX, 0.01, 12),
        Err(BuildError::CapacityTooLarge { .. })
    ));
    assert_eq!(build(1, 0.5, 32), Ok(()));
}
