//! Lookups in grown filters, concurrent: tiny growable filters, writers that double them and
//! churn (insert and remove their own items only), readers that check items inserted before
//! they started and never removed. Such an item must never be reported absent by `contains`
//! or by `contains_many`, whatever the writers do: kicks, doublings in progress, removes of
//! items alike it, copies of exhausted entries.
//!
//! Each test runs for a bounded time (a few seconds) and prints its seed.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use crate::common::growable as grown;
use crate::common::{distinct_keys, seed, Identity, Rng};
use atomic_cuckoo::{CuckooFilter, InsertError};

/// How long each configuration runs (the tests run two at a time on two cores).
const RUN: Duration = Duration::from_millis(1_500);

/// Inserts `n` fresh items, growing the filter; returns them.
fn stable_items<S: BuildHasher>(f: &CuckooFilter<S>, rng: &mut Rng, n: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let x = rng.next_u64();
        match f.insert(&x) {
            Ok(()) => out.push(x),
            Err(InsertError::ItemBucketsFull) => {}
            Err(e) => panic!("stable insert: {e:?}"),
        }
    }
    out
}

/// A reader's pass: every stable item by `contains`, then by `contains_many` over batches of
/// several lengths, mixed with absent items and duplicates (only the stable ones are asserted).
fn reader_pass<S: BuildHasher>(
    f: &CuckooFilter<S>,
    stable: &[u64],
    rng: &mut Rng,
    found: &mut Vec<bool>,
    who: &str,
) {
    for x in stable {
        assert!(
            f.contains(x),
            "{who}: stable {x:#x} reported absent by contains"
        );
    }
    f.contains_many(stable, found);
    if let Some(i) = found.iter().position(|&b| !b) {
        panic!(
            "{who}: stable {:#x} missed by contains_many (whole list)",
            stable[i]
        );
    }
    for len in [1usize, 63, 64, 65, 200] {
        // (item, must be found)
        let batch: Vec<(u64, bool)> = (0..len)
            .map(|i| match i % 4 {
                0 | 1 => (stable[rng.below(stable.len() as u64) as usize], true),
                2 => (rng.next_u64(), false),
                _ => (stable[(i * 7) % stable.len()], true),
            })
            .collect();
        f.contains_many(batch.iter().map(|&(x, _)| x), found);
        assert_eq!(found.len(), len);
        for (&(x, must), &got) in batch.iter().zip(found.iter()) {
            assert!(
                !must || got,
                "{who}: stable {x:#x} missed by contains_many (batch {len})"
            );
        }
    }
}

/// A writer: inserts its own fresh items (one at a time and through `insert_many`), keeps up to
/// `keep` of them, removes the others (its own copies only). Returns operations done.
fn churn<S: BuildHasher>(
    f: &CuckooFilter<S>,
    rng: &mut Rng,
    keep: usize,
    stop: &AtomicBool,
    who: &str,
) -> usize {
    let mut mine: Vec<u64> = Vec::new();
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        ops += 1;
        if mine.len() > keep || (!mine.is_empty() && rng.below(3) == 0) {
            let i = rng.below(mine.len() as u64) as usize;
            let x = mine.swap_remove(i);
            assert!(f.remove(&x), "{who}: own item {x:#x} not removed");
        } else if rng.below(8) == 0 {
            let batch: Vec<u64> = (0..rng.below(100) + 1).map(|_| rng.next_u64()).collect();
            match f.insert_many(&batch) {
                Ok(()) => mine.extend_from_slice(&batch),
                Err(e) => mine.extend_from_slice(&batch[..e.index]),
            }
        } else {
            let x = rng.next_u64();
            // A duplicate now and then: two copies, removed one at a time.
            let times = 1 + usize::from(rng.below(10) == 0);
            for _ in 0..times {
                if f.insert(&x).is_ok() {
                    mine.push(x);
                }
            }
        }
    }
    ops
}

