//! `CuckooFilter`: every inserted item is found through every doubling, the measured rate
//! stays at the target for the planned doublings, removes and clears keep the rest, and the
//! limits (a hot key, the last doubling, bad settings) give typed errors with nothing lost.

use std::collections::HashMap;

use atomic_cuckoo::{BuildError, CuckooFilter, InsertError};

use crate::growable_sizes::GrowableSizes;

use crate::common::growable as build;
use crate::common::{distinct_keys, seed, Rng};

fn grown(capacity: usize, rate: f64) -> CuckooFilter {
    CuckooFilter::builder()
        .growable(true)
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
        let filter = grown(100, rate);
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
        let filter = grown(300, rate);
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
    let filter = grown(64, 0.4);
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
    let filter = grown(1_000, 0.01);
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
fn clear_empties_and_clones_are_independent() {
    let keys = distinct_keys(7, 10_000);
    let filter = grown(500, 0.01);
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
    let build = |capacity: usize, rate: f64| {
        CuckooFilter::builder()
            .growable(true)
            .capacity(capacity)
            .false_positive_rate(rate)
            .build()
            .map(|_| ())
    };
    assert_eq!(build(0, 0.01), Err(BuildError::ZeroCapacity));
    for rate in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            build(10, rate),
            Err(BuildError::InvalidFalsePositiveRate { .. })
        ));
    }
    assert_eq!(
        build(10, 1e-9),
        Err(BuildError::UnreachableFalsePositiveRate { rate: 1e-9 })
    );
    assert!(matches!(
        build(usize::MAX, 0.01),
        Err(BuildError::CapacityTooLarge { .. })
    ));
    assert_eq!(build(1, 0.5), Ok(()));
}

// ---------------------------------------------------------------------------------------------
// Adversarial review: corner cases of tiny tables, coarse targets and the limits, then seeded
// model tests against a multiset.
// ---------------------------------------------------------------------------------------------

/// Inserts distinct keys from `keys` (advancing `next`) while the table has room before its
/// next doubling, so that it ends exactly at its load limit.
/// Fills `filter` to its doubling load with `keys`, skipping those refused because they
/// share both buckets with "hot" (checked by `shares_both_buckets_with_hot`).
fn fill_to_load_limit(filter: &mut CuckooFilter, keys: &[u64], next: &mut usize) {
    while filter.capacity() > filter.len() {
        let key = keys[*next];
        match filter.insert(&key) {
            Ok(()) => {}
            Err(InsertError::ItemBucketsFull) => assert!(shares_both_buckets_with_hot(&key)),
            Err(e) => panic!("{key}: {e}"),
        }
        *next += 1;
    }
}

/// Whether `key` has both of "hot"'s buckets in a fresh `build(1_000, 0.01)`: then it and
/// eight copies of "hot" do not fit in its nearly empty table (an insert is refused, or the
/// table doubles to part them). An entry's other bucket depends only on its anchor, 5 bits,
/// so a key that shares one bucket with another shares both one time in 32.
fn shares_both_buckets_with_hot(key: &u64) -> bool {
    let filter = build(1_000, 0.01);
    filter.insert(key).unwrap();
    (0..8).any(|_| filter.insert("hot").is_err()) || filter.doublings() > 0
}

#[test]
fn a_hot_key_refused_at_the_load_limit_does_not_double_the_table() {
    let seed = seed("a_hot_key_refused_at_the_load_limit_does_not_double_the_table");
    let keys = distinct_keys(seed, 10_000);
    let mut filter = build(1_000, 0.01);
    for _ in 0..8 {
        filter.insert("hot").unwrap();
    }
    assert_eq!(filter.insert("hot"), Err(InsertError::ItemBucketsFull));
    let mut next = 0;
    fill_to_load_limit(&mut filter, &keys, &mut next);
    let (buckets, len) = (filter.buckets(), filter.len());
    // The table is at its load limit, not over it: the ninth copy still has no room, and a
    // failed insert changes nothing (a hot key never grows the table).
    assert_eq!(filter.insert("hot"), Err(InsertError::ItemBucketsFull));
    assert_eq!(filter.len(), len);
    assert_eq!(
        filter.buckets(),
        buckets,
        "a refused insert doubled the table"
    );
}

/// Fills tiny tables with keys drawn from a small universe (so that repeats jam buckets), at
/// coarse targets and several growth limits, and calls `check` after every refused insert with
/// the filter's length and bucket count before the insert.
/// What a filter was before a refused insert.
struct Before {
    len: usize,
}

fn for_each_refusal(
    seed: u64,
    mut check: impl FnMut(&str, &CuckooFilter, &HashMap<u64, usize>, InsertError, Before),
) -> usize {
    let mut rng = Rng::new(seed);
    let mut refusals = 0;
    for capacity in 1..=10 {
        for rate in [0.5, 0.3, 0.4, 0.1] {
            let filter = build(capacity, rate);
            let mut stored: HashMap<u64, usize> = HashMap::new();
            let universe = 40 + rng.below(400);
            for step in 0..3_000 {
                let key = rng.below(universe);
                let before = Before { len: filter.len() };
                match filter.insert(&key) {
                    Ok(()) => *stored.entry(key).or_insert(0) += 1,
                    Err(e) => {
                        refusals += 1;
                        let at = format!("cap {capacity} rate {rate} step {step} key {key}: {e}");
                        check(&at, &filter, &stored, e, before);
                    }
                }
            }
            assert_eq!(filter.len(), stored.values().sum::<usize>());
        }
    }
    refusals
}

