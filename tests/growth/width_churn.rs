//! Growable filters of every lane width from the smallest tables up (capacities 1 to 20, rates
//! 0.5 to 1e-7), driven by a random mix of inserts (new items and second copies), removes of
//! stored copies, `finish_doubling`, `shrink_to_fit`, clones and save/load round trips: every
//! stored copy stays found by `contains`, `contains_many` and `count`, `len` counts them, and
//! `capacity` agrees with the load limit the table doubles at.

use std::collections::BTreeMap;

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common::{
    assert_multiset_found, growable, growable_planned, seed, try_growable_planned_with, Rng,
};

const RATES: [f64; 7] = [0.5, 0.2, 0.1, 0.01, 0.001, 1e-5, 1e-7];

/// A target rate and planned items (`expected_items`, as a multiple of the capacity) for each
/// lane width a growable filter of `capacity` can have: the rates above and the rates between
/// them, planned for no doubling (the narrowest lanes, whose entries run out of bits after a
/// few doublings), for some, and for the default growth.
fn configs(capacity: usize) -> Vec<(u32, f64, Option<usize>)> {
    let mut rates: Vec<f64> = RATES.to_vec();
    let mut r = 0.5f64;
    while r > 1e-10 {
        rates.push(r);
        r *= 0.6;
    }
    let mut by_width: Vec<(u32, f64, Option<usize>)> = Vec::new();
    for rate in rates {
        for expected in [Some(capacity), Some(capacity * 64), None] {
            let builder = CuckooFilter::builder()
                .capacity(capacity)
                .false_positive_rate(rate)
                .growable(true);
            let built = match expected {
                Some(items) => builder.expected_items(items),
                None => builder,
            }
            .build();
            // Rates finer than the widest lanes reach are refused.
            let Ok(filter) = built else { continue };
            let width = filter.fingerprint_bits() + 1;
            if !by_width.iter().any(|&(w, _, _)| w == width) {
                by_width.push((width, rate, expected));
            }
        }
    }
    by_width.sort_by_key(|&(w, _, _)| w);
    by_width
}

/// The lanes in use at which a table of `slots` lanes doubles, by the formula the load limit
/// had before it was cached: `buckets · 4 · 0.95`, truncated.
fn load_limit(slots: usize) -> usize {
    ((slots / 4) as f64 * 4.0 * 0.95) as usize
}

fn total(model: &BTreeMap<u64, usize>) -> usize {
    model.values().sum()
}

/// Inserts `key` and counts it in `model` if the filter took it (a refusal, for a hot key's
/// copies, leaves both as they were).
fn insert_counted<S: std::hash::BuildHasher>(
    filter: &CuckooFilter<S>,
    key: u64,
    model: &mut BTreeMap<u64, usize>,
) {
    if filter.insert(&key).is_ok() {
        *model.entry(key).or_default() += 1;
    }
}

/// `filter` holds exactly the copies of `model` (as `len` counts them) and finds each.
fn check(at: &str, filter: &CuckooFilter, model: &BTreeMap<u64, usize>) {
    assert_multiset_found(at, filter, model);
    assert_eq!(filter.len(), total(model), "{at}: len");
    assert_eq!(filter.is_empty(), model.is_empty(), "{at}: is_empty");
    let limit = load_limit(filter.slots());
    assert!(
        filter.capacity() <= limit,
        "{at}: capacity {} above the load limit {limit} of {} slots",
        filter.capacity(),
        filter.slots()
    );
    let table = filter.slots() * (filter.fingerprint_bits() as usize + 1) / 8;
    assert!(
        filter.memory_usage() >= table,
        "{at}: memory_usage {} below the table's {table} bytes",
        filter.memory_usage()
    );
    let rate = filter.false_positive_rate();
    assert!(
        rate.is_finite() && rate >= 0.0 && (model.is_empty() || rate > 0.0),
        "{at}: false_positive_rate {rate} with {} copies",
        total(model)
    );
}

