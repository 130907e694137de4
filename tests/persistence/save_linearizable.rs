//! Saves under load, checked for linearizability: each writer thread runs a known sequence of
//! operations and publishes how many it has completed; every snapshot must equal, per writer,
//! the state after some prefix of its sequence that lies between the progress seen before the
//! save started and the progress seen after it returned (+1: the op in flight). Writers add
//! (insert / insert_unique / insert_many) and remove with a sliding window, on tiny tables
//! (32-bit fingerprints: 2 slots per bucket, so near-full tables kick constantly) and on
//! growable filters from a tiny table (doublings during the run).
//! Every run has a deadlock watchdog. Readers check that no live key is ever missed.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common;
use crate::watchdog::{watchdog, SlowWriter};
use atomic_cuckoo::{CuckooFilter, InsertError};

#[derive(Clone, Copy, Debug)]
enum Saver {
    ToBytes,
    Slow,
    #[cfg(feature = "serde")]
    Serde,
}

#[derive(Clone, Copy, Debug)]
struct Plan {
    name: &'static str,
    writers: usize,
    savers: usize,
    saver: Saver,
    /// Keys live per writer (each add is followed by the remove of the key added `window`
    /// adds before); `usize::MAX`: never remove.
    window: usize,
    capacity: usize,
    /// Growable (from a tiny table) or fixed.
    growable: bool,
    run_for: Duration,
}

struct Snapshot {
    before: Vec<usize>,
    after: Vec<usize>,
    bytes: Vec<u8>,
}

/// Whether key `i` of a writer is live after `m` completed ops (op 2i adds key i, op 2i+1
/// removes key i - window).
fn live(i: usize, m: usize, window: usize) -> bool {
    let added = 2 * i < m;
    let removed = window != usize::MAX && 2 * (i + window) + 1 < m;
    added && !removed
}

fn add(filter: &CuckooFilter, key: u64, how: usize) -> Result<(), InsertError> {
    match how % 3 {
        0 => filter.insert(&key),
        1 => filter.insert_unique(&key).map(|added| {
            // The keys have pairwise distinct fingerprints (see `run`): no other key's copy can
            // make a fresh key look present, so this is a failure.
            assert!(added, "insert_unique of a fresh key {key} said present")
        }),
        _ => filter.insert_many([key]).map_err(|e| e.error),
    }
}

/// The first capacity of the growable plans: a few doublings in a run (a writer adds a million
/// keys or two a second). An entry gives up a bit to each doubling it sees, and the keys are
/// distinct in the fixed filter's fingerprints, not in a growable filter's entries: from a
/// table of 16 buckets, early entries kept 14 bits after 17 doublings, two keys' entries
/// matched now and then, and the oracle, which reads counts as exact, failed about once in
/// ten runs. From this capacity entries keep at least 26 bits.
const GROWABLE_CAPACITY: usize = 100_000;

