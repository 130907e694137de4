//! Model 19: a cuckoo path in a growable filter while another writer inserts into the bucket
//! where the path ends, and while a lookup reads the entry it moves.
//!
//! x's two buckets A and B are full. Every entry of A has its other bucket in T; every entry
//! of B has its other bucket in A; T has one free lane. So x's path search (breadth first,
//! without locks) finds the move of A's first entry into T's free lane, which it makes under
//! the stripes of A and T after checking that the entry is still in A and T still has room.
//! Meanwhile w, whose first bucket is T, takes that lane.
//!
//! Mutant `doubling_move_unlocked` makes the move without taking the stripes: the move and w's
//! insert both find T's free lane and both write it, and one of the two entries is lost. (The
//! eight buckets share one stripe group, so a move that locks only one of its two stripes is
//! not seen here.)
#![cfg(loom)]

use loom_tests::{check_both_orders, find_item, hook, Filter, Outcome};

struct Walk {
    filter: Filter,
    x: u64,
    w: u64,
    /// Every item stored before the model's threads start.
    stored: Vec<u64>,
    /// The entry of A that x's walk moves to T.
    moved: u64,
}

/// The two buckets of `item` (homes: the table never doubles).
fn homes(filter: &Filter, item: u64) -> (u64, u64) {
    let [a, b] = hook::doubling_buckets(filter, item, 0);
    (a.0, b.0)
}

fn walk_setup() -> Walk {
    let (filter, x, w, stored, in_a) = walk_table();
    // The walk's choices are fixed (its random state starts alike in every interleaving):
    // which entry of A it moves is found on a copy of the table, built alike.
    let (copy, ..) = walk_table();
    copy.insert(&x).unwrap();
    let moved = *in_a
        .iter()
        .find(|&&entry| !hook::doubling_holds(&copy, entry, 0))
        .expect("x's walk moves an entry of A");
    Walk {
        filter,
        x,
        w,
        stored,
        moved,
    }
}

/// The table before x's insert: x, w, every item stored, and the entries of A.
fn walk_table() -> (Filter, u64, u64, Vec<u64>, Vec<u64>) {
    // Eight buckets, so that x's buckets, T and the buckets of T's entries are all apart; no
    // doubling (the table stays far below its load limit).
    let filter = hook::tiny_doubling(8, 12, 0);
    let mut taken = Vec::new();
    let mut anchors = Vec::new();
    // Distinct anchors (the low 5 bits of an item's hash): no entry matches another item.
    let mut item = |wanted: &dyn Fn(u64) -> bool| -> u64 {
        let found = find_item(&mut taken, |i| !anchors.contains(&(i & 31)) && wanted(i));
        anchors.push(found & 31);
        found
    };
    let a = 0;
    let x = item(&|i| homes(&filter, i).0 == a);
    let b = homes(&filter, x).1;
    // T: a bucket other than B that some entry of A has as its other bucket.
    let t = (1u64..8)
        .find(|&t| t != b && (1u64 << 20..1 << 21).any(|i| homes(&filter, i) == (a, t)))
        .expect("an entry of A pairs it with another bucket");
    let mut stored = Vec::new();
    let mut in_a = Vec::new();
    for _ in 0..4 {
        let entry = item(&|i| homes(&filter, i) == (a, t));
        assert!(hook::doubling_place(&filter, entry, 0));
        in_a.push(entry);
        stored.push(entry);
    }
    for _ in 0..4 {
        let entry = item(&|i| homes(&filter, i) == (b, a));
        assert!(hook::doubling_place(&filter, entry, 0));
        stored.push(entry);
    }
    // Three entries in T whose other buckets are neither A nor B: T keeps one free lane.
    for _ in 0..3 {
        let entry = item(&|i| {
            let (home, other) = homes(&filter, i);
            home == t && other != a && other != b
        });
        assert!(hook::doubling_place(&filter, entry, 0));
        stored.push(entry);
    }
    let w = item(&|i| {
        let (home, other) = homes(&filter, i);
        home == t && other != a && other != b
    });
    for item in [x, w] {
        assert_eq!(hook::doubling_lookup(&filter, item), Outcome::Absent);
    }
    (filter, x, w, stored, in_a)
}

fn insert_x(s: &Walk) {
    s.filter.insert(&s.x).unwrap();
}

fn insert_w(s: &Walk) {
    s.filter.insert(&s.w).unwrap();
}

fn look_up_moved(s: &Walk) {
    assert_ne!(
        hook::doubling_lookup(&s.filter, s.moved),
        Outcome::Absent,
        "an entry missed while a walk moved it"
    );
}

fn assert_walked(s: &Walk) {
    // A growable table doubles when a path search fails: x's path is there to be found.
    assert_eq!(
        s.filter.doublings(),
        0,
        "x's insert found no path and doubled"
    );
    for &item in s.stored.iter().chain([&s.x]) {
        assert_eq!(
            hook::doubling_lookup(&s.filter, item),
            Outcome::Present,
            "an item lost by a kick walk"
        );
    }
}

fn after_walk(s: &Walk) {
    assert_walked(s);
    // (With no other writer, the walk is the one planned on the copy.)
    assert!(
        !hook::doubling_holds(&s.filter, s.moved, 0),
        "the walk moved another entry than on the copy"
    );
    assert_eq!(s.filter.len(), s.stored.len() + 1);
}

fn after_walk_and_insert(s: &Walk) {
    assert_walked(s);
    assert_eq!(
        hook::doubling_lookup(&s.filter, s.w),
        Outcome::Present,
        "w lost: a walk wrote over it"
    );
    assert_eq!(s.filter.len(), s.stored.len() + 2);
}

#[test]
fn a_walk_and_an_insert_into_its_last_bucket_keep_every_item() {
    check_both_orders(
        "growth: walk vs insert",
        walk_setup,
        insert_x,
        insert_w,
        after_walk_and_insert,
    );
}

#[test]
fn a_lookup_of_entries_a_walk_moves_never_misses() {
    check_both_orders(
        "growth: walk vs lookup",
        walk_setup,
        insert_x,
        look_up_moved,
        after_walk,
    );
}