/// Clones and save/load round trips (`to_bytes`, `write_to`) of `filter` each find every copy
/// and agree on the sizes.
fn check_copies(at: &str, filter: &CuckooFilter, model: &BTreeMap<u64, usize>) {
    let clone = filter.clone();
    check(&format!("{at}, clone"), &clone, model);
    assert_eq!(clone.slots(), filter.slots(), "{at}: clone slots");
    // A clone copies no finished doubling's bitmap.
    assert!(
        clone.memory_usage() <= filter.memory_usage(),
        "{at}: clone uses {} bytes, the original {}",
        clone.memory_usage(),
        filter.memory_usage()
    );
    let bytes = filter.to_bytes();
    let loaded = CuckooFilter::from_bytes(&bytes)
        .unwrap_or_else(|e| panic!("{at}: to_bytes did not load back: {e}"));
    check(&format!("{at}, to_bytes"), &loaded, model);
    assert_eq!(loaded.slots(), filter.slots(), "{at}: loaded slots");
    assert_eq!(
        loaded.capacity(),
        filter.capacity(),
        "{at}: loaded capacity"
    );
    let mut written = Vec::new();
    filter.write_to(&mut written).unwrap();
    let read = CuckooFilter::read_from(&written[..])
        .unwrap_or_else(|e| panic!("{at}: write_to did not read back: {e}"));
    check(&format!("{at}, write_to"), &read, model);
    // A loaded filter takes new items too, and keeps finding the old ones.
    let mut grown = model.clone();
    for i in 0..(loaded.slots() as u64) {
        let key = 0xdead_0000_0000 ^ i;
        insert_counted(&loaded, key, &mut grown);
    }
    check(&format!("{at}, loaded then grown"), &loaded, &grown);
}

#[test]
fn items_stay_found_through_churn_at_every_width_from_capacity_one_to_twenty() {
    let seed = seed("items_stay_found_through_churn_at_every_width_from_capacity_one_to_twenty");
    let mut rng = Rng::new(seed);
    for capacity in 1..=20usize {
        for (width, rate, expected) in configs(capacity) {
            let mut filter = growable_planned(capacity, rate, expected);
            let mut model: BTreeMap<u64, usize> = BTreeMap::new();
            let mut refused_new = 0;
            let ops = 260 + rng.below(200) as usize;
            for op in 0..ops {
                let at = format!(
                    "seed {seed}, width {width}, rate {rate}, expected {expected:?}, \
                     capacity {capacity}, op {op}"
                );
                let roll = rng.below(100);
                if roll < 60 || model.is_empty() {
                    let key = rng.next_u64();
                    match filter.insert(&key) {
                        Ok(()) => *model.entry(key).or_default() += 1,
                        Err(InsertError::ItemBucketsFull) => refused_new += 1,
                        Err(e) => panic!("{at}: insert of a new item: {e:?}"),
                    }
                } else if roll < 68 {
                    // A second copy of a stored item.
                    let i = rng.below(model.len() as u64) as usize;
                    let key = *model.keys().nth(i).unwrap();
                    match filter.insert(&key) {
                        Ok(()) => *model.get_mut(&key).unwrap() += 1,
                        Err(InsertError::ItemBucketsFull) => {}
                        Err(e) => panic!("{at}: insert of a copy: {e:?}"),
                    }
                } else if roll < 93 {
                    let i = rng.below(model.len() as u64) as usize;
                    let key = *model.keys().nth(i).unwrap();
                    assert!(filter.remove(&key), "{at}: remove of stored {key:#x}");
                    let copies = model.get_mut(&key).unwrap();
                    *copies -= 1;
                    if *copies == 0 {
                        model.remove(&key);
                    }
                } else if roll < 95 {
                    filter.finish_doubling();
                    assert!(!filter.is_doubling(), "{at}: finish_doubling");
                } else if roll < 97 {
                    let slots = filter.slots();
                    filter.shrink_to_fit();
                    assert!(filter.slots() <= slots, "{at}: shrink grew the table");
                    assert!(!filter.is_doubling(), "{at}: shrink left a doubling");
                    check(&format!("{at}, after shrink"), &filter, &model);
                } else {
                    check_copies(&at, &filter, &model);
                }
                if op % 8 == 0 {
                    check(&at, &filter, &model);
                }
            }
            let at = format!(
                "seed {seed}, width {width}, rate {rate}, expected {expected:?}, \
                 capacity {capacity}, end"
            );
            check(&at, &filter, &model);
            check_copies(&at, &filter, &model);
            assert!(
                refused_new * 20 <= ops,
                "{at}: {refused_new} of {ops} new items refused"
            );
            // Empty it by removes, then shrink: everything goes, and the filter starts over.
            for (&key, &copies) in &model {
                for _ in 0..copies {
                    assert!(filter.remove(&key), "{at}: final remove of {key:#x}");
                }
            }
            assert_eq!(filter.len(), 0, "{at}: len after removing everything");
            filter.shrink_to_fit();
            check(
                &format!("{at}, emptied and shrunk"),
                &filter,
                &BTreeMap::new(),
            );
        }
    }
}

