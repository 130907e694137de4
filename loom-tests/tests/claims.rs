//! Model 20: inserts that claim a free lane without stripes, against writers that hold them.
//!
//! A plain table's insert takes a free lane that lies in one word with one compare-and-swap and
//! no stripe. Writers that hold stripes (a kick chain's move, a locked insert into a lane that
//! straddles two words) may therefore share a word with a claim at the same moment: each must
//! write it with an atomic read-modify-write that keeps the other's lane (mutant
//! `locked_put_plain_store`, a load then a store, loses the claim). Two claims of the same lane
//! must not both win (mutant `claim_plain_store`: model 2a catches it, two inserts racing for the
//! last free lane). A save's freeze keeps claims out (mutant `claim_ignores_freeze`: model 9,
//! whose writer's insert is a claim, catches it). A claim whose only empty lane straddles two
//! words writes it under the bucket's stripe, so that two such claims of one lane take turns
//! (mutant `straddle_claim_unlocked`, which writes it without the stripe: model 20c), and
//! holds it as a writer does, so that a validated read never sees half the lane (mutant
//! `straddle_claim_unchanged_version`, a reader's hold: model 20d, a `count` of the half).
//! Removes still take both stripes as writers: a claim and a remove of a twin key (another key
//! with the same fingerprint and the same pair) carry a copy from the bucket a lookup reads
//! second into the one it read first, so a lookup must see a remove as it sees a move (its
//! release fence, new versions; mutant `remove_unchanged_version`, a reader's hold, with no
//! fence and its versions unchanged, as if the remove took no stripe: model 20e, which needs
//! the fence; no model here needs the new versions).
#![cfg(loom)]

use loom_tests::{check_both_orders, copies, hook, Filter, Layout, Outcome, Table};
use std::sync::atomic::{AtomicBool, Ordering};

/// Two inserts at once, and where each item and every other one must be afterwards.
struct TwoInserts {
    filter: Filter,
    /// Inserted by the first thread, with its buckets.
    first: (u64, [usize; 2]),
    /// Inserted by the second thread, with its buckets.
    second: (u64, [usize; 2]),
    /// Stored before, with their buckets.
    others: Vec<(u64, [usize; 2])>,
}

fn insert_first(s: &TwoInserts) {
    s.filter.insert(&s.first.0).unwrap();
}

fn insert_second(s: &TwoInserts) {
    s.filter.insert(&s.second.0).unwrap();
}

fn every_item_once(s: &TwoInserts) {
    for (item, buckets) in [s.first, s.second] {
        assert_eq!(copies(&s.filter, item, &buckets), 1, "an insert was lost");
    }
    for (o, buckets) in &s.others {
        assert_eq!(
            copies(&s.filter, *o, buckets),
            1,
            "a stored fingerprint was lost or doubled"
        );
    }
    assert_eq!(s.filter.len(), s.others.len() + 2);
}

/// One-word buckets of two lanes. z (buckets 0 and 1) finds both full: its insert moves w
/// (buckets 1 and 2) into bucket 2 under the stripes, then stores z in bucket 1. Meanwhile y
/// (buckets 2 and 3; 3 is full) claims a lane of bucket 2, the word the move writes.
fn move_beside_a_claim() -> TwoInserts {
    let mut t = Table::new(4, 2);
    let mut others = vec![(t.put(0, 3), [0, 3]), (t.put(0, 3), [0, 3])];
    others.extend((0..2).map(|_| (t.put(3, 0), [0, 3])));
    let w = t.put(1, 2);
    others.push((w, [1, 2]));
    others.push((t.put(1, 0), [0, 1]));
    let z = t.new_item(0, 1);
    let y = t.new_item(2, 3);
    TwoInserts {
        filter: t.filter,
        first: (z, [0, 1]),
        second: (y, [2, 3]),
        others,
    }
}

/// 20a: a kick chain's move writes the word in which another insert claims a lane.
#[test]
fn a_move_and_a_claim_into_one_word_both_land() {
    check_both_orders(
        "20a: a move into bucket 2 while an insert claims a lane of it",
        move_beside_a_claim,
        insert_first,
        insert_second,
        every_item_once,
    );
}

