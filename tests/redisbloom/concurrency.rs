//! No false negatives under concurrency (kick walks in a nearly full single
//! sub-filter, compaction moving items from newer sub-filters into older ones, growth,
//! `compact()`, dumps), exact counters and an exact placement of the live items afterwards,
//! failed inserts that change nothing, `insert_unique` storing an item once, no deadlock.

use crate::serial_model;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{seed, Rng};
use crate::serial_model::{assert_exact_placement, dump_items, dump_occupied, with_timeout};
use atomic_cuckoo::redisbloom::{RedisCuckooFilter, RedisInsertError, PORTABLE_RDB_VERSION};

#[derive(Clone, Copy, Debug)]
struct Scenario {
    cap: u64,
    bs: u64,
    exp: u64,
    max_iter: u64,
    /// Items inserted first, then deleted by one thread while the others run (each delete may
    /// auto-compact, moving `stable` items from newer sub-filters into older ones).
    fillers: usize,
    /// Items inserted after the fillers and never removed: must never be missed.
    stable: usize,
    churners: usize,
    churn_limit: usize,
    readers: usize,
    /// One thread calling compact(), scandump(), dump_payload() in a loop.
    admin: bool,
    /// Readers also check `count(item) >= 1`.
    check_count: bool,
    ms: u64,
}

fn key(rng: &mut Rng, tag: &str) -> Vec<u8> {
    format!("{tag}{}", rng.next_u64() % 1_000_000_007).into_bytes()
}

/// One round: returns nothing, panics with `ctx` on any violation.
fn round(sc: Scenario, seed: u64, ctx: &str) {
    let f = Arc::new(
        RedisCuckooFilter::builder()
            .capacity(sc.cap)
            .bucket_size(sc.bs)
            .expansion(sc.exp)
            .max_iterations(sc.max_iter)
            .max_expansions(65_536)
            .build()
            .unwrap(),
    );
    let mut rng = Rng::new(seed);
    let mut fillers = Vec::new();
    for _ in 0..sc.fillers {
        let it = key(&mut rng, "f");
        if f.insert(&it).is_ok() {
            fillers.push(it);
        }
    }
    let mut stable = Vec::new();
    for _ in 0..sc.stable {
        let it = key(&mut rng, "s");
        match f.insert(&it) {
            Ok(()) => stable.push(it),
            Err(RedisInsertError::Full) => {}
            Err(e) => panic!("{ctx}: {e:?}"),
        }
    }
    let stable = Arc::new(stable);
    let stop = Arc::new(AtomicBool::new(false));
    let threads = sc.readers + sc.churners + 1 + usize::from(sc.admin);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut handles: Vec<thread::JoinHandle<Vec<Vec<u8>>>> = Vec::new();
    for r in 0..sc.readers {
        let (f, stable, stop, barrier) = (f.clone(), stable.clone(), stop.clone(), barrier.clone());
        let ctx = ctx.to_string();
        handles.push(thread::spawn(move || {
            barrier.wait();
            let mut passes = 0u64;
            while !stop.load(Ordering::Relaxed) || passes < 3 {
                for (n, s) in stable.iter().enumerate() {
                    let i = if r % 2 == 0 { n } else { stable.len() - 1 - n };
                    let s = if r % 2 == 0 { s } else { &stable[i] };
                    assert!(
                        f.contains(s),
                        "{ctx}: false negative (contains) for {s:02x?}"
                    );
                    if sc.check_count {
                        let c = f.count(s);
                        assert!(c >= 1, "{ctx}: count {c} for present {s:02x?}");
                    }
                }
                passes += 1;
            }
            Vec::new()
        }));
    }
    {
        // The filler deleter.
        let (f, stop, barrier) = (f.clone(), stop.clone(), barrier.clone());
        let ctx = ctx.to_string();
        let fillers = fillers.clone();
        handles.push(thread::spawn(move || {
            barrier.wait();
            for (n, it) in fillers.iter().enumerate() {
                assert!(f.remove(it), "{ctx}: filler {n} not removable");
                if n % 4 == 0 {
                    thread::yield_now();
                }
            }
            let _ = stop;
            Vec::new()
        }));
    }
    for t in 0..sc.churners {
        let (f, stop, barrier) = (f.clone(), stop.clone(), barrier.clone());
        let ctx = ctx.to_string();
        let mut rng = Rng::new(seed ^ (0x1234_5678 * (t as u64 + 1)));
        handles.push(thread::spawn(move || {
            barrier.wait();
            let mut mine: Vec<Vec<u8>> = Vec::new();
            let mut ops = 0;
            while !stop.load(Ordering::Relaxed) || ops < 200 {
                ops += 1;
                if mine.len() < sc.churn_limit && rng.below(2) == 0 {
                    let it = key(&mut rng, &format!("c{t}-"));
                    match f.insert(&it) {
                        Ok(()) => mine.push(it),
                        Err(RedisInsertError::Full) => {}
                        Err(e) => panic!("{ctx}: {e:?}"),
                    }
                } else if !mine.is_empty() {
                    let at = rng.below(mine.len() as u64) as usize;
                    let it = mine.swap_remove(at);
                    assert!(f.contains(&it), "{ctx}: churner's own {it:02x?} missed");
                    assert!(
                        f.remove(&it),
                        "{ctx}: churner's own {it:02x?} not removable"
                    );
                }
            }
            mine
        }));
    }
    if sc.admin {
        let (f, stop, barrier) = (f.clone(), stop.clone(), barrier.clone());
        let ctx = ctx.to_string();
        let mut rng = Rng::new(seed ^ 0xadad);
        handles.push(thread::spawn(move || {
            barrier.wait();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) || n < 5 {
                n += 1;
                match rng.below(3) {
                    0 => f.compact(),
                    1 => {
                        let chunks = f.scandump();
                        assert_eq!(
                            dump_items(&chunks),
                            dump_occupied(&chunks),
                            "{ctx}: snapshot header vs slots"
                        );
                        if !chunks.is_empty() {
                            RedisCuckooFilter::from_chunks(
                                chunks.iter().map(|(i, d)| (*i, d.as_slice())),
                            )
                            .unwrap_or_else(|e| panic!("{ctx}: reload {e:?}"));
                        }
                    }
                    _ => {
                        let p = f.dump_payload(PORTABLE_RDB_VERSION);
                        if let Err(e) = RedisCuckooFilter::from_dump_payload(&p) {
                            // Only an empty filter's payload may fail? No: a payload always
                            // loads (numItems matches the slots).
                            panic!("{ctx}: payload reload {e:?}");
                        }
                    }
                }
                thread::yield_now();
            }
            Vec::new()
        }));
    }
    barrier.wait();
    thread::sleep(Duration::from_millis(sc.ms));
    stop.store(true, Ordering::Relaxed);
    let mut live: Vec<Vec<u8>> = stable.to_vec();
    let mut panics = Vec::new();
    for h in handles {
        match h.join() {
            Ok(left) => live.extend(left),
            Err(e) => panics.push(e),
        }
    }
    if let Some(e) = panics.into_iter().next() {
        std::panic::resume_unwind(e);
    }
    for it in &live {
        assert!(f.contains(it), "{ctx}: final false negative {it:02x?}");
    }
    let chunks = f.scandump();
    assert_exact_placement(&chunks, &live, ctx);
    assert_eq!(f.info().items, live.len() as u64, "{ctx}: info().items");
    if !chunks.is_empty() {
        let g = RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice())))
            .unwrap_or_else(|e| panic!("{ctx}: final reload {e:?}"));
        assert_eq!(g.scandump(), chunks, "{ctx}: reload round trip");
    }
}