/// The capacity of a filter whose entries each have one lane (distinct items, lanes wide
/// enough that no doubling leaves copies behind) is the load limit, at every doubling count
/// and in the middle of doublings: the cached limits equal the formula.
#[test]
fn capacity_equals_the_load_limit_at_every_doubling_for_many_bases() {
    let seed = seed("capacity_equals_the_load_limit_at_every_doubling_for_many_bases");
    let mut rng = Rng::new(seed);
    for capacity in (1..=40).chain([63, 64, 65, 100, 127, 128, 129, 1000, 4097]) {
        for rate in [1e-5, 1e-7] {
            let filter = growable(capacity, rate);
            let at = format!("seed {seed}, capacity {capacity}, rate {rate}");
            assert_eq!(filter.capacity(), load_limit(filter.slots()), "{at}: fresh");
            assert!(
                filter.capacity() >= capacity,
                "{at}: below the capacity asked for"
            );
            // (A table this small may double before its load limit, when a search for room
            // fails: `capacity()`'s docs.)
            let mut inserted = 0usize;
            while filter.doublings() < 7 && inserted < 40_000 {
                filter.insert(&rng.next_u64()).unwrap();
                inserted += 1;
                assert_eq!(filter.len(), inserted, "{at}: len");
                assert_eq!(
                    filter.capacity(),
                    load_limit(filter.slots()),
                    "{at}: {} doublings, {inserted} items",
                    filter.doublings()
                );
                assert!(
                    filter.len() <= filter.capacity(),
                    "{at}: len above capacity"
                );
            }
        }
    }
}