/// Packed 12-bit buckets of 48 bits (as in model 15): bucket 1 spans words 0 and 1, and its
/// lane 1 (bits 60..72) straddles them. Bucket 1 is full but for that lane, bucket 6 full:
/// y (buckets 1 and 6) has no lane a compare-and-swap may take, so its insert takes bucket 1's
/// stripe and writes the straddling lane into both words. Meanwhile v (buckets 0 and 5; 5 is full) claims a lane
/// of bucket 0, in word 0.
fn straddling_beside_a_claim() -> TwoInserts {
    let mut t = Table::with_layout(Layout::Packed, 8, 2, 12);
    assert_eq!(hook::words_of(&t.filter, 1), (0, 1), "bucket 1 straddles");
    assert_eq!(hook::words_of(&t.filter, 0), (0, 0));
    let mut others: Vec<(u64, [usize; 2])> = (0..4).map(|_| (t.put(1, 6), [1, 6])).collect();
    // Empty lane 1 again: lanes fill lowest first, so the second item sits there.
    let (emptied, _) = others.remove(1);
    assert!(t.filter.remove(&emptied));
    others.extend((0..4).map(|_| (t.put(6, 1), [1, 6])));
    others.extend((0..4).map(|_| (t.put(5, 0), [0, 5])));
    let y = t.new_item(1, 6);
    let v = t.new_item(0, 5);
    TwoInserts {
        filter: t.filter,
        first: (y, [1, 6]),
        second: (v, [0, 5]),
        others,
    }
}

/// 20b: a locked write of a straddling lane shares word 0 with another insert's claim.
#[test]
fn a_straddling_lane_and_a_claim_in_one_word_both_land() {
    check_both_orders(
        "20b: packed, a locked write of a straddling lane beside a claim",
        straddling_beside_a_claim,
        insert_first,
        insert_second,
        every_item_once,
    );
}

/// Two inserts racing for one lane that straddles two words, and whether each was stored (std
/// atomics: bookkeeping outside the model).
struct OneStraddlingLane {
    filter: Filter,
    items: [(u64, [usize; 2]); 2],
    stored: [AtomicBool; 2],
    /// Stored before, with their buckets.
    others: Vec<(u64, [usize; 2])>,
}

/// Packed 12-bit buckets (as in 20b): bucket 1 is full but for its lane 1, which straddles
/// words 0 and 1; bucket 6 is full. Both items pair buckets 1 and 6, so that lane is the only
/// one either may take, and no cuckoo path exists (every stored item pairs 1 and 6 too).
fn straddling_lane_for_two() -> OneStraddlingLane {
    let mut t = Table::with_layout(Layout::Packed, 8, 2, 12);
    assert_eq!(hook::words_of(&t.filter, 1), (0, 1), "bucket 1 straddles");
    let mut others: Vec<(u64, [usize; 2])> = (0..4).map(|_| (t.put(1, 6), [1, 6])).collect();
    let (emptied, _) = others.remove(1);
    assert!(t.filter.remove(&emptied));
    others.extend((0..4).map(|_| (t.put(6, 1), [1, 6])));
    let items = [(t.new_item(1, 6), [1, 6]), (t.new_item(1, 6), [1, 6])];
    OneStraddlingLane {
        filter: t.filter,
        items,
        stored: [AtomicBool::new(false), AtomicBool::new(false)],
        others,
    }
}

fn insert_item(s: &OneStraddlingLane, k: usize) {
    let stored = s.filter.insert(&s.items[k].0).is_ok();
    // Relaxed: read after the join.
    s.stored[k].store(stored, Ordering::Relaxed);
}

/// Exactly one insert took the lane, whole; the other found the filter full; nothing else
/// changed.
fn one_took_the_lane(s: &OneStraddlingLane) {
    let stored = s.stored.each_ref().map(|f| f.load(Ordering::Relaxed));
    assert_eq!(
        stored.iter().filter(|&&x| x).count(),
        1,
        "one free lane, {stored:?} stored"
    );
    for (k, (item, buckets)) in s.items.iter().enumerate() {
        let want = u32::from(stored[k]);
        assert_eq!(
            copies(&s.filter, *item, buckets),
            want,
            "item {k}: a claimed lane lost or mixed"
        );
    }
    for (o, buckets) in &s.others {
        assert_eq!(copies(&s.filter, *o, buckets), 1, "a stored item was lost");
    }
    assert_eq!(s.filter.len(), s.others.len() + 1);
}

/// 20c: two claims of the one lane that straddles two words: the stripe makes them take turns.
#[test]
fn two_claims_of_one_straddling_lane_take_turns() {
    check_both_orders(
        "20c: packed, two inserts whose only lane straddles two words",
        straddling_lane_for_two,
        |s| insert_item(s, 0),
        |s| insert_item(s, 1),
        one_took_the_lane,
    );
}

/// An insert whose only lane straddles two words, and a key that was never stored whose
/// fingerprint is what that lane holds after the first of its two writes.
struct HalfALane {
    filter: Filter,
    inserted: u64,
    /// The key whose fingerprint is the inserted one's bits in the lane's first word.
    half: u64,
}

