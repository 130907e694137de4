//! Single-threaded corners of a growable filter: the smallest tables (capacity 1 to 3) at
//! the widest and narrowest lanes, every public method before the first insert, in the middle
//! of a doubling (after the insert that begins it, before it is finished) and after it, `clear`
//! and `clone` in the middle of a doubling, removes of every copy, `insert_unique`, the batch
//! calls' error index, a growable `CuckooSet`, `shrink_to_fit`, and the capacity promise.

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common::growable;
use crate::common::{distinct_keys, seed, Rng};
use crate::growable_sizes::GrowableSizes;

/// The capacities and rates the corners are checked at: tables of two buckets (one to three
/// items), and lanes from the narrowest (rate 0.5: 14-bit entries) to nearly the widest
/// (1e-7: 30-bit entries).
const CAPACITIES: [usize; 3] = [1, 2, 3];
const RATES: [f64; 3] = [0.5, 0.01, 1e-7];

/// Inserts keys from `keys[*next..]` until a doubling is in progress (or `limit` keys were
/// inserted in all); returns whether one is.
fn insert_until_mid_doubling(
    filter: &CuckooFilter,
    keys: &[u64],
    next: &mut usize,
    limit: usize,
) -> bool {
    while *next < limit {
        filter.insert(&keys[*next]).unwrap();
        *next += 1;
        if filter.is_doubling() {
            return true;
        }
    }
    false
}

/// Every accessor agrees with the others and with what was inserted, and none panics.
/// `inserted` were each inserted once (and not removed); `exact` says whether the lanes are
/// wide enough that a count of 1 per item and no false positive among `absent` can be asserted.
fn assert_consistent(
    at: &str,
    filter: &CuckooFilter,
    inserted: &[u64],
    absent: &[u64],
    exact: bool,
) {
    let debug = format!("{filter:?}");
    assert!(debug.contains("growable: true"), "{at}: {debug}");
    assert!(
        debug.contains(&format!("doublings: {}", filter.doublings())),
        "{at}: {debug}"
    );
    assert!(
        debug.contains(&format!("doubling_in_progress: {}", filter.is_doubling())),
        "{at}: {debug}"
    );
    assert_eq!(filter.len(), inserted.len(), "{at}: {debug}");
    assert_eq!(filter.is_empty(), inserted.is_empty(), "{at}");
    assert!(filter.is_growable(), "{at}");
    assert_eq!(filter.slots() % 4, 0, "{at}");
    assert_eq!(
        filter.buckets(),
        2u64 << filter.doublings(),
        "{at}: a table of two buckets doubled {} times",
        filter.doublings()
    );
    assert!(
        filter.capacity() < filter.slots(),
        "{at}: capacity {} of {} slots",
        filter.capacity(),
        filter.slots()
    );
    assert!(
        filter.len() <= filter.capacity(),
        "{at}: {} items but capacity {}",
        filter.len(),
        filter.capacity()
    );
    let load = filter.load_factor();
    assert!(
        (load - filter.len() as f64 / filter.slots() as f64).abs() < 1e-12,
        "{at}: load factor {load}"
    );
    assert!((0.0..=1.0).contains(&load), "{at}: load factor {load}");
    let rate = filter.false_positive_rate();
    assert!(rate.is_finite() && rate >= 0.0, "{at}: rate {rate}");
    if inserted.is_empty() {
        assert_eq!(rate, 0.0, "{at}: an empty table has no entry to match");
    }
    // Few doublings here, far fewer than planned: the rate stays at the target.
    let target = filter.target_false_positive_rate().unwrap();
    assert!(rate <= target, "{at}: rate {rate} over the target {target}");
    assert!(filter.memory_usage() > 0, "{at}");
    assert_eq!(filter.snapshot_size(), filter.to_bytes().len(), "{at}");
    for key in inserted {
        assert!(filter.contains(key), "{at}: inserted {key} not found");
        let count = filter.count(key);
        assert!(count >= 1, "{at}: count of inserted {key} is 0");
        if exact {
            assert_eq!(count, 1, "{at}: count of {key}");
        }
    }
    let mut found = Vec::new();
    filter.contains_many(inserted, &mut found);
    assert!(found.iter().all(|&f| f), "{at}: contains_many missed one");
    filter.contains_many(absent, &mut found);
    assert_eq!(found.len(), absent.len(), "{at}");
    for (key, &f) in absent.iter().zip(&found) {
        assert_eq!(f, filter.contains(key), "{at}: contains_many of {key}");
        if inserted.is_empty() {
            assert!(!f, "{at}: an empty filter found {key}");
            assert_eq!(filter.count(key), 0, "{at}");
        } else if exact {
            assert!(!f, "{at}: absent {key} found at rate {target}");
        }
    }
}

