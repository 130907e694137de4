//! One-pass lookups over grown filters: shapes and life cycles that tests/growth/lookups.rs
//! does not cover. Every assertion is one that a false positive cannot
//! break: inserted items must be found, removes of inserted copies must succeed, and an empty
//! filter must count 0.

use crate::common::{seed, Identity, Rng};
use atomic_cuckoo::{CuckooFilter, InsertError};

/// Both lookups find every item of `items`.
fn all_found(f: &CuckooFilter, items: &[u64], what: &str) {
    for it in items {
        assert!(
            f.contains(it),
            "{what}: {it:#x} inserted, not found by contains"
        );
        assert!(f.count(it) >= 1, "{what}: {it:#x} inserted, count 0");
    }
    let mut found = Vec::new();
    f.contains_many(items, &mut found);
    assert_eq!(found.len(), items.len());
    for (i, &b) in found.iter().enumerate() {
        assert!(b, "{what}: {:#x} missed by contains_many", items[i]);
    }
    // Odd-length batches, offset, so batch boundaries fall elsewhere.
    for start in [1usize, 63, 65] {
        if start < items.len() {
            f.contains_many(&items[start..], &mut found);
            assert!(
                found.iter().all(|&b| b),
                "{what}: contains_many missed (offset {start})"
            );
        }
    }
}

/// Inserts fresh items until the filter has at least `levels` levels or an insert fails;
/// returns the inserted ones.
fn fill_to(f: &CuckooFilter, rng: &mut Rng, levels: usize, cap: usize) -> Vec<u64> {
    let mut items = Vec::new();
    while f.levels() < levels && items.len() < cap {
        let it = rng.next_u64();
        match f.insert(&it) {
            Ok(()) => items.push(it),
            Err(e) => panic!("insert failed at {} items: {e:?}", items.len()),
        }
    }
    items
}

fn grown(capacity: usize, factor: u32, bits: Option<u32>, max_levels: u32) -> CuckooFilter {
    let b = CuckooFilter::builder()
        .capacity(capacity)
        .expansion(factor)
        .max_levels(max_levels);
    let b = match bits {
        Some(bits) => b.fingerprint_bits(bits),
        None => b,
    };
    b.build().unwrap()
}

#[test]
fn shrink_to_fit_after_emptying_newest_levels_then_lookups_and_regrowth() {
    let s = seed("shrink_to_fit_after_emptying_newest_levels_then_lookups_and_regrowth");
    let mut rng = Rng::new(s);
    for (cap, factor, bits) in [
        (1, 2, None),
        (2, 3, None),
        (7, 2, Some(8)),
        (100, 3, None),
        (10, 1, Some(12)),
        (50, 2, Some(32)),
    ] {
        let what = format!("cap {cap} × {factor} bits {bits:?}");
        let mut f = grown(cap, factor, bits, 30);
        let keep = fill_to(&f, &mut rng, 4, 2_000_000);
        let before = f.levels();
        // Items that make more levels, then removed: the newest levels end up empty.
        let extra = fill_to(&f, &mut rng, before + 2, 4_000_000);
        let grown_to = f.levels();
        for it in extra.iter().rev() {
            assert!(f.remove(it), "{what}: remove of inserted {it:#x} failed");
        }
        all_found(&f, &keep, &format!("{what} after removes"));
        f.shrink_to_fit();
        println!("{what}: {before} -> {grown_to} -> shrunk to {}", f.levels());
        assert!(f.levels() <= grown_to);
        all_found(&f, &keep, &format!("{what} after shrink"));
        // Grow again from the shrunk state.
        let more = fill_to(&f, &mut rng, f.levels() + 3, 4_000_000);
        all_found(&f, &keep, &format!("{what} regrown (old)"));
        all_found(&f, &more, &format!("{what} regrown (new)"));
        assert_eq!(f.len(), keep.len() + more.len());
    }
}

