//! Model 6: growth. A reader races the publication of a new level; two `insert_unique` calls
//! race across a growth.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom_tests::{assert_reached, check_both_orders, hook, Filter, Outcome, Reached, Table, BITS};

/// Level 0 (4 buckets of 2 slots) completely full, x among its items; w belongs in level 0's
/// buckets 0 and 1 but no room is reachable, so inserting w adds level 1 and stores w there.
struct Publication {
    filter: Filter,
    x: u64,
    w: u64,
    others: Vec<u64>,
    w_inserted: AtomicBool,
}

fn full_level_zero(stripes: usize) -> (Filter, Vec<u64>) {
    let filter = hook::tiny_growing_filter(stripes);
    let mut items = Vec::new();
    let mut fp = 0u64;
    for bucket in 0..4 {
        for _ in 0..2 {
            fp += 1;
            assert!(hook::place(&filter, bucket, fp));
            items.push(hook::item(&filter, bucket, fp));
        }
    }
    assert_eq!(BITS, 32);
    (filter, items)
}

fn publication() -> Publication {
    let (filter, mut others) = full_level_zero(2);
    let x = others.remove(3);
    let w = hook::item(&filter, 0, 1_000);
    Publication {
        filter,
        x,
        w,
        others,
        w_inserted: AtomicBool::new(false),
    }
}

fn insert_w_and_signal(s: &Publication) {
    s.filter.insert(&s.w).unwrap();
    // Release: a reader that sees the flag must find w (its insert happened before).
    s.w_inserted.store(true, Ordering::Release);
}

static SAW_W: Reached = Reached::new();
static DID_NOT_SEE_W: Reached = Reached::new();

fn read_during_growth(s: &Publication) {
    assert_eq!(hook::lookup(&s.filter, s.x).0, Outcome::Present);
    if s.w_inserted.load(Ordering::Acquire) {
        assert!(s.filter.contains(&s.w), "w inserted before, but not found");
        SAW_W.mark();
    } else {
        DID_NOT_SEE_W.mark();
    }
}

fn after_publication(s: &Publication) {
    assert_eq!(s.filter.levels(), 2);
    assert!(s.filter.contains(&s.w) && s.filter.contains(&s.x));
    assert!(s.others.iter().all(|o| s.filter.contains(o)));
    assert_eq!(s.filter.len(), 9);
}

#[test]
fn reader_races_the_publication_of_a_new_level() {
    check_both_orders(
        "6a: reader vs publication of level 1",
        publication,
        insert_w_and_signal,
        read_during_growth,
        after_publication,
    );
    assert_reached(&SAW_W, "a reader after the publication and w's insert");
    assert_reached(&DID_NOT_SEE_W, "a reader before w's insert");
}

/// Level 0 has one free slot, in bucket 0, which u (buckets 0 and 1) can take but z (buckets 2
/// and 3, full, with no path out) cannot. Thread A inserts z, which adds level 1, then calls
/// `insert_unique(u)`, which goes to level 1; thread B calls `insert_unique(u)` and may still
/// aim at level 0's free slot. Only the level-0 gate keeps both from adding u.
struct UniqueGrowth {
    filter: Filter,
    u: u64,
    z: u64,
    added: [AtomicBool; 2],
}

fn unique_growth() -> UniqueGrowth {
    let mut t = Table::growing(4);
    t.put(0, 1);
    for _ in 0..2 {
        t.put(1, 0);
        t.put(2, 3);
        t.put(3, 2);
    }
    let u = t.new_item(0, 1);
    let z = t.new_item(2, 3);
    UniqueGrowth {
        filter: t.filter,
        u,
        z,
        added: Default::default(),
    }
}

fn grow_then_insert_unique(s: &UniqueGrowth) {
    s.filter.insert(&s.z).unwrap();
    let added = s.filter.insert_unique(&s.u).unwrap();
    s.added[0].store(added, Ordering::Relaxed);
}

fn insert_unique(s: &UniqueGrowth) {
    let added = s.filter.insert_unique(&s.u).unwrap();
    s.added[1].store(added, Ordering::Relaxed);
}

fn after_unique_growth(s: &UniqueGrowth) {
    let added: Vec<bool> = s.added.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    assert_eq!(added.iter().filter(|&&a| a).count(), 1, "{added:?}");
    assert_eq!(s.filter.count(&s.u), 1);
    assert!(s.filter.contains(&s.z));
    assert_eq!(s.filter.levels(), 2);
    assert_eq!(s.filter.len(), 9);
}

#[test]
fn racing_insert_unique_across_a_growth() {
    check_both_orders(
        "6b: insert_unique race across a growth",
        unique_growth,
        grow_then_insert_unique,
        insert_unique,
        after_unique_growth,
    );
}
