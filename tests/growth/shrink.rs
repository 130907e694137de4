//! `shrink_to_fit` of a growable filter: halvings, the inverse of doublings, while the entries
//! fit; every item kept, the rate kept, and memory that follows the live items.

use std::collections::BTreeMap;
use std::hash::BuildHasher;

use atomic_cuckoo::{CuckooFilter, CuckooSet, InsertError};

use crate::common::{
    distinct_keys, growable, seed, seed_or, try_growable_planned_with, Identity, Rng,
};

/// The share of a table's lanes that its entries may fill for a halving (the 95 % doubling
/// load of the halved table, which has half the lanes).
const HALVING_LOAD: f64 = 0.95 / 2.0;

/// The measured false-positive rate over `absent` keys.
fn measured_rate(filter: &CuckooFilter, absent: &[u64]) -> f64 {
    absent.iter().filter(|k| filter.contains(*k)).count() as f64 / absent.len() as f64
}

/// Keys of another seed, none of which is in `distinct_keys(seed, _)` (tagged by the top bit).
fn absent_keys(seed: u64, n: usize) -> Vec<u64> {
    distinct_keys(seed ^ 0x5555, n)
        .into_iter()
        .map(|k| k | 1 << 63)
        .collect()
}

/// Grown 200× and emptied to 2.5 %: the table halves until its entries would not fit once
/// more, frees most of its memory, keeps every item, its `len` and its rate.
#[test]
fn shrink_to_fit_halves_while_the_items_fit_and_keeps_every_item() {
    let seed = seed("growable shrink");
    for rate in [0.01, 0.001] {
        let mut filter = growable(1_000, rate);
        let keys: Vec<u64> = distinct_keys(seed, 200_000)
            .into_iter()
            .map(|k| k & !(1 << 63))
            .collect();
        for key in &keys {
            filter.insert(key).unwrap();
        }
        for key in &keys[5_000..] {
            assert!(filter.remove(key), "seed {seed}");
        }
        let (doublings, bytes) = (filter.doublings(), filter.memory_usage());
        filter.shrink_to_fit();
        let kept = &keys[..5_000];
        assert_eq!(filter.len(), kept.len(), "seed {seed}");
        assert!(kept.iter().all(|k| filter.contains(k)), "seed {seed}");
        // 40 times fewer items: five halvings, or more.
        assert!(
            filter.doublings() + 5 <= doublings,
            "seed {seed} rate {rate}: {doublings} doublings, then {filter:?}"
        );
        // As far as it goes: the entries (no copies at this size) fit one halving less, and
        // would not fit one more.
        let load = filter.len() as f64 / filter.slots() as f64;
        assert!(
            load <= 2.0 * HALVING_LOAD && (load > HALVING_LOAD || filter.doublings() == 0),
            "seed {seed} rate {rate}: load {load} after shrinking, {filter:?}"
        );
        assert!(
            filter.memory_usage() < bytes / 3,
            "seed {seed} rate {rate}: {bytes} bytes, then {filter:?}"
        );
        assert!(filter.capacity() >= filter.len());
        let measured = measured_rate(&filter, &absent_keys(seed, 200_000));
        assert!(
            measured <= rate,
            "seed {seed} rate {rate}: measured {measured} after shrinking, {filter:?}"
        );
    }
}

/// A grown filter that nobody removed from is at least half its doubling load (it doubled at
/// that load): its entries need the whole table, and `shrink_to_fit` leaves it byte for byte.
#[test]
fn shrink_to_fit_leaves_a_table_its_entries_need_as_it_was() {
    let seed = seed("growable shrink, full");
    for n in [3_000, 50_000, 123_456] {
        let mut filter = growable(1_000, 0.01);
        for key in distinct_keys(seed, n) {
            filter.insert(&key).unwrap();
        }
        filter.finish_doubling();
        let bytes = filter.to_bytes();
        filter.shrink_to_fit();
        assert!(filter.to_bytes() == bytes, "seed {seed} n {n}: {filter:?}");
    }
}

/// After a halving the filter grows again, saves and restores, and gives every copy back to
/// `remove`.
#[test]
fn a_shrunk_filter_grows_again_saves_and_removes_every_item() {
    let seed = seed("growable shrink, then grow");
    let keys = distinct_keys(seed, 150_000);
    let mut filter = growable(1_000, 0.01);
    for key in &keys[..100_000] {
        filter.insert(key).unwrap();
    }
    for key in &keys[5_000..100_000] {
        assert!(filter.remove(key));
    }
    let doublings = filter.doublings();
    filter.shrink_to_fit();
    assert!(filter.doublings() < doublings, "seed {seed}: {filter:?}");
    let kept: Vec<u64> = keys[..5_000]
        .iter()
        .chain(&keys[100_000..])
        .copied()
        .collect();
    for key in &keys[100_000..] {
        filter.insert(key).unwrap();
    }
    assert_eq!(filter.len(), kept.len());
    assert!(kept.iter().all(|k| filter.contains(k)), "seed {seed}");
    let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_eq!(restored.to_bytes(), filter.to_bytes());
    assert!(kept.iter().all(|k| restored.contains(k)), "seed {seed}");
    for key in &kept {
        assert!(filter.remove(key), "seed {seed}");
    }
    assert!(filter.is_empty(), "seed {seed}: {filter:?}");
}

