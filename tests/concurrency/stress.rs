//! Stress tests with real threads. They sample interleavings (loom explores them exhaustively on
//! tiny tables, see `loom-tests/`); here the tables are large, nearly full, and the hardware is
//! real. Each test is bounded in time and in operations.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::CuckooFilter;

use crate::common;

const RUN_FOR: Duration = Duration::from_millis(1500);

/// One thread churns inserts and removes with the table at 93-95 % load, where most inserts find
/// both buckets full and run kick chains that move stable items' fingerprints (about two thirds
/// did at 93-94 %, measured with a temporary counter); another thread checks that every stable
/// item is still found.
#[test]
fn readers_never_miss_stable_items_while_a_writer_churns_near_full() {
    let seed = common::seed("churn near full");
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(60_000)
            .fingerprint_bits(16)
            .build()
            .unwrap(),
    );
    let slots = filter.slots();
    let keys = common::distinct_keys(seed, slots * 20);
    let (stable, churn_keys) = keys.split_at((slots as f64 * 0.85) as usize);
    for k in stable {
        filter.insert(k).unwrap();
    }
    let stable: Arc<Vec<u64>> = Arc::new(stable.to_vec());
    let churn_keys: Vec<u64> = churn_keys.to_vec();
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(2));

    let churner = {
        let (filter, done, start) = (Arc::clone(&filter), Arc::clone(&done), Arc::clone(&start));
        thread::spawn(move || {
            let (low, high) = (
                (slots as f64 * 0.93) as usize,
                (slots as f64 * 0.95) as usize,
            );
            let mut resident: VecDeque<u64> = VecDeque::new();
            let (mut inserts, mut full) = (0usize, 0usize);
            start.wait();
            let began = Instant::now();
            for &key in &churn_keys {
                if began.elapsed() > RUN_FOR {
                    break;
                }
                if filter.insert(&key).is_ok() {
                    resident.push_back(key);
                    inserts += 1;
                } else {
                    full += 1;
                }
                // Keep the load between 93 % and 95 %: remove the oldest churn items.
                while filter.len() > high || (full > 0 && filter.len() > low) {
                    let old = resident.pop_front().expect("churn items to remove");
                    assert!(filter.remove(&old));
                    full = 0;
                }
            }
            done.store(true, Ordering::Release);
            (inserts, resident)
        })
    };
    let checker = {
        let (filter, done, stable, start) = (
            Arc::clone(&filter),
            Arc::clone(&done),
            Arc::clone(&stable),
            Arc::clone(&start),
        );
        thread::spawn(move || {
            let (mut checks, mut misses) = (0usize, 0usize);
            start.wait();
            while !done.load(Ordering::Acquire) {
                for k in stable.iter() {
                    checks += 1;
                    if !filter.contains(k) {
                        misses += 1;
                    }
                }
            }
            (checks, misses)
        })
    };
    let (inserts, resident) = churner.join().unwrap();
    let (checks, misses) = checker.join().unwrap();
    println!(
        "churn inserts {inserts}, stable checks {checks}, misses {misses}, final load {:.3}",
        filter.load_factor()
    );
    assert!(
        inserts > 10_000,
        "the churner barely ran: {inserts} inserts"
    );
    assert!(
        checks >= stable.len(),
        "the checker did not finish one pass"
    );
    assert_eq!(misses, 0, "false negatives under churn");
    assert_eq!(filter.len(), stable.len() + resident.len());
    assert!(stable
        .iter()
        .chain(resident.iter())
        .all(|k| filter.contains(k)));
}

