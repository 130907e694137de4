//! Every bucket layout ([`Layout::Packed`], [`Layout::Compact`], [`Layout::OneWord`]) at every
//! fingerprint width, single-threaded: no false negatives against a model of counts (buckets at
//! the end of the table, every position in a word, up to 8 copies of an item), a failed insert
//! changes nothing, a filter built for `n` items takes `n` distinct items, and the memory and
//! false-positive rate at the documented targets.

use std::collections::HashMap;

use atomic_cuckoo::{CuckooFilter, InsertError, Layout};

use crate::common;

const LAYOUTS: [Layout; 3] = [Layout::Packed, Layout::Compact, Layout::OneWord];
/// Widths whose 4-lane buckets straddle words (packed `4f` or semi-sorted `4f - 4` bits), and
/// 32 (128-bit packed buckets).
const STRADDLING: [u32; 11] = [5, 7, 9, 10, 11, 12, 13, 17, 21, 31, 32];

fn filter(layout: Layout, bits: u32, capacity: usize) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .fingerprint_bits(bits)
        .layout(layout)
        .build()
        .unwrap()
}

/// Checks the filter against the model: every item the model holds is found and counted at
/// least as often (more copies only from items sharing its fingerprint and buckets), and the
/// length is the model's total.
fn check_model(f: &CuckooFilter, model: &HashMap<u64, usize>, ctx: &str) {
    let total: usize = model.values().sum();
    assert_eq!(f.len(), total, "{ctx}: len");
    for (k, &n) in model {
        if n > 0 {
            assert!(f.contains(k), "{ctx}: false negative for {k} ({n} copies)");
            assert!(f.count(k) >= n, "{ctx}: count of {k} {} < {n}", f.count(k));
        }
    }
}

/// Random inserts (keys drawn from a small pool, so that copies pile up), removes of present
/// items, lookups and counts on tiny tables, checked against a model of counts after every few
/// operations; then remove everything, then clear, clone and shrink_to_fit.
#[test]
fn random_operations_agree_with_a_model_in_every_layout_and_width() {
    let seed = common::seed("layout model");
    let mut rng = common::Rng::new(seed);
    for layout in LAYOUTS {
        for bits in 4..=32 {
            let ctx = format!("{layout:?} f={bits} seed={seed}");
            let f = filter(layout, bits, 40 + rng.below(80) as usize);
            let pool = common::distinct_keys(rng.next_u64(), f.capacity());
            let mut model: HashMap<u64, usize> = HashMap::new();
            for step in 0..2_000 {
                let k = pool[rng.below(pool.len() as u64) as usize];
                let held = model.get(&k).copied().unwrap_or(0);
                match rng.below(4) {
                    0 | 1 => {
                        let before = f.count(&k);
                        match f.insert(&k) {
                            Ok(()) => {
                                *model.entry(k).or_default() += 1;
                                assert_eq!(f.count(&k), before + 1, "{ctx}: count after insert");
                            }
                            Err(e) => {
                                assert!(
                                    matches!(e, InsertError::Full | InsertError::ItemBucketsFull),
                                    "{ctx}: {e:?}"
                                );
                                assert_eq!(f.count(&k), before, "{ctx}: failed insert changed it");
                            }
                        }
                    }
                    2 if held > 0 => {
                        let before = f.count(&k);
                        assert!(f.remove(&k), "{ctx}: remove of a held item failed");
                        assert_eq!(f.count(&k), before - 1, "{ctx}: count after remove");
                        *model.get_mut(&k).unwrap() -= 1;
                    }
                    _ => {
                        if held > 0 {
                            assert!(f.contains(&k), "{ctx}: false negative");
                        }
                    }
                }
                if step % 50 == 0 {
                    check_model(&f, &model, &ctx);
                }
            }
            check_model(&f, &model, &ctx);
            let copy = f.clone();
            let kept = model.clone();
            check_model(&copy, &model, &format!("{ctx} (clone)"));
            for (k, n) in model.iter_mut() {
                while *n > 0 {
                    assert!(f.remove(k), "{ctx}: draining");
                    *n -= 1;
                }
            }
            assert_eq!(f.len(), 0, "{ctx}: drained");
            assert!(
                pool.iter().all(|k| !f.contains(k)),
                "{ctx}: drained table not empty"
            );
            // The clone was not touched by the drain.
            check_model(&copy, &kept, &format!("{ctx} (clone after drain)"));
            copy.clear();
            assert_eq!(copy.len(), 0);
            assert!(
                pool.iter().all(|k| !copy.contains(k)),
                "{ctx}: cleared table not empty"
            );
        }
    }
}

