//! Model 18: a doubling published while a lookup or an insert runs, in a growable filter.
//!
//! One thread begins a doubling (the new buckets, the split bitmap, the count published under
//! a freeze) and splits an item's bucket, which moves the item into the new half. Another
//! looks the item up, or inserts it, having perhaps read the count from before the doubling.
//!
//! A lookup that read the old count reads the bucket as it was before the doubling, so it
//! must check that the count did not change before it trusts a miss: mutant
//! `doubling_reader_ignores_doublings` skips that check (it reads the bucket after the split
//! under a settled version and misses x). A writer that read the old count must check it again
//! under its stripes: mutant `doubling_writer_ignores_doublings` skips that (it stores y, in
//! the old format, into the bucket already split, where no lookup finds it).
#![cfg(loom)]

use loom_tests::{check_both_orders, find_item, hook, Filter, Outcome};

struct Doubling {
    filter: Filter,
    /// Stored before the doubling.
    x: u64,
    /// Inserted while it begins.
    y: u64,
}

fn doubling_setup() -> Doubling {
    let filter = hook::tiny_doubling(4, 12, 2);
    let mut taken = Vec::new();
    // Both move up on side 0 when the table doubles.
    let moves_up = |item| hook::doubling_buckets(&filter, item, 1)[0].1 == 1;
    let x = find_item(&mut taken, moves_up);
    let y = find_item(&mut taken, |y| {
        moves_up(y)
            && hook::doubling_buckets(&filter, y, 0) != hook::doubling_buckets(&filter, x, 0)
    });
    assert!(hook::doubling_place(&filter, x, 0));
    assert_eq!(hook::doubling_lookup(&filter, y), Outcome::Absent);
    Doubling { filter, x, y }
}

/// Doubles the table and splits x's side-0 bucket.
fn double_and_split_x(s: &Doubling) {
    hook::begin_doubling(&s.filter);
    hook::split(&s.filter, s.x, 0);
}

/// Doubles the table and splits y's side-0 bucket.
fn double_and_split_y(s: &Doubling) {
    hook::begin_doubling(&s.filter);
    hook::split(&s.filter, s.y, 0);
}

fn look_up_x(s: &Doubling) {
    assert_ne!(
        hook::doubling_lookup(&s.filter, s.x),
        Outcome::Absent,
        "x missed while the table doubled"
    );
}

fn insert_y(s: &Doubling) {
    s.filter.insert(&s.y).unwrap();
    assert_ne!(
        hook::doubling_lookup(&s.filter, s.y),
        Outcome::Absent,
        "y not found by its own writer"
    );
}

fn after_doubling(s: &Doubling) {
    assert_eq!(s.filter.doublings(), 1);
    assert_eq!(
        hook::doubling_lookup(&s.filter, s.x),
        Outcome::Present,
        "x lost"
    );
}

fn after_doubling_and_insert(s: &Doubling) {
    after_doubling(s);
    assert_eq!(
        hook::doubling_lookup(&s.filter, s.y),
        Outcome::Present,
        "y lost: stored where no lookup finds it"
    );
    assert_eq!(s.filter.len(), 2);
}

#[test]
fn a_lookup_that_began_before_a_doubling_never_misses() {
    check_both_orders(
        "growth: doubling vs lookup",
        doubling_setup,
        double_and_split_x,
        look_up_x,
        after_doubling,
    );
}

#[test]
fn an_insert_that_began_before_a_doubling_is_stored_where_lookups_find_it() {
    check_both_orders(
        "growth: doubling vs insert",
        doubling_setup,
        double_and_split_y,
        insert_y,
        after_doubling_and_insert,
    );
}
