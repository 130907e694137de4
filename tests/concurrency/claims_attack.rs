//! Attacks on lock-free claims (an insert into a free lane of a fixed plain table takes one
//! compare-and-swap and no stripe) and on item counts kept in per-thread shards: every layout,
//! widths 4..=32, tiny tables whose buckets straddle words, filled to `Full`, churned, saved,
//! cloned and cleared while other threads insert and remove.
//!
//! Keys are chosen so that no two of them collide (same fingerprint in the same bucket pair):
//! then a key's `count` is exactly its copies, and a remove never takes another key's copy.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;

use atomic_cuckoo::{CuckooFilter, InsertError, Layout};

use crate::common::{self, Rng};

const LAYOUTS: [Layout; 3] = [Layout::Packed, Layout::OneWord, Layout::Compact];

fn build(layout: Layout, bits: u32, capacity: usize) -> Option<CuckooFilter> {
    CuckooFilter::builder()
        .capacity(capacity)
        .fingerprint_bits(bits)
        .layout(layout)
        .growable(false)
        .build()
        .ok()
}

/// Up to `n` keys from `seed`, no two of which collide in a filter built like `probe` (empty):
/// a key collides with another when, alone in the filter, it makes `contains` of the other
/// true.
fn non_colliding_keys(probe: &CuckooFilter, seed: u64, n: usize) -> Vec<u64> {
    let candidates = common::distinct_keys(seed, n);
    let mut clash = vec![Vec::new(); candidates.len()];
    for (j, y) in candidates.iter().enumerate() {
        probe.insert(y).expect("an empty filter takes one item");
        for (i, x) in candidates.iter().enumerate() {
            if i != j && probe.contains(x) {
                clash[i].push(j);
                clash[j].push(i);
            }
        }
        assert!(probe.remove(y));
    }
    assert_eq!(probe.len(), 0);
    let mut taken = vec![false; candidates.len()];
    let mut keys = Vec::new();
    for (i, &x) in candidates.iter().enumerate() {
        if clash[i].iter().all(|&j| !taken[j]) {
            taken[i] = true;
            keys.push(x);
        }
    }
    keys
}

/// The snapshot of `filter` loads back (its count matches its lanes), and so does its clone's.
fn assert_snapshots_consistent(at: &str, filter: &CuckooFilter) -> (CuckooFilter, CuckooFilter) {
    let bytes = filter.to_bytes();
    let loaded = CuckooFilter::from_bytes(&bytes)
        .unwrap_or_else(|e| panic!("{at}: a snapshot does not load back: {e:?}"));
    let copy = filter.clone();
    let copy_bytes = copy.to_bytes();
    let reloaded = CuckooFilter::from_bytes(&copy_bytes)
        .unwrap_or_else(|e| panic!("{at}: a clone's snapshot does not load back: {e:?}"));
    assert_eq!(copy.len(), reloaded.len(), "{at}: clone len vs its lanes");
    assert_eq!(
        loaded.len(),
        CuckooFilter::from_bytes(&bytes).unwrap().len()
    );
    (loaded, copy)
}

fn check_model(at: &str, filter: &CuckooFilter, model: &BTreeMap<u64, usize>) {
    let total: usize = model.values().sum();
    assert_eq!(filter.len(), total, "{at}: len");
    for (&k, &copies) in model {
        assert_eq!(filter.count(&k), copies, "{at}: count of {k:#x}");
        if copies > 0 {
            assert!(filter.contains(&k), "{at}: {k:#x} ({copies} copies) missed");
        }
    }
}

