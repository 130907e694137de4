//! Growing filters: levels are added instead of failing, readers never miss an item, the
//! compound false-positive rate stays within the target.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;

use atomic_cuckoo::{BuildError, CuckooFilter, InsertError};

use crate::common;

/// From 1,000 items of capacity to 1,000,000 items, doubling: every insert succeeds, nothing is
/// missed, the measured rate is within the 1 % target, about log2(1000) + 1 levels.
#[test]
fn grows_from_a_thousand_to_a_million_items() {
    let seed = common::fixed_seed("grow 1k -> 1M", 0x6e0);
    let target = 0.01;
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .false_positive_rate(target)
        .expansion(2)
        .build()
        .unwrap();
    let n = 1_000_000;
    let probes = 1_000_000;
    let keys = common::distinct_keys(seed, n + probes);
    for (i, k) in keys[..n].iter().enumerate() {
        if let Err(e) = filter.insert(k) {
            panic!("insert {i} failed: {e}");
        }
    }
    assert_eq!(filter.len(), n);
    let missed = keys[..n].iter().filter(|k| !filter.contains(*k)).count();
    assert_eq!(missed, 0, "false negatives after growth");

    let hits = keys[n..].iter().filter(|k| filter.contains(*k)).count();
    let measured = hits as f64 / probes as f64;
    let predicted = filter.false_positive_rate();
    println!("level | items | slots | bits | bits/item | expected rate");
    for (i, l) in filter.level_stats().iter().enumerate() {
        println!(
            "{i:5} | {:7} | {:7} | {:4} | {:9.2} | {:.2e}",
            l.len,
            l.capacity,
            l.fingerprint_bits,
            l.memory_usage as f64 * 8.0 / l.len.max(1) as f64,
            l.false_positive_rate
        );
    }
    println!(
        "{} levels, {:.2} bits per item overall, measured rate {measured:.3e}, predicted {predicted:.3e}",
        filter.levels(),
        filter.memory_usage() as f64 * 8.0 / n as f64
    );
    assert!(
        measured <= target,
        "measured {measured} over target {target}"
    );
    assert!(predicted <= target);
    assert!(
        measured <= predicted * 1.3 && measured >= predicted * 0.5,
        "measured {measured:e} vs predicted {predicted:e}"
    );
    // Capacity doubles: 1000 * (2^L - 1) >= 1e6 takes L = 10; log2(1000) + 1 = 10.97.
    assert!(
        (10..=11).contains(&filter.levels()),
        "{} levels",
        filter.levels()
    );
}

/// Two writers insert disjoint keys into a filter that starts tiny and grows many times, while
/// a third thread checks keys whose insert has already returned.
#[test]
fn readers_never_miss_items_while_writers_grow_the_filter() {
    let seed = common::seed("concurrent growth");
    let filter = CuckooFilter::builder()
        .capacity(500)
        .expansion(2)
        .build()
        .unwrap();
    let per_writer = 150_000;
    let keys = common::distinct_keys(seed, 2 * per_writer);
    let progress: [AtomicUsize; 2] = Default::default();
    let barrier = Barrier::new(3);
    let (filter, keys, progress, barrier) = (&filter, &keys, &progress, &barrier);
    let (checks, misses) = thread::scope(|s| {
        for w in 0..2 {
            s.spawn(move || {
                barrier.wait();
                for (i, k) in keys[w * per_writer..(w + 1) * per_writer]
                    .iter()
                    .enumerate()
                {
                    filter.insert(k).unwrap();
                    progress[w].store(i + 1, Ordering::Release);
                }
            });
        }
        let reader = s.spawn(move || {
            barrier.wait();
            let mut rng = common::Rng::new(seed);
            let (mut checks, mut misses) = (0usize, 0usize);
            loop {
                let done: Vec<usize> = progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
                for (w, &upto) in done.iter().enumerate() {
                    if upto == 0 {
                        continue;
                    }
                    let base = w * per_writer;
                    let recent = upto.saturating_sub(4)..upto;
                    let older = (0..4).map(|_| rng.below(upto as u64) as usize);
                    for i in recent.chain(older) {
                        checks += 1;
                        if !filter.contains(&keys[base + i]) {
                            misses += 1;
                        }
                    }
                }
                if done.iter().all(|&d| d == per_writer) {
                    return (checks, misses);
                }
            }
        });
        reader.join().unwrap()
    });
    println!(
        "{checks} checks, {misses} misses, {} levels",
        filter.levels()
    );
    assert_eq!(misses, 0);
    assert!(filter.levels() >= 8);
    assert_eq!(filter.len(), 2 * per_writer);
    assert!(keys.iter().all(|k| filter.contains(k)));
}

