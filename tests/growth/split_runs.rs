//! Attacks on the doubling's runs of splits (sixteen consecutive old buckets claimed by one
//! insert, grouped by their pair of stripes), the narrow split packed in registers, the
//! four-anchor test of lookups and the path search's empty-lane test: first tables whose
//! bucket count is not a multiple of sixteen (runs that cross a segment boundary or end at the
//! old table's last bucket), the lane widths a filter gets (13 to 31 bits: narrower ones only
//! in the table's unit tests), exhausted entries, multisets, snapshots and copies taken
//! mid-doubling (restored with a next bucket that starts no run), and threads on tiny tables.
//!
//! Each test runs for a bounded time and prints its seed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common::{assert_multiset_found, growable_planned, seed, seed_or, Rng};

/// Target rates from the coarsest (13-bit lanes) to the finest (wide lanes, over 16 bits).
const RATES: [f64; 9] = [0.5, 0.3, 0.1, 0.03, 0.01, 1e-3, 1e-4, 1e-5, 1e-7];

/// A growable filter of `capacity` at `rate`: with `narrowest`, its lanes planned for no
/// doubling (`expected_items(capacity)`: 13-bit lanes at coarse rates, entries exhausted
/// after eight doublings), else for the default growth (lanes of 15 bits and more).
fn filter(capacity: usize, rate: f64, narrowest: bool) -> CuckooFilter {
    growable_planned(capacity, rate, narrowest.then_some(capacity))
}

/// The first table's bucket count.
fn base_of(f: &CuckooFilter) -> u64 {
    (f.slots() as u64 / 4) >> f.doublings()
}

/// Old buckets of the doubling in progress (the table before it).
fn old_buckets(f: &CuckooFilter) -> u64 {
    f.slots() as u64 / 8
}

/// Every item of `model` (item → copies) is found and counted, and `len` is the model's total.
fn check_model(at: &str, f: &CuckooFilter, model: &BTreeMap<u64, usize>) {
    let total: usize = model.values().sum();
    assert_eq!(f.len(), total, "{at}: len");
    assert_multiset_found(at, f, model);
}

/// Inserts `x` into `f` and the model; `false` if the filter refused it (a hot key).
fn insert(f: &CuckooFilter, model: &mut BTreeMap<u64, usize>, x: u64, at: &str) -> bool {
    match f.insert(&x) {
        Ok(()) => {
            *model.entry(x).or_default() += 1;
            true
        }
        Err(InsertError::ItemBucketsFull) => false,
        Err(e) => panic!("{at}: insert {x:#x}: {e:?}"),
    }
}

/// Grows a filter of `capacity` at `rate` through `doublings` doublings with fresh items,
/// checking every item (found, counted, `len` exact) a few times within every doubling,
/// including right after it begins and right after it finishes.
/// Removes the held copy `copies[i]` (counted in `mine`) from `f`; a remove that finds no
/// entry stops every thread of the test (`stop`) and fails it.
fn remove_held(
    f: &CuckooFilter,
    mine: &mut BTreeMap<u64, usize>,
    copies: &mut Vec<u64>,
    i: usize,
    stop: &AtomicBool,
    who: &str,
) {
    let x = copies.swap_remove(i);
    if !f.remove(&x) {
        stop.store(true, Ordering::Relaxed);
        panic!("{who}: remove of held {x:#x} failed");
    }
    let c = mine.get_mut(&x).expect("a held copy is counted");
    *c -= 1;
    if *c == 0 {
        mine.remove(&x);
    }
}

fn grow_checking(capacity: usize, rate: f64, narrowest: bool, doublings: u32, rng: &mut Rng) {
    let f = filter(capacity, rate, narrowest);
    let at = format!(
        "capacity {capacity}, rate {rate}, narrowest {narrowest}, base {}, lane {} bits",
        base_of(&f),
        f.fingerprint_bits() + 1
    );
    let mut model = BTreeMap::new();
    let mut was_doubling = false;
    let mut since = 0u64;
    while f.doublings() < doublings {
        let x = rng.next_u64();
        insert(&f, &mut model, x, &at);
        let doubling = f.is_doubling();
        since = if doubling && !was_doubling {
            0
        } else {
            since + 1
        };
        // About eight checks a doubling: the old table has 2 splits an insert to go.
        let stride = (old_buckets(&f) / 16).max(1);
        if doubling != was_doubling || (doubling && since.is_multiple_of(stride)) {
            check_model(
                &format!("{at}, doubling {}, {since} inserts in", f.doublings()),
                &f,
                &model,
            );
        }
        was_doubling = doubling;
    }
    check_model(&format!("{at}, end"), &f, &model);
    // Every remove of an inserted copy succeeds, and the filter empties exactly.
    for (&x, &copies) in &model {
        for c in 0..copies {
            assert!(f.remove(&x), "{at}: remove {c} of {x:#x}");
        }
    }
    assert_eq!(f.len(), 0, "{at}: len after removing everything");
}