/// One item inserted 8 times (two 4-lane buckets), then removed 8 times: each step counted
/// exactly, in every layout and width, for items all over a small table (so every bucket
/// position in a word and the last buckets are hit).
#[test]
fn eight_copies_of_an_item_are_counted_and_removed_in_every_layout() {
    let seed = common::seed("eight copies");
    let mut rng = common::Rng::new(seed);
    for layout in LAYOUTS {
        for bits in 4..=32 {
            let f = filter(layout, bits, 200);
            let keys = common::distinct_keys(rng.next_u64(), 300);
            let mut tested = 0;
            for k in keys {
                // Alone in the table: other items' fingerprints cannot be counted with it.
                assert_eq!(f.len(), 0);
                let mut copies = 0;
                while copies < 8 {
                    match f.insert(&k) {
                        Ok(()) => copies += 1,
                        Err(InsertError::ItemBucketsFull | InsertError::Full) => break,
                        Err(e) => panic!("{e:?}"),
                    }
                    assert_eq!(f.count(&k), copies, "{layout:?} f={bits} seed={seed}");
                }
                // Two buckets of 4 lanes (more in one-word buckets), or one when the
                // fingerprint maps the bucket onto itself.
                assert!(copies >= 4, "{layout:?} f={bits}: only {copies} copies fit");
                while copies > 0 {
                    assert!(f.remove(&k), "{layout:?} f={bits}: remove copy {copies}");
                    copies -= 1;
                    assert_eq!(f.count(&k), copies, "{layout:?} f={bits} seed={seed}");
                }
                assert!(!f.contains(&k));
                assert!(!f.remove(&k));
                tested += 1;
            }
            assert_eq!(tested, 300);
        }
    }
}

/// Tiny tables filled to their first failure, over and over: a failed insert leaves every item's
/// count, the length and every lookup as they were.
#[test]
fn a_failed_insert_changes_nothing_in_every_layout_and_width() {
    let seed = common::seed("failed insert layouts");
    let mut rng = common::Rng::new(seed);
    for layout in LAYOUTS {
        for bits in 4..=32 {
            let ctx = format!("{layout:?} f={bits} seed={seed}");
            let f = filter(layout, bits, 30 + rng.below(60) as usize);
            let keys = common::distinct_keys(rng.next_u64(), f.slots() * 4);
            let mut inserted = Vec::new();
            let mut failures = 0;
            for k in &keys {
                let counts: Vec<usize> = inserted.iter().map(|x| f.count(x)).collect();
                let len = f.len();
                if f.insert(k).is_ok() {
                    inserted.push(*k);
                    continue;
                }
                failures += 1;
                assert_eq!(f.len(), len, "{ctx}: len after a failed insert");
                for (x, &n) in inserted.iter().zip(&counts) {
                    assert_eq!(f.count(x), n, "{ctx}: count of {x} after a failed insert");
                    assert!(f.contains(x), "{ctx}: {x} lost by a failed insert");
                }
                if failures == 5 {
                    break;
                }
            }
            assert!(failures > 0, "{ctx}: never filled");
        }
    }
}

/// A filter built for `n` items (no growth) takes `n` distinct items, for every layout and
/// width, `n` from 1 to 100,000 (a seeded sample of sizes; 100,000 itself at the widths whose
/// buckets straddle words). The documented exception: `OneWord` buckets of two or three lanes
/// in tables of up to a hundred items fail about one item set in 10,000, so one such failure
/// in the whole run is let pass (and printed); the chance of two is about one in 100,000.
#[test]
fn a_filter_built_for_n_items_takes_n_distinct_items() {
    let seed = common::seed("capacity promise");
    let mut rng = common::Rng::new(seed);
    let mut few_lane_failures = 0;
    for layout in LAYOUTS {
        for bits in 4..=32 {
            let mut sizes: Vec<usize> = vec![1, 2, 3, 5, 8, 13];
            sizes.extend((0..3).map(|_| 1 + rng.below(100) as usize));
            sizes.extend((0..2).map(|_| 100 + rng.below(2_000) as usize));
            sizes.push(2_000 + rng.below(20_000) as usize);
            if STRADDLING.contains(&bits) {
                sizes.push(100_000);
            }
            for n in sizes {
                let f = filter(layout, bits, n);
                assert!(f.capacity() >= n, "{layout:?} f={bits} n={n}");
                let key_seed = rng.next_u64();
                let mut failed = None;
                for (i, k) in common::distinct_keys(key_seed, n).iter().enumerate() {
                    if let Err(e) = f.insert(k) {
                        let what = format!(
                            "{layout:?} f={bits} n={n}: insert {i} failed ({e:?}), key seed \
                             {key_seed}, seed {seed}"
                        );
                        let few_lanes = layout == Layout::OneWord && bits >= 17;
                        assert!(few_lanes && n <= 100 && few_lane_failures == 0, "{what}");
                        println!("the documented exception: {what}");
                        few_lane_failures += 1;
                        failed = Some(i);
                        break;
                    }
                }
                assert_eq!(f.len(), failed.unwrap_or(n));
            }
        }
    }
}