#[test]
fn a_refused_insert_keeps_len_and_every_item() {
    let seed = seed("a_refused_insert_keeps_len_and_every_item");
    let refusals = for_each_refusal(seed, |at, filter, stored, e, before| {
        assert!(matches!(e, InsertError::ItemBucketsFull), "{at}");
        assert_eq!(filter.len(), before.len, "{at}: len changed");
        assert!(stored.keys().all(|k| filter.contains(k)), "{at}: item lost");
    });
    assert!(refusals > 0, "the settings jam some inserts");
}

#[test]
fn tiny_rates_are_typed_errors_not_overflow_panics() {
    for rate in [
        1e-12,
        1e-15,
        1e-20,
        1e-100,
        1e-300,
        f64::MIN_POSITIVE,
        5e-324,
    ] {
        let built = std::panic::catch_unwind(|| {
            CuckooFilter::builder()
                .growable(true)
                .capacity(10)
                .false_positive_rate(rate)
                .build()
                .map(|_| ())
        });
        assert_eq!(
            built.ok(),
            Some(Err(BuildError::UnreachableFalsePositiveRate { rate })),
            "rate {rate:e}"
        );
    }
}

/// Bits of an entry that choose its bucket's anchor (the rest are its tail, one of which each
/// doubling turns into a bucket bit).
const ANCHOR_BITS: u32 = 5;

/// A filter whose first entries have run out of tail bits and been copied into both halves of
/// later doublings: it doubles two times more than its entries have tail bits.
fn filter_with_copies(keys: &[u64]) -> (CuckooFilter, usize) {
    let filter = build(1, 0.3);
    let tail_bits = filter.lane_bits() - 1 - ANCHOR_BITS;
    let mut inserted = 0;
    while filter.doublings() < tail_bits + 2 {
        filter.insert(&keys[inserted]).unwrap();
        inserted += 1;
    }
    (filter, inserted)
}

#[test]
fn copies_of_exhausted_entries_keep_every_item_and_capacity_counts_them() {
    let seed = seed("copies_of_exhausted_entries_keep_every_item_and_capacity_counts_them");
    let keys = distinct_keys(seed, 100_000);
    let (filter, inserted) = filter_with_copies(&keys);
    assert!(keys[..inserted].iter().all(|k| filter.contains(k)));
    assert_eq!(filter.len(), inserted);
    // The copies take lanes: the room left is less than the load limit less the items.
    let load_limit = (filter.buckets() as f64 * 4.0 * 0.95) as usize;
    assert!(
        filter.capacity() < load_limit,
        "no copies were made: {filter:?}"
    );
    // Removing every item leaves an empty filter; the copies left behind are only false
    // positives.
    for k in &keys[..inserted] {
        assert!(filter.remove(k));
    }
    assert!(filter.is_empty());
    assert_eq!(filter.len(), 0);
}

#[test]
fn removing_an_absent_item_from_an_emptied_filter_keeps_len_at_zero() {
    // After every inserted item is removed, the copies of exhausted entries made by the last
    // doubling stay behind; an absent item that matches one must not take len below zero
    // (a panic on overflow in debug builds, len() == usize::MAX in release).
    let seed = seed("removing_an_absent_item_from_an_emptied_filter_keeps_len_at_zero");
    let keys = distinct_keys(seed, 200_000);
    let (filter, inserted) = filter_with_copies(&keys);
    for k in &keys[..inserted] {
        assert!(filter.remove(k));
    }
    assert_eq!(filter.len(), 0);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut removed = 0;
        for k in &keys[inserted..] {
            if filter.remove(k) {
                removed += 1;
            }
        }
        (removed, filter.len())
    }));
    match outcome {
        Ok((removed, len)) => assert_eq!(len, 0, "{removed} absent items removed"),
        Err(_) => panic!("remove of an absent item panicked on an empty filter"),
    }
}

#[test]
fn memory_usage_counts_the_table_and_the_filter_once() {
    // A filter of two buckets: the table is a few words, so memory_usage is about the size of
    // the filter value itself (which holds its key maps inline) and its fixed parts: the lock
    // stripes of the largest table it may double into (4096 version words of 8 bytes), the
    // counter shards and a cell per doubling.
    let filter = build(1, 0.5);
    assert_eq!(filter.buckets(), 2);
    let words = (2 * 4 * filter.lane_bits() as usize).div_ceil(64) + 2;
    let own = std::mem::size_of::<CuckooFilter>();
    assert!(
        filter.memory_usage() >= own + 8 * words + 4096 * 8,
        "{}",
        filter.memory_usage()
    );
    assert!(
        filter.memory_usage() <= own + 16 * words + 4096 * 8 + 16 * 1024,
        "memory_usage {} for a filter value of {own} bytes and {words} words of table",
        filter.memory_usage()
    );
}

#[test]
fn a_hot_key_in_tiny_tables_is_stored_eight_times_and_refused_with_item_buckets_full() {
    for capacity in 1..=10 {
        for rate in [0.5, 0.3, 0.01] {
            let filter = build(capacity, rate);
            let buckets = filter.buckets();
            let mut stored = 0;
            // 100,000 attempts once; each refusal walks 500 kicks, so fewer elsewhere.
            let attempts = if capacity == 1 && rate == 0.5 {
                100_000
            } else {
                2_000
            };
            for _ in 0..attempts {
                match filter.insert(&0xdead_beef_u64) {
                    Ok(()) => stored += 1,
                    Err(e) => assert_eq!(e, InsertError::ItemBucketsFull),
                }
            }
            let at = format!("cap {capacity} rate {rate}: {filter:?}");
            assert_eq!(stored, 8, "{at}");
            assert_eq!(filter.len(), 8, "{at}");
            // A table of two buckets doubles at 7 of its 8 lanes, hot key or not; a larger
            // one never grows for a hot key.
            if buckets > 2 {
                assert_eq!(filter.buckets(), buckets, "{at}");
            } else {
                assert!(filter.doublings() <= 1, "{at}");
            }
            for _ in 0..8 {
                assert!(filter.remove(&0xdead_beef_u64), "{at}");
            }
            assert!(!filter.contains(&0xdead_beef_u64), "{at}");
            assert!(filter.is_empty(), "{at}");
        }
    }
}