/// Items stored up to twice each in a filter grown far past the doublings its lanes
/// were planned for (many entries have no tail bit left, and doublings copied them into both
/// halves): after a halving every copy is still found and removable, which fails if the two
/// copies of an exhausted entry are merged into one lane (an item's copy in one half and
/// another item's in the other look the same). (A copy is refused now and then where an
/// item's buckets fill with the copies of exhausted entries: the hot-key rule; the test counts
/// the copies stored.)
#[test]
fn copies_and_exhausted_entries_survive_a_halving() {
    let seed = seed("growable shrink, copies");
    let keys = distinct_keys(seed, 20_000);
    let mut filter = CuckooFilter::builder()
        .capacity(100)
        .false_positive_rate(0.01)
        .growable(true)
        .expected_items(400)
        .build()
        .unwrap();
    let copies: Vec<usize> = keys
        .iter()
        .map(|key| (0..2).take_while(|_| filter.insert(key).is_ok()).count())
        .collect();
    assert!(
        copies.iter().sum::<usize>() > 39_000,
        "seed {seed}: {filter:?}"
    );
    for (key, &stored) in keys.iter().zip(&copies).skip(2_000) {
        for _ in 0..stored {
            assert!(filter.remove(key), "seed {seed}");
        }
    }
    let doublings = filter.doublings();
    let rate = filter.false_positive_rate();
    filter.shrink_to_fit();
    assert!(filter.doublings() < doublings, "seed {seed}: {filter:?}");
    assert_eq!(filter.len(), copies[..2_000].iter().sum::<usize>());
    // Exhausted entries have no bit to take back, and full tails give one up: the rate may
    // rise, by little.
    assert!(
        filter.false_positive_rate() < 2.0 * rate,
        "seed {seed}: {filter:?}"
    );
    for (key, &stored) in keys.iter().zip(&copies).take(2_000) {
        assert!(filter.count(key) >= stored, "seed {seed}");
    }
    for (key, &stored) in keys.iter().zip(&copies).take(2_000) {
        for _ in 0..stored {
            assert!(filter.remove(key), "seed {seed}");
        }
    }
    assert!(filter.is_empty(), "seed {seed}: {filter:?}");
}

/// A sliding window (20,000 live ids over 400,000, 1 %) stops doubling once the window is
/// full, and after the stream `shrink_to_fit` brings a burst's table back to the window.
#[test]
fn a_sliding_window_does_not_grow_past_its_peak_and_shrinks_after_a_burst() {
    let seed = seed("growable sliding window");
    let window = 20_000;
    let ids = distinct_keys(seed, 400_000);
    let mut filter = growable(1_000, 0.01);
    let mut peak = 0;
    for (i, id) in ids.iter().enumerate() {
        filter.insert(id).unwrap();
        if i >= window {
            assert!(filter.remove(&ids[i - window]), "seed {seed}");
        }
        if i == 2 * window {
            peak = filter.doublings();
        }
        if i > 2 * window {
            assert_eq!(
                filter.doublings(),
                peak,
                "seed {seed}: at id {i}, {filter:?}"
            );
        }
    }
    // A burst: 200,000 more ids live at once, then gone again.
    let burst = distinct_keys(seed ^ 0xb0b0, 200_000);
    for id in &burst {
        filter.insert(id).unwrap();
    }
    let bursting = filter.memory_usage();
    for id in &burst {
        assert!(filter.remove(id), "seed {seed}");
    }
    filter.shrink_to_fit();
    assert!(filter.doublings() <= peak, "seed {seed}: {filter:?}");
    assert!(
        filter.memory_usage() < bursting / 3,
        "seed {seed}: {filter:?}"
    );
    let live = &ids[ids.len() - window..];
    assert!(live.iter().all(|id| filter.contains(id)), "seed {seed}");
}

// ---------------------------------------------------------------------------------------------
// Attacks on the promises of `shrink_to_fit`: tiny tables, every rate, exhausted entries,
// multisets, repeated shrinks, snapshots, clones, serde and `CuckooSet`.

