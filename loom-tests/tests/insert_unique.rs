//! Model 3: `insert_unique(x)` racing with `insert_unique(x)`: exactly one returns `true`, and
//! exactly one copy is stored.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom_tests::{check_both_orders, copies, Filter, Table};

struct Unique {
    filter: Filter,
    x: u64,
    added: [AtomicBool; 2],
    stored_before: usize,
}

fn unique(layout: &[(usize, usize)]) -> Unique {
    let mut t = Table::new(4, 4);
    for &(b, partner) in layout {
        t.put(b, partner);
    }
    let x = t.new_item(0, 1);
    Unique {
        filter: t.filter,
        x,
        added: Default::default(),
        stored_before: layout.len(),
    }
}

fn first(s: &Unique) {
    let added = s.filter.insert_unique(&s.x).unwrap();
    s.added[0].store(added, Ordering::Relaxed);
}

fn second(s: &Unique) {
    let added = s.filter.insert_unique(&s.x).unwrap();
    s.added[1].store(added, Ordering::Relaxed);
}

fn after(s: &Unique) {
    let added: Vec<bool> = s.added.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    assert_eq!(added.iter().filter(|&&a| a).count(), 1, "{added:?}");
    assert_eq!(copies(&s.filter, s.x, &[0, 1]), 1);
    assert_eq!(s.filter.len(), s.stored_before + 1);
}

#[test]
fn racing_insert_unique_on_free_buckets() {
    check_both_orders(
        "3a: insert_unique race, free buckets",
        || unique(&[]),
        first,
        second,
        after,
    );
}

/// x's buckets are full; both calls search and run a kick chain (a fingerprint of bucket 1
/// moves to bucket 2) before the presence re-check under the final lock.
#[test]
fn racing_insert_unique_through_a_kick() {
    check_both_orders(
        "3b: insert_unique race, kick needed",
        || unique(&[(0, 1), (0, 1), (1, 0), (1, 2)]),
        first,
        second,
        after,
    );
}
