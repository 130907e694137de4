//! One-pass lookups over grown filters, single-threaded, against an exact oracle.
//!
//! The exact oracle: with no writer running, `contains(x)` must equal `count(x) > 0` for
//! *every* `x`, inserted or not. `count` derives each level's key from the hash on its own
//! (`Table::key` per level), while `contains` and `contains_many` derive older levels' keys
//! from the newest level's (`KeyMapper::narrow`): any level where the two disagree shows up as
//! an item one of them finds and the other does not. Narrow fingerprints (4, 5, 8 bits) make
//! false positives common, so the comparison also runs over the many absent items that match
//! some stored fingerprint — a false-positive-proof check of narrowing in every level.
//! Inserted items are also asserted present (no false negatives), and `contains_many` must
//! answer exactly what `contains` answers per item, in batches of every length.

use std::hash::BuildHasher;

use crate::common::{seed, Identity, Rng};
use atomic_cuckoo::{CuckooFilter, InsertError};

/// Batch lengths around `BATCH` (64) and a few others.
const LENGTHS: [usize; 10] = [0, 1, 2, 63, 64, 65, 127, 128, 129, 200];

/// Every assertion of this file on one filter: `present` must be found by both lookups,
/// `count >= 1`; for every probe, `contains == (count > 0)`; `contains_many` answers as
/// `contains` over `present ++ probes` and over mixed batches of every length (duplicates,
/// present and absent). Returns how many absent probes were false positives.
fn check<S: BuildHasher>(
    f: &CuckooFilter<S>,
    present: &[u64],
    probes: &[u64],
    what: &str,
) -> usize {
    for it in present {
        assert!(
            f.contains(it),
            "{what}: inserted {it:#x} not found by contains"
        );
        assert!(f.count(it) >= 1, "{what}: inserted {it:#x} has count 0");
    }
    let mut positives = 0;
    let mut expected = Vec::with_capacity(probes.len());
    for p in probes {
        let c = f.count(p);
        let hit = f.contains(p);
        assert_eq!(
            hit,
            c > 0,
            "{what}: probe {p:#x}: contains {hit} but count {c} ({} levels)",
            f.levels()
        );
        positives += usize::from(hit);
        expected.push(hit);
    }
    let mut found = Vec::new();
    f.contains_many(present, &mut found);
    assert_eq!(found.len(), present.len());
    if let Some(i) = found.iter().position(|&b| !b) {
        panic!("{what}: contains_many missed inserted {:#x}", present[i]);
    }
    f.contains_many(probes, &mut found);
    assert_eq!(
        found, expected,
        "{what}: contains_many differs from contains on probes"
    );
    // Mixed batches: present and absent items interleaved, with duplicates, every length.
    let mut rng = Rng::new(present.len() as u64 ^ probes.len() as u64 ^ 0xA77AC5);
    for len in LENGTHS {
        let mut batch: Vec<u64> = Vec::with_capacity(len);
        for i in 0..len {
            let x = if i % 5 == 4 {
                batch[i - 1] // a duplicate, next to its twin
            } else if rng.below(3) == 0 && !present.is_empty() {
                present[rng.below(present.len() as u64) as usize]
            } else if !probes.is_empty() {
                probes[rng.below(probes.len() as u64) as usize]
            } else {
                rng.next_u64()
            };
            batch.push(x);
        }
        f.contains_many(&batch, &mut found);
        assert_eq!(found.len(), len, "{what}: batch of {len}");
        for (x, &got) in batch.iter().zip(&found) {
            assert_eq!(got, f.contains(x), "{what}: batch of {len}: {x:#x}");
        }
        // Through a non-slice iterator too (no exact size hint).
        f.contains_many(batch.iter().filter(|_| true), &mut found);
        for (x, &got) in batch.iter().zip(&found) {
            assert_eq!(
                got,
                f.contains(x),
                "{what}: iterator batch of {len}: {x:#x}"
            );
        }
    }
    positives
}