/// Seconds a time-boxed test runs: `secs`, or `ATTACK3_SECS` for a longer soak (the deadlock
/// timeout grows with it).
fn budget(secs: u64) -> u64 {
    std::env::var("ATTACK3_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(secs)
}

fn run(name: &str, secs: u64, pick: impl Fn(&mut Rng) -> Scenario + Send + 'static) {
    let s = seed(name);
    let secs = budget(secs);
    let name = name.to_string();
    with_timeout(&name.clone(), 60 + 2 * secs, move || {
        let mut rng = Rng::new(s);
        let start = Instant::now();
        let mut rounds = 0u64;
        while start.elapsed() < Duration::from_secs(secs) {
            let sc = pick(&mut rng);
            let rs = rng.next_u64();
            let ctx = format!("{name} seed {s} round {rounds} (round seed {rs}) {sc:?}");
            round(sc, rs, &ctx);
            rounds += 1;
        }
        println!("{name}: {rounds} rounds");
    });
}

/// Expansion 0, one nearly full sub-filter: most inserts kick, many fail (Full).
#[test]
fn kicks_in_a_full_single_sub_filter_never_hide_an_item() {
    run("kicks_in_a_full_single_sub_filter", 8, |rng| {
        let bs = [1u64, 2, 3, 4][rng.below(4) as usize];
        let cap = (2 * bs).max(2 + rng.below(31)).max(2 * bs);
        let slots = (serial_model::next_pow2(cap / bs).max(1) * bs) as usize;
        Scenario {
            cap,
            bs,
            exp: 0,
            max_iter: 1 + rng.below(40),
            fillers: slots / 4,
            stable: slots / 2,
            churners: 2,
            churn_limit: slots.max(4),
            readers: 1,
            admin: rng.below(2) == 0,
            check_count: false,
            ms: 15,
        }
    });
}

/// Items inserted after growth sit in newer sub-filters; deleting the fillers triggers
/// auto-compaction, which moves them into older ones while readers look for them.
#[test]
fn compaction_moving_items_back_never_hides_them() {
    run("compaction_moving_items_back", 9, |rng| {
        let bs = [1u64, 2, 3, 4][rng.below(4) as usize];
        let cap = (2 * bs).max(2 + rng.below(15));
        let slots = (serial_model::next_pow2(cap / bs).max(1) * bs) as usize;
        Scenario {
            cap,
            bs,
            exp: [1u64, 2][rng.below(2) as usize],
            max_iter: 1 + rng.below(20),
            fillers: slots * (2 + rng.below(3) as usize),
            stable: slots + rng.below(slots as u64 + 1) as usize,
            churners: rng.below(2) as usize,
            churn_limit: slots,
            readers: 2,
            admin: rng.below(2) == 0,
            check_count: false,
            ms: 10,
        }
    });
}

/// As above, but the readers also ask `count` (CF.COUNT), which must be at least 1 for an
/// item that is in the filter the whole time.
#[test]
fn count_never_reports_zero_for_an_item_being_compacted() {
    run("count_during_compaction", 8, |rng| {
        let bs = [1u64, 2, 3, 4][rng.below(4) as usize];
        let cap = (2 * bs).max(2 + rng.below(15));
        let slots = (serial_model::next_pow2(cap / bs).max(1) * bs) as usize;
        Scenario {
            cap,
            bs,
            exp: 1,
            max_iter: 1 + rng.below(20),
            fillers: slots * 3,
            stable: slots * 2,
            churners: 0,
            churn_limit: 0,
            readers: 2,
            admin: true,
            check_count: true,
            ms: 5,
        }
    });
}

/// Everything at once on tiny growing tables.
#[test]
fn everything_at_once_keeps_an_exact_placement() {
    run("everything_at_once", 8, |rng| {
        let bs = [1u64, 2, 3, 4][rng.below(4) as usize];
        let cap = (2 * bs).max(2 + rng.below(31));
        let slots = (serial_model::next_pow2(cap / bs).max(1) * bs) as usize;
        Scenario {
            cap,
            bs,
            exp: [0u64, 1, 2, 4][rng.below(4) as usize],
            max_iter: 1 + rng.below(30),
            fillers: rng.below(3 * slots as u64 + 1) as usize,
            stable: rng.below(2 * slots as u64 + 1) as usize,
            churners: 1 + rng.below(2) as usize,
            churn_limit: 1 + rng.below(2 * slots as u64) as usize,
            readers: 1,
            admin: true,
            check_count: false,
            ms: 10,
        }
    });
}

/// `insert_unique` of one item by several threads stores it once, while other threads keep
/// the filter busy (kicks, growth, deletes that compact).
#[test]
fn racing_insert_unique_stores_once_while_the_filter_is_busy() {
    let s = seed("racing_insert_unique_busy");
    let secs = budget(7);
    with_timeout("racing_insert_unique_busy", 60 + 2 * secs, move || {
        let mut rng = Rng::new(s);
        let start = Instant::now();
        let mut rounds = 0u64;
        while start.elapsed() < Duration::from_secs(secs) {
            let bs = [1u64, 2, 3, 4][rng.below(4) as usize];
            let exp = [0u64, 1, 2][rng.below(3) as usize];
            let f = Arc::new(
                RedisCuckooFilter::builder()
                    .capacity((2 * bs).max(2 + rng.below(15)))
                    .bucket_size(bs)
                    .expansion(exp)
                    .max_expansions(65_536)
                    .build()
                    .unwrap(),
            );
            let mut base = Vec::new();
            for _ in 0..(rng.below(40) as usize) {
                let it = key(&mut rng, "b");
                if f.insert(&it).is_ok() {
                    base.push(it);
                }
            }
            let target = key(&mut rng, "target");
            let ctx = format!("seed {s} round {rounds} bs {bs} exp {exp}");
            let n = 3;
            let barrier = Arc::new(Barrier::new(n + 1));
            let stored = Arc::new(AtomicU64::new(0));
            let full = Arc::new(AtomicU64::new(0));
            let mut hs = Vec::new();
            for _ in 0..n {
                let (f, barrier, stored, full) =
                    (f.clone(), barrier.clone(), stored.clone(), full.clone());
                let target = target.clone();
                hs.push(thread::spawn(move || {
                    barrier.wait();
                    match f.insert_unique(&target) {
                        Ok(true) => {
                            stored.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(false) => {}
                        Err(RedisInsertError::Full) => {
                            full.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("{e:?}"),
                    }
                }));
            }
            // The busy thread: deletes base items (compaction) and re-inserts them.
            let busy = {
                let (f, barrier) = (f.clone(), barrier.clone());
                let base = base.clone();
                thread::spawn(move || {
                    barrier.wait();
                    let mut kept = Vec::new();
                    for (i, it) in base.iter().enumerate() {
                        assert!(f.remove(it));
                        if i % 3 == 0 && f.insert(it).is_ok() {
                            kept.push(it.clone());
                        }
                    }
                    kept
                })
            };
            for h in hs {
                h.join().unwrap();
            }
            let mut live = busy.join().unwrap();
            let stored = stored.load(Ordering::Relaxed);
            let base_had = base
                .iter()
                .any(|b| serial_model::params(b).0 == serial_model::params(&target).0);
            if !base_had {
                assert!(stored <= 1, "{ctx}: stored {stored} times");
            }
            live.extend(std::iter::repeat_n(target.clone(), stored as usize));
            if full.load(Ordering::Relaxed) == 0 && !base_had {
                assert_eq!(stored, 1, "{ctx}: nobody stored it");
            }
            assert_exact_placement(&f.scandump(), &live, &ctx);
            rounds += 1;
        }
        println!("{rounds} rounds");
    });
}