/// Runs `writers` churning threads and `readers` checking threads on `f` for `RUN`.
fn stress<S: BuildHasher + Sync>(
    f: &CuckooFilter<S>,
    stable: &[u64],
    s: u64,
    writers: usize,
    readers: usize,
    keep: usize,
    what: &str,
) {
    let stop = AtomicBool::new(false);
    let passes = AtomicUsize::new(0);
    let start = Barrier::new(writers + readers);
    let ops: usize = std::thread::scope(|sc| {
        let ws: Vec<_> = (0..writers)
            .map(|w| {
                let (stop, start) = (&stop, &start);
                sc.spawn(move || {
                    let mut rng = Rng::new(s ^ (0x1000 + w as u64));
                    start.wait();
                    churn(f, &mut rng, keep, stop, &format!("{what} writer {w}"))
                })
            })
            .collect();
        let rs: Vec<_> = (0..readers)
            .map(|r| {
                let (stop, start, passes) = (&stop, &start, &passes);
                sc.spawn(move || {
                    let mut rng = Rng::new(s ^ (0x2000 + r as u64));
                    let mut found = Vec::new();
                    let who = format!("{what} reader {r}");
                    start.wait();
                    let t0 = Instant::now();
                    while t0.elapsed() < RUN {
                        reader_pass(f, stable, &mut rng, &mut found, &who);
                        passes.fetch_add(1, Ordering::Relaxed);
                    }
                    stop.store(true, Ordering::Relaxed);
                })
            })
            .collect();
        for r in rs {
            if let Err(e) = r.join() {
                stop.store(true, Ordering::Relaxed);
                std::panic::resume_unwind(e);
            }
        }
        ws.into_iter().map(|w| w.join().unwrap()).sum()
    });
    println!(
        "{what}: {} doublings, {} reader passes, {ops} writer ops",
        f.doublings(),
        passes.load(Ordering::Relaxed)
    );
    assert!(passes.load(Ordering::Relaxed) > 0);
    // Quiescent: the exact check.
    let mut found = Vec::new();
    let mut rng = Rng::new(s);
    reader_pass(f, stable, &mut rng, &mut found, &format!("{what} after"));
}

/// Tiny grown filters of several shapes (narrow lanes, so collisions between the writers'
/// items and the stable ones are common), with stable items stored before and after several
/// doublings.
#[test]
fn stable_items_never_missed_under_churn_and_growth() {
    let s = seed("stable_items_never_missed_under_churn_and_growth");
    let mut rng = Rng::new(s);
    for (cap, rate, writers, readers) in [
        (1usize, 0.5, 2usize, 2usize),
        (2, 0.2, 2, 1),
        (3, 0.3, 1, 2),
        (1, 0.05, 3, 1),
        (2, 0.01, 1, 1),
    ] {
        let what = format!("cap {cap} rate {rate}");
        let f = grown(cap, rate);
        // Stable items stored at several sizes: some now, more after growth.
        let mut stable = stable_items(&f, &mut rng, 40);
        let mut filler = Vec::new();
        for _ in 0..3 {
            filler.extend(stable_items(&f, &mut rng, 60));
            stable.extend(stable_items(&f, &mut rng, 40));
        }
        // The filler items were only there to grow the filter: removing them (they are our own)
        // leaves the stable items spread over a grown table.
        for x in &filler {
            assert!(f.remove(x));
        }
        println!(
            "{what}: {} stable items, {} doublings",
            stable.len(),
            f.doublings()
        );
        let keep = 400;
        stress(&f, &stable, s, writers, readers, keep, &what);
    }
}

