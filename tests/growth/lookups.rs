//! Lookups in grown filters: every inserted item is found by `contains` and `contains_many`
//! in filters of every shape, doublings in progress included; `contains_many` answers what
//! `contains` answers; and items that stay inserted are never missed while other threads
//! double the filter.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::common::{seed, Rng};
use atomic_cuckoo::CuckooFilter;

/// Growable filters from tables of a few slots to a thousand items, at the default rate, a
/// small one (wide lanes) and a coarse one (narrow lanes, copies of exhausted entries).
fn shapes() -> Vec<(String, CuckooFilter)> {
    let mut out = Vec::new();
    for capacity in [1, 7, 100, 64, 10, 1000] {
        let f = CuckooFilter::builder()
            .capacity(capacity)
            .growable(true)
            .build()
            .unwrap();
        out.push((format!("capacity {capacity}"), f));
    }
    for rate in [1e-6, 0.2] {
        let f = CuckooFilter::builder()
            .capacity(20)
            .false_positive_rate(rate)
            .growable(true)
            .build()
            .unwrap();
        out.push((format!("capacity 20, rate {rate}"), f));
    }
    out
}

#[test]
fn every_inserted_item_is_found_by_contains_and_contains_many_in_every_shape() {
    let s = seed("every_inserted_item_is_found_by_contains_and_contains_many_in_every_shape");
    let mut rng = Rng::new(s);
    for (name, f) in shapes() {
        let n = 150_000;
        let items: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
        let absent: Vec<u64> = (0..5_000).map(|_| rng.next_u64()).collect();
        f.insert_many(&items[..100_000]).unwrap();
        for it in &items[100_000..] {
            f.insert(it).unwrap();
        }
        println!("{name}: {} doublings", f.doublings());
        assert!(
            f.doublings() > 3,
            "{name}: only {} doublings",
            f.doublings()
        );
        for it in &items {
            assert!(f.contains(it), "{name}: {it:#x} inserted, not found");
        }
        let mut found = Vec::new();
        f.contains_many(&items, &mut found);
        assert!(
            found.iter().all(|&b| b),
            "{name}: contains_many missed an item"
        );
        // Mixed batches of every length around the batch size: the same answers as contains.
        for len in [0usize, 1, 2, 63, 64, 65, 127, 128, 129, 300] {
            let batch: Vec<u64> = (0..len)
                .map(|_| {
                    if rng.below(2) == 0 {
                        items[rng.below(items.len() as u64) as usize]
                    } else {
                        absent[rng.below(absent.len() as u64) as usize]
                    }
                })
                .collect();
            f.contains_many(&batch, &mut found);
            let want: Vec<bool> = batch.iter().map(|k| f.contains(k)).collect();
            assert_eq!(found, want, "{name}: batch of {len}");
        }
        for it in absent.iter().take(2_000) {
            if f.count(it) > 0 {
                assert!(f.contains(it), "{name}: count > 0 but not contained");
            }
        }
    }
}

#[test]
fn a_snapshot_of_a_grown_filter_answers_as_the_original() {
    let s = seed("a_snapshot_of_a_grown_filter_answers_as_the_original");
    let mut rng = Rng::new(s);
    let f = CuckooFilter::builder()
        .capacity(10)
        .growable(true)
        .build()
        .unwrap();
    let items: Vec<u64> = (0..30_000).map(|_| rng.next_u64()).collect();
    f.insert_many(&items).unwrap();
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let g = CuckooFilter::read_from(&mut bytes.as_slice()).unwrap();
    assert_eq!(g.doublings(), f.doublings());
    let probe: Vec<u64> = items
        .iter()
        .copied()
        .chain((0..30_000).map(|_| rng.next_u64()))
        .collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    f.contains_many(&probe, &mut a);
    g.contains_many(&probe, &mut b);
    assert_eq!(a, b);
    assert!(a[..items.len()].iter().all(|&x| x));
    for (k, want) in probe.iter().zip(&a) {
        assert_eq!(g.contains(k), *want);
    }
}

/// Two writers grow a tiny filter (and remove their own items) while two readers check items
/// inserted before they started and never removed: `contains` and `contains_many` must find
/// every one of them, every time.
#[test]
fn stable_items_are_found_while_writers_grow_the_filter() {
    let s = seed("stable_items_are_found_while_writers_grow_the_filter");
    let f = Arc::new(
        CuckooFilter::builder()
            .capacity(16)
            .growable(true)
            .build()
            .unwrap(),
    );
    let mut rng = Rng::new(s);
    let stable: Arc<Vec<u64>> = Arc::new((0..2_000).map(|_| rng.next_u64()).collect());
    f.insert_many(stable.iter()).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (f, done) = (Arc::clone(&f), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut rng = Rng::new(s ^ (w + 1));
                for round in 0..150 {
                    let mine: Vec<u64> = (0..2_000).map(|_| rng.next_u64()).collect();
                    f.insert_many(&mine).unwrap();
                    // Remove most of them again: kicks, growth and removes all in flight.
                    for k in mine.iter().skip(round % 3) {
                        assert!(f.remove(k), "writer {w}: own item gone");
                    }
                }
                done.store(true, Ordering::Release);
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (f, done, stable) = (Arc::clone(&f), Arc::clone(&done), Arc::clone(&stable));
            std::thread::spawn(move || {
                let mut found = Vec::new();
                let mut passes = 0;
                while !done.load(Ordering::Acquire) || passes < 3 {
                    for k in stable.iter() {
                        assert!(f.contains(k), "reader {r}: stable {k:#x} missed");
                    }
                    f.contains_many(stable.iter(), &mut found);
                    assert!(found.iter().all(|&b| b), "reader {r}: contains_many missed");
                    passes += 1;
                }
                passes
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for r in readers {
        assert!(r.join().unwrap() >= 3);
    }
    assert!(
        f.doublings() > 5,
        "the filter grew to only {} doublings",
        f.doublings()
    );
}
