//! Saving a filter while other threads use it: the save must not disturb readers (`contains` of
//! absent items stays at the quiet false-positive rate), must not block `count`, must not make
//! waiting writers burn a core, and must give a consistent snapshot.
//!
//! The save writes into a `Write` that blocks in its first `write` call until the test releases
//! it, so the save is "in progress" for as long as the test needs to probe it from other threads.
//!
//! The tests of this file run one at a time (a shared lock): one of them measures a thread's CPU
//! time, which the others would disturb.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Barrier, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::CuckooFilter;

use crate::common;

/// How long a probe may take while the save is held before it counts as blocked by the save.
const PATIENCE: Duration = Duration::from_secs(10);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts `filter.write_to` on a thread of `s` into a [`HeldWriter`], waits until the save is
/// writing (so it is in progress), runs `probe`, then releases the save and returns the snapshot
/// bytes. The save is released even if `probe` panics (the release channel is dropped).
fn while_saving<'scope, 'env, R>(
    s: &'scope thread::Scope<'scope, 'env>,
    filter: &'env CuckooFilter,
    probe: impl FnOnce() -> R,
) -> (R, Vec<u8>) {
    let (mut out, entered_rx, release_tx) = common::HeldWriter::new();
    let saver = s.spawn(move || {
        filter.write_to(&mut out).unwrap();
        out.bytes
    });
    entered_rx
        .recv_timeout(PATIENCE)
        .expect("the save never started writing");
    let result = {
        let _release_on_drop = release_tx;
        probe()
    };
    let bytes = saver.join().unwrap();
    (result, bytes)
}

/// A filter of the default rate holding `n` keys, and `probes` keys that were never inserted.
fn loaded_filter(n: usize, probes: usize, seed: u64) -> (CuckooFilter, Vec<u64>, Vec<u64>) {
    let filter = CuckooFilter::with_capacity(n);
    let mut keys = common::distinct_keys(seed, n + probes);
    let absent = keys.split_off(n);
    for k in &keys {
        filter.insert(k).unwrap();
    }
    (filter, keys, absent)
}

#[test]
fn contains_of_absent_items_stays_at_the_quiet_false_positive_rate_while_a_save_is_in_progress() {
    let _serial = one_at_a_time();
    let seed = common::fixed_seed("lookups during a save", 0x5a7e);
    let (filter, present, absent) = loaded_filter(200_000, 200_000, seed);
    let rate = |hits: usize| hits as f64 / absent.len() as f64;
    let quiet = rate(absent.iter().filter(|k| filter.contains(*k)).count());
    let ((during, missed), bytes) = thread::scope(|s| {
        while_saving(s, &filter, || {
            let hits = absent.iter().filter(|k| filter.contains(*k)).count();
            let missed = present.iter().filter(|k| !filter.contains(*k)).count();
            (rate(hits), missed)
        })
    });
    println!(
        "absent items reported present: {:.3} % quiet, {:.3} % while a save was in progress \
         ({} probes each); {missed} present items missed during the save",
        quiet * 100.0,
        during * 100.0,
        absent.len()
    );
    assert_eq!(missed, 0, "present items not found during a save");
    let allowed = 1.5 * quiet + 0.001;
    assert!(
        during <= allowed,
        "during a save {:.3} % of absent items were reported present, against {:.3} % when \
         quiet (allowed {:.3} %)",
        during * 100.0,
        quiet * 100.0,
        allowed * 100.0
    );
    let restored = CuckooFilter::from_bytes(&bytes).unwrap();
    assert_eq!(restored.len(), present.len());
}