/// Racing `insert_unique` while the filter grows: every key added exactly once.
#[test]
fn racing_insert_unique_adds_each_key_once_across_growth() {
    let seed = common::seed("insert_unique across growth");
    let filter = CuckooFilter::builder()
        .capacity(200)
        .fingerprint_bits(32)
        .expansion(2)
        .build()
        .unwrap();
    let keys = common::distinct_keys(seed, 20_000);
    common::assert_racing_insert_unique_adds_each_key_once(&filter, &keys, 3);
    println!("{} levels", filter.levels());
    assert!(filter.levels() > 3, "the filter did not grow while racing");
}

/// At the level limit, inserts fail with a distinct error and nothing is lost.
#[test]
fn max_levels_reached_is_a_clear_error_and_loses_nothing() {
    let filter = CuckooFilter::builder()
        .capacity(100)
        .expansion(1)
        .max_levels(3)
        .build()
        .unwrap();
    let mut stored = Vec::new();
    let (refused, err) = (0u64..)
        .find_map(|k| match filter.insert(&k) {
            Ok(()) => {
                stored.push(k);
                None
            }
            Err(e) => Some((k, e)),
        })
        .unwrap();
    assert_eq!(err, InsertError::MaxLevelsReached { levels: 3 });
    assert!(err.to_string().contains('3'));
    assert_eq!(filter.levels(), 3);
    assert_eq!(filter.len(), stored.len());
    assert!(
        stored.len() >= 300,
        "only {} stored in 3 levels of 100",
        stored.len()
    );
    assert!(stored.iter().all(|k| filter.contains(k)));
    // The same item again: still the same error, still nothing lost.
    assert_eq!(
        filter.insert(&refused),
        Err(InsertError::MaxLevelsReached { levels: 3 })
    );
    assert_eq!(filter.len(), stored.len());
}

#[test]
fn a_fixed_filter_reports_full_not_max_levels() {
    let filter = CuckooFilter::builder().capacity(50).build().unwrap();
    let err = (0u64..).find_map(|k| filter.insert(&k).err()).unwrap();
    assert_eq!(err, InsertError::Full);
    assert_eq!(filter.levels(), 1);
}

#[test]
fn remove_takes_the_newest_copy_and_count_sees_all_levels() {
    let filter = CuckooFilter::builder()
        .capacity(100)
        .fingerprint_bits(32)
        .expansion(2)
        .build()
        .unwrap();
    filter.insert("x").unwrap();
    let mut k = 0u64;
    while filter.levels() == 1 {
        filter.insert(&k).unwrap();
        k += 1;
    }
    filter.insert("x").unwrap(); // goes to level 1
    assert_eq!(filter.count("x"), 2);
    let before: Vec<usize> = filter.level_stats().iter().map(|l| l.len).collect();
    assert!(filter.remove("x"));
    let after: Vec<usize> = filter.level_stats().iter().map(|l| l.len).collect();
    assert_eq!(after[0], before[0], "the old level kept its copy");
    assert_eq!(after[1], before[1] - 1, "the newest level lost one");
    assert_eq!(filter.count("x"), 1);
    assert!(filter.contains("x"));
    assert!(filter.remove("x") && !filter.contains("x"));
}

#[test]
fn clear_keeps_the_added_levels_empty() {
    let filter = CuckooFilter::builder()
        .capacity(100)
        .expansion(2)
        .build()
        .unwrap();
    for k in 0..2_000u32 {
        filter.insert(&k).unwrap();
    }
    let (levels, memory) = (filter.levels(), filter.memory_usage());
    assert!(levels > 1);
    filter.clear();
    assert_eq!((filter.levels(), filter.memory_usage()), (levels, memory));
    let newest = filter.level_stats().pop().unwrap();
    assert_eq!(filter.capacity(), newest.capacity);
    assert!(filter.is_empty());
    assert!(filter.level_stats().iter().all(|l| l.len == 0));
    // Only false positives remain: far fewer than 1 % of the old items.
    let found = (0..2_000u32).filter(|k| filter.contains(k)).count();
    assert!(found < 20, "{found} of 2000 cleared items still found");
    // The newest level takes its capacity without growing.
    let refill = filter.capacity() as u32;
    for k in 0..refill {
        filter.insert(&k).unwrap();
    }
    assert!((0..refill).all(|k| filter.contains(&k)));
    assert_eq!(filter.levels(), levels);
}