/// Single thread, every layout and width, tiny capacities: fill to the first error (a failed
/// insert changes nothing), remove everything one copy at a time, refill, hot keys, batches.
#[test]
fn serial_every_layout_width_tiny_capacity_fill_churn_hot_keys() {
    let seed = common::seed("serial_every_layout_width_tiny_capacity_fill_churn_hot_keys");
    let mut rng = Rng::new(seed);
    for layout in LAYOUTS {
        for bits in 4..=32u32 {
            for capacity in [1usize, 2, 3, 5, 7, 10, 13, 20, 33, 50] {
                let Some(filter) = build(layout, bits, capacity) else {
                    continue;
                };
                let at = format!("{layout:?} bits {bits} capacity {capacity}");
                let probe = build(layout, bits, capacity).unwrap();
                let keys = non_colliding_keys(&probe, rng.next_u64(), 4 * capacity + 16);
                let mut model: BTreeMap<u64, usize> = BTreeMap::new();
                // Fill to the first error.
                let mut failed = None;
                for &k in &keys {
                    match filter.insert(&k) {
                        Ok(()) => *model.entry(k).or_default() += 1,
                        Err(e) => {
                            failed = Some((k, e));
                            break;
                        }
                    }
                }
                check_model(&format!("{at} after fill ({failed:?})"), &filter, &model);
                if let Some((k, _)) = failed {
                    assert_eq!(filter.count(&k), 0, "{at}: the failed item was stored");
                }
                assert_snapshots_consistent(&at, &filter);
                // Hot keys: copies of one stored key until it fails.
                if let Some((&hot, _)) = model.iter().next() {
                    for _ in 0..12 {
                        match filter.insert(&hot) {
                            Ok(()) => *model.get_mut(&hot).unwrap() += 1,
                            Err(_) => break,
                        }
                    }
                    check_model(&format!("{at} after hot key"), &filter, &model);
                }
                // Churn: remove a random stored key, reinsert a random one.
                for round in 0..200 {
                    let stored: Vec<u64> = model
                        .iter()
                        .filter(|(_, &c)| c > 0)
                        .map(|(&k, _)| k)
                        .collect();
                    if !stored.is_empty() && rng.below(2) == 0 {
                        let k = stored[rng.below(stored.len() as u64) as usize];
                        assert!(filter.remove(&k), "{at} round {round}: remove of {k:#x}");
                        *model.get_mut(&k).unwrap() -= 1;
                    } else {
                        let k = keys[rng.below(keys.len() as u64) as usize];
                        if filter.insert(&k).is_ok() {
                            *model.entry(k).or_default() += 1;
                        } else {
                            check_model(
                                &format!("{at} round {round} failed insert"),
                                &filter,
                                &model,
                            );
                        }
                    }
                }
                check_model(&format!("{at} after churn"), &filter, &model);
                assert_snapshots_consistent(&at, &filter);
                // Empty it one copy at a time.
                for (&k, copies) in model.iter_mut() {
                    while *copies > 0 {
                        assert!(filter.remove(&k), "{at}: remove of {k:#x}");
                        *copies -= 1;
                    }
                }
                check_model(&format!("{at} emptied"), &filter, &model);
                // Batches: the items before the failing index are in, it and those after not.
                let batch: Vec<u64> = keys.iter().copied().take(2 * capacity + 8).collect();
                match filter.insert_many(&batch) {
                    Ok(()) => {
                        for &k in &batch {
                            *model.entry(k).or_default() += 1;
                        }
                    }
                    Err(e) => {
                        for &k in &batch[..e.index] {
                            *model.entry(k).or_default() += 1;
                        }
                    }
                }
                check_model(&format!("{at} after insert_many"), &filter, &model);
                filter.clear();
                assert_eq!(filter.len(), 0, "{at}: cleared");
                for &k in &batch {
                    assert_eq!(filter.count(&k), 0, "{at}: cleared, {k:#x} counted");
                }
            }
        }
    }
}

/// Configurations of the concurrent attacks: tiny tables of every layout, widths whose buckets
/// straddle words (Packed 5..15 bits), fill a word (4, 8, 16), one-word and compact.
fn tiny_configs() -> Vec<(Layout, u32, usize)> {
    let mut configs = Vec::new();
    for (layout, bits) in [
        (Layout::Packed, 4),
        (Layout::Packed, 5),
        (Layout::Packed, 7),
        (Layout::Packed, 8),
        (Layout::Packed, 12),
        (Layout::Packed, 13),
        (Layout::Packed, 16),
        (Layout::Packed, 20),
        (Layout::OneWord, 8),
        (Layout::OneWord, 12),
        (Layout::OneWord, 21),
        (Layout::Compact, 9),
        (Layout::Compact, 13),
    ] {
        for capacity in [10usize, 60, 300, 2000] {
            configs.push((layout, bits, capacity));
        }
    }
    configs
}

