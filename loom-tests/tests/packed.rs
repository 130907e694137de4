//! Model 15: packed and compact buckets, which straddle words and share them.
//!
//! Packed 12-bit and compact 13-bit buckets both take 48 bits: bucket `b` starts at bit `48 b`,
//! so bucket 1 spans words 0 and 1 (packed: its lane 1, bits 60..72, straddles them), bucket 4
//! is word 3 alone. Four such buckets fill three words, so the table gives every run of four
//! buckets one stripe: with 8 buckets and 2 stripes, buckets 0..4 are stripe 0, 4..8 stripe 1.
//! Packed 8-bit buckets take 32 bits: buckets 0 and 1 share word 0 and a stripe.
#![cfg(loom)]

use loom_tests::{check_both_orders, copies, hook, Filter, Layout, Outcome, Table};

/// Packed 12-bit or compact 13-bit: 48-bit buckets either way.
fn table_48(layout: Layout) -> Table {
    let bits = match layout {
        Layout::Compact => 13,
        _ => 12,
    };
    let t = Table::with_layout(layout, 8, 2, bits);
    assert_eq!(hook::words_of(&t.filter, 1), (0, 1), "bucket 1 straddles");
    assert_eq!(hook::words_of(&t.filter, 4), (3, 3));
    assert_eq!(hook::stripe_of(&t.filter, 1), hook::stripe_of(&t.filter, 2));
    assert_ne!(hook::stripe_of(&t.filter, 1), hook::stripe_of(&t.filter, 4));
    t
}

/// x's fingerprint is at least this: its top 4 bits (compact, 13 bits) are 2, the other
/// fingerprints' 0, so that a compact bucket's code changes in both words when x comes or goes
/// (its nibble index in word 0, the lanes' low bits in word 1).
const X_FROM: u64 = 2 << 9;

/// x moves between bucket 1 (straddling words 0 and 1) and bucket 4 while a reader looks it up.
struct Move {
    filter: Filter,
    x: u64,
    y: u64,
    /// Other items and their buckets.
    others: Vec<(u64, [usize; 2])>,
    /// Where x ends up, and where it started.
    to: usize,
    from: usize,
}

/// x sits in bucket 1 (packed: lane 1, the straddling one) with three fingerprints pairing 1
/// and 6; bucket 6 is full of them too. Inserting y (buckets 1 and 6) moves x to bucket 4, the
/// only free lane in reach, then stores y in bucket 1: the erase changes both words of bucket 1.
fn out_of_straddling(layout: Layout, x_primary: usize) -> Move {
    let mut t = table_48(layout);
    let mut others = vec![(t.put(1, 6), [1, 6])];
    let fp_x = t.fingerprint_from(1, 4, X_FROM);
    assert!(hook::place(&t.filter, 1, fp_x));
    let x = hook::item(&t.filter, x_primary, fp_x);
    others.extend((0..2).map(|_| (t.put(1, 6), [1, 6])));
    others.extend((0..4).map(|_| (t.put(6, 1), [1, 6])));
    let y = t.new_item(1, 6);
    Move {
        filter: t.filter,
        x,
        y,
        others,
        to: 4,
        from: 1,
    }
}

/// x sits in bucket 4 with three fingerprints pairing 4 and 7; bucket 7 is full of them too;
/// bucket 1 holds one other fingerprint, so x's copy goes into its lane 1 (packed: the
/// straddling one). Inserting y (buckets 4 and 7) moves x to bucket 1, then stores y in 4.
fn into_straddling(layout: Layout, x_primary: usize) -> Move {
    let mut t = table_48(layout);
    let mut others = vec![(t.put(1, 2), [1, 2])];
    let fp_x = t.fingerprint_from(4, 1, X_FROM);
    assert!(hook::place(&t.filter, 4, fp_x));
    let x = hook::item(&t.filter, x_primary, fp_x);
    others.extend((0..3).map(|_| (t.put(4, 7), [4, 7])));
    others.extend((0..4).map(|_| (t.put(7, 4), [4, 7])));
    let y = t.new_item(4, 7);
    Move {
        filter: t.filter,
        x,
        y,
        others,
        to: 1,
        from: 4,
    }
}

fn insert_y(s: &Move) {
    s.filter.insert(&s.y).unwrap();
}

/// One hop, copy before erase and every word of the erase Release: found by the lookup's
/// probes, without a failed validation, whichever bucket it reads first and however its loads
/// of the straddling bucket fall between the writer's stores.
fn look_up_x(s: &Move) {
    assert_eq!(hook::lookup(&s.filter, s.x), (Outcome::Present, 0));
}