/// A growable filter of `capacity` at `rate`, planned for `expected` items if given.
fn built(capacity: usize, rate: f64, expected: Option<usize>) -> CuckooFilter {
    crate::common::growable_planned(capacity, rate, expected)
}

/// Checks every promise a (shrunk) filter keeps for the multiset `model` (key → copies stored):
/// `len`, every item found by `contains` and `contains_many`, `count` at least its copies,
/// snapshots (`to_bytes`, `write_to`) that restore to the same bytes and answers, a clone of
/// the same bytes, and, on a clone, every copy removable once (then nothing is left).
fn assert_model<S: BuildHasher + Clone>(
    at: &str,
    filter: &CuckooFilter<S>,
    model: &BTreeMap<u64, usize>,
) {
    let copies: usize = model.values().sum();
    assert_eq!(filter.len(), copies, "{at}: len, {filter:?}");
    assert!(!filter.is_doubling(), "{at}: {filter:?}");
    assert!(
        (filter.len() as f64) <= 0.95 * filter.slots() as f64,
        "{at}: {} items in {} slots",
        filter.len(),
        filter.slots()
    );
    crate::common::assert_multiset_found(at, filter, model);
    let keys: Vec<u64> = model.keys().copied().collect();
    let bytes = filter.to_bytes();
    let mut written = Vec::new();
    filter.write_to(&mut written).unwrap();
    assert!(written == bytes, "{at}: write_to and to_bytes differ");
    let hasher = filter.hasher().clone();
    let restored = CuckooFilter::from_bytes_with_hasher(&bytes, hasher.clone())
        .unwrap_or_else(|e| panic!("{at}: {e}"));
    let read = CuckooFilter::read_from_with_hasher(&mut written.as_slice(), hasher).unwrap();
    let clone = filter.clone();
    for (what, copy) in [("restored", &restored), ("read", &read), ("clone", &clone)] {
        assert!(copy.to_bytes() == bytes, "{at}: {what} has other bytes");
        assert_eq!(copy.len(), copies, "{at}: {what}");
        assert_eq!(copy.doublings(), filter.doublings(), "{at}: {what}");
        assert!(keys.iter().all(|k| copy.contains(k)), "{at}: {what} misses");
    }
    // Every copy removable once, on the clone (the filter itself goes on).
    for (&key, &stored) in model {
        for i in 0..stored {
            assert!(
                clone.remove(&key),
                "{at}: copy {i} of {stored} of {key:#x} not removable"
            );
        }
    }
    assert!(
        clone.is_empty(),
        "{at}: {clone:?} after removing every copy"
    );
}

/// Removes copies of every item of the multiset `model` from `filter`, each copy if `remove`
/// says so (asked once per stored copy, in order), and updates the model.
fn remove_copies<S: std::hash::BuildHasher>(
    filter: &CuckooFilter<S>,
    model: &mut BTreeMap<u64, usize>,
    at: &str,
    mut remove: impl FnMut() -> bool,
) {
    let keys: Vec<u64> = model.keys().copied().collect();
    for key in keys {
        let stored = model[&key];
        let removed = (0..stored).filter(|_| remove()).count();
        for _ in 0..removed {
            assert!(filter.remove(&key), "{at}: remove {key:#x}");
        }
        if removed == stored {
            model.remove(&key);
        } else {
            model.insert(key, stored - removed);
        }
    }
}

/// Shrinks `filter` and checks the model; a second shrink changes nothing.
fn shrink_and_check<S: BuildHasher + Clone>(
    at: &str,
    filter: &mut CuckooFilter<S>,
    model: &BTreeMap<u64, usize>,
) {
    let before = filter.doublings();
    filter.shrink_to_fit();
    assert!(
        filter.doublings() <= before,
        "{at}: grew from {before}, {filter:?}"
    );
    assert_model(at, filter, model);
    let bytes = filter.to_bytes();
    filter.shrink_to_fit();
    assert!(
        filter.to_bytes() == bytes,
        "{at}: a second shrink changed the filter"
    );
}