/// Hashes every item to the same value.
#[derive(Clone, Default)]
struct ConstantHasher;

impl std::hash::Hasher for ConstantHasher {
    fn finish(&self) -> u64 {
        0x0123_4567_89ab_cdef
    }
    fn write(&mut self, _: &[u8]) {}
}

#[test]
fn a_constant_hasher_stores_eight_items_then_refuses_without_growing() {
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(100)
        .false_positive_rate(0.01)
        .hasher(std::hash::BuildHasherDefault::<ConstantHasher>::default())
        .build()
        .unwrap();
    let buckets = filter.buckets();
    for i in 0..8u64 {
        filter.insert(&i).unwrap();
    }
    for i in 8..10_000u64 {
        assert_eq!(filter.insert(&i), Err(InsertError::ItemBucketsFull));
    }
    assert_eq!(filter.buckets(), buckets);
    assert_eq!(filter.len(), 8);
    assert!(filter.contains(&12345u64));
    for i in 0..8u64 {
        assert!(filter.remove(&i));
    }
    assert!(!filter.contains(&0u64));
    assert!(!filter.remove(&0u64));
}

#[test]
fn capacity_is_at_least_what_the_builder_asked_for() {
    for capacity in (1..=2_000).chain([3_799, 3_800, 3_801, 37_999, 38_000, 380_000, 999_999]) {
        let filter = build(capacity, 0.5);
        assert!(
            filter.capacity() >= capacity,
            "asked {capacity}: {filter:?} takes {}",
            filter.capacity()
        );
        assert!(filter.buckets().is_multiple_of(2));
        // No more than the buckets needed, rounded up to an even count.
        assert!(
            filter.capacity() < capacity + 8,
            "asked {capacity}: {}",
            filter.capacity()
        );
        assert_eq!(filter.len(), 0);
        assert!(filter.is_empty());
    }
}

#[test]
fn a_multiset_model_of_inserts_removes_clears_and_clones_never_loses_an_item() {
    // Tiny tables, coarse targets, keys from a small universe plus a few hot keys: every item
    // whose insert succeeded (less its removes) is found, in the filter and in clones taken
    // along the way, through doublings, copies of exhausted entries, clears and refusals.
    let seed = seed("a_multiset_model_of_inserts_removes_clears_and_clones_never_loses_an_item");
    let mut rng = Rng::new(seed);
    for (capacity, rate) in [(1, 0.3), (2, 0.5), (3, 0.4), (6, 0.3), (10, 0.1), (1, 0.5)] {
        let mut filter = build(capacity, rate);
        let mut model: HashMap<u64, usize> = HashMap::new();
        let mut snapshot: Option<(CuckooFilter, HashMap<u64, usize>)> = None;
        let universe = 500 + rng.below(3_000);
        for step in 0..20_000 {
            let at = format!("cap {capacity} rate {rate} step {step}");
            let op = rng.below(100);
            let key = if rng.below(20) == 0 {
                rng.below(4)
            } else {
                rng.below(universe)
            };
            if op < 60 {
                let len = filter.len();
                match filter.insert(&key) {
                    Ok(()) => *model.entry(key).or_insert(0) += 1,
                    Err(InsertError::ItemBucketsFull) => {
                        assert_eq!(filter.len(), len, "{at}");
                    }
                    Err(e) => panic!("{at}: {e}"),
                }
            } else if op < 95 {
                if let Some(copies) = model.get_mut(&key) {
                    assert!(filter.remove(&key), "{at}: inserted {key} not removed");
                    *copies -= 1;
                    if *copies == 0 {
                        model.remove(&key);
                    }
                }
            } else if op < 97 {
                snapshot = Some((filter.clone(), model.clone()));
            } else if op < 98 {
                let doublings = filter.doublings();
                filter.clear();
                model.clear();
                assert!(filter.is_empty(), "{at}");
                assert_eq!(filter.doublings(), doublings, "{at}");
            } else if let Some((copy, copy_model)) = snapshot.take() {
                // Go on with the clone; the original is dropped.
                assert_eq!(copy.len(), copy_model.values().sum::<usize>(), "{at}");
                assert!(
                    copy_model.keys().all(|k| copy.contains(k)),
                    "{at}: clone lost"
                );
                filter = copy;
                model = copy_model;
            }
            assert_eq!(filter.len(), model.values().sum::<usize>(), "{at}");
            if step % 500 == 0 {
                for k in model.keys() {
                    assert!(filter.contains(k), "{at}: {k} lost");
                }
            }
        }
        for k in model.keys() {
            assert!(
                filter.contains(k),
                "cap {capacity} rate {rate}: {k} lost at the end"
            );
        }
        // Remove everything the model holds: every remove finds its item.
        for (k, copies) in &model {
            for _ in 0..*copies {
                assert!(filter.remove(k), "cap {capacity} rate {rate}: {k}");
            }
        }
        assert!(filter.is_empty());
    }
}