fn after_move(s: &Move) {
    assert_eq!(
        copies(&s.filter, s.x, &[s.from]),
        0,
        "x left bucket {}",
        s.from
    );
    assert_eq!(
        copies(&s.filter, s.x, &[s.to]),
        1,
        "x is in bucket {}, once",
        s.to
    );
    let y_buckets = if s.from == 1 { [1, 6] } else { [4, 7] };
    assert_eq!(copies(&s.filter, s.y, &y_buckets), 1);
    for (o, buckets) in &s.others {
        assert_eq!(
            copies(&s.filter, *o, buckets),
            1,
            "a fingerprint lost or doubled"
        );
    }
    assert_eq!(s.filter.len(), s.others.len() + 2);
}

fn check_move(name: &str, setup: fn() -> Move) {
    check_both_orders(name, setup, insert_y, look_up_x, after_move);
}

/// 15a: the move's source lane straddles words 0 and 1; the reader reads the source first.
#[test]
fn packed_reader_vs_move_out_of_a_straddling_lane_source_first() {
    check_move(
        "15a: packed, x 1->4 out of a straddling lane, reader reads 1 first",
        || out_of_straddling(Layout::Packed, 1),
    );
}

/// 15a, the reader reads the destination first.
#[test]
fn packed_reader_vs_move_out_of_a_straddling_lane_destination_first() {
    check_move(
        "15a: packed, x 1->4 out of a straddling lane, reader reads 4 first",
        || out_of_straddling(Layout::Packed, 4),
    );
}

/// 15c: the move's copy goes into a lane that straddles words 0 and 1.
#[test]
fn packed_reader_vs_move_into_a_straddling_lane_source_first() {
    check_move(
        "15c: packed, x 4->1 into a straddling lane, reader reads 4 first",
        || into_straddling(Layout::Packed, 4),
    );
}

#[test]
fn packed_reader_vs_move_into_a_straddling_lane_destination_first() {
    check_move(
        "15c: packed, x 4->1 into a straddling lane, reader reads 1 first",
        || into_straddling(Layout::Packed, 1),
    );
}

/// 15d: compact buckets are re-encoded as a whole on every write, so the move rewrites both
/// words of bucket 1 (its copy or its erase), whichever lane x takes.
#[test]
fn compact_reader_vs_move_out_of_a_straddling_bucket() {
    for x_primary in [1, 4] {
        check_move(
            &format!(
                "15d: compact, x 1->4 out of a straddling bucket, reader reads {x_primary} first"
            ),
            match x_primary {
                1 => || out_of_straddling(Layout::Compact, 1),
                _ => || out_of_straddling(Layout::Compact, 4),
            },
        );
    }
}

#[test]
fn compact_reader_vs_move_into_a_straddling_bucket() {
    for x_primary in [1, 4] {
        check_move(
            &format!(
                "15d: compact, x 4->1 into a straddling bucket, reader reads {x_primary} first"
            ),
            match x_primary {
                1 => || into_straddling(Layout::Compact, 1),
                _ => || into_straddling(Layout::Compact, 4),
            },
        );
    }
}

/// x (buckets 4 and 1) sits in bucket 1 (packed: lane 1, the straddling one) behind h (buckets
/// 1 and 2). A writer that holds only stripe 0 inserts z (buckets 1 and 2; bucket 2 is fuller,
/// so z goes into bucket 1) and removes h: both words of bucket 1 change around x. The reader
/// looks x up from bucket 4, so it validates stripe 1, which the writer never takes: its words
/// must hold x however its loads fall between the writer's stores.
struct Neighbours {
    filter: Filter,
    x: u64,
    z: u64,
    h: u64,
    others: Vec<(u64, [usize; 2])>,
}

/// The top 4 bits of h, x and z are 1, 2 and 3 (as 13-bit fingerprints), their low bits
/// differ: in a compact bucket, inserting z moves x from the last lane to the one before, and
/// the code changes in both words (the nibble index in word 0, the low bits in word 1), so a
/// read of one word before the insert and the other after it does not hold x.
fn neighbours(layout: Layout) -> Neighbours {
    let mut t = table_48(layout);
    let [fp_h, fp_x, fp_z] = [(2, 1 << 9), (4, 2 << 9), (2, 3 << 9)].map(|(partner, from)| {
        let fp = t.fingerprint_from(1, partner, from);
        assert!(fp >> 9 == from >> 9, "top bits as chosen");
        fp
    });
    assert!(fp_h % 512 != fp_x % 512 && fp_z % 512 != fp_x % 512);
    assert!(hook::place(&t.filter, 1, fp_h) && hook::place(&t.filter, 1, fp_x));
    let h = hook::item(&t.filter, 1, fp_h);
    let x = hook::item(&t.filter, 4, fp_x);
    let z = hook::item(&t.filter, 1, fp_z);
    let others = vec![(t.put(2, 3), [2, 3]), (t.put(2, 3), [2, 3])];
    Neighbours {
        filter: t.filter,
        x,
        z,
        h,
        others,
    }
}