/// Far past the doublings the lanes were planned for (entries run out of tail bits, and
/// doublings leave copies behind), at every width: every stored copy stays found while some
/// are removed, after each doubling begins (checked with its clone and its saved bytes), and
/// after removes and `shrink_to_fit` bring the table back down.
#[test]
fn items_stay_found_far_past_the_planned_doublings_and_after_shrinking_back() {
    let seed = seed("items_stay_found_far_past_the_planned_doublings_and_after_shrinking_back");
    let mut rng = Rng::new(seed);
    for capacity in [1usize, 3] {
        for (width, rate, expected) in configs(capacity) {
            let at = format!(
                "seed {seed}, width {width}, rate {rate}, expected {expected:?}, \
                 capacity {capacity}"
            );
            let mut filter = growable_planned(capacity, rate, expected);
            let mut model: BTreeMap<u64, usize> = BTreeMap::new();
            let mut doublings = 0;
            let mut was_doubling = false;
            let target = 3000 + rng.below(1500) as usize;
            while total(&model) < target {
                let key = rng.next_u64();
                match filter.insert(&key) {
                    Ok(()) => *model.entry(key).or_default() += 1,
                    Err(InsertError::ItemBucketsFull) => {}
                    Err(e) => panic!("{at}: insert: {e:?}"),
                }
                if rng.below(4) == 0 {
                    let i = rng.below(model.len() as u64) as usize;
                    let key = *model.keys().nth(i).unwrap();
                    assert!(filter.remove(&key), "{at}: remove of stored {key:#x}");
                    model.remove(&key);
                }
                let now = (filter.doublings(), filter.is_doubling());
                if now != (doublings, was_doubling) {
                    (doublings, was_doubling) = now;
                    let at = format!("{at}, {doublings} doublings, splitting {was_doubling}");
                    check(&at, &filter, &model);
                    if doublings % 3 == 0 {
                        check_copies(&at, &filter, &model);
                    }
                }
            }
            assert!(filter.doublings() >= 7, "{at}: only {doublings} doublings");
            println!(
                "{at}: {} doublings, {} lanes",
                filter.doublings(),
                filter.fingerprint_bits() + 1
            );
            check(&format!("{at}, grown"), &filter, &model);
            // Remove nearly everything, shrink, and check at each step back down.
            let keys: Vec<u64> = model.keys().copied().collect();
            for (n, key) in keys.iter().enumerate() {
                if n % 10 == 0 {
                    continue;
                }
                assert!(filter.remove(key), "{at}: remove of {key:#x}");
                model.remove(key);
                if n % 97 == 0 {
                    let slots = filter.slots();
                    filter.shrink_to_fit();
                    assert!(filter.slots() <= slots, "{at}: shrink grew the table");
                    check(&format!("{at}, shrunk after {n} removes"), &filter, &model);
                }
            }
            filter.shrink_to_fit();
            let at = format!("{at}, shrunk to {} slots", filter.slots());
            check(&at, &filter, &model);
            check_copies(&at, &filter, &model);
            // And it grows again.
            for _ in 0..2 * filter.slots() {
                let key = rng.next_u64();
                insert_counted(&filter, key, &mut model);
            }
            check(&format!("{at}, regrown"), &filter, &model);
        }
    }
}

/// Distinct items are never refused while the table doubles for them, at any width, from
/// the smallest tables: none is a hot key, and a small table doubles for a jam of distinct
/// items (several sharing both of an item's buckets) rather than refuse.
#[test]
fn distinct_items_are_never_refused_at_any_width_from_the_smallest_tables() {
    let seed = seed("distinct_items_are_never_refused_at_any_width_from_the_smallest_tables");
    let mut rng = Rng::new(seed);
    let mut refusals = Vec::new();
    for capacity in [1usize, 2, 3, 4, 6, 9, 13, 20] {
        for (width, rate, expected) in configs(capacity) {
            let filter = growable_planned(capacity, rate, expected);
            for n in 0..1500 {
                let key = rng.next_u64();
                match filter.insert(&key) {
                    Ok(()) => {}
                    Err(e) => refusals.push(format!(
                        "seed {seed}, width {width}, rate {rate}, expected {expected:?}, \
                         capacity {capacity}: item {n} ({key:#x}) refused with {} of {} \
                         slots used, {} doublings: {e:?}",
                        filter.len(),
                        filter.slots(),
                        filter.doublings()
                    )),
                }
            }
        }
    }
    assert!(
        refusals.is_empty(),
        "{} refusals: {refusals:#?}",
        refusals.len()
    );
}