fn build(capacity: usize, factor: u32, max_levels: u32, width: Width) -> CuckooFilter {
    let b = CuckooFilter::builder()
        .capacity(capacity)
        .expansion(factor)
        .max_levels(max_levels);
    match width {
        Width::Bits(bits) => b.fingerprint_bits(bits),
        Width::Rate(rate) => b.false_positive_rate(rate),
    }
    .build()
    .unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Width {
    Bits(u32),
    Rate(f64),
}

/// Inserts fresh random items (one in 8 inserted twice, and every 4th round through
/// `insert_many`) until the filter has `levels` levels, or `cap` items, or an insert fails for
/// a reason other than a hot pair; returns the inserted items (with repeats).
fn grow_to<S: BuildHasher>(
    f: &CuckooFilter<S>,
    rng: &mut Rng,
    levels: usize,
    cap: usize,
) -> Vec<u64> {
    let mut items = Vec::new();
    let mut round = 0u64;
    while f.levels() < levels && items.len() < cap {
        round += 1;
        if round.is_multiple_of(4) {
            let batch: Vec<u64> = (0..rng.below(150) + 1).map(|_| rng.next_u64()).collect();
            match f.insert_many(&batch) {
                Ok(()) => items.extend_from_slice(&batch),
                Err(e) => {
                    items.extend_from_slice(&batch[..e.index]);
                    match e.error {
                        InsertError::ItemBucketsFull => {}
                        _ => break,
                    }
                }
            }
            continue;
        }
        let it = rng.next_u64();
        let times = if rng.below(8) == 0 { 2 } else { 1 };
        for _ in 0..times {
            match f.insert(&it) {
                Ok(()) => items.push(it),
                Err(InsertError::ItemBucketsFull) => {}
                Err(_) => return items,
            }
        }
    }
    items
}

fn probes(rng: &mut Rng, n: usize) -> Vec<u64> {
    (0..n).map(|_| rng.next_u64()).collect()
}

/// Many shapes: factors 1..5 and 7, capacities 1..5000, fixed widths (efficient and not),
/// rate-derived widths that change from level to level, max_levels 2..64.
#[test]
fn contains_matches_count_for_every_probe_in_every_shape() {
    let s = seed("contains_matches_count_for_every_probe_in_every_shape");
    let mut rng = Rng::new(s);
    let shapes: &[(usize, u32, u32, Width, usize)] = &[
        // (capacity, factor, max_levels, width, target levels)
        (1, 2, 64, Width::Bits(4), 12),
        (1, 3, 64, Width::Bits(5), 9),
        (2, 4, 64, Width::Bits(8), 7),
        (3, 5, 64, Width::Bits(4), 6),
        (1, 7, 64, Width::Bits(8), 5),
        (5000, 2, 4, Width::Bits(4), 4),
        (7, 3, 16, Width::Bits(13), 8),
        (9, 2, 3, Width::Bits(31), 3),
        (1, 2, 2, Width::Bits(4), 2),
        (1, 2, 20, Width::Rate(1e-4), 14),
        (3, 3, 14, Width::Rate(0.05), 9),
        (1, 1, 64, Width::Rate(0.2), 30),
        (10, 5, 10, Width::Rate(0.2), 5),
        (1, 4, 20, Width::Rate(1e-4), 8),
        (1, 1, 64, Width::Rate(1e-3), 40),
        (2, 1, 64, Width::Bits(4), 64),
        (100, 1, 5, Width::Bits(8), 5),
        (64, 2, 64, Width::Rate(0.01), 8),
        (1000, 3, 8, Width::Rate(3e-5), 4),
    ];
    let mut total_positives = 0;
    for &(capacity, factor, max_levels, width, levels) in shapes {
        let what = format!("cap {capacity} × {factor} max {max_levels} {width:?}");
        let f = build(capacity, factor, max_levels, width);
        let items = grow_to(&f, &mut rng, levels, 150_000);
        let widths: Vec<u32> = f.level_stats().iter().map(|l| l.fingerprint_bits).collect();
        println!(
            "{what}: {} items, {} levels, widths {widths:?}",
            items.len(),
            f.levels()
        );
        assert!(
            f.levels() >= levels.min(max_levels as usize),
            "{what}: did not grow"
        );
        let mut ps = probes(&mut rng, 20_000);
        ps.extend(items.iter().step_by(7).copied());
        let positives = check(&f, &items, &ps, &what);
        println!("{what}: {positives} probes positive");
        total_positives += positives;
    }
    // The oracle must have seen false positives (and so misses validated in many levels).
    assert!(total_positives > 50_000, "{total_positives} positives");
}

/// Every level count from 1 to 64 with factor 1 (tiny levels): the one-pass lookup works in
/// chunks of 16 levels, so 16, 17, 32, 33, 48, 49 and 64 levels are all boundaries. Checked
/// after each level is added, with items in every level (the oldest ones in the last chunk).
#[test]
fn every_level_count_up_to_64_including_chunk_boundaries() {
    let s = seed("every_level_count_up_to_64_including_chunk_boundaries");
    let mut rng = Rng::new(s);
    for (capacity, width) in [
        (1, Width::Bits(4)),
        (3, Width::Bits(8)),
        (1, Width::Rate(0.01)),
        (2, Width::Rate(0.2)),
    ] {
        let what = format!("cap {capacity} × 1 {width:?}");
        let f = build(capacity, 1, 64, width);
        let mut items = Vec::new();
        let mut last = f.levels();
        let absent = probes(&mut rng, 3_000);
        while f.levels() < 64 {
            items.extend(grow_to(&f, &mut rng, last + 1, usize::MAX));
            assert!(f.levels() > last, "{what}: stuck at {last} levels");
            last = f.levels();
            let what = format!("{what} at {last} levels");
            check(&f, &items, &absent, &what);
        }
        assert_eq!(f.levels(), 64);
        // Full: the next distinct item cannot go anywhere, and every item is still found.
        let mut refused = 0;
        for _ in 0..200 {
            match f.insert(&rng.next_u64()) {
                Err(InsertError::MaxLevelsReached { levels: 64 }) => refused += 1,
                Err(InsertError::ItemBucketsFull) => {}
                Ok(()) => {}
                Err(e) => panic!("{what}: {e:?}"),
            }
        }
        println!(
            "{what}: {} items, {refused} refused at 64 levels",
            items.len()
        );
        let more = grow_to(&f, &mut rng, 65, 2_000);
        items.extend(more);
        check(&f, &items, &absent, &format!("{what} full"));
    }
}

/// Removes: each item inserted 1..=3 times across growth; removing all copies of half of them,
/// then some copies of the rest, keeps the oracle exact and the rest found; a removed item is
/// found only when `count` says another item's copy matches it.
#[test]
fn removes_keep_contains_equal_to_count() {
    let s = seed("removes_keep_contains_equal_to_count");
    let mut rng = Rng::new(s);
    for (capacity, factor, width) in [
        (1, 2, Width::Bits(4)),
        (2, 3, Width::Bits(5)),
        (4, 5, Width::Rate(1e-5)),
        (200, 1, Width::Bits(8)),
        (50, 4, Width::Rate(0.05)),
    ] {
        let what = format!("cap {capacity} × {factor} {width:?}");
        let f = build(capacity, factor, 64, width);
        let distinct = probes(&mut rng, 6_000);
        let mut copies = vec![0usize; distinct.len()];
        for round in 0..3 {
            for (i, it) in distinct.iter().enumerate() {
                if round == 0 || rng.below(3) == 0 {
                    match f.insert(it) {
                        Ok(()) => copies[i] += 1,
                        Err(InsertError::ItemBucketsFull) => {}
                        Err(e) => panic!("{what}: {e:?}"),
                    }
                }
            }
        }
        println!("{what}: {} levels, {} copies", f.levels(), f.len());
        let absent = probes(&mut rng, 10_000);
        let present: Vec<u64> = distinct
            .iter()
            .zip(&copies)
            .filter(|(_, &c)| c > 0)
            .map(|(&x, _)| x)
            .collect();
        check(&f, &present, &absent, &format!("{what} filled"));
        let half = distinct.len() / 2;
        for i in 0..half {
            for _ in 0..copies[i] {
                assert!(f.remove(&distinct[i]), "{what}: inserted copy not removed");
            }
            copies[i] = 0;
        }
        for i in half..distinct.len() {
            if copies[i] > 1 {
                assert!(f.remove(&distinct[i]));
                copies[i] -= 1;
            }
        }
        let kept: Vec<u64> = (half..distinct.len())
            .filter(|&i| copies[i] > 0)
            .map(|i| distinct[i])
            .collect();
        let mut ps = absent.clone();
        ps.extend_from_slice(&distinct[..half]);
        check(&f, &kept, &ps, &format!("{what} half removed"));
        let removed_found = distinct[..half].iter().filter(|x| f.contains(x)).count();
        println!("{what}: {removed_found} of {half} removed items still match another's copy");
        for i in half..distinct.len() {
            for _ in 0..copies[i] {
                assert!(f.remove(&distinct[i]), "{what}: kept copy not removed");
            }
        }
        assert_eq!(f.len(), 0, "{what}");
        let mut found = Vec::new();
        f.contains_many(&distinct, &mut found);
        assert!(
            found.iter().all(|&b| !b),
            "{what}: empty filter contains_many"
        );
        assert!(
            distinct.iter().all(|x| !f.contains(x)),
            "{what}: empty filter contains"
        );
    }
}

/// Life cycle: grow, clear, refill (into the newest level while all are kept), shrink_to_fit
/// after emptying the newest levels, regrow past the old count, save and restore (through
/// `write_to`/`read_from` and bytes), clone: the oracle holds at every step and a restored or
/// cloned filter answers every probe exactly as the original.
#[test]
fn clear_shrink_snapshot_clone_keep_lookups_exact() {
    let s = seed("clear_shrink_snapshot_clone_keep_lookups_exact");
    let mut rng = Rng::new(s);
    for (capacity, factor, max, width) in [
        (1, 2, 24, Width::Bits(4)),
        (2, 3, 24, Width::Rate(1e-4)),
        (5, 5, 12, Width::Bits(12)),
        (1, 1, 64, Width::Bits(5)),
        (30, 4, 8, Width::Rate(1e-3)),
    ] {
        let what = format!("cap {capacity} × {factor} max {max} {width:?}");
        let mut f = build(capacity, factor, max, width);
        let absent = probes(&mut rng, 5_000);
        let first = grow_to(&f, &mut rng, 6, 200_000);
        check(&f, &first, &absent, &format!("{what} grown"));
        let grown = f.levels();
        f.clear();
        assert_eq!(f.len(), 0);
        assert_eq!(f.levels(), grown, "{what}: clear keeps the levels");
        assert!(
            first.iter().take(5_000).all(|x| !f.contains(x)),
            "{what}: cleared"
        );
        // Refill: goes into the newest level only; older (empty) levels still probed.
        let refill = grow_to(&f, &mut rng, grown + 1, 3_000);
        check(
            &f,
            &refill,
            &absent,
            &format!("{what} refilled after clear"),
        );
        // Items into more levels, then removed: the newest levels are empty and shrink drops
        // them, keeping the refill.
        let before = f.levels();
        let extra = grow_to(&f, &mut rng, before + 2, 400_000);
        for x in extra.iter().rev() {
            assert!(f.remove(x), "{what}: remove of inserted extra failed");
        }
        f.shrink_to_fit();
        println!(
            "{what}: {grown} levels, {before} after refill, shrunk to {}",
            f.levels()
        );
        check(&f, &refill, &absent, &format!("{what} shrunk"));
        let again = grow_to(&f, &mut rng, f.levels() + 2, 400_000);
        let mut all = refill.clone();
        all.extend_from_slice(&again);
        check(&f, &all, &absent, &format!("{what} regrown after shrink"));

        let mut bytes = Vec::new();
        f.write_to(&mut bytes).unwrap();
        let g = CuckooFilter::read_from(&mut bytes.as_slice()).unwrap();
        let h = CuckooFilter::from_bytes(&f.to_bytes()).unwrap();
        let c = f.clone();
        let mut ps = absent.clone();
        ps.extend(all.iter().step_by(3).copied());
        for (name, other) in [("read_from", &g), ("from_bytes", &h), ("clone", &c)] {
            assert_eq!(other.levels(), f.levels(), "{what}: {name}");
            check(other, &all, &ps, &format!("{what} {name}"));
            for p in &ps {
                assert_eq!(other.contains(p), f.contains(p), "{what}: {name} {p:#x}");
            }
        }
        // The restored filter keeps growing correctly.
        let mut g = g;
        let later = grow_to(&g, &mut rng, g.levels() + 2, 400_000);
        all.extend_from_slice(&later);
        check(&g, &all, &absent, &format!("{what} restored then grown"));
        // Clear + shrink on the restored filter: back to one level, then regrown.
        g.clear();
        g.shrink_to_fit();
        assert_eq!(g.levels(), 1, "{what}");
        let fresh = grow_to(&g, &mut rng, 5, 200_000);
        check(
            &g,
            &fresh,
            &absent,
            &format!("{what} restored, cleared, regrown"),
        );
    }
}

/// Items of other types: empty strings and slices, unit, long strings; duplicates galore,
/// through `insert_many`; the batch lookup over `&str` items.
#[test]
fn empty_and_odd_items_and_duplicates() {
    let s = seed("empty_and_odd_items_and_duplicates");
    let mut rng = Rng::new(s);
    let f = build(1, 2, 32, Width::Bits(4));
    f.insert("").unwrap();
    f.insert(&[0u8; 0][..]).unwrap();
    f.insert(&()).unwrap();
    let words: Vec<String> = (0..20_000)
        .map(|i| format!("w{i}-{}", rng.next_u64() % 1000))
        .collect();
    // Duplicates: every word several times, through insert_many.
    let with_dups: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .chain(words.iter().step_by(3).map(String::as_str))
        .chain(std::iter::repeat_n("", 5))
        .collect();
    match f.insert_many(&with_dups) {
        Ok(()) => {}
        Err(e) => panic!("insert_many: {e:?}"),
    }
    println!("{} levels", f.levels());
    assert!(f.levels() > 8);
    assert!(f.contains(""));
    assert!(f.contains(&[0u8; 0][..]));
    assert!(f.contains(&()));
    let mut found = Vec::new();
    f.contains_many(&with_dups, &mut found);
    assert!(found.iter().all(|&b| b), "contains_many missed a word");
    for w in &words {
        assert!(f.contains(w.as_str()), "{w} not found");
        assert!(f.count(w.as_str()) >= 1);
    }
    // Absent strings: contains == count > 0.
    let absent: Vec<String> = (0..20_000).map(|i| format!("absent-{i}")).collect();
    for a in &absent {
        assert_eq!(f.contains(a.as_str()), f.count(a.as_str()) > 0, "{a}");
    }
    f.contains_many(absent.iter().map(String::as_str), &mut found);
    for (a, &got) in absent.iter().zip(&found) {
        assert_eq!(got, f.contains(a.as_str()), "{a}");
    }
    // "" inserted 6 times: 6 removes succeed.
    assert!(f.count("") >= 6);
    for _ in 0..6 {
        assert!(f.remove(""));
    }
    assert_eq!(f.contains(""), f.count("") > 0);
}

/// A hash, spelled out: the bucket word is the high half, the fingerprint the top of the low.
fn identity_hash(x: u64) -> u64 {
    Identity.hash_one(x)
}

/// Chosen hashes: the low word's top bits all zero (a fingerprint that reads 0, so 1, in some
/// levels but not others), exactly 1 at some level's width, all ones; the high word at the
/// edges of the bucket range and at every power of two (block boundaries of nested levels);
/// widths that change between levels. The oracle is exact on every probe.
#[test]
fn edge_hashes_exact_across_widening_levels() {
    let s = seed("edge_hashes_exact_across_widening_levels");
    let mut rng = Rng::new(s);
    assert_eq!(identity_hash(0x1234_5678_9ABC_DEF0), 0x1234_5678_9ABC_DEF0);
    let edge = |rng: &mut Rng| -> u64 {
        let hi = match rng.below(6) {
            0 => 0,
            1 => 0xFFFF_FFFF,
            2 => 1u64 << rng.below(32),
            3 => (1u64 << rng.below(32)) - 1,
            _ => rng.next_u64() >> 32,
        };
        let lo = match rng.below(7) {
            0 => 0,
            1 => 1u64 << rng.below(32), // top bit at a random width
            2 => (1u64 << rng.below(33)) - 1,
            3 => 0xFFFF_FFFF,
            4 => rng.below(1 << 12),
            _ => rng.next_u64() & 0xFFFF_FFFF,
        };
        (hi << 32) | lo
    };
    for (capacity, factor, width, max) in [
        (1usize, 2u32, Width::Rate(1e-4), 20u32),
        (2, 3, Width::Rate(0.05), 14),
        (1, 1, Width::Rate(0.2), 64),
        (3, 5, Width::Rate(1e-2), 8),
        (1, 4, Width::Bits(4), 10),
        (2, 2, Width::Bits(32), 14),
    ] {
        let what = format!("identity cap {capacity} × {factor} {width:?}");
        let b = CuckooFilter::builder()
            .capacity(capacity)
            .expansion(factor)
            .max_levels(max)
            .hasher(Identity);
        let f = match width {
            Width::Bits(bits) => b.fingerprint_bits(bits),
            Width::Rate(rate) => b.false_positive_rate(rate),
        }
        .build()
        .unwrap();
        let mut items = Vec::new();
        for _ in 0..60_000 {
            let x = edge(&mut rng);
            match f.insert(&x) {
                Ok(()) => items.push(x),
                Err(InsertError::ItemBucketsFull) => {}
                Err(_) => break,
            }
        }
        let widths: Vec<u32> = f.level_stats().iter().map(|l| l.fingerprint_bits).collect();
        println!("{what}: {} items, widths {widths:?}", items.len());
        let ps: Vec<u64> = (0..30_000).map(|_| edge(&mut rng)).collect();
        check(&f, &items, &ps, &what);
        for x in &items {
            assert!(f.remove(x), "{what}: remove of {x:#x}");
        }
        assert_eq!(f.len(), 0);
        let mut found = Vec::new();
        f.contains_many(&ps, &mut found);
        assert!(found.iter().all(|&b| !b), "{what}: empty");
    }
}
