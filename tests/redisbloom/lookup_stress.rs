//! Concurrency: the one-pass lookup (every live sub-filter read newest first, the
//! misses validated only after the last read) must never give a false negative while kick
//! walks move fingerprints, compactions move them from newer to older sub-filters and drop
//! emptied sub-filters, growth adds sub-filters, and removes run.
//!
//! Writers own disjoint items and alternate (all together, in timed phases) between filling
//! (inserts, which grow the filter) and draining (removes, which auto-compact and drop
//! sub-filters); an admin thread may `compact()` too. Each item has a sequence number: odd
//! once its insert returned, made even before its remove starts. Readers check that an item
//! whose number was odd before `contains` / `contains_many` / `count` and unchanged after it
//! was found (a miss caused by the item's own remove would show in the second load: the
//! remove's erase is ordered after the even store).
//!
//! Tiny tables (capacity 4..16, bucket sizes 1, 2, 3, 4, 7, expansion 1 and 2, 1..3 kicks)
//! keep the filter at a handful of sub-filters (the one-pass path, at most 8) or past 8 (the
//! one-at-a-time path). Seeds are printed; `ATOMIC_CUCKOO_SEED` replays the choices of items
//! and operations (not the thread interleaving).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{seed, Rng};
use crate::serial_model::{assert_exact_placement, with_timeout};
use atomic_cuckoo::redisbloom::RedisCuckooFilter;

#[derive(Clone, Copy, Debug)]
struct Scenario {
    cap: u64,
    bs: u64,
    exp: u64,
    max_iter: u64,
    writers: usize,
    /// Items per writer.
    items: usize,
    readers: usize,
    /// A thread calling `compact()` (and `info()`) in a loop.
    admin: bool,
    /// Length of one fill or drain phase.
    phase_ms: u64,
    /// Writer 0 only inserts (its items stay, and compactions triggered by the other writers'
    /// removes move them from newer sub-filters into older ones over and over).
    keeper: bool,
    /// The round must see more than 8 sub-filters (the one-at-a-time path) and drops.
    past_probed: bool,
    ms: u64,
}

struct Shared {
    filter: RedisCuckooFilter,
    /// Item `w * items + k` is writer `w`'s item `k`.
    keys: Vec<Vec<u8>>,
    seqs: Vec<AtomicU64>,
    stop: AtomicBool,
    failure: Mutex<Option<String>>,
    checks: AtomicU64,
    max_filters: AtomicUsize,
    min_filters_after_max: AtomicUsize,
    drops: AtomicU64,
}

