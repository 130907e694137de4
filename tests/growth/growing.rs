//! Growable filters under threads: readers never miss an item while writers double the
//! table, racing `insert_unique` adds each key once, `clear` loses nothing inserted after it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;

use atomic_cuckoo::CuckooFilter;

use crate::common;

/// Two writers insert disjoint keys into a filter that starts tiny and grows many times, while
/// a third thread checks keys whose insert has already returned.
#[test]
fn readers_never_miss_items_while_writers_grow_the_filter() {
    let seed = common::seed("concurrent growth");
    let filter = CuckooFilter::builder()
        .capacity(500)
        .growable(true)
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
        "{checks} checks, {misses} misses, {} doublings",
        filter.doublings()
    );
    assert_eq!(misses, 0);
    assert!(filter.doublings() >= 8);
    assert_eq!(filter.len(), 2 * per_writer);
    assert!(keys.iter().all(|k| filter.contains(k)));
}

/// Racing `insert_unique` while the filter grows: every key added exactly once.
#[test]
fn racing_insert_unique_adds_each_key_once_across_growth() {
    let seed = common::seed("insert_unique across growth");
    let filter = CuckooFilter::builder()
        .capacity(200)
        // The widest entries a growable filter takes: no two of these keys look alike.
        .false_positive_rate(1e-7)
        .growable(true)
        .build()
        .unwrap();
    let keys = common::distinct_keys(seed, 20_000);
    common::assert_racing_insert_unique_adds_each_key_once(&filter, &keys, 3);
    println!("{} doublings", filter.doublings());
    assert!(
        filter.doublings() > 3,
        "the filter did not grow while racing"
    );
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
                    // Attempts count (a hot-key refusal is one).
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

/// Tiny growable tables (a few dozen slots, doubling between clears, a doubling often in
/// progress when one starts): `clear` under readers and writers loses no key inserted after it.
#[test]
fn clear_under_readers_and_writers_on_tiny_tables() {
    let seed = common::seed("clear_under_readers_and_writers_on_tiny_tables");
    for capacity in [16, 64, 200] {
        let filter = CuckooFilter::builder()
            .capacity(capacity)
            .growable(true)
            .build()
            .unwrap();
        let checked = clear_under_readers_and_writers(seed, &filter, 300, 3 * capacity);
        println!(
            "capacity {capacity}: {} doublings, {checked} checks",
            filter.doublings()
        );
        assert!(checked > 0);
    }
}