/// `count` of a present item returns while a save is held; a writer that waits for the save
/// completes once it is released, and its item is found.
#[test]
fn count_returns_while_a_save_is_in_progress_and_waiting_writers_finish_after_it() {
    let _serial = one_at_a_time();
    let seed = common::fixed_seed("count during a save", 0xc0_57);
    let (filter, present, absent) = loaded_filter(200_000, 1, seed);
    let (item, late) = (present[present.len() / 2], absent[0]);
    let (counted, inserted) = thread::scope(|s| {
        let (count_tx, count_rx) = mpsc::channel();
        let (insert_tx, insert_rx) = mpsc::channel();
        let filter = &filter;
        let (counted, _) = while_saving(s, filter, || {
            s.spawn(move || {
                let began = Instant::now();
                let n = filter.count(&item);
                let _ = count_tx.send((n, began.elapsed()));
            });
            s.spawn(move || {
                filter.insert(&late).unwrap();
                let _ = insert_tx.send(());
            });
            count_rx.recv_timeout(PATIENCE)
        });
        let inserted = insert_rx.recv_timeout(PATIENCE);
        (counted, inserted)
    });
    match counted {
        Ok((n, took)) => {
            println!("count returned {n} after {took:?} while the save was held");
            assert!(n >= 1, "count of a present item returned {n}");
        }
        Err(_) => panic!(
            "count of a present item did not return within {PATIENCE:?} while a save was in \
             progress (it returned only after the save was released)"
        ),
    }
    assert!(
        inserted.is_ok(),
        "a writer blocked by the save did not finish after the save was released"
    );
    assert!(
        filter.contains(&late),
        "the late writer's item is not found"
    );
    assert_eq!(filter.len(), present.len() + 1);
}