/// The 51 distinct items (random `u64`s, seed 1159474 of the test above) of which the last is
/// refused by a growable filter of capacity 1 at rate 1e-5 planned for no doubling (21-bit
/// lanes), holding 50 items in 128 slots after 4 doublings: 41 % of its doubling load, well
/// below the 90 % under which the hot-key rule applies and below the half under which a failed
/// search refuses, yet none of the items repeats.
const REFUSED_AT_41_PERCENT: [u64; 51] = [
    0x8020d7a71a6dcfef,
    0x2c5ebf313b372a68,
    0x8eaa41574dff60de,
    0x9991c5a6a32200af,
    0x15c30c7ca9a834c0,
    0x39300f77bf61fb73,
    0x260d2e15bdd1c3ae,
    0xc4b41e582b487cf7,
    0xbabca8150471a4d5,
    0x87269ff99de8d4af,
    0x3a990961cc81245a,
    0x46a4da6cfd7aa689,
    0x292adad809053b57,
    0x2402ae5d819027e3,
    0xaf29a215ba39828e,
    0xd019882b6776c10d,
    0x87795a4f57a9fbb1,
    0x4d7ff2926f4d70ac,
    0xd3ff81187de1fb86,
    0xbad765fe3f69b45e,
    0x202973662fc51564,
    0x10a25a344d0bceaf,
    0x47bac6d5a800bca5,
    0xc1b9c679ff173b53,
    0xe86c70cc3626a996,
    0x0667a301c3b016d8,
    0xd81b19d576e2189a,
    0x0ffb543133a547ed,
    0x9cd1ff976df2c285,
    0xd35a5482199d43e5,
    0x746a0addb0672d9e,
    0x1013df0dce3fd12a,
    0x95d7550696d0a9af,
    0x5d7f84d93e44296f,
    0xac10069ec0544fde,
    0x96824073552d7681,
    0xbf96ebe6009824ba,
    0x4639b136ffe476b2,
    0x6a0dac1885b4f6de,
    0xf61301f25b41913c,
    0xcb69271f71c90856,
    0x5dd95665164a58d6,
    0x4aea0c98278e3112,
    0x7416bc8331638bf3,
    0x32a6cceed9079edd,
    0x8b0dc9a69bc7f6a3,
    0x8c0938b73dc9a5e6,
    0xe83f5c95db57a7bd,
    0x0fcab77c04503773,
    0xa9a8a1fe46dd6932,
    0x8b51e99dcb47c3cb,
];

#[test]
fn fifty_one_distinct_items_all_go_into_a_growable_filter_of_capacity_one() {
    let filter = growable_planned(1, 1e-5, Some(1));
    assert_eq!(filter.fingerprint_bits() + 1, 21);
    for (n, key) in REFUSED_AT_41_PERCENT.iter().enumerate() {
        let before = (
            filter.len(),
            filter.slots(),
            filter.capacity(),
            filter.doublings(),
            filter.is_doubling(),
        );
        if let Err(e) = filter.insert(key) {
            panic!(
                "item {n} ({key:#x}) refused: {e:?}; before it (len, slots, capacity, doublings, \
                 doubling): {before:?}"
            );
        }
    }
    assert_eq!(filter.len(), REFUSED_AT_41_PERCENT.len());
}

/// Eleven distinct items (random `u64`s) for a growable filter built for 20 items at rate
/// 1.42e-6 (27-bit lanes): its first table has 6 buckets (24 lanes, capacity 22), and half the
/// anchors reflect home 1 onto home 2, so nine of these items have the same two buckets.
const REFUSED_AT_TEN_OF_TWENTY: [u64; 11] = [
    0x8e8e4927bea9c2d0,
    0xe16542eb1a6a51e5,
    0x4b22a444330dc383,
    0x4341d9ef8b23b253,
    0x1962b6026c267677,
    0x6e0ac229e9a3efdd,
    0x92eeb52b75dd9f1b,
    0xc113d1fa92b62307,
    0xa93942420bbb900c,
    0x975036367ce39f5b,
    0xd12f6def2c490115,
];

/// `capacity() - len()` more distinct items always fit (the table may double sooner in small
/// tables, the docs say, but never refuse): the eleventh distinct item into a filter built
/// for twenty, with capacity 22, goes in.
#[test]
fn distinct_items_fill_a_growable_filter_of_capacity_twenty_without_a_refusal() {
    let filter = growable(20, 1.421514401496484e-6);
    assert_eq!(filter.slots(), 24);
    for (n, key) in REFUSED_AT_TEN_OF_TWENTY.iter().enumerate() {
        let before = (filter.len(), filter.capacity(), filter.doublings());
        assert!(before.0 < before.1, "{n}: capacity {before:?}");
        if let Err(e) = filter.insert(key) {
            panic!("item {n} ({key:#x}) refused: {e:?}; before it (len, capacity, doublings): {before:?}");
        }
    }
}