/// Runs `f` per configuration with its non-colliding keys.
fn for_each_config(seed: u64, mut f: impl FnMut(&str, &CuckooFilter, Vec<u64>, u64)) {
    let mut rng = Rng::new(seed);
    for (layout, bits, capacity) in tiny_configs() {
        let Some(filter) = build(layout, bits, capacity) else {
            continue;
        };
        let probe = build(layout, bits, capacity).unwrap();
        let pool = (3 * capacity).clamp(24, 900);
        let keys = non_colliding_keys(&probe, rng.next_u64(), pool);
        let at = format!("{layout:?} bits {bits} capacity {capacity}");
        f(&at, &filter, keys, rng.next_u64());
    }
}

/// Two churners (inserts, duplicates, removes, batches of their own keys, checking each
/// result against their own model), a stable inserter (keys never removed, published as
/// done), and a saver that clones and saves meanwhile: no false negative, removes of stored
/// keys succeed, a failed insert loses nothing, every snapshot loads back and holds every key
/// the stable inserter had finished before it started; exact `len` and `count` at the end.
#[test]
fn claims_against_churn_kicks_and_saves_on_tiny_tables() {
    let seed = common::seed("claims_against_churn_kicks_and_saves_on_tiny_tables");
    for_each_config(seed, |at, filter, keys, seed| {
        let quarter = keys.len() / 4;
        let (stable, rest) = keys.split_at(quarter);
        let (churn_a, churn_b) = rest.split_at(rest.len() / 2);
        let done = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let barrier = Barrier::new(4);
        let models: Vec<BTreeMap<u64, usize>> = thread::scope(|s| {
            let stable_thread = s.spawn(|| {
                barrier.wait();
                for (i, k) in stable.iter().enumerate() {
                    if filter.insert(k).is_err() {
                        break;
                    }
                    assert!(
                        filter.contains(k),
                        "{at}: stable {k:#x} missed after insert"
                    );
                    done.store(i + 1, Ordering::Release);
                }
                let mut model = BTreeMap::new();
                for &k in &stable[..done.load(Ordering::Relaxed)] {
                    model.insert(k, 1);
                }
                model
            });
            let churners: Vec<_> = [churn_a, churn_b]
                .into_iter()
                .enumerate()
                .map(|(t, own)| {
                    let (barrier, stop, done) = (&barrier, &stop, &done);
                    s.spawn(move || {
                        let mut rng = Rng::new(seed ^ (t as u64 + 1));
                        let mut model: BTreeMap<u64, usize> = BTreeMap::new();
                        barrier.wait();
                        for op in 0..1500 {
                            let k = own[rng.below(own.len() as u64) as usize];
                            let copies = model.get(&k).copied().unwrap_or(0);
                            match rng.below(8) {
                                0..=3 => match filter.insert(&k) {
                                    Ok(()) => {
                                        *model.entry(k).or_default() += 1;
                                        assert!(filter.contains(&k), "{at} t{t} op {op}: {k:#x} missed after insert");
                                    }
                                    Err(_) => {
                                        let d = done.load(Ordering::Acquire);
                                        for (&x, &c) in &model {
                                            if c > 0 {
                                                assert!(filter.contains(&x), "{at} t{t} op {op}: {x:#x} missed after a failed insert");
                                            }
                                        }
                                        for x in &stable[..d] {
                                            assert!(filter.contains(x), "{at} t{t} op {op}: stable {x:#x} missed after a failed insert");
                                        }
                                    }
                                },
                                4 | 5 if copies > 0 => {
                                    assert!(filter.remove(&k), "{at} t{t} op {op}: remove of stored {k:#x} ({copies} copies)");
                                    *model.get_mut(&k).unwrap() -= 1;
                                    if copies > 1 {
                                        assert!(filter.contains(&k), "{at} t{t} op {op}: {k:#x} missed with {} copies left", copies - 1);
                                    }
                                }
                                6 => {
                                    let n = 1 + rng.below(10) as usize;
                                    let batch: Vec<u64> =
                                        (0..n).map(|_| own[rng.below(own.len() as u64) as usize]).collect();
                                    let upto = match filter.insert_many(&batch) {
                                        Ok(()) => n,
                                        Err(e) => e.index,
                                    };
                                    for &x in &batch[..upto] {
                                        *model.entry(x).or_default() += 1;
                                    }
                                    for &x in &batch[..upto] {
                                        assert!(filter.contains(&x), "{at} t{t} op {op}: batch {x:#x} missed");
                                    }
                                }
                                _ => {
                                    for (&x, &c) in &model {
                                        if c > 0 {
                                            assert!(filter.contains(&x), "{at} t{t} op {op}: {x:#x} ({c}) missed");
                                        }
                                    }
                                }
                            }
                        }
                        stop.store(true, Ordering::Relaxed);
                        model
                    })
                })
                .collect();
            let saver = s.spawn(|| {
                barrier.wait();
                let mut round = 0u32;
                while !stop.load(Ordering::Relaxed) || round < 3 {
                    let d = done.load(Ordering::Acquire);
                    let (loaded, copy) = assert_snapshots_consistent(at, filter);
                    for k in &stable[..d] {
                        assert!(
                            loaded.contains(k),
                            "{at} save {round}: stable {k:#x} (done {d}) not in the snapshot"
                        );
                        assert!(
                            copy.contains(k),
                            "{at} save {round}: stable {k:#x} (done {d}) not in the clone"
                        );
                        assert!(
                            filter.contains(k),
                            "{at} save {round}: stable {k:#x} (done {d}) missed live"
                        );
                    }
                    let mut found = Vec::new();
                    filter.contains_many(&stable[..d], &mut found);
                    if let Some(i) = found.iter().position(|&f| !f) {
                        panic!(
                            "{at} save {round}: stable {:#x} (done {d}) missed by contains_many",
                            stable[i]
                        );
                    }
                    round += 1;
                }
            });
            let mut models = vec![stable_thread.join().unwrap()];
            models.extend(churners.into_iter().map(|h| h.join().unwrap()));
            saver.join().unwrap();
            models
        });
        let mut model = BTreeMap::new();
        for m in models {
            model.extend(m);
        }
        check_model(&format!("{at} quiescent"), filter, &model);
        assert_snapshots_consistent(at, filter);
    });
}

