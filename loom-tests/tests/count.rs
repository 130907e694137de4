//! Model 8: `count(x)` while a kick moves x's fingerprint is exactly 1: a validated read never
//! sees the fingerprint in neither bucket nor in both.
#![cfg(loom)]

use loom_tests::{check_both_orders, hook, Filter, Table};

struct CountKick {
    filter: Filter,
    x: u64,
    y: u64,
}

/// As in model 1: inserting y (buckets 0 and 3, full) moves x from 0 to 1.
fn count_kick() -> CountKick {
    let mut t = Table::new(4, 4);
    let fp_x = t.fingerprint(0, 1);
    assert!(hook::place(&t.filter, 0, fp_x));
    let x = hook::item(&t.filter, 1, fp_x);
    t.put(0, 3);
    t.put(3, 0);
    t.put(3, 0);
    let y = t.new_item(0, 3);
    CountKick {
        filter: t.filter,
        x,
        y,
    }
}

#[test]
fn count_during_a_kick_is_exact() {
    check_both_orders(
        "8: count(x) vs kick of x",
        count_kick,
        |s| s.filter.insert(&s.y).unwrap(),
        |s| assert_eq!(s.filter.count(&s.x), 1),
        |s| assert_eq!(s.filter.count(&s.y), 1),
    );
}
