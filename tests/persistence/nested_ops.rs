//! Whole-filter operations started by a save's own destination, on the saving thread, for
//! both bodies and a growable filter in the middle of a doubling: `to_bytes`, `clone`,
//! `clear` and `finish_doubling` panic with the documented message and change nothing;
//! `write_to` is an `io::ErrorKind::Deadlock` error; `contains`, `count` and the accessors
//! answer. Each under a watchdog, so a hang fails the test instead of stalling it. Also when
//! the nested panic is not caught in the destination and unwinds out of the outer save: the
//! filter is then usable on every thread.

use std::io::{self, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use atomic_cuckoo::CuckooFilter;

use crate::common::distinct_keys;
use crate::watchdog::{finishes_within, inside_own_save, watchdog, Inside, Refused};

/// Generous: every operation here takes microseconds.
const LIMIT: Duration = Duration::from_secs(20);

/// A fixed filter, a growable one in the middle of a doubling and one finished, each with the
/// items it holds.
fn bodies() -> Vec<(&'static str, Arc<CuckooFilter>, Vec<u64>)> {
    let keys = distinct_keys(0x0e57, 600);
    let fixed = CuckooFilter::with_capacity(1_000);
    fixed.insert_many(&keys).unwrap();
    let mid = CuckooFilter::builder()
        .capacity(1)
        .false_positive_rate(1e-7)
        .growable(true)
        .build()
        .unwrap();
    let mut n = 0;
    while n < 200 || !mid.is_doubling() {
        mid.insert(&keys[n]).unwrap();
        n += 1;
    }
    let finished = mid.clone();
    finished.finish_doubling();
    vec![
        ("fixed", Arc::new(fixed), keys.clone()),
        ("growable mid-doubling", Arc::new(mid), keys[..n].to_vec()),
        ("growable finished", Arc::new(finished), keys[..n].to_vec()),
    ]
}

type Op = fn(&CuckooFilter) -> String;

/// The operations with no error to return, each refused by a panic.
const PANICKING: [(&str, Op); 4] = [
    ("to_bytes", |f| format!("{} bytes", f.to_bytes().len())),
    ("clone", |f| format!("a clone of {}", f.clone().len())),
    ("clear", |f| {
        f.clear();
        "cleared".into()
    }),
    ("finish_doubling", |f| {
        f.finish_doubling();
        "finished".into()
    }),
];

/// Each whole-filter operation inside a save of the same filter, the panic caught in the
/// destination: refused as documented, the outer save whole (the bytes of the filter before),
/// the filter unchanged (a doubling in progress stays in progress).
#[test]
fn whole_filter_operations_inside_their_own_save_are_refused_for_both_bodies() {
    for (body, filter, keys) in bodies() {
        let before = filter.to_bytes();
        let was_doubling = filter.is_doubling();
        let save: fn(&CuckooFilter, &mut dyn Write) -> io::Result<()> = |f, w| f.write_to(w);
        let nested_save: Op =
            |f| format!("{:?}", f.write_to(&mut Vec::new()).map_err(|e| e.kind()));
        let mut ops: Vec<(&str, Op, Refused)> =
            vec![("write_to", nested_save, Refused::DeadlockError)];
        ops.extend(PANICKING.iter().map(|&(n, o)| (n, o, Refused::NestedPanic)));
        for (what, op, refused) in ops {
            let (inside, saved) = inside_own_save(&filter, save, op)
                .unwrap_or_else(|| panic!("DEADLOCK: {body}: {what} inside its own save"));
            refused.assert(&format!("{body}: {what}"), &inside);
            let saved = saved.unwrap_or_else(|e| panic!("{body}: {what}: outer save {e}"));
            assert!(
                saved == before,
                "{body}: {what}: the outer save is not the filter"
            );
            assert!(
                filter.to_bytes() == before,
                "{body}: {what} changed the filter"
            );
            assert_eq!(filter.is_doubling(), was_doubling, "{body}: {what}");
            assert!(keys.iter().all(|k| filter.contains(k)), "{body}: {what}");
        }
    }
}

/// The same panics left to unwind out of the destination and the outer save: each is the
/// documented one, and afterwards the filter takes writes, saves, clones and clears on this
/// thread and on another (no freeze, lock or mark is left behind).
#[test]
fn a_nested_panic_that_unwinds_out_of_the_save_leaves_the_filter_usable() {
    struct Unwinds<'a> {
        filter: &'a CuckooFilter,
        op: Op,
    }
    impl Write for Unwinds<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            (self.op)(self.filter);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    for (body, filter, keys) in bodies() {
        for (what, op) in PANICKING {
            let f = Arc::clone(&filter);
            let message = watchdog(&format!("{body}: {what} unwinding"), LIMIT, move || {
                let result = catch_unwind(AssertUnwindSafe(|| {
                    f.write_to(&mut Unwinds { filter: &f, op })
                }));
                match result {
                    Ok(r) => format!("returned {r:?}"),
                    Err(payload) => payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default(),
                }
            });
            assert!(
                Inside::Panicked(message.clone()).is_nested_panic(),
                "{body}: {what}: {message}"
            );
            // Usable on this thread and another, within the watchdog.
            let f = Arc::clone(&filter);
            let keys2 = keys.clone();
            watchdog(&format!("{body}: after {what}"), LIMIT, move || {
                f.insert(&u64::MAX).unwrap();
                assert!(f.remove(&u64::MAX));
                assert!(keys2.iter().all(|k| f.contains(k)));
                let copy = CuckooFilter::clone(&f);
                assert_eq!(copy.to_bytes(), f.to_bytes());
                let other = Arc::clone(&f);
                std::thread::spawn(move || {
                    other.insert(&7u64).unwrap();
                    assert!(other.remove(&7u64));
                    other.to_bytes()
                })
                .join()
                .unwrap();
                copy.clear();
                assert!(
                    copy.is_empty() && !f.is_empty(),
                    "copy {copy:?} original {f:?}"
                );
            });
        }
    }
}