#[test]
fn clear_shrink_and_refill() {
    let s = seed("clear_shrink_and_refill");
    let mut rng = Rng::new(s);
    for (cap, factor, bits) in [(1, 2, None), (2, 2, Some(4)), (3, 3, None), (64, 4, None)] {
        let what = format!("cap {cap} × {factor} bits {bits:?}");
        let mut f = grown(cap, factor, bits, 40);
        let _ = fill_to(&f, &mut rng, 6, 4_000_000);
        f.clear();
        assert_eq!(f.len(), 0);
        // Refill with all levels kept: inserts go to the newest (largest) level.
        let items: Vec<u64> = (0..20_000).map(|_| rng.next_u64()).collect();
        for it in &items {
            f.insert(it).unwrap();
        }
        all_found(&f, &items, &format!("{what} refilled after clear"));
        f.clear();
        f.shrink_to_fit();
        assert_eq!(f.levels(), 1, "{what}: every level empty, first kept");
        let again = fill_to(&f, &mut rng, 7, 4_000_000);
        all_found(&f, &again, &format!("{what} regrown after clear+shrink"));
    }
}

#[test]
fn snapshot_mid_growth_round_trip_and_continue() {
    let s = seed("snapshot_mid_growth_round_trip_and_continue");
    let mut rng = Rng::new(s);
    for (cap, factor, bits) in [(1, 3, None), (5, 2, Some(32)), (10, 1, None), (30, 5, None)] {
        let what = format!("cap {cap} × {factor} bits {bits:?}");
        let f = grown(cap, factor, bits, 20);
        let mut items = fill_to(&f, &mut rng, 5, 4_000_000);
        // Part way into the newest level.
        for _ in 0..rng.below(items.len() as u64 / 2 + 1) {
            let it = rng.next_u64();
            f.insert(&it).unwrap();
            items.push(it);
        }
        let bytes = f.to_bytes();
        let g = CuckooFilter::from_bytes(&bytes).unwrap();
        assert_eq!(g.levels(), f.levels());
        all_found(&g, &items, &format!("{what} restored"));
        let more = fill_to(&g, &mut rng, g.levels() + 2, 4_000_000);
        all_found(&g, &items, &format!("{what} restored then grown (old)"));
        all_found(&g, &more, &format!("{what} restored then grown (new)"));
        let h = g.clone();
        all_found(&h, &more, &format!("{what} clone"));
    }
}

#[test]
fn max_levels_reached_then_lookups() {
    let s = seed("max_levels_reached_then_lookups");
    let mut rng = Rng::new(s);
    for (cap, factor, bits, max) in [
        (1, 2, None, 3),
        (2, 3, Some(8), 2),
        (4, 2, Some(32), 5),
        (100, 1, None, 4),
        (20, 4, Some(16), 3),
    ] {
        let what = format!("cap {cap} × {factor} bits {bits:?} max {max}");
        let f = grown(cap, factor, bits, max);
        let mut items = Vec::new();
        let mut fails = 0;
        for _ in 0..5_000_000 {
            let it = rng.next_u64();
            match f.insert(&it) {
                Ok(()) => items.push(it),
                Err(InsertError::MaxLevelsReached { levels }) => {
                    assert_eq!(levels, max);
                    fails += 1;
                    if fails > 50 {
                        break;
                    }
                }
                Err(InsertError::Full) | Err(InsertError::ItemBucketsFull) => {}
                Err(e) => panic!("{what}: {e:?}"),
            }
        }
        assert!(fails > 0, "{what}: never reached max levels");
        assert_eq!(f.levels(), max as usize);
        assert_eq!(f.len(), items.len(), "{what}");
        all_found(&f, &items, &what);
        // Remove each inserted copy (items are distinct u64s; duplicates allowed): all succeed,
        // and then the filter is empty.
        for it in &items {
            assert!(f.remove(it), "{what}: remove of inserted {it:#x} failed");
        }
        assert_eq!(f.len(), 0, "{what}");
        for it in items.iter().take(1000) {
            assert_eq!(f.count(it), 0, "{what}");
            assert!(!f.contains(it), "{what}: empty filter contains {it:#x}");
        }
    }
}

