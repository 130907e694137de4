//! Model 8: grown filters. A remove that takes another item's copy in a newer level must leave
//! that item findable (levels nest); `insert_unique` must settle a level whose lookup gave up,
//! not take "maybe" for "present".
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom_tests::{check_both_orders, hook, Filter, Outcome};

/// Two levels, 4 and 8 buckets. `y` is stored in level 1 only; `x` in level 0 only, with the
/// same fingerprint as `y` and, in level 1, the same bucket pair: a remove of `x` takes `y`'s
/// copy (newest level first). Nesting makes `x`'s level-0 copy match `y`, so `y` stays found.
struct Swap {
    filter: Filter,
    x: u64,
    y: u64,
}

/// The fingerprint and level-1 bucket of the scenario (fixed, so that every interleaving and
/// every build, mutants included, starts from the same table). Chosen so that with unnested
/// levels, x's level-0 copy would not be in y's level-0 buckets.
const FP: u64 = 0x8000_0003;
const Y_BUCKET: usize = 5;

fn swap() -> Swap {
    let filter = hook::tiny_levels_filter(&[4, 8], 2, 64);
    let y = hook::item_in(&filter, 1, Y_BUCKET, FP);
    let x_bucket = hook::alternate_in(&filter, 1, Y_BUCKET, FP);
    let x = hook::item_in(&filter, 1, x_bucket, FP);
    assert!(hook::place_in(&filter, 1, Y_BUCKET, FP));
    assert!(hook::place_in(
        &filter,
        0,
        hook::primary_in(&filter, 0, x),
        FP
    ));
    Swap { filter, x, y }
}

fn remove_x(s: &Swap) {
    assert!(
        s.filter.remove(&s.x),
        "x was inserted: its remove must find a copy"
    );
}

fn look_for_y(s: &Swap) {
    assert_eq!(
        hook::lookup_all(&s.filter, s.y),
        Outcome::Present,
        "y was never removed"
    );
}

fn after_swap(s: &Swap) {
    assert_eq!(hook::lookup_all(&s.filter, s.y), Outcome::Present);
    assert_eq!(s.filter.len(), 1);
    // x's and y's copies are interchangeable: the one left answers for both.
    assert_eq!(s.filter.count(&s.y), 1);
}

#[test]
fn removing_x_keeps_a_colliding_item_of_another_level() {
    check_both_orders(
        "8a: remove x vs lookup of y colliding in level 1",
        swap,
        remove_x,
        look_for_y,
        after_swap,
    );
}

/// Three levels of 4 buckets, 2 stripes; lookups give up after one failed validation. `z` is
/// stored in level 1; `x` is stored nowhere, and its level-1 buckets share a stripe with the
/// remove of `z`. `insert_unique(x)` checks level 1 while holding x's level-0 stripes: when
/// that lookup collides with the remove it is unproven, and must be settled under the lock.
struct Settle {
    filter: Filter,
    x: u64,
    z: u64,
    added: AtomicBool,
}

fn settle() -> Settle {
    let filter = hook::tiny_levels_filter(&[4, 4, 4], 2, 1);
    // z: fingerprint 7 in level-1 bucket 0; x: fingerprint 9, primary bucket 2 (same stripe).
    assert!(hook::place_in(&filter, 1, 0, 7));
    let z = hook::item_in(&filter, 1, 0, 7);
    let x = hook::item_in(&filter, 1, 2, 9);
    Settle {
        filter,
        x,
        z,
        added: AtomicBool::new(false),
    }
}

fn insert_x(s: &Settle) {
    let added = s.filter.insert_unique(&s.x).unwrap();
    s.added.store(added, Ordering::Relaxed);
}

fn remove_z(s: &Settle) {
    assert!(s.filter.remove(&s.z));
}

fn after_settle(s: &Settle) {
    assert!(
        s.added.load(Ordering::Relaxed),
        "x was nowhere, yet insert_unique answered Ok(false)"
    );
    assert_eq!(s.filter.count(&s.x), 1);
    assert_eq!(s.filter.count(&s.z), 0);
    assert_eq!(s.filter.len(), 1);
}

#[test]
fn insert_unique_settles_a_level_that_collided_with_a_writer() {
    check_both_orders(
        "8b: insert_unique vs a remove in a middle level",
        settle,
        insert_x,
        remove_z,
        after_settle,
    );
}