/// A multiset model through cycles of growth (hot keys stored up to eight times, `insert` and
/// `insert_unique`), remove-heavy phases and shrinks, in tables of one to ten items at every
/// rate, with lanes planned for no doubling (entries run out of tail bits and doublings copy
/// them into both halves of their bucket) and for the default growth. After each shrink:
/// `len`, every item found, `count`, snapshots, clones, every copy removable.
#[test]
fn a_multiset_through_growth_removes_and_shrinks_keeps_every_copy_in_tiny_tables() {
    let seed = seed("shrink: multiset through growth, removes and shrinks");
    let mut rng = Rng::new(seed);
    let mut halvings = 0;
    for capacity in [1usize, 2, 3, 10] {
        for rate in [0.2, 0.05, 0.01, 1e-3, 1e-5, 1e-7] {
            for expected in [Some(capacity), Some(8 * capacity), None] {
                let at =
                    format!("seed {seed} capacity {capacity} rate {rate} expected {expected:?}");
                let mut filter = built(capacity, rate, expected);
                let mut model: BTreeMap<u64, usize> = BTreeMap::new();
                let hot: Vec<u64> = (0..6).map(|_| rng.next_u64()).collect();
                for cycle in 0..3 {
                    // Growth: fresh items, some of them twice, and hot keys up to eight times.
                    let grow = 300 + rng.below(600) as usize;
                    // (Lanes of one tail bit, planned for no doubling, end up mostly copies of
                    // exhausted entries: each doubling then buys a few inserts only, and the
                    // table would double on and on. Twelve doublings are enough.)
                    for _ in 0..grow {
                        if filter.doublings() >= 12 {
                            break;
                        }
                        let key = match rng.below(10) {
                            0 => hot[rng.below(hot.len() as u64) as usize],
                            1 if !model.is_empty() => {
                                let i = rng.below(model.len() as u64) as usize;
                                *model.keys().nth(i).unwrap()
                            }
                            _ => rng.next_u64(),
                        };
                        if rng.below(4) == 0 {
                            match filter.insert_unique(&key) {
                                Ok(true) => *model.entry(key).or_default() += 1,
                                Ok(false) => {}
                                Err(InsertError::ItemBucketsFull) => {}
                                Err(e) => panic!("{at}: insert_unique: {e}"),
                            }
                        } else {
                            match filter.insert(&key) {
                                Ok(()) => *model.entry(key).or_default() += 1,
                                Err(InsertError::ItemBucketsFull) => {}
                                Err(e) => panic!("{at}: insert: {e}"),
                            }
                        }
                    }
                    let grown = filter.doublings();
                    // Remove-heavy: all but a few percent of the copies, hot keys' too.
                    let keep = 1 + rng.below(8);
                    remove_copies(&filter, &mut model, &format!("{at}: cycle {cycle}"), || {
                        rng.below(100) >= keep * 3
                    });
                    shrink_and_check(&format!("{at} cycle {cycle}"), &mut filter, &model);
                    halvings += grown - filter.doublings();
                }
            }
        }
    }
    println!("{halvings} halvings in all");
    assert!(halvings > 100, "seed {seed}: only {halvings} halvings");
}

/// The multiset model with hashes that crowd few buckets (the identity hasher: two anchors,
/// a few homes, random stream bits): many items share both buckets and match one another's
/// shorter entries, so removes take the longest matching entry, hot keys fill their buckets,
/// and halvings merge the entries of many items into few buckets. Growth, remove-heavy
/// phases and shrinks at every rate; after each shrink every copy is found, counted, saved
/// and removable. (Growth stops one doubling after the first entries run out of tail bits:
/// buckets full of exhausted entries of three or more crowded items make an insert double
/// the table again and again, each doubling copying them into both halves.)
#[test]
fn crowded_hashes_through_growth_removes_and_shrinks_keep_every_copy() {
    let seed = seed("shrink: crowded hashes");
    let mut rng = Rng::new(seed);
    let mut halvings = 0;
    for capacity in [1usize, 3, 10] {
        for rate in [0.2, 0.01, 1e-4, 1e-7] {
            for expected in [Some(4 * capacity), None] {
                let at =
                    format!("seed {seed} capacity {capacity} rate {rate} expected {expected:?}");
                let mut filter =
                    try_growable_planned_with(capacity, rate, expected, Identity).unwrap();
                let most = (filter.fingerprint_bits() - 5 + 1).min(12);
                let homes: Vec<u64> = (0..3)
                    .map(|_| rng.next_u64() & 0xFFFF_FFFF_0000_0000)
                    .collect();
                let crowded = |rng: &mut Rng| {
                    homes[rng.below(homes.len() as u64) as usize]
                        | (rng.next_u64() & 0xFFFF_FFE0)
                        | rng.below(2)
                };
                let mut model: BTreeMap<u64, usize> = BTreeMap::new();
                for cycle in 0..3 {
                    for _ in 0..200 + rng.below(400) {
                        if filter.doublings() >= most {
                            break;
                        }
                        let key = match rng.below(4) {
                            0 if !model.is_empty() => {
                                let i = rng.below(model.len() as u64) as usize;
                                *model.keys().nth(i).unwrap()
                            }
                            1 => rng.next_u64(),
                            _ => crowded(&mut rng),
                        };
                        match filter.insert(&key) {
                            Ok(()) => *model.entry(key).or_default() += 1,
                            Err(InsertError::ItemBucketsFull) => {}
                            Err(e) => panic!("{at}: insert: {e}"),
                        }
                    }
                    let grown = filter.doublings();
                    remove_copies(&filter, &mut model, &format!("{at}: cycle {cycle}"), || {
                        rng.below(10) < 8
                    });
                    shrink_and_check(&format!("{at} cycle {cycle}"), &mut filter, &model);
                    halvings += grown - filter.doublings();
                }
            }
        }
    }
    println!("{halvings} halvings in all");
    assert!(halvings > 20, "seed {seed}: only {halvings} halvings");
}

