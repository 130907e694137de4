//! Model 9: a save freezes the table without holding its stripes. Against a writer, the snapshot
//! is the table before or after the writer's operation, never a mix; the filter does not change
//! while the save holds it; and the writer finishes (it sleeps while the table is frozen, and is
//! woken). Against a reader of an absent item, the reader proves absence.
//!
//! Every save writes to a [`SlowDisk`], which hands the other thread a turn while the save holds
//! the filter. Without that turn loom never ran a writer inside the save (its partial-order
//! reduction remembers only the last access to each atomic, and a writer loads a word before it
//! stores it, hiding the conflict with the save's loads): the `writer_ignores_freeze` mutant
//! survived, even with no preemption bound.
#![cfg(loom)]

use std::io::{self, Write};
use std::sync::Mutex;

use loom_tests::{
    assert_reached, check_both_orders, copies, hook, Filter, Outcome, Reached, Role, Table,
};

/// The destination of a save: a slow disk. Its first write yields to the other thread (the
/// save holds the filter meanwhile), then looks `item` up, recording what the live filter held
/// while it was being saved.
struct SlowDisk<'a> {
    filter: &'a Filter,
    item: u64,
    bytes: Vec<u8>,
    seen_during_save: Option<Outcome>,
}

impl<'a> SlowDisk<'a> {
    /// Saves `filter`; returns the snapshot and what a lookup of `item` found during the save.
    fn save(filter: &'a Filter, item: u64) -> (Vec<u8>, Outcome) {
        let mut disk = SlowDisk {
            filter,
            item,
            bytes: Vec::new(),
            seen_during_save: None,
        };
        filter.write_to(&mut disk).expect("the disk never fails");
        let seen = disk.seen_during_save.expect("the save wrote something");
        (disk.bytes, seen)
    }
}

impl Write for SlowDisk<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.seen_during_save.is_none() {
            loom::thread::yield_now();
            self.seen_during_save = Some(hook::lookup(self.filter, self.item).0);
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A filter, one item for the writer, the snapshot before the race (taken in setup), and what
/// the saving thread saw.
struct SaveWrite {
    filter: Filter,
    x: u64,
    x_stored: bool,
    before: Vec<u8>,
    /// Bookkeeping outside the model (no loom operation runs while it is held).
    saved: Mutex<Option<(Vec<u8>, Outcome)>>,
}

/// Four buckets of two slots, two stripes, some items in place; x lives in buckets 0 and 1 and
/// is stored already when `x_stored`.
fn save_write(x_stored: bool) -> SaveWrite {
    let mut t = Table::new(4, 2);
    t.put(0, 3);
    t.put(2, 1);
    let x = if x_stored {
        t.put(1, 0)
    } else {
        t.new_item(0, 1)
    };
    let before = t.filter.to_bytes();
    SaveWrite {
        filter: t.filter,
        x,
        x_stored,
        before,
        saved: Mutex::new(None),
    }
}

fn save(s: &SaveWrite) {
    let saved = SlowDisk::save(&s.filter, s.x);
    *s.saved.lock().unwrap() = Some(saved);
}

static SAVED_BEFORE: Reached = Reached::new();
static SAVED_AFTER: Reached = Reached::new();

/// The snapshot is one of the two states the table was in (the writer's operation has
/// finished: its thread was joined), and the live filter was in that state during the save.
fn snapshot_is_before_or_after(s: &SaveWrite) {
    let after = s.filter.to_bytes();
    assert_ne!(after, s.before, "the writer changed nothing");
    let (saved, seen) = s.saved.lock().unwrap().take().expect("the save ran");
    let x_saved = if saved == s.before {
        SAVED_BEFORE.mark();
        s.x_stored
    } else if saved == after {
        SAVED_AFTER.mark();
        !s.x_stored
    } else {
        panic!("the snapshot mixes the states before and after the writer's operation");
    };
    let expected = if x_saved {
        Outcome::Present
    } else {
        Outcome::Absent
    };
    assert_ne!(
        seen,
        Outcome::Unproven,
        "a lookup during the save proved nothing"
    );
    assert_eq!(seen, expected, "the filter changed while the save held it");
}

fn run_save_against(
    name: &str,
    setup: fn() -> SaveWrite,
    write: Role<SaveWrite>,
    after: Role<SaveWrite>,
) {
    SAVED_BEFORE.reset();
    SAVED_AFTER.reset();
    check_both_orders(name, setup, save, write, after);
    assert_reached(
        &SAVED_BEFORE,
        "a snapshot taken before the writer's operation",
    );
    assert_reached(
        &SAVED_AFTER,
        "a snapshot taken after the writer's operation",
    );
}

#[test]
fn a_save_against_an_insert_is_before_or_after_it() {
    run_save_against(
        "9a: save vs insert",
        || save_write(false),
        |s| s.filter.insert(&s.x).unwrap(),
        |s| {
            snapshot_is_before_or_after(s);
            assert_eq!(copies(&s.filter, s.x, &[0, 1]), 1, "the insert completed");
            assert_eq!(s.filter.len(), 3);
        },
    );
}

#[test]
fn a_save_against_a_remove_is_before_or_after_it() {
    run_save_against(
        "9b: save vs remove",
        || save_write(true),
        |s| assert!(s.filter.remove(&s.x), "x was stored"),
        |s| {
            snapshot_is_before_or_after(s);
            assert_eq!(copies(&s.filter, s.x, &[0, 1]), 0, "the remove completed");
            assert_eq!(s.filter.len(), 2);
        },
    );
}

/// A filter whose lookups give up after two attempts, and an absent item z (buckets 0 and 1).
///
/// Real lookups try 64 times, but a real save outlasts any number of attempts; here a save is
/// a handful of steps, so a reader this impatient tells a save that keeps stripes locked while
/// it copies and writes (the reader fails twice and answers "maybe") from one that only passes
/// through them (the reader fails at most once, when it meets the pass, and then proves
/// absence).
struct SaveRead {
    filter: Filter,
    z: u64,
}

fn save_read() -> SaveRead {
    let mut t = Table::with_read_attempts(4, 2, 2);
    t.put(0, 3);
    t.put(1, 2);
    let z = t.new_item(0, 1);
    SaveRead {
        filter: t.filter,
        z,
    }
}

static READER_MET_THE_SAVE: Reached = Reached::new();

#[test]
fn a_reader_proves_absence_during_a_save() {
    check_both_orders(
        "9c: save vs reader of an absent item",
        save_read,
        |s| {
            let (_, seen) = SlowDisk::save(&s.filter, s.z);
            assert_eq!(seen, Outcome::Absent, "a lookup during the save");
        },
        |s| {
            let (outcome, failed) = hook::lookup(&s.filter, s.z);
            assert_eq!(outcome, Outcome::Absent, "a save made a lookup unproven");
            if failed > 0 {
                READER_MET_THE_SAVE.mark();
            }
        },
        |_| {},
    );
    assert_reached(&READER_MET_THE_SAVE, "a reader that met the save");
}
