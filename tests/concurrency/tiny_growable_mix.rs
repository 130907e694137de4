//! Every kind of thread at once on tiny growable filters (first tables of 1 to 8 items, so
//! that the table doubles all the time): writers that insert and remove their own items,
//! `insert_unique` racers on shared keys, readers, and a thread that saves and clones in the
//! middle of doublings. Lanes are the widest a rate gives (1e-7: 30-bit entries), so that two
//! keys colliding is negligible and the oracles can be exact:
//!
//! - no false negative: an item whose insert returned (published with Release), and whose
//!   remove has not started, is found by every lookup that starts after it was published;
//! - `insert_unique`: across all threads, exactly one `Ok(true)` per shared key;
//! - saves and clones: every item published before the save or clone started, and not
//!   removed, is in it.
//!
//! Each round runs for a bounded time (under a second) and prints its seed.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common::{seed, Rng};

/// Per item, in the low two bits of its state word: not stored, stored (its insert
/// returned), or being removed. The bits above count the item's changes, so that a reader
/// that sees the same word before and after its lookup knows the item stayed stored in
/// between (not removed and stored again).
const ABSENT: u64 = 0;
const STORED: u64 = 1;
const REMOVING: u64 = 2;

/// The state word after `word` with the item's state set to `to`.
fn next(word: u64, to: u64) -> u64 {
    ((word >> 2) + 1) << 2 | to
}

/// Items per writer.
const ITEMS: usize = 1_500;
/// Shared keys the `insert_unique` racers race on.
const SHARED: usize = 600;

fn tiny(capacity: usize) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .false_positive_rate(1e-7)
        .growable(true)
        .huge_pages(false)
        .build()
        .unwrap()
}

/// Writer `w`'s item `i` (distinct across writers and from the shared keys).
fn item(w: usize, i: usize) -> u64 {
    ((w as u64 + 1) << 40) | i as u64
}

fn shared(i: usize) -> u64 {
    (0xABu64 << 48) | i as u64
}