/// `false_positive_rate()` is what lookups of absent items measure (within sampling noise
/// and a quarter), and at most the target while the filter holds no more than the items its
/// lanes were planned for, at every width: mid-doubling, after it, and after removes.
#[test]
fn false_positive_rate_matches_measured_lookups_and_stays_under_the_target_at_every_width() {
    let seed = seed(
        "false_positive_rate_matches_measured_lookups_and_stays_under_the_target_at_every_width",
    );
    let mut rng = Rng::new(seed);
    let capacity = 1;
    let mut checked = 0;
    for (width, rate, expected) in configs(capacity) {
        // The default plan: 131,072 times the first capacity.
        let planned = expected.unwrap_or(131_072 * capacity);
        checked += 1;
        let filter = growable_planned(capacity, rate, expected);
        let mut stored = Vec::new();
        let at = format!("seed {seed}, width {width}, rate {rate}, planned {planned}");
        for step in 0..4 {
            while stored.len() < planned * (step + 1) / 4 {
                let key = rng.next_u64();
                filter.insert(&key).unwrap();
                stored.push(key);
            }
            if step == 3 {
                // Take out a quarter again.
                for key in stored.drain(..planned / 4) {
                    assert!(filter.remove(&key), "{at}: remove");
                }
            }
            let reported = filter.false_positive_rate();
            assert!(
                reported <= rate,
                "{at}, step {step}: reported {reported} above the target with {} of {planned} \
                 items, {} doublings",
                stored.len(),
                filter.doublings()
            );
            let probes = 200_000;
            let hits = (0..probes)
                .filter(|_| filter.contains(&rng.next_u64()))
                .count();
            let measured = hits as f64 / probes as f64;
            let noise = 5.0 * (reported / probes as f64).sqrt() + 3.0 / probes as f64;
            assert!(
                (measured - reported).abs() <= noise + 0.25 * reported,
                "{at}, step {step}: measured {measured} ({hits} hits), reported {reported}, \
                 {} items, {} doublings, splitting {}",
                stored.len(),
                filter.doublings(),
                filter.is_doubling()
            );
        }
    }
    assert!(checked >= 20, "{checked} widths");
}