/// Every first-table size from 1 to 200 buckets' worth of items (most bases not a multiple of
/// sixteen, so runs cross segment boundaries and the old table ends mid-run), each lane width.
#[test]
fn small_bases_keep_every_item_through_runs_of_splits() {
    let seed = seed("small_bases_keep_every_item_through_runs_of_splits");
    let mut rng = Rng::new(seed);
    for capacity in 1..=200 {
        let doublings = if capacity < 40 { 7 } else { 5 };
        for (shift, narrowest) in [(0, true), (4, false)] {
            let rate = RATES[(capacity + shift) % RATES.len()];
            grow_checking(capacity, rate, narrowest, doublings, &mut rng);
        }
    }
}

/// The coarsest lanes (an entry exhausted after eight doublings) through eleven doublings,
/// where most entries are copied into both halves by every split.
#[test]
fn exhausted_entries_survive_many_doublings_of_tiny_tables() {
    let seed = seed("exhausted_entries_survive_many_doublings_of_tiny_tables");
    let mut rng = Rng::new(seed);
    for capacity in [1, 2, 3, 5, 7, 9, 13, 17, 31] {
        for rate in [0.5, 0.3, 0.1] {
            grow_checking(capacity, rate, true, 11, &mut rng);
        }
    }
}

/// A few items inserted many times each (multisets), with fresh filler driving doublings,
/// and removes of random copies: counts stay exact and every copy left is found.
#[test]
fn multiset_copies_survive_runs_of_splits() {
    let seed = seed("multiset_copies_survive_runs_of_splits");
    let mut rng = Rng::new(seed);
    for (i, &rate) in RATES.iter().enumerate() {
        for capacity in [1usize, 6, 19, 37, 100] {
            let narrowest = capacity % 2 == 1;
            let f = filter(capacity, rate, narrowest);
            let at = format!(
                "capacity {capacity}, rate {rate}, narrowest {narrowest}, base {}",
                base_of(&f)
            );
            let hot: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
            let mut model = BTreeMap::new();
            let target = 6 + (i as u32 % 3);
            let mut step = 0u64;
            while f.doublings() < target {
                step += 1;
                match rng.below(10) {
                    0..=2 => {
                        let x = hot[rng.below(4) as usize];
                        insert(&f, &mut model, x, &at);
                    }
                    3 => {
                        // Remove a copy of a random stored item.
                        if let Some((&x, _)) = model
                            .iter()
                            .nth(rng.below(model.len().max(1) as u64) as usize)
                        {
                            assert!(f.remove(&x), "{at}: step {step}: remove {x:#x}");
                            let c = model.get_mut(&x).unwrap();
                            *c -= 1;
                            if *c == 0 {
                                model.remove(&x);
                            }
                        }
                    }
                    _ => {
                        let x = rng.next_u64();
                        insert(&f, &mut model, x, &at);
                    }
                }
                if f.is_doubling() && step.is_multiple_of(13) {
                    check_model(&format!("{at}, step {step}"), &f, &model);
                }
            }
            check_model(&format!("{at}, end"), &f, &model);
        }
    }
}

/// Snapshots and copies taken at many points of a doubling: the restored filter (whose next
/// bucket to split is wherever the first unsplit one was, mostly not a run's first) answers,
/// counts and saves as the original did, and inserts into it finish the doubling.
#[test]
fn mid_doubling_snapshots_round_trip_and_finish_their_doubling() {
    let seed = seed("mid_doubling_snapshots_round_trip_and_finish_their_doubling");
    let mut rng = Rng::new(seed);
    for (i, &rate) in RATES.iter().enumerate() {
        for capacity in [1usize, 3, 10, 23, 50, 77, 130] {
            let narrowest = (capacity + i) % 2 == 1;
            let f = filter(capacity, rate, narrowest);
            let at = format!(
                "capacity {capacity}, rate {rate}, narrowest {narrowest}, base {}",
                base_of(&f)
            );
            let mut model = BTreeMap::new();
            let target = 3 + (i as u32 + capacity as u32) % 3;
            let mut snapshots = 0;
            while f.doublings() < target || f.is_doubling() {
                let x = rng.next_u64();
                insert(&f, &mut model, x, &at);
                // About eight snapshots a doubling, at every doubling (a tiny table's doubling
                // may finish within the insert that began it).
                if f.is_doubling() && rng.below((old_buckets(&f) / 16).max(1)) == 0 {
                    snapshots += 1;
                    check_restored(&format!("{at}, snapshot {snapshots}"), &f, &model, &mut rng);
                }
            }
            assert!(
                snapshots > 0 || old_buckets(&f) < 64,
                "{at}: no snapshot mid-doubling"
            );
        }
    }
}