#[test]
fn a_doubling_in_progress_answers_exactly_as_when_finished() {
    let seed = seed("a_doubling_in_progress_answers_exactly_as_when_finished");
    let keys = distinct_keys(seed, 40_000 + 200_000);
    let (items, probes) = keys.split_at(40_000);
    for rate in [0.3, 0.01] {
        let filter = grown(50, rate);
        let mut checked = 0;
        for (i, key) in items.iter().enumerate() {
            let doublings = filter.doublings();
            filter.insert(key).unwrap();
            // Right after a doubling, and again part-way through its splits.
            if filter.doublings() != doublings || (filter.is_doubling() && i % 97 == 0) {
                assert!(filter.is_doubling(), "a doubling splits gradually");
                let finished = filter.clone();
                finished.finish_doubling();
                assert!(!finished.is_doubling());
                assert_eq!(finished.false_positive_rate(), filter.false_positive_rate());
                assert_eq!(finished.capacity(), filter.capacity());
                for probe in items[..=i].iter().chain(&probes[..20_000]) {
                    assert_eq!(
                        filter.contains(probe),
                        finished.contains(probe),
                        "rate {rate}"
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 10, "rate {rate}: {checked} checks");
        assert!(filter.doublings() >= 8);
    }
}

#[test]
fn removes_during_a_doubling_keep_every_other_item() {
    let seed = seed("removes_during_a_doubling_keep_every_other_item");
    let keys = distinct_keys(seed, 30_000);
    let filter = grown(100, 0.05);
    let mut live: Vec<u64> = Vec::new();
    let mut rng = Rng::new(seed);
    for key in &keys {
        filter.insert(key).unwrap();
        live.push(*key);
        // While a doubling is splitting, remove a random live item now and then.
        if filter.is_doubling() && rng.below(3) == 0 {
            let gone = live.swap_remove(rng.below(live.len() as u64) as usize);
            assert!(filter.remove(&gone));
        }
    }
    assert_eq!(filter.len(), live.len());
    assert!(live.iter().all(|k| filter.contains(k)));
}

#[test]
fn a_doubling_is_finished_by_the_inserts_that_follow_it() {
    for seed in 0..8u64 {
        finished_doublings_follow_their_claims(11 + seed * 1000);
    }
}

/// Below 4,096 old buckets every insert claims two, so a doubling of `old` buckets ends within
/// `old / 2` inserts. From 4,096 on, one insert in eight (by its item) claims a run of
/// sixteen, so a doubling takes `R = old / 16` claims, about `8R` inserts with a standard
/// deviation under `8 √R`: each ends within six of those deviations. Either way each doubling
/// ends before the next begins.
fn finished_doublings_follow_their_claims(seed: u64) {
    let keys = distinct_keys(seed, 200_000);
    let filter = grown(100, 0.01);
    let mut since: Option<(u64, usize)> = None;
    let mut finished = 0;
    for (i, key) in keys.iter().enumerate() {
        let buckets = filter.buckets();
        filter.insert(key).unwrap();
        if filter.buckets() != buckets {
            assert!(
                since.is_none(),
                "seed {seed}, insert {i}: a doubling began before the last one ended"
            );
            since = Some((buckets, i));
        }
        let Some((old, at)) = since else { continue };
        if !filter.is_doubling() {
            let runs = old.div_ceil(16) as f64;
            let bound = if old < 4096 {
                (old / 2) as f64
            } else {
                8.0 * runs + 48.0 * runs.sqrt()
            };
            let took = i - at;
            assert!(
                took as f64 <= bound,
                "seed {seed}, insert {i}: a doubling of {old} old buckets took {took} inserts"
            );
            since = None;
            finished += 1;
        }
    }
    assert!(finished >= 10, "seed {seed}: {finished} doublings");
}

// ---------------------------------------------------------------------------------------------
// Adversarial review of the gradual doubling: a filter in the middle of a doubling is run in
// lockstep with a copy that finishes every doubling at once. Splitting a bucket is a function
// of its old contents alone and every write splits the buckets it touches first, so the two
// must agree on every answer and every result, op for op.
// ---------------------------------------------------------------------------------------------

/// Asserts that `filter` (perhaps mid-doubling) and `finished` (never mid-doubling) agree on
/// every reported number and on `contains` for `keys`.
fn assert_agree(at: &str, filter: &CuckooFilter, finished: &CuckooFilter, keys: &[u64]) {
    assert!(!finished.is_doubling(), "{at}");
    assert_eq!(filter.len(), finished.len(), "{at}: len");
    assert_eq!(filter.is_empty(), finished.is_empty(), "{at}: is_empty");
    assert_eq!(filter.capacity(), finished.capacity(), "{at}: capacity");
    assert_eq!(filter.buckets(), finished.buckets(), "{at}: buckets");
    assert_eq!(filter.doublings(), finished.doublings(), "{at}: doublings");
    assert_eq!(
        filter.load_factor().to_bits(),
        finished.load_factor().to_bits(),
        "{at}: load_factor"
    );
    assert_eq!(
        filter.false_positive_rate().to_bits(),
        finished.false_positive_rate().to_bits(),
        "{at}: false_positive_rate"
    );
    crate::common::assert_memory_agrees(at, filter, finished);
    for k in keys {
        assert_eq!(
            filter.contains(k),
            finished.contains(k),
            "{at}: contains({k}) differs mid-doubling ({filter:?})"
        );
    }
}

/// The settings of the lockstep tests: coarse targets (short tails, copies of exhausted
/// entries) and a fine one, on tiny tables.
const TINY_RATES: [f64; 4] = [0.5, 0.3, 0.4, 0.01];

#[test]
fn a_filter_mid_doubling_and_a_finished_copy_agree_op_for_op() {
    let seed = seed("a_filter_mid_doubling_and_a_finished_copy_agree_op_for_op");
    let mut rng = Rng::new(seed);
    let mut mid_doubling_steps = 0u64;
    let mut refused_mid_doubling = 0u64;
    for capacity in [1, 2, 3, 4, 5, 7, 10, 30, 64] {
        for rate in TINY_RATES {
            let mut filter = build(capacity, rate);
            let finished = filter.clone();
            let mut model: HashMap<u64, usize> = HashMap::new();
            let universe = 60 + rng.below(600);
            let probes: Vec<u64> = (0..universe + 200).map(|i| i ^ 0xabcd_0000).collect();
            for step in 0..5_000 {
                let at = format!("seed {seed} cap {capacity} rate {rate} step {step}");
                // Every probe while a doubling is in progress, now and then otherwise.
                let probed = if filter.is_doubling() || step % 64 == 0 {
                    &probes[..]
                } else {
                    &probes[..0]
                };
                let op = rng.below(100);
                let key = if rng.below(16) == 0 {
                    rng.below(3)
                } else {
                    rng.below(universe)
                };
                if op < 70 {
                    let was_doubling = filter.is_doubling();
                    let got = filter.insert(&key);
                    assert_eq!(got, finished.insert(&key), "{at}: insert {key}");
                    finished.finish_doubling();
                    match got {
                        Ok(()) => *model.entry(key).or_insert(0) += 1,
                        Err(InsertError::ItemBucketsFull) => {
                            refused_mid_doubling += u64::from(was_doubling)
                        }
                        Err(e) => panic!("{at}: {e}"),
                    }
                } else if op < 90 {
                    if let Some(copies) = model.get_mut(&key) {
                        assert!(filter.remove(&key), "{at}: inserted {key} not removed");
                        assert!(
                            finished.remove(&key),
                            "{at}: {key} not removed when finished"
                        );
                        *copies -= 1;
                        if *copies == 0 {
                            model.remove(&key);
                        }
                    } else {
                        // An absent key may match, and remove, another's entry: on copies, the
                        // same answer and the same state from both.
                        let (a, b) = (filter.clone(), finished.clone());
                        assert_eq!(a.remove(&key), b.remove(&key), "{at}: remove absent {key}");
                        assert_agree(&at, &a, &b, probed);
                    }
                } else if op < 94 {
                    // Carry on with a clone taken mid-doubling.
                    filter = filter.clone();
                } else if op < 96 {
                    filter.finish_doubling();
                    assert!(!filter.is_doubling(), "{at}");
                } else if op < 97 {
                    filter.clear();
                    finished.clear();
                    model.clear();
                    assert!(!filter.is_doubling(), "{at}: clear leaves no split to do");
                } else {
                    // A clone finished on the side never changes the filter.
                    let side = filter.clone();
                    side.finish_doubling();
                    assert_agree(&at, &filter, &side, &probes);
                    side.clear();
                }
                mid_doubling_steps += u64::from(filter.is_doubling());
                assert_eq!(filter.len(), model.values().sum::<usize>(), "{at}");
                for k in model.keys() {
                    assert!(filter.contains(k), "{at}: {k} lost ({filter:?})");
                }
                let probed = if filter.is_doubling() || step % 64 == 0 {
                    &probes[..]
                } else {
                    &probes[..0]
                };
                assert_agree(&at, &filter, &finished, probed);
            }
        }
    }
    println!("{mid_doubling_steps} steps mid-doubling, {refused_mid_doubling} refusals");
    assert!(
        mid_doubling_steps > 400,
        "{mid_doubling_steps} steps mid-doubling"
    );
}

/// Hashes a `u64` item below 2^32 to one of `JAM_CLASSES` values (so that such items share
/// buckets and jam them, and kick chains run long) and every other item to a distinct value.
#[derive(Clone, Default)]
struct JamHasher(u64);

const JAM_CLASSES: u64 = 48;

impl std::hash::Hasher for JamHasher {
    fn finish(&self) -> u64 {
        let x = if self.0 < 1 << 32 {
            self.0 % JAM_CLASSES
        } else {
            self.0
        };
        // SplitMix64's finaliser: distinct values stay distinct.
        let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

type JamFilter = CuckooFilter<std::hash::BuildHasherDefault<JamHasher>>;

#[test]
fn refused_inserts_whose_kick_chains_cross_unsplit_buckets_change_no_answer() {
    // Jammed items (few hash values) refused mid-doubling walk 500 kicks through buckets of
    // the doubling in progress, splitting those they reach, and undo every move: each refusal
    // leaves the answers, the counts and every stored item as they were, and the filter keeps
    // agreeing with a copy that finishes every doubling at once.
    let seed = seed("refused_inserts_whose_kick_chains_cross_unsplit_buckets_change_no_answer");
    let mut rng = Rng::new(seed);
    let mut refusals_mid_doubling = 0u64;
    for (capacity, rate) in [(40, 0.3), (100, 0.01), (200, 0.5), (64, 0.4)] {
        let filter: JamFilter = CuckooFilter::builder()
            .growable(true)
            .capacity(capacity)
            .false_positive_rate(rate)
            .hasher(std::hash::BuildHasherDefault::<JamHasher>::default())
            .build()
            .unwrap();
        let finished = filter.clone();
        let mut stored: Vec<u64> = Vec::new();
        let probes: Vec<u64> = (0..3_000u64).map(|i| (1 << 40) + i * 7 + 3).collect();
        let mut distinct = 1u64 << 33;
        for step in 0..6_000 {
            let at = format!("seed {seed} cap {capacity} rate {rate} step {step}");
            let jam = rng.below(3) == 0;
            let key = if jam {
                rng.below(1 << 20)
            } else {
                distinct += 1;
                distinct
            };
            let was_doubling = filter.is_doubling();
            let before = (
                filter.len(),
                filter.capacity(),
                filter.false_positive_rate().to_bits(),
                filter.load_factor().to_bits(),
                filter.buckets(),
            );
            let answers: Vec<bool> = if was_doubling {
                probes.iter().map(|p| filter.contains(p)).collect()
            } else {
                Vec::new()
            };
            let got = filter.insert(&key);
            assert_eq!(got, finished.insert(&key), "{at}: insert {key}");
            finished.finish_doubling();
            match got {
                Ok(()) => stored.push(key),
                Err(InsertError::ItemBucketsFull) => {
                    // A distinct item too, when jammed items fill its buckets.
                    if was_doubling && filter.buckets() == before.4 {
                        refusals_mid_doubling += 1;
                        let after = (
                            filter.len(),
                            filter.capacity(),
                            filter.false_positive_rate().to_bits(),
                            filter.load_factor().to_bits(),
                            filter.buckets(),
                        );
                        assert_eq!(after, before, "{at}: a refusal changed the counts");
                        for (p, was) in probes.iter().zip(&answers) {
                            assert_eq!(filter.contains(p), *was, "{at}: probe {p}");
                        }
                    }
                }
                Err(e) => panic!("{at}: {e}"),
            }
            if rng.below(4) == 0 && !stored.is_empty() {
                let gone = stored.swap_remove(rng.below(stored.len() as u64) as usize);
                assert!(filter.remove(&gone), "{at}: {gone} not removed");
                assert!(
                    finished.remove(&gone),
                    "{at}: {gone} not removed when finished"
                );
            }
            assert_eq!(filter.len(), stored.len(), "{at}");
            if filter.is_doubling() || step % 100 == 0 {
                assert!(
                    stored.iter().all(|k| filter.contains(k)),
                    "{at}: an item lost"
                );
                for p in probes.iter().chain(&stored) {
                    assert_eq!(filter.contains(p), finished.contains(p), "{at}: {p}");
                }
                assert_eq!(filter.capacity(), finished.capacity(), "{at}");
                assert_eq!(
                    filter.false_positive_rate(),
                    finished.false_positive_rate(),
                    "{at}"
                );
            }
        }
    }
    println!("{refusals_mid_doubling} refusals mid-doubling");
    assert!(refusals_mid_doubling > 20, "{refusals_mid_doubling}");
}

/// Inserts distinct keys until an insert begins a doubling; `None` when the filter refuses
/// one first.
fn insert_until_a_doubling_begins(
    filter: &mut CuckooFilter,
    keys: &[u64],
    next: &mut usize,
) -> Option<()> {
    let doublings = filter.doublings();
    while filter.doublings() == doublings {
        filter.insert(keys.get(*next)?).ok()?;
        *next += 1;
    }
    Some(())
}

#[test]
fn removing_every_item_right_after_a_doubling_begins_keeps_the_rest_at_each_step() {
    // Right after a doubling begins most buckets are unsplit and their new halves empty: each
    // remove splits the item's buckets and takes the entry from the half it lands in. Every
    // other item stays, and each step answers as a copy that finished the doubling first.
    let seed =
        seed("removing_every_item_right_after_a_doubling_begins_keeps_the_rest_at_each_step");
    let mut rng = Rng::new(seed);
    let keys = distinct_keys(seed, 20_000);
    let probes = distinct_keys(seed ^ 0x5555, 2_000);
    let mut checked = 0;
    for capacity in [1, 2, 3, 5, 8, 10, 40, 150] {
        for rate in TINY_RATES {
            let mut filter = build(capacity, rate);
            let mut next = 0;
            // Through the first few doublings, each time from its first step.
            for round in 0..4 {
                if insert_until_a_doubling_begins(&mut filter, &keys, &mut next).is_none() {
                    break;
                }
                let at = format!("seed {seed} cap {capacity} rate {rate} round {round}");
                let mut live: Vec<u64> = keys[..next].to_vec();
                let copy = filter.clone();
                let finished = filter.clone();
                finished.finish_doubling();
                assert_agree(&at, &copy, &finished, &probes);
                // Remove every item, in random order, from a copy mid-doubling.
                while !live.is_empty() {
                    let gone = live.swap_remove(rng.below(live.len() as u64) as usize);
                    assert!(copy.remove(&gone), "{at}: {gone} not removed");
                    assert!(
                        finished.remove(&gone),
                        "{at}: {gone} not removed when finished"
                    );
                    assert!(
                        live.iter().all(|k| copy.contains(k)),
                        "{at}: lost after {gone}"
                    );
                    let sample = if copy.is_doubling() {
                        &probes[..200]
                    } else {
                        &probes[..0]
                    };
                    assert_agree(&at, &copy, &finished, sample);
                    for k in &live {
                        assert_eq!(copy.contains(k), finished.contains(k), "{at}");
                    }
                    checked += 1;
                }
                assert!(copy.is_empty(), "{at}");
                assert_agree(&at, &copy, &finished, &probes);
                // The filter the copy was taken from is unchanged.
                assert!(keys[..next].iter().all(|k| filter.contains(k)), "{at}");
                assert_eq!(filter.len(), next, "{at}");
            }
        }
    }
    assert!(checked > 1_000, "{checked}");
}

#[test]
fn a_clone_taken_mid_doubling_is_independent_of_the_original() {
    // The split bitmap belongs to each copy: finishing, clearing, removing from or growing
    // one copy changes no answer of the other.
    let seed = seed("a_clone_taken_mid_doubling_is_independent_of_the_original");
    let keys = distinct_keys(seed, 40_000);
    let probes = distinct_keys(seed ^ 0xface, 5_000);
    let mut checked = 0;
    for capacity in [3, 10, 200] {
        for rate in TINY_RATES {
            let mut filter = build(capacity, rate);
            let mut next = 0;
            for _ in 0..3 {
                if insert_until_a_doubling_begins(&mut filter, &keys, &mut next).is_none() {
                    break;
                }
            }
            if !filter.is_doubling() {
                continue;
            }
            checked += 1;
            let at = format!("seed {seed} cap {capacity} rate {rate}");
            let answers: Vec<bool> = probes.iter().map(|p| filter.contains(p)).collect();
            let counts = (filter.len(), filter.capacity(), filter.memory_usage());
            for order in 0..4 {
                let copy = filter.clone();
                crate::common::assert_memory_agrees(&at, &filter, &copy);
                match order {
                    0 => copy.finish_doubling(),
                    1 => copy.clear(),
                    2 => {
                        for k in &keys[..next] {
                            assert!(copy.remove(k), "{at}");
                        }
                    }
                    _ => {
                        for k in &keys[next..] {
                            if copy.insert(k).is_err() || copy.doublings() > filter.doublings() + 1
                            {
                                break;
                            }
                        }
                    }
                }
                assert!(filter.is_doubling(), "{at} order {order}");
                assert_eq!(
                    (filter.len(), filter.capacity(), filter.memory_usage()),
                    counts,
                    "{at} order {order}"
                );
                for (p, was) in probes.iter().zip(&answers) {
                    assert_eq!(filter.contains(p), *was, "{at} order {order}: {p}");
                }
                assert!(keys[..next].iter().all(|k| filter.contains(k)), "{at}");
            }
        }
    }
    assert!(checked >= 5, "{checked} filters mid-doubling");
}

#[test]
fn a_hot_key_refused_mid_doubling_changes_no_answer() {
    // A key stored eight times, then a doubling begun: its copies split into its two new
    // buckets (they share every bit) and it is refused again, without a change to any answer
    // or count, and without disturbing the doubling's agreement with a finished copy.
    let seed = seed("a_hot_key_refused_mid_doubling_changes_no_answer");
    let keys = distinct_keys(seed, 50_000);
    let probes = distinct_keys(seed ^ 0xbeef, 5_000);
    let mut refused = 0;
    for capacity in [20, 100, 500] {
        for rate in [0.01, 0.3, 0.5] {
            let mut filter = build(capacity, rate);
            for _ in 0..8 {
                filter.insert("hot").unwrap();
            }
            // Keys that share both buckets with "hot" (one in 32 of those that share one) are
            // refused while its copies fill them: only the others are stored.
            let mut next = 0;
            let mut stored: Vec<u64> = Vec::new();
            let insert = |filter: &mut CuckooFilter, next: &mut usize, stored: &mut Vec<u64>| {
                let key = keys[*next];
                *next += 1;
                match filter.insert(&key) {
                    Ok(()) => {
                        stored.push(key);
                        Ok(())
                    }
                    Err(InsertError::ItemBucketsFull) => Ok(()),
                    Err(e) => Err(e),
                }
            };
            for round in 0..3 {
                let doublings = filter.doublings();
                while filter.doublings() == doublings && next < keys.len() {
                    insert(&mut filter, &mut next, &mut stored).unwrap();
                }
                if filter.doublings() == doublings {
                    break;
                }
                let at = format!("seed {seed} cap {capacity} rate {rate} round {round}");
                while filter.is_doubling() {
                    let answers: Vec<bool> = probes.iter().map(|p| filter.contains(p)).collect();
                    let counts = (
                        filter.len(),
                        filter.capacity(),
                        filter.false_positive_rate(),
                        filter.load_factor(),
                        filter.buckets(),
                    );
                    assert_eq!(
                        filter.insert("hot"),
                        Err(InsertError::ItemBucketsFull),
                        "{at}"
                    );
                    refused += 1;
                    assert_eq!(
                        (
                            filter.len(),
                            filter.capacity(),
                            filter.false_positive_rate(),
                            filter.load_factor(),
                            filter.buckets(),
                        ),
                        counts,
                        "{at}"
                    );
                    for (p, was) in probes.iter().zip(&answers) {
                        assert_eq!(filter.contains(p), *was, "{at}: {p}");
                    }
                    assert!(filter.contains("hot"), "{at}");
                    let finished = filter.clone();
                    finished.finish_doubling();
                    assert_agree(&at, &filter, &finished, &probes[..500]);
                    // Then one more distinct item, which splits two more buckets.
                    if next == keys.len() || insert(&mut filter, &mut next, &mut stored).is_err() {
                        break;
                    }
                }
                assert!(stored.iter().all(|k| filter.contains(k)), "{at}");
            }
            for _ in 0..8 {
                assert!(filter.remove("hot"));
            }
            assert_eq!(filter.len(), stored.len());
            // Few keys were refused (in the smallest tables, of 6 buckets first, a few in 20
            // share both buckets with the hot key or find its two full ones in their way).
            assert!(
                stored.len() * 5 >= next * 4,
                "{} of {next} stored",
                stored.len()
            );
        }
    }
    assert!(refused > 100, "{refused}");
}

#[test]
fn a_hot_key_does_not_get_distinct_items_refused_while_the_table_has_room() {
    // A kick chain that carries a copy of the hot key must not be trapped between its two
    // full buckets (swapping copy for copy), or items that share one of them are refused
    // while the table has room.
    let keys = distinct_keys(0x40_7ab1e, 20_000);
    let filter = build(1_000, 0.01);
    for _ in 0..8 {
        filter.insert("hot").unwrap();
    }
    // Half the load limit, where a random walk always finds room.
    for key in &keys[..500] {
        filter.insert(key).unwrap();
    }
    // Only keys that share both buckets with the hot key are refused.
    let mut refused = 0;
    for key in &keys[500..] {
        match filter.insert(key) {
            Ok(()) => assert!(filter.remove(key)),
            Err(e) => {
                assert_eq!(e, InsertError::ItemBucketsFull);
                assert!(
                    shares_both_buckets_with_hot(key),
                    "{key} refused at load {}",
                    filter.load_factor()
                );
                refused += 1;
            }
        }
    }
    assert_eq!(filter.doublings(), 0);
    // One key in 264 × 32 shares both buckets: about 2.3 of 19,500.
    assert!(refused <= 10, "{refused} refused");
}

/// Tiny tables at every lane width (coarse to 32-bit lanes): distinct items go in through a
/// few doublings. Every stored item stays found and `len` exact at each step, a refused insert
/// changes nothing, a distinct item is refused with `ItemBucketsFull` only below half the
/// doubling load (the documented rule for a walk that found no room; a hot key is not
/// involved) and never otherwise; then every item is removed, in random order, leaving the
/// rest found.
#[test]
fn tiny_tables_of_every_width_fill_refuse_and_empty_exactly() {
    let seed = seed("tiny_tables_of_every_width_fill_refuse_and_empty_exactly");
    let refused_early = fill_tiny_tables(seed);
    assert!(
        refused_early.is_empty(),
        "{} refusals of distinct items at half the doubling load or more, first: {:?}",
        refused_early.len(),
        &refused_early[..refused_early.len().min(5)]
    );
}

/// Fills tiny tables of every width (see the test above); returns the refusals with
/// `ItemBucketsFull` at half the doubling load or more.
fn fill_tiny_tables(seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let mut widths = std::collections::BTreeSet::new();
    let mut refused_early = Vec::new();
    for capacity in 1..=16usize {
        for rate in [0.5, 0.2, 0.05, 0.01, 1e-3, 1e-5, 1e-7, 5e-8, 3e-8, 1e-8] {
            {
                let at = format!("seed={seed} capacity {capacity} rate {rate}");
                let filter = match CuckooFilter::builder()
                    .growable(true)
                    .capacity(capacity)
                    .false_positive_rate(rate)
                    .build()
                {
                    Ok(f) => f,
                    Err(BuildError::UnreachableFalsePositiveRate { .. }) => continue,
                    Err(e) => panic!("{at}: {e}"),
                };
                widths.insert(filter.lane_bits());
                let keys = distinct_keys(rng.next_u64(), 4_000);
                let mut stored: Vec<u64> = Vec::new();
                for key in &keys {
                    let len = filter.len();
                    let load = filter.load_factor();
                    match filter.insert(key) {
                        Ok(()) => stored.push(*key),
                        Err(e) => {
                            assert_eq!(filter.len(), len, "{at}: a refused insert changed len");
                            match e {
                                InsertError::ItemBucketsFull => {
                                    if load >= 0.95 / 2.0 {
                                        refused_early.push(format!(
                                            "{at}: {key} refused with {e:?} at load {load} ({} buckets)",
                                            filter.buckets()
                                        ));
                                    }
                                }
                                e => panic!("{at}: {e:?}"),
                            }
                        }
                    }
                    assert_eq!(filter.len(), stored.len(), "{at}: len");
                    if let Some(lost) = stored.iter().find(|k| !filter.contains(*k)) {
                        panic!("{at}: {lost} lost after inserting {key}");
                    }
                    // Through three doublings: the last table is 8 times the first.
                    if filter.doublings() >= 3 {
                        break;
                    }
                }
                assert!(filter.doublings() >= 3, "{at}: {filter:?}");
                // Remove in random order.
                while !stored.is_empty() {
                    let i = rng.below(stored.len() as u64) as usize;
                    let key = stored.swap_remove(i);
                    assert!(filter.remove(&key), "{at}: remove of stored {key}");
                    assert_eq!(filter.len(), stored.len(), "{at}: len after removes");
                    if let Some(lost) = stored.iter().find(|k| !filter.contains(*k)) {
                        panic!("{at}: {lost} lost after removing {key}");
                    }
                }
                assert!(filter.is_empty(), "{at}");
            }
        }
    }
    println!("lane widths covered: {widths:?}");
    println!(
        "{} early ItemBucketsFull: {:#?}",
        refused_early.len(),
        &refused_early[..refused_early.len().min(20)]
    );
    assert!(widths.contains(&32), "no 32-bit lanes: {widths:?}");
    refused_early
}

/// The table has no ceiling: from a first table of two buckets (`capacity(1)`), 1.2 million
/// items take it past the 17 doublings its lane width keeps the target rate for. Every insert
/// succeeds, every item is found after each doubling and at the end, and `len` is exact.
#[test]
fn growth_past_the_planned_doublings_never_refuses_and_finds_every_item() {
    let seed = seed("growth_past_the_planned_doublings_never_refuses_and_finds_every_item");
    let filter = build(1, 0.01);
    assert_eq!(filter.buckets(), 2);
    let keys = distinct_keys(seed, 1_200_000);
    let mut doublings = 0;
    for (i, key) in keys.iter().enumerate() {
        if let Err(e) = filter.insert(key) {
            panic!("seed {seed}: insert {i} refused with {e:?} at {filter:?}");
        }
        // Every item after each of the last doublings (the earlier ones are checked by the
        // tests above); sampled ones after the first.
        if filter.doublings() != doublings {
            doublings = filter.doublings();
            let step = if doublings > 14 { 1 } else { 97 };
            assert!(
                keys[..=i].iter().step_by(step).all(|k| filter.contains(k)),
                "seed {seed}: an item lost at doubling {doublings}"
            );
        }
    }
    println!("{filter:?}");
    assert!(filter.doublings() > 17, "{filter:?}");
    assert_eq!(filter.len(), keys.len());
    let lost = keys.iter().filter(|k| !filter.contains(*k)).count();
    assert_eq!(lost, 0, "seed {seed}: {lost} items lost");
}