/// CPU time (user + system) a thread of this process has used so far.
#[cfg(target_os = "linux")]
fn thread_cpu_time(tid: u32) -> Duration {
    // schedstat: nanoseconds on the CPU, then wait time, then time slices.
    let task = format!("/proc/self/task/{tid}");
    if let Ok(text) = std::fs::read_to_string(format!("{task}/schedstat")) {
        if let Some(ns) = text.split_whitespace().next().and_then(|v| v.parse().ok()) {
            return Duration::from_nanos(ns);
        }
    }
    // stat: utime and stime, fields 14 and 15, in clock ticks (100 per second on Linux).
    let text = std::fs::read_to_string(format!("{task}/stat")).expect("thread stat");
    let after_name = &text[text.rfind(')').expect("stat has a command name") + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// The calling thread's id.
#[cfg(target_os = "linux")]
fn current_tid() -> u32 {
    // "/proc/thread-self" links to "<pid>/task/<tid>".
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    link.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .expect("a numeric thread id")
}

/// A writer that waits for a save must not spin: over 300 ms of a held save it may use at most
/// half of that in CPU time.
#[cfg(target_os = "linux")]
#[test]
fn a_writer_waiting_for_a_save_does_not_burn_cpu() {
    let _serial = one_at_a_time();
    let seed = common::fixed_seed("writer during a save", 0xb10c);
    let (filter, present, absent) = loaded_filter(100_000, 1, seed);
    let late = absent[0];
    let (used, watched, finished_early, inserted) = thread::scope(|s| {
        let filter = &filter;
        let (tid_tx, tid_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        let (measured, _) = while_saving(s, filter, || {
            s.spawn(move || {
                tid_tx.send(current_tid()).unwrap();
                filter.insert(&late).unwrap();
                let _ = done_tx.send(());
            });
            let tid = tid_rx.recv_timeout(PATIENCE).expect("the writer started");
            // Let it reach the wait.
            thread::sleep(Duration::from_millis(50));
            let (cpu0, wall0) = (thread_cpu_time(tid), Instant::now());
            thread::sleep(Duration::from_millis(300));
            let (cpu1, wall1) = (thread_cpu_time(tid), Instant::now());
            let finished_early = done_rx.try_recv().is_ok();
            (cpu1 - cpu0, wall1 - wall0, finished_early)
        });
        let (used, watched, finished_early) = measured;
        let inserted = finished_early || done_rx.recv_timeout(PATIENCE).is_ok();
        (used, watched, finished_early, inserted)
    });
    println!(
        "a writer waiting for the save used {used:?} of CPU in {watched:?}{}",
        if finished_early {
            " (its insert finished while the save was held)"
        } else {
            ""
        }
    );
    assert!(
        used < watched / 2,
        "a writer waiting for a held save used {used:?} of CPU in {watched:?}"
    );
    assert!(
        inserted,
        "the writer did not finish after the save was released"
    );
    assert!(filter.contains(&late), "the writer's item is not found");
    assert_eq!(filter.len(), present.len() + 1);
}

/// Writers insert while saves repeat: every restored snapshot holds every item whose insert
/// completed before its save started (checked for a fixed filter near full, where inserts move
/// older items' fingerprints, and for a growing filter, where levels are added meanwhile).
#[test]
fn every_snapshot_taken_during_inserts_holds_the_items_inserted_before_the_save_began() {
    let _serial = one_at_a_time();
    let seed = common::seed_or("saves during inserts", 0x5a7e_d0e5);
    let fixed = CuckooFilter::with_capacity(300_000);
    let growing = CuckooFilter::builder()
        .capacity(2_000)
        .growable(true)
        .build()
        .unwrap();
    for (name, filter, items) in [
        ("fixed, filled to capacity", &fixed, 300_000usize),
        ("growing from 2,000", &growing, 200_000),
    ] {
        const WRITERS: usize = 2;
        let keys = common::distinct_keys(seed, items);
        let per_writer = items / WRITERS;
        let progress: [AtomicUsize; WRITERS] = Default::default();
        // Saves run in lockstep with the writers' chunks: save c begins once every writer has
        // inserted c + 1 chunks, and runs while they insert the next one.
        const SAVES: usize = 50;
        let chunk = per_writer / SAVES;
        let saves_begun = AtomicUsize::new(0);
        let barrier = Barrier::new(WRITERS + 1);
        // Each snapshot with how far every writer had got before its save began.
        let snapshots: Vec<(Vec<usize>, Vec<u8>)> = thread::scope(|s| {
            for w in 0..WRITERS {
                let (keys, progress, barrier, saves_begun) =
                    (&keys, &progress, &barrier, &saves_begun);
                s.spawn(move || {
                    barrier.wait();
                    for (i, k) in keys[w * per_writer..(w + 1) * per_writer]
                        .iter()
                        .enumerate()
                    {
                        filter.insert(k).unwrap();
                        progress[w].store(i + 1, Ordering::Release);
                        let chunks = (i + 1) / chunk;
                        if (i + 1) % chunk == 0 && chunks < SAVES {
                            while saves_begun.load(Ordering::Acquire) < chunks {
                                thread::yield_now();
                            }
                        }
                    }
                });
            }
            let (progress, barrier, saves_begun) = (&progress, &barrier, &saves_begun);
            barrier.wait();
            (0..SAVES)
                .map(|c| {
                    while progress
                        .iter()
                        .any(|p| p.load(Ordering::Acquire) < (c + 1) * chunk)
                    {
                        thread::yield_now();
                    }
                    let done: Vec<usize> =
                        progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
                    saves_begun.store(c + 1, Ordering::Release);
                    let bytes = if c % 2 == 0 {
                        filter.to_bytes()
                    } else {
                        let mut out = Vec::new();
                        filter.write_to(&mut out).unwrap();
                        out
                    };
                    (done, bytes)
                })
                .collect()
        });
        let mut bad = Vec::new();
        let mut during = 0;
        for (i, (done, bytes)) in snapshots.iter().enumerate() {
            let restored = if i % 2 == 0 {
                CuckooFilter::from_bytes(bytes)
            } else {
                CuckooFilter::read_from(&bytes[..])
            };
            let restored = match restored {
                Ok(r) => r,
                Err(e) => {
                    bad.push(format!("snapshot {i} does not restore: {e}"));
                    continue;
                }
            };
            let before: usize = done.iter().sum();
            if before < items {
                during += 1;
            }
            if restored.len() < before {
                bad.push(format!(
                    "snapshot {i}: {} items, but {before} were inserted before its save began",
                    restored.len()
                ));
            }
            for (w, &upto) in done.iter().enumerate() {
                let base = w * per_writer;
                let lost = keys[base..base + upto]
                    .iter()
                    .filter(|k| !restored.contains(*k))
                    .count();
                if lost > 0 {
                    bad.push(format!(
                        "snapshot {i}: {lost} of the {upto} items writer {w} inserted before \
                         the save began are missing"
                    ));
                }
            }
        }
        let last = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
        let lost = keys.iter().filter(|k| !last.contains(*k)).count();
        if lost > 0 {
            bad.push(format!("a snapshot after the inserts lacks {lost} items"));
        }
        println!(
            "{name}: {} snapshots, {during} of them begun while writers were inserting; {} \
             doublings; {} problems",
            snapshots.len(),
            filter.doublings(),
            bad.len()
        );
        assert!(
            bad.is_empty(),
            "{name} (seed {seed}): {}",
            bad[..bad.len().min(5)].join("; ")
        );
        assert!(
            during >= SAVES - 1,
            "{name}: only {during} saves overlapped the inserts"
        );
    }
}