/// `f` saved and restored, and cloned: each answers and counts as `f`; the restored one saves
/// the same bytes; inserts finish the doubling of each within the old table's bucket count;
/// `finish_doubling` finishes another.
fn check_restored(at: &str, f: &CuckooFilter, model: &BTreeMap<u64, usize>, rng: &mut Rng) {
    let bytes = f.to_bytes();
    let restored = CuckooFilter::from_bytes(&bytes).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert_eq!(restored.is_doubling(), f.is_doubling(), "{at}");
    assert_eq!(restored.doublings(), f.doublings(), "{at}");
    check_model(&format!("{at}, restored"), &restored, model);
    assert!(
        restored.to_bytes() == bytes,
        "{at}: restored saves other bytes"
    );
    let clone = f.clone();
    check_model(&format!("{at}, clone"), &clone, model);
    let finished = CuckooFilter::from_bytes(&bytes).unwrap();
    finished.finish_doubling();
    assert!(!finished.is_doubling(), "{at}: finish_doubling");
    check_model(&format!("{at}, finished"), &finished, model);
    for (name, copy) in [("restored", &restored), ("clone", &clone)] {
        let mut model = model.clone();
        let old = old_buckets(copy);
        let k = copy.doublings();
        let mut inserts = 0;
        while copy.is_doubling() {
            assert_eq!(
                copy.doublings(),
                k,
                "{at}, {name}: doubled before finishing"
            );
            let x = rng.next_u64();
            insert(copy, &mut model, x, at);
            inserts += 1;
            assert!(
                inserts <= old + 1,
                "{at}, {name}: {inserts} inserts, the doubling of {old} old buckets not finished"
            );
        }
        check_model(&format!("{at}, {name} finished by inserts"), copy, &model);
    }
}

/// Threads on tiny growable tables: each inserts, removes and looks up its own items (some
/// many times), the tables double under them, and one snapshots or finishes doublings now and
/// then. Every item a thread holds is found by it after each of its operations; at the end
/// `len` is the sum of what the threads hold, and every item is found and removed once per
/// copy.
#[test]
fn threads_on_tiny_tables_lose_nothing_through_runs_of_splits() {
    let seed = seed_or(
        "threads_on_tiny_tables_lose_nothing_through_runs_of_splits",
        0x5117_5ee0,
    );
    let ops: usize = if cfg!(debug_assertions) {
        3_000
    } else {
        20_000
    };
    for (round, &rate) in RATES.iter().enumerate() {
        for capacity in [1usize, 5, 17] {
            let threads = 2 + (round + capacity) % 3;
            let narrowest = capacity != 5;
            let f = Arc::new(filter(capacity, rate, narrowest));
            let at = format!(
                "capacity {capacity}, rate {rate}, narrowest {narrowest}, base {}, {threads} threads",
                base_of(&f)
            );
            let barrier = Arc::new(Barrier::new(threads));
            let stop = Arc::new(AtomicBool::new(false));
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (f, barrier, stop, at) =
                        (Arc::clone(&f), Arc::clone(&barrier), Arc::clone(&stop), at.clone());
                    std::thread::spawn(move || {
                        let mut rng = Rng::new(seed ^ (round as u64) << 40 ^ (capacity as u64) << 20 ^ t as u64);
                        let mut mine: BTreeMap<u64, usize> = BTreeMap::new();
                        // One entry per copy held, to pick removes and checks from.
                        let mut copies: Vec<u64> = Vec::new();
                        let hot = rng.next_u64();
                        barrier.wait();
                        for op in 0..ops {
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                            let who = format!("{at}, thread {t}, op {op}");
                            match rng.below(20) {
                                0..=11 => {
                                    let x = if rng.below(6) == 0 { hot } else { rng.next_u64() };
                                    if insert(&f, &mut mine, x, &who) {
                                        copies.push(x);
                                    }
                                }
                                12..=15 if !copies.is_empty() => {
                                    let i = rng.below(copies.len() as u64) as usize;
                                    remove_held(&f, &mut mine, &mut copies, i, &stop, &who);
                                }
                                16 if t == 0 && op % 8 == 0 => {
                                    // A snapshot mid-run holds every item this thread holds.
                                    let bytes = f.to_bytes();
                                    let copy = CuckooFilter::from_bytes(&bytes)
                                        .unwrap_or_else(|e| panic!("{who}: restore: {e}"));
                                    for &x in mine.keys() {
                                        assert!(copy.contains(&x), "{who}: snapshot lost {x:#x}");
                                    }
                                }
                                17 if t == 1 && op % 16 == 0 => f.finish_doubling(),
                                _ => {}
                            }
                            // Items held are found after each operation: 16 drawn at random,
                            // and every one of them every 256 ops.
                            let check = |x: u64| {
                                let c = mine[&x];
                                if !f.contains(&x) || f.count(&x) < c {
                                    stop.store(true, Ordering::Relaxed);
                                    panic!(
                                        "{who}: held {x:#x} ({c} copies) missed: contains {}, count {}, doublings {}, doubling {}",
                                        f.contains(&x),
                                        f.count(&x),
                                        f.doublings(),
                                        f.is_doubling()
                                    );
                                }
                            };
                            if op % 256 == 0 {
                                mine.keys().for_each(|&x| check(x));
                            } else if !copies.is_empty() {
                                for _ in 0..16 {
                                    check(copies[rng.below(copies.len() as u64) as usize]);
                                }
                            }
                        }
                        mine
                    })
                })
                .collect();
            let models: Vec<BTreeMap<u64, usize>> =
                handles.into_iter().map(|h| h.join().unwrap()).collect();
            let mut all: BTreeMap<u64, usize> = BTreeMap::new();
            for m in &models {
                for (&x, &c) in m {
                    *all.entry(x).or_default() += c;
                }
            }
            check_model(&format!("{at}, joined"), &f, &all);
            let bytes = f.to_bytes();
            let restored = CuckooFilter::from_bytes(&bytes).unwrap();
            check_model(&format!("{at}, restored"), &restored, &all);
            for (&x, &c) in &all {
                for i in 0..c {
                    assert!(f.remove(&x), "{at}: final remove {i} of {x:#x}");
                }
            }
            assert_eq!(f.len(), 0, "{at}: len after removing everything");
            assert!(f.doublings() > 0, "{at}: never doubled");
        }
    }
}

