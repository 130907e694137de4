//! Batches: `insert_many`, `insert_many_unique` and `contains_many` hash 32 items at a time and
//! touch their buckets before handling them (`in_batches`). Their answers and the
//! filter they leave must equal per-item calls on a twin filter and the serial model, for
//! 0, 1, 31, 32, 33, 64, 65 and 1000 items, with duplicates inside a batch and across a batch
//! boundary; the sub-filter limit is checked once before the first item; a `GrowthFailed` in the
//! middle of a batch leaves exactly the items before it in (and none after it, even in the same
//! batch of 32).

use crate::common::{seed, Rng};
use crate::serial_model::{MErr, Model};
use atomic_cuckoo::redisbloom::{RedisCuckooFilter, RedisInsertError};

const LENGTHS: [usize; 8] = [0, 1, 31, 32, 33, 64, 65, 1000];

fn build(cap: u64, bs: u64, exp: u64, max_iter: u64, max_exp: u64) -> RedisCuckooFilter {
    RedisCuckooFilter::builder()
        .capacity(cap)
        .bucket_size(bs)
        .expansion(exp)
        .max_iterations(max_iter)
        .max_expansions(max_exp)
        .build()
        .unwrap()
}

fn map_err(e: RedisInsertError) -> MErr {
    match e {
        RedisInsertError::Full => MErr::Full,
        RedisInsertError::MaxExpansionsReached => MErr::MaxExp,
        other => panic!("unexpected {other:?}"),
    }
}

/// `n` items drawn from a pool of `distinct` (so duplicates occur inside a batch).
fn batch(rng: &mut Rng, n: usize, distinct: u64) -> Vec<Vec<u8>> {
    let salt = rng.next_u64() % 1000;
    (0..n)
        .map(|_| format!("b{salt}-{}", rng.below(distinct)).into_bytes())
        .collect()
}

/// `insert_many` (and `_unique`) against per-item calls on a twin and against the model.
#[test]
fn batched_inserts_equal_per_item_inserts() {
    let seed = seed("batched_inserts_equal_per_item_inserts");
    let mut rng = Rng::new(seed);
    for bs in [1u64, 2, 3, 4, 7, 8, 9] {
        for exp in [0u64, 1, 2] {
            for &n in &LENGTHS {
                let cap = [2 * bs, 8 * bs, 64 * bs][rng.below(3) as usize];
                let max_iter = 1 + rng.below(8);
                // No limit in the way: per-item inserts check it every time, a batch once.
                let max_exp = 65_536;
                let ctx = format!("seed {seed} bs {bs} exp {exp} cap {cap} n {n}");
                let (a, b) = (
                    build(cap, bs, exp, max_iter, max_exp),
                    build(cap, bs, exp, max_iter, max_exp),
                );
                let mut m = Model::reserve(cap, bs, max_iter, exp, max_exp);
                // A few rounds: insert_many, then insert_many_unique, over overlapping pools.
                for round in 0..3 {
                    let ctx = format!("{ctx} round {round}");
                    // Expansion 2 overflows after ~60 sub-filters: few duplicates there.
                    let distinct = if exp == 2 {
                        n as u64 / 2 + 1 + rng.below(n as u64 + 1)
                    } else {
                        1 + rng.below(2 * n as u64 + 1)
                    };
                    let items = batch(&mut rng, n, distinct);
                    let got = a.insert_many(&items);
                    let want_m = m.insert_many(&items);
                    assert_eq!(
                        got.clone().map_err(map_err),
                        want_m,
                        "{ctx}: insert_many vs model"
                    );
                    let twin: Vec<bool> = items
                        .iter()
                        .map(|it| match b.insert(it) {
                            Ok(()) => true,
                            Err(RedisInsertError::Full) => false,
                            Err(e) => panic!("{ctx}: {e:?}"),
                        })
                        .collect();
                    assert_eq!(got.unwrap(), twin, "{ctx}: insert_many vs insert");
                    assert_eq!(a.scandump(), b.scandump(), "{ctx}: bytes after insert_many");
                    assert_eq!(a.scandump(), m.scandump(), "{ctx}: bytes vs model");

                    let items = batch(&mut rng, n, distinct);
                    let got = a.insert_many_unique(&items);
                    let want_m = m.insert_many_unique(&items);
                    assert_eq!(
                        got.clone().map_err(map_err),
                        want_m,
                        "{ctx}: insert_many_unique vs model"
                    );
                    let twin: Vec<Option<bool>> = items
                        .iter()
                        .map(|it| match b.insert_unique(it) {
                            Ok(stored) => Some(stored),
                            Err(RedisInsertError::Full) => None,
                            Err(e) => panic!("{ctx}: {e:?}"),
                        })
                        .collect();
                    assert_eq!(
                        got.unwrap(),
                        twin,
                        "{ctx}: insert_many_unique vs insert_unique"
                    );
                    assert_eq!(a.scandump(), m.scandump(), "{ctx}: bytes after unique");
                    assert_eq!(a.scandump(), b.scandump(), "{ctx}: twin after unique");

                    // contains_many over stored and absent items, past batch boundaries.
                    let mut probe = batch(&mut rng, n, distinct * 2);
                    probe.extend(items.iter().take(40).cloned());
                    let mut found = vec![true; 7]; // must be cleared
                    a.contains_many(&probe, &mut found);
                    let want: Vec<bool> = probe.iter().map(|it| m.contains(it)).collect();
                    assert_eq!(found, want, "{ctx}: contains_many vs model");
                    let each: Vec<bool> = probe.iter().map(|it| a.contains(it)).collect();
                    assert_eq!(found, each, "{ctx}: contains_many vs contains");
                }
            }
        }
    }
}