/// Every public method before the first insert, in the middle of a doubling and after
/// `finish_doubling`, on the smallest tables at every lane width: the accessors agree, the
/// counts are exact, clones and restored snapshots answer alike and save the same bytes.
#[test]
fn every_method_is_consistent_before_inserts_mid_doubling_and_after_finishing() {
    let seed = seed("growable corners, every stage");
    for capacity in CAPACITIES {
        for rate in RATES {
            let at = |stage: &str| format!("capacity {capacity} rate {rate} {stage} seed {seed}");
            let exact = rate < 1e-6;
            let keys = distinct_keys(seed ^ capacity as u64, 4_000);
            let (keys, absent) = keys.split_at(2_000);
            let absent = &absent[..500];
            let filter = growable(capacity, rate);
            assert!(!filter.is_doubling());
            assert_eq!(filter.doublings(), 0);
            assert!(filter.capacity() >= capacity);
            // Nothing to finish, nothing to remove.
            filter.finish_doubling();
            assert!(!filter.remove(&keys[0]));
            assert_consistent(&at("empty"), &filter, &[], absent, exact);
            let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
            assert_consistent(&at("empty, restored"), &restored, &[], absent, exact);

            // A table of two buckets finishes each doubling in the insert that begins it (it
            // splits both of the item's buckets, all there are): the second doubling is the
            // first that is seen in progress.
            let mut next = 0;
            assert!(
                insert_until_mid_doubling(&filter, keys, &mut next, keys.len()),
                "{}: no doubling in progress after {next} inserts",
                at("filling")
            );
            assert!(filter.doublings() >= 2, "{}", at("mid-doubling"));
            let stage = at("mid-doubling");
            assert_consistent(&stage, &filter, &keys[..next], absent, exact);
            let copy = filter.clone();
            assert!(copy.is_doubling(), "{stage}: the clone is mid-doubling too");
            assert_consistent(
                &format!("{stage}, clone"),
                &copy,
                &keys[..next],
                absent,
                exact,
            );
            assert_eq!(
                copy.to_bytes(),
                filter.to_bytes(),
                "{stage}: clone saves alike"
            );
            let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
            assert!(restored.is_doubling(), "{stage}: restored mid-doubling");
            assert_consistent(
                &format!("{stage}, restored"),
                &restored,
                &keys[..next],
                absent,
                exact,
            );
            for probe in absent {
                assert_eq!(copy.contains(probe), filter.contains(probe), "{stage}");
                assert_eq!(restored.contains(probe), filter.contains(probe), "{stage}");
            }

            filter.finish_doubling();
            let stage = at("finished");
            assert!(!filter.is_doubling(), "{stage}");
            assert_consistent(&stage, &filter, &keys[..next], absent, exact);
            // Finishing changed no answer: the mid-doubling copy answers alike.
            for probe in absent {
                assert_eq!(copy.contains(probe), filter.contains(probe), "{stage}");
            }
            copy.finish_doubling();
            assert_eq!(copy.to_bytes(), filter.to_bytes(), "{stage}: both finished");
            filter.finish_doubling();
            assert_consistent(&stage, &filter, &keys[..next], absent, exact);
        }
    }
}

