//! Single-threaded: the one-word bucket reads (`bucket_word`, two words for a bucket
//! of 3, 5, 6 or 7 slots that straddles a word boundary) and the one-pass lookup over every
//! live sub-filter (newest first, validated at the end; more than 8 sub-filters take the
//! one-at-a-time path) answer exactly as an independent serial model of RedisBloom
//! (`serial_model::Model`): `contains`, `count`, `contains_many` of *every* probe item after
//! every operation, `remove`, `insert`, and the bytes (SCANDUMP).
//!
//! Corners: bucket sizes 1..=9, 17, 255; sub-filters of 1 (loaded from a dump), 2 and 4
//! buckets, so that the last bucket ends in a partly used word; expansions 0, 1, 2 and 4;
//! filters of exactly 7, 8, 9 and more than 9 sub-filters.

use crate::common::{seed, Rng};
use crate::serial_model::{params, MErr, Model};
use atomic_cuckoo::redisbloom::{RedisCuckooFilter, RedisInsertError};

const BUCKET_SIZES: [u64; 11] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 255];

fn map_err(e: RedisInsertError) -> MErr {
    match e {
        RedisInsertError::Full => MErr::Full,
        RedisInsertError::MaxExpansionsReached => MErr::MaxExp,
        other => panic!("unexpected {other:?}"),
    }
}

/// `n` distinct items (as bytes).
fn pool(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    let salt = rng.next_u64();
    (0..n)
        .map(|i| format!("w{salt:x}-{i}").into_bytes())
        .collect()
}

/// A filter and a model in the same state: built with `reserve`, or (`nb == 1`, which
/// `CF.RESERVE` cannot make) loaded from the model's SCANDUMP after one insert.
fn make(
    nb: u64,
    bs: u64,
    exp: u64,
    max_iter: u64,
    max_exp: u64,
    first: &[u8],
) -> (RedisCuckooFilter, Model) {
    if nb == 1 {
        let mut m = Model::reserve(bs, bs, max_iter, exp, 32);
        assert_eq!(m.nb, 1);
        m.insert(first).unwrap();
        let chunks = m.scandump();
        let f = RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice())))
            .unwrap_or_else(|e| panic!("loading a 1-bucket filter: {e:?}"));
        (f, m)
    } else {
        let f = RedisCuckooFilter::builder()
            .capacity(nb * bs)
            .bucket_size(bs)
            .max_iterations(max_iter)
            .expansion(exp)
            .max_expansions(max_exp)
            .build()
            .unwrap();
        let m = Model::reserve(nb * bs, bs, max_iter, exp, max_exp);
        assert_eq!(m.nb, nb);
        assert_eq!(f.info().buckets, nb);
        (f, m)
    }
}

/// Every probe's `contains`, `count`, and `contains_many` of all of them, against the model;
/// and the bytes.
fn check_all(f: &RedisCuckooFilter, m: &Model, probes: &[Vec<u8>], ctx: &str) {
    let mut many = Vec::new();
    f.contains_many(probes, &mut many);
    assert_eq!(many.len(), probes.len(), "{ctx}: contains_many length");
    for (i, it) in probes.iter().enumerate() {
        let want = m.contains(it);
        let got = f.contains(it);
        if got != want {
            let (fp, h1, h2) = params(it);
            panic!(
                "{ctx}: contains({it:02x?}) = {got}, model {want} (fp {fp}, h1 {h1:#x}, \
                 h2 {h2:#x}, {} sub-filters, nb {}, bs {})",
                m.subs.len(),
                m.nb,
                m.bs
            );
        }
        assert_eq!(many[i], want, "{ctx}: contains_many[{i}] ({it:02x?})");
        assert_eq!(f.count(it), m.count(it), "{ctx}: count({it:02x?})");
    }
    assert_eq!(f.scandump(), m.scandump(), "{ctx}: SCANDUMP");
    let info = f.info();
    assert_eq!(info.filters, m.subs.len() as u64, "{ctx}: filters");
    assert_eq!(info.items, m.items, "{ctx}: items");
}

/// Largest `max_expansions` that keeps every sub-filter under 64 KiB.
fn max_exp_for(nb: u64, bs: u64, exp: u64) -> u64 {
    if exp <= 1 {
        return 40;
    }
    let mut n = 1u64;
    while n < 40 && nb * exp.pow(n as u32) * bs <= 1 << 16 {
        n += 1;
    }
    n
}