fn run(plan: Plan) {
    let seed = common::seed(plan.name);
    let b = CuckooFilter::builder().capacity(plan.capacity);
    // The widest entries each kind takes (a growable filter: 31 bits, at this rate), so that
    // the oracle below may read counts as exact.
    let b = if plan.growable {
        b.growable(true).false_positive_rate(1e-7)
    } else {
        b.fingerprint_bits(32)
    };
    let filter = Arc::new(b.build().unwrap());
    // Pairwise distinct fingerprints: the oracle below reads every count as exact, and among
    // millions of keys some pairs share a 32-bit fingerprint; a key not added yet then reads
    // present whenever its twin is in the snapshot and shares its bucket pair there: then the
    // oracle reports "matches no prefix" (or `add` "said present"), about once in 60 runs.
    let seeds: Vec<u64> = (0..plan.writers)
        .map(|t| seed.wrapping_add(t as u64 * 0x1234_5678_9abc))
        .collect();
    let keys: Arc<Vec<Vec<u64>>> =
        Arc::new(common::keys_with_distinct_fingerprints(&seeds, 4_000_000));
    let progress: Arc<Vec<AtomicUsize>> =
        Arc::new((0..plan.writers).map(|_| AtomicUsize::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let snapshots = Arc::new(Mutex::new(Vec::<Snapshot>::new()));
    let full_retries = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));

    let mut handles = Vec::new();
    for t in 0..plan.writers {
        let (filter, keys, progress, stop, full_retries) = (
            Arc::clone(&filter),
            Arc::clone(&keys),
            Arc::clone(&progress),
            Arc::clone(&stop),
            Arc::clone(&full_retries),
        );
        handles.push(thread::spawn(move || {
            let keys = &keys[t];
            let mut j = 0;
            while !stop.load(Ordering::Relaxed) && j < keys.len() {
                let mut tries = 0;
                loop {
                    match add(&filter, keys[j], j) {
                        Ok(()) => break,
                        Err(InsertError::Full) if tries < 10_000 => {
                            tries += 1;
                            full_retries.fetch_add(1, Ordering::Relaxed);
                            thread::yield_now();
                        }
                        Err(e) => {
                            panic!("writer {t}: add #{j} failed: {e:?} after {tries} retries")
                        }
                    }
                }
                progress[t].store(2 * j + 1, Ordering::Release);
                if plan.window != usize::MAX && j >= plan.window {
                    let old = keys[j - plan.window];
                    assert!(
                        filter.remove(&old),
                        "writer {t}: remove of live key #{} failed",
                        j - plan.window
                    );
                }
                progress[t].store(2 * j + 2, Ordering::Release);
                j += 1;
            }
        }));
    }
    for _ in 0..plan.savers {
        let (filter, progress, stop, snapshots) = (
            Arc::clone(&filter),
            Arc::clone(&progress),
            Arc::clone(&stop),
            Arc::clone(&snapshots),
        );
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let before: Vec<usize> =
                    progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
                let bytes = match plan.saver {
                    Saver::ToBytes => filter.to_bytes(),
                    Saver::Slow => {
                        let mut w = SlowWriter {
                            delay: Duration::from_micros(300),
                            bytes: Vec::new(),
                        };
                        filter.write_to(&mut w).unwrap();
                        w.bytes
                    }
                    #[cfg(feature = "serde")]
                    Saver::Serde => crate::serde_format::serialize_to_bytes(&*filter).unwrap(),
                };
                let after: Vec<usize> =
                    progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
                let mut s = snapshots.lock().unwrap();
                if s.len() < 400 {
                    s.push(Snapshot {
                        before,
                        after,
                        bytes,
                    });
                }
                drop(s);
                thread::sleep(Duration::from_micros(200));
            }
        }));
    }
    // A reader: a key added before the lookup began and not removed before it ended is found.
    {
        let (filter, keys, progress, stop, reads) = (
            Arc::clone(&filter),
            Arc::clone(&keys),
            Arc::clone(&progress),
            Arc::clone(&stop),
            Arc::clone(&reads),
        );
        let window = plan.window;
        handles.push(thread::spawn(move || {
            let mut rng = common::Rng::new(seed ^ 0xdead);
            while !stop.load(Ordering::Relaxed) {
                let t = rng.below(keys.len() as u64) as usize;
                let p1 = progress[t].load(Ordering::Acquire);
                if p1 < 2 {
                    continue;
                }
                let done = p1 / 2; // keys 0..done were added (op 2i done when p1 > 2i)
                let lo = if window == usize::MAX {
                    0
                } else {
                    done.saturating_sub(window)
                };
                let i = lo + rng.below((done - lo) as u64) as usize;
                let found = filter.contains(&keys[t][i]);
                let counted = filter.count(&keys[t][i]);
                let p2 = progress[t].load(Ordering::Acquire);
                // The remove of key i is op 2(i+window)+1; only op p2 may have been in flight.
                let safe = window == usize::MAX || 2 * (i + window) + 1 > p2;
                if safe {
                    assert!(
                        found,
                        "false negative: writer {t} key #{i} (progress {p1}..{p2})"
                    );
                    assert!(
                        counted >= 1,
                        "count 0: writer {t} key #{i} (progress {p1}..{p2})"
                    );
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    let started = Instant::now();
    thread::sleep(plan.run_for);
    stop.store(true, Ordering::Relaxed);
    watchdog(plan.name, Duration::from_secs(30), move || {
        for h in handles {
            h.join().unwrap();
        }
    });
    let elapsed = started.elapsed();

    let snapshots = std::mem::take(&mut *snapshots.lock().unwrap());
    let ops: Vec<usize> = progress.iter().map(|p| p.load(Ordering::Relaxed)).collect();
    println!(
        "{}: {:?}, ops {:?}, {} snapshots, {} doublings, {} Full retries, {} reads",
        plan.name,
        elapsed,
        ops,
        snapshots.len(),
        filter.doublings(),
        full_retries.load(Ordering::Relaxed),
        reads.load(Ordering::Relaxed)
    );
    assert!(snapshots.len() >= 3, "too few snapshots to mean anything");
    let mut widest = 0;
    for (n, s) in snapshots.iter().enumerate() {
        let r: CuckooFilter = match plan.saver {
            #[cfg(feature = "serde")]
            Saver::Serde => crate::serde_format::deserialize_from_numbers(&s.bytes)
                .unwrap_or_else(|e| panic!("snapshot {n} does not restore: {e}")),
            _ => CuckooFilter::from_bytes(&s.bytes)
                .unwrap_or_else(|e| panic!("snapshot {n} does not restore: {e}")),
        };
        let mut total_live = 0;
        for t in 0..plan.writers {
            let (lo, hi) = (s.before[t], s.after[t] + 1);
            widest = widest.max(hi - lo);
            let first = (lo / 2).saturating_sub(if plan.window == usize::MAX {
                2
            } else {
                plan.window + 2
            });
            let last = (hi / 2 + 2).min(keys[t].len());
            let counts: Vec<usize> = (first..last).map(|i| r.count(&keys[t][i])).collect();
            // The live keys of a prefix are a contiguous run ending at the last key added:
            // the candidates are right after that key's add (and the remove that follows it).
            let newest = counts.iter().rposition(|&c| c > 0).map(|o| first + o);
            let candidates: Vec<usize> = match newest {
                Some(b) => vec![2 * b + 1, 2 * b + 2],
                None => (lo..=hi.min(lo + 4)).collect(),
            };
            let consistent = candidates
                .into_iter()
                .filter(|m| (lo..=hi).contains(m))
                .find(|&m| {
                    counts
                        .iter()
                        .enumerate()
                        .all(|(o, &c)| c == usize::from(live(first + o, m, plan.window)))
                });
            let Some(m) = consistent else {
                let bad: Vec<(usize, usize, bool, bool)> = counts
                    .iter()
                    .enumerate()
                    .filter(|&(o, &c)| {
                        c != usize::from(live(first + o, lo, plan.window))
                            || c != usize::from(live(first + o, hi, plan.window))
                    })
                    .map(|(o, &c)| {
                        let i = first + o;
                        (i, c, live(i, lo, plan.window), live(i, hi, plan.window))
                    })
                    .take(20)
                    .collect();
                panic!(
                    "{}: snapshot {n} of writer {t} matches no prefix in {lo}..={hi} \
                     (newest key in it #{newest:?}); (key, count, live at lo, live at hi): {bad:?}",
                    plan.name
                );
            };
            // Keys before `first` must all be in (insert-only) or all gone (window).
            total_live += if plan.window == usize::MAX {
                m.div_ceil(2)
            } else {
                (first..last).filter(|&i| live(i, m, plan.window)).count()
            };
            if plan.window == usize::MAX {
                assert!(
                    (0..first).step_by(37).all(|i| r.count(&keys[t][i]) == 1),
                    "{}: snapshot {n}: an early key is missing",
                    plan.name
                );
            }
        }
        assert_eq!(r.len(), total_live, "{}: snapshot {n}: len", plan.name);
    }
    println!(
        "{}: all snapshots consistent (widest candidate range {widest} ops)",
        plan.name
    );
}

#[test]
fn snapshots_of_a_tiny_fixed_table_with_kicks_are_linearizable() {
    run(Plan {
        name: "tiny fixed",
        writers: 2,
        savers: 1,
        saver: Saver::ToBytes,
        window: 150,
        capacity: 300,
        growable: false,
        run_for: Duration::from_millis(1000),
    });
}

#[test]
fn snapshots_of_a_growing_filter_are_linearizable() {
    run(Plan {
        name: "growing",
        writers: 2,
        savers: 1,
        saver: Saver::ToBytes,
        window: usize::MAX,
        capacity: GROWABLE_CAPACITY,
        growable: true,
        run_for: Duration::from_millis(1000),
    });
}

#[test]
fn snapshots_of_a_grown_filter_with_removes_are_linearizable() {
    run(Plan {
        name: "grown with removes",
        writers: 2,
        savers: 1,
        saver: Saver::ToBytes,
        window: 3_000,
        capacity: GROWABLE_CAPACITY,
        growable: true,
        run_for: Duration::from_millis(1000),
    });
}

#[test]
fn many_concurrent_saves_are_each_linearizable() {
    run(Plan {
        name: "concurrent saves",
        writers: 2,
        savers: 4,
        saver: Saver::ToBytes,
        window: 500,
        capacity: GROWABLE_CAPACITY,
        growable: true,
        run_for: Duration::from_millis(1000),
    });
}

#[test]
fn slow_saves_are_linearizable() {
    run(Plan {
        name: "slow saves",
        writers: 2,
        savers: 2,
        saver: Saver::Slow,
        window: 200,
        capacity: 400,
        growable: false,
        run_for: Duration::from_millis(1000),
    });
}

#[cfg(feature = "serde")]
#[test]
fn serde_saves_are_linearizable() {
    run(Plan {
        name: "serde",
        writers: 2,
        savers: 1,
        saver: Saver::Serde,
        window: 400,
        capacity: 32,
        growable: true,
        run_for: Duration::from_millis(1000),
    });
}

/// Two threads race insert_unique over the same keys on a growing filter while a third saves
/// again and again: each key is added once, and every snapshot holds each key at most once.
#[test]
fn racing_insert_unique_on_a_growing_filter_during_saves() {
    let seed = common::seed("insert_unique during saves");
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(16)
            .false_positive_rate(1e-7)
            .growable(true)
            .build()
            .unwrap(),
    );
    // Distinct fingerprints: a key whose twin is already in might otherwise be added by no
    // thread (unlikely with 30 000 keys, but not impossible).
    let keys = Arc::new(
        common::keys_with_distinct_fingerprints(&[seed], 30_000)
            .pop()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let saver = {
        let (filter, keys, stop) = (Arc::clone(&filter), Arc::clone(&keys), Arc::clone(&stop));
        thread::spawn(move || {
            let mut saves = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
                for k in keys.iter().step_by(97) {
                    assert!(r.count(k) <= 1, "a snapshot holds {k} {} times", r.count(k));
                }
                saves += 1;
            }
            saves
        })
    };
    let (f, k) = (Arc::clone(&filter), Arc::clone(&keys));
    watchdog(
        "racing insert_unique during saves",
        Duration::from_secs(60),
        move || common::assert_racing_insert_unique_adds_each_key_once(&f, &k, 2),
    );
    stop.store(true, Ordering::Relaxed);
    let saves = watchdog("the saver", Duration::from_secs(10), move || {
        saver.join().unwrap()
    });
    println!("{saves} saves, {} doublings", filter.doublings());
    assert!(saves >= 2);
}

/// The stress plans' keys have pairwise distinct fingerprints. Two keys with the same 32-bit
/// fingerprint and the same primary bucket in a table of 16 items are one item to the filter: once the earlier is stored, the later reads present before it is
/// added, and the oracle would take it for the newest key and report the keys before it
/// missing. Writer 0's keys #5849 and #117593 for seed 1795337842313460617 are such twins;
/// `keys_with_distinct_fingerprints` drops both keys of every such pair, and nothing else.
#[test]
fn stress_keys_have_no_fingerprint_twins() {
    let seed = 1_795_337_842_313_460_617;
    let raw = common::distinct_keys(seed, 200_000);
    let (early, late) = (raw[5849], raw[117_593]);
    assert_eq!(common::fingerprint32(early), common::fingerprint32(late));
    let filter = CuckooFilter::builder()
        .capacity(16)
        .fingerprint_bits(32)
        .build()
        .unwrap();
    filter.insert(&early).unwrap();
    assert!(filter.contains(&late), "the twins are indistinguishable");
    assert_eq!(filter.insert_unique(&late), Ok(false));

    let seeds = [seed, seed.wrapping_add(0x1234_5678_9abc)];
    let kept = common::keys_with_distinct_fingerprints(&seeds, 200_000);
    assert!(!kept[0].contains(&early) && !kept[0].contains(&late));
    let mut fps: Vec<u32> = kept
        .iter()
        .flatten()
        .map(|&k| common::fingerprint32(k))
        .collect();
    let n = fps.len();
    assert!(n > 2 * 200_000 - 100, "only twins are dropped ({n} kept)");
    fps.sort_unstable();
    fps.dedup();
    assert_eq!(fps.len(), n, "a fingerprint is shared");
}
