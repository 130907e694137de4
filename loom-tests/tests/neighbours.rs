//! Writers on different bucket pairs that share a bucket (tables with as many stripes as
//! buckets, so that two writers do not simply share every stripe).
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom_tests::{
    check, check_both_orders, copies, hook, Arc, Filter, Outcome, Role, Start, Table,
};

/// A reader validates stripe(5) for x (buckets 5 and 0). Writer W inserts y (buckets 4, 3):
/// the only path is [x 5->0, then p 4->5], so W moves x out of bucket 5 and then moves p in.
/// Writer W2 removes o (buckets 5 and 2, so stripe 5 is its *second* lock) and rewrites bucket
/// 5. A reader that reads W2's store must also see W's earlier move: only the release fence
/// after *both* of W2's locks gives that.
///
/// Eight stripes, not the usual two to four: a pair always joins an even and an odd bucket, and
/// the scenario needs three distinct stripes among the even buckets 0, 2 and 4 (x's other
/// bucket, the kick's source, W2's first lock); with four stripes every writer would share a
/// first lock and the fence's placement would not matter.
struct Unrelated {
    filter: Filter,
    x: u64,
    y: u64,
    o: u64,
}

fn unrelated() -> Unrelated {
    let mut t = Table::new(8, 8);
    let fp_x = t.fingerprint(5, 0);
    assert!(hook::place(&t.filter, 5, fp_x));
    let x = hook::item(&t.filter, 5, fp_x);
    let o = t.put(5, 2);
    t.put(4, 5);
    t.put(4, 5);
    t.put(3, 4);
    t.put(3, 4);
    let y = t.new_item(4, 3);
    Unrelated {
        filter: t.filter,
        x,
        y,
        o,
    }
}

#[test]
fn reader_vs_a_two_hop_kick_vs_an_unrelated_remove() {
    let roles: [(&str, Role<Unrelated>); 3] = [
        ("reader", |s| {
            assert_ne!(
                hook::lookup(&s.filter, s.x).0,
                Outcome::Absent,
                "false negative"
            );
        }),
        ("inserter", |s| s.filter.insert(&s.y).unwrap()),
        ("remover", |s| assert!(s.filter.remove(&s.o))),
    ];
    for main_role in 0..3 {
        check(
            &format!(
                "7a: reader vs 2-hop kick vs unrelated remove, {} on main",
                roles[main_role].0
            ),
            move || {
                let s = Arc::new(unrelated());
                let start = Arc::new(Start::new());
                let spawned: Vec<_> = (0..3)
                    .filter(|&r| r != main_role)
                    .map(|r| {
                        let (s, start, role) = (Arc::clone(&s), Arc::clone(&start), roles[r].1);
                        loom::thread::spawn(move || {
                            start.go();
                            role(&s)
                        })
                    })
                    .collect();
                start.go();
                (roles[main_role].1)(&s);
                for h in spawned {
                    h.join().unwrap();
                }
                assert_eq!(copies(&s.filter, s.x, &[5, 0]), 1);
                assert_eq!(copies(&s.filter, s.o, &[5, 2]), 0);
                assert_eq!(copies(&s.filter, s.y, &[4, 3]), 1);
                assert_eq!(s.filter.len(), 6);
            },
        );
    }
}

/// Bucket 1 has one free lane. y (buckets 0, 3, both full) can only get in by moving x from 0
/// to 1; z (buckets 1, 2) goes straight into bucket 1. Exactly one of them fits, and the move
/// and the direct insert must not overwrite each other's store to bucket 1.
struct SharedBucket {
    filter: Filter,
    x: u64,
    y: u64,
    z: u64,
    others: Vec<(u64, [usize; 2])>,
    ok: [AtomicBool; 2],
}

fn shared_bucket() -> SharedBucket {
    let mut t = Table::new(4, 4);
    let fp_x = t.fingerprint(0, 1);
    assert!(hook::place(&t.filter, 0, fp_x));
    let x = hook::item(&t.filter, 0, fp_x);
    let others = vec![
        (t.put(0, 3), [0, 3]),
        (t.put(3, 0), [0, 3]),
        (t.put(3, 0), [0, 3]),
        (t.put(1, 2), [1, 2]),
        (t.put(2, 3), [2, 3]),
        (t.put(2, 3), [2, 3]),
    ];
    let y = t.new_item(0, 3);
    let z = t.new_item(1, 2);
    SharedBucket {
        filter: t.filter,
        x,
        y,
        z,
        others,
        ok: Default::default(),
    }
}

#[test]
fn a_move_into_a_bucket_vs_an_insert_into_it_through_another_pair() {
    check_both_orders(
        "7b: move x 0->1 vs insert z into 1 through (1,2)",
        shared_bucket,
        |s| s.ok[0].store(s.filter.insert(&s.y).is_ok(), Ordering::Relaxed),
        |s| s.ok[1].store(s.filter.insert(&s.z).is_ok(), Ordering::Relaxed),
        |s| {
            let (y_ok, z_ok) = (
                s.ok[0].load(Ordering::Relaxed),
                s.ok[1].load(Ordering::Relaxed),
            );
            assert!(y_ok ^ z_ok, "exactly one insert fits: y={y_ok} z={z_ok}");
            assert_eq!(copies(&s.filter, s.x, &[0, 1]), 1, "x stored once");
            assert_eq!(copies(&s.filter, s.y, &[0, 3]), u32::from(y_ok));
            assert_eq!(copies(&s.filter, s.z, &[1, 2]), u32::from(z_ok));
            for (o, buckets) in &s.others {
                assert_eq!(
                    copies(&s.filter, *o, buckets),
                    1,
                    "a fingerprint lost or doubled"
                );
            }
            assert_eq!(s.filter.len(), 8);
        },
    );
}

/// u (buckets 0, 1) sits in bucket 1; removing it rewrites bucket 1 while z (buckets 1, 2) is
/// inserted into bucket 1's free lane.
struct RemoveShared {
    filter: Filter,
    u: u64,
    z: u64,
    others: Vec<(u64, [usize; 2])>,
}

fn remove_shared() -> RemoveShared {
    let mut t = Table::new(4, 4);
    let fp_u = t.fingerprint(1, 0);
    assert!(hook::place(&t.filter, 1, fp_u));
    let u = hook::item(&t.filter, 0, fp_u);
    let others = vec![(t.put(2, 3), [2, 3]), (t.put(2, 3), [2, 3])];
    let z = t.new_item(1, 2);
    RemoveShared {
        filter: t.filter,
        u,
        z,
        others,
    }
}

#[test]
fn a_remove_from_a_bucket_vs_an_insert_into_it_through_another_pair() {
    check_both_orders(
        "7c: remove u from 1 (pair 0,1) vs insert z into 1 (pair 1,2)",
        remove_shared,
        |s| assert!(s.filter.remove(&s.u)),
        |s| s.filter.insert(&s.z).unwrap(),
        |s| {
            assert_eq!(copies(&s.filter, s.u, &[0, 1]), 0);
            assert_eq!(copies(&s.filter, s.z, &[1, 2]), 1);
            for (o, buckets) in &s.others {
                assert_eq!(copies(&s.filter, *o, buckets), 1);
            }
            assert_eq!(s.filter.len(), 3);
        },
    );
}