/// The rates above reach the coarsest lane a filter gets (13 bits), narrow tables (four lanes in a word) and
/// wide ones (lanes over 16 bits), so the attacks cover both split and lookup paths.
#[test]
fn the_attack_rates_cover_narrow_and_wide_lanes() {
    let widths: Vec<u32> = RATES
        .iter()
        .flat_map(|&rate| [true, false].map(|narrowest| filter(10, rate, narrowest)))
        .map(|f| f.fingerprint_bits() + 1)
        .collect();
    println!("lane widths by rate: {widths:?}");
    // (Entries keep at least seven tail bits: 13-bit lanes are the narrowest a filter gets;
    // narrower ones are attacked in the table's unit tests.)
    assert!(widths.contains(&13), "{widths:?}");
    assert!(widths.iter().any(|&w| (8..=16).contains(&w)), "{widths:?}");
    assert!(widths.iter().any(|&w| w > 16), "{widths:?}");
}

/// Threads race `insert_unique` over the same keys on tiny tables of wide lanes (so that two
/// keys colliding is negligible) that double many times under them: each key is added once.
#[test]
fn racing_insert_unique_on_tiny_tables_adds_each_key_once() {
    let seed = seed("racing_insert_unique_on_tiny_tables_adds_each_key_once");
    let n = if cfg!(debug_assertions) {
        3_000
    } else {
        20_000
    };
    for (i, capacity) in [1usize, 2, 3, 7, 13, 33].into_iter().enumerate() {
        let keys = crate::common::distinct_keys(seed ^ i as u64, n);
        let f = filter(capacity, 1e-7, i % 2 == 0);
        crate::common::assert_racing_insert_unique_adds_each_key_once(&f, &keys, 2 + i % 3);
        assert!(f.doublings() >= 5, "capacity {capacity}: few doublings");
    }
}