/// Hot keys: a few stable items, each inserted once at a different size of the table;
/// writers insert and remove items with the *same* hash, or the same high word and top bits
/// of the low word as some stable item (alike in many of their bits), so their removes keep
/// taking matching copies, and a filler thread keeps the table doubling. The stable items
/// must stay found; `count` of a stable item must stay at least 1 (it has a copy throughout).
#[test]
fn hot_keys_with_copies_at_many_sizes_stay_found() {
    let s = seed("hot_keys_with_copies_at_many_sizes_stay_found");
    let mut rng = Rng::new(s);
    for (cap, rate) in [(1usize, 0.05), (2, 0.2), (4, 0.5)] {
        let what = format!("hot: cap {cap} rate {rate}");
        let f = CuckooFilter::builder()
            .capacity(cap)
            .false_positive_rate(rate)
            .growable(true)
            .hasher(Identity)
            .build()
            .unwrap();
        // Stable hot items, one per growth stage.
        let mut stable = Vec::new();
        for stage in 0..4 {
            let y = rng.next_u64();
            f.insert(&y).unwrap();
            stable.push(y);
            let target = f.doublings() + 1 + stage;
            while f.doublings() < target {
                let _ = f.insert(&rng.next_u64());
            }
        }
        // Items alike a stable one: the same hash, or the same high word and the low word's
        // top 9 bits, the rest random.
        let twin = |rng: &mut Rng, y: u64| -> u64 {
            let keep_low = rng.below(2) == 0; // the exact hash, or a narrower-only twin
            if keep_low {
                y
            } else {
                (y & 0xFFFF_FFFF_FF80_0000) | (rng.next_u64() & 0x007F_FFFF)
            }
        };
        let stop = AtomicBool::new(false);
        let passes = AtomicUsize::new(0);
        let stable = &stable;
        let f = &f;
        let what = what.as_str();
        std::thread::scope(|sc| {
            let churners: Vec<_> = (0..2u64)
                .map(|w| {
                    let stop = &stop;
                    sc.spawn(move || {
                        let mut rng = Rng::new(s ^ (0x3000 + w));
                        let mut mine = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            if mine.len() >= 3 || (!mine.is_empty() && rng.below(2) == 0) {
                                let i = rng.below(mine.len() as u64) as usize;
                                let x: u64 = mine.swap_remove(i);
                                assert!(f.remove(&x), "churner {w}: own {x:#x} not removed");
                            } else {
                                let y = stable[rng.below(stable.len() as u64) as usize];
                                let x = twin(&mut rng, y);
                                if f.insert(&x).is_ok() {
                                    mine.push(x);
                                }
                            }
                        }
                        for x in mine {
                            assert!(f.remove(&x));
                        }
                    })
                })
                .collect();
            let filler = {
                let stop = &stop;
                sc.spawn(move || {
                    // Grows the filter (its own items, removed in bulk now and then).
                    let mut rng = Rng::new(s ^ 0x4000);
                    let mut mine = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let x = rng.next_u64();
                        match f.insert(&x) {
                            Ok(()) => mine.push(x),
                            // A growable filter refuses only repeats of a hot key.
                            Err(InsertError::ItemBucketsFull) => {}
                            Err(e) => panic!("filler: {e}"),
                        }
                        if mine.len() > 30_000 {
                            for x in mine.drain(..) {
                                assert!(f.remove(&x));
                            }
                        }
                    }
                })
            };
            let reader = {
                let (stop, passes) = (&stop, &passes);
                sc.spawn(move || {
                    let mut found = Vec::new();
                    let batch: Vec<u64> = stable.iter().cycle().take(130).copied().collect();
                    let t0 = Instant::now();
                    while t0.elapsed() < RUN {
                        for y in stable {
                            assert!(f.contains(y), "{what}: stable {y:#x} missed");
                            assert!(f.count(y) >= 1, "{what}: stable {y:#x} counted 0");
                        }
                        f.contains_many(&batch, &mut found);
                        if let Some(i) = found.iter().position(|&b| !b) {
                            panic!("{what}: stable {:#x} missed by contains_many", batch[i]);
                        }
                        passes.fetch_add(1, Ordering::Relaxed);
                    }
                    stop.store(true, Ordering::Relaxed);
                })
            };
            let r = reader.join();
            stop.store(true, Ordering::Relaxed);
            for c in churners {
                c.join().unwrap();
            }
            filler.join().unwrap();
            if let Err(e) = r {
                std::panic::resume_unwind(e);
            }
        });
        println!(
            "{what}: {} doublings, {} reader passes",
            f.doublings(),
            passes.load(Ordering::Relaxed)
        );
        for y in stable {
            assert!(f.contains(y));
            assert!(
                f.count(y) >= 1,
                "{what}: all twins removed, stable copy left"
            );
        }
    }
}