/// `clear` in the middle of a doubling empties the filter, ends the doubling and keeps the
/// size; the filter then takes new items through further doublings and finds every one, and
/// its snapshots and clones round trip at each step.
#[test]
fn clear_mid_doubling_then_refill_finds_every_new_item() {
    let seed = seed("growable clear mid-doubling");
    for capacity in CAPACITIES {
        for rate in RATES {
            let at = format!("capacity {capacity} rate {rate} seed {seed}");
            let exact = rate < 1e-6;
            let keys = distinct_keys(seed.wrapping_add(capacity as u64), 3_000);
            let (old, fresh) = keys.split_at(1_000);
            let filter = growable(capacity, rate);
            let mut next = 0;
            assert!(
                insert_until_mid_doubling(&filter, old, &mut next, old.len()),
                "{at}"
            );
            let (doublings, slots) = (filter.doublings(), filter.slots());
            let memory = filter.memory_usage();
            filter.clear();
            assert!(!filter.is_doubling(), "{at}: a clear finishes the doubling");
            assert_eq!(
                filter.doublings(),
                doublings,
                "{at}: a clear keeps the size"
            );
            assert_eq!(filter.slots(), slots, "{at}");
            assert!(filter.memory_usage() <= memory, "{at}: a clear took memory");
            assert_consistent(&format!("{at}, cleared"), &filter, &[], &old[..next], exact);
            let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
            assert_consistent(
                &format!("{at}, cleared, restored"),
                &restored,
                &[],
                old,
                exact,
            );
            let copy = filter.clone();
            assert_consistent(&format!("{at}, cleared, clone"), &copy, &[], old, exact);

            // Refill: through at least one more doubling, stopping in the middle of one.
            let mut refilled = 0;
            while filter.doublings() < doublings + 2 || !filter.is_doubling() {
                filter.insert(&fresh[refilled]).unwrap();
                refilled += 1;
                assert!(refilled < fresh.len(), "{at}: no doubling after the clear");
            }
            let stage = format!("{at}, refilled mid-doubling");
            assert_consistent(&stage, &filter, &fresh[..refilled], &[], exact);
            let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
            assert_consistent(
                &format!("{stage}, restored"),
                &restored,
                &fresh[..refilled],
                &[],
                exact,
            );
            // The clone taken right after the clear is independent of the refill.
            assert!(copy.is_empty(), "{at}: the clone changed with the original");
            if exact {
                assert!(fresh[..refilled].iter().all(|k| !copy.contains(k)), "{at}");
            }
            filter.finish_doubling();
            assert_consistent(
                &format!("{at}, refilled"),
                &filter,
                &fresh[..refilled],
                &[],
                exact,
            );
        }
    }
}