/// Lookups, counts and the accessors from inside a save of the same filter answer (a
/// watchdog fails the test if any waits for the save) and answer as outside it.
#[test]
fn lookups_counts_and_accessors_inside_their_own_save_answer() {
    struct Reads {
        filter: Arc<CuckooFilter>,
        keys: Vec<u64>,
        answers: Option<(Vec<bool>, Vec<usize>, String)>,
    }
    impl Write for Reads {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.answers.is_none() {
                let f = &self.filter;
                let probes = self.keys.iter().copied().chain(0..200u64);
                let found: Vec<bool> = probes.clone().map(|k| f.contains(&k)).collect();
                let counts: Vec<usize> = probes.map(|k| f.count(&k)).collect();
                let mut many = Vec::new();
                f.contains_many(self.keys.iter().copied().chain(0..200u64), &mut many);
                assert_eq!(many, found);
                let accessors = format!(
                    "{} {} {} {} {} {} {} {:?}",
                    f.len(),
                    f.capacity(),
                    f.slots(),
                    f.load_factor(),
                    f.false_positive_rate(),
                    f.memory_usage(),
                    f.snapshot_size(),
                    f
                );
                self.answers = Some((found, counts, accessors));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    for (body, filter, keys) in bodies() {
        let f = Arc::clone(&filter);
        let k = keys.clone();
        let inside = finishes_within(LIMIT, move || {
            let mut reads = Reads {
                filter: Arc::clone(&f),
                keys: k,
                answers: None,
            };
            f.write_to(&mut reads).unwrap();
            reads.answers.unwrap()
        });
        let (found, counts, _) =
            inside.unwrap_or_else(|| panic!("DEADLOCK: {body}: reads inside its own save"));
        let probes: Vec<u64> = keys.iter().copied().chain(0..200u64).collect();
        for (i, p) in probes.iter().enumerate() {
            assert_eq!(found[i], filter.contains(p), "{body}: contains {p}");
            assert_eq!(counts[i], filter.count(p), "{body}: count {p}");
        }
        assert!(found[..keys.len()].iter().all(|&b| b), "{body}");
        assert!(counts[..keys.len()].iter().all(|&c| c >= 1), "{body}");
    }
}