/// The same item twice (or 40 times) in one batch, and across the 32-item boundary.
#[test]
fn duplicates_inside_one_batch() {
    for bs in [1u64, 2, 4, 8] {
        for at in [0usize, 1, 30, 31, 32, 33, 63, 64] {
            let f = build(1024, bs, 1, 20, 64);
            let mut items: Vec<String> = (0..70).map(|i| format!("d{i}")).collect();
            items[at] = "dup".to_string();
            items.insert(at + 1, "dup".to_string());
            let got = f.insert_many_unique(&items).unwrap();
            assert_eq!(got[at], Some(true), "bs {bs} at {at}");
            assert_eq!(got[at + 1], Some(false), "bs {bs} at {at}: stored twice");
            assert_eq!(f.count("dup"), 1, "bs {bs} at {at}");
            // Far apart: first in one batch, again in the next one.
            let g = build(1024, bs, 1, 20, 64);
            let mut far: Vec<String> = (0..70).map(|i| format!("e{i}")).collect();
            far[at % 32] = "dup".to_string();
            far[at % 32 + 32] = "dup".to_string();
            let got = g.insert_many_unique(&far).unwrap();
            assert_eq!(
                (got[at % 32], got[at % 32 + 32]),
                (Some(true), Some(false)),
                "bs {bs} at {at}: across batches"
            );
            assert_eq!(g.count("dup"), 1);
            // insert_many stores each copy.
            let h = build(1024, bs, 1, 20, 64);
            let many = vec!["same"; 40];
            assert_eq!(h.insert_many(&many).unwrap(), vec![true; 40]);
            assert_eq!(h.count("same"), 40, "bs {bs}");
            assert_eq!(
                h.insert_many_unique(["same", "other", "other"]).unwrap(),
                vec![Some(false), Some(true), Some(false)]
            );
        }
    }
}

/// The sub-filter limit: checked once, before the first item (an empty batch at the limit is
/// an error too, as in the model); one call may grow past it; at the limit nothing changes.
#[test]
fn max_expansions_checked_before_the_first_item() {
    for &n in &LENGTHS {
        let f = build(4, 2, 1, 1, 2);
        let mut m = Model::reserve(4, 2, 1, 1, 2);
        let items: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let got = f.insert_many(&items).map_err(map_err);
        assert_eq!(
            got,
            m.insert_many(
                &items
                    .iter()
                    .map(|s| s.clone().into_bytes())
                    .collect::<Vec<_>>()
            ),
            "n {n}"
        );
        assert_eq!(f.scandump(), m.scandump(), "n {n}");
        if n >= 64 {
            assert!(f.info().filters > 2, "n {n}: one call grows past the limit");
        }
        // Now at or past the limit (when the first call grew): every batch call fails whole.
        if f.info().filters >= 2 {
            let before = f.scandump();
            for &k in &LENGTHS {
                let more: Vec<String> = (0..k).map(|i| format!("z{i}")).collect();
                assert_eq!(
                    f.insert_many(&more),
                    Err(RedisInsertError::MaxExpansionsReached),
                    "n {n} k {k}"
                );
                assert_eq!(
                    f.insert_many_unique(&more),
                    Err(RedisInsertError::MaxExpansionsReached),
                    "n {n} k {k}"
                );
                assert_eq!(
                    f.scandump(),
                    before,
                    "n {n} k {k}: a refused batch changed bytes"
                );
            }
        }
    }
}