/// Two hot keys stored eight times each share both buckets before the first doubling but not
/// after it (their stream's first bit differs): the halved table would need sixteen lanes in
/// their two buckets, which hold eight. The halving fits the load but cannot place every
/// entry, and the filter is left byte for byte as it was.
#[test]
fn a_halving_that_cannot_place_two_hot_keys_leaves_the_filter_byte_for_byte() {
    let seed = seed("shrink: a halving that cannot place its entries");
    let mut rng = Rng::new(seed);
    for capacity in [20usize, 100, 1_000] {
        let mut filter = CuckooFilter::builder()
            .capacity(capacity)
            .growable(true)
            .hasher(Identity)
            .build()
            .unwrap();
        let x = rng.next_u64();
        for _ in 0..8 {
            filter.insert(&x).unwrap();
        }
        let mut fillers = Vec::new();
        while filter.doublings() == 0 {
            let key = rng.next_u64();
            if filter.insert(&key).is_ok() {
                fillers.push(key);
            }
        }
        filter.finish_doubling();
        for key in &fillers {
            assert!(filter.remove(key), "seed {seed}");
        }
        // `y`: `x`'s anchor (low five bits) and home (high word), other middle bits; stored
        // unless its buckets are still `x`'s (the same first stream bit), which `x`'s copies
        // fill.
        let mut y = None;
        for _ in 0..1_000 {
            let candidate = (x & 0xFFFF_FFFF_0000_001F) | (rng.next_u64() & 0xFFFF_FFE0);
            if candidate != x && filter.insert(&candidate).is_ok() {
                y = Some(candidate);
                break;
            }
        }
        let y = y.expect("a twin of x in other buckets");
        for _ in 0..7 {
            filter.insert(&y).unwrap();
        }
        assert_eq!(filter.len(), 16);
        assert_eq!(filter.count(&x), 8);
        assert_eq!(filter.count(&y), 8);
        let bytes = filter.to_bytes();
        filter.shrink_to_fit();
        assert_eq!(
            filter.doublings(),
            1,
            "seed {seed} capacity {capacity}: {filter:?}"
        );
        assert!(
            filter.to_bytes() == bytes,
            "seed {seed} capacity {capacity}: a failed halving changed the filter"
        );
        for _ in 0..8 {
            assert!(filter.remove(&x) && filter.remove(&y), "seed {seed}");
        }
        assert!(filter.is_empty());
        // Empty now: it halves back to the first table.
        filter.shrink_to_fit();
        assert_eq!(filter.doublings(), 0, "seed {seed}: {filter:?}");
    }
}

