//! Inserts from several threads must not fail spuriously: a filter built for `n` items takes
//! `n` items whether one thread inserts them or several at once.
//!
//! An insert that finds both buckets full searches a cuckoo path and executes it one locked move
//! at a time; a concurrent writer can invalidate the path, and the insert then searches again, a
//! bounded number of times. Under contention that bound must not turn into `Full` well below
//! capacity (or, for a growable filter, into an early doubling).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common;

const THREADS: usize = 4;
/// Threads that only sleep a few microseconds in a loop: each wake-up may preempt an inserter at
/// a random point (in the middle of a path's moves, or holding a stripe).
const PREEMPTERS: usize = 2;
const REPETITIONS: u64 = 20;

/// What went wrong in one fill.
#[derive(Debug)]
struct Failure {
    repetition: u64,
    growing: bool,
    errors: usize,
    first: (usize, InsertError),
    doublings: u32,
}

/// `THREADS` threads insert disjoint keys, together 90 % of the item capacity `items`, into a
/// fresh filter (fixed, and growable); every insert must succeed and the growable filter
/// must not double. Returns the failures of all repetitions.
fn fill_concurrently(items: usize, seed: u64) -> Vec<Failure> {
    let total = items * 9 / 10;
    let per_thread = total / THREADS;
    let mut failures = Vec::new();
    for repetition in 0..REPETITIONS {
        for growing in [false, true] {
            let filter = CuckooFilter::builder()
                .capacity(items)
                .growable(growing)
                .build()
                .unwrap();
            let keys = common::distinct_keys(seed ^ repetition, per_thread * THREADS);
            let barrier = Barrier::new(THREADS);
            let stop = AtomicBool::new(false);
            let errors: Vec<(usize, InsertError)> = thread::scope(|s| {
                for _ in 0..PREEMPTERS {
                    let stop = &stop;
                    s.spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            thread::sleep(Duration::from_micros(5));
                        }
                    });
                }
                let handles: Vec<_> = keys
                    .chunks(per_thread)
                    .map(|mine| {
                        let (filter, barrier) = (&filter, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            let mut errors = Vec::new();
                            for k in mine {
                                if let Err(e) = filter.insert(k) {
                                    // Items stored so far, at the failure.
                                    errors.push((filter.len(), e));
                                }
                            }
                            errors
                        })
                    })
                    .collect();
                let errors = handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap())
                    .collect();
                stop.store(true, Ordering::Relaxed);
                errors
            });
            let doublings = filter.doublings();
            if !errors.is_empty() || doublings != 0 {
                failures.push(Failure {
                    repetition,
                    growing,
                    errors: errors.len(),
                    first: errors
                        .iter()
                        .min_by_key(|e| e.0)
                        .copied()
                        .unwrap_or((0, InsertError::Full)),
                    doublings,
                });
            }
            // Nothing that was stored is lost.
            assert_eq!(filter.len(), keys.len() - errors.len());
        }
    }
    failures
}

fn assert_no_spurious_failures(items: usize, seed: u64) {
    let failures = fill_concurrently(items, seed);
    println!(
        "capacity {items}: {} of {} concurrent fills to 90 % ({THREADS} threads) had a failed \
         insert or an early growth",
        failures.len(),
        2 * REPETITIONS
    );
    for f in failures.iter().take(5) {
        println!("  {f:?}");
    }
    assert!(
        failures.is_empty(),
        "capacity {items}: {} of {} fills to 90 % failed; first: repetition {}, {} filter, {} \
         failed inserts (first {:?} at {} items stored), {} doublings",
        failures.len(),
        2 * REPETITIONS,
        failures[0].repetition,
        if failures[0].growing {
            "growable"
        } else {
            "fixed"
        },
        failures[0].errors,
        failures[0].first.1,
        failures[0].first.0,
        failures[0].doublings
    );
}

#[test]
fn concurrent_inserts_up_to_90_percent_of_a_million_item_capacity_all_succeed() {
    let seed = common::seed_or("contended inserts, 1M", 0xf111_0001);
    assert_no_spurious_failures(1_000_000, seed);
}

#[test]
fn concurrent_inserts_up_to_90_percent_of_a_ten_thousand_item_capacity_all_succeed() {
    let seed = common::seed_or("contended inserts, 10k", 0xf111_0002);
    assert_no_spurious_failures(10_000, seed);
}