/// A filter whose third sub-filter cannot be made: 2 buckets of 2, expansion 32768, so
/// sub-filter 1 has 65,536 buckets and sub-filter 2 would need 2^31 buckets × 2 bytes, past
/// RedisBloom's 32-bit offsets: `GrowthFailed`. One repeated item ("hot") fills its buckets
/// in sub-filters 0 and 1 and then needs sub-filter 2. Placed at positions around the batch
/// boundaries, the call must fail at that item with exactly the items before it stored and
/// nothing after it (even later items of the same batch of 32), like per-item inserts.
#[test]
fn growth_failed_in_the_middle_of_a_batch() {
    let make = || build(4, 2, 32_768, 1, 64);
    // How many copies of "hot" fit, one by one.
    let probe = make();
    let mut fit = 0usize;
    let err = loop {
        match probe.insert("hot") {
            Ok(()) => fit += 1,
            Err(e) => break e,
        }
        assert!(fit < 100, "hot never failed");
    };
    assert!(
        matches!(err, RedisInsertError::GrowthFailed { .. }),
        "expected GrowthFailed, got {err:?}"
    );
    assert_eq!(probe.info().filters, 2);
    let mut fail_at = std::collections::BTreeSet::new();
    for fillers in [0usize, 1, 20, 23, 24, 25, 26, 27, 28, 40, 55, 56, 57, 58] {
        let f = make();
        let twin = make();
        let mut items: Vec<String> = (0..fillers).map(|i| format!("fill{i}")).collect();
        items.extend(std::iter::repeat_n("hot".to_string(), fit + 8));
        items.extend((0..40).map(|i| format!("after{i}")));
        let got = f.insert_many(&items);
        // The twin, item by item, until the first error.
        let mut twin_err = None;
        for (i, it) in items.iter().enumerate() {
            if let Err(e) = twin.insert(it) {
                twin_err = Some(e);
                fail_at.insert(i);
                break;
            }
        }
        let ctx = format!("fillers {fillers}");
        assert!(
            matches!(got, Err(RedisInsertError::GrowthFailed { .. })),
            "{ctx}: {got:?}"
        );
        assert_eq!(got.err(), twin_err, "{ctx}: error");
        assert_eq!(f.scandump(), twin.scandump(), "{ctx}: bytes");
        assert_eq!(f.count("hot"), twin.count("hot"), "{ctx}: hot copies");
        for i in 0..40 {
            assert!(
                !f.contains(format!("after{i}")) || twin.contains(format!("after{i}")),
                "{ctx}: an item after the failure was stored"
            );
        }
        // Nothing changes on a second try either.
        let before = f.scandump();
        assert!(f.insert("hot").is_err());
        assert_eq!(f.scandump(), before, "{ctx}: a failed insert changed bytes");
    }
    // The failure landed on the last item of a batch, the first of the next, and inside one.
    println!("failing item indices: {fail_at:?}");
    assert!(
        fail_at.iter().any(|i| i % 32 == 31) && fail_at.iter().any(|i| i % 32 == 0 && *i > 0),
        "failure positions {fail_at:?} miss a batch boundary (fit {fit})"
    );
}

/// `contains_many` with every item type the API takes, and a reused results vector.
#[test]
fn contains_many_item_types_and_reuse() {
    let f = build(256, 4, 1, 20, 32);
    let owned: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
    let inserted = f.insert_many(owned.iter().step_by(2)).unwrap();
    assert!(inserted.iter().all(|&b| b));
    let mut out = vec![false; 500];
    for &n in &LENGTHS {
        let strs: Vec<&str> = owned.iter().cycle().take(n).map(String::as_str).collect();
        f.contains_many(&strs, &mut out);
        assert_eq!(out.len(), n);
        for (i, s) in strs.iter().enumerate() {
            assert_eq!(out[i], f.contains(s), "n {n} item {s}");
            if i % 2 == 0 && i < 100 {
                assert!(out[i], "n {n}: inserted {s} missed");
            }
        }
        let bytes: Vec<&[u8]> = strs.iter().map(|s| s.as_bytes()).collect();
        let mut again = Vec::new();
        f.contains_many(bytes, &mut again);
        assert_eq!(again, out, "n {n}: &[u8] items");
        // An iterator that is not a slice (no exact size hint).
        let mut filtered = Vec::new();
        f.contains_many(strs.iter().filter(|_| true), &mut filtered);
        assert_eq!(filtered, out, "n {n}: filtered iterator");
    }
}

/// What a caller passing `iter.by_ref()` sees after a `GrowthFailed`: the docs say the items
/// before the failing one are in; they say nothing of how far the iterator was advanced. The
/// batched version pulls up to 32 items ahead, so items after the failure are consumed but not
/// stored (before the change, iteration stopped right after the failing item). This only
/// records the behaviour.
#[test]
fn iterator_consumed_past_a_growth_failure() {
    let f = build(4, 2, 32_768, 1, 64);
    let items: Vec<String> = std::iter::repeat_n("hot".to_string(), 20)
        .chain((0..100).map(|i| format!("after{i}")))
        .collect();
    let mut it = items.iter();
    let got = f.insert_many(it.by_ref());
    assert!(matches!(got, Err(RedisInsertError::GrowthFailed { .. })));
    let stored = f.count("hot") as usize;
    let consumed = items.len() - it.len();
    println!("stored {stored} copies, failed at item {stored}, iterator consumed {consumed}");
    assert!(consumed > stored, "the failing item itself was consumed");
    // As `insert_many`'s docs say: at most the rest of one batch of 32 is taken but not stored.
    assert!(
        consumed <= (stored / 32 + 1) * 32,
        "consumed {consumed}, more than the failing item's batch"
    );
}