/// A filter mid-doubling, its clone and its restored snapshot shrink to the same bytes (each
/// finishes the doubling first, then halves); a snapshot of a filter restored and shrunk
/// restores again; and every item stays found in each.
#[test]
fn a_restored_or_cloned_filter_shrinks_to_the_same_bytes_as_the_original() {
    let seed = seed("shrink: restored and cloned filters");
    for (capacity, rate, expected) in [
        (1usize, 0.01, Some(1usize)),
        (2, 0.2, None),
        (3, 0.01, None),
        (10, 1e-5, Some(40)),
        (100, 0.001, None),
    ] {
        let at = format!("seed {seed} capacity {capacity} rate {rate}");
        let mut filter = built(capacity, rate, expected);
        let keys = distinct_keys(seed, 20_000);
        let mut n = 0;
        // Grow, then remove most items, then insert until a doubling is under way.
        while filter.doublings() < 7 {
            filter.insert(&keys[n]).unwrap();
            n += 1;
        }
        for key in &keys[n / 16..n] {
            assert!(filter.remove(key), "{at}");
        }
        let mut live: Vec<u64> = keys[..n / 16].to_vec();
        let d = filter.doublings();
        while filter.doublings() == d || !filter.is_doubling() {
            if n == keys.len() {
                break;
            }
            filter.insert(&keys[n]).unwrap();
            live.push(keys[n]);
            n += 1;
        }
        // Remove the most recent ones again so the table may halve.
        let drop = live.len() / 2;
        for key in live.drain(live.len() - drop..) {
            assert!(filter.remove(&key), "{at}");
        }
        let mut restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
        let mut clone = filter.clone();
        let (was_doubling, top) = (filter.is_doubling(), filter.doublings());
        filter.shrink_to_fit();
        restored.shrink_to_fit();
        clone.shrink_to_fit();
        println!("{at}: doubling {was_doubling}, {top} doublings, then {filter:?}");
        assert!(filter.doublings() < top, "{at}: {filter:?}");
        let bytes = filter.to_bytes();
        assert!(
            restored.to_bytes() == bytes,
            "{at}: restored shrinks otherwise"
        );
        assert!(clone.to_bytes() == bytes, "{at}: clone shrinks otherwise");
        let again = CuckooFilter::from_bytes(&restored.to_bytes()).unwrap();
        for f in [&filter, &restored, &clone, &again] {
            assert_eq!(f.len(), live.len(), "{at}");
            assert!(live.iter().all(|k| f.contains(k)), "{at}");
        }
        // Grow the shrunk filter again, and shrink it once more.
        let more = &keys[n..(n + 4 * live.len()).min(keys.len())];
        for key in more {
            filter.insert(key).unwrap();
        }
        assert!(filter.doublings() > 0, "{at}");
        for key in more {
            assert!(filter.remove(key), "{at}");
        }
        filter.shrink_to_fit();
        assert_eq!(filter.len(), live.len(), "{at}");
        assert!(live.iter().all(|k| filter.contains(k)), "{at}");
        for key in &live {
            assert!(filter.remove(key), "{at}");
        }
        assert!(filter.is_empty(), "{at}");
    }
}

/// Entries with no tail bit left, copied by every doubling into both halves of their bucket,
/// through several halvings in a row: lanes planned for no doubling, a few items stored
/// (some more than once) before the first doubling, the table grown five doublings past
/// their last tail bit (each then has 32 copies), emptied of the later items and shrunk as
/// far as it goes. Every copy is still found, counted and removable; the filter grows and
/// shrinks again. (The later items' own exhausted copies stay behind as lanes no item counts,
/// so a table does not always halve: the test counts the halvings over all shapes.)
#[test]
fn exhausted_entries_survive_many_halvings_in_a_row() {
    let seed = seed("shrink: exhausted entries through many halvings");
    let mut rng = Rng::new(seed);
    let mut halvings = 0;
    for rate in [0.05, 0.01, 0.001] {
        for capacity in [1usize, 2, 3, 10] {
            let mut filter = built(capacity, rate, Some(capacity));
            let tail_bits = filter.fingerprint_bits() - 5;
            let at = format!("seed {seed} capacity {capacity} rate {rate} ({tail_bits} tail bits)");
            let mut model: BTreeMap<u64, usize> = BTreeMap::new();
            let early: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
            for key in &early {
                for _ in 0..1 + rng.below(3) {
                    if filter.insert(key).is_ok() {
                        *model.entry(*key).or_default() += 1;
                    }
                }
            }
            let mut later = Vec::new();
            while filter.doublings() < (tail_bits + 5).min(13) {
                let key = rng.next_u64();
                if filter.insert(&key).is_ok() {
                    later.push(key);
                }
            }
            let top = filter.doublings();
            for key in &later {
                assert!(filter.remove(key), "{at}");
            }
            shrink_and_check(&at, &mut filter, &model);
            println!("{at}: {top} doublings, then {filter:?}");
            halvings += top - filter.doublings();
            // Grow again, then shrink once more.
            let again: Vec<u64> = (0..200 * capacity).map(|_| rng.next_u64()).collect();
            for key in &again {
                if filter.insert(key).is_ok() {
                    *model.entry(*key).or_default() += 1;
                }
            }
            for key in &again {
                if let Some(c) = model.get_mut(key) {
                    assert!(filter.remove(key), "{at}");
                    *c -= 1;
                    if *c == 0 {
                        model.remove(key);
                    }
                }
            }
            shrink_and_check(&format!("{at}, regrown"), &mut filter, &model);
        }
    }
    // (An item's exhausted entry has 2^m lanes m doublings past its last tail bit, one per
    // bucket; halved, they share buckets, two per lane pair per halving: three halvings fill
    // its two buckets, and copies of the item fill them sooner. So these tables halve only a
    // few times, whatever their load.)
    assert!(halvings >= 6, "seed {seed}: {halvings} halvings");
}

/// Lanes in use of a growable `filter` with no doubling in progress, from what it reports:
/// `capacity` is its doubling load (95 % of its slots) less the lanes beyond one per item.
fn lanes_in_use(filter: &CuckooFilter) -> usize {
    let load = (filter.slots() as f64 * 0.95) as usize;
    load - filter.capacity() + filter.len()
}