/// Inserters (single and batched) race a thread that clears and a thread that clones and
/// saves: every snapshot and clone loads back (its count is its lanes), and once quiet `len`
/// is exactly the lanes in use.
#[test]
fn claims_against_clear_clone_and_save_keep_counts_exact() {
    let seed = common::seed("claims_against_clear_clone_and_save_keep_counts_exact");
    for_each_config(seed, |at, filter, keys, seed| {
        let stop = AtomicBool::new(false);
        let barrier = Barrier::new(4);
        thread::scope(|s| {
            let writers: Vec<_> = (0..2)
                .map(|t| {
                    let (barrier, keys) = (&barrier, &keys);
                    s.spawn(move || {
                        let mut rng = Rng::new(seed ^ (t as u64 + 7));
                        barrier.wait();
                        for _ in 0..1500 {
                            let k = keys[rng.below(keys.len() as u64) as usize];
                            match rng.below(4) {
                                0 | 1 => {
                                    let _ = filter.insert(&k);
                                }
                                2 => {
                                    let n = 1 + rng.below(20) as usize;
                                    let batch: Vec<u64> = (0..n)
                                        .map(|_| keys[rng.below(keys.len() as u64) as usize])
                                        .collect();
                                    let _ = filter.insert_many(&batch);
                                }
                                _ => {
                                    let _ = filter.remove(&k);
                                }
                            }
                        }
                    })
                })
                .collect();
            s.spawn(|| {
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    filter.clear();
                    thread::yield_now();
                }
            });
            s.spawn(|| {
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    assert_snapshots_consistent(at, filter);
                }
            });
            for w in writers {
                w.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        let (loaded, _) = assert_snapshots_consistent(at, filter);
        assert_eq!(loaded.len(), filter.len(), "{at}: quiescent len vs lanes");
        let counted: usize = keys.iter().map(|k| filter.count(k)).sum();
        assert_eq!(counted, filter.len(), "{at}: counts of the keys vs len");
    });
}

/// Inserters of disjoint keys into a tiny table, together far below its capacity, race
/// removers of their own keys: no insert fails (a claim that fills a lane between the locked
/// path's reads must not turn into `Full` or `ItemBucketsFull`).
#[test]
fn claims_do_not_make_inserts_fail_spuriously_below_capacity() {
    let seed = common::seed("claims_do_not_make_inserts_fail_spuriously_below_capacity");
    let mut rng = Rng::new(seed);
    for (layout, bits) in [
        (Layout::Packed, 12),
        (Layout::Packed, 13),
        (Layout::OneWord, 12),
        (Layout::Packed, 8),
    ] {
        for capacity in [40usize, 200, 2000] {
            let filter = build(layout, bits, capacity).unwrap();
            let probe = build(layout, bits, capacity).unwrap();
            let keys = non_colliding_keys(&probe, rng.next_u64(), capacity);
            // Half the capacity in all, in four disjoint parts.
            let per = (capacity / 2) / 4;
            let errors: Vec<(u64, InsertError)> = thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|t| {
                        let own = &keys[t * per..(t + 1) * per];
                        let filter = &filter;
                        s.spawn(move || {
                            let mut errors = Vec::new();
                            for _ in 0..200 {
                                for k in own {
                                    if let Err(e) = filter.insert(k) {
                                        errors.push((*k, e));
                                    }
                                }
                                for k in own {
                                    filter.remove(k);
                                }
                            }
                            errors
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap())
                    .collect()
            });
            assert!(
                errors.is_empty(),
                "{layout:?} bits {bits} capacity {capacity}: {} spurious failures at half load, first {:?}",
                errors.len(),
                errors[0]
            );
            assert_eq!(filter.len(), 0);
        }
    }
}

/// A table large enough for sixteen shards (so that a freeze waits on several busy counts):
/// three threads insert with single inserts and batches (one claim per batch), publishing how
/// many keys they finished; a saver saves and clones meanwhile. Every snapshot loads back (its
/// count is its lanes) and holds every key finished before the save started.
#[test]
fn saves_see_one_moment_with_claims_on_many_shards() {
    let seed = common::seed("saves_see_one_moment_with_claims_on_many_shards");
    for (repetition, (layout, bits)) in [(Layout::Packed, 12), (Layout::OneWord, 16)]
        .into_iter()
        .cycle()
        .take(12)
        .enumerate()
    {
        let seed = seed ^ (repetition as u64) << 40;
        let capacity = 1 << 20;
        let filter = build(layout, bits, capacity).unwrap();
        let at = format!("{layout:?} bits {bits} capacity {capacity} repetition {repetition}");
        let per = capacity * 3 / 10;
        let keys: Vec<Vec<u64>> = (0..3u64)
            .map(|t| common::distinct_keys(seed ^ (t * 0x9E37), per))
            .collect();
        let done: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        // How far each thread's inserts may have got: the end of the batch it is inserting.
        let started: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        let finished = AtomicUsize::new(0);
        thread::scope(|s| {
            for t in 0..3 {
                let (filter, keys, done, started, finished) =
                    (&filter, &keys[t], &done[t], &started[t], &finished);
                s.spawn(move || {
                    let mut rng = Rng::new(seed ^ t as u64);
                    let mut i = 0;
                    while i < keys.len() {
                        let n = if rng.below(2) == 0 {
                            1
                        } else {
                            1 + rng.below(200) as usize
                        };
                        let end = (i + n).min(keys.len());
                        started.store(end, Ordering::SeqCst);
                        if end - i == 1 {
                            filter.insert(&keys[i]).unwrap();
                        } else {
                            filter.insert_many(&keys[i..end]).unwrap();
                        }
                        i = end;
                        done.store(i, Ordering::Release);
                        if rng.below(64) == 0 {
                            thread::yield_now();
                        }
                    }
                    finished.fetch_add(1, Ordering::Release);
                });
            }
            s.spawn(|| {
                let mut round = 0;
                while finished.load(Ordering::Acquire) < 3 {
                    let before: Vec<usize> =
                        done.iter().map(|d| d.load(Ordering::Acquire)).collect();
                    let bytes = filter.to_bytes();
                    let loaded = CuckooFilter::from_bytes(&bytes).unwrap_or_else(|e| {
                        panic!("{at} save {round}: the snapshot does not load back: {e:?}")
                    });
                    let after: usize = started.iter().map(|d| d.load(Ordering::SeqCst)).sum();
                    assert!(
                        loaded.len() >= before.iter().sum::<usize>(),
                        "{at} save {round}: len {} below {before:?}",
                        loaded.len()
                    );
                    assert!(
                        loaded.len() <= after,
                        "{at} save {round}: len {} above {after}",
                        loaded.len()
                    );
                    for (t, &d) in before.iter().enumerate() {
                        // The last keys finished before the save, and a sample of the rest.
                        let recent = &keys[t][d.saturating_sub(3000)..d];
                        for k in recent.iter().chain(keys[t][..d].iter().step_by(97)) {
                            assert!(
                                loaded.contains(k),
                                "{at} save {round}: t{t} key {k:#x} (done {d}) not in the snapshot"
                            );
                        }
                    }
                    if round % 8 == 7 {
                        assert_snapshots_consistent(&at, &filter);
                    }
                    round += 1;
                }
                println!("{at}: {round} saves during the inserts");
            });
        });
        assert_eq!(filter.len(), 3 * per, "{at}: len");
        let (loaded, _) = assert_snapshots_consistent(&at, &filter);
        assert_eq!(loaded.len(), 3 * per);
    }
}

/// `insert_unique` racers on the same keys in a tiny table, while other threads claim lanes
/// of other keys and remove them again: never two `Ok(true)` for one key, and each key stored
/// at most once.
#[test]
fn racing_insert_unique_beside_claims_on_tiny_tables() {
    let seed = common::seed("racing_insert_unique_beside_claims_on_tiny_tables");
    for_each_config(seed, |at, filter, keys, seed| {
        let (unique, others) = keys.split_at(keys.len() / 3);
        let stop = AtomicBool::new(false);
        let barrier = Barrier::new(4);
        let results: Vec<Vec<Option<bool>>> = thread::scope(|s| {
            for t in 0..2u64 {
                let (barrier, stop) = (&barrier, &stop);
                s.spawn(move || {
                    let mut rng = Rng::new(seed ^ (t + 11));
                    let mut mine: Vec<u64> = Vec::new();
                    barrier.wait();
                    while !stop.load(Ordering::Relaxed) {
                        let k = others[rng.below(others.len() as u64) as usize];
                        if mine.len() < 8 && filter.insert(&k).is_ok() {
                            mine.push(k);
                        } else if let Some(k) = mine.pop() {
                            assert!(filter.remove(&k), "{at}: remove of a claimed {k:#x}");
                        }
                    }
                    for k in mine {
                        assert!(filter.remove(&k));
                    }
                });
            }
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        unique
                            .iter()
                            .map(|k| filter.insert_unique(k).ok())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let results = racers.into_iter().map(|h| h.join().unwrap()).collect();
            stop.store(true, Ordering::Relaxed);
            results
        });
        for (i, k) in unique.iter().enumerate() {
            let wins = results.iter().filter(|r| r[i] == Some(true)).count();
            assert!(wins <= 1, "{at}: {k:#x} added by {wins} racers");
            assert_eq!(filter.count(k), wins, "{at}: copies of {k:#x}");
        }
        let added = results
            .iter()
            .flatten()
            .filter(|r| **r == Some(true))
            .count();
        assert_eq!(filter.len(), added, "{at}: len");
    });
}
