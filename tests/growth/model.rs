//! Random operation sequences on tiny growing filters, checked against a multiset model.
//!
//! Every live item (inserted and not removed) must be found and counted at least as often as
//! it was inserted; remove of a live item returns true; len() equals the model's size (no
//! writer runs concurrently, so it is exact); a failed insert (Full / MaxLevelsReached)
//! changes nothing: same len, same levels, every live item still found.

use std::collections::HashMap;

use crate::format_model::{seed, Rng};
use atomic_cuckoo::{Builder, CuckooFilter, InsertError};

#[derive(Clone, Copy, Debug)]
enum W {
    Bits(u32),
    Rate(f64),
}

struct Case {
    capacity: usize,
    expansion: u32,
    max_levels: u32,
    width: W,
    key_space: u64,
}

fn build(c: &Case) -> CuckooFilter {
    let b = Builder::default()
        .capacity(c.capacity)
        .expansion(c.expansion)
        .max_levels(c.max_levels)
        .huge_pages(false);
    match c.width {
        W::Bits(bits) => b.fingerprint_bits(bits),
        W::Rate(r) => b.false_positive_rate(r),
    }
    .build()
    .unwrap()
}

fn random_case(rng: &mut Rng) -> Case {
    let capacity = 1 + rng.below(50) as usize;
    let expansion = [1u32, 2, 3, 4, 8][rng.below(5) as usize];
    let width = if rng.below(3) == 0 {
        W::Rate([0.5, 0.2, 0.05, 0.01, 0.001, 1e-5][rng.below(6) as usize])
    } else {
        W::Bits(4 + rng.below(29) as u32)
    };
    // Keep the largest possible level small: capacity * expansion^(levels-1) <= 2^16.
    let mut max_levels = 1 + rng.below(12) as u32;
    while max_levels > 1
        && (capacity as f64) * f64::from(expansion).powi(max_levels as i32 - 1) > 65536.0
    {
        max_levels -= 1;
    }
    // Small key spaces repeat keys (a multiset, hot keys); large ones mostly fresh keys.
    let key_space = [4u64, 20, 3 * capacity as u64 + 5, 1 << 40][rng.below(4) as usize];
    Case {
        capacity,
        expansion,
        max_levels,
        width,
        key_space,
    }
}

struct Model {
    copies: HashMap<u64, usize>,
    live: Vec<u64>,
}

impl Model {
    fn add(&mut self, k: u64) {
        *self.copies.entry(k).or_default() += 1;
        self.live.push(k);
    }
    fn copies(&self, k: u64) -> usize {
        self.copies.get(&k).copied().unwrap_or(0)
    }
    fn take(&mut self, at: usize) -> u64 {
        let k = self.live.swap_remove(at);
        let c = self.copies.get_mut(&k).unwrap();
        *c -= 1;
        if *c == 0 {
            self.copies.remove(&k);
        }
        k
    }
}

fn check_all(f: &CuckooFilter, m: &Model, ctx: &dyn Fn() -> String) {
    assert_eq!(f.len(), m.live.len(), "len() != model size ({})", ctx());
    for (k, &c) in &m.copies {
        let (found, counted) = (f.contains(k), f.count(k));
        assert!(
            found && counted >= c,
            "live item {k} ({c} copies): contains={found} count={counted} ({})",
            ctx()
        );
    }
    let mut many = Vec::new();
    let keys: Vec<u64> = m.copies.keys().copied().collect();
    f.contains_many(&keys, &mut many);
    assert!(
        many.iter().all(|&b| b),
        "contains_many missed a live item ({})",
        ctx()
    );
}