/// Threads that only insert (one at a time and in batches) on tiny tables: afterwards every
/// item is found and counted, and single inserts finish the doubling in progress within the
/// old table's bucket count (runs given up by claimers that saw another doubling are left to
/// the bitmap).
#[test]
fn inserting_threads_leave_doublings_that_inserts_finish() {
    let seed = seed("inserting_threads_leave_doublings_that_inserts_finish");
    let per_thread = if cfg!(debug_assertions) {
        2_000
    } else {
        15_000
    };
    for (round, &rate) in RATES.iter().enumerate() {
        for capacity in [1usize, 4, 11, 29] {
            let threads = 2 + (round + capacity) % 3;
            let narrowest = capacity % 2 == 1;
            let f = filter(capacity, rate, narrowest);
            let at = format!(
                "capacity {capacity}, rate {rate}, narrowest {narrowest}, {threads} threads"
            );
            let barrier = Barrier::new(threads);
            let models: Vec<BTreeMap<u64, usize>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let (f, barrier, at) = (&f, &barrier, &at);
                        s.spawn(move || {
                            let mut rng =
                                Rng::new(seed ^ ((round * 64 + capacity) as u64) << 8 ^ t as u64);
                            let mut mine = BTreeMap::new();
                            barrier.wait();
                            let mut done = 0;
                            while done < per_thread {
                                if rng.below(4) == 0 {
                                    let batch: Vec<u64> =
                                        (0..rng.below(100) + 1).map(|_| rng.next_u64()).collect();
                                    let added = match f.insert_many(&batch) {
                                        Ok(()) => batch.len(),
                                        Err(e)
                                            if matches!(e.error, InsertError::ItemBucketsFull) =>
                                        {
                                            e.index
                                        }
                                        Err(e) => panic!("{at}: insert_many: {e:?}"),
                                    };
                                    for &x in &batch[..added] {
                                        *mine.entry(x).or_default() += 1;
                                    }
                                    done += batch.len();
                                } else {
                                    let x = rng.next_u64();
                                    insert(f, &mut mine, x, at);
                                    done += 1;
                                }
                            }
                            mine
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let mut all = BTreeMap::new();
            for m in models {
                for (x, c) in m {
                    *all.entry(x).or_default() += c;
                }
            }
            check_model(&format!("{at}, joined"), &f, &all);
            let mut rng = Rng::new(seed ^ 0xf1);
            let old = old_buckets(&f);
            let mut inserts = 0;
            while f.is_doubling() {
                insert(&f, &mut all, rng.next_u64(), &at);
                inserts += 1;
                assert!(
                    inserts <= old + 1,
                    "{at}: {inserts} inserts, doubling not finished"
                );
            }
            check_model(&format!("{at}, finished"), &f, &all);
        }
    }
}

/// Snapshots taken while other threads insert and remove: each restores, holds every item
/// that was held throughout the save, and inserts into the restored filter finish its
/// doubling within the old table's bucket count.
#[test]
fn snapshots_under_writers_restore_and_finish_their_doubling() {
    let seed = seed("snapshots_under_writers_restore_and_finish_their_doubling");
    let snapshots = if cfg!(debug_assertions) { 60 } else { 300 };
    for (round, &rate) in RATES.iter().enumerate() {
        let capacity = [1usize, 9, 40][round % 3];
        let narrowest = round % 2 == 0;
        let f = filter(capacity, rate, narrowest);
        let at = format!("capacity {capacity}, rate {rate}, narrowest {narrowest}");
        let mut rng = Rng::new(seed ^ round as u64);
        // Items held throughout: inserted before the writers start, never removed.
        let mut stable = BTreeMap::new();
        for _ in 0..200 {
            insert(&f, &mut stable, rng.next_u64(), &at);
        }
        let (done, writer_done) = (AtomicBool::new(false), AtomicBool::new(false));
        let (ops, allowed) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let (mut mid_doubling, mut i) = (0, 0);
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut rng = Rng::new(seed ^ 0xabc ^ round as u64);
                let mut mine = Vec::new();
                // Bounded: past 100,000 items of its own it stops (and so do the snapshots).
                while !done.load(Ordering::Relaxed) && mine.len() < 100_000 {
                    // Only the operations the saver allowed so far, to run alongside its save.
                    if ops.load(Ordering::Relaxed) >= allowed.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                        continue;
                    }
                    ops.fetch_add(1, Ordering::Relaxed);
                    if rng.below(3) == 0 && !mine.is_empty() {
                        let x = mine.swap_remove(rng.below(mine.len() as u64) as usize);
                        assert!(f.remove(&x), "{at}: writer's remove of {x:#x}");
                    } else {
                        let x = rng.next_u64();
                        if f.insert(&x).is_ok() {
                            mine.push(x);
                        }
                    }
                }
                writer_done.store(true, Ordering::Relaxed);
                mine
            });
            while mid_doubling < snapshots / 3
                && i < snapshots * 20
                && !writer_done.load(Ordering::Relaxed)
            {
                i += 1;
                // A few more writer operations: half before this save, half alongside it (so
                // that the table changes a little between saves, however threads are run).
                let budget = rng.below(64) as usize + 2;
                let half = allowed.fetch_add(budget, Ordering::Relaxed) + budget / 2;
                while ops.load(Ordering::Relaxed) < half && !writer_done.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
                let bytes = f.to_bytes();
                let copy = CuckooFilter::from_bytes(&bytes)
                    .unwrap_or_else(|e| panic!("{at}, snapshot {i}: {e}"));
                for &x in stable.keys() {
                    assert!(copy.contains(&x), "{at}, snapshot {i}: lost {x:#x}");
                }
                if copy.is_doubling() {
                    mid_doubling += 1;
                    let old = old_buckets(&copy);
                    let mut inserts = 0;
                    while copy.is_doubling() {
                        let _ = copy.insert(&rng.next_u64());
                        inserts += 1;
                        assert!(
                            inserts <= old + 1,
                            "{at}, snapshot {i}: {inserts} inserts, doubling not finished"
                        );
                    }
                    for &x in stable.keys() {
                        assert!(
                            copy.contains(&x),
                            "{at}, snapshot {i} finished: lost {x:#x}"
                        );
                    }
                }
            }
            done.store(true, Ordering::Relaxed);
            for x in writer.join().unwrap() {
                *stable.entry(x).or_default() += 1;
            }
        });
        println!(
            "{at}: {mid_doubling} snapshots mid-doubling, {i} in all, {} doublings, {} writer ops",
            f.doublings(),
            ops.load(Ordering::Relaxed)
        );
        assert!(mid_doubling > 0, "{at}: no snapshot mid-doubling");
        check_model(&format!("{at}, end"), &f, &stable);
    }
}

