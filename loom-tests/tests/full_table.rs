//! Model 5: an insert into a full table races with a remover and a reader. The insert either
//! fails with nothing changed, or (if the remove made room first) succeeds through a kick that
//! moves the reader's item; the reader finds its item either way; nothing else is lost.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom_tests::{
    assert_reached, check, copies, hook, Arc, Filter, Outcome, Reached, Role, Start, Table,
};

struct Full {
    filter: Filter,
    x: u64,
    w: u64,
    gone: u64,
    others: Vec<u64>,
    inserted: AtomicBool,
}

/// All 8 slots full. x (pairing 0 and 1) sits in bucket 0; w lives in buckets 0 and 3. Removing
/// `gone` frees a slot in bucket 1, which w can reach by moving x from 0 to 1.
fn setup() -> Full {
    let mut t = Table::new(4, 2);
    let fp_x = t.fingerprint(0, 1);
    assert!(hook::place(&t.filter, 0, fp_x));
    let x = hook::item(&t.filter, 0, fp_x);
    let gone = t.put(1, 2);
    let others = vec![
        t.put(0, 3),
        t.put(1, 2),
        t.put(2, 1),
        t.put(2, 1),
        t.put(3, 0),
        t.put(3, 0),
    ];
    let w = t.new_item(0, 3);
    Full {
        filter: t.filter,
        x,
        w,
        gone,
        others,
        inserted: AtomicBool::new(false),
    }
}

fn insert_w(s: &Full) {
    let ok = s.filter.insert(&s.w).is_ok();
    s.inserted.store(ok, Ordering::Relaxed);
}

fn remove_gone(s: &Full) {
    assert!(s.filter.remove(&s.gone));
}

fn look_up_x(s: &Full) {
    assert_eq!(hook::lookup(&s.filter, s.x).0, Outcome::Present);
}

static INSERT_FAILED: Reached = Reached::new();
static INSERTED_THROUGH_KICK: Reached = Reached::new();

fn after(s: &Full) {
    let inserted = s.inserted.load(Ordering::Relaxed);
    if inserted {
        // w can only have got in by moving x from bucket 0 to bucket 1.
        assert_eq!(copies(&s.filter, s.x, &[1]), 1);
        INSERTED_THROUGH_KICK.mark();
    } else {
        INSERT_FAILED.mark();
    }
    assert_eq!(copies(&s.filter, s.w, &[0, 3]), u32::from(inserted));
    assert_eq!(
        copies(&s.filter, s.x, &[0, 1]),
        1,
        "x is stored exactly once"
    );
    assert_eq!(copies(&s.filter, s.gone, &[1, 2]), 0);
    assert!(s.others.iter().all(|o| s.filter.contains(o)));
    assert_eq!(s.filter.len(), 7 + usize::from(inserted));
}

/// Each of the three roles runs once on the main thread (see `check_both_orders`).
#[test]
fn failing_insert_races_a_reader_and_a_remover() {
    let roles: [(&str, Role<Full>); 3] = [
        ("inserter", insert_w),
        ("remover", remove_gone),
        ("reader", look_up_x),
    ];
    for main_role in 0..3 {
        INSERT_FAILED.reset();
        INSERTED_THROUGH_KICK.reset();
        check(
            &format!("5: full table, {} on main", roles[main_role].0),
            move || {
                let state = Arc::new(setup());
                let start = Arc::new(Start::new());
                let spawned: Vec<_> = (0..3)
                    .filter(|&r| r != main_role)
                    .map(|r| {
                        let (state, start) = (Arc::clone(&state), Arc::clone(&start));
                        let role = roles[r].1;
                        loom::thread::spawn(move || {
                            start.go();
                            role(&state)
                        })
                    })
                    .collect();
                start.go();
                (roles[main_role].1)(&state);
                for h in spawned {
                    h.join().unwrap();
                }
                after(&state);
            },
        );
        assert_reached(&INSERT_FAILED, "the insert failing on the full table");
        assert_reached(
            &INSERTED_THROUGH_KICK,
            "the insert succeeding through a kick of x",
        );
    }
}
