//! Model 1: a reader looks up a stable item while an insert's kick chain moves that item's
//! fingerprint between its two buckets. The reader must find it (never `Absent`, and not by the
//! "maybe present" fallback).
//!
//! Table: 4 buckets of 2 slots. Fingerprints pair bucket 0 with 1 or 3, bucket 1 with 0 or 2.
#![cfg(loom)]

use loom_tests::{
    assert_reached, check_both_orders, copies, hook, Filter, Outcome, Reached, Table,
};

/// x sits in bucket 0 and pairs it with 1; bucket 0's other slot and all of bucket 3 hold
/// fingerprints pairing 0 and 3. Inserting y (buckets 0 and 3, both full) moves x from 0 to 1
/// (the only free lane in reach), then stores y in 0.
struct OneHop {
    filter: Filter,
    x: u64,
    y: u64,
    others: Vec<u64>,
}

fn one_hop(x_primary: usize, stripes: usize) -> OneHop {
    let mut t = Table::new(4, stripes);
    let fp_x = t.fingerprint(0, 1);
    assert!(hook::place(&t.filter, 0, fp_x));
    let x = hook::item(&t.filter, x_primary, fp_x);
    let others = vec![t.put(0, 3), t.put(3, 0), t.put(3, 0)];
    let y = t.new_item(0, 3);
    OneHop {
        filter: t.filter,
        x,
        y,
        others,
    }
}

fn insert_y(s: &OneHop) {
    s.filter.insert(&s.y).unwrap();
}

/// One hop: found without a failed validation, in either direction of the move (copy before
/// erase: the unvalidated probe or the first validated read sees x, see `Table::reprobe`).
fn look_up_x_first_attempt(s: &OneHop) {
    assert_eq!(hook::lookup(&s.filter, s.x), (Outcome::Present, 0));
}

fn after_one_hop(s: &OneHop) {
    assert_eq!(copies(&s.filter, s.x, &[0]), 0, "x left bucket 0");
    assert_eq!(copies(&s.filter, s.x, &[1]), 1, "x is in bucket 1, once");
    assert_eq!(copies(&s.filter, s.y, &[0, 3]), 1);
    assert!(s.others.iter().all(|o| s.filter.contains(o)));
    assert_eq!(s.filter.len(), 5);
}

/// The reader reads bucket 0 first: the move goes from its first bucket to its second.
#[test]
fn reader_vs_hop_away_from_first_read_bucket() {
    check_both_orders(
        "1a: hop 0->1, reader reads 0 then 1",
        || one_hop(0, 4),
        insert_y,
        look_up_x_first_attempt,
        after_one_hop,
    );
}

/// The reader reads bucket 1 first: the move goes from its second bucket to its first.
#[test]
fn reader_vs_hop_into_first_read_bucket() {
    check_both_orders(
        "1b: hop 0->1, reader reads 1 then 0",
        || one_hop(1, 4),
        insert_y,
        look_up_x_first_attempt,
        after_one_hop,
    );
}

/// x's fingerprint moves 0 -> 1, back 1 -> 0, and again 0 -> 1 while the reader, which reads
/// bucket 1 first, looks. Three hops are what it takes to hide x from a lookup's first probe
/// (bucket 1 before the first copy, bucket 0 after the first erase) and from its first
/// validated read (bucket 1 after the second erase, bucket 0 after the third): only the stripe
/// version then tells the reader that it must look again. The writes between the hops are
/// plain Relaxed stores: a reader that reads one learns of its writer's lock only through that
/// writer's release fence.
///
/// Writer: insert y (buckets 0, 3: moves x to 1), remove y, insert z (buckets 1, 2: moves x
/// back to 0), remove z, insert w (buckets 0, 3: moves x to 1 again).
struct ThreeHops {
    filter: Filter,
    x: u64,
    y: u64,
    z: u64,
    w: u64,
    others: Vec<u64>,
}

fn three_hops() -> ThreeHops {
    let mut t = Table::new(4, 2);
    let fp_x = t.fingerprint(0, 1);
    assert!(hook::place(&t.filter, 0, fp_x));
    let x = hook::item(&t.filter, 1, fp_x);
    let others = vec![
        t.put(0, 3),
        t.put(3, 0),
        t.put(3, 0),
        t.put(1, 2),
        t.put(2, 1),
        t.put(2, 1),
    ];
    let y = t.new_item(0, 3);
    let z = t.new_item(1, 2);
    let w = t.new_item(0, 3);
    ThreeHops {
        filter: t.filter,
        x,
        y,
        z,
        w,
        others,
    }
}

fn move_x_three_times(s: &ThreeHops) {
    s.filter.insert(&s.y).unwrap();
    assert!(s.filter.remove(&s.y));
    s.filter.insert(&s.z).unwrap();
    assert!(s.filter.remove(&s.z));
    s.filter.insert(&s.w).unwrap();
}

static VALIDATION_FAILED: Reached = Reached::new();

fn look_up_x(s: &ThreeHops) {
    let (outcome, failed_validations) = hook::lookup(&s.filter, s.x);
    assert_eq!(outcome, Outcome::Present);
    if failed_validations > 0 {
        VALIDATION_FAILED.mark();
    }
}

fn after_three_hops(s: &ThreeHops) {
    assert_eq!(copies(&s.filter, s.x, &[1]), 1, "x ends in bucket 1");
    assert_eq!(copies(&s.filter, s.x, &[0]), 0);
    assert_eq!(copies(&s.filter, s.y, &[0, 3]), 0);
    assert_eq!(copies(&s.filter, s.z, &[1, 2]), 0);
    assert_eq!(copies(&s.filter, s.w, &[0, 3]), 1);
    assert!(s.others.iter().all(|o| s.filter.contains(o)));
    assert_eq!(s.filter.len(), 8);
}

#[test]
fn reader_vs_fingerprint_moving_three_times() {
    check_both_orders(
        "1c: hops 0->1->0->1, reader reads 1 then 0",
        three_hops,
        move_x_three_times,
        look_up_x,
        after_three_hops,
    );
    // The point of the model: a lookup whose probes both missed and whose version check failed.
    assert_reached(&VALIDATION_FAILED, "a lookup whose validation failed");
}