fn run_case(seed: u64, case_no: usize, c: &Case, rng: &mut Rng, steps: usize) -> (usize, usize) {
    let f = build(c);
    let mut m = Model {
        copies: HashMap::new(),
        live: Vec::new(),
    };
    let mut failures = 0;
    for step in 0..steps {
        if rng.below(300) == 0 {
            // clear() empties every level and keeps them; the filter must work as new.
            let levels = f.levels();
            f.clear();
            m.copies.clear();
            m.live.clear();
            assert_eq!(
                (f.len(), f.levels()),
                (0, levels),
                "seed={seed} case={case_no}: clear"
            );
            continue;
        }
        let model_len = m.live.len();
        let ctx = || {
            format!(
                "seed={seed} case={case_no} step={step} capacity={} expansion={} max_levels={} \
                 width={:?} key_space={} levels={} len={} model before op={}",
                c.capacity,
                c.expansion,
                c.max_levels,
                c.width,
                c.key_space,
                f.levels(),
                f.len(),
                model_len
            )
        };
        let op = rng.below(100);
        let key = rng.below(c.key_space);
        let (len0, levels0) = (f.len(), f.levels());
        if op < 40 || m.live.is_empty() {
            match f.insert(&key) {
                Ok(()) => m.add(key),
                Err(e @ (InsertError::Full | InsertError::MaxLevelsReached { .. })) => {
                    failures += 1;
                    if c.expansion == 0 {
                        assert_eq!(e, InsertError::Full);
                    }
                    assert_eq!(
                        (f.len(), f.levels()),
                        (len0, levels0),
                        "failed insert changed the filter ({})",
                        ctx()
                    );
                    check_all(&f, &m, &ctx);
                }
                // A key inserted again: its own copies may fill its buckets; nothing changes.
                // Or a key that collides completely with one whose copies fill them (narrow
                // fingerprints, tiny tables): it counts as a copy of that one, as documented,
                // so the filter already finds it.
                Err(InsertError::ItemBucketsFull) => {
                    assert!(
                        m.copies(key) > 0 || f.count(&key) > 0,
                        "stuck without a copy ({})",
                        ctx()
                    );
                    assert_eq!((f.len(), f.levels()), (len0, levels0), "({})", ctx());
                    check_all(&f, &m, &ctx);
                }
                Err(e) => panic!("insert {key}: {e} ({})", ctx()),
            }
        } else if op < 60 {
            let before = f.count(&key);
            match f.insert_unique(&key) {
                Ok(true) => {
                    assert!(
                        !m.copies.contains_key(&key),
                        "insert_unique added live item {key} again ({})",
                        ctx()
                    );
                    assert_eq!(
                        before,
                        0,
                        "insert_unique added {key} though count was {before} ({})",
                        ctx()
                    );
                    m.add(key);
                }
                Ok(false) => {
                    assert!(
                        f.contains(&key),
                        "insert_unique said present, contains says no ({})",
                        ctx()
                    );
                    assert_eq!(
                        f.len(),
                        len0,
                        "insert_unique Ok(false) changed len ({})",
                        ctx()
                    );
                }
                Err(InsertError::Full | InsertError::MaxLevelsReached { .. }) => {
                    failures += 1;
                    assert_eq!(
                        (f.len(), f.levels()),
                        (len0, levels0),
                        "failed insert_unique changed the filter ({})",
                        ctx()
                    );
                    check_all(&f, &m, &ctx);
                }
                Err(e) => panic!("insert_unique {key}: {e} ({})", ctx()),
            }
        } else if op < 65 {
            let batch: Vec<u64> = (0..1 + rng.below(6))
                .map(|_| rng.below(c.key_space))
                .collect();
            match f.insert_many(&batch) {
                Ok(()) => batch.iter().for_each(|&k| m.add(k)),
                Err(e) => {
                    failures += 1;
                    batch[..e.index].iter().for_each(|&k| m.add(k));
                    assert_eq!(
                        f.len(),
                        len0 + e.index,
                        "insert_many failed at {} ({:?}) but len moved wrongly ({})",
                        e.index,
                        e.error,
                        ctx()
                    );
                    check_all(&f, &m, &ctx);
                }
            }
        } else if op < 90 {
            let at = rng.below(m.live.len() as u64) as usize;
            let k = m.take(at);
            assert!(
                f.remove(&k),
                "remove of live item {k} returned false ({})",
                ctx()
            );
            assert_eq!(f.len(), len0 - 1, "remove changed len wrongly ({})", ctx());
            check_all(&f, &m, &ctx);
        } else {
            let held = m.copies.get(&key).copied().unwrap_or(0);
            let counted = f.count(&key);
            assert!(
                counted >= held,
                "count({key}) = {counted} < {held} ({})",
                ctx()
            );
            if held > 0 {
                assert!(f.contains(&key), "live {key} not found ({})", ctx());
            }
        }
    }
    check_all(&f, &m, &|| format!("seed={seed} case={case_no} end"));
    // Drain: removing every live item empties the filter.
    while !m.live.is_empty() {
        let k = m.take(m.live.len() - 1);
        assert!(
            f.remove(&k),
            "seed={seed} case={case_no} drain: remove {k} false"
        );
    }
    assert_eq!(f.len(), 0, "seed={seed} case={case_no} drained");
    (failures, f.levels())
}

