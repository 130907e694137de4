//! Lookups in grown filters: every inserted item is found by `contains` and `contains_many`
//! in filters of every shape, doublings in progress included; `contains_many` answers what
//! `contains` answers; and items that stay inserted are never missed while other threads
//! double the filter.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::common::{distinct_keys, seed, Rng};
use atomic_cuckoo::{CuckooFilter, InsertError};

/// Growable filters from tables of a few slots to a thousand items, at the default rate, a
/// small one (wide lanes) and a coarse one (narrow lanes, copies of exhausted entries).
fn shapes() -> Vec<(String, CuckooFilter)> {
    let mut out = Vec::new();
    for capacity in [1, 7, 100, 64, 10, 1000] {
        let f = CuckooFilter::builder()
            .capacity(capacity)
            .growable(true)
            .build()
            .unwrap();
        out.push((format!("capacity {capacity}"), f));
    }
    for rate in [1e-6, 0.2] {
        let f = CuckooFilter::builder()
            .capacity(20)
            .false_positive_rate(rate)
            .growable(true)
            .build()
            .unwrap();
        out.push((format!("capacity 20, rate {rate}"), f));
    }
    out
}

#[test]
fn every_inserted_item_is_found_by_contains_and_contains_many_in_every_shape() {
    let s = seed("every_inserted_item_is_found_by_contains_and_contains_many_in_every_shape");
    let mut rng = Rng::new(s);
    for (name, f) in shapes() {
        let n = 150_000;
        let items: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
        let absent: Vec<u64> = (0..5_000).map(|_| rng.next_u64()).collect();
        f.insert_many(&items[..100_000]).unwrap();
        for it in &items[100_000..] {
            f.insert(it).unwrap();
        }
        println!("{name}: {} doublings", f.doublings());
        assert!(
            f.doublings() > 3,
            "{name}: only {} doublings",
            f.doublings()
        );
        for it in &items {
            assert!(f.contains(it), "{name}: {it:#x} inserted, not found");
        }
        let mut found = Vec::new();
        f.contains_many(&items, &mut found);
        assert!(
            found.iter().all(|&b| b),
            "{name}: contains_many missed an item"
        );
        // Mixed batches of every length around the batch size: the same answers as contains.
        for len in [0usize, 1, 2, 63, 64, 65, 127, 128, 129, 300] {
            let batch: Vec<u64> = (0..len)
                .map(|_| {
                    if rng.below(2) == 0 {
                        items[rng.below(items.len() as u64) as usize]
                    } else {
                        absent[rng.below(absent.len() as u64) as usize]
                    }
                })
                .collect();
            f.contains_many(&batch, &mut found);
            let want: Vec<bool> = batch.iter().map(|k| f.contains(k)).collect();
            assert_eq!(found, want, "{name}: batch of {len}");
        }
        for it in absent.iter().take(2_000) {
            if f.count(it) > 0 {
                assert!(f.contains(it), "{name}: count > 0 but not contained");
            }
        }
    }
}

#[test]
fn a_snapshot_of_a_grown_filter_answers_as_the_original() {
    let s = seed("a_snapshot_of_a_grown_filter_answers_as_the_original");
    let mut rng = Rng::new(s);
    let f = CuckooFilter::builder()
        .capacity(10)
        .growable(true)
        .build()
        .unwrap();
    let items: Vec<u64> = (0..30_000).map(|_| rng.next_u64()).collect();
    f.insert_many(&items).unwrap();
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let g = CuckooFilter::read_from(&mut bytes.as_slice()).unwrap();
    assert_eq!(g.doublings(), f.doublings());
    let probe: Vec<u64> = items
        .iter()
        .copied()
        .chain((0..30_000).map(|_| rng.next_u64()))
        .collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    f.contains_many(&probe, &mut a);
    g.contains_many(&probe, &mut b);
    assert_eq!(a, b);
    assert!(a[..items.len()].iter().all(|&x| x));
    for (k, want) in probe.iter().zip(&a) {
        assert_eq!(g.contains(k), *want);
    }
}

