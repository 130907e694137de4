//! One-pass lookups over grown filters, concurrent: tiny grown filters, writers
//! that grow them and churn (insert and remove their own items only), readers that check items
//! inserted before they started and never removed. Such an item must never be reported absent
//! by `contains` or by `contains_many`, whatever the writers do: kicks, growth, removes that
//! take the newest matching copy (another item's, when fingerprints collide), copies of the
//! same key spread over several levels.
//!
//! Each test runs for a bounded time (a few seconds) and prints its seed.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use crate::common::{seed, Identity, Rng};
use atomic_cuckoo::{CuckooFilter, InsertError};

/// How long each configuration runs (the tests run two at a time on two cores).
const RUN: Duration = Duration::from_millis(1_500);

fn grown(capacity: usize, factor: u32, bits: Option<u32>, rate: Option<f64>) -> CuckooFilter {
    let b = CuckooFilter::builder()
        .capacity(capacity)
        .expansion(factor)
        .max_levels(64);
    let b = match (bits, rate) {
        (Some(bits), _) => b.fingerprint_bits(bits),
        (None, Some(rate)) => b.false_positive_rate(rate),
        _ => b,
    };
    b.build().unwrap()
}

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

/// Sets the flag when dropped: a reader holds one, so that its panic stops the writers too.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
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
        "{what}: {} levels, {} reader passes, {ops} writer ops",
        f.levels(),
        passes.load(Ordering::Relaxed)
    );
    assert!(passes.load(Ordering::Relaxed) > 0);
    // Quiescent: the exact check.
    let mut found = Vec::new();
    let mut rng = Rng::new(s);
    reader_pass(f, stable, &mut rng, &mut found, &format!("{what} after"));
}

/// Tiny grown filters of several shapes (narrow fingerprints, so collisions between the
/// writers' items and the stable ones are common and removes take other items' copies), with
/// stable items spread over several levels.
#[test]
fn stable_items_never_missed_under_churn_and_growth() {
    let s = seed("stable_items_never_missed_under_churn_and_growth");
    let mut rng = Rng::new(s);
    for (cap, factor, bits, rate, writers, readers) in [
        (1usize, 2u32, Some(4u32), None, 2usize, 2usize),
        (2, 3, None, Some(0.2), 2, 1),
        (3, 1, Some(5), None, 1, 2),
        (1, 5, Some(8), None, 3, 1),
        (2, 4, None, Some(0.05), 1, 1),
    ] {
        let what = format!("cap {cap} × {factor} bits {bits:?} rate {rate:?}");
        let f = grown(cap, factor, bits, rate);
        // Stable items in several levels: some now, more after growth.
        let mut stable = stable_items(&f, &mut rng, 40);
        let mut filler = Vec::new();
        for _ in 0..3 {
            filler.extend(stable_items(&f, &mut rng, 60));
            stable.extend(stable_items(&f, &mut rng, 40));
        }
        // The filler items were only there to grow the filter: removing them (they are our own)
        // takes newest matching copies, some of them the stable items' own.
        for x in &filler {
            assert!(f.remove(x));
        }
        println!(
            "{what}: {} stable items in {} levels",
            stable.len(),
            f.levels()
        );
        let keep = if factor == 1 { 60 } else { 400 };
        stress(&f, &stable, s, writers, readers, keep, &what);
    }
}

/// Hot keys: a few stable items, each inserted once when a different level was the newest;
/// writers insert and remove items with the *same* hash class (same high word, same top bits of
/// the low word as some stable item, so the same key in every level, or only in the narrower
/// older levels when widths grow), so their removes keep taking the newest matching copy while
/// other copies sit in older levels, and a filler thread keeps adding levels. The stable items
/// must stay found; `count` of a stable item must stay at least 1 (it has a copy throughout).
#[test]
fn hot_keys_with_copies_in_many_levels_stay_found() {
    let s = seed("hot_keys_with_copies_in_many_levels_stay_found");
    let mut rng = Rng::new(s);
    for (cap, factor, bits, rate) in [
        (1usize, 2u32, Some(8u32), None),
        (2, 3, None, Some(0.2)),
        (4, 1, Some(4), None),
    ] {
        let what = format!("hot: cap {cap} × {factor} bits {bits:?} rate {rate:?}");
        let b = CuckooFilter::builder()
            .capacity(cap)
            .expansion(factor)
            .max_levels(64)
            .hasher(Identity);
        let b = match (bits, rate) {
            (Some(bits), _) => b.fingerprint_bits(bits),
            (_, Some(rate)) => b.false_positive_rate(rate),
            _ => b,
        };
        let f = b.build().unwrap();
        // Stable hot items, one per growth stage.
        let mut stable = Vec::new();
        for stage in 0..4 {
            let y = rng.next_u64();
            f.insert(&y).unwrap();
            stable.push(y);
            let target = f.levels() + 1 + stage;
            while f.levels() < target {
                let _ = f.insert(&rng.next_u64());
            }
        }
        // Items colliding with a stable one: same high word; the low word's top 9 bits kept
        // (all the width of a level up to 9 bits wide; fewer than a wider level's), the rest
        // random.
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
                            Err(InsertError::MaxLevelsReached { .. }) | Err(InsertError::Full) => {
                                for x in mine.drain(..) {
                                    assert!(f.remove(&x));
                                }
                            }
                            Err(_) => {}
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
            "{what}: {} levels, {} reader passes",
            f.levels(),
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
    for (cap, factor, bits) in [(1usize, 2u32, Some(4u32)), (1, 3, None), (2, 5, Some(8))] {
        let what = format!("publish: cap {cap} × {factor} bits {bits:?}");
        let f = grown(cap, factor, bits, None);
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
            println!("{what}: {} levels, {rounds} reader rounds", f.levels());
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
    let f = grown(1, 2, Some(5), None);
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
                    "snapshot {snaps} ({}) of {} levels",
                    ["bytes", "clone"][k],
                    g.levels()
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
        println!("{snaps} snapshots, {ops} writer ops, {} levels", f.levels());
    });
}