#[test]
fn random_operations_on_tiny_growing_filters_match_a_multiset_model() {
    let seed = seed("tiny growing model");
    let mut rng = Rng::new(seed);
    let (mut failures, mut max_levels, mut cases) = (0, 0, 0);
    let start = std::time::Instant::now();
    while start.elapsed().as_secs_f64() < 3.0 {
        let c = random_case(&mut rng);
        let (fails, levels) = run_case(seed, cases, &c, &mut rng, 600);
        failures += fails;
        max_levels = max_levels.max(levels);
        cases += 1;
    }
    println!("{cases} cases, {failures} failed inserts checked, up to {max_levels} levels");
}

/// Every (expansion, width) combination, a few capacities each, deterministic by seed.
#[test]
fn every_expansion_and_width_on_capacities_1_to_50() {
    let seed = seed("grid model");
    let mut rng = Rng::new(seed);
    let mut n = 0;
    for expansion in [1u32, 2, 3, 4, 8] {
        for bits in 4..=32u32 {
            for capacity in [1usize, 2, 7, 50] {
                let mut max_levels = 8u32;
                while capacity as f64 * f64::from(expansion).powi(max_levels as i32 - 1) > 65536.0 {
                    max_levels -= 1;
                }
                let c = Case {
                    capacity,
                    expansion,
                    max_levels,
                    width: W::Bits(bits),
                    key_space: if n % 2 == 0 { 8 } else { 1 << 40 },
                };
                run_case(seed, n, &c, &mut rng, 150);
                n += 1;
            }
        }
    }
    println!("{n} cases");
}

/// One key inserted over and over into a growing filter: a hot key fills its two buckets in
/// the newest level, and then? DESIGN.md §5: "A hot key must not trigger growth: growth is for
/// a full level, not for one item's full buckets." Reports the levels and memory it causes.
#[test]
fn a_hot_key_does_not_make_the_filter_grow() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .expansion(2)
        .huge_pages(false)
        .build()
        .unwrap();
    let memory0 = filter.memory_usage();
    let mut inserted = 0;
    let mut outcome = String::from("stopped at 400 inserts");
    for i in 0..400 {
        match filter.insert(&"hot") {
            Ok(()) => inserted += 1,
            Err(e) => {
                outcome = format!("insert {i} failed: {e}");
                break;
            }
        }
        if filter.memory_usage() > 256 << 20 {
            outcome = format!("stopped: memory over 256 MiB after {} inserts", i + 1);
            break;
        }
    }
    println!(
        "hot key: {inserted} copies stored, {} levels, memory {} -> {} bytes, {} items; {outcome}",
        filter.levels(),
        memory0,
        filter.memory_usage(),
        filter.len()
    );
    assert_eq!(filter.count(&"hot"), inserted);
    assert!(
        filter.levels() <= 2,
        "{inserted} copies of one key grew a 1,000-item filter to {} levels and {} bytes \
         (from {memory0}); {outcome}",
        filter.levels(),
        filter.memory_usage()
    );
}