#[test]
fn extreme_widths_and_tiny_capacities() {
    let s = seed("extreme_widths_and_tiny_capacities");
    let mut rng = Rng::new(s);
    for bits in [1u32, 2, 3, 4, 7, 31, 32] {
        for (cap, factor) in [(1usize, 2u32), (1, 3), (2, 2), (2, 3), (3, 1), (1, 7)] {
            let what = format!("cap {cap} × {factor} bits {bits}");
            let Ok(f) = CuckooFilter::builder()
                .capacity(cap)
                .expansion(factor)
                .fingerprint_bits(bits)
                .max_levels(24)
                .build()
            else {
                println!("{what}: not buildable");
                continue;
            };
            let limit = if factor == 1 { 3_000 } else { 200_000 };
            let mut items = Vec::new();
            while items.len() < limit {
                let it = rng.next_u64();
                match f.insert(&it) {
                    Ok(()) => items.push(it),
                    Err(InsertError::ItemBucketsFull) => {}
                    Err(_) => break,
                }
            }
            println!("{what}: {} items, {} levels", items.len(), f.levels());
            all_found(&f, &items, &what);
        }
    }
    // Rate-derived widths that reach 32 bits in later levels.
    for (rate, max) in [(1e-7, 8u32), (1e-8, 4), (2e-8, 6), (1e-6, 64), (3e-7, 40)] {
        for (cap, factor) in [(1usize, 2u32), (3, 3), (10, 1)] {
            let what = format!("rate {rate} max {max} cap {cap} × {factor}");
            let Ok(f) = CuckooFilter::builder()
                .capacity(cap)
                .expansion(factor)
                .false_positive_rate(rate)
                .max_levels(max)
                .build()
            else {
                println!("{what}: not buildable");
                continue;
            };
            let mut items = Vec::new();
            while items.len() < 100_000 {
                let it = rng.next_u64();
                match f.insert(&it) {
                    Ok(()) => items.push(it),
                    Err(InsertError::ItemBucketsFull) => {}
                    Err(_) => break,
                }
            }
            let widths: Vec<u32> = f.level_stats().iter().map(|l| l.fingerprint_bits).collect();
            println!("{what}: {} items, widths {widths:?}", items.len());
            all_found(&f, &items, &what);
        }
    }
}

#[test]
fn count_and_remove_consistent_with_contains_in_grown_filters() {
    let s = seed("count_and_remove_consistent_with_contains_in_grown_filters");
    let mut rng = Rng::new(s);
    for (cap, factor, bits) in [
        (1, 2, Some(8)),
        (3, 3, None),
        (16, 2, Some(4)),
        (300, 1, None),
    ] {
        let what = format!("cap {cap} × {factor} bits {bits:?}");
        let f = grown(cap, factor, bits, 40);
        // Distinct items, each inserted 1..=3 times, interleaved so copies land in several levels.
        let distinct: Vec<u64> = (0..3_000).map(|_| rng.next_u64()).collect();
        let mut copies = vec![0usize; distinct.len()];
        for round in 0..3 {
            for (i, it) in distinct.iter().enumerate() {
                if round == 0 || rng.below(2) == 0 {
                    match f.insert(it) {
                        Ok(()) => copies[i] += 1,
                        Err(InsertError::ItemBucketsFull) => {}
                        Err(e) => panic!("{what}: {e:?}"),
                    }
                }
            }
        }
        println!("{what}: {} levels", f.levels());
        let total: usize = copies.iter().sum();
        assert_eq!(f.len(), total);
        for (i, it) in distinct.iter().enumerate() {
            assert!(
                f.count(it) >= copies[i],
                "{what}: count below copies for {it:#x}"
            );
        }
        // Remove half the items entirely; the rest stay found by both lookups.
        let (gone, kept) = distinct.split_at(distinct.len() / 2);
        for (i, it) in gone.iter().enumerate() {
            for c in 0..copies[i] {
                assert!(f.remove(it), "{what}: copy {c} of {it:#x} not removed");
            }
        }
        let kept_present: Vec<u64> = kept
            .iter()
            .zip(&copies[gone.len()..])
            .filter(|(_, &c)| c > 0)
            .map(|(&it, _)| it)
            .collect();
        all_found(&f, &kept_present, &format!("{what} after half removed"));
        for (j, it) in kept.iter().enumerate() {
            let c = copies[gone.len() + j];
            assert!(f.count(it) >= c, "{what}");
            for k in 0..c {
                assert!(f.remove(it), "{what}: copy {k} of kept {it:#x} not removed");
            }
        }
        assert_eq!(f.len(), 0, "{what}");
        for it in &distinct {
            assert_eq!(f.count(it), 0, "{what}");
            assert!(!f.contains(it), "{what}: empty filter contains {it:#x}");
        }
        let mut found = Vec::new();
        f.contains_many(&distinct, &mut found);
        assert!(
            found.iter().all(|&b| !b),
            "{what}: empty filter contains_many"
        );
    }
}