/// Every copy of every item removed from a grown filter, in the middle of a doubling and
/// after it: `count` is the copies inserted at every step, `len` ends at 0, each remove
/// finds its copy, and at 30-bit entries no removed item is found any more.
#[test]
fn removing_every_copy_from_a_grown_filter_leaves_it_empty() {
    let seed = seed("growable remove every copy");
    for capacity in CAPACITIES {
        for finish in [false, true] {
            let at = format!("capacity {capacity} finished {finish} seed {seed}");
            let filter = growable(capacity, 1e-7);
            let keys = distinct_keys(seed ^ 0x5eed ^ capacity as u64, 400);
            let mut rng = Rng::new(seed ^ capacity as u64);
            // One to three copies each, inserted in a shuffled order.
            let mut copies: Vec<usize> = keys.iter().map(|_| 1 + rng.below(3) as usize).collect();
            let mut order: Vec<usize> = keys
                .iter()
                .enumerate()
                .flat_map(|(i, _)| std::iter::repeat_n(i, copies[i]))
                .collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            for &i in &order {
                // Now and then a copy meets buckets full of the copies of one or two items
                // and is refused, as documented (the hot-key rule; seed 1795862016854328110):
                // that copy is not stored.
                match filter.insert(&keys[i]) {
                    Ok(()) => {}
                    Err(InsertError::ItemBucketsFull) => copies[i] -= 1,
                    Err(e) => panic!("{at}: {e}"),
                }
            }
            // Insert more until a doubling is in progress: the removes meet unsplit buckets.
            let mut extra = Vec::new();
            let mut more = distinct_keys(seed ^ 0xadd, 5_000).into_iter();
            while !filter.is_doubling() {
                let key = more.next().expect("a doubling within 5,000 more inserts");
                filter.insert(&key).unwrap();
                extra.push(key);
            }
            if finish {
                filter.finish_doubling();
            }
            assert!(filter.doublings() >= 5, "{at}: {filter:?}");
            let total: usize = copies.iter().sum::<usize>() + extra.len();
            assert_eq!(filter.len(), total, "{at}");
            for (key, &c) in keys.iter().zip(&copies) {
                assert_eq!(filter.count(key), c, "{at}: count of {key}");
            }
            let mut left = total;
            for (key, &c) in keys.iter().zip(&copies) {
                for removed in 1..=c {
                    assert!(
                        filter.remove(key),
                        "{at}: copy {removed} of {key} not found"
                    );
                    left -= 1;
                    assert_eq!(filter.count(key), c - removed, "{at}: count of {key}");
                }
                assert!(!filter.contains(key), "{at}: {key} found after its removes");
                assert!(!filter.remove(key), "{at}: {key} removed once more");
            }
            assert_eq!(filter.len(), left, "{at}");
            for key in &extra {
                assert!(filter.contains(key), "{at}: {key} lost to another's remove");
                assert!(filter.remove(key), "{at}: {key}");
            }
            assert_eq!(filter.len(), 0, "{at}");
            assert!(filter.is_empty(), "{at}");
            assert!(
                keys.iter().chain(&extra).all(|k| !filter.contains(k)),
                "{at}"
            );
            let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
            assert!(restored.is_empty(), "{at}");
        }
    }
}

/// The same at the narrowest lanes (14-bit entries that run out of tail bits after 9
/// doublings, and are then copied into both halves of their bucket): every remove of an
/// inserted copy finds one, `len` ends at 0, and items not removed yet stay found. (A copy
/// may be refused with `ItemBucketsFull` where other items' copies jam its buckets: it is
/// then not counted as stored.)
#[test]
fn removing_every_copy_from_a_filter_with_exhausted_entries_counts_down_to_zero() {
    let seed = seed("growable remove with exhausted entries");
    for capacity in CAPACITIES {
        let at = format!("capacity {capacity} seed {seed}");
        let filter = growable(capacity, 0.5);
        let keys = distinct_keys(seed ^ capacity as u64, 6_000);
        let mut rng = Rng::new(seed);
        let mut copies = Vec::with_capacity(keys.len());
        for key in &keys {
            let mut stored = 0;
            for _ in 0..1 + rng.below(2) {
                match filter.insert(key) {
                    Ok(()) => stored += 1,
                    Err(e) => assert_eq!(e, InsertError::ItemBucketsFull, "{at}: {key}"),
                }
            }
            copies.push(stored);
        }
        assert!(filter.doublings() >= 10, "{at}: {filter:?}");
        let total: usize = copies.iter().sum();
        assert_eq!(filter.len(), total, "{at}");
        let mut left = total;
        for (n, (key, &c)) in keys.iter().zip(&copies).enumerate() {
            assert!(filter.count(key) >= c, "{at}: count of {key}");
            for _ in 0..c {
                assert!(filter.remove(key), "{at}: a copy of {key} not found");
                left -= 1;
            }
            assert_eq!(filter.len(), left, "{at}");
            if n % 97 == 0 {
                let rest = keys[n + 1..].iter().zip(&copies[n + 1..]);
                assert!(
                    rest.filter(|(_, &c)| c > 0)
                        .all(|(k, _)| filter.contains(k)),
                    "{at}"
                );
            }
        }
        assert!(filter.is_empty(), "{at}");
    }
}

