//! Attacks on the doubling's runs of splits (sixteen consecutive old buckets claimed by one
//! insert, grouped by their pair of stripes), the narrow split packed in registers, the
//! four-anchor test of lookups and the path search's empty-lane test: first tables whose
//! bucket count is not a multiple of sixteen (runs that cross a segment boundary or end at the
//! old table's last bucket), every lane width, exhausted entries, multisets, snapshots and
//! copies taken mid-doubling (restored with a next bucket that starts no run), and threads on
//! tiny tables.
//!
//! Each test runs for a bounded time and prints its seed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common::{assert_multiset_found, growable as grown, seed, seed_or, Rng};

/// Target rates from the coarsest (7-bit lanes) to the finest (wide lanes, over 16 bits).
const RATES: [f64; 9] = [0.5, 0.3, 0.1, 0.03, 0.01, 1e-3, 1e-4, 1e-5, 1e-7];

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
fn grow_checking(capacity: usize, rate: f64, doublings: u32, rng: &mut Rng) {
    let f = grown(capacity, rate);
    let at = format!(
        "capacity {capacity}, rate {rate}, base {}, lane {} bits",
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
        for shift in [0, 4] {
            let rate = RATES[(capacity + shift) % RATES.len()];
            grow_checking(capacity, rate, doublings, &mut rng);
        }
    }
}

/// The coarsest lanes (an entry exhausted after a doubling or two) through many doublings,
/// where most entries are copied into both halves by every split.
#[test]
fn exhausted_entries_survive_many_doublings_of_tiny_tables() {
    let seed = seed("exhausted_entries_survive_many_doublings_of_tiny_tables");
    let mut rng = Rng::new(seed);
    for capacity in [1, 2, 3, 5, 7, 9, 13, 17, 31] {
        for rate in [0.5, 0.3] {
            grow_checking(capacity, rate, 11, &mut rng);
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
            let f = grown(capacity, rate);
            let at = format!("capacity {capacity}, rate {rate}, base {}", base_of(&f));
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
            let f = grown(capacity, rate);
            let at = format!("capacity {capacity}, rate {rate}, base {}", base_of(&f));
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
            let f = Arc::new(grown(capacity, rate));
            let at = format!(
                "capacity {capacity}, rate {rate}, base {}, {threads} threads",
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
                        let hot = rng.next_u64();
                        barrier.wait();
                        for op in 0..ops {
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                            let who = format!("{at}, thread {t}, op {op}");
                            match rng.below(20) {
                                0..=9 => {
                                    let x = rng.next_u64();
                                    insert(&f, &mut mine, x, &who);
                                }
                                10 | 11 => {
                                    insert(&f, &mut mine, hot, &who);
                                }
                                12..=15 if !mine.is_empty() => {
                                    let i = rng.below(mine.len() as u64) as usize;
                                    let x = *mine.keys().nth(i).unwrap();
                                    if !f.remove(&x) {
                                        stop.store(true, Ordering::Relaxed);
                                        panic!("{who}: remove of held {x:#x} failed");
                                    }
                                    let c = mine.get_mut(&x).unwrap();
                                    *c -= 1;
                                    if *c == 0 {
                                        mine.remove(&x);
                                    }
                                }
                                16 if t == 0 && op % 64 == 0 => {
                                    // A snapshot mid-run holds every item this thread holds.
                                    let bytes = f.to_bytes();
                                    let copy = CuckooFilter::from_bytes(&bytes)
                                        .unwrap_or_else(|e| panic!("{who}: restore: {e}"));
                                    for &x in mine.keys() {
                                        assert!(copy.contains(&x), "{who}: snapshot lost {x:#x}");
                                    }
                                }
                                17 if t == 1 && op % 128 == 0 => f.finish_doubling(),
                                _ => {}
                            }
                            // Every item held is found after each operation (a sample when
                            // many are held).
                            let n = mine.len();
                            for (j, (&x, &c)) in mine.iter().enumerate() {
                                if n > 64 && (j + op) % 8 != 0 {
                                    continue;
                                }
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