/// A random sequence of inserts, unique inserts, removes (which may auto-compact) and
/// compactions; everything checked after every operation.
fn run(rng: &mut Rng, nb: u64, bs: u64, exp: u64, ops: usize, ctx0: &str) {
    let max_iter = 1 + rng.below(6);
    let max_exp = max_exp_for(nb, bs, exp);
    let items = pool(rng, ((nb * bs) as usize * 4).clamp(8, 40));
    let probes: Vec<Vec<u8>> = items.iter().cloned().chain(pool(rng, 24)).collect();
    let (f, mut m) = make(nb, bs, exp, max_iter, max_exp, &items[0]);
    let ctx0 = format!("{ctx0} nb {nb} bs {bs} exp {exp} max_iter {max_iter}");
    check_all(&f, &m, &probes, &ctx0);
    let pick = |rng: &mut Rng| items[rng.below(items.len() as u64) as usize].clone();
    for op in 0..ops {
        let ctx = format!("{ctx0} op {op}");
        let r = rng.below(100);
        // Fill first, then churn.
        let insert_share = if op < ops / 2 { 60 } else { 40 };
        if r < insert_share {
            let it = pick(rng);
            assert_eq!(
                f.insert(&it).map_err(map_err),
                m.insert(&it),
                "{ctx}: insert {it:02x?}"
            );
        } else if r < insert_share + 10 {
            let it = pick(rng);
            assert_eq!(
                f.insert_unique(&it).map_err(map_err),
                m.insert_unique(&it),
                "{ctx}: insert_unique {it:02x?}"
            );
        } else if r < 95 {
            let it = pick(rng);
            assert_eq!(f.remove(&it), m.remove(&it), "{ctx}: remove {it:02x?}");
        } else {
            f.compact();
            m.compact(true);
        }
        check_all(&f, &m, &probes, &ctx);
    }
}

#[test]
fn every_bucket_size_tiny_sub_filters_every_expansion() {
    let seed = seed("every_bucket_size_tiny_sub_filters_every_expansion");
    let mut rng = Rng::new(seed);
    for bs in BUCKET_SIZES {
        for nb in [1u64, 2, 4] {
            for exp in [0u64, 1, 2, 4] {
                let ops = if bs > 9 { 40 } else { 120 };
                run(&mut rng, nb, bs, exp, ops, &format!("seed {seed}"));
            }
        }
    }
}

/// Bucket sizes whose buckets straddle words, in sub-filters of 8..=32 buckets: every bucket
/// position in a word occurs.
#[test]
fn straddling_buckets_in_larger_sub_filters() {
    let seed = seed("straddling_buckets_in_larger_sub_filters");
    let mut rng = Rng::new(seed);
    for bs in [3u64, 5, 6, 7] {
        for nb in [8u64, 16, 32] {
            for exp in [0u64, 1, 2] {
                run(&mut rng, nb, bs, exp, 150, &format!("seed {seed}"));
            }
        }
    }
}

/// Grows a filter one sub-filter at a time (inserts of new items), checking every probe at
/// each count of sub-filters from 1 to past 9 (the one-pass lookup reads up to 8; 9 and more
/// take the one-at-a-time path); then removes everything again, which compacts and drops
/// sub-filters back down through 9, 8, 7.
#[test]
fn sub_filter_counts_around_the_one_pass_limit() {
    let seed = seed("sub_filter_counts_around_the_one_pass_limit");
    let mut rng = Rng::new(seed);
    for bs in BUCKET_SIZES {
        for nb in [1u64, 2] {
            let max_iter = 1 + rng.below(3);
            let items = pool(&mut rng, 400);
            let probes: Vec<Vec<u8>> = items.iter().cloned().chain(pool(&mut rng, 64)).collect();
            let (f, mut m) = make(nb, bs, 1, max_iter, 64, &items[0]);
            let ctx0 = format!("seed {seed} bs {bs} nb {nb} max_iter {max_iter}");
            // The 1-bucket filter was loaded holding items[0].
            let mut inserted = if nb == 1 {
                vec![items[0].clone()]
            } else {
                Vec::new()
            };
            let mut seen_counts = std::collections::BTreeSet::new();
            // Items with many copies make growth cheap for big buckets: insert each item a
            // few times.
            'fill: for it in items.iter().skip(1).cycle().take(20_000) {
                for _ in 0..(bs as usize).div_ceil(4).min(8) {
                    if m.subs.len() >= 12 {
                        break 'fill;
                    }
                    let before = m.subs.len();
                    assert_eq!(
                        f.insert(it).map_err(map_err),
                        m.insert(it),
                        "{ctx0}: insert"
                    );
                    inserted.push(it.clone());
                    if m.subs.len() != before {
                        seen_counts.insert(m.subs.len());
                        check_all(&f, &m, &probes, &format!("{ctx0} at {} subs", m.subs.len()));
                    }
                }
            }
            for n in 7..=10 {
                assert!(
                    seen_counts.contains(&n),
                    "{ctx0}: never had {n} sub-filters"
                );
            }
            check_all(&f, &m, &probes, &format!("{ctx0} full"));
            // Remove in a random order; auto-compaction drops sub-filters.
            let mut down = std::collections::BTreeSet::new();
            while !inserted.is_empty() {
                let k = rng.below(inserted.len() as u64) as usize;
                let it = inserted.swap_remove(k);
                let before = m.subs.len();
                assert_eq!(f.remove(&it), m.remove(&it), "{ctx0}: remove");
                if m.subs.len() != before || rng.below(8) == 0 {
                    down.insert(m.subs.len());
                    check_all(
                        &f,
                        &m,
                        &probes,
                        &format!("{ctx0} down at {} subs", m.subs.len()),
                    );
                }
            }
            check_all(&f, &m, &probes, &format!("{ctx0} emptied"));
            assert!(
                down.iter().any(|&n| n > 8) && down.iter().any(|&n| n <= 8),
                "{ctx0}: removes did not go from past 8 sub-filters to 8 or fewer: {down:?}"
            );
        }
    }
}