/// A growable filter refuses an item never inserted with `ItemBucketsFull` only when its two
/// buckets are full of the copies of one or two other items (hot keys), or when no room can be
/// made below half its doubling load (`InsertError::ItemBucketsFull`). Here every item is
/// stored twice (a multiset: no hot key), and each new item is one never inserted before: none
/// may be refused while the table it is refused by holds half its doubling load or more (a
/// table may double for the item and then, below half its new doubling load, refuse it:
/// tables of a few buckets, where items stored twice jam every path).
#[test]
fn items_never_inserted_are_not_refused_because_others_are_stored_twice() {
    let seed = seed("growable multiset refusals");
    let mut refused = Vec::new();
    for round in 0..200u64 {
        for capacity in CAPACITIES {
            let filter = growable(capacity, 0.5);
            let keys = distinct_keys(seed.wrapping_add(round * 8 + capacity as u64), 300);
            for key in &keys {
                for copy in 0..2 {
                    if let Err(e) = filter.insert(key) {
                        // The load of the table that refused, against its doubling load (95 %
                        // of the lanes).
                        let load = filter.len() as f64 / (filter.slots() as f64 * 0.95);
                        if copy == 0 && load >= 0.5 {
                            refused.push(format!(
                                "round {round} capacity {capacity}: {key} ({e:?}) at {load:.2} \
                                 of the doubling load, count {}, {filter:?}",
                                filter.count(key)
                            ));
                        }
                        break;
                    }
                }
            }
        }
    }
    assert!(
        refused.is_empty(),
        "seed {seed}: {} refusals, first {:#?}",
        refused.len(),
        &refused[..refused.len().min(3)]
    );
}

/// `insert_unique` in a grown filter: `Ok(true)` once per item, `Ok(false)` after (also in
/// the middle of a doubling and after it), one copy counted; after a remove, `Ok(true)`
/// again.
#[test]
fn insert_unique_adds_each_item_once_in_the_middle_of_doublings() {
    let seed = seed("growable insert_unique corners");
    for capacity in CAPACITIES {
        let at = format!("capacity {capacity} seed {seed}");
        let filter = growable(capacity, 1e-7);
        let keys = distinct_keys(seed ^ capacity as u64, 1_500);
        let mut checked_mid = 0;
        for (n, key) in keys.iter().enumerate() {
            assert_eq!(filter.insert_unique(key), Ok(true), "{at}: {key}");
            assert_eq!(filter.insert_unique(key), Ok(false), "{at}: {key}");
            if filter.is_doubling() {
                checked_mid += 1;
                // Every earlier item, asked again while buckets are unsplit.
                for k in &keys[..=n] {
                    assert_eq!(filter.insert_unique(k), Ok(false), "{at}: {k}");
                }
            }
        }
        assert!(checked_mid > 0, "{at}: never mid-doubling");
        assert_eq!(filter.len(), keys.len(), "{at}");
        for key in keys.iter().step_by(3) {
            assert_eq!(filter.count(key), 1, "{at}");
            assert!(filter.remove(key));
            assert_eq!(
                filter.insert_unique(key),
                Ok(true),
                "{at}: {key} after its remove"
            );
        }
        assert_eq!(filter.len(), keys.len(), "{at}");
    }
}

