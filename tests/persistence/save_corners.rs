//! Single-threaded (or nearly) corner cases of the save freeze: a `Write` that panics or fails
//! mid-save, a `Write` that uses the filter it is saving, round trips of many shapes.

use crate::common;
use crate::common::HeldWriter;

use std::io::{self, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::watchdog::{finishes_within, inside_own_save, watchdog, Refused};
use atomic_cuckoo::CuckooFilter;

const LIMIT: Duration = Duration::from_secs(10);

fn grown_filter(items: u64) -> CuckooFilter {
    let f = CuckooFilter::builder()
        .capacity(100)
        .growable(true)
        .build()
        .unwrap();
    for i in 0..items {
        f.insert(&i).unwrap();
    }
    f
}

/// A destination that panics (or fails) in its `n`th `write`, and optionally lets a test know
/// when it started writing.
struct Faulty {
    calls: usize,
    fail_at: usize,
    panic: bool,
    before_fail: Option<Box<dyn FnMut() + Send>>,
}

impl Write for Faulty {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls == self.fail_at {
            if let Some(f) = self.before_fail.as_mut() {
                f();
            }
            if self.panic {
                panic!("disk on fire");
            }
            return Err(io::Error::other("disk full"));
        }
        Ok(buf.len().min(100))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A save whose `Write` panics mid-save: the panic unwinds through `write_to`; afterwards the
/// filter must be usable (gates open, grow lock free), and a writer that slept during the save
/// must finish.
#[test]
fn a_write_that_panics_mid_save_leaves_the_filter_usable() {
    for panic in [true, false] {
        let filter = Arc::new(grown_filter(2_000));
        assert!(filter.doublings() >= 3);
        let before = filter.len();
        // A writer that starts while the save is frozen (in its 3rd write) and must finish after.
        let started = Arc::new(AtomicBool::new(false));
        let sleeper: Arc<std::sync::Mutex<Option<thread::JoinHandle<()>>>> = Default::default();
        let hook = {
            let (filter, started, sleeper) = (
                Arc::clone(&filter),
                Arc::clone(&started),
                Arc::clone(&sleeper),
            );
            move || {
                let f = Arc::clone(&filter);
                let s = Arc::clone(&started);
                *sleeper.lock().unwrap() = Some(thread::spawn(move || {
                    s.store(true, Ordering::SeqCst);
                    f.insert(&u64::MAX).unwrap();
                    assert!(f.insert_unique(&(u64::MAX - 1)).unwrap());
                    assert!(f.remove(&0u64));
                }));
                thread::sleep(Duration::from_millis(100));
            }
        };
        let mut out = Faulty {
            calls: 0,
            fail_at: 3,
            panic,
            before_fail: Some(Box::new(hook)),
        };
        let outcome = {
            let filter = Arc::clone(&filter);
            watchdog("the faulty save", LIMIT, move || {
                catch_unwind(AssertUnwindSafe(|| {
                    filter.write_to(&mut out).map_err(|e| e.kind())
                }))
                .map_err(|_| "panicked")
            })
        };
        println!("panic={panic}: outcome {outcome:?}");
        if panic {
            assert!(outcome.is_err());
        } else {
            assert!(matches!(outcome, Ok(Err(_))));
        }
        assert!(started.load(Ordering::SeqCst));
        let h = sleeper.lock().unwrap().take().unwrap();
        watchdog(
            "the writer that slept through the failed save",
            LIMIT,
            move || h.join().unwrap(),
        );
        let f2 = Arc::clone(&filter);
        watchdog(
            "writes and a save after the failed save",
            LIMIT,
            move || {
                f2.insert(&123_456_789u64).unwrap();
                assert!(f2.remove(&123_456_789u64));
                for i in 10_000..20_000u64 {
                    f2.insert(&i).unwrap(); // grows
                }
                let bytes = f2.to_bytes();
                let r = CuckooFilter::from_bytes(&bytes).unwrap();
                assert_eq!(r.len(), f2.len());
            },
        );
        assert_eq!(filter.len(), before + 1 + 1 - 1 + 10_000);
    }
}

/// Reads of the filter from inside its own save's `Write` (contains, count, len, stats,
/// snapshot size, contains_many, Debug) must not block.
#[test]
fn reads_of_the_filter_from_inside_its_save_do_not_block() {
    struct Reading {
        filter: Arc<CuckooFilter>,
        sink: Vec<u8>,
    }
    impl Write for Reading {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let f = &self.filter;
            assert!(f.contains(&5u64));
            assert!(f.count(&5u64) >= 1);
            let _ = (
                f.len(),
                f.doublings(),
                f.snapshot_size(),
                f.false_positive_rate(),
            );
            let mut out = Vec::new();
            f.contains_many([1u64, 2, 3], &mut out);
            assert!(out.iter().all(|&b| b));
            let _ = format!("{f:?}");
            self.sink.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let filter = Arc::new(grown_filter(3_000));
    let f = Arc::clone(&filter);
    let bytes = watchdog("a save whose Write reads the filter", LIMIT, move || {
        let mut w = Reading {
            filter: Arc::clone(&f),
            sink: Vec::new(),
        };
        f.write_to(&mut w).unwrap();
        w.sink
    });
    assert_eq!(bytes, filter.to_bytes());
}

/// A `Write` that saves the same filter (say, a tee that also keeps an in-memory copy): the
/// nested save takes the (non-reentrant) grow lock again, so it must be refused with an error
/// instead of hanging, and the filter must stay usable.
#[test]
fn a_save_from_inside_a_save_of_the_same_filter_is_refused_not_a_deadlock() {
    struct Nested {
        filter: Arc<CuckooFilter>,
        done: bool,
        sink: Vec<u8>,
    }
    impl Write for Nested {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if !self.done {
                self.done = true;
                self.filter.write_to(&mut Vec::new())?;
            }
            self.sink.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let filter = Arc::new(grown_filter(100));
    let f = Arc::clone(&filter);
    let finished = finishes_within(Duration::from_secs(3), move || {
        let mut w = Nested {
            filter: Arc::clone(&f),
            done: false,
            sink: Vec::new(),
        };
        f.write_to(&mut w).map_err(|e| e.kind())
    });
    assert_eq!(
        finished,
        Some(Err(io::ErrorKind::Deadlock)),
        "a save whose Write saves the same filter must be refused, not hang"
    );
    // Usable afterwards: writes go through, saves work.
    filter.insert(&u64::MAX).unwrap();
    assert!(CuckooFilter::from_bytes(&filter.to_bytes())
        .unwrap()
        .contains(&u64::MAX));
}

/// The one policy for whole-filter operations nested in a save of the same filter, on the
/// saving thread: a save is refused with an error of kind `Deadlock`; `to_bytes`, `clone` and
/// `clear`, which have no error to return, panic with the one message. None hangs, none
/// changes the filter, and the outer save completes with the whole filter.
#[test]
fn whole_filter_operations_inside_its_own_save_follow_the_one_policy() {
    type Op = fn(&CuckooFilter) -> String;
    let ops: [(&str, Op, Refused); 4] = [
        (
            "write_to",
            |f| format!("{:?}", f.write_to(&mut Vec::new()).map_err(|e| e.kind())),
            Refused::DeadlockError,
        ),
        (
            "to_bytes",
            |f| format!("{} bytes", f.to_bytes().len()),
            Refused::NestedPanic,
        ),
        (
            "clone",
            |f| format!("a clone of {} items", f.clone().len()),
            Refused::NestedPanic,
        ),
        (
            "clear",
            |f| {
                f.clear();
                "cleared".to_string()
            },
            Refused::NestedPanic,
        ),
    ];
    let filter = Arc::new(grown_filter(3_000));
    assert!(filter.doublings() > 0);
    let before = filter.to_bytes();
    for (what, op, refused) in ops {
        let (inside, saved) = inside_own_save(&filter, |f, w| f.write_to(w), op)
            .unwrap_or_else(|| panic!("DEADLOCK: {what} inside a save of the same filter"));
        refused.assert(what, &inside);
        let saved = saved.unwrap_or_else(|e| panic!("{what}: the outer save failed: {e}"));
        assert!(
            saved == before,
            "{what}: the outer save is whole, the filter unchanged"
        );
    }
    // Usable afterwards: writes go through, saves, clones and clears work.
    filter.insert(&u64::MAX).unwrap();
    assert!(filter.clone().contains(&u64::MAX));
    filter.clear();
    assert!(filter.is_empty());
}

/// The marks are per filter and per thread. From inside a save's destination, other filters
/// (of each type) save, clone, clear and compact as usual; and a save of the same filter on
/// another thread waits for the first save, then succeeds with the whole filter.
#[test]
fn another_filter_inside_a_save_and_the_same_filter_on_another_thread_are_unaffected() {
    use atomic_cuckoo::redisbloom::{RedisCuckooFilter, PORTABLE_RDB_VERSION};
    use std::sync::Mutex;
    use std::thread::JoinHandle;

    let other = Arc::new(grown_filter(500));
    let expanding = Arc::new(
        CuckooFilter::builder()
            .growable(true)
            .capacity(100)
            .build()
            .unwrap(),
    );
    let redis = Arc::new(RedisCuckooFilter::reserve(100).unwrap());
    for i in 0..500u64 {
        expanding.insert(&i).unwrap();
        redis.insert(i.to_le_bytes()).unwrap();
    }
    let filter = Arc::new(grown_filter(3_000));
    let before = filter.to_bytes();
    /// The save on another thread, once the destination started it.
    type Saving = Mutex<Option<JoinHandle<io::Result<Vec<u8>>>>>;
    let other_thread: Arc<Saving> = Arc::default();
    let (o, x, r, same, t) = (
        Arc::clone(&other),
        Arc::clone(&expanding),
        Arc::clone(&redis),
        Arc::clone(&filter),
        Arc::clone(&other_thread),
    );
    let (inside, saved) = inside_own_save(
        &filter,
        |f, w| f.write_to(w),
        move |_: &CuckooFilter| {
            let mut out = Vec::new();
            o.write_to(&mut out).unwrap();
            assert_eq!(out, o.to_bytes());
            assert_eq!(o.clone().len(), 500);
            o.clear();
            assert!(o.is_empty());
            x.write_to(&mut Vec::new()).unwrap();
            assert_eq!(x.clone().len(), 500);
            x.clear();
            assert!(x.is_empty());
            assert!(!r.scandump().is_empty());
            assert!(!r.dump_payload(PORTABLE_RDB_VERSION).is_empty());
            r.compact();
            assert_eq!(r.clone().len(), 500);
            // The same filter, saved on another thread: it waits for this save to end.
            let same = Arc::clone(&same);
            *t.lock().unwrap() = Some(thread::spawn(move || {
                let mut out = Vec::new();
                same.write_to(&mut out).map(|()| out)
            }));
            thread::sleep(Duration::from_millis(50));
            "done".to_string()
        },
    )
    .expect("DEADLOCK: other filters used inside a save");
    assert!(
        matches!(&inside, crate::watchdog::Inside::Returned(r) if r == "done"),
        "{inside:?}"
    );
    assert!(saved.unwrap() == before);
    let handle = other_thread.lock().unwrap().take().unwrap();
    let on_another_thread = handle.join().unwrap();
    assert!(
        on_another_thread.as_ref().is_ok_and(|b| *b == before),
        "a save of the same filter on another thread: {:?}",
        on_another_thread.map(|b| b.len())
    );
}

/// What the docs of `write_to` say: a `Write` that inserts into the filter it saves waits
/// forever. Check that this is what happens (and that the same holds for `insert_unique` of an
/// item already present and `remove` of an absent one, which change nothing).
#[test]
fn writes_from_inside_a_save_block_as_documented() {
    type Op = fn(&CuckooFilter);
    let ops: [(&str, Op); 3] = [
        ("insert", |f| {
            let _ = f.insert(&1u64);
        }),
        ("insert_unique of a present item", |f| {
            let _ = f.insert_unique(&5u64);
        }),
        ("remove of an absent item", |f| {
            let _ = f.remove(&u64::MAX);
        }),
    ];
    for (name, op) in ops {
        struct W {
            filter: Arc<CuckooFilter>,
            op: Op,
        }
        impl Write for W {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                (self.op)(&self.filter);
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let filter = Arc::new(grown_filter(100));
        let f = Arc::clone(&filter);
        let finished = finishes_within(Duration::from_millis(500), move || {
            f.write_to(&mut W {
                filter: Arc::clone(&f),
                op,
            })
            .unwrap()
        });
        println!(
            "{name} from inside the save: finished = {}",
            finished.is_some()
        );
        assert!(finished.is_none(), "{name} inside the save did not block");
    }
}

/// to_bytes -> from_bytes -> to_bytes is the identity, for fixed and grown filters of many
/// shapes, and the restored filter answers as the original.
#[test]
fn round_trips_of_many_shapes() {
    let seed = common::seed("round trips");
    let mut rng = common::Rng::new(seed);
    for bits in [4u32, 7, 8, 12, 16, 21, 32] {
        for grow in [false, true] {
            let b = CuckooFilter::builder().capacity(1 + rng.below(300) as usize);
            // A growable filter chooses its width from a rate: the widths become rates.
            let f = if grow {
                b.growable(true)
                    .false_positive_rate(0.5f64.powi(bits as i32 - 3).clamp(1e-7, 0.5))
                    .build()
            } else {
                b.fingerprint_bits(bits).build()
            }
            .unwrap();
            let n = rng.below(2_000);
            let keys = common::distinct_keys(rng.next_u64(), n as usize);
            for k in &keys {
                if f.insert(k).is_err() {
                    break;
                }
            }
            let bytes = f.to_bytes();
            assert_eq!(bytes.len(), f.snapshot_size());
            let r = CuckooFilter::from_bytes(&bytes).unwrap();
            assert_eq!(r.to_bytes(), bytes, "bits {bits} grow {grow}");
            assert_eq!(r.len(), f.len());
            assert_eq!(r.doublings(), f.doublings());
            for k in keys.iter().take(300) {
                assert_eq!(r.count(k), f.count(k));
            }
        }
    }
}

/// A held save, then writers of every kind (insert needing growth, insert_unique on a grown
/// filter, insert_many, remove): they wait; readers answer; after the release everything goes
/// through, and the snapshot holds none of it.
#[test]
fn every_kind_of_writer_waits_for_a_held_save_and_then_finishes() {
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(200)
            .growable(true)
            .build()
            .unwrap(),
    );
    // Grow twice and finish, then fill close to the doubling load, so that the next inserts
    // must kick and then double.
    let mut m = 0u64;
    while filter.doublings() < 2 {
        filter.insert(&m).unwrap();
        m += 1;
    }
    filter.finish_doubling();
    while (filter.len() as f64) < 0.9 * filter.slots() as f64 {
        filter.insert(&m).unwrap();
        m += 1;
    }
    assert_eq!(filter.doublings(), 2);
    let quiet_len = filter.len();
    let doublings_before = filter.doublings();
    let (mut w, reached, release) = HeldWriter::new();
    let saver = {
        let f = Arc::clone(&filter);
        thread::spawn(move || {
            f.write_to(&mut w).unwrap();
            w.bytes
        })
    };
    reached.recv_timeout(LIMIT).unwrap();
    let base = 1u64 << 40;
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut writers = Vec::new();
    for kind in 0..4u64 {
        let (f, done) = (Arc::clone(&filter), Arc::clone(&done));
        writers.push(thread::spawn(move || {
            let delta: i64 = match kind {
                0 => {
                    for i in 0..20_000u64 {
                        f.insert(&(base + i)).unwrap();
                    }
                    20_000
                }
                1 => (0..2_000u64)
                    .filter(|i| f.insert_unique(&(2 * base + i)).unwrap())
                    .count() as i64,
                2 => {
                    let items: Vec<u64> = (0..5_000u64).map(|i| 3 * base + i).collect();
                    f.insert_many(&items).unwrap();
                    5_000
                }
                _ => {
                    for i in 0..100u64 {
                        assert!(f.remove(&i));
                    }
                    -100
                }
            };
            done.fetch_add(1, Ordering::SeqCst);
            delta
        }));
    }
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        done.load(Ordering::SeqCst),
        0,
        "a writer finished during the save"
    );
    assert_eq!(
        filter.len(),
        quiet_len,
        "the filter changed during the save"
    );
    assert_eq!(
        filter.doublings(),
        doublings_before,
        "the filter grew during the save"
    );
    let f = Arc::clone(&filter);
    watchdog(
        "count during a held save",
        Duration::from_secs(2),
        move || f.count(&1u64),
    );
    release.send(()).unwrap();
    let bytes = watchdog("the held save", LIMIT, move || saver.join().unwrap());
    let delta: i64 = watchdog(
        "the writers after the save",
        Duration::from_secs(30),
        move || writers.into_iter().map(|w| w.join().unwrap()).sum(),
    );
    let r = CuckooFilter::from_bytes(&bytes).unwrap();
    assert_eq!(r.len(), quiet_len);
    assert_eq!(r.doublings(), doublings_before);
    assert!((0..m).all(|i| r.contains(&i)));
    assert!(filter.doublings() > doublings_before);
    assert_eq!(filter.len() as i64, quiet_len as i64 + delta);
}

/// A growable `CuckooFilter` saved mid-doubling to a `Write` that first runs a refused nested
/// operation (a `clone`, whose panic it catches), then panics itself, while writer threads
/// wait to insert through more doublings. The panic unwinds out of `write_to`; afterwards the
/// mark and the freeze are gone: the writers finish, every item is found, `len` is exact, and
/// the same thread can clone, finish the doubling, save and clear the filter. Repeated with a
/// `Write` that fails with an error instead of panicking.
#[test]
fn a_growable_filter_whose_save_panics_after_a_refused_nested_clone_is_usable_afterwards() {
    let seed = common::seed(
        "a_growable_filter_whose_save_panics_after_a_refused_nested_clone_is_usable_afterwards",
    );
    for panic in [true, false] {
        let filter = Arc::new(
            CuckooFilter::builder()
                .growable(true)
                .capacity(8)
                .false_positive_rate(0.01)
                .build()
                .unwrap(),
        );
        let keys = common::distinct_keys(seed, 4_000);
        let (before, during) = keys.split_at(100);
        // The keys inserted (not those found afterwards: a key never inserted may be a false
        // positive).
        let mut stored: Vec<u64> = Vec::new();
        for key in before {
            filter.insert(key).unwrap();
            stored.push(*key);
            if filter.is_doubling() && filter.len() > 40 {
                break;
            }
        }
        assert_eq!(filter.len(), stored.len());
        assert!(filter.doublings() > 0, "seed={seed}");
        struct PanicsLater {
            filter: Arc<CuckooFilter>,
            writes: usize,
            panic: bool,
            nested: Option<bool>,
            started: Arc<std::sync::Barrier>,
        }
        impl Write for PanicsLater {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.writes += 1;
                if self.writes == 1 {
                    let f = Arc::clone(&self.filter);
                    self.nested = Some(
                        catch_unwind(AssertUnwindSafe(|| CuckooFilter::clone(&f).len())).is_err(),
                    );
                    self.started.wait();
                    // Let the writers reach the freeze.
                    thread::sleep(Duration::from_millis(50));
                }
                if self.writes == 2 {
                    assert_eq!(
                        self.nested,
                        Some(true),
                        "a clone inside its own save panics"
                    );
                    if self.panic {
                        panic!("the destination panics mid-save");
                    }
                    return Err(io::Error::other("the destination fails mid-save"));
                }
                Ok(buf.len().min(16))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let started = Arc::new(std::sync::Barrier::new(3));
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let (filter, started) = (Arc::clone(&filter), Arc::clone(&started));
                let mine: Vec<u64> = during.iter().skip(t).step_by(2).copied().collect();
                thread::spawn(move || {
                    started.wait();
                    for key in &mine {
                        filter.insert(key).unwrap();
                    }
                    mine
                })
            })
            .collect();
        let (f, before_save) = (Arc::clone(&filter), stored.clone());
        let outcome = watchdog("the failing save", LIMIT, move || {
            let mut out = PanicsLater {
                filter: Arc::clone(&f),
                writes: 0,
                panic,
                nested: None,
                started,
            };
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                f.write_to(&mut out).map_err(|e| e.kind())
            }))
            .map_err(|_| "panicked");
            // The saving thread's mark is gone: whole-filter operations work on it again. The
            // writers, let go when the save ended, only insert: the later snapshot holds at
            // least what the copy does, and both hold every item stored before the save.
            let copy = CuckooFilter::clone(&f);
            let restored = CuckooFilter::from_bytes(&f.to_bytes()).unwrap();
            assert!(
                copy.len() <= restored.len(),
                "{} > {}",
                copy.len(),
                restored.len()
            );
            for key in &before_save {
                assert!(copy.contains(key) && restored.contains(key), "{key} lost");
            }
            outcome
        });
        println!("seed={seed} panic={panic}: {outcome:?}");
        if panic {
            assert_eq!(outcome, Err("panicked"));
        } else {
            assert_eq!(outcome, Ok(Err(io::ErrorKind::Other)));
        }
        let f = Arc::clone(&filter);
        watchdog(
            "writers and same-thread operations after the save",
            LIMIT,
            move || {
                let mut all = stored;
                for w in writers {
                    all.extend(w.join().unwrap());
                }
                assert_eq!(f.len(), all.len(), "seed={seed} panic={panic}: len");
                assert!(
                    f.doublings() >= 3,
                    "seed={seed}: the writers doubled the table"
                );
                assert!(
                    all.iter().all(|k| f.contains(k)),
                    "seed={seed} panic={panic}: lost"
                );
                let copy = (*f).clone();
                assert_eq!(copy.len(), all.len());
                f.finish_doubling();
                let restored = CuckooFilter::from_bytes(&f.to_bytes()).unwrap();
                assert!(all.iter().all(|k| restored.contains(k)));
                f.clear();
                assert!(f.is_empty() && !f.contains(&all[0]));
                assert!(
                    all.iter().all(|k| copy.contains(k)),
                    "the clone is independent"
                );
            },
        );
    }
}
