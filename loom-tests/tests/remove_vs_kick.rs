//! Model 4: `remove(x)` racing with an insert whose kick chain moves x's fingerprint. x is
//! removed exactly once, wherever it is at the time, and every other item stays.
#![cfg(loom)]

use loom_tests::{check_both_orders, copies, hook, Filter, Table};

/// As in model 1: x in bucket 0 (pairing 0 and 1), bucket 0's other slot and bucket 3 full of
/// fingerprints pairing 0 and 3; inserting y (buckets 0, 3) must move x to 1 unless x is gone.
struct RemoveKick {
    filter: Filter,
    x: u64,
    y: u64,
    others: Vec<u64>,
}

fn setup() -> RemoveKick {
    let mut t = Table::new(4, 4);
    let fp_x = t.fingerprint(0, 1);
    assert!(hook::place(&t.filter, 0, fp_x));
    let x = hook::item(&t.filter, 0, fp_x);
    let others = vec![t.put(0, 3), t.put(3, 0), t.put(3, 0)];
    let y = t.new_item(0, 3);
    RemoveKick {
        filter: t.filter,
        x,
        y,
        others,
    }
}

fn remove_x(s: &RemoveKick) {
    assert!(s.filter.remove(&s.x), "x was present and must be removed");
}

fn insert_y(s: &RemoveKick) {
    s.filter.insert(&s.y).unwrap();
}

fn after(s: &RemoveKick) {
    assert_eq!(copies(&s.filter, s.x, &[0, 1]), 0, "x removed exactly once");
    assert_eq!(copies(&s.filter, s.y, &[0, 3]), 1);
    assert!(s.others.iter().all(|o| s.filter.contains(o)));
    assert_eq!(s.filter.len(), 4);
}

#[test]
fn remove_races_a_kick_of_the_same_fingerprint() {
    check_both_orders("4: remove x vs kick of x", setup, remove_x, insert_y, after);
}