/// Fingerprints placed by hand in every slot of a bucket and its neighbours: a bucket word
/// must not leak a neighbour's bytes (below or above it, in the same or the next word), and
/// must see its own bytes in both words when it straddles.
#[test]
fn neighbour_bytes_never_leak_into_a_bucket_word() {
    for bs in [1u64, 2, 3, 4, 5, 6, 7, 8, 9] {
        for nb in [1u64, 2, 4, 8] {
            // Items grouped by primary bucket (and not self-paired, so that `count` is plain).
            let m0 = Model::reserve(nb * bs, bs, 1, 0, 1);
            let nb_eff = m0.nb;
            let mut by_bucket: Vec<Vec<Vec<u8>>> = vec![Vec::new(); nb_eff as usize];
            for i in 0..20_000u32 {
                let it = format!("n{i}").into_bytes();
                let (_, h1, _) = params(&it);
                let b = (h1 % nb_eff) as usize;
                if by_bucket[b].len() < 64 {
                    by_bucket[b].push(it);
                }
            }
            for target in 0..nb_eff as usize {
                // Fill every bucket except `target` completely, through the model's bytes,
                // then load: the target bucket's items must read as absent unless their
                // fingerprint is in their own buckets.
                let mut m = Model::reserve(nb * bs, bs, 1, 0, 1);
                let mut v = 1u8;
                for (i, byte) in m.subs[0].iter_mut().enumerate() {
                    if i / bs as usize != target {
                        *byte = v;
                        v = if v == 255 { 1 } else { v + 1 };
                    }
                }
                m.items = m.subs[0].iter().filter(|&&b| b != 0).count() as u64;
                if m.items == 0 {
                    continue; // one bucket: nothing around it
                }
                let chunks = m.scandump();
                let f =
                    RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice())))
                        .unwrap();
                let ctx = format!("bs {bs} nb {nb_eff} target {target}");
                for it in by_bucket.iter().flatten() {
                    assert_eq!(f.contains(it), m.contains(it), "{ctx}: contains {it:02x?}");
                    assert_eq!(f.count(it), m.count(it), "{ctx}: count {it:02x?}");
                }
                // Now fill the target bucket's slots one at a time with the fingerprints of
                // items whose primary bucket it is (straddling buckets: the high slots are in
                // the next word).
                let base = target * bs as usize;
                for (slot, it) in by_bucket[target].iter().take(bs as usize).enumerate() {
                    let (fp, _, _) = params(it);
                    m.subs[0][base + slot] = fp;
                    m.items += 1;
                    let chunks = m.scandump();
                    let f = RedisCuckooFilter::from_chunks(
                        chunks.iter().map(|(i, d)| (*i, d.as_slice())),
                    )
                    .unwrap();
                    for probe in by_bucket.iter().flatten() {
                        assert_eq!(
                            f.contains(probe),
                            m.contains(probe),
                            "{ctx} slot {slot}: contains {probe:02x?}"
                        );
                        assert_eq!(f.count(probe), m.count(probe), "{ctx} slot {slot}: count");
                    }
                    assert!(f.contains(it), "{ctx}: slot {slot} of the target not seen");
                    // And remove it again through the filter: the right slot is cleared.
                    assert!(f.remove(it), "{ctx}: remove from slot {slot}");
                    let mut mm = m.clone();
                    assert!(mm.remove(it));
                    assert_eq!(
                        f.scandump(),
                        mm.scandump(),
                        "{ctx}: remove from slot {slot}"
                    );
                }
            }
        }
    }
}