/// The batch calls across doublings: `insert_many` stops at the hot key's refused copy with
/// its index (in a later batch of 64 too), `insert_many_unique` stores it once, `contains_many`
/// answers as `contains`; the items before the failure are in, those after are not.
#[test]
fn batch_calls_report_a_hot_keys_index_across_doublings() {
    let seed = seed("growable batch calls");
    for capacity in [3, 40] {
        let at = format!("capacity {capacity} seed {seed}");
        // A table of more than two buckets: it never doubles for a hot key.
        let filter = growable(capacity.max(10), 1e-7);
        let keys = distinct_keys(seed, 300);
        let hot = u64::MAX - 7;
        let mut batch: Vec<u64> = keys[..100].to_vec();
        batch.extend(std::iter::repeat_n(hot, 12));
        batch.extend_from_slice(&keys[100..]);
        let err = filter.insert_many(&batch).unwrap_err();
        // Eight copies fill the hot key's two buckets; fewer when another item in them has
        // nowhere to go (refused the same way while the table is below half its load).
        let stored = filter.count(&hot);
        assert!(
            (4..=8).contains(&stored),
            "{at}: {stored} copies of the hot key"
        );
        assert_eq!(
            (err.index, err.error),
            (100 + stored, InsertError::ItemBucketsFull),
            "{at}: {filter:?}"
        );
        assert_eq!(filter.len(), 100 + stored, "{at}");
        assert!(keys[..100].iter().all(|k| filter.contains(k)), "{at}");
        assert!(keys[100..].iter().all(|k| !filter.contains(k)), "{at}");
        // Set semantics: the hot key is there already, stored once more by no call.
        assert_eq!(filter.insert_many_unique([hot; 20]).unwrap(), 0, "{at}");
        assert_eq!(filter.count(&hot), stored, "{at}");
        // And on a filter without the hot key (whose buckets refuse the few items that share
        // both of them): each item once, across batches of 64 and doublings.
        let unique = growable(capacity, 1e-7);
        let repeated: Vec<u64> = keys
            .iter()
            .chain(&keys)
            .chain(&keys[..70])
            .copied()
            .collect();
        assert_eq!(unique.insert_many_unique(&repeated).unwrap(), 300, "{at}");
        assert_eq!(unique.len(), 300, "{at}");
        assert!(keys.iter().all(|k| unique.count(k) == 1), "{at}");
        let mut found = Vec::new();
        let probes: Vec<u64> = keys.iter().copied().chain(0..500).collect();
        filter.contains_many(&probes, &mut found);
        for (probe, f) in probes.iter().zip(found) {
            assert_eq!(f, filter.contains(probe), "{at}: {probe}");
        }
        assert!(filter.doublings() > 0, "{at}");
    }
}

/// A growable `CuckooSet` (through `build_set`) from a table of two buckets: each item added
/// once through many doublings, removes and lookups as a set's.
#[test]
fn a_growable_set_from_the_smallest_table_adds_finds_and_removes_each_item_once() {
    let seed = seed("growable set corners");
    let set = CuckooFilter::builder()
        .capacity(1)
        .false_positive_rate(1e-7)
        .growable(true)
        .build_set::<u64>()
        .unwrap();
    assert!(set.is_empty());
    let keys = distinct_keys(seed, 2_000);
    for key in &keys {
        assert_eq!(set.insert(key), Ok(true), "seed {seed}: {key}");
        assert_eq!(set.insert(key), Ok(false), "seed {seed}: {key}");
    }
    assert_eq!(set.insert_many(keys.iter().take(50)).unwrap(), 0);
    assert_eq!(set.len(), keys.len());
    assert!(set.capacity() >= set.len());
    assert!(set.as_filter().doublings() >= 8, "{:?}", set.as_filter());
    assert!(keys.iter().all(|k| set.contains(k)));
    for key in keys.iter().step_by(2) {
        assert!(set.remove(key));
        assert!(
            !set.contains(key),
            "seed {seed}: {key} found after its remove"
        );
    }
    assert_eq!(set.len(), keys.len() / 2);
    assert!(keys.iter().skip(1).step_by(2).all(|k| set.contains(k)));
    set.clear();
    assert!(set.is_empty() && !set.contains(&keys[1]));
}

