//! Liveness around saves: do writers get through when saves follow each other back to back?
//! Do `count` and `contains` stay fast while many writers of every kind are piled up at a held
//! save? Does a saved filter restored on another thread behave while the original is saved?

use crate::common;
use crate::common::HeldWriter;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::watchdog::watchdog;
use atomic_cuckoo::CuckooFilter;

/// One writer, and savers that call `to_bytes` back to back (a checkpoint loop, or several
/// clients asking for a snapshot). Each save opens the gate for an instant before the next one
/// closes it; a woken writer must get through in that window. Measure the writer's rate against
/// its rate without saves, and its longest single insert.
#[test]
fn a_writer_makes_progress_while_saves_follow_each_other_back_to_back() {
    for savers in [1usize, 2] {
        let filter = Arc::new(CuckooFilter::with_capacity(20_000));
        let stop = Arc::new(AtomicBool::new(false));
        let run = Duration::from_millis(800);

        let writer = |filter: Arc<CuckooFilter>, stop: Arc<AtomicBool>| {
            thread::spawn(move || {
                let (mut ops, mut worst) = (0u64, Duration::ZERO);
                let mut k = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    if k >= 10_000 {
                        assert!(filter.remove(&(k - 10_000)));
                    }
                    filter.insert(&k).unwrap();
                    worst = worst.max(t.elapsed());
                    k += 1;
                    ops += 1;
                }
                (ops, worst)
            })
        };
        // Baseline: no saves.
        let base = {
            let f = Arc::new(CuckooFilter::with_capacity(20_000));
            let s = Arc::new(AtomicBool::new(false));
            let h = writer(Arc::clone(&f), Arc::clone(&s));
            thread::sleep(Duration::from_millis(200));
            s.store(true, Ordering::Relaxed);
            h.join().unwrap().0 as f64 / 0.2
        };
        let saves = Arc::new(AtomicU64::new(0));
        let saver_handles: Vec<_> = (0..savers)
            .map(|_| {
                let (f, s, saves) = (Arc::clone(&filter), Arc::clone(&stop), Arc::clone(&saves));
                thread::spawn(move || {
                    while !s.load(Ordering::Relaxed) {
                        std::hint::black_box(f.to_bytes());
                        saves.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let w = writer(Arc::clone(&filter), Arc::clone(&stop));
        thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
        let (ops, worst) = watchdog(
            "writer under back-to-back saves",
            Duration::from_secs(20),
            move || w.join().unwrap(),
        );
        for h in saver_handles {
            h.join().unwrap();
        }
        let rate = ops as f64 / run.as_secs_f64();
        println!(
            "{savers} back-to-back savers: {} saves; writer {ops} ops ({rate:.0}/s, baseline \
             {base:.0}/s, {:.2} %), longest insert {worst:?}",
            saves.load(Ordering::Relaxed),
            100.0 * rate / base
        );
        assert!(
            ops >= 1_000,
            "{savers} savers: the writer starved: {ops} ops in {run:?} (longest {worst:?})"
        );
    }
}

/// Many writers of every kind piled up at a held save (insert that must grow, insert_unique on a
/// grown filter, insert_many, remove, and writers arriving again and again): `count` and
/// `contains` must stay fast and exact; absent items answer exactly as on the quiet filter.
#[test]
fn reads_stay_fast_and_exact_with_writers_piled_up_at_a_held_save() {
    let seed = common::seed("piled-up writers");
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(2_000)
            .growable(true)
            .build()
            .unwrap(),
    );
    let keys = common::distinct_keys(seed, 300_000);
    let (present, absent) = keys.split_at(50_000);
    filter.insert_many(present).unwrap();
    assert!(filter.doublings() >= 4);
    let quiet: Vec<bool> = absent.iter().map(|k| filter.contains(k)).collect();
    let quiet_counts: Vec<usize> = present
        .iter()
        .take(5_000)
        .map(|k| filter.count(k))
        .collect();

    let (mut w, reached, release) = HeldWriter::new();
    let saver = {
        let f = Arc::clone(&filter);
        thread::spawn(move || {
            f.write_to(&mut w).unwrap();
            w.bytes
        })
    };
    reached.recv_timeout(Duration::from_secs(10)).unwrap();
    let n = 6;
    let barrier = Arc::new(Barrier::new(n + 1));
    let writers: Vec<_> = (0..n)
        .map(|t| {
            let (f, b) = (Arc::clone(&filter), Arc::clone(&barrier));
            let base = (t as u64 + 1) << 48;
            let mine: Vec<u64> = present[t * 100..t * 100 + 100].to_vec();
            thread::spawn(move || {
                b.wait();
                match t % 4 {
                    0 => (0..5_000u64).for_each(|i| f.insert(&(base + i)).unwrap()),
                    1 => (0..500u64).for_each(|i| {
                        f.insert_unique(&(base + i)).unwrap();
                    }),
                    2 => f.insert_many((0..3_000u64).map(|i| base + i)).unwrap(),
                    _ => mine.iter().for_each(|k| assert!(f.remove(k))),
                }
            })
        })
        .collect();
    barrier.wait();
    thread::sleep(Duration::from_millis(50));
    let mut worst_count = Duration::ZERO;
    let mut worst_contains = Duration::ZERO;
    let mut during = Vec::with_capacity(absent.len());
    for k in absent {
        let t = Instant::now();
        during.push(filter.contains(k));
        worst_contains = worst_contains.max(t.elapsed());
    }
    for (k, &q) in present.iter().zip(&quiet_counts) {
        let t = Instant::now();
        assert_eq!(filter.count(k), q);
        worst_count = worst_count.max(t.elapsed());
    }
    let differ = quiet.iter().zip(&during).filter(|(a, b)| a != b).count();
    println!(
        "held save, {n} writers waiting: worst contains {worst_contains:?}, worst count \
         {worst_count:?}, {differ} absent items answered differently from the quiet filter"
    );
    assert_eq!(differ, 0);
    assert!(
        writers.iter().all(|h| !h.is_finished()),
        "a writer finished during the save"
    );
    release.send(()).unwrap();
    let bytes = watchdog("held save", Duration::from_secs(10), move || {
        saver.join().unwrap()
    });
    watchdog(
        "writers after the save",
        Duration::from_secs(30),
        move || writers.into_iter().for_each(|h| h.join().unwrap()),
    );
    let r = CuckooFilter::from_bytes(&bytes).unwrap();
    assert_eq!(r.len(), present.len());
    assert!(
        worst_count < Duration::from_millis(50),
        "count took {worst_count:?}"
    );
}

/// Thread A saves the filter again and again while thread B restores each snapshot, writes into
/// the restored copy and saves that; thread C writes into the original. No deadlock, and every
/// snapshot restores.
#[test]
fn saving_while_another_thread_restores_and_resaves() {
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(500)
            .growable(true)
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
    let a = {
        let (f, s) = (Arc::clone(&filter), Arc::clone(&stop));
        thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if tx.send(f.to_bytes()).is_err() {
                    break;
                }
            }
        })
    };
    let b = thread::spawn(move || {
        let mut restored = 0;
        for bytes in rx {
            let r = Arc::new(CuckooFilter::from_bytes(&bytes).unwrap());
            let len = r.len();
            let r2 = Arc::clone(&r);
            let w = thread::spawn(move || {
                for i in 0..200u64 {
                    r2.insert(&(u64::MAX - i)).unwrap();
                }
            });
            let again = CuckooFilter::from_bytes(&r.to_bytes()).unwrap();
            assert!(again.len() >= len && again.len() <= len + 200);
            w.join().unwrap();
            restored += 1;
        }
        restored
    });
    let c = {
        let (f, s) = (Arc::clone(&filter), Arc::clone(&stop));
        thread::spawn(move || {
            let mut i = 0u64;
            while !s.load(Ordering::Relaxed) && i < 200_000 {
                f.insert(&i).unwrap();
                i += 1;
            }
        })
    };
    thread::sleep(Duration::from_millis(700));
    stop.store(true, Ordering::Relaxed);
    let restored = watchdog(
        "save / restore / resave",
        Duration::from_secs(30),
        move || {
            a.join().unwrap();
            c.join().unwrap();
            b.join().unwrap()
        },
    );
    println!(
        "{restored} snapshots restored and re-saved; {} doublings",
        filter.doublings()
    );
    assert!(restored > 0);
}