/// Writers publish items (after `insert_many`/`insert` returned) and never remove them;
/// readers check every item published so far with `contains_many` and `contains`, while the
/// filter keeps growing from a single-item first level.
#[test]
fn published_items_found_while_insert_many_grows_the_filter() {
    let s = seed("published_items_found_while_insert_many_grows_the_filter");
    for (cap, rate) in [(1usize, 0.5), (1, 0.01), (2, 0.05)] {
        let what = format!("publish: cap {cap} rate {rate}");
        let f = grown(cap, rate);
        let published: Mutex<Vec<u64>> = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let what = what.as_str();
        std::thread::scope(|sc| {
            let writers: Vec<_> = (0..2u64)
                .map(|w| {
                    let (f, published, stop) = (&f, &published, &stop);
                    sc.spawn(move || {
                        let mut rng = Rng::new(s ^ (0x5000 + w));
                        let mut n = 0usize;
                        while !stop.load(Ordering::Relaxed) && n < 400_000 {
                            let batch: Vec<u64> =
                                (0..rng.below(130) + 1).map(|_| rng.next_u64()).collect();
                            let done = match f.insert_many(&batch) {
                                Ok(()) => batch.len(),
                                Err(e) => e.index,
                            };
                            n += done;
                            published.lock().unwrap().extend_from_slice(&batch[..done]);
                        }
                    })
                })
                .collect();
            let reader = {
                let (f, published, stop) = (&f, &published, &stop);
                sc.spawn(move || {
                    let mut found = Vec::new();
                    let t0 = Instant::now();
                    let mut rounds = 0;
                    while t0.elapsed() < RUN {
                        let seen: Vec<u64> = published.lock().unwrap().clone();
                        f.contains_many(&seen, &mut found);
                        if let Some(i) = found.iter().position(|&b| !b) {
                            panic!("{what}: published {:#x} missed by contains_many", seen[i]);
                        }
                        for x in seen.iter().rev().take(2_000) {
                            assert!(f.contains(x), "{what}: published {x:#x} missed");
                        }
                        rounds += 1;
                    }
                    stop.store(true, Ordering::Relaxed);
                    rounds
                })
            };
            let rounds = reader.join();
            stop.store(true, Ordering::Relaxed);
            for w in writers {
                w.join().unwrap();
            }
            let rounds = rounds.unwrap_or_else(|e| std::panic::resume_unwind(e));
            println!(
                "{what}: {} doublings, {rounds} reader rounds",
                f.doublings()
            );
        });
        let all = published.into_inner().unwrap();
        let mut found = Vec::new();
        f.contains_many(&all, &mut found);
        assert!(found.iter().all(|&b| b), "{what}: quiescent contains_many");
    }
}

/// Snapshots and clones taken while writers churn and grow the filter hold every stable item,
/// and answer exactly (`contains == count > 0`, `contains_many == contains`) once restored.
#[test]
fn snapshots_and_clones_during_churn_hold_stable_items() {
    let s = seed("snapshots_and_clones_during_churn_hold_stable_items");
    let mut rng = Rng::new(s);
    let f = grown(1, 0.3);
    let stable = stable_items(&f, &mut rng, 300);
    let probes: Vec<u64> = (0..5_000).map(|_| rng.next_u64()).collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let (f, stop) = (&f, &stop);
                sc.spawn(move || {
                    let mut rng = Rng::new(s ^ (0x6000 + w));
                    churn(f, &mut rng, 3_000, stop, &format!("snapshot writer {w}"))
                })
            })
            .collect();
        let t0 = Instant::now();
        let mut snaps = 0;
        while t0.elapsed() < RUN {
            let copies = [CuckooFilter::from_bytes(&f.to_bytes()).unwrap(), f.clone()];
            for (k, g) in copies.iter().enumerate() {
                let what = format!(
                    "snapshot {snaps} ({}) of {} doublings",
                    ["bytes", "clone"][k],
                    g.doublings()
                );
                for y in &stable {
                    assert!(g.contains(y), "{what}: stable {y:#x} missing");
                }
                let mut found = Vec::new();
                g.contains_many(&probes, &mut found);
                for (p, &got) in probes.iter().zip(&found) {
                    assert_eq!(got, g.contains(p), "{what}: {p:#x}");
                    assert_eq!(got, g.count(p) > 0, "{what}: {p:#x}");
                }
            }
            snaps += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let ops: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
        println!(
            "{snaps} snapshots, {ops} writer ops, {} doublings",
            f.doublings()
        );
    });
}