/// Writers publish how far they got; readers check only items whose insert has returned (and
/// happened before the reader's look, through the published counter). Inserts fill the table to
/// 95 %, so the later ones run kick chains.
#[test]
fn inserted_items_are_found_by_readers_that_start_afterwards() {
    let seed = common::seed("publish and look");
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(100_000)
            .fingerprint_bits(12)
            .build()
            .unwrap(),
    );
    let total = (filter.slots() as f64 * 0.95) as usize;
    let keys = Arc::new(common::distinct_keys(seed, total));
    let published = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (filter, keys, published) = (
            Arc::clone(&filter),
            Arc::clone(&keys),
            Arc::clone(&published),
        );
        thread::spawn(move || {
            for (i, k) in keys.iter().enumerate() {
                filter.insert(k).unwrap();
                published.store(i + 1, Ordering::Release);
            }
        })
    };
    let reader = {
        let (filter, keys, published) = (
            Arc::clone(&filter),
            Arc::clone(&keys),
            Arc::clone(&published),
        );
        thread::spawn(move || {
            let mut rng = common::Rng::new(seed);
            let (mut checks, mut misses) = (0usize, 0usize);
            loop {
                let upto = published.load(Ordering::Acquire);
                if upto == 0 {
                    continue;
                }
                // The most recent items (most likely mid-kick) and random older ones.
                for i in (upto.saturating_sub(8)..upto)
                    .chain((0..8).map(|_| rng.below(upto as u64) as usize))
                {
                    checks += 1;
                    if !filter.contains(&keys[i]) {
                        misses += 1;
                    }
                }
                if upto == keys.len() {
                    return (checks, misses);
                }
            }
        })
    };
    writer.join().unwrap();
    let (checks, misses) = reader.join().unwrap();
    println!(
        "{checks} checks, {misses} misses, load {:.3}",
        filter.load_factor()
    );
    assert_eq!(misses, 0);
    assert_eq!(filter.len(), total);
}

/// Four writers on disjoint keys fill the table to 90 %, then each removes half of its keys.
#[test]
fn concurrent_writers_on_disjoint_keys_lose_nothing() {
    let seed = common::seed("disjoint writers");
    let threads = 4;
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(200_000)
            .fingerprint_bits(16)
            .build()
            .unwrap(),
    );
    let per_thread = (filter.slots() as f64 * 0.90) as usize / threads;
    let keys = Arc::new(common::distinct_keys(seed, per_thread * threads));
    let barrier = Arc::new(Barrier::new(threads));
    let run = |phase: fn(&CuckooFilter, &[u64])| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (filter, keys, barrier) =
                    (Arc::clone(&filter), Arc::clone(&keys), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    phase(&filter, &keys[t * per_thread..(t + 1) * per_thread]);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    };
    run(|f, mine| {
        for k in mine {
            f.insert(k).unwrap();
        }
    });
    assert_eq!(filter.len(), keys.len());
    assert!(
        keys.iter().all(|k| filter.contains(k)),
        "an inserted key is missing"
    );
    run(|f, mine| {
        for k in mine.iter().step_by(2) {
            assert!(f.remove(k));
        }
    });
    let kept: Vec<u64> = (0..threads)
        .flat_map(|t| {
            keys[t * per_thread..(t + 1) * per_thread]
                .iter()
                .skip(1)
                .step_by(2)
                .copied()
        })
        .collect();
    assert_eq!(filter.len(), kept.len());
    assert!(
        kept.iter().all(|k| filter.contains(k)),
        "a kept key is missing"
    );
}

/// Threads race `insert_unique` over the same keys: each key is added exactly once.
#[test]
fn racing_insert_unique_adds_each_key_once() {
    let seed = common::seed("racing insert_unique");
    // 32-bit fingerprints: a collision between two of these keys is a ~1e-5 event.
    let filter = CuckooFilter::builder()
        .capacity(40_000)
        .fingerprint_bits(32)
        .build()
        .unwrap();
    let keys = common::distinct_keys(seed, 30_000);
    common::assert_racing_insert_unique_adds_each_key_once(&filter, &keys, 3);
}

