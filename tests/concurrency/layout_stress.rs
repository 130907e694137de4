//! Tiny tables of every layout under writers that insert and remove their own keys (kick chains
//! through the stable items' buckets), while readers check that every stable item stays present
//! (single and batched lookups).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use atomic_cuckoo::{CuckooFilter, Layout};

use crate::common;
use crate::common::Rng;

fn stress(layout: Layout, bits: u32, seed: u64, millis: u64) {
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(64)
            .fingerprint_bits(bits)
            .layout(layout)
            .build()
            .unwrap(),
    );
    // Stable items: half the capacity, inserted before the threads start.
    let mut stable = Vec::new();
    for k in 0u64..1_000_000 {
        if stable.len() == 32 {
            break;
        }
        if filter.insert(&(k | 1 << 62)).is_ok() {
            stable.push(k | 1 << 62);
        }
    }
    let stable = Arc::new(stable);
    let stop = Arc::new(AtomicBool::new(false));
    // Work done so far, so that the run lasts until every thread has done some (a busy machine
    // may not schedule a thread within the planned time).
    let (writer_ops, reader_rounds) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut handles = Vec::new();
    for w in 0..2u64 {
        let (filter, stop, writer_ops) = (filter.clone(), stop.clone(), writer_ops.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng::new(seed ^ w.wrapping_mul(0x9E37));
            let mut mine: Vec<u64> = Vec::new();
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if mine.len() < 40 && rng.below(2) == 0 {
                    let key = (w << 48) | rng.below(1 << 40);
                    if filter.insert(&key).is_ok() {
                        mine.push(key);
                    }
                } else if !mine.is_empty() {
                    let i = rng.below(mine.len() as u64) as usize;
                    let key = mine.swap_remove(i);
                    assert!(filter.remove(&key), "remove of own key {key} failed");
                }
                ops += 1;
                writer_ops.fetch_add(1, Ordering::Relaxed);
            }
            for key in &mine {
                assert!(filter.contains(key), "writer's own key {key} missing");
            }
            ops
        }));
    }
    let reader = {
        let (filter, stop, stable) = (filter.clone(), stop.clone(), stable.clone());
        let reader_rounds = reader_rounds.clone();
        std::thread::spawn(move || {
            let mut results = Vec::new();
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for k in stable.iter() {
                    assert!(
                        filter.contains(k),
                        "stable item {k} missing ({layout:?} bits={bits})"
                    );
                }
                filter.contains_many(stable.iter(), &mut results);
                assert!(
                    results.iter().all(|&r| r),
                    "stable item missing in contains_many ({layout:?} bits={bits})"
                );
                rounds += 1;
                reader_rounds.fetch_add(1, Ordering::Relaxed);
            }
            rounds
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(millis));
    // Then until the reader has checked every stable item at least twice and the writers have
    // changed the table meanwhile (a minute at most: a thread that never runs is a failure).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while (reader_rounds.load(Ordering::Relaxed) < 2 || writer_ops.load(Ordering::Relaxed) < 100)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let rounds = reader.join().unwrap();
    for k in stable.iter() {
        assert!(filter.contains(k), "stable item {k} missing at end");
    }
    assert!(ops > 0 && rounds > 0, "{ops} {rounds}");
}

#[test]
fn tiny_tables_of_every_layout_keep_stable_items_under_churn() {
    let seed = common::seed_or("layout_stress", 0xa77ac4);
    let millis = std::env::var("ATOMIC_CUCKOO_STRESS_MILLIS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    for layout in [Layout::Packed, Layout::Compact, Layout::OneWord] {
        for bits in [4u32, 5, 8, 9, 12, 15, 16, 17, 18, 24, 31, 32] {
            stress(layout, bits, seed, millis);
        }
    }
}
