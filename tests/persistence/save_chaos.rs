//! Chaos: every thread mixes every operation (insert, insert_unique, insert_many, remove, count,
//! contains, to_bytes, write_to into a slow destination) on a growable filter from a tiny table,
//! so that saves, growth, kick chains and insert_unique's multi-level locking all overlap. Each
//! thread owns its keys and keeps an exact model of them (32-bit fingerprints); a watchdog
//! catches deadlocks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::common;
use crate::watchdog::{watchdog, SlowWriter};
use atomic_cuckoo::CuckooFilter;

#[test]
fn every_operation_at_once_on_a_growable_filter_from_a_tiny_table() {
    let seed = common::seed("chaos");
    let threads = 4;
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(1)
            // The widest entries a growable filter takes: counts of 80,000 keys stay exact.
            .false_positive_rate(1e-7)
            .growable(true)
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (filter, stop) = (Arc::clone(&filter), Arc::clone(&stop));
            thread::spawn(move || {
                let mut rng = common::Rng::new(seed ^ (t as u64).wrapping_mul(0x9E37_79B9));
                let keys = common::distinct_keys(seed.wrapping_add(t as u64 + 1), 20_000);
                let mut model: HashMap<u64, usize> = HashMap::new();
                let mut saves = 0;
                while !stop.load(Ordering::Relaxed) {
                    let k = keys[rng.below(keys.len() as u64) as usize];
                    match rng.below(100) {
                        0..=29 => {
                            filter.insert(&k).unwrap();
                            *model.entry(k).or_default() += 1;
                        }
                        30..=44 => {
                            let added = filter.insert_unique(&k).unwrap();
                            let had = model.get(&k).copied().unwrap_or(0);
                            assert_eq!(added, had == 0, "insert_unique of {k} with {had} copies");
                            if added {
                                *model.entry(k).or_default() += 1;
                            }
                        }
                        45..=49 => {
                            let batch: Vec<u64> = (0..1 + rng.below(100))
                                .map(|_| keys[rng.below(keys.len() as u64) as usize])
                                .collect();
                            filter.insert_many(&batch).unwrap();
                            for b in batch {
                                *model.entry(b).or_default() += 1;
                            }
                        }
                        50..=74 => {
                            let had = model.get(&k).copied().unwrap_or(0);
                            assert_eq!(filter.remove(&k), had > 0, "remove of {k}");
                            if had > 0 {
                                *model.get_mut(&k).unwrap() -= 1;
                            }
                        }
                        75..=89 => {
                            let had = model.get(&k).copied().unwrap_or(0);
                            assert_eq!(filter.count(&k), had, "count of {k}");
                            assert!(filter.contains(&k) || had == 0);
                        }
                        90..=97 => {
                            let bytes = filter.to_bytes();
                            // Our own keys are frozen in the snapshot as our model says now.
                            let r = CuckooFilter::from_bytes(&bytes).unwrap();
                            for _ in 0..20 {
                                let k = keys[rng.below(keys.len() as u64) as usize];
                                let had = model.get(&k).copied().unwrap_or(0);
                                assert_eq!(r.count(&k), had, "snapshot count of {k}");
                            }
                            saves += 1;
                        }
                        _ => {
                            let mut w = SlowWriter {
                                delay: Duration::from_micros(50),
                                bytes: Vec::new(),
                            };
                            filter.write_to(&mut w).unwrap();
                            CuckooFilter::from_bytes(&w.bytes).unwrap();
                            saves += 1;
                        }
                    }
                }
                let total: usize = model.values().sum();
                for (k, &n) in &model {
                    assert_eq!(filter.count(k), n);
                }
                (total, saves)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let results = watchdog("chaos", Duration::from_secs(30), move || {
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    let total: usize = results.iter().map(|r| r.0).sum();
    println!(
        "chaos: {} doublings, {} items, saves per thread {:?}",
        filter.doublings(),
        filter.len(),
        results.iter().map(|r| r.1).collect::<Vec<_>>()
    );
    assert_eq!(filter.len(), total);
    let r = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_eq!(r.len(), total);
}
