//! Model 17: a doubling's split of one bucket while a lookup reads it, and two splits of one
//! bucket at once, in a growable filter (its table doubles in place).
//!
//! A doubling in progress is begun in the setup. x and y share their bucket on side 0; a split
//! moves x into the new half and keeps y in the old one (their next bits are 1 and 0), and y's
//! bit after that is 1, so a second split of the same bucket would move y over x.
//!
//! A lookup reads the old bucket while its bit says "not split", under the old bucket's
//! stripe, which the split holds while it clears the bit: mutant `doubling_unvalidated_old`
//! takes that read as proven without validating the stripe (it misses x after the split moved
//! it), and mutant `doubling_bit_after_unlock` clears the bit after letting the stripes go (a
//! lookup then reads the split bucket as unsplit under a settled version, and a second split
//! splits it again).
//!
//! An insert splits the old buckets in runs, all those under one pair of stripes at once (here
//! the whole table: two stripes): a run that splits x's bucket among others, against a lookup
//! and against a writer that splits x's bucket alone, under the same mutants.
//!
//! When x's bucket is the last the doubling splits, that split also clears the filter's
//! "splitting" flag, after which lookups read buckets without the bitmap: mutant
//! `doubling_flag_before_split` clears it before taking the stripes, so a lookup that reads it
//! clear reads x's new bucket, still empty, under a version from before the split.
#![cfg(loom)]

use loom_tests::{check_both_orders, find_item, hook, Filter, Outcome};

struct Split {
    filter: Filter,
    x: u64,
    y: u64,
}

fn split_setup() -> Split {
    let filter = hook::tiny_doubling(4, 12, 2);
    let mut taken = Vec::new();
    // x: side 0 moves up on the first doubling.
    let x = find_item(&mut taken, |x| {
        hook::doubling_buckets(&filter, x, 1)[0].1 == 1
    });
    let home = hook::doubling_buckets(&filter, x, 0)[0].0;
    // y: the same side-0 bucket, stays down on the first doubling, moves up on the second.
    let y = find_item(&mut taken, |y| {
        let side = |d: u32| hook::doubling_buckets(&filter, y, d)[0];
        side(0).0 == home && side(1).1 == 0 && side(2).1 == 2
    });
    assert!(hook::doubling_place(&filter, x, 0));
    assert!(hook::doubling_place(&filter, y, 0));
    hook::begin_doubling(&filter);
    assert_eq!(filter.doublings(), 1);
    assert!(filter.is_doubling());
    Split { filter, x, y }
}

/// As `split_setup`, with every old bucket but x's split already: x's split is the last.
fn last_split_setup() -> Split {
    let s = split_setup();
    let home = hook::doubling_buckets(&s.filter, s.x, 0)[0].0;
    for index in (0..4).filter(|&i| i != home) {
        hook::split_old(&s.filter, index);
    }
    assert!(s.filter.is_doubling(), "x's bucket is left");
    s
}

fn after_last_split(s: &Split) {
    after_split(s);
    assert!(!s.filter.is_doubling(), "the doubling is finished");
}

fn split_x(s: &Split) {
    hook::split(&s.filter, s.x, 0);
}

/// An insert's claim of the first old buckets: it splits the run they begin, every old bucket.
fn split_run(s: &Split) {
    hook::split_next(&s.filter, 2);
}

fn look_up_x(s: &Split) {
    assert_ne!(
        hook::doubling_lookup(&s.filter, s.x),
        Outcome::Absent,
        "x missed while its bucket was split"
    );
}

fn after_split(s: &Split) {
    for (name, item) in [("x", s.x), ("y", s.y)] {
        assert_eq!(
            hook::doubling_lookup(&s.filter, item),
            Outcome::Present,
            "{name} lost by a split"
        );
    }
    assert_eq!(s.filter.len(), 2);
}

#[test]
fn a_lookup_of_an_entry_that_a_split_moves_never_misses() {
    check_both_orders(
        "growth: split vs lookup",
        split_setup,
        split_x,
        look_up_x,
        after_split,
    );
}

#[test]
fn two_threads_splitting_one_bucket_split_it_once() {
    check_both_orders(
        "growth: split vs split",
        split_setup,
        split_x,
        split_x,
        after_split,
    );
}

#[test]
fn a_lookup_during_the_last_split_of_a_doubling_never_misses() {
    check_both_orders(
        "growth: last split vs lookup",
        last_split_setup,
        split_x,
        look_up_x,
        after_last_split,
    );
}

#[test]
fn a_lookup_during_a_run_of_splits_never_misses() {
    check_both_orders(
        "growth: run of splits vs lookup",
        split_setup,
        split_run,
        look_up_x,
        after_last_split,
    );
}

#[test]
fn a_run_of_splits_and_a_writer_splitting_one_of_its_buckets_split_it_once() {
    check_both_orders(
        "growth: run of splits vs split",
        split_setup,
        split_run,
        split_x,
        after_last_split,
    );
}