/// Readers look up stable items over and over while writers insert and remove *other* items
/// (never moving to full, so few kicks): in every layout, at widths whose buckets straddle
/// words. A write that holds only the stripe of a stable item's alternate bucket (an insert or
/// remove of another item there) must not make the stable item look absent to a reader whose
/// miss is validated against its primary bucket's stripe. Returns the misses seen.
fn stable_items_survive_neighbour_churn(
    layout: atomic_cuckoo::Layout,
    bits: u32,
    seed: u64,
    capacity: usize,
    run_for: Duration,
) -> usize {
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(capacity)
            .fingerprint_bits(bits)
            .layout(layout)
            .build()
            .unwrap(),
    );
    let keys = common::distinct_keys(seed, capacity * 50);
    let (stable, churn) = keys.split_at(filter.capacity() / 2);
    for k in stable {
        filter.insert(k).unwrap();
    }
    let stable: Arc<Vec<u64>> = Arc::new(stable.to_vec());
    let writers = 2;
    let readers = 2;
    let done = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(writers + readers));
    let churn: Arc<Vec<u64>> = Arc::new(churn.to_vec());
    let resident_limit = filter.capacity() / 3 / writers;
    let writer_handles: Vec<_> = (0..writers)
        .map(|t| {
            let (filter, churn, done, barrier) = (
                Arc::clone(&filter),
                Arc::clone(&churn),
                Arc::clone(&done),
                Arc::clone(&barrier),
            );
            thread::spawn(move || {
                let mine = churn.iter().skip(t).step_by(writers);
                let mut resident = VecDeque::new();
                barrier.wait();
                for k in mine.cycle() {
                    if done.load(Ordering::Relaxed) {
                        break;
                    }
                    if filter.insert(k).is_ok() {
                        resident.push_back(*k);
                    }
                    if resident.len() > resident_limit {
                        let old = resident.pop_front().unwrap();
                        assert!(filter.remove(&old));
                    }
                }
                for k in resident {
                    assert!(filter.remove(&k));
                }
            })
        })
        .collect();
    let reader_handles: Vec<_> = (0..readers)
        .map(|t| {
            let (filter, stable, done, barrier) = (
                Arc::clone(&filter),
                Arc::clone(&stable),
                Arc::clone(&done),
                Arc::clone(&barrier),
            );
            thread::spawn(move || {
                let (mut checks, mut misses) = (0usize, 0usize);
                barrier.wait();
                while !done.load(Ordering::Relaxed) {
                    for k in stable.iter().skip(t).step_by(readers) {
                        checks += 1;
                        if !filter.contains(k) {
                            misses += 1;
                        }
                        if filter.count(k) == 0 {
                            misses += 1;
                        }
                    }
                }
                (checks, misses)
            })
        })
        .collect();
    thread::sleep(run_for);
    done.store(true, Ordering::Relaxed);
    for h in writer_handles {
        h.join().unwrap();
    }
    let (mut checks, mut misses) = (0, 0);
    for h in reader_handles {
        let (c, m) = h.join().unwrap();
        checks += c;
        misses += m;
    }
    println!("{layout:?} f={bits}: {checks} checks, {misses} misses");
    // Quiescent: exactly the stable items, each found and counted.
    assert_eq!(filter.len(), stable.len(), "{layout:?} f={bits}: len");
    for k in stable.iter() {
        assert!(filter.contains(k), "{layout:?} f={bits}: stable item lost");
        assert!(
            filter.count(k) >= 1,
            "{layout:?} f={bits}: stable item count"
        );
    }
    misses
}

#[test]
fn compact_readers_never_miss_stable_items_while_neighbours_change() {
    let seed = common::seed("compact neighbour churn");
    let mut misses = 0;
    // Semi-sorted buckets of 28, 44, 60 and 76 bits: most straddle two or three words.
    for bits in [8, 12, 16, 20] {
        misses += stable_items_survive_neighbour_churn(
            atomic_cuckoo::Layout::Compact,
            bits,
            seed,
            200,
            Duration::from_millis(400),
        );
    }
    assert_eq!(misses, 0, "false negatives of stable items");
}