/// As 20c, with one item: y (buckets 1 and 6) may take only lane 1 of bucket 1, bits 60..72,
/// whose low 4 bits lie in word 0. z has primary bucket 1 and, as fingerprint, y's low 4 bits:
/// the lane's value between the claim's two writes.
fn half_a_lane() -> HalfALane {
    let mut t = Table::with_layout(Layout::Packed, 8, 2, 12);
    assert_eq!(hook::words_of(&t.filter, 1), (0, 1), "bucket 1 straddles");
    let mut others: Vec<u64> = (0..4).map(|_| t.put(1, 6)).collect();
    assert!(t.filter.remove(&others.remove(1)));
    for _ in 0..4 {
        t.put(6, 1);
    }
    // A fingerprint with bits in both words, whose low bits are no stored fingerprint.
    let (inserted, fp) = loop {
        let item = t.new_item(1, 6);
        let fp = hook::fingerprint(&t.filter, item);
        if fp & 0xf != 0 && fp >> 4 != 0 && t.filter.count(&hook::item(&t.filter, 1, fp & 0xf)) == 0
        {
            break (item, fp);
        }
    };
    HalfALane {
        half: hook::item(&t.filter, 1, fp & 0xf),
        filter: t.filter,
        inserted,
    }
}

/// 20d: a `count` during a claim of a lane across two words never counts the half written.
#[test]
fn a_count_never_sees_half_a_straddling_claim() {
    check_both_orders(
        "20d: packed, a count of the first word's half of a straddling claim",
        half_a_lane,
        |s| assert!(s.filter.insert(&s.inserted).is_ok(), "the lane was free"),
        |s| assert_eq!(s.filter.count(&s.half), 0, "counted half a lane"),
        |s| {
            assert_eq!(s.filter.count(&s.inserted), 1);
            assert_eq!(s.filter.count(&s.half), 0);
        },
    );
}

/// A stored item, and a twin of it: another key with the same fingerprint whose primary bucket
/// is the item's alternate, so that both pair the same two buckets.
struct Twins {
    filter: Filter,
    /// Primary bucket 0, its one copy in bucket 1 (its alternate).
    k: u64,
    /// Primary bucket 1, the same fingerprint: never stored before the model runs.
    twin: u64,
}

/// One-word buckets of two lanes, bucket 0 empty and bucket 1 holding k's copy. The twin's
/// insert claims a lane of the emptier bucket, 0; its remove erases the first match in its own
/// primary, 1, which is k's copy. k stays present throughout (in 1, then in 0 and 1, then in
/// 0), while a lookup of k that reads bucket 0 before the insert and bucket 1 after the remove
/// sees neither copy.
fn twin_moves_the_copy() -> Twins {
    let mut t = Table::new(4, 2);
    let fp = t.fingerprint(0, 1);
    assert_eq!(
        hook::alternate(&t.filter, 1, fp),
        0,
        "the twin pairs 1 with 0"
    );
    assert!(hook::place(&t.filter, 1, fp));
    assert_ne!(hook::stripe_of(&t.filter, 0), hook::stripe_of(&t.filter, 1));
    Twins {
        k: hook::item(&t.filter, 0, fp),
        twin: hook::item(&t.filter, 1, fp),
        filter: t.filter,
    }
}

fn insert_and_remove_the_twin(s: &Twins) {
    s.filter.insert(&s.twin).unwrap();
    assert!(s.filter.remove(&s.twin), "the twin's fingerprint is there");
}

fn look_up_k(s: &Twins) {
    let (outcome, _) = hook::lookup(&s.filter, s.k);
    assert_ne!(
        outcome,
        Outcome::Absent,
        "a twin's insert and remove hid a present item from a lookup"
    );
}

/// The copy that is left is the twin's claim, in bucket 0: the remove took k's from bucket 1.
fn k_left_in_bucket_0(s: &Twins) {
    assert_eq!(
        copies(&s.filter, s.k, &[0]),
        1,
        "the claim went to bucket 0"
    );
    assert_eq!(
        copies(&s.filter, s.k, &[1]),
        0,
        "the remove took bucket 1's copy"
    );
    assert_eq!(s.filter.len(), 1);
}

/// 20e: a lookup of k while a twin key is inserted and removed never proves k absent.
#[test]
fn a_remove_of_a_twin_key_never_hides_a_present_item() {
    check_both_orders(
        "20e: a twin's insert (a claim) and remove carry k's copy past a lookup of k",
        twin_moves_the_copy,
        insert_and_remove_the_twin,
        look_up_k,
        k_left_in_bucket_0,
    );
}
