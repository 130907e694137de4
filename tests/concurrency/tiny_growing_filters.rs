//! Threads on tiny growable filters (the table doubles all the time).
//!
//! Items are partitioned per thread; each thread checks its own items after its own
//! operations, and every thread checks a shared set of permanent items (inserted before the
//! threads start, never removed). The narrowest lanes a growable filter takes (14-bit entries,
//! at rates of 1 % and above) make cross-thread key collisions (and so removes that take another
//! item's copy) as frequent as they get; the widest (31-bit entries) make them negligible, so
//! that insert_unique's answers can be checked exactly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::format_model::{seed, Rng};
use atomic_cuckoo::{Builder, CuckooFilter, InsertError};

/// A coarse target rate: the narrowest lanes (14-bit entries).
const NARROW: f64 = 0.3;
/// The finest target rate a growable filter reaches: the widest lanes (31-bit entries).
const WIDE: f64 = 4e-8;

fn filter(capacity: usize, rate: f64) -> CuckooFilter {
    Builder::default()
        .capacity(capacity)
        .false_positive_rate(rate)
        .growable(true)
        .huge_pages(false)
        .build()
        .unwrap()
}

const THREADS: u64 = 3;

/// Runs `THREADS` writer threads for about `secs` seconds; returns the failures seen.
fn stress(seed: u64, f: &CuckooFilter, secs: f64) -> Vec<String> {
    let bits = f.fingerprint_bits();
    let permanent: Vec<u64> = (0..200u64).map(|i| (0xFF << 48) | i).collect();
    for k in &permanent {
        f.insert(k).unwrap();
    }
    let barrier = Barrier::new(THREADS as usize);
    let stop = AtomicBool::new(false);
    let ops = AtomicUsize::new(0);
    let fulls = AtomicUsize::new(0);
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (barrier, stop, ops, permanent) = (&barrier, &stop, &ops, &permanent);
                let fulls = &fulls;
                s.spawn(move || {
                    let mut rng = Rng::new(seed ^ (t + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let mut fails = Vec::new();
                    let mut live: Vec<u64> = Vec::new();
                    let mut copies: HashMap<u64, usize> = HashMap::new();
                    let mut next = 0u64;
                    let start = Instant::now();
                    barrier.wait();
                    let mut n = 0usize;
                    let mut full = 0usize;
                    while start.elapsed().as_secs_f64() < secs && !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let op = rng.below(100);
                        if op < 45 || live.is_empty() {
                            // Own keys: t in the top bits; sometimes an existing one again.
                            let k = if rng.below(4) == 0 && !live.is_empty() {
                                live[rng.below(live.len() as u64) as usize]
                            } else {
                                next += 1;
                                (t << 40) | next
                            };
                            match f.insert(&k) {
                                Ok(()) => {
                                    live.push(k);
                                    *copies.entry(k).or_default() += 1;
                                }
                                // A refused insert must have changed nothing. The docs
                                // allow `ItemBucketsFull` for any item in a table below half
                                // its doubling load whose kick walk found no room (tiny
                                // tables, early), and for a key whose buckets hold its copies.
                                Err(InsertError::ItemBucketsFull) => full += 1,
                                Err(e) => fails.push(format!("t{t}: insert {k}: {e}")),
                            }
                            if !f.contains(&k) && copies.contains_key(&k) {
                                fails.push(format!("t{t}: {k} not found right after insert"));
                            }
                        } else if op < 60 {
                            next += 1;
                            let k = (t << 40) | next;
                            match f.insert_unique(&k) {
                                Ok(true) => {
                                    live.push(k);
                                    *copies.entry(k).or_default() += 1;
                                    if !f.contains(&k) {
                                        fails.push(format!(
                                            "t{t}: {k} not found after insert_unique"
                                        ));
                                    }
                                }
                                Ok(false) => {
                                    // A fresh key refused: only a collision explains it.
                                    let c = f.count(&k);
                                    if bits >= 31 && c == 0 {
                                        fails.push(format!(
                                            "t{t}: insert_unique({k}) of a fresh key said \
                                             present, count is 0 (doublings {})",
                                            f.doublings()
                                        ));
                                    }
                                }
                                Err(InsertError::ItemBucketsFull) => full += 1,
                                Err(e) => fails.push(format!("t{t}: insert_unique {k}: {e}")),
                            }
                        } else if op < 90 {
                            let at = rng.below(live.len() as u64) as usize;
                            let k = live.swap_remove(at);
                            let c = copies.get_mut(&k).unwrap();
                            *c -= 1;
                            if *c == 0 {
                                copies.remove(&k);
                            }
                            if !f.remove(&k) {
                                fails.push(format!("t{t}: remove of live {k} returned false"));
                            }
                        } else {
                            // Own live items (a sample) and some permanent ones.
                            for _ in 0..8 {
                                if live.is_empty() {
                                    break;
                                }
                                let k = live[rng.below(live.len() as u64) as usize];
                                let (found, counted) = (f.contains(&k), f.count(&k));
                                if !found || counted < copies[&k] {
                                    fails.push(format!(
                                        "t{t}: live {k} ({} copies): contains={found} \
                                         count={counted} doublings={}",
                                        copies[&k],
                                        f.doublings()
                                    ));
                                }
                            }
                            for _ in 0..8 {
                                let k = permanent[rng.below(permanent.len() as u64) as usize];
                                if !f.contains(&k) {
                                    fails.push(format!("t{t}: permanent {k} not found"));
                                }
                            }
                        }
                        if fails.len() > 20 {
                            break;
                        }
                    }
                    // Own final check (other threads may still run).
                    for (&k, &c) in &copies {
                        let (found, counted) = (f.contains(&k), f.count(&k));
                        if !found || counted < c {
                            fails.push(format!(
                                "t{t} final: live {k} ({c}) contains={found} count={counted}"
                            ));
                        }
                    }
                    ops.fetch_add(n, Ordering::Relaxed);
                    fulls.fetch_add(full, Ordering::Relaxed);
                    (fails, copies)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let mut fails: Vec<String> = results.iter().flat_map(|r| r.0.clone()).collect();
        // Quiescent: exact len, every live item of every thread.
        let total: usize = results.iter().map(|r| r.1.values().sum::<usize>()).sum();
        if f.len() != total + permanent.len() {
            fails.push(format!(
                "len {} != {} live copies",
                f.len(),
                total + permanent.len()
            ));
        }
        for (copies, _) in results.iter().map(|r| (&r.1, ())) {
            for (k, &c) in copies {
                if f.count(k) < c {
                    fails.push(format!("quiescent: {k} count {} < {c}", f.count(k)));
                }
            }
        }
        for k in &permanent {
            if !f.contains(k) {
                fails.push(format!("quiescent: permanent {k} lost"));
            }
        }
        fails
    });
    println!(
        "seed={seed} bits={bits}: {} ops, {} refused inserts, {} doublings, {} items",
        ops.load(Ordering::Relaxed),
        fulls.load(Ordering::Relaxed),
        f.doublings(),
        f.len()
    );
    failures
}

/// Runs `stress` for `secs` seconds on a growable filter per `(capacity, rate)` and fails
/// with every failure.
fn stress_each(name: &str, configs: &[(usize, f64)], secs: f64) {
    let seed = seed(name);
    let mut all = Vec::new();
    for &(cap, rate) in configs {
        let f = filter(cap, rate);
        let fails = stress(seed, &f, secs);
        assert!(f.doublings() > 0, "seed={seed} cap={cap}: never doubled");
        all.extend(
            fails
                .into_iter()
                .map(|s| format!("cap={cap} rate={rate}: {s}")),
        );
    }
    assert!(
        all.is_empty(),
        "seed={seed}: {} failures, first {:?}",
        all.len(),
        &all[..all.len().min(8)]
    );
}

#[test]
fn threads_on_tiny_growable_filters_with_narrow_lanes_lose_nothing() {
    stress_each(
        "narrow stress",
        &[(4, NARROW), (8, 0.01), (2, NARROW), (16, NARROW)],
        0.6,
    );
}

#[test]
fn threads_on_tiny_growable_filters_with_the_widest_lanes_lose_nothing_and_insert_unique_is_exact()
{
    stress_each("wide stress", &[(2, WIDE), (8, WIDE), (4, WIDE)], 0.8);
}

/// Threads race insert_unique over the same fresh keys, in opposite orders, while the table
/// doubles under them (from two items to thousands): each key is added by exactly one thread
/// and stored once. The widest lanes make a fresh key matching another's entry negligible.
#[test]
fn racing_insert_unique_during_growth_adds_each_key_once() {
    let seed = seed("unique race");
    let mut bad = Vec::new();
    for round in 0..20u64 {
        let f = filter(2, WIDE);
        assert_eq!(f.fingerprint_bits(), 31, "the widest lanes");
        let keys: Vec<u64> = (0..3000u64).map(|i| (round << 32) | i).collect();
        let barrier = Barrier::new(3);
        let results: Vec<Vec<bool>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|t| {
                    let (f, keys, barrier) = (&f, &keys, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        // Different orders per thread so that they meet everywhere.
                        let mut out = vec![false; keys.len()];
                        let n = keys.len();
                        for j in 0..n {
                            let i = if t == 1 { n - 1 - j } else { j };
                            out[i] = f.insert_unique(&keys[i]).unwrap();
                        }
                        out
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, k) in keys.iter().enumerate() {
            let winners = results.iter().filter(|r| r[i]).count();
            let c = f.count(k);
            if winners != 1 || c != 1 {
                bad.push(format!(
                    "round {round} key {k}: {winners} threads added it, count {c}"
                ));
            }
        }
        assert_eq!(
            f.len(),
            keys.len(),
            "seed={seed} round {round}: len; {:?}",
            &bad[..bad.len().min(5)]
        );
        assert!(
            f.doublings() >= 8,
            "round {round}: {} doublings",
            f.doublings()
        );
    }
    assert!(
        bad.is_empty(),
        "seed={seed}: {} bad keys, first {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
}

/// DESIGN.md §5: "Whole-filter operations (a save, clear) must not hold stripe lock bits while
/// they work: readers would fail every validation and answer 'maybe present' for everything."
/// Measures the rate at which lookups of absent items answer true while another thread saves.
#[test]
fn lookups_of_absent_items_stay_absent_while_another_thread_saves() {
    let f = Builder::default()
        .capacity(3_000_000)
        .fingerprint_bits(32)
        .huge_pages(false)
        .build()
        .unwrap();
    for i in 0..2_000_000u64 {
        f.insert(&i).unwrap();
    }
    let probe = |from: u64, n: u64| (from..from + n).filter(|k| f.contains(k)).count();
    let quiet = probe(1 << 40, 200_000);
    let saving = AtomicBool::new(true);
    let (during, saves) = std::thread::scope(|s| {
        let saver = s.spawn(|| {
            let mut saves = 0;
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(800) {
                std::hint::black_box(f.to_bytes());
                saves += 1;
            }
            saving.store(false, Ordering::Relaxed);
            saves
        });
        let mut yes = 0usize;
        let mut total = 0usize;
        let mut k = 1u64 << 41;
        while saving.load(Ordering::Relaxed) {
            for _ in 0..1000 {
                k += 1;
                total += 1;
                yes += usize::from(f.contains(&k));
            }
        }
        (yes as f64 / total.max(1) as f64, saver.join().unwrap())
    });
    println!(
        "absent lookups answering true: {quiet} of 200000 with no save; {:.1} % during {saves} saves",
        100.0 * during
    );
    assert!(
        during < 0.01,
        "{:.1} % of lookups of absent items answered true while another thread saved ({saves} \
         saves in 0.8 s); with no save, {quiet} of 200,000",
        100.0 * during
    );
}

/// `RedisCuckooFilter::count` (retried reads, then a wait for the compaction) and `contains`
/// of items stored twice, never removed, while writers add and delete their own items in a tiny
/// filter that grows sub-filters and kicks, and another thread compacts it again and again:
/// every count is at least 2 (the stable copies; colliding items may add to it), every lookup
/// finds them, and `len` is exact after the threads join.
#[test]
fn redis_count_and_contains_of_stable_items_never_drop_under_kicks_growth_and_compaction() {
    use atomic_cuckoo::redisbloom::RedisCuckooFilter;
    let seed = seed(
        "redis_count_and_contains_of_stable_items_never_drop_under_kicks_growth_and_compaction",
    );
    let filter = RedisCuckooFilter::builder()
        .capacity(8)
        .bucket_size(2)
        .expansion(1)
        .max_expansions(200)
        .build()
        .unwrap();
    let stable: Vec<[u8; 8]> = (0..6u64)
        .map(|i| (seed ^ i.wrapping_mul(0x9E37_79B9)).to_le_bytes())
        .collect();
    for item in &stable {
        filter.insert(item).unwrap();
        filter.insert(item).unwrap();
    }
    let stop = AtomicBool::new(false);
    let bad = std::sync::Mutex::new(Vec::new());
    let checks = AtomicUsize::new(0);
    let writers = 2;
    let net: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|t| {
                let (filter, stop) = (&filter, &stop);
                s.spawn(move || {
                    let mut rng =
                        Rng::new(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let mut mine: Vec<[u8; 8]> = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        if mine.len() < 40 || rng.below(2) == 0 {
                            let item = (rng.next_u64() | 1 << 63).to_le_bytes();
                            if filter.insert(item).is_ok() {
                                mine.push(item);
                            }
                        } else {
                            let i = rng.below(mine.len() as u64) as usize;
                            let item = mine.swap_remove(i);
                            assert!(
                                filter.remove(item),
                                "seed={seed}: remove of an inserted item"
                            );
                        }
                    }
                    mine.len()
                })
            })
            .collect();
        let (filter, stop) = (&filter, &stop);
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                filter.compact();
                std::thread::yield_now();
            }
        });
        let (bad, checks, stable) = (&bad, &checks, &stable);
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for item in stable {
                    let (count, found) = (filter.count(item), filter.contains(item));
                    if count < 2 || !found {
                        bad.lock()
                            .unwrap()
                            .push(format!("{item:?}: count {count}, contains {found}"));
                    }
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        std::thread::sleep(Duration::from_millis(2_000));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let bad = bad.into_inner().unwrap();
    println!(
        "seed={seed}: {} checks, {} sub-filters, {} bad",
        checks.load(Ordering::Relaxed),
        filter.info().filters,
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "seed={seed}: {} bad reads, first {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    assert_eq!(filter.len(), net + 2 * stable.len(), "seed={seed}: len");
    assert!(stable.iter().all(|item| filter.count(item) >= 2));
}