/// Table bytes from which a grown filter's lookups ask for their second bucket's line before
/// they test the first, and its inserts for both lines (`PREFETCH_BYTES` in `growth::table`).
const BEYOND_CACHES: usize = 4 << 20;

/// Sets a flag when dropped (when a thread ends, also by a panic).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Bytes of a growable filter's table: its lanes, each one bit more than its fingerprint.
fn table_bytes<S>(f: &CuckooFilter<S>) -> usize {
    f.slots() * (f.fingerprint_bits() as usize + 1) / 8
}

/// A filter at 1 % from 1,000 items grown to just below its 12th doubling (2.05M items, the
/// first table beyond 4 MiB: 7.7 MiB), then one writer inserts fresh items through that
/// doubling (lookups read split and unsplit buckets), finishes it, and keeps inserting and
/// churning its own items while the lookups ask for their second bucket early. Two readers
/// check items stored before they started, the pre-grown ones and every one the writer had
/// published, by `contains`, `contains_many` and `count`: none may be missed. The early reads
/// must have been checked (a phase with the table beyond 4 MiB and no doubling splitting).
#[test]
fn items_stay_found_while_lookups_ask_early_for_the_second_bucket_of_a_table_beyond_4_mib() {
    const SPLIT: Duration = Duration::from_millis(500);
    const EARLY: Duration = Duration::from_millis(1_200);
    const FRESH: usize = 600_000;
    let s = seed(
        "items_stay_found_while_lookups_ask_early_for_the_second_bucket_of_a_table_beyond_4_mib",
    );
    let t0 = Instant::now();
    let f = grown(1_000, 0.01);
    let mut stable = distinct_keys(s, 2_000_000);
    f.insert_many(&stable).unwrap();
    // Up to a few thousand items before the 12th doubling (unless a failed search began it).
    let mut rng = Rng::new(s ^ 0x7000);
    while f.doublings() < 12 && f.capacity().saturating_sub(f.len()) > 3_000 {
        let x = rng.next_u64() | 1 << 63;
        if f.insert(&x).is_ok() {
            stable.push(x);
        }
    }
    assert!(
        table_bytes(&f) < BEYOND_CACHES || f.doublings() >= 12,
        "seed {s}: {f:?}"
    );
    let fill = t0.elapsed();
    // The writer's fresh items (top bit clear, second bit set: none is a stable one), the
    // ones it stored, and how many it has published.
    let fresh: Vec<u64> = distinct_keys(s ^ 0x5eed, FRESH)
        .into_iter()
        .map(|x| (x & !(1 << 63)) | 1 << 62)
        .collect();
    let stored: Vec<AtomicBool> = (0..FRESH).map(|_| AtomicBool::new(false)).collect();
    let published = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Checks done while the doubling splits, and with early reads.
    let (splitting, early) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|sc| {
        let writer = sc.spawn(|| {
            let _stop = SetOnDrop(&stop);
            let mut rng = Rng::new(s ^ 0x1000);
            let mut next = 0;
            let insert_fresh = |next: &mut usize| {
                if *next < FRESH && f.insert(&fresh[*next]).is_ok() {
                    stored[*next].store(true, Ordering::Relaxed);
                }
                *next += 1;
                // Release: the stored flags (and the inserts) before it.
                published.store((*next).min(FRESH), Ordering::Release);
            };
            while f.doublings() < 12 && next < FRESH {
                insert_fresh(&mut next);
            }
            let begun = Instant::now();
            while f.is_doubling() && begun.elapsed() < SPLIT && next < FRESH {
                insert_fresh(&mut next);
            }
            f.finish_doubling();
            let mut mine = Vec::new();
            let begun = Instant::now();
            while begun.elapsed() < EARLY {
                insert_fresh(&mut next);
                // Churn: the writer's own items, inserted and removed (duplicates now and then).
                if mine.len() > 2_000 || (!mine.is_empty() && rng.below(3) == 0) {
                    let x: u64 = mine.swap_remove(rng.below(mine.len() as u64) as usize);
                    assert!(f.remove(&x), "seed {s}: own item {x:#x} not removed");
                } else {
                    let x = rng.next_u64() & !(3 << 62);
                    for _ in 0..1 + usize::from(rng.below(8) == 0) {
                        if f.insert(&x).is_ok() {
                            mine.push(x);
                        }
                    }
                }
            }
        });
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (stable, fresh, stored) = (&stable, &fresh, &stored);
                let (published, stop) = (&published, &stop);
                let (splitting, early) = (&splitting, &early);
                let f = &f;
                sc.spawn(move || {
                    let mut rng = Rng::new(s ^ (0x2000 + r));
                    let mut found = Vec::new();
                    let mut batch = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        // Acquire: every item published so far is stored.
                        let n = published.load(Ordering::Acquire);
                        let (k, doubling) = (f.doublings(), f.is_doubling());
                        batch.clear();
                        for i in 0..256 {
                            let x = if n > 0 && i % 2 == 1 {
                                let j = rng.below(n as u64) as usize;
                                if !stored[j].load(Ordering::Relaxed) {
                                    continue;
                                }
                                fresh[j]
                            } else {
                                stable[rng.below(stable.len() as u64) as usize]
                            };
                            assert!(
                                f.contains(&x),
                                "seed {s}: reader {r}: {x:#x} missed ({k} doublings, \
                                 splitting {doubling})"
                            );
                            batch.push(x);
                        }
                        crate::common::assert_batch_found_by_contains_many_and_count(
                            &format!("seed {s}: reader {r}"),
                            f,
                            &batch,
                            &mut found,
                            &mut rng,
                        );
                        if doubling {
                            splitting.fetch_add(1, Ordering::Relaxed);
                        } else if k >= 12 && !f.is_doubling() {
                            early.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for r in readers {
            if let Err(e) = r.join() {
                stop.store(true, Ordering::Relaxed);
                std::panic::resume_unwind(e);
            }
        }
        writer.join().unwrap();
    });
    let (splitting, early) = (splitting.into_inner(), early.into_inner());
    println!(
        "seed {s}: filled in {fill:?}; {} doublings, {} MiB table, {} of {FRESH} fresh items \
         published; reader batches: {splitting} while splitting, {early} with early reads",
        f.doublings(),
        table_bytes(&f) >> 20,
        published.load(Ordering::Relaxed),
    );
    assert!(table_bytes(&f) >= BEYOND_CACHES, "seed {s}");
    assert!(
        early > 0,
        "seed {s}: no lookup read a table beyond 4 MiB early"
    );
    // Quiescent: every stable and stored fresh item.
    let stored_fresh: Vec<u64> = fresh
        .iter()
        .zip(&stored)
        .filter(|(_, ok)| ok.load(Ordering::Relaxed))
        .map(|(&x, _)| x)
        .collect();
    let mut found = Vec::new();
    for items in [&stable, &stored_fresh] {
        f.contains_many(items.iter(), &mut found);
        if let Some(i) = found.iter().position(|&b| !b) {
            panic!("seed {s}: {:#x} missed when quiescent", items[i]);
        }
    }
}