/// The documented limit of halvings: a filter grown from one item to 14 doublings at 1 %
/// (default planning) and emptied to that one item holds 590 lanes (its own and the copies
/// that removed items' exhausted entries left behind) in 131,072 slots. Entries of the first
/// items ran out of tail bits at doubling 9, and doublings 10 to 14 copied each into both
/// halves of its bucket, one lane per bucket; a halving keeps every copy in a lane of its own
/// (two copies cannot be told from two items' entries), so each halving doubles the lanes
/// such an entry needs in one bucket, and after a few the copies no longer fit their two
/// buckets: that halving is refused as a whole, though the load would allow it (seed 1: it
/// stops at 12 doublings, 1.8 % of the lanes in use). What must hold: it halves at least
/// once, keeps every lane and the item, and a second call changes nothing.
#[test]
fn shrink_to_fit_stops_where_copies_of_exhausted_entries_no_longer_fit_and_keeps_every_lane() {
    let seed = seed_or("shrink: lanes fit, but exhausted entries", 1);
    let mut filter = built(1, 0.01, None);
    let keys = distinct_keys(seed, 200_000);
    filter.insert(&keys[0]).unwrap();
    let mut n = 1;
    while filter.doublings() < 14 {
        filter.insert(&keys[n]).unwrap();
        n += 1;
    }
    for key in &keys[1..n] {
        assert!(filter.remove(key), "seed {seed}");
    }
    filter.finish_doubling();
    let (top, lanes) = (filter.doublings(), lanes_in_use(&filter));
    filter.shrink_to_fit();
    assert_eq!(filter.len(), 1);
    assert!(filter.contains(&keys[0]), "seed {seed}");
    assert_eq!(
        lanes_in_use(&filter),
        lanes,
        "seed {seed}: a halving keeps every lane"
    );
    assert!(
        filter.doublings() < top,
        "seed {seed}: no halving from {top} doublings: {filter:?}"
    );
    let bytes = filter.to_bytes();
    filter.shrink_to_fit();
    assert!(
        filter.to_bytes() == bytes,
        "seed {seed}: a second shrink changed the filter"
    );
}

/// A growable `CuckooSet` after growth and removes: `shrink_to_fit` halves it, every item is
/// still in it (and adding one again adds nothing), `len` unchanged, and removed items stay
/// removable no more than once.
#[test]
fn a_growable_set_shrinks_and_keeps_set_semantics() {
    let seed = seed("shrink: CuckooSet");
    for rate in [0.2, 0.01, 1e-6] {
        let mut set: CuckooSet<u64> = CuckooFilter::builder()
            .capacity(3)
            .false_positive_rate(rate)
            .growable(true)
            .build_set()
            .unwrap();
        let keys = distinct_keys(seed, 20_000);
        // Only the keys the set added (a false positive of one already in is not added, and
        // removing it would take the other's entry).
        let added: Vec<u64> = keys
            .iter()
            .copied()
            .filter(|key| set.insert(key).unwrap())
            .collect();
        let len = set.len();
        assert_eq!(len, added.len(), "seed {seed}");
        // Keep one key in 50 of those the set stored.
        let mut kept = Vec::new();
        for (i, key) in added.iter().enumerate() {
            if i % 50 == 0 {
                kept.push(*key);
            } else {
                assert!(set.remove(key), "seed {seed} rate {rate}");
            }
        }
        let live = set.len();
        let (bytes, slots) = (set.memory_usage(), set.as_filter().slots());
        set.shrink_to_fit();
        assert_eq!(set.len(), live, "seed {seed} rate {rate}");
        assert!(
            set.as_filter().slots() < slots && set.memory_usage() < bytes,
            "seed {seed} rate {rate}: {slots} slots, {bytes} bytes, then {:?}",
            set.as_filter()
        );
        assert!(
            kept.iter().all(|k| set.contains(k)),
            "seed {seed} rate {rate}"
        );
        for key in &kept {
            assert_eq!(set.insert(key), Ok(false), "seed {seed} rate {rate}");
        }
        assert_eq!(set.len(), live);
        let copy = set.clone();
        assert!(copy.as_filter().to_bytes() == set.as_filter().to_bytes());
    }
}