#[test]
fn shrink_to_fit_frees_the_empty_newest_levels() {
    let mut filter = CuckooFilter::builder()
        .capacity(100)
        .expansion(2)
        .build()
        .unwrap();
    filter.insert_many(0..2_000u32).unwrap();
    let (levels, memory) = (filter.levels(), filter.memory_usage());
    filter.shrink_to_fit();
    assert_eq!(filter.levels(), levels, "no level is empty: none is freed");
    filter.clear();
    filter.shrink_to_fit();
    assert_eq!(filter.levels(), 1);
    let fresh = CuckooFilter::builder()
        .capacity(100)
        .expansion(2)
        .build()
        .unwrap();
    assert_eq!(filter.memory_usage(), fresh.memory_usage());
    assert!(
        filter.memory_usage() < memory,
        "{} of {memory} bytes",
        filter.memory_usage()
    );
    filter.insert_many(0..2_000u32).unwrap();
    assert_eq!(filter.levels(), levels, "grows again into the same shapes");
    assert!((0..2_000u32).all(|k| filter.contains(&k)));
}

#[test]
fn capacity_and_memory_reflect_growth() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .expansion(3)
        .build()
        .unwrap();
    let (cap0, mem0) = (filter.capacity(), filter.memory_usage());
    for k in 0..10_000u32 {
        filter.insert(&k).unwrap();
    }
    let stats = filter.level_stats();
    let (newest, older) = stats.split_last().unwrap();
    assert_eq!(
        filter.capacity(),
        older.iter().map(|l| l.len).sum::<usize>() + newest.capacity
    );
    assert!(filter.capacity() > 10_000 && filter.capacity() > cap0);
    assert!(filter.memory_usage() > mem0);
    // Factor 3: each level about three times the previous.
    for pair in stats.windows(2) {
        let ratio = pair[1].capacity as f64 / pair[0].capacity as f64;
        assert!((2.0..4.5).contains(&ratio), "level ratio {ratio}");
    }
}

#[test]
fn growth_settings_are_validated() {
    for levels in [0, 65, u32::MAX] {
        let err = CuckooFilter::builder()
            .expansion(2)
            .max_levels(levels)
            .build()
            .unwrap_err();
        assert_eq!(err, BuildError::InvalidMaxLevels { levels });
    }
    // A rate so small that the last level's share is out of reach of 32-bit fingerprints.
    let err = CuckooFilter::builder()
        .false_positive_rate(1e-8)
        .expansion(2)
        .max_levels(64)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, BuildError::UnreachableFalsePositiveRate { .. }),
        "{err:?}"
    );
    // Fine without growth.
    assert!(CuckooFilter::builder()
        .false_positive_rate(1e-8)
        .build()
        .is_ok());
}