/// `shrink_to_fit` of a filter that just doubled (its entries need the doubled table) in the
/// middle of the doubling and after it: the doubling is finished, nothing is lost and the
/// table is not halved.
#[test]
fn shrink_to_fit_mid_doubling_finishes_it_and_loses_nothing() {
    let seed = seed("growable shrink_to_fit");
    for capacity in CAPACITIES {
        let mut filter = growable(capacity, 1e-7);
        let keys = distinct_keys(seed, 1_000);
        let mut next = 0;
        assert!(insert_until_mid_doubling(
            &filter,
            &keys,
            &mut next,
            keys.len()
        ));
        for stage in ["mid-doubling", "finished"] {
            let before = (filter.len(), filter.slots(), filter.doublings());
            filter.shrink_to_fit();
            let after = (filter.len(), filter.slots(), filter.doublings());
            assert_eq!(before, after, "capacity {capacity} {stage}");
            assert!(!filter.is_doubling(), "capacity {capacity} {stage}");
            assert!(keys[..next].iter().all(|k| filter.contains(k)), "{stage}");
        }
    }
}

/// The same multiset at scale: every key stored twice into a filter grown from 10,000 at 1 %.
/// Buckets full of pairs of copies of four items are not a hot key's: a failed search there
/// doubles the table, so no item never inserted is refused by a table at half its doubling
/// load or more. (Now and then four items share both of a new item's buckets, every one of
/// their alternates in that pair: a closed jam that the doubling parts 15 times in 16. When it
/// does not, a search into it fails again in the doubled table, below half its doubling load,
/// and the item is refused there, as documented: about once in three runs of this test, for
/// the item that doubled the table or for a later one whose buckets are the same.)
#[test]
fn a_multiset_of_pairs_refuses_no_new_item_in_a_large_growable_filter() {
    let seed = seed("growable multiset of pairs");
    let mut below_half_load = 0;
    for round in 0..3u64 {
        let filter = growable(10_000, 0.01);
        let keys = distinct_keys(seed.wrapping_add(round), 150_000);
        for (i, key) in keys.iter().enumerate() {
            for copy in 0..2 {
                if let Err(e) = filter.insert(key) {
                    let load = filter.len() as f64 / (filter.slots() as f64 * 0.95);
                    assert!(
                        copy == 0 && load < 0.5,
                        "seed {seed} round {round}: copy {copy} of key {i} refused ({e:?}) at \
                         {load:.2} of the doubling load, {filter:?}"
                    );
                    below_half_load += 1;
                    break;
                }
            }
        }
    }
    println!("seed {seed}: {below_half_load} new items refused below half the doubling load");
    assert!(below_half_load <= 3, "seed {seed}: {below_half_load}");
}

/// `capacity()` of a growable filter is documented as the items it takes before its next
/// doubling: `capacity() - len()` more distinct items go in without a doubling, but for a
/// failed search now and then (8 of 1,500 item sets at 66 and 132 buckets; 1 of about 4,000
/// at 264 to 5,280 buckets: seed 1795861152955419394, round 21, capacity 1,000). Checked over
/// 300 item sets, of which at most two may double early.
#[test]
fn capacity_minus_len_more_distinct_items_go_in_without_a_doubling_in_tables_of_256_buckets_and_more(
) {
    let seed = seed("growable capacity promise");
    let mut failures = Vec::new();
    for round in 0..100u64 {
        for capacity in [1_000, 2_000, 5_000] {
            let filter = growable(capacity, 0.01);
            let keys = distinct_keys(seed.wrapping_add(round * 1_000 + capacity as u64), 6_000);
            let (room, doublings) = (filter.capacity() - filter.len(), filter.doublings());
            for key in &keys[..room] {
                filter.insert(key).unwrap();
            }
            if filter.doublings() != doublings {
                failures.push(format!(
                    "round {round} capacity {capacity}: {room} items doubled the table \
                     ({} after {} of {} lanes)",
                    filter.doublings(),
                    filter.len(),
                    filter.slots()
                ));
            }
        }
    }
    assert!(
        failures.len() <= 2,
        "seed {seed}: {} of 300 item sets: {:#?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
}
