//! Model 12 (RedisBloom): two inserters at once. Buckets of 3 one-byte slots do not fill whole
//! words, so buckets of different stripes share a word: each slot write must leave the word's
//! other bytes as their own writers left them. Both items end up stored, once each, and the
//! item count is right.
//!
//! Sub-filter: 4 buckets of 3 slots (bytes 0-2, 3-5, 6-8, 9-11: buckets 0, 1 and part of 2 in
//! word 0), one stripe per bucket.
#![cfg(loom)]

use loom_tests::{check_both_orders, hook, rb_copies, RbTable, RedisCuckooFilter};

struct Race {
    filter: RedisCuckooFilter,
    u: Vec<u8>,
    v: Vec<u8>,
    others: Vec<Vec<u8>>,
}

fn insert_u(s: &Race) {
    s.filter.insert(&s.u).unwrap();
}

fn insert_v(s: &Race) {
    s.filter.insert(&s.v).unwrap();
}

fn every_item_stored_once(s: &Race) {
    for item in s.others.iter().chain([&s.u, &s.v]) {
        assert_eq!(
            rb_copies(&s.filter, 0, item),
            1,
            "an item was lost or doubled"
        );
    }
    assert_eq!(s.filter.info().items, s.others.len() as u64 + 2);
}

/// u and v both live in buckets 0 and 2; bucket 0 has one free slot left. One insert takes it,
/// the other takes bucket 2's first slot (byte 6, in the same word).
fn one_bucket() -> Race {
    let mut t = RbTable::new(4, 3, 1);
    let others = vec![t.put(0, 0, 2), t.put(0, 0, 1)];
    let u = t.new_item(0, 2);
    let v = t.new_item(0, 2);
    Race {
        filter: t.filter,
        u,
        v,
        others,
    }
}

#[test]
fn two_inserters_on_one_bucket() {
    check_both_orders(
        "12a: two inserters on bucket 0 (one free slot) and 2",
        one_bucket,
        insert_u,
        insert_v,
        |s| {
            every_item_stored_once(s);
            let in_bucket = |item: &[u8], bucket| {
                let (fp, _) = hook::rb_key(&s.filter, 0, item);
                hook::rb_copies_in(&s.filter, 0, bucket, fp)
            };
            assert_eq!(
                in_bucket(&s.u, 0) + in_bucket(&s.v, 0),
                1,
                "bucket 0 filled"
            );
            assert_eq!(in_bucket(&s.u, 2) + in_bucket(&s.v, 2), 1);
        },
    );
}

/// u lives in buckets 0 and 2, v in 1 and 3: the inserts hold different stripes and write
/// bytes 0 and 3 of one word.
fn shared_word() -> Race {
    let mut t = RbTable::new(4, 3, 1);
    let u = t.new_item(0, 2);
    let v = t.new_item(1, 3);
    Race {
        filter: t.filter,
        u,
        v,
        others: Vec::new(),
    }
}

#[test]
fn two_inserters_on_buckets_sharing_a_word() {
    check_both_orders(
        "12b: two inserters on buckets 0 and 1 of one word",
        shared_word,
        insert_u,
        insert_v,
        every_item_stored_once,
    );
}
