//! Model 10 (RedisBloom): a reader looks up x while an insert's kick walk moves x's fingerprint
//! to its other bucket. The walk is written slot by slot (the new fingerprint over x first, x
//! into its other bucket second), so for a moment x is in neither bucket: the reader must then
//! fail its validation and look again, never prove x absent (it may answer "maybe").
//!
//! Sub-filter: 4 buckets of one slot, all in one word, one stripe per bucket.
#![cfg(loom)]

use loom_tests::{check_both_orders, hook, rb_copies, Outcome, RbTable, RedisCuckooFilter};

/// x pairs buckets 0 and 1 and sits in 0; o fills bucket 2. y (buckets 0 and 2, both full)
/// kicks x from 0 to 1 and takes its slot.
struct Walk {
    filter: RedisCuckooFilter,
    x: Vec<u8>,
    y: Vec<u8>,
    o: Vec<u8>,
}

/// `x_primary`: the bucket of x that its lookup validates (0: the walk's source, 1: its
/// destination).
fn walk(x_primary: usize) -> Walk {
    let mut t = RbTable::new(4, 1, 1);
    let x = t.new_item(x_primary, 1 - x_primary);
    let (fp_x, _) = hook::rb_key(&t.filter, 0, &x);
    assert!(hook::rb_place(&t.filter, 0, 0, fp_x));
    let o = t.put(0, 2, 3);
    let y = t.new_item(0, 2);
    Walk {
        filter: t.filter,
        x,
        y,
        o,
    }
}

fn insert_y(s: &Walk) {
    s.filter.insert(&s.y).unwrap();
}

fn look_up_x(s: &Walk) {
    let (outcome, _) = hook::rb_lookup(&s.filter, &s.x);
    assert_ne!(outcome, Outcome::Absent, "a kick walk hid x from a reader");
}

fn after(s: &Walk) {
    let in_bucket = |item: &[u8], bucket| {
        let (fp, _) = hook::rb_key(&s.filter, 0, item);
        hook::rb_copies_in(&s.filter, 0, bucket, fp)
    };
    assert_eq!(in_bucket(&s.x, 1), 1, "x was kicked into bucket 1");
    assert_eq!(in_bucket(&s.y, 0), 1, "y took x's slot");
    assert_eq!(rb_copies(&s.filter, 0, &s.x), 1);
    assert_eq!(rb_copies(&s.filter, 0, &s.o), 1);
    assert_eq!(s.filter.info().items, 3);
}

/// The reader validates against the walk's destination bucket: the stripe that only the
/// walk's path locks (not the new fingerprint's pair) cover.
#[test]
fn reader_validating_the_walks_destination() {
    check_both_orders(
        "10a: kick walk 0->1, reader validates bucket 1",
        || walk(1),
        insert_y,
        look_up_x,
        after,
    );
}

/// The reader validates against the walk's source bucket.
#[test]
fn reader_validating_the_walks_source() {
    check_both_orders(
        "10b: kick walk 0->1, reader validates bucket 0",
        || walk(0),
        insert_y,
        look_up_x,
        after,
    );
}