impl Shared {
    fn fail(&self, msg: String) {
        let mut f = self.failure.lock().unwrap();
        if f.is_none() {
            *f = Some(msg);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn writer(s: &Shared, sc: Scenario, w: usize, seed: u64, start: Instant) {
    let mut rng = Rng::new(seed ^ (w as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mine = w * sc.items..(w + 1) * sc.items;
    while !s.stop.load(Ordering::Relaxed) {
        let filling = (start.elapsed().as_millis() as u64 / sc.phase_ms) & 1 == 0;
        let i = mine.start + rng.below(sc.items as u64) as usize;
        let seq = s.seqs[i].load(Ordering::Relaxed); // only this writer stores it
        let present = seq & 1 == 1;
        let want_insert = if sc.keeper && w == 0 {
            true
        } else if filling {
            rng.below(10) < 8
        } else {
            rng.below(10) < 2
        };
        if present && !want_insert {
            // Release: a reader that sees the even number is no longer promised the item.
            s.seqs[i].store(seq + 1, Ordering::Release);
            if !s.filter.remove(&s.keys[i]) {
                s.fail(format!(
                    "writer {w}: remove of present item {i} found no copy"
                ));
            }
        } else if !present && want_insert {
            match s.filter.insert(&s.keys[i]) {
                // Release: a reader that sees the odd number sees the completed insert.
                Ok(()) => s.seqs[i].store(seq + 1, Ordering::Release),
                Err(e) => s.fail(format!("writer {w}: insert of item {i}: {e:?}")),
            }
        }
    }
}

fn reader(s: &Shared, sc: Scenario, r: usize, seed: u64) {
    let mut rng = Rng::new(seed ^ (r as u64 + 101).wrapping_mul(0xbf58_476d_1ce4_e5b9));
    let n = s.keys.len();
    let mut found = Vec::new();
    let mut before = Vec::new();
    let mut last_filters = 0usize;
    while !s.stop.load(Ordering::Relaxed) {
        let filters = s.filter.info().filters as usize;
        s.max_filters.fetch_max(filters, Ordering::Relaxed);
        if filters < last_filters {
            s.drops.fetch_add(1, Ordering::Relaxed);
        }
        if filters * 2 <= s.max_filters.load(Ordering::Relaxed) {
            s.min_filters_after_max
                .fetch_min(filters, Ordering::Relaxed);
        }
        last_filters = filters;
        // Single lookups.
        for _ in 0..16 {
            let i = rng.below(n as u64) as usize;
            // Acquire: pairs with the writer's Release store after its insert returned.
            let s1 = s.seqs[i].load(Ordering::Acquire);
            if s1 & 1 == 0 {
                continue;
            }
            let hit = s.filter.contains(&s.keys[i]);
            let copies = if rng.below(4) == 0 {
                Some(s.filter.count(&s.keys[i]))
            } else {
                None
            };
            let s2 = s.seqs[i].load(Ordering::Acquire);
            s.checks.fetch_add(1, Ordering::Relaxed);
            if s1 == s2 {
                if !hit {
                    s.fail(format!(
                        "reader {r}: contains missed present item {i} ({:?}), {sc:?}, info {:?}",
                        String::from_utf8_lossy(&s.keys[i]),
                        s.filter.info()
                    ));
                }
                if copies == Some(0) {
                    s.fail(format!(
                        "reader {r}: count = 0 for present item {i}, {sc:?}, info {:?}",
                        s.filter.info()
                    ));
                }
            }
        }
        // A batch (sometimes past one batch of 32).
        let len = [1usize, 5, 31, 32, 33, 40][rng.below(6) as usize];
        let first = rng.below(n as u64) as usize;
        let idx: Vec<usize> = (0..len).map(|k| (first + k * 7) % n).collect();
        before.clear();
        before.extend(idx.iter().map(|&i| s.seqs[i].load(Ordering::Acquire)));
        s.filter
            .contains_many(idx.iter().map(|&i| &s.keys[i]), &mut found);
        for (k, &i) in idx.iter().enumerate() {
            let s1 = before[k];
            if s1 & 1 == 1 && s.seqs[i].load(Ordering::Acquire) == s1 && !found[k] {
                s.fail(format!(
                    "reader {r}: contains_many missed present item {i} (position {k} of {len}), \
                     {sc:?}, info {:?}",
                    s.filter.info()
                ));
            }
        }
    }
}

fn admin(s: &Shared, seed: u64) {
    let mut rng = Rng::new(seed ^ 0xad);
    while !s.stop.load(Ordering::Relaxed) {
        match rng.below(3) {
            0 => s.filter.compact(),
            _ => thread::sleep(Duration::from_micros(200)),
        }
    }
}

fn round(sc: Scenario, seed: u64) {
    let cap = sc.cap.max(2 * sc.bs);
    let filter = RedisCuckooFilter::builder()
        .capacity(cap)
        .bucket_size(sc.bs)
        .expansion(sc.exp)
        .max_iterations(sc.max_iter)
        .max_expansions(65_536)
        .build()
        .unwrap();
    let n = sc.writers * sc.items;
    let salt = seed % 1_000_003;
    let s = Arc::new(Shared {
        filter,
        keys: (0..n)
            .map(|i| format!("k{salt}-{i}").into_bytes())
            .collect(),
        seqs: (0..n).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
        failure: Mutex::new(None),
        checks: AtomicU64::new(0),
        max_filters: AtomicUsize::new(1),
        min_filters_after_max: AtomicUsize::new(usize::MAX),
        drops: AtomicU64::new(0),
    });
    let threads = sc.writers + sc.readers + usize::from(sc.admin);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let start = Instant::now();
    let mut handles = Vec::new();
    for w in 0..sc.writers {
        let (s, b) = (s.clone(), barrier.clone());
        handles.push(thread::spawn(move || {
            b.wait();
            writer(&s, sc, w, seed, start)
        }));
    }
    for r in 0..sc.readers {
        let (s, b) = (s.clone(), barrier.clone());
        handles.push(thread::spawn(move || {
            b.wait();
            reader(&s, sc, r, seed)
        }));
    }
    if sc.admin {
        let (s, b) = (s.clone(), barrier.clone());
        handles.push(thread::spawn(move || {
            b.wait();
            admin(&s, seed)
        }));
    }
    barrier.wait();
    let deadline = Instant::now() + Duration::from_millis(sc.ms);
    while Instant::now() < deadline && !s.stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(5));
    }
    s.stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    if let Some(msg) = s.failure.lock().unwrap().take() {
        panic!("seed {seed}: {msg}");
    }
    // Quiescent: every present item found, counted, and placed exactly.
    let present: Vec<Vec<u8>> = (0..n)
        .filter(|&i| s.seqs[i].load(Ordering::Relaxed) & 1 == 1)
        .map(|i| s.keys[i].clone())
        .collect();
    for it in &present {
        assert!(s.filter.contains(it), "seed {seed}: quiescent miss");
        assert!(s.filter.count(it) >= 1, "seed {seed}: quiescent count 0");
    }
    assert_eq!(
        s.filter.info().items,
        present.len() as u64,
        "seed {seed}: items"
    );
    assert_exact_placement(&s.filter.scandump(), &present, &format!("seed {seed}"));
    println!(
        "  {sc:?}: {} checks, max {} sub-filters, fell to {:?} after, {} drops seen, {} live at end",
        s.checks.load(Ordering::Relaxed),
        s.max_filters.load(Ordering::Relaxed),
        Some(s.min_filters_after_max.load(Ordering::Relaxed)).filter(|&n| n != usize::MAX),
        s.drops.load(Ordering::Relaxed),
        s.filter.info().filters
    );
    assert!(
        s.checks.load(Ordering::Relaxed) > 100,
        "seed {seed}: too few checks"
    );
    if sc.past_probed {
        assert!(
            s.max_filters.load(Ordering::Relaxed) > 8 && s.drops.load(Ordering::Relaxed) > 0,
            "seed {seed}: the round never went past 8 sub-filters and back"
        );
    }
}

fn run(name: &str, scenarios: &[Scenario]) {
    let seed = seed(name);
    let scenarios = scenarios.to_vec();
    with_timeout(name, 60, move || {
        for (k, sc) in scenarios.into_iter().enumerate() {
            round(sc, seed.wrapping_add(k as u64));
        }
    });
}

const BASE: Scenario = Scenario {
    cap: 4,
    bs: 2,
    exp: 2,
    max_iter: 2,
    writers: 2,
    items: 40,
    readers: 2,
    admin: false,
    phase_ms: 60,
    past_probed: false,
    keeper: false,
    ms: 700,
};

/// Expansion 2 keeps a few sub-filters (the one-pass path): growth publishes sub-filters and
/// draining compacts and drops them while readers read.
#[test]
fn one_pass_lookups_under_growth_and_dropping_compaction() {
    let mut v = Vec::new();
    for (bs, cap) in [(1, 4), (2, 4), (3, 8), (4, 8), (7, 16)] {
        v.push(Scenario { bs, cap, ..BASE });
    }
    run("one_pass_lookups_under_growth_and_dropping_compaction", &v);
}

/// Expansion 1: the filter goes back and forth across 8 sub-filters (one pass, then the
/// one-at-a-time path), with an admin thread compacting too.
#[test]
fn lookups_across_the_one_pass_limit_with_compact_calls() {
    let mut v = Vec::new();
    for (bs, cap, items) in [(1, 4, 20), (2, 4, 20), (2, 8, 40), (4, 16, 80), (3, 8, 40)] {
        v.push(Scenario {
            bs,
            cap,
            exp: 1,
            items,
            admin: true,
            max_iter: 1,
            past_probed: true,
            phase_ms: 100,
            ..BASE
        });
    }
    run("lookups_across_the_one_pass_limit_with_compact_calls", &v);
}

/// A single sub-filter kept nearly full (kick walks) plus growth by one sub-filter at a time:
/// more writers, longer kick walks.
#[test]
fn kick_walks_and_growth_with_three_writers() {
    let mut v = Vec::new();
    for (bs, exp) in [(1, 1), (2, 2), (4, 1), (7, 2)] {
        v.push(Scenario {
            bs,
            exp,
            cap: 16,
            writers: 3,
            items: 24,
            readers: 2,
            max_iter: 3,
            phase_ms: 150,
            ..BASE
        });
    }
    run("kick_walks_and_growth_with_three_writers", &v);
}

/// Writer 0's items, once in, stay; the other writers fill and drain around them, so every
/// drain compacts writer 0's items out of newer sub-filters into older ones and drops the
/// emptied sub-filters, while readers look them up.
#[test]
fn kept_items_moved_by_compaction_while_readers_read() {
    let mut v = Vec::new();
    for (bs, cap, exp, items) in [
        (1, 4, 1, 12),
        (2, 4, 2, 24),
        (3, 8, 1, 16),
        (4, 8, 2, 24),
        (7, 14, 1, 20),
    ] {
        v.push(Scenario {
            bs,
            cap,
            exp,
            items,
            keeper: true,
            writers: 3,
            readers: 2,
            max_iter: 1,
            phase_ms: 40,
            ..BASE
        });
    }
    run("kept_items_moved_by_compaction_while_readers_read", &v);
}