/// `serde` (feature `serde`): a shrunk filter serializes as its snapshot bytes and
/// deserializes, from bytes and from a sequence of numbers, to the same filter.
#[cfg(feature = "serde")]
#[test]
fn a_shrunk_filter_round_trips_through_serde() {
    use crate::serde_bytes::{
        deserialize_from_bytes, deserialize_from_numbers, serialize_to_bytes,
    };

    let seed = seed("shrink: serde");
    let mut filter = built(10, 0.001, None);
    let keys = distinct_keys(seed, 30_000);
    filter.insert_many(&keys).unwrap();
    for key in &keys[1_000..] {
        assert!(filter.remove(key));
    }
    let d = filter.doublings();
    filter.shrink_to_fit();
    assert!(filter.doublings() < d, "seed {seed}: {filter:?}");
    let bytes = serialize_to_bytes(&filter).expect("serializes as bytes");
    assert!(
        bytes == filter.to_bytes(),
        "seed {seed}: serializes as its snapshot"
    );
    let from_bytes = deserialize_from_bytes(&bytes).unwrap();
    let from_numbers = deserialize_from_numbers(&bytes).unwrap();
    for back in [from_bytes, from_numbers] {
        assert!(back.to_bytes() == bytes, "seed {seed}");
        assert_eq!(back.len(), 1_000);
        assert!(
            keys[..1_000].iter().all(|k| back.contains(k)),
            "seed {seed}"
        );
    }
}

/// A filter of `capacity(100)` at 1 % grown by `n` distinct keys of `seed`, each then removed;
/// with the keys.
fn grown_and_emptied(seed: u64, n: usize) -> (CuckooFilter, Vec<u64>) {
    let filter = built(100, 0.01, None);
    let keys = distinct_keys(seed, n);
    filter.insert_many(&keys).unwrap();
    for key in &keys {
        assert!(filter.remove(key), "seed {seed}");
    }
    (filter, keys)
}

/// A filter grown 100 → 4,000 times that (12 doublings at 1 %: entries of the first items ran
/// out of tail bits at doubling 9 and were copied into both halves since) and then emptied
/// holds the copies that its removed items' exhausted entries left behind, which no halving
/// may drop (they cannot be told from live items' entries, see the test below); `clear` drops
/// them, and `shrink_to_fit` then halves back to the first table: the filter is as new, no
/// removed item found, and it grows again.
#[test]
fn an_emptied_filter_cleared_shrinks_back_to_its_first_table_despite_copies_left_behind() {
    let seed = seed("shrink: emptied after exhausted entries");
    let (mut filter, keys) = grown_and_emptied(seed, 400_000);
    assert_eq!(filter.doublings(), 12, "seed {seed}");
    filter.finish_doubling();
    assert!(filter.is_empty());
    let left_behind = keys.iter().filter(|k| filter.contains(*k)).count();
    assert!(
        left_behind > 0,
        "seed {seed}: no copy left behind, nothing to check"
    );
    let fresh = built(100, 0.01, None);
    filter.clear();
    filter.shrink_to_fit();
    assert_eq!(filter.doublings(), 0, "seed {seed}: {filter:?}");
    assert_eq!(filter.memory_usage(), fresh.memory_usage(), "seed {seed}");
    assert!(keys.iter().all(|k| !filter.contains(k)), "seed {seed}");
    filter.insert_many(&keys[..10_000]).unwrap();
    assert!(
        keys[..10_000].iter().all(|k| filter.contains(k)),
        "seed {seed}"
    );
}

/// A remove of an item never inserted that takes only a copy left behind by a removed item's
/// exhausted entry (so no stored item loses its entry: the false-delete caveat's "an item that
/// collides with it" is nobody) counts as a remove, and `len` can read 0 while an item is
/// stored. `shrink_to_fit` must still keep that item: a filter with items is never cleared.
#[test]
fn a_false_delete_of_a_left_behind_copy_does_not_let_shrink_clear_a_stored_item() {
    let seed = seed("shrink: false delete of a left-behind copy");
    let (mut filter, _) = grown_and_emptied(seed, 60_000);
    let stored = 1 << 63 | 0x5107ed;
    filter.insert(&stored).unwrap();
    // An absent item that matches only a left-behind copy: removing it keeps `stored` found.
    let false_delete = absent_keys(seed, 1_000_000)
        .into_iter()
        .filter(|c| *c != stored && filter.contains(c))
        .find(|c| {
            let probe = filter.clone();
            probe.remove(c) && probe.count(&stored) == 1
        });
    let Some(false_delete) = false_delete else {
        panic!("seed {seed}: no copy left behind, nothing to check");
    };
    assert!(filter.remove(&false_delete), "seed {seed}");
    assert!(filter.contains(&stored), "seed {seed}");
    println!(
        "seed {seed}: {false_delete:#x} took a left-behind copy; len {}",
        filter.len()
    );
    filter.shrink_to_fit();
    assert!(
        filter.contains(&stored),
        "seed {seed}: shrink_to_fit cleared a stored item after the false delete of \
         {false_delete:#x} (len {})",
        filter.len()
    );
}
