//! Model 2: two inserters race for the last free slots of the same bucket pair. Either both
//! succeed, or exactly one reports `Full`; no fingerprint is lost or duplicated; `len` matches.
#![cfg(loom)]

use loom_tests::{check_both_orders, copies, Filter, Table};

struct Race {
    filter: Filter,
    u: u64,
    v: u64,
    others: Vec<u64>,
    free_slots: usize,
    outcome: [loom::sync::atomic::AtomicBool; 2],
}

/// Buckets 0..4 with `layout[b]` fingerprints stored in bucket `b` (partner given per slot);
/// u and v both live in buckets 0 and 1.
fn race(layout: &[(usize, usize)]) -> Race {
    let mut t = Table::new(4, 2);
    let others: Vec<u64> = layout
        .iter()
        .map(|&(b, partner)| t.put(b, partner))
        .collect();
    let u = t.new_item(0, 1);
    let v = t.new_item(1, 0);
    Race {
        filter: t.filter,
        u,
        v,
        others,
        free_slots: 8 - layout.len(),
        outcome: Default::default(),
    }
}

fn insert_u(s: &Race) {
    let ok = s.filter.insert(&s.u).is_ok();
    s.outcome[0].store(ok, loom::sync::atomic::Ordering::Relaxed);
}

fn insert_v(s: &Race) {
    let ok = s.filter.insert(&s.v).is_ok();
    s.outcome[1].store(ok, loom::sync::atomic::Ordering::Relaxed);
}

fn after(s: &Race) {
    let ok: Vec<bool> = s
        .outcome
        .iter()
        .map(|o| o.load(loom::sync::atomic::Ordering::Relaxed))
        .collect();
    let succeeded = ok.iter().filter(|&&o| o).count();
    assert_eq!(succeeded, s.free_slots.min(2), "outcomes {ok:?}");
    assert_eq!(copies(&s.filter, s.u, &[0, 1]), u32::from(ok[0]));
    assert_eq!(copies(&s.filter, s.v, &[0, 1]), u32::from(ok[1]));
    for &o in &s.others {
        let fp_buckets = [0, 1, 2, 3];
        assert_eq!(
            copies(&s.filter, o, &fp_buckets),
            1,
            "a stored fingerprint was lost or doubled"
        );
    }
    assert_eq!(s.filter.len(), s.others.len() + succeeded);
}

/// One free slot, in bucket 0 itself: one insert wins it, the other finds everything full.
#[test]
fn one_free_slot_in_the_pair() {
    check_both_orders(
        "2a: one free slot in the pair",
        || race(&[(0, 1), (1, 0), (1, 0), (2, 3), (2, 3), (3, 2), (3, 2)]),
        insert_u,
        insert_v,
        after,
    );
}

/// One free slot, in bucket 2, reachable only by moving a fingerprint out of bucket 1 (the one
/// pairing 1 with 2): both inserts search, at most one chain can run.
#[test]
fn one_free_slot_behind_a_kick() {
    check_both_orders(
        "2b: one free slot behind a kick",
        || race(&[(0, 1), (0, 1), (1, 0), (1, 2), (2, 3), (3, 2), (3, 2)]),
        insert_u,
        insert_v,
        after,
    );
}

/// Two free slots, one in each bucket of the pair: both inserts succeed.
#[test]
fn two_free_slots() {
    check_both_orders(
        "2c: two free slots",
        || race(&[(0, 1), (1, 0), (2, 3), (2, 3), (3, 2), (3, 2)]),
        insert_u,
        insert_v,
        after,
    );
}