/// Two writers grow a tiny filter (and remove their own items) while two readers check items
/// inserted before they started and never removed: `contains` and `contains_many` must find
/// every one of them, every time.
#[test]
fn stable_items_are_found_while_writers_grow_the_filter() {
    let s = seed("stable_items_are_found_while_writers_grow_the_filter");
    let f = Arc::new(
        CuckooFilter::builder()
            .capacity(16)
            .growable(true)
            .build()
            .unwrap(),
    );
    let mut rng = Rng::new(s);
    let stable: Arc<Vec<u64>> = Arc::new((0..2_000).map(|_| rng.next_u64()).collect());
    f.insert_many(stable.iter()).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (f, done) = (Arc::clone(&f), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut rng = Rng::new(s ^ (w + 1));
                for round in 0..150 {
                    let mine: Vec<u64> = (0..2_000).map(|_| rng.next_u64()).collect();
                    f.insert_many(&mine).unwrap();
                    // Remove most of them again: kicks, growth and removes all in flight.
                    for k in mine.iter().skip(round % 3) {
                        assert!(f.remove(k), "writer {w}: own item gone");
                    }
                }
                done.store(true, Ordering::Release);
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (f, done, stable) = (Arc::clone(&f), Arc::clone(&done), Arc::clone(&stable));
            std::thread::spawn(move || {
                let mut found = Vec::new();
                let mut passes = 0;
                while !done.load(Ordering::Acquire) || passes < 3 {
                    for k in stable.iter() {
                        assert!(f.contains(k), "reader {r}: stable {k:#x} missed");
                    }
                    f.contains_many(stable.iter(), &mut found);
                    assert!(found.iter().all(|&b| b), "reader {r}: contains_many missed");
                    passes += 1;
                }
                passes
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for r in readers {
        assert!(r.join().unwrap() >= 3);
    }
    assert!(
        f.doublings() > 5,
        "the filter grew to only {} doublings",
        f.doublings()
    );
}

// ---------------------------------------------------------------------------------------------
// Attacks on the new growable lookups: the one-shift match (`bucket_matches`) against the
// field-by-field match of `count` at every lane width, `contains_many` against `contains`,
// and the one-stripe validation of misses (and counts) under writers that kick stored
// entries between their two buckets.

/// A growable filter of `capacity` at `rate`, planned for `expected` items if given.
fn built(capacity: usize, rate: f64, expected: Option<usize>) -> CuckooFilter {
    crate::common::growable_planned(capacity, rate, expected)
}

/// At a quiescent moment (mid-doubling or not): every stored item found by `contains` and
/// `contains_many` with `count` at least its copies, and for every probe (absent items, whose
/// answers are false positives or not) `contains` answers exactly whether `count` finds a
/// matching lane (`count` matches field by field, `contains` by one shift of the
/// difference), and `contains_many` answers as `contains`.
fn assert_lookups_agree(
    at: &str,
    filter: &CuckooFilter,
    model: &BTreeMap<u64, usize>,
    probes: &[u64],
) -> usize {
    crate::common::assert_multiset_found(at, filter, model);
    let mut found = Vec::new();
    let mut positives = 0;
    filter.contains_many(probes, &mut found);
    for (probe, &many) in probes.iter().zip(&found) {
        let one = filter.contains(probe);
        let count = filter.count(probe);
        assert_eq!(
            one,
            count > 0,
            "{at}: {probe:#x}: contains {one}, count {count}"
        );
        assert_eq!(
            many, one,
            "{at}: {probe:#x}: contains_many {many}, contains {one}"
        );
        positives += usize::from(one);
    }
    positives
}

/// FAILS without `--release` (any build with overflow checks: `cargo test`, the dev and test
/// profiles, or `CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true cargo test --release`): the first
/// lookup of a stored item panics with "attempt to shift left with overflow"
/// (src/growth/mod.rs, `bucket_matches`).
///
/// Why: the new match `((entry ^ full) << entry.leading_zeros()) << 1 == 0` is evaluated for
/// every lane, empty ones included (the `(entry > ANCHOR_MASK) & ...` is a non-short-circuit
/// `&`, on purpose: no branch per lane). An empty lane is 0, whose `leading_zeros()` is 64: a
/// shift by the full width, which overflow checks turn into a panic. (Without them the shift
/// amount is masked to 0 and the `&` discards the result, so release builds answer right.)
/// Any bucket holding an entry with the item's anchor and an empty lane reaches it (one item
/// in a fresh filter does), through `contains` and `contains_many`; `count` matches field by
/// field and does not. Most growable tests fail this way under `cargo test`: in
/// tests/growth, 30 had failed when the run hung in two concurrent tests whose reader threads
/// had panicked.
#[test]
fn a_lookup_in_a_bucket_with_an_empty_lane_does_not_overflow_a_shift() {
    for rate in [0.2, 0.01, 1e-6] {
        let filter = built(1, rate, None);
        filter.insert(&42u64).unwrap();
        assert!(filter.contains(&42u64), "rate {rate}");
        let mut found = Vec::new();
        filter.contains_many([42u64], &mut found);
        assert_eq!(found, [true], "rate {rate}");
        assert_eq!(filter.count(&42u64), 1, "rate {rate}");
    }
}

/// Every lane width from the narrowest (rate 0.2 planned for no doubling: 7-bit lanes, or 13
/// where lanes keep at least 7 tail bits) to 32 bits (1e-8 planned for one doubling; 1e-9 is
/// refused by every plan), narrow buckets (4 lanes in one word, read with one or two loads)
/// and wide ones: tiny tables grown through several doublings, items stored up to three
/// times, checked after every few inserts, mid-doubling included. A miss of a stored item, or
/// any probe on which `contains`, `contains_many` and `count` disagree, fails.
#[test]
fn contains_contains_many_and_count_agree_on_every_key_at_every_lane_width() {
    let seed = seed("lookups: contains, contains_many and count agree at every width");
    let mut rng = Rng::new(seed);
    let mut widths = std::collections::BTreeSet::new();
    let mut mid_doubling_checks = 0;
    let mut positives = 0;
    let rates = [
        0.2, 0.1, 0.05, 0.02, 0.01, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6, 3e-7, 1e-7,
        3e-8, 1e-8, 5e-9,
    ];
    for rate in rates {
        for (capacity, expected) in [
            (1usize, Some(1usize)),
            (3, None),
            (20, Some(200)),
            (20, Some(40)),
        ] {
            // The finest rates are refused for some plans (below what 32-bit lanes reach).
            let builder = CuckooFilter::builder()
                .capacity(capacity)
                .false_positive_rate(rate)
                .growable(true);
            let builder = match expected {
                Some(items) => builder.expected_items(items),
                None => builder,
            };
            let Ok(filter) = builder.build() else {
                continue;
            };
            let width = filter.fingerprint_bits() + 1;
            widths.insert(width);
            let at = format!("seed {seed} capacity {capacity} rate {rate} ({width}-bit lanes)");
            let probes: Vec<u64> = (0..2_000).map(|_| rng.next_u64()).collect();
            let mut model: BTreeMap<u64, usize> = BTreeMap::new();
            // Lanes of one or two tail bits run out within two doublings: stop there (past
            // it, each doubling buys a few inserts only).
            let most = (width - 6).min(7) + 1;
            let mut inserts = 0;
            while filter.doublings() < most && inserts < 4_000 {
                let key = if !model.is_empty() && rng.below(8) == 0 {
                    *model
                        .keys()
                        .nth(rng.below(model.len() as u64) as usize)
                        .unwrap()
                } else {
                    rng.next_u64()
                };
                inserts += 1;
                match filter.insert(&key) {
                    Ok(()) => *model.entry(key).or_default() += 1,
                    Err(InsertError::ItemBucketsFull) => {}
                    Err(e) => panic!("{at}: {e}"),
                }
                if inserts % 97 == 0 || filter.is_doubling() && rng.below(8) == 0 {
                    mid_doubling_checks += usize::from(filter.is_doubling());
                    let at = format!("{at}, {} doublings", filter.doublings());
                    positives += assert_lookups_agree(&at, &filter, &model, &probes);
                }
            }
            // Removes of half the copies, then the same checks.
            let keys: Vec<u64> = model.keys().copied().collect();
            for key in keys.iter().step_by(2) {
                assert!(filter.remove(key), "{at}");
                let left = model[key] - 1;
                if left == 0 {
                    model.remove(key);
                } else {
                    model.insert(*key, left);
                }
            }
            positives +=
                assert_lookups_agree(&format!("{at}, after removes"), &filter, &model, &probes);
        }
    }
    println!(
        "lane widths {widths:?}, {mid_doubling_checks} checks mid-doubling, \
         {positives} false positives"
    );
    // Every width from the narrowest the builder gives up to 32 bits.
    let narrowest = *widths.first().unwrap();
    assert!(narrowest <= 13, "lane widths {widths:?}");
    assert!(
        (narrowest..=32).all(|w| widths.contains(&w)),
        "lane widths {widths:?}"
    );
    assert!(mid_doubling_checks > 20, "{mid_doubling_checks}");
    assert!(positives > 0, "no false positive compared");
}

/// The one-stripe validation of a miss, under writers that kick: a tiny grown table held
/// just under its doubling load (writers insert their own items up to `capacity()` and
/// remove them again, so every insert searches a cuckoo path and moves stored entries between
/// their two buckets, the stable items' included), at narrow and wide lanes. Readers check
/// the stable items (some stored twice) all the time: `contains` and `contains_many` never
/// miss one, `count` never reports fewer copies than stored.
/// A reader of the two tests below: for `run`, every stable item is found, counted at least
/// as often as stored, and found by `contains_many`.
fn read_stable_items(
    filter: &CuckooFilter,
    stable: &BTreeMap<u64, usize>,
    run: Duration,
    at: &str,
) {
    let start = Instant::now();
    while start.elapsed() < run {
        crate::common::assert_multiset_found(at, filter, stable);
    }
}

#[test]
fn stable_items_are_found_and_counted_while_kicks_move_them_near_the_doubling_load() {
    let seed = seed("lookups: stable items under kicks near the doubling load");
    let run = Duration::from_millis(700);
    for (capacity, rate) in [(1usize, 0.2), (3, 0.01), (8, 1e-7), (20, 0.05)] {
        let at = format!("seed {seed} capacity {capacity} rate {rate}");
        let filter = built(capacity, rate, None);
        let mut rng = Rng::new(seed ^ capacity as u64);
        // Grow a few doublings, then keep the stable items (some twice) and drop the rest.
        let mut stable: BTreeMap<u64, usize> = BTreeMap::new();
        let mut rest = Vec::new();
        while filter.doublings() < 3 {
            let key = rng.next_u64();
            if filter.insert(&key).is_ok() {
                if rng.below(3) == 0 {
                    let copies = 1 + usize::from(rng.below(4) == 0 && filter.insert(&key).is_ok());
                    stable.insert(key, copies);
                } else {
                    rest.push(key);
                }
            }
        }
        filter.finish_doubling();
        for key in &rest {
            assert!(filter.remove(key), "{at}");
        }
        let doublings = filter.doublings();
        let stop = AtomicBool::new(false);
        let barrier = Barrier::new(4);
        let moves = std::thread::scope(|s| {
            let writers: Vec<_> = (0..2u64)
                .map(|w| {
                    let (filter, stop, barrier, at) = (&filter, &stop, &barrier, &at);
                    s.spawn(move || {
                        let mut rng = Rng::new(seed ^ (w + 11));
                        let mut mine = Vec::new();
                        let mut ops = 0u64;
                        barrier.wait();
                        while !stop.load(Ordering::Relaxed) {
                            // Fill to a little under the doubling load, then empty again.
                            while filter.capacity() > filter.len() + 2 && mine.len() < 4_000 {
                                let key = rng.next_u64();
                                if filter.insert(&key).is_ok() {
                                    mine.push(key);
                                }
                                ops += 1;
                            }
                            while mine.len() > 1 {
                                let key = mine.swap_remove(rng.below(mine.len() as u64) as usize);
                                assert!(filter.remove(&key), "{at}: writer {w}");
                                ops += 1;
                            }
                        }
                        for key in mine {
                            assert!(filter.remove(&key), "{at}: writer {w}");
                        }
                        ops
                    })
                })
                .collect();
            run_stable_readers(s, &filter, &stable, run, &at, &stop, &barrier);
            writers.into_iter().map(|w| w.join().unwrap()).sum::<u64>()
        });
        println!(
            "{at}: {} stable, {moves} writer ops, {doublings} -> {} doublings",
            stable.len(),
            filter.doublings()
        );
        assert_eq!(filter.len(), stable.values().sum::<usize>(), "{at}");
        for (key, &copies) in &stable {
            assert!(filter.count(key) >= copies, "{at}");
        }
    }
}

/// Two readers of `stable` for `run` (`read_stable_items`), each starting at `barrier` and
/// setting `stop` when done, joined here; a reader's panic stops the writers and is raised.
fn run_stable_readers<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    filter: &'env CuckooFilter,
    stable: &'env BTreeMap<u64, usize>,
    run: Duration,
    at: &'env str,
    stop: &'env AtomicBool,
    barrier: &'env Barrier,
) {
    let readers: Vec<_> = (0..2usize)
        .map(|r| {
            s.spawn(move || {
                barrier.wait();
                read_stable_items(filter, stable, run, &format!("{at}: reader {r}"));
                stop.store(true, Ordering::Relaxed);
            })
        })
        .collect();
    for r in readers {
        if let Err(e) = r.join() {
            stop.store(true, Ordering::Relaxed);
            std::panic::resume_unwind(e);
        }
    }
}

/// Readers racing writers on tiny growable tables that double while they read (capacity 1 to
/// 20, narrow and wide lanes, planned for no doubling so that entries run out of tail bits
/// and doublings copy them): stable items, some stored twice, never missed by `contains` or
/// `contains_many`, never counted below their copies, through doublings in progress.
#[test]
fn stable_items_are_found_and_counted_while_tiny_tables_double_under_readers() {
    let seed = seed("lookups: stable items while tiny tables double");
    let run = Duration::from_millis(600);
    for (capacity, rate, expected) in [
        (1usize, 0.01, Some(1usize)),
        (2, 1e-6, None),
        (5, 0.05, Some(5)),
        (20, 5e-9, Some(20)),
    ] {
        let at = format!("seed {seed} capacity {capacity} rate {rate} expected {expected:?}");
        let filter = built(capacity, rate, expected);
        let mut rng = Rng::new(seed ^ capacity as u64);
        let mut stable: BTreeMap<u64, usize> = BTreeMap::new();
        for key in distinct_keys(seed ^ 0x77 ^ capacity as u64, 3 * capacity + 4) {
            let copies = 1 + usize::from(rng.below(3) == 0);
            for _ in 0..copies {
                filter.insert(&key).unwrap();
            }
            stable.insert(key, copies);
        }
        let stop = AtomicBool::new(false);
        let barrier = Barrier::new(3);
        std::thread::scope(|s| {
            let writer = {
                let (filter, stop, barrier, at) = (&filter, &stop, &barrier, &at);
                s.spawn(move || {
                    let mut rng = Rng::new(seed ^ 0x99);
                    barrier.wait();
                    // Grow in bursts and remove most of each burst: doublings, kicks and
                    // removes of items alike the stable ones, up to ten doublings.
                    while !stop.load(Ordering::Relaxed) && filter.doublings() < 10 {
                        let burst: Vec<u64> = (0..64).map(|_| rng.next_u64()).collect();
                        let stored: Vec<u64> = burst
                            .into_iter()
                            .filter(|k| filter.insert(k).is_ok())
                            .collect();
                        for key in stored.iter().skip(8) {
                            assert!(filter.remove(key), "{at}: writer");
                        }
                    }
                })
            };
            run_stable_readers(s, &filter, &stable, run, &at, &stop, &barrier);
            writer.join().unwrap();
        });
        println!("{at}: {} doublings", filter.doublings());
        assert!(filter.doublings() >= 3, "{at}: {filter:?}");
    }
}