/// One round: `writers` writer threads (each also racing `insert_unique` on the shared keys),
/// one reader and one saver, for `run` at most. Returns the failures seen.
fn round(seed: u64, capacity: usize, writers: usize, run: Duration) -> Vec<String> {
    let filter = tiny(capacity);
    let state: Vec<Vec<AtomicU64>> = (0..writers)
        .map(|_| (0..ITEMS).map(|_| AtomicU64::new(ABSENT)).collect())
        .collect();
    let wins: Vec<AtomicUsize> = (0..SHARED).map(|_| AtomicUsize::new(0)).collect();
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(writers + 2);
    let deadline = Instant::now() + run;
    let failures = std::sync::Mutex::new(Vec::new());
    let fail = |what: String| {
        stop.store(true, Ordering::Relaxed);
        failures.lock().unwrap().push(what);
    };
    let saves = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for w in 0..writers {
            let (filter, state, wins, stop, barrier, fail) =
                (&filter, &state, &wins, &stop, &barrier, &fail);
            s.spawn(move || {
                let mut rng = Rng::new(seed ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9));
                barrier.wait();
                // Racers go through the shared keys in opposite orders, writer by writer.
                let mut racing: Vec<usize> = (0..SHARED).collect();
                if w % 2 == 1 {
                    racing.reverse();
                }
                let mut raced = 0;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    if raced < SHARED && rng.below(3) == 0 {
                        let i = racing[raced];
                        raced += 1;
                        match filter.insert_unique(&shared(i)) {
                            Ok(true) => {
                                wins[i].fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(false) => {}
                            Err(e) => fail(format!("insert_unique of shared {i}: {e:?}")),
                        }
                        continue;
                    }
                    let i = rng.below(ITEMS as u64) as usize;
                    let key = item(w, i);
                    let word = state[w][i].load(Ordering::Relaxed);
                    match word & 3 {
                        ABSENT => match filter.insert(&key) {
                            Ok(()) => state[w][i].store(next(word, STORED), Ordering::Release),
                            // A distinct item whose two buckets other items jam may be
                            // refused (see the growth tests); it then stays absent.
                            Err(InsertError::ItemBucketsFull) => {}
                            Err(e) => fail(format!("insert of {key}: {e:?}")),
                        },
                        _ if rng.below(4) == 0 => {
                            let removing = next(word, REMOVING);
                            state[w][i].store(removing, Ordering::Release);
                            if !filter.remove(&key) {
                                fail(format!("writer {w}: remove of stored {key} found nothing"));
                            }
                            state[w][i].store(next(removing, ABSENT), Ordering::Release);
                        }
                        _ => {
                            if !filter.contains(&key) {
                                fail(format!("writer {w}: own stored {key} not found"));
                            }
                        }
                    }
                }
                // Finish the race, so that every shared key has been tried by every writer.
                for &i in &racing[raced..] {
                    match filter.insert_unique(&shared(i)) {
                        Ok(true) => {
                            wins[i].fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(false) => {}
                        Err(e) => fail(format!("insert_unique of shared {i}: {e:?}")),
                    }
                }
            });
        }
        // The reader: published items, of every writer.
        {
            let (filter, state, stop, barrier, fail) = (&filter, &state, &stop, &barrier, &fail);
            s.spawn(move || {
                let mut rng = Rng::new(seed ^ 0x7eade7);
                barrier.wait();
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let w = rng.below(writers as u64) as usize;
                    let i = rng.below(ITEMS as u64) as usize;
                    let word = state[w][i].load(Ordering::Acquire);
                    if word & 3 != STORED {
                        continue;
                    }
                    let found = filter.contains(&item(w, i));
                    if !found && state[w][i].load(Ordering::Acquire) == word {
                        fail(format!(
                            "reader: stored {} not found ({} doublings, doubling {})",
                            item(w, i),
                            filter.doublings(),
                            filter.is_doubling()
                        ));
                    }
                }
            });
        }
        // The saver: snapshots and clones, checked against the items stored before them.
        {
            let (filter, state, stop, barrier, fail, saves) =
                (&filter, &state, &stop, &barrier, &fail, &saves);
            s.spawn(move || {
                barrier.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let before: Vec<(usize, usize, u64)> = (0..writers)
                        .flat_map(|w| (0..ITEMS).map(move |i| (w, i)))
                        .map(|(w, i)| (w, i, state[w][i].load(Ordering::Acquire)))
                        .filter(|&(_, _, word)| word & 3 == STORED)
                        .collect();
                    let (what, copy) = if n.is_multiple_of(2) {
                        let bytes = filter.to_bytes();
                        match CuckooFilter::from_bytes(&bytes) {
                            Ok(f) => ("snapshot", f),
                            Err(e) => {
                                fail(format!("a snapshot taken under load: {e}"));
                                return;
                            }
                        }
                    } else {
                        ("clone", filter.clone())
                    };
                    n += 1;
                    // Items whose word is unchanged after the copy were stored throughout it
                    // (a writer marks REMOVING before its remove starts).
                    for &(w, i, word) in &before {
                        if !copy.contains(&item(w, i))
                            && state[w][i].load(Ordering::Acquire) == word
                        {
                            fail(format!(
                                "{what} {n}: {} stored before it is missing ({:?})",
                                item(w, i),
                                copy
                            ));
                            return;
                        }
                    }
                    saves.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    for (i, w) in wins.iter().enumerate() {
        let w = w.load(Ordering::Relaxed);
        if w != 1 && failures.len() < 20 {
            failures.push(format!("shared key {i} added by {w} insert_unique calls"));
        }
    }
    // Quiet now: every stored item found, every shared key counted once.
    for (w, items) in state.iter().enumerate() {
        for (i, s) in items.iter().enumerate() {
            if s.load(Ordering::Relaxed) & 3 == STORED && !filter.contains(&item(w, i)) {
                failures.push(format!("after the round: {} not found", item(w, i)));
            }
        }
    }
    for i in 0..SHARED {
        let count = filter.count(&shared(i));
        if count != 1 && failures.len() < 40 {
            failures.push(format!("shared key {i} stored {count} times"));
        }
    }
    let stored: usize = state
        .iter()
        .flatten()
        .filter(|s| s.load(Ordering::Relaxed) & 3 == STORED)
        .count();
    if filter.len() != stored + SHARED {
        failures.push(format!(
            "len {} after the round, {stored} items and {SHARED} shared keys stored",
            filter.len()
        ));
    }
    if saves.load(Ordering::Relaxed) == 0 && failures.is_empty() {
        failures.push("no save or clone finished".into());
    }
    failures
        .into_iter()
        .map(|f| format!("capacity {capacity}, {writers} writers: {f}"))
        .collect()
}

/// Rounds on first tables of 1 to 8 items, with 2 and 3 writers (plus a reader and a saver).
#[test]
fn writers_racers_readers_and_saves_on_tiny_growable_filters_lose_nothing() {
    let seed = seed("tiny growable mix");
    let mut rng = Rng::new(seed);
    let mut failures = Vec::new();
    for r in 0..6u64 {
        let capacity = 1 + rng.below(8) as usize;
        let writers = 2 + (r % 2) as usize;
        failures.extend(round(
            seed.wrapping_add(r),
            capacity,
            writers,
            Duration::from_millis(400),
        ));
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} failures: {:#?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
}
