//! A save holds writers off, not readers. While a save is stopped in its first write (a slow
//! destination), lookups of absent items answer exactly as when the filter is quiet, `count`
//! answers, and inserts wait asleep, then apply to the live filter only.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::CuckooFilter;

use crate::common;

/// A destination whose first write reports that the save reached it and then waits to be
/// released (or for the test to give up): it holds a save at a point where the filter is frozen.
struct HeldDisk {
    reached: Option<mpsc::Sender<()>>,
    release: mpsc::Receiver<()>,
    bytes: Vec<u8>,
}

impl Write for HeldDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(reached) = self.reached.take() {
            reached.send(()).unwrap();
            // An error means the test dropped its sender (it failed): let the save finish.
            let _ = self.release.recv();
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How many of `keys` the filter answers `true` for.
fn positives(filter: &CuckooFilter, keys: &[u64]) -> usize {
    keys.iter().filter(|k| filter.contains(*k)).count()
}

/// CPU time the calling thread has used (Linux: `/proc/thread-self/stat`, in clock ticks of
/// 10 ms, USER_HZ = 100 on every mainstream configuration); `None` elsewhere.
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

const HELD_FOR_WRITERS: Duration = Duration::from_millis(400);

#[test]
fn a_held_save_keeps_lookups_exact_and_counts_answering_while_writers_sleep() {
    let seed = common::seed("held save");
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(20_000)
            .false_positive_rate(0.01)
            .growable(true)
            .build()
            .unwrap(),
    );
    let keys = common::distinct_keys(seed, 600_000);
    let (present, absent) = keys.split_at(100_000);
    for k in present {
        filter.insert(k).unwrap();
    }
    // Two items for the writers that the filter answers "absent" for (so that `insert_unique`
    // adds its item).
    let new: Vec<u64> = absent
        .iter()
        .copied()
        .filter(|k| !filter.contains(k))
        .take(2)
        .collect();
    assert!(filter.doublings() > 1, "the save must freeze a grown table");
    let quiet = positives(&filter, absent);
    println!(
        "quiet: {quiet} of {} absent items answer true ({:.3} %), {} doublings",
        absent.len(),
        100.0 * quiet as f64 / absent.len() as f64,
        filter.doublings()
    );

    let (reached_tx, reached) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let saver = {
        let filter = Arc::clone(&filter);
        thread::spawn(move || {
            let mut disk = HeldDisk {
                reached: Some(reached_tx),
                release: release_rx,
                bytes: Vec::new(),
            };
            filter.write_to(&mut disk).unwrap();
            disk.bytes
        })
    };
    reached
        .recv_timeout(Duration::from_secs(30))
        .expect("the save reached its first write");

    // Lookups while the save is held: exactly the quiet answers (the filter cannot change, and
    // no stripe is held, so every lookup proves its answer).
    let during = positives(&filter, absent);
    assert_eq!(
        during, quiet,
        "absent items answering true while a save is held"
    );

    // Writers wait, asleep: one `insert`, one `insert_unique` (which locks two levels).
    let done = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (filter, done, item) = (Arc::clone(&filter), Arc::clone(&done), new[w]);
            thread::spawn(move || {
                let cpu = thread_cpu_time();
                if w == 0 {
                    filter.insert(&item).unwrap();
                } else {
                    assert!(filter.insert_unique(&item).unwrap());
                }
                done[w].store(true, Ordering::Release);
                cpu.zip(thread_cpu_time()).map(|(start, end)| end - start)
            })
        })
        .collect();
    let held_since = Instant::now();
    thread::sleep(HELD_FOR_WRITERS);
    assert!(
        done.iter().all(|d| !d.load(Ordering::Acquire)),
        "a write went through while the save was held"
    );

    // Readers are not disturbed by the waiting writers either; `count` answers from another
    // thread (it never takes a lock that a save holds up).
    assert_eq!(positives(&filter, absent), quiet);
    let (counted_tx, counted) = mpsc::channel();
    {
        let (filter, item) = (Arc::clone(&filter), present[0]);
        thread::spawn(move || counted_tx.send(filter.count(&item)).unwrap());
    }
    let copies = counted
        .recv_timeout(Duration::from_secs(10))
        .expect("count returned while the save was held");
    assert!(copies >= 1, "a present item counted {copies} times");

    let held_for = held_since.elapsed();
    release.send(()).unwrap();
    let bytes = saver.join().unwrap();
    for (w, writer) in writers.into_iter().enumerate() {
        match writer.join().unwrap() {
            Some(cpu) => {
                println!("writer {w} used {cpu:?} of CPU while waiting {held_for:?}");
                assert!(
                    cpu < held_for / 4,
                    "writer {w} used {cpu:?} of CPU waiting {held_for:?}: it spun"
                );
            }
            None => println!("no per-thread CPU time on this system: not checked"),
        }
    }

    // The snapshot is the filter as it was when the save froze it; the writes went to the live
    // filter afterwards.
    let restored = CuckooFilter::from_bytes(&bytes).unwrap();
    assert_eq!(restored.len(), present.len());
    assert_eq!(filter.len(), present.len() + 2);
    for item in &new {
        assert_eq!(
            restored.count(item) + 1,
            filter.count(item),
            "the snapshot holds a write made after the save froze the filter"
        );
    }
    assert!(present.iter().all(|k| restored.contains(k)));
}
