//! Model 14: the one-pass lookup over the levels of a grown filter (`Levels::lookup_levels`,
//! keys narrowed from the newest level's) against a kick in the newest level. The pass begins
//! each level's seqlock read and validates the misses only after the last level's loads; a
//! miss whose validation failed must be looked up again, never taken as proven.
//!
//! Two levels, of 4 and 8 buckets (two slots each), 2 stripes. Everything happens in level 1.
#![cfg(loom)]

use loom_tests::{check_both_orders, hook, Filter, Outcome};

/// In level 1: x's fingerprint sits in bucket `P` and pairs it with `q`, x's *primary*, so a
/// lookup reads `q` first and `P` second. `P`'s other slot and both slots of `r` hold
/// fingerprints pairing `P` and `r`. Inserting y (buckets `P` and `r`, both full) moves x from
/// `P` to `q`, the only free lane in reach, copy first, then stores y in `P`. A lookup that
/// reads `q` before the copy and `P` after the erase misses x, and only the stripe version
/// tells it so.
struct Hop {
    filter: Filter,
    x: u64,
    y: u64,
    others: Vec<u64>,
}

const P: usize = 0;

/// The first fingerprint not in `taken` whose level-1 alternate from `P` satisfies `partner`:
/// deterministic, so every interleaving starts from the same table.
fn fingerprint(filter: &Filter, partner: impl Fn(usize) -> bool, taken: &[u64]) -> u64 {
    (1u64..)
        .find(|fp| !taken.contains(fp) && partner(hook::alternate_in(filter, 1, P, *fp)))
        .expect("some fingerprint pairs these buckets")
}

fn hop() -> Hop {
    let filter = hook::tiny_levels_filter(&[4, 8], 2, 64);
    let mut taken = Vec::new();
    let fp_x = fingerprint(&filter, |_| true, &taken);
    taken.push(fp_x);
    let q = hook::alternate_in(&filter, 1, P, fp_x);
    let fp_other = fingerprint(&filter, |b| b != q, &taken);
    taken.push(fp_other);
    let r = hook::alternate_in(&filter, 1, P, fp_other);
    let mut pairing_r = || {
        let fp = fingerprint(&filter, |b| b == r, &taken);
        taken.push(fp);
        fp
    };
    let (fp_r1, fp_r2, fp_y) = (pairing_r(), pairing_r(), pairing_r());
    assert!(hook::place_in(&filter, 1, P, fp_x));
    assert!(hook::place_in(&filter, 1, P, fp_other));
    assert!(hook::place_in(&filter, 1, r, fp_r1));
    assert!(hook::place_in(&filter, 1, r, fp_r2));
    let others = vec![
        hook::item_in(&filter, 1, P, fp_other),
        hook::item_in(&filter, 1, r, fp_r1),
        hook::item_in(&filter, 1, r, fp_r2),
    ];
    Hop {
        x: hook::item_in(&filter, 1, q, fp_x),
        y: hook::item_in(&filter, 1, P, fp_y),
        filter,
        others,
    }
}

fn insert_y(s: &Hop) {
    s.filter.insert(&s.y).unwrap();
}

fn look_up_x(s: &Hop) {
    assert_eq!(
        hook::lookup_all(&s.filter, s.x),
        Outcome::Present,
        "x was never removed: the one-pass lookup must find it"
    );
}

fn after_hop(s: &Hop) {
    assert_eq!(s.filter.levels(), 2);
    assert_eq!(hook::lookup_all(&s.filter, s.x), Outcome::Present);
    assert_eq!(hook::lookup_all(&s.filter, s.y), Outcome::Present);
    assert!(s.others.iter().all(|o| s.filter.contains(o)));
    assert_eq!(s.filter.len(), 5);
    // The batched path answers the same.
    let mut found = Vec::new();
    s.filter.contains_many([s.x, s.y], &mut found);
    assert_eq!(found, [true, true]);
}

#[test]
fn one_pass_lookup_over_levels_vs_a_hop_in_the_newest_level() {
    check_both_orders(
        "14: one-pass lookup over two levels vs a hop in level 1",
        hop,
        insert_y,
        look_up_x,
        after_hop,
    );
}

/// The batched path (`contains_many`, level by level over a batch) against the same hop.
fn look_up_x_in_a_batch(s: &Hop) {
    let mut found = Vec::new();
    s.filter.contains_many([s.x], &mut found);
    assert_eq!(
        found,
        [true],
        "x was never removed: contains_many must find it"
    );
}

#[test]
fn batched_lookup_over_levels_vs_a_hop_in_the_newest_level() {
    check_both_orders(
        "14b: contains_many over two levels vs a hop in level 1",
        hop,
        insert_y,
        look_up_x_in_a_batch,
        after_hop,
    );
}