/// Edge hashes (low word 0 or tiny, so a fingerprint truncates to 0 in some level; high word
/// 0 or all ones, the first and last buckets) among random ones, in filters whose widths
/// change between levels.
#[test]
fn edge_hashes_with_identity_hasher_across_widening_levels() {
    let s = seed("edge_hashes_with_identity_hasher_across_widening_levels");
    let mut rng = Rng::new(s);
    for (cap, factor, rate, bits) in [
        (2usize, 2u32, Some(1e-6), None),
        (1, 3, Some(1e-7), None),
        (10, 1, Some(1e-6), None),
        (5, 2, None, Some(32u32)),
        (5, 2, None, Some(1)),
        (3, 5, Some(1e-3), None),
    ] {
        let what = format!("cap {cap} × {factor} rate {rate:?} bits {bits:?}");
        let b = CuckooFilter::builder()
            .capacity(cap)
            .expansion(factor)
            .max_levels(if factor == 1 { 8 } else { 16 })
            .hasher(Identity);
        let b = match (rate, bits) {
            (Some(r), _) => b.false_positive_rate(r),
            (_, Some(w)) => b.fingerprint_bits(w),
            _ => b,
        };
        let Ok(f) = b.build() else {
            println!("{what}: not buildable");
            continue;
        };
        let mut items = Vec::new();
        for n in 0..60_000u64 {
            let hi = match n % 7 {
                0 => 0,
                1 => 0xFFFF_FFFF,
                2 => rng.next_u64() >> 32,
                _ => rng.next_u64() >> 32,
            };
            let lo = match n % 5 {
                0 => 0,
                1 => rng.below(1 << (n % 32)),
                2 => 0xFFFF_FFFF,
                _ => rng.next_u64() & 0xFFFF_FFFF,
            };
            let it = (hi << 32) | lo;
            match f.insert(&it) {
                Ok(()) => items.push(it),
                Err(InsertError::ItemBucketsFull) => {}
                Err(_) => break,
            }
        }
        let widths: Vec<u32> = f.level_stats().iter().map(|l| l.fingerprint_bits).collect();
        println!("{what}: {} items, widths {widths:?}", items.len());
        for it in &items {
            assert!(f.contains(it), "{what}: {it:#x} not found");
        }
        let mut found = Vec::new();
        f.contains_many(&items, &mut found);
        for (i, &b) in found.iter().enumerate() {
            assert!(b, "{what}: {:#x} missed by contains_many", items[i]);
        }
        for it in &items {
            assert!(f.remove(it), "{what}: remove of {it:#x} failed");
        }
        assert_eq!(f.len(), 0, "{what}");
    }
}

/// Stable items stay found by both lookups while a writer grows the filter and churns (inserts
/// and removes other items, in every level, so misses fail validation and fall back).
#[test]
fn stable_items_found_while_writers_grow_and_remove() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let s = seed("stable_items_found_while_writers_grow_and_remove");
    let mut rng = Rng::new(s);
    for (cap, factor, bits) in [(1, 2, Some(8)), (4, 3, None), (3, 1, Some(16))] {
        let what = format!("cap {cap} × {factor} bits {bits:?}");
        let f = Arc::new(grown(cap, factor, bits, 64));
        let stable = Arc::new(fill_to(&f, &mut rng, 3, 1_000_000));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (f, stop) = (f.clone(), stop.clone());
            let mut rng = Rng::new(s ^ 0xABCD);
            std::thread::spawn(move || {
                let mut churn: Vec<u64> = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) && n < 400_000 {
                    n += 1;
                    if churn.len() > 2_000 || (!churn.is_empty() && rng.below(3) == 0) {
                        let i = rng.below(churn.len() as u64) as usize;
                        let it = churn.swap_remove(i);
                        assert!(f.remove(&it));
                    } else {
                        let it = rng.next_u64();
                        if f.insert(&it).is_ok() {
                            churn.push(it);
                        }
                    }
                }
            })
        };
        let reader = {
            let (f, stable) = (f.clone(), stable.clone());
            std::thread::spawn(move || {
                let mut found = Vec::new();
                for _ in 0..30 {
                    for it in stable.iter() {
                        assert!(f.contains(it), "stable {it:#x} missed");
                    }
                    f.contains_many(stable.iter(), &mut found);
                    assert!(
                        found.iter().all(|&b| b),
                        "contains_many missed a stable item"
                    );
                }
            })
        };
        let r = reader.join();
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        r.unwrap_or_else(|_| panic!("{what}: reader failed"));
        println!("{what}: {} levels", f.levels());
        all_found(&f, &stable, &what);
    }
}