/// Writers insert fresh keys and check them, readers check keys writers inserted, one thread
/// clears again and again (each clear once `per_clear` inserts were tried since the last): a key
/// inserted while no clear was running, and checked before the next clear started, is found,
/// by its writer and by the readers. Returns the checks that had to find their key.
fn clear_under_readers_and_writers(
    seed: u64,
    filter: &CuckooFilter,
    clears: usize,
    per_clear: usize,
) -> usize {
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;
    let started = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let inserted = AtomicUsize::new(0);
    let checked = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Keys inserted while no clear ran, with the clears started before.
    let published: Mutex<Vec<(u64, usize)>> = Mutex::new(Vec::new());
    thread::scope(|s| {
        for w in 0..2u64 {
            let (started, done, inserted, checked, stop, published) =
                (&started, &done, &inserted, &checked, &stop, &published);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let key = seed ^ (w << 48) ^ i;
                    i += 1;
                    let before = started.load(Ordering::SeqCst);
                    let clean = done.load(Ordering::SeqCst) == before;
                    // Attempts count: once the levels are full, inserts fail until the next clear.
                    inserted.fetch_add(1, Ordering::SeqCst);
                    if filter.insert(&key).is_err() {
                        continue;
                    }
                    let found = filter.contains(&key);
                    if clean && started.load(Ordering::SeqCst) == before {
                        assert!(found, "seed {seed:#x}: writer {w} missed {key:#x}");
                        checked.fetch_add(1, Ordering::Relaxed);
                        let mut p = published.lock().unwrap();
                        if p.len() < 4096 {
                            p.push((key, before));
                        } else {
                            let at = (key as usize) % p.len();
                            p[at] = (key, before);
                        }
                    }
                }
            });
        }
        for r in 0..2usize {
            let (started, checked, stop, published) = (&started, &checked, &stop, &published);
            s.spawn(move || {
                let mut n = r;
                while !stop.load(Ordering::SeqCst) {
                    let entry = {
                        let p = published.lock().unwrap();
                        (!p.is_empty()).then(|| p[n % p.len()])
                    };
                    n = n.wrapping_mul(31).wrapping_add(7);
                    let Some((key, before)) = entry else {
                        thread::yield_now();
                        continue;
                    };
                    let found = filter.contains(&key);
                    if started.load(Ordering::SeqCst) == before {
                        assert!(found, "seed {seed:#x}: reader {r} missed {key:#x}");
                        checked.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        let _stopper = StopOnDrop(&stop);
        for _ in 0..clears {
            let from = inserted.load(Ordering::SeqCst);
            while inserted.load(Ordering::SeqCst) < from + per_clear {
                thread::yield_now();
            }
            started.fetch_add(1, Ordering::SeqCst);
            filter.clear();
            done.fetch_add(1, Ordering::SeqCst);
        }
    });
    checked.load(Ordering::Relaxed)
}

/// Sets the flag when dropped: the other threads stop even if the clearing one panics.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Tiny growing tables (a few dozen slots per level, many levels, the last ones full between
/// clears): `clear` under readers and writers loses no key inserted after it.
#[test]
fn clear_under_readers_and_writers_on_tiny_tables() {
    let seed = common::seed("clear_under_readers_and_writers_on_tiny_tables");
    for (capacity, expansion, max_levels) in [(16, 1, 8), (64, 2, 6), (200, 2, 16)] {
        let filter = CuckooFilter::builder()
            .capacity(capacity)
            .expansion(expansion)
            .max_levels(max_levels)
            .build()
            .unwrap();
        let checked = clear_under_readers_and_writers(seed, &filter, 300, 3 * capacity);
        println!(
            "capacity {capacity}, expansion {expansion}: {} levels, {checked} checks",
            filter.levels()
        );
        assert!(checked > 0);
    }
}

/// A filter whose next level (over 2 MiB) is prepared ahead on a thread once the first is 90 %
/// full: clears while writers fill it past that, grow it, and readers read. No key inserted
/// after a clear is lost, and no prepared level is taken for a level of another shape.
#[test]
fn clear_while_a_level_is_prepared_ahead_loses_nothing() {
    let seed = common::seed("clear_while_a_level_is_prepared_ahead_loses_nothing");
    let filter = CuckooFilter::builder()
        .capacity(50_000)
        .expansion(32)
        .max_levels(3)
        .build()
        .unwrap();
    let checked = clear_under_readers_and_writers(seed, &filter, 30, 60_000);
    println!("{} levels, {checked} checks", filter.levels());
    assert!(checked > 0);
}

/// `shrink_to_fit` after a level was prepared ahead, and growth after it: the filter grows
/// again (the prepared level, for the old newest level's successor, is not used for another),
/// and finds every key.
#[test]
fn shrink_to_fit_with_a_level_prepared_then_growth_finds_every_key() {
    let mut filter = CuckooFilter::builder()
        .capacity(50_000)
        .expansion(32)
        .build()
        .unwrap();
    for round in 0..3u64 {
        let base = round << 40;
        let n = 200_000u64;
        filter.insert_many(base..base + n).unwrap();
        assert!(filter.levels() >= 2, "round {round}");
        let missed = (base..base + n).filter(|k| !filter.contains(k)).count();
        assert_eq!(missed, 0, "round {round}");
        filter.clear();
        filter.shrink_to_fit();
        assert_eq!(filter.levels(), 1, "round {round}");
        // Fill the single level to 95 %: its successor is prepared ahead; shrink drops it.
        filter.insert_many(base + n..base + n + 47_500).unwrap();
        filter.shrink_to_fit();
        let missed = (base + n..base + n + 47_500)
            .filter(|k| !filter.contains(k))
            .count();
        assert_eq!(missed, 0, "round {round}");
        filter.clear();
    }
}

/// A growing filter of a narrow width that promises its capacity (5 to 7 bits in every
/// layout, 4 bits in one-word buckets) adds no level before its first level holds
/// `capacity()` distinct items, for a few item sets each.
#[test]
fn a_narrow_growing_filter_adds_no_level_before_its_capacity() {
    use atomic_cuckoo::Layout;
    let seed = common::seed("narrow growing capacity");
    let widths = [(4, Layout::OneWord)].into_iter().chain(
        (5..=7).flat_map(|b| [Layout::Packed, Layout::Compact, Layout::OneWord].map(|l| (b, l))),
    );
    for (bits, layout) in widths {
        for capacity in [64usize, 1_000] {
            for set in 0..4u64 {
                let filter = CuckooFilter::builder()
                    .capacity(capacity)
                    .fingerprint_bits(bits)
                    .layout(layout)
                    .expansion(2)
                    .build()
                    .unwrap();
                let promised = filter.capacity();
                let set_seed = seed ^ (capacity as u64) << 16 ^ u64::from(bits) << 8 ^ set;
                for (i, key) in common::distinct_keys(set_seed, promised).iter().enumerate() {
                    filter.insert(key).unwrap();
                    assert_eq!(
                        filter.levels(),
                        1,
                        "bits={bits} {layout:?} capacity({capacity}): a level added at insert \
                         {i} of {promised} (item set {set_seed})"
                    );
                }
            }
        }
    }
}