/// Stable items in the newest level of a filter that cannot grow any more (`max_levels`
/// reached), kept just under full by writers that insert fresh items and remove their own:
/// every insert kicks fingerprints (stable ones among them) between their two buckets,
/// so the one-pass lookup's loads of a stable item's buckets keep racing with moves of its
/// fingerprint; only the stripe validation (then the level's own lookup) saves it.
#[test]
fn stable_items_in_a_full_newest_level_survive_kicks() {
    let s = seed("stable_items_in_a_full_newest_level_survive_kicks");
    let mut rng = Rng::new(s);
    for (cap, factor, bits, max, writers, readers) in [
        (16usize, 2u32, Some(8u32), 3u32, 1usize, 1usize),
        (8, 3, Some(4), 4, 1, 1),
        (40, 2, None, 6, 2, 1),
        (1, 2, Some(16), 9, 1, 2),
    ] {
        let what = format!("full: cap {cap} × {factor} bits {bits:?} max {max}");
        let b = CuckooFilter::builder()
            .capacity(cap)
            .expansion(factor)
            .max_levels(max);
        let f = match bits {
            Some(bits) => b.fingerprint_bits(bits),
            None => b,
        }
        .build()
        .unwrap();
        // Fill to the last level, then stable items into it, then fill it to the brim.
        let mut filler = Vec::new();
        while f.levels() < max as usize {
            let x = rng.next_u64();
            if f.insert(&x).is_ok() {
                filler.push(x);
            }
        }
        let stable = stable_items(&f, &mut rng, 64.min(cap * 4));
        loop {
            let x = rng.next_u64();
            match f.insert(&x) {
                Ok(()) => filler.push(x),
                Err(InsertError::ItemBucketsFull) => {}
                Err(_) => break,
            }
        }
        let newest = f.level_stats().pop().unwrap();
        println!(
            "{what}: {} levels, newest {}/{} slots, {} stable",
            f.levels(),
            newest.len,
            newest.slots,
            stable.len()
        );
        let stop = AtomicBool::new(false);
        let passes = AtomicUsize::new(0);
        let kicks = AtomicUsize::new(0);
        let (f, stable, what) = (&f, &stable, what.as_str());
        // The writers share the filler items out; each replaces its own, one at a time.
        let shares: Vec<Vec<u64>> = (0..writers)
            .map(|w| filler.iter().skip(w).step_by(writers).copied().collect())
            .collect();
        std::thread::scope(|sc| {
            for (w, mut mine) in shares.into_iter().enumerate() {
                let (stop, kicks) = (&stop, &kicks);
                // 1 % of the newest level's slots below full, shared out.
                let target = mine.len().saturating_sub(newest.slots / 100 / writers + 1);
                sc.spawn(move || {
                    let mut rng = Rng::new(s ^ (0x7000 + w as u64));
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        // A fresh item in; one of ours out when it did not fit or when we
                        // hold more than our share: the newest level stays just under full,
                        // where most inserts succeed but only after kicks.
                        let y = rng.next_u64();
                        let fits = f.insert(&y).is_ok();
                        if fits {
                            mine.push(y);
                        }
                        if (!fits || mine.len() > target) && !mine.is_empty() {
                            let i = rng.below(mine.len() as u64) as usize;
                            let x = mine.swap_remove(i);
                            assert!(f.remove(&x), "{what}: own {x:#x} not removed");
                        }
                        n += 1;
                    }
                    kicks.fetch_add(n, Ordering::Relaxed);
                });
            }
            for r in 0..readers {
                let (stop, passes) = (&stop, &passes);
                sc.spawn(move || {
                    // Stops the writers however this reader ends (a failed assertion too).
                    let _stop = StopOnDrop(stop);
                    let mut found = Vec::new();
                    let t0 = Instant::now();
                    while t0.elapsed() < RUN {
                        for y in stable {
                            assert!(f.contains(y), "{what} reader {r}: stable {y:#x} missed");
                        }
                        f.contains_many(stable, &mut found);
                        if let Some(i) = found.iter().position(|&b| !b) {
                            panic!(
                                "{what} reader {r}: stable {:#x} missed by contains_many",
                                stable[i]
                            );
                        }
                        passes.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        println!(
            "{what}: {} reader passes, {} replacements",
            passes.load(Ordering::Relaxed),
            kicks.load(Ordering::Relaxed)
        );
        for y in stable {
            assert!(f.contains(y));
        }
    }
}