/// Every operation of a growable filter mixed at random on tiny tables, against a multiset
/// model, checked after each: inserts one at a time, in batches and unique, removes, lookups,
/// `finish_doubling`, saves and clones that replace the filter mid-doubling, `shrink_to_fit`
/// and `clear`. Every held item is found and counted, `len` is exact, and every remove of a
/// held copy succeeds.
#[test]
fn every_operation_mixed_mid_doubling_keeps_the_model() {
    let seed = seed("every_operation_mixed_mid_doubling_keeps_the_model");
    let mut rng = Rng::new(seed);
    let steps = if cfg!(debug_assertions) {
        1_500
    } else {
        10_000
    };
    for (round, &rate) in RATES.iter().enumerate() {
        for capacity in [1usize, 3, 14, 45] {
            let narrowest = (round + capacity) % 2 == 0;
            let mut f = filter(capacity, rate, narrowest);
            let at = format!("capacity {capacity}, rate {rate}, narrowest {narrowest}");
            let mut model: BTreeMap<u64, usize> = BTreeMap::new();
            let mut copies: Vec<u64> = Vec::new();
            let (mut mid_doubling, mut replaced) = (0, 0);
            for step in 0..steps {
                let at = format!("{at}, step {step}, doublings {}", f.doublings());
                mid_doubling += usize::from(f.is_doubling());
                match rng.below(100) {
                    0..=39 => {
                        let x = rng.next_u64();
                        if insert(&f, &mut model, x, &at) {
                            copies.push(x);
                        }
                    }
                    40..=44 if !copies.is_empty() => {
                        // Another copy of a held item.
                        let x = copies[rng.below(copies.len() as u64) as usize];
                        if insert(&f, &mut model, x, &at) {
                            copies.push(x);
                        }
                    }
                    45..=54 => {
                        let batch: Vec<u64> =
                            (0..rng.below(40) + 1).map(|_| rng.next_u64()).collect();
                        let added = match f.insert_many(&batch) {
                            Ok(()) => batch.len(),
                            Err(e) if matches!(e.error, InsertError::ItemBucketsFull) => e.index,
                            Err(e) => panic!("{at}: insert_many: {e:?}"),
                        };
                        for &x in &batch[..added] {
                            *model.entry(x).or_default() += 1;
                            copies.push(x);
                        }
                    }
                    55..=59 => {
                        let x = if copies.is_empty() || rng.below(2) == 0 {
                            rng.next_u64()
                        } else {
                            copies[rng.below(copies.len() as u64) as usize]
                        };
                        match f.insert_unique(&x) {
                            Ok(true) => {
                                *model.entry(x).or_default() += 1;
                                copies.push(x);
                            }
                            Ok(false) => {}
                            Err(InsertError::ItemBucketsFull) => {}
                            Err(e) => panic!("{at}: insert_unique: {e:?}"),
                        }
                    }
                    60..=79 if !copies.is_empty() => {
                        let x = copies.swap_remove(rng.below(copies.len() as u64) as usize);
                        assert!(f.remove(&x), "{at}: remove of held {x:#x}");
                        let c = model.get_mut(&x).unwrap();
                        *c -= 1;
                        if *c == 0 {
                            model.remove(&x);
                        }
                    }
                    80..=84 => {
                        let bytes = f.to_bytes();
                        let was = f.is_doubling();
                        f = CuckooFilter::from_bytes(&bytes)
                            .unwrap_or_else(|e| panic!("{at}: restore: {e}"));
                        assert_eq!(f.is_doubling(), was, "{at}: restored");
                        replaced += usize::from(was);
                    }
                    85..=87 => {
                        let was = f.is_doubling();
                        f = f.clone();
                        assert_eq!(f.is_doubling(), was, "{at}: cloned");
                        replaced += usize::from(was);
                    }
                    88 => f.finish_doubling(),
                    89 if rng.below(4) == 0 => {
                        f.shrink_to_fit();
                        assert!(!f.is_doubling(), "{at}: shrunk");
                    }
                    90 if rng.below(20) == 0 => {
                        f.clear();
                        model.clear();
                        copies.clear();
                        assert!(!f.is_doubling(), "{at}: cleared");
                    }
                    _ => {}
                }
                // Every held item, checked often while few are held.
                if copies.len() < 200 || step % 64 == 0 {
                    check_model(&at, &f, &model);
                } else {
                    assert_eq!(f.len(), copies.len(), "{at}: len");
                    for _ in 0..8 {
                        let x = copies[rng.below(copies.len() as u64) as usize];
                        assert!(f.contains(&x), "{at}: held {x:#x} missed");
                    }
                }
            }
            check_model(&format!("{at}, end"), &f, &model);
            println!("{at}: {mid_doubling} steps mid-doubling, {replaced} replaced mid-doubling");
        }
    }
}

/// Whether a snapshot of `f` records a doubling in progress (its header's `split_left`, word
/// 9, is not 0).
fn saved_doubling(f: &CuckooFilter) -> bool {
    let bytes = f.to_bytes();
    u64::from_le_bytes(bytes[72..80].try_into().unwrap()) != 0
}

