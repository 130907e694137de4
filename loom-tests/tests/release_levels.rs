//! Model 16: releasing an emptied older level while others use the filter. One thread adds
//! level 1, removes the only item of level 0 and releases the empty levels; another inserts x,
//! reading the level count before or after the growth, so that its insert may aim at level 0
//! while level 0 is being released; a third looks x up once the writer says it is in. Every
//! lookup that starts after x's insert returned finds x, and after joining x is in exactly one
//! level, never a released one.
//!
//! Lookups skip released levels, so this holds only if no store ever lands in a released level:
//! a writer must check the level's flag under its stripes (mutant `release_ignores_writers`
//! stores x into released level 0), and the release must check for zeros while the level is
//! frozen (mutant `release_without_freeze` checks while a writer that already passed its flag
//! check is about to store).
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom_tests::{assert_reached, check, hook, Arc, Filter, Outcome, Reached, Start, Table};

/// A growing filter of 4-bucket levels, 4 stripes (one a bucket). y is level 0's only item, in
/// buckets 2 and 3; x belongs in buckets 0 and 1, whose stripes no operation on y takes, so the
/// writer never waits for the releaser's remove, only for its freeze.
struct Release {
    filter: Filter,
    x: u64,
    y: u64,
    x_inserted: AtomicBool,
    released: AtomicUsize,
}

fn release() -> Release {
    let mut t = Table::growing(4);
    let y = t.put(2, 3);
    let x = t.new_item(0, 1);
    for (bucket, stripe) in [(0, 0), (1, 1), (2, 2), (3, 3)] {
        assert_eq!(hook::stripe_of(&t.filter, bucket), stripe);
    }
    Release {
        filter: t.filter,
        x,
        y,
        x_inserted: AtomicBool::new(false),
        released: AtomicUsize::new(0),
    }
}

/// Adds level 1, empties level 0 and releases it (if the writer's x did not land there first).
fn grow_empty_release(s: &Release) {
    hook::grow(&s.filter);
    assert!(s.filter.remove(&s.y));
    let released = s.filter.release_empty_levels();
    // Relaxed: read after the join.
    s.released.store(released, Ordering::Relaxed);
}

fn insert_x(s: &Release) {
    s.filter.insert(&s.x).unwrap();
    // Release: a reader that sees the flag must find x (its insert happened before).
    s.x_inserted.store(true, Ordering::Release);
    assert_eq!(
        hook::lookup_all(&s.filter, s.x),
        Outcome::Present,
        "x not found by its own writer"
    );
}

static READ_AFTER_INSERT: Reached = Reached::new();

fn look_up_x(s: &Release) {
    if s.x_inserted.load(Ordering::Acquire) {
        READ_AFTER_INSERT.mark();
        assert_eq!(
            hook::lookup_all(&s.filter, s.x),
            Outcome::Present,
            "x inserted before the lookup, but not found"
        );
    }
}

static LEVEL_ZERO_RELEASED: Reached = Reached::new();
static X_KEPT_LEVEL_ZERO: Reached = Reached::new();

fn after_release(s: &Release) {
    assert_eq!(s.filter.levels(), 2);
    assert_eq!(hook::lookup_all(&s.filter, s.x), Outcome::Present, "x lost");
    assert!(!s.filter.contains(&s.y));
    assert_eq!(s.filter.len(), 1);
    assert_eq!(s.filter.count(&s.x), 1);
    let (level_zero, level_one) = (
        hook::level_state(&s.filter, 0),
        hook::level_state(&s.filter, 1),
    );
    match s.released.load(Ordering::Relaxed) {
        1 => {
            assert_eq!(level_zero, (0, true), "an item stored in a released level");
            assert_eq!(level_one, (1, false));
            LEVEL_ZERO_RELEASED.mark();
        }
        0 => {
            // x landed in level 0 before the release's check, which kept the level.
            assert_eq!(level_zero, (1, false));
            assert_eq!(level_one, (0, false));
            X_KEPT_LEVEL_ZERO.mark();
        }
        n => panic!("{n} levels released of one older level"),
    }
}

type Role = fn(&Release);

/// Runs the three roles with each one on the model's main thread in turn (loom may not explore
/// a spawned thread whose first operation is a load, tokio-rs/loom#392; every thread starts
/// with an RMW besides).
fn check_rotations(name: &str, roles: [Role; 3]) {
    for here in 0..3 {
        check(&format!("{name} [role {here} on main]"), move || {
            let state = Arc::new(release());
            let start = Arc::new(Start::new());
            let spawned: Vec<_> = (0..3)
                .filter(|&r| r != here)
                .map(|r| {
                    let (state, start, role) = (Arc::clone(&state), Arc::clone(&start), roles[r]);
                    loom::thread::spawn(move || {
                        start.go();
                        role(&state)
                    })
                })
                .collect();
            start.go();
            roles[here](&state);
            for handle in spawned {
                handle.join().unwrap();
            }
            after_release(&state);
        });
    }
}

#[test]
fn a_level_released_under_a_racing_insert_never_holds_it() {
    check_rotations(
        "16: release of level 0 vs an insert racing the growth, and a reader",
        [grow_empty_release, insert_x, look_up_x],
    );
    assert_reached(&LEVEL_ZERO_RELEASED, "level 0 released, x in level 1");
    assert_reached(&X_KEPT_LEVEL_ZERO, "x stored in level 0 before its release");
    assert_reached(&READ_AFTER_INSERT, "a reader after x's insert");
}
