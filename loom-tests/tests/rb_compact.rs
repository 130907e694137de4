//! Model 11 (RedisBloom): a reader looks up x while a compaction moves x's fingerprint from the
//! newer sub-filter into the older one. The move copies first and erases second, holding x's
//! pair in both sub-filters, and readers visit the newer sub-filter first: a reader that finds
//! the newer slot erased (and validates that) finds the copy in the older one. It must never
//! prove x absent (it may answer "maybe").
//!
//! Two sub-filters of 4 buckets of one slot, one stripe per bucket.
#![cfg(loom)]

use loom_tests::{
    assert_reached, check_both_orders, hook, rb_copies, Outcome, RbTable, Reached,
    RedisCuckooFilter,
};

/// x (buckets 1 and 0) in bucket 1 of sub-filter 1. When `primary_full`, bucket 1 of
/// sub-filter 0 holds o, so the copy lands in x's other bucket there.
struct Move {
    filter: RedisCuckooFilter,
    x: Vec<u8>,
    others: u64,
    /// Marked by a reader that missed x in sub-filter 1 (after the erase) and then found the
    /// copy in sub-filter 0: the branch the model is about.
    proven_moved: &'static Reached,
}

fn setup(primary_full: bool, proven_moved: &'static Reached) -> Move {
    let mut t = RbTable::new(4, 1, 2);
    let x = t.put(1, 1, 0);
    if primary_full {
        t.put(0, 1, 2);
    }
    Move {
        filter: t.filter,
        x,
        others: u64::from(primary_full),
        proven_moved,
    }
}

fn compact(s: &Move) {
    s.filter.compact();
}

fn look_up_x(s: &Move) {
    let (outcome, asked) = hook::rb_lookup(&s.filter, &s.x);
    assert_ne!(outcome, Outcome::Absent, "a compaction hid x from a reader");
    if asked == [Outcome::Absent, Outcome::Present] {
        s.proven_moved.mark();
    }
}

fn after(s: &Move) {
    assert_eq!(rb_copies(&s.filter, 0, &s.x), 1, "x moved to sub-filter 0");
    assert_eq!(rb_copies(&s.filter, 1, &s.x), 0, "and left sub-filter 1");
    let info = s.filter.info();
    assert_eq!(info.filters, 1, "the emptied sub-filter was dropped");
    assert_eq!(info.items, 1 + s.others);
}

/// Runs the model both ways round, then fails unless some reader took the branch the model is
/// about (`reached`, which `setup` hands to the readers).
fn check_move(name: &str, setup: fn() -> Move, reached: &Reached) {
    check_both_orders(name, setup, compact, look_up_x, after);
    assert_reached(
        reached,
        "a reader that missed x in sub-filter 1 and found it in sub-filter 0",
    );
}

#[test]
fn reader_vs_a_move_into_the_same_bucket() {
    static REACHED: Reached = Reached::new();
    check_move(
        "11a: compaction moves x to bucket 1 of sub-filter 0",
        || setup(false, &REACHED),
        &REACHED,
    );
}

#[test]
fn reader_vs_a_move_into_the_other_bucket() {
    static REACHED: Reached = Reached::new();
    check_move(
        "11b: compaction moves x to bucket 0 of sub-filter 0",
        || setup(true, &REACHED),
        &REACHED,
    );
}