/// A growable filter at 1 % whose first table has `base` buckets.
fn with_base(base: u64) -> CuckooFilter {
    let guess = (base as f64 * 3.8) as usize;
    (guess.saturating_sub(16).max(1)..guess + 16)
        .map(|capacity| filter(capacity, 0.01, false))
        .find(|f| base_of(f) == base)
        .unwrap_or_else(|| panic!("no capacity gives a base of {base}"))
}

/// Doublings around the pacing switch (old tables of 4,094, 4,096, 4,098 and 4,100 buckets:
/// below it every insert claims two, from it one in eight claims sixteen; partial last
/// bitmap words among them). Mid-doubling, a restore and a clone of the filter take the same
/// operations as it (fresh inserts, repeats, removes), and the three answer, count and save
/// the same bytes throughout; `is_doubling` agrees with the saved split count at every check;
/// every doubling ends within the claims' bound, and a restore finished by `finish_doubling`
/// holds every item.
#[test]
fn restores_at_the_pacing_switch_go_on_identically_and_finish() {
    let seed = seed("restores_at_the_pacing_switch_go_on_identically_and_finish");
    let mut rng = Rng::new(seed);
    for (base, k) in [(4_094, 1), (4_096, 1), (4_098, 1), (2_050, 2)] {
        let f = with_base(base);
        let mut model = BTreeMap::new();
        let at = format!("base {base}, doubling {k}");
        while f.doublings() < k {
            insert(&f, &mut model, rng.next_u64(), &at);
        }
        let old = old_buckets(&f);
        assert!(f.is_doubling(), "{at}");
        // A few inserts in, so that some words are split and others not.
        for _ in 0..rng.below(old / 4) {
            insert(&f, &mut model, rng.next_u64(), &at);
        }
        let restored = CuckooFilter::from_bytes(&f.to_bytes()).unwrap();
        let clone = f.clone();
        let finished = CuckooFilter::from_bytes(&f.to_bytes()).unwrap();
        finished.finish_doubling();
        assert!(
            !finished.is_doubling(),
            "{at}: finish_doubling after a restore"
        );
        assert!(!saved_doubling(&finished), "{at}: finished, saved");
        check_model(&format!("{at}, finished"), &finished, &model);
        let keys: Vec<u64> = model.keys().copied().collect();
        let mut inserts = 0u64;
        let mut step = 0u64;
        while f.is_doubling() {
            step += 1;
            let x = match rng.below(8) {
                0 => Some(keys[rng.below(keys.len() as u64) as usize]),
                1 => None,
                _ => Some(rng.next_u64()),
            };
            match x {
                Some(x) => {
                    let r = f.insert(&x).is_ok();
                    assert_eq!(restored.insert(&x).is_ok(), r, "{at}, step {step}");
                    assert_eq!(clone.insert(&x).is_ok(), r, "{at}, step {step}");
                    if r {
                        *model.entry(x).or_default() += 1;
                    }
                    inserts += 1;
                }
                None => {
                    // A copy of an item held since before the restore.
                    let x = keys[rng.below(keys.len() as u64) as usize];
                    if model.get(&x).is_some_and(|&c| c > 1) {
                        assert!(f.remove(&x), "{at}, step {step}");
                        assert!(restored.remove(&x), "{at}, step {step}");
                        assert!(clone.remove(&x), "{at}, step {step}");
                        *model.get_mut(&x).unwrap() -= 1;
                    }
                }
            }
            assert_eq!(restored.is_doubling(), f.is_doubling(), "{at}, step {step}");
            assert_eq!(clone.is_doubling(), f.is_doubling(), "{at}, step {step}");
            if step.is_multiple_of(64) || !f.is_doubling() {
                let bytes = f.to_bytes();
                assert!(
                    restored.to_bytes() == bytes,
                    "{at}, step {step}: restore differs"
                );
                assert!(
                    clone.to_bytes() == bytes,
                    "{at}, step {step}: clone differs"
                );
                assert_eq!(saved_doubling(&f), f.is_doubling(), "{at}, step {step}");
            }
            let runs = old.div_ceil(16) as f64;
            let bound = if old < 4_096 {
                old as f64 / 2.0
            } else {
                8.0 * runs + 48.0 * runs.sqrt()
            };
            assert!(
                inserts as f64 <= bound + 1.0,
                "{at}: {inserts} inserts, the doubling of {old} old buckets not finished"
            );
        }
        assert_eq!(f.doublings(), k, "{at}: doubled again before finishing");
        for g in [&f, &restored, &clone] {
            check_model(&format!("{at}, end"), g, &model);
        }
    }
}