#[test]
fn packed_readers_never_miss_stable_items_while_neighbours_change() {
    let seed = common::seed("packed neighbour churn");
    let mut misses = 0;
    for (layout, bits) in [
        (atomic_cuckoo::Layout::Packed, 5),
        (atomic_cuckoo::Layout::Packed, 10),
        (atomic_cuckoo::Layout::Packed, 13),
        (atomic_cuckoo::Layout::Packed, 21),
        (atomic_cuckoo::Layout::OneWord, 12),
    ] {
        misses += stable_items_survive_neighbour_churn(
            layout,
            bits,
            seed,
            200,
            Duration::from_millis(300),
        );
    }
    assert_eq!(misses, 0, "false negatives of stable items");
}

/// Threads insert, look up and remove their own items in tiny tables that straddle words
/// (2 to 64 buckets), and in growable filters that start tiny and double under the threads.
/// An item is found from its insert until its remove, every remove of a present item succeeds,
/// and at quiescence `len` and `count` are exact.
fn own_items_stay_found(
    f: &CuckooFilter,
    threads: usize,
    per_thread: usize,
    seed: u64,
    exact: bool,
    ctx: &str,
) {
    let keys = common::keys_with_distinct_fingerprints(
        &(0..threads as u64)
            .map(|t| seed ^ ((t + 1) * 0x9E37))
            .collect::<Vec<_>>(),
        per_thread,
    );
    let barrier = Barrier::new(threads);
    let resident: Vec<Vec<u64>> = thread::scope(|s| {
        let handles: Vec<_> = keys
            .iter()
            .map(|mine| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let mut held: VecDeque<u64> = VecDeque::new();
                    let mut misses = 0usize;
                    for (i, k) in mine.iter().enumerate() {
                        if f.insert(k).is_ok() {
                            held.push_back(*k);
                        }
                        for h in held.iter().rev().take(4) {
                            if !f.contains(h) || f.count(h) == 0 {
                                misses += 1;
                            }
                        }
                        if i % 3 == 2 {
                            if let Some(old) = held.pop_front() {
                                assert!(f.remove(&old), "{ctx}: remove of a held item");
                            }
                        }
                    }
                    assert_eq!(misses, 0, "{ctx}: false negatives of held items");
                    held.into_iter().collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: usize = resident.iter().map(Vec::len).sum();
    assert_eq!(f.len(), total, "{ctx}: quiescent len");
    for k in resident.iter().flatten() {
        // Exact with 32-bit fingerprints (the keys' are distinct) and with a growable filter's
        // widest lanes (a false match is about 1e-8 a lookup); narrower ones may be shared.
        if exact {
            assert_eq!(f.count(k), 1, "{ctx}: quiescent count of {k}");
        } else {
            assert!(f.count(k) >= 1, "{ctx}: quiescent count of {k}");
        }
    }
}

#[test]
fn tiny_straddling_tables_keep_every_writers_items() {
    let seed = common::seed("tiny straddling tables");
    for layout in [
        atomic_cuckoo::Layout::Packed,
        atomic_cuckoo::Layout::Compact,
        atomic_cuckoo::Layout::OneWord,
    ] {
        for bits in [5, 7, 10, 12, 13, 17, 21, 31, 32] {
            for capacity in [4, 30, 200] {
                let f = CuckooFilter::builder()
                    .capacity(capacity)
                    .fingerprint_bits(bits)
                    .layout(layout)
                    .build()
                    .unwrap();
                let ctx = format!("{layout:?} f={bits} capacity {capacity} seed {seed}");
                own_items_stay_found(&f, 3, capacity, seed, bits == 32, &ctx);
            }
        }
    }
}

#[test]
fn growable_filters_keep_every_writers_items_while_doubling() {
    let seed = common::seed("growable filters");
    // The narrowest lanes (14-bit entries), middle ones, and the widest (31-bit entries).
    for rate in [0.01, 0.0001, 4e-8] {
        let f = CuckooFilter::builder()
            .capacity(16)
            .false_positive_rate(rate)
            .growable(true)
            .build()
            .unwrap();
        let ctx = format!("rate {rate} ({} bits) seed {seed}", f.fingerprint_bits());
        own_items_stay_found(&f, 3, 6_000, seed, f.fingerprint_bits() == 31, &ctx);
        assert!(f.doublings() > 3, "{ctx}: did not grow");
    }
}

/// A fixed table beyond 4 MiB (5M items at 1 %: 6.2 MiB of words), where inserts ask for both
/// buckets' lines before they take their stripes: filled to 90 % of its capacity, then one
/// writer churns its own items (inserts, duplicates, removes, up to 93 %: kick chains move the
/// stable items) while two readers check random stable items by `contains`, `contains_many`
/// and `count`; none may be missed, and `len` is exact once the threads are done.
#[test]
fn stable_items_survive_churn_in_a_fixed_table_beyond_4_mib() {
    let seed = common::seed("stable_items_survive_churn_in_a_fixed_table_beyond_4_mib");
    let filter = CuckooFilter::builder()
        .capacity(5_000_000)
        .false_positive_rate(0.01)
        .build()
        .unwrap();
    let words = filter.slots() * filter.fingerprint_bits() as usize / 8;
    assert!(words >= 4 << 20, "{} bytes of fingerprints", words);
    let capacity = filter.capacity();
    let stable = common::distinct_keys(seed, capacity * 9 / 10);
    let t0 = Instant::now();
    filter.insert_many(&stable).unwrap();
    let fill = t0.elapsed();
    let room = capacity * 3 / 100;
    let stop = AtomicBool::new(false);
    let (ops, checks) = thread::scope(|sc| {
        let writer = sc.spawn(|| {
            let mut rng = common::Rng::new(seed ^ 0x1000);
            let mut mine: Vec<u64> = Vec::new();
            let mut ops = 0usize;
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(1_200) {
                ops += 1;
                if mine.len() >= room || (!mine.is_empty() && rng.below(3) == 0) {
                    let x = mine.swap_remove(rng.below(mine.len() as u64) as usize);
                    assert!(
                        filter.remove(&x),
                        "seed {seed}: own item {x:#x} not removed"
                    );
                } else {
                    // Its own items only: a remove takes one of its own copies.
                    let x = rng.next_u64() | 1 << 63;
                    for _ in 0..1 + usize::from(rng.below(8) == 0) {
                        if filter.insert(&x).is_ok() {
                            mine.push(x);
                        }
                    }
                }
            }
            stop.store(true, Ordering::Relaxed);
            (ops, mine.len())
        });
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (filter, stable, stop) = (&filter, &stable, &stop);
                sc.spawn(move || {
                    let mut rng = common::Rng::new(seed ^ (0x2000 + r));
                    let (mut found, mut batch) = (Vec::new(), Vec::new());
                    let mut checks = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        batch.clear();
                        for _ in 0..256 {
                            let x = stable[rng.below(stable.len() as u64) as usize];
                            assert!(
                                filter.contains(&x),
                                "seed {seed}: reader {r}: {x:#x} missed"
                            );
                            batch.push(x);
                        }
                        common::assert_batch_found_by_contains_many_and_count(
                            &format!("seed {seed}: reader {r}"),
                            filter,
                            &batch,
                            &mut found,
                            &mut rng,
                        );
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        let mut checks = 0;
        for r in readers {
            match r.join() {
                Ok(n) => checks += n,
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    std::panic::resume_unwind(e);
                }
            }
        }
        let (ops, left) = writer.join().unwrap();
        assert_eq!(filter.len(), stable.len() + left, "seed {seed}");
        (ops, checks)
    });
    println!("seed {seed}: filled in {fill:?}; {ops} writer ops, {checks} reader batches");
    assert!(checks > 0, "seed {seed}: no reader batch ran");
    let mut found = Vec::new();
    filter.contains_many(&stable, &mut found);
    if let Some(i) = found.iter().position(|&b| !b) {
        panic!("seed {seed}: {:#x} missed when quiescent", stable[i]);
    }
}