/// The same promise for filters sized by a target rate (the default way to build one).
#[test]
fn a_filter_built_for_n_items_at_a_rate_takes_n_distinct_items() {
    let seed = common::seed("capacity promise at a rate");
    let mut rng = common::Rng::new(seed);
    for layout in LAYOUTS {
        for rate in [0.2, 0.05, 0.01, 0.001, 1e-5, 1e-8] {
            for n in [
                1,
                7,
                1 + rng.below(1_000) as usize,
                30_000 + rng.below(70_000) as usize,
            ] {
                let f = CuckooFilter::builder()
                    .capacity(n)
                    .false_positive_rate(rate)
                    .layout(layout)
                    .build()
                    .unwrap();
                for (i, k) in common::distinct_keys(rng.next_u64(), n).iter().enumerate() {
                    if let Err(e) = f.insert(k) {
                        panic!(
                            "{layout:?} rate={rate} n={n}: insert {i} failed ({e:?}), seed {seed}"
                        );
                    }
                }
            }
        }
    }
}

/// Targets of bits per item at 1,000,000 items, by rate: (rate, default layout, compact).
const MEMORY_TARGETS: [(f64, f64, f64); 4] = [
    (0.03, 8.6, 7.6),
    (0.01, 10.8, 9.5),
    (0.001, 14.0, 12.9),
    (0.0001, 18.3, 16.9),
];

/// Builds `capacity(n).false_positive_rate(rate)` in `layout`, fills it with `n` distinct items
/// and probes `probes` others: (bits per item, measured rate, false positives).
fn memory_and_rate(
    layout: Layout,
    n: usize,
    rate: f64,
    probes: usize,
    seed: u64,
) -> (f64, f64, usize) {
    let f = CuckooFilter::builder()
        .capacity(n)
        .false_positive_rate(rate)
        .layout(layout)
        .build()
        .unwrap();
    let keys = common::distinct_keys(seed, n + probes);
    for k in &keys[..n] {
        f.insert(k).unwrap();
    }
    let hits = keys[n..].iter().filter(|k| f.contains(*k)).count();
    let bits = f.memory_usage() as f64 * 8.0 / n as f64;
    let measured = hits as f64 / probes as f64;
    println!(
        "{layout:?} n={n} target {rate:e}: f={} {bits:.2} bits/item, {hits} false positives in \
         {probes} probes: {measured:.3e} (predicted {:.3e})",
        f.fingerprint_bits(),
        f.false_positive_rate()
    );
    (bits, measured, hits)
}

/// Whether `hits` in `probes` exceeds the rate `p` by a clear margin: more than 1.25 times the
/// expected count plus four standard deviations.
fn clearly_above(hits: usize, probes: usize, p: f64) -> bool {
    let expected = p * probes as f64;
    hits as f64 > 1.25 * expected + 4.0 * expected.sqrt()
}

/// At 1,000,000 items: the measured rate (4M absent probes) is at most the target, and the
/// memory per item within the documented targets, for the default and the compact layout.
#[test]
fn memory_and_rate_at_the_targets_for_a_million_items() {
    let seed = common::fixed_seed("memory at targets", 0x1e6);
    let mut failures = Vec::new();
    for (rate, packed, compact) in MEMORY_TARGETS {
        for (layout, target) in [(Layout::Packed, packed), (Layout::Compact, compact)] {
            let (bits, measured, _) = memory_and_rate(layout, 1_000_000, rate, 4_000_000, seed);
            if measured > rate {
                failures.push(format!(
                    "{layout:?} at {rate}: measured rate {measured:.3e}"
                ));
            }
            if bits > target {
                failures.push(format!("{layout:?} at {rate}: {bits:.2} bits > {target}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same at 100,000 items and 400,000 probes: the rate must not exceed the target by a
/// clear margin, and memory must stay within 0.35 bits per item of the targets (the lock
/// stripes and the spare buckets of a smaller table; see the test above for the targets
/// themselves): a layout that lost its packing, or a rate that needed a wider fingerprint, fails.
#[test]
fn memory_and_rate_near_the_targets_for_100k_items() {
    let seed = common::fixed_seed("memory near targets", 0x1e5);
    for (rate, packed, compact) in MEMORY_TARGETS {
        for (layout, target) in [(Layout::Packed, packed), (Layout::Compact, compact)] {
            let probes = 400_000;
            let (bits, _, hits) = memory_and_rate(layout, 100_000, rate, probes, seed);
            assert!(
                !clearly_above(hits, probes, rate),
                "{layout:?} at {rate}: {hits} false positives in {probes} probes"
            );
            assert!(
                bits <= target + 0.35,
                "{layout:?} at {rate}: {bits:.2} bits per item, target {target}"
            );
        }
    }
}