/// Two to four threads on tiny growable filters (random capacities 1 to 50, rates 0.5 to
/// 0.001) across many doublings: writers insert, re-insert and remove their own items and
/// check them after every operation, while one thread only looks up items held throughout
/// (inserted before, never removed), clones the filter mid-doubling and checks the clone, and
/// now and then finishes the doubling. No held item is ever missed; at the end `len` is
/// exact and every copy is removed once.
#[test]
fn readers_and_writers_on_tiny_tables_miss_nothing_across_doublings() {
    let seed = seed("readers_and_writers_on_tiny_tables_miss_nothing_across_doublings");
    let mut rng = Rng::new(seed);
    let ops: usize = if cfg!(debug_assertions) {
        2_000
    } else {
        50_000
    };
    for round in 0..20 {
        let capacity = 1 + rng.below(50) as usize;
        let rate = [0.5, 0.2, 0.05, 0.01, 0.001][rng.below(5) as usize];
        let writers = 1 + rng.below(3) as usize;
        let f = filter(capacity, rate, round % 2 == 0);
        let at = format!("round {round}, capacity {capacity}, rate {rate}, {writers} writers");
        let mut stable = BTreeMap::new();
        for _ in 0..rng.below(3 * capacity as u64 + 1) + 1 {
            insert(&f, &mut stable, rng.next_u64(), &at);
        }
        let stop = AtomicBool::new(false);
        let writers_left = AtomicUsize::new(writers);
        let barrier = Barrier::new(writers + 1);
        let models: Vec<BTreeMap<u64, usize>> = std::thread::scope(|s| {
            let (f, stop, barrier, at, stable) = (&f, &stop, &barrier, &at, &stable);
            let writers_left = &writers_left;
            let handles: Vec<_> = (0..writers)
                .map(|t| {
                    let mut rng = Rng::new(seed ^ (round as u64) << 32 ^ t as u64);
                    s.spawn(move || {
                        let mut mine: BTreeMap<u64, usize> = BTreeMap::new();
                        let mut copies: Vec<u64> = Vec::new();
                        barrier.wait();
                        for op in 0..ops {
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                            let who = format!("{at}, writer {t}, op {op}");
                            match rng.below(10) {
                                0..=5 => {
                                    let x = rng.next_u64();
                                    if insert(f, &mut mine, x, &who) {
                                        copies.push(x);
                                    }
                                }
                                6 if !copies.is_empty() => {
                                    let x = copies[rng.below(copies.len() as u64) as usize];
                                    if insert(f, &mut mine, x, &who) {
                                        copies.push(x);
                                    }
                                }
                                _ if !copies.is_empty() => {
                                    let i = rng.below(copies.len() as u64) as usize;
                                    remove_held(f, &mut mine, &mut copies, i, stop, &who);
                                }
                                _ => {}
                            }
                            for _ in 0..4 {
                                if copies.is_empty() {
                                    break;
                                }
                                let x = copies[rng.below(copies.len() as u64) as usize];
                                if !f.contains(&x) {
                                    stop.store(true, Ordering::Relaxed);
                                    panic!(
                                        "{who}: held {x:#x} missed, doublings {}, doubling {}",
                                        f.doublings(),
                                        f.is_doubling()
                                    );
                                }
                            }
                        }
                        writers_left.fetch_sub(1, Ordering::Relaxed);
                        mine
                    })
                })
                .collect();
            let reader = s.spawn(move || {
                barrier.wait();
                let mut pass = 0u64;
                while writers_left.load(Ordering::Relaxed) > 0 && !stop.load(Ordering::Relaxed) {
                    pass += 1;
                    for &x in stable.keys() {
                        if !f.contains(&x) {
                            stop.store(true, Ordering::Relaxed);
                            panic!(
                                "{at}, reader pass {pass}: stable {x:#x} missed, doublings {}, doubling {}",
                                f.doublings(),
                                f.is_doubling()
                            );
                        }
                    }
                    if pass.is_multiple_of(64) && f.is_doubling() {
                        let copy = f.clone();
                        for &x in stable.keys() {
                            assert!(copy.contains(&x), "{at}, pass {pass}: clone lost {x:#x}");
                        }
                        copy.finish_doubling();
                        assert!(!copy.is_doubling(), "{at}, pass {pass}: clone finished");
                        for &x in stable.keys() {
                            assert!(copy.contains(&x), "{at}, pass {pass}: finished lost {x:#x}");
                        }
                    }
                    if pass.is_multiple_of(509) {
                        f.finish_doubling();
                    }
                }
            });
            let models = handles.into_iter().map(|h| h.join().unwrap()).collect();
            reader.join().unwrap();
            models
        });
        let mut all = stable.clone();
        for m in &models {
            for (&x, &c) in m {
                *all.entry(x).or_default() += c;
            }
        }
        check_model(&format!("{at}, joined"), &f, &all);
        assert!(f.doublings() > 0, "{at}: never doubled");
        for (&x, &c) in &all {
            for i in 0..c {
                assert!(f.remove(&x), "{at}: final remove {i} of {x:#x}");
            }
        }
        assert_eq!(f.len(), 0, "{at}: len after removing everything");
    }
}