/// SplitMix64's finaliser (the growable table's `mix`) undone: the hash whose stream is a
/// chosen value.
fn unmix(mut z: u64) -> u64 {
    fn inverse(x: u64) -> u64 {
        let mut inv = x;
        for _ in 0..6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(x.wrapping_mul(inv)));
        }
        inv
    }
    fn unxorshift(z: u64, s: u32) -> u64 {
        let mut x = z;
        for _ in 0..64 / s + 1 {
            x = z ^ (x >> s);
        }
        x
    }
    z = unxorshift(z, 31);
    z = z.wrapping_mul(inverse(0x94d0_49bb_1331_11eb));
    z = unxorshift(z, 27);
    z = z.wrapping_mul(inverse(0xbf58_476d_1ce4_e5b9));
    unxorshift(z, 30)
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Families of items (hashes, through an identity hasher) that share their home bucket,
/// anchor and the low bits of their stream, so that their entries are told apart by a few
/// tail bits at first and become identical after some doublings: removes of some never make
/// another unfindable, through doublings, shrinks, clones and save/load, at every width.
#[test]
fn removing_items_whose_entries_collide_never_hides_another_at_every_width() {
    use crate::common::Identity;
    assert_eq!(mix(unmix(0x1234_5678_9abc_def0)), 0x1234_5678_9abc_def0);
    let seed = seed("removing_items_whose_entries_collide_never_hides_another_at_every_width");
    let mut rng = Rng::new(seed);
    let mut doublings = Vec::new();
    for capacity in [1usize, 3, 7] {
        for (width, rate, expected) in configs(capacity) {
            let mut filter = try_growable_planned_with(capacity, rate, expected, Identity).unwrap();
            let base = (filter.slots() / 4) as u64;
            let at = format!(
                "seed {seed}, width {width}, rate {rate}, expected {expected:?}, capacity {capacity}"
            );
            // A family: home, anchor, the low `shared` stream bits; members differ above.
            let families: Vec<(u64, u64, u64, u32)> = (0..6)
                .map(|_| {
                    (
                        rng.below(base),
                        rng.below(32),
                        rng.next_u64(),
                        2 + rng.below(10) as u32,
                    )
                })
                .collect();
            let member = |rng: &mut Rng, (home, anchor, low, shared): (u64, u64, u64, u32)| loop {
                let mask = (1u64 << shared) - 1;
                let stream = (low & mask) | (rng.next_u64() & !mask);
                let hash = unmix(stream) ^ 0x5851_f42d_4c95_7f2d;
                if hash & 31 == anchor && ((hash >> 32) * base) >> 32 == home {
                    return hash;
                }
            };
            let mut members: Vec<Vec<u64>> = families
                .iter()
                .map(|&f| (0..6).map(|_| member(&mut rng, f)).collect())
                .collect();
            let mut model: BTreeMap<u64, usize> = BTreeMap::new();
            for op in 0..400 {
                let at = format!("{at}, op {op}");
                match rng.below(10) {
                    0..=3 => {
                        let f = rng.below(6) as usize;
                        let i = rng.below(members[f].len() as u64) as usize;
                        let key = members[f][i];
                        insert_counted(&filter, key, &mut model);
                    }
                    4..=5 => {
                        // Filler, so that the table doubles past the planned doublings.
                        for _ in 0..12 {
                            let key = rng.next_u64();
                            insert_counted(&filter, key, &mut model);
                        }
                    }
                    6..=7 if !model.is_empty() => {
                        let i = rng.below(model.len() as u64) as usize;
                        let key = *model.keys().nth(i).unwrap();
                        assert!(filter.remove(&key), "{at}: remove of stored {key:#x}");
                        let copies = model.get_mut(&key).unwrap();
                        *copies -= 1;
                        if *copies == 0 {
                            model.remove(&key);
                        }
                    }
                    8 => {
                        let f = rng.below(6) as usize;
                        let fam = families[f];
                        members[f].push(member(&mut rng, fam));
                    }
                    _ => match rng.below(4) {
                        0 => filter.shrink_to_fit(),
                        1 => filter.finish_doubling(),
                        2 => {
                            let clone = filter.clone();
                            crate::common::assert_multiset_found(
                                &format!("{at}, clone"),
                                &clone,
                                &model,
                            );
                        }
                        _ => {
                            let loaded =
                                CuckooFilter::from_bytes_with_hasher(&filter.to_bytes(), Identity)
                                    .unwrap();
                            crate::common::assert_multiset_found(
                                &format!("{at}, loaded"),
                                &loaded,
                                &model,
                            );
                            assert_eq!(loaded.len(), filter.len(), "{at}: loaded len");
                        }
                    },
                }
                if op % 8 == 0 {
                    crate::common::assert_multiset_found(&at, &filter, &model);
                } else {
                    for family in &members {
                        for key in family {
                            if model.contains_key(key) {
                                assert!(filter.contains(key), "{at}: {key:#x} missed");
                            }
                        }
                    }
                }
                assert_eq!(filter.len(), total(&model), "{at}: len");
            }
            crate::common::assert_multiset_found(&at, &filter, &model);
            doublings.push(filter.doublings());
        }
    }
    println!("doublings reached: {doublings:?}");
}

/// The keys that once jammed a tiny table (see the two tests above) all go in, every item
/// stays found and `len` counts every insert; and the filter takes more items afterwards.
#[test]
fn distinct_items_that_jammed_a_tiny_table_and_more_after_them_all_go_in_and_stay_found() {
    for (filter, keys) in [
        (
            growable(20, 1.421514401496484e-6),
            &REFUSED_AT_TEN_OF_TWENTY[..],
        ),
        (
            growable_planned(1, 1e-5, Some(1)),
            &REFUSED_AT_41_PERCENT[..],
        ),
    ] {
        let mut model: BTreeMap<u64, usize> = BTreeMap::new();
        for key in keys {
            filter.insert(key).unwrap();
            model.insert(*key, 1);
        }
        check("after the keys that once jammed it", &filter, &model);
        for i in 0..200u64 {
            let key = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x00ab_cdef;
            filter.insert(&key).unwrap();
            *model.entry(key).or_default() += 1;
        }
        check("after 200 more", &filter, &model);
        assert_eq!(model.len(), keys.len() + 200);
    }
}
