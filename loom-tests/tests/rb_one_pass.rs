//! Model 13 (RedisBloom): the one-pass lookup reads sub-filter 1, then sub-filter 0,
//! and only then validates the misses. Here the deferred validation is the only thing that
//! stands between a torn read and a false negative: an insert's kick walk in the newest
//! sub-filter (1) moves x's fingerprint to its other bucket (the new fingerprint over x first,
//! x into its other bucket second), while sub-filter 0 never holds x. A reader that reads
//! sub-filter 1 between the two writes misses x there, misses it in sub-filter 0 (truly), and
//! must then fail the validation of sub-filter 1 and look again; it may never prove x absent.
//!
//! 13a/13b: buckets of one slot (one word). 13c/13d: buckets of 3 slots, x at slot 0 of
//! bucket 2 (bytes 6-8: it straddles words 0 and 1) and kicked to bucket 3 (bytes 9-11, word
//! 1), so the reader's bucket words are two loads and one.
#![cfg(loom)]

use loom_tests::{
    assert_reached, check_both_orders, hook, rb_copies, Outcome, RbTable, Reached,
    RedisCuckooFilter,
};

struct Walk {
    filter: RedisCuckooFilter,
    x: Vec<u8>,
    y: Vec<u8>,
    items: u64,
    /// Marked by a reader whose one pass missed x in both sub-filters and whose second look
    /// found it: the deferred validation caught the torn read.
    caught: &'static Reached,
}

/// One-slot buckets: x (buckets `x_primary`, `1 - x_primary`) in bucket 0 of sub-filter 1, o
/// in bucket 2 there; sub-filter 0 full at y's buckets (0 and 2) with other fingerprints. y
/// goes to neither sub-filter's free slots and kicks x from 0 to 1 in sub-filter 1.
fn one_slot(x_primary: usize, caught: &'static Reached) -> Walk {
    let mut t = RbTable::new(4, 1, 2);
    let x = t.new_item(x_primary, 1 - x_primary);
    let (fp_x, _) = hook::rb_key(&t.filter, 1, &x);
    assert!(hook::rb_place(&t.filter, 1, 0, fp_x));
    t.put(1, 2, 3);
    t.put(0, 0, 3);
    t.put(0, 2, 1);
    let y = t.new_item(0, 2);
    Walk {
        filter: t.filter,
        x,
        y,
        items: 4,
        caught,
    }
}

/// Three-slot buckets: x (buckets `x_primary` and the other of 2, 3) at slot 0 of bucket 2 of
/// sub-filter 1, two more fingerprints after it there, bucket 0 of sub-filter 1 full, and
/// sub-filter 0 full at buckets 0 and 2. y (buckets 2 and 0) kicks x from 2 to 3.
fn three_slots(x_primary: usize, caught: &'static Reached) -> Walk {
    let mut t = RbTable::new(4, 3, 2);
    let x = t.new_item(x_primary, 5 - x_primary);
    let (fp_x, _) = hook::rb_key(&t.filter, 1, &x);
    assert!(hook::rb_place(&t.filter, 1, 2, fp_x));
    for _ in 0..2 {
        t.put(1, 2, 1);
    }
    for _ in 0..3 {
        t.put(1, 0, 1);
        t.put(0, 0, 1);
        t.put(0, 2, 1);
    }
    let y = t.new_item(2, 0);
    Walk {
        filter: t.filter,
        x,
        y,
        items: 3 + 3 + 6,
        caught,
    }
}

fn insert_y(s: &Walk) {
    s.filter.insert(&s.y).unwrap();
}

fn look_up_x(s: &Walk) {
    let (outcome, asked) = hook::rb_lookup(&s.filter, &s.x);
    assert_ne!(
        outcome,
        Outcome::Absent,
        "a kick walk in the newest sub-filter hid x from a one-pass reader"
    );
    if asked.len() > 2 && asked[..2] == [Outcome::Absent, Outcome::Absent] {
        s.caught.mark();
    }
}

fn after(s: &Walk) {
    assert_eq!(rb_copies(&s.filter, 1, &s.x), 1, "x still in sub-filter 1");
    assert_eq!(
        rb_copies(&s.filter, 0, &s.x),
        0,
        "and never in sub-filter 0"
    );
    assert_eq!(rb_copies(&s.filter, 1, &s.y), 1, "y kicked x");
    let info = s.filter.info();
    assert_eq!(info.filters, 2, "no growth");
    assert_eq!(info.items, s.items + 1);
}

fn run(name: &str, setup: fn() -> Walk, caught: &Reached) {
    check_both_orders(name, setup, insert_y, look_up_x, after);
    assert_reached(
        caught,
        "a one-pass reader that missed x in both sub-filters and found it on the second look",
    );
}

#[test]
fn one_slot_reader_validating_the_walks_destination() {
    static CAUGHT: Reached = Reached::new();
    run(
        "13a: kick in sub-filter 1 of 2, one-slot buckets, reader validates bucket 1",
        || one_slot(1, &CAUGHT),
        &CAUGHT,
    );
}

#[test]
fn one_slot_reader_validating_the_walks_source() {
    static CAUGHT: Reached = Reached::new();
    run(
        "13b: kick in sub-filter 1 of 2, one-slot buckets, reader validates bucket 0",
        || one_slot(0, &CAUGHT),
        &CAUGHT,
    );
}

#[test]
fn straddling_bucket_reader_validating_the_walks_source() {
    static CAUGHT: Reached = Reached::new();
    run(
        "13c: kick in sub-filter 1 of 2, x leaves a bucket that straddles words",
        || three_slots(2, &CAUGHT),
        &CAUGHT,
    );
}

#[test]
fn straddling_bucket_reader_validating_the_walks_destination() {
    static CAUGHT: Reached = Reached::new();
    run(
        "13d: kick in sub-filter 1 of 2, x leaves a bucket that straddles words, reader \
         validates bucket 3",
        || three_slots(3, &CAUGHT),
        &CAUGHT,
    );
}