fn insert_z_remove_h(s: &Neighbours) {
    s.filter.insert(&s.z).unwrap();
    assert!(s.filter.remove(&s.h));
}

fn after_neighbours(s: &Neighbours) {
    assert_eq!(copies(&s.filter, s.x, &[1]), 1);
    assert_eq!(copies(&s.filter, s.z, &[1]), 1, "z went into bucket 1");
    assert_eq!(copies(&s.filter, s.h, &[1, 2]), 0);
    for (o, buckets) in &s.others {
        assert_eq!(copies(&s.filter, *o, buckets), 1);
    }
    assert_eq!(s.filter.len(), 4);
}

/// 15e: packed lanes are separate bits: the writes around x leave x's bits as they were in
/// both words, so every read of bucket 1 holds x.
#[test]
fn packed_reader_vs_writes_around_a_straddling_lane() {
    check_both_orders(
        "15e: packed, insert z and remove h around x's straddling lane",
        || neighbours(Layout::Packed),
        insert_z_remove_h,
        |s| assert_eq!(hook::lookup(&s.filter, s.x), (Outcome::Present, 0)),
        after_neighbours,
    );
}

/// 15f: the same writes in a compact table re-encode bucket 1 whole: a read of its two words that
/// falls between the writer's stores may not hold x, and the reader's stripe does not tell it
/// that a writer was there: a compact lookup whose buckets straddle words validates a miss
/// against its second bucket's stripe too (mutant `compact_one_stripe_miss` takes `a`'s alone,
/// and answers `Absent`).
#[test]
fn compact_reader_vs_writes_into_its_straddling_bucket() {
    check_both_orders(
        "15f: compact, insert z and remove h in x's straddling bucket",
        || neighbours(Layout::Compact),
        insert_z_remove_h,
        |s| {
            let (outcome, _) = hook::lookup(&s.filter, s.x);
            assert_eq!(outcome, Outcome::Present, "x is present throughout");
        },
        after_neighbours,
    );
}

/// Packed 8-bit buckets (32 bits): buckets 0 and 1 share word 0, 2 and 3 word 1; with four
/// stripes, each pair of buckets has its own. u (buckets 0 and 3) and v (buckets 1 and 2) go
/// into buckets 0 and 1 (2 and 3 hold one fingerprint each), from two writers at once: two
/// claims, compare-and-swaps of word 0 under no stripe, neither of which may lose the other
/// (mutant `claim_plain_store`, a load and a store, can).
struct SharedWord {
    filter: Filter,
    u: u64,
    v: u64,
    others: Vec<(u64, [usize; 2])>,
}

fn shared_word() -> SharedWord {
    let mut t = Table::with_layout(Layout::Packed, 4, 4, 8);
    assert_eq!(hook::words_of(&t.filter, 0), (0, 0));
    assert_eq!(hook::words_of(&t.filter, 1), (0, 0));
    // Both words' stripes are in use, so a stripe per bucket (four of them) would give each of
    // the four buckets its own.
    assert_ne!(hook::stripe_of(&t.filter, 0), hook::stripe_of(&t.filter, 2));
    let others = vec![(t.put(2, 3), [2, 3]), (t.put(3, 2), [2, 3])];
    let u = t.new_item(0, 3);
    let v = t.new_item(1, 2);
    SharedWord {
        filter: t.filter,
        u,
        v,
        others,
    }
}

#[test]
fn packed_writers_of_two_buckets_in_one_word() {
    check_both_orders(
        "15b: packed 8-bit, insert into buckets 0 and 1 (one word) at once",
        shared_word,
        |s| s.filter.insert(&s.u).unwrap(),
        |s| s.filter.insert(&s.v).unwrap(),
        |s| {
            assert_eq!(copies(&s.filter, s.u, &[0]), 1, "u lost");
            assert_eq!(copies(&s.filter, s.v, &[1]), 1, "v lost");
            for (o, buckets) in &s.others {
                assert_eq!(copies(&s.filter, *o, buckets), 1);
            }
            assert_eq!(s.filter.len(), 4);
        },
    );
}
