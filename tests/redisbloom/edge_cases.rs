//! The builder's ranges and the edge cases: the empty item, the smallest capacity, bucket
//! size 255, expansion 32768, max_expansions 1, filters loaded with more sub-filters than the
//! default limit, SCANDUMP's 16 MiB pieces, growth past 4 GiB, max_iterations 65535.

use crate::serial_model;

use crate::common::{seed, Rng};
use crate::serial_model::{MErr, Model};
use atomic_cuckoo::redisbloom::{RedisCuckooFilter, RedisInsertError, ReserveError};

fn map_err(e: RedisInsertError) -> MErr {
    match e {
        RedisInsertError::Full => MErr::Full,
        RedisInsertError::MaxExpansionsReached => MErr::MaxExp,
        other => panic!("unexpected {other:?}"),
    }
}

fn load(chunks: &[(u64, Vec<u8>)]) -> RedisCuckooFilter {
    RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice()))).unwrap()
}

fn build(cap: u64, bs: u64, mi: u64, exp: u64, me: u64) -> Result<RedisCuckooFilter, ReserveError> {
    RedisCuckooFilter::builder()
        .capacity(cap)
        .bucket_size(bs)
        .max_iterations(mi)
        .expansion(exp)
        .max_expansions(me)
        .build()
}

#[test]
fn builder_ranges_are_redis_8s() {
    assert!(build(2, 1, 20, 1, 32).is_ok());
    assert!(build(1, 1, 20, 1, 32).is_err());
    assert!(build(510, 255, 20, 1, 32).is_ok());
    assert!(build(509, 255, 20, 1, 32).is_err());
    assert!(build(1000, 0, 20, 1, 32).is_err());
    assert!(build(1000, 256, 20, 1, 32).is_err());
    assert!(build(1000, 2, 0, 1, 32).is_err());
    assert!(build(1000, 2, 65535, 1, 32).is_ok());
    assert!(build(1000, 2, 65536, 1, 32).is_err());
    assert!(build(1000, 2, 20, 0, 32).is_ok());
    assert!(build(1000, 2, 20, 32768, 32).is_ok());
    assert!(build(1000, 2, 20, 32769, 32).is_err());
    assert!(build(1000, 2, 20, u64::MAX, 32).is_err());
    assert!(build(1000, 2, 20, 1, 0).is_err());
    assert!(build(1000, 2, 20, 1, 1).is_ok());
    assert!(build(1000, 2, 20, 1, 65536).is_ok());
    assert!(build(1000, 2, 20, 1, 65537).is_err());
    assert!(build((1 << 30) + 1, 2, 20, 1, 32).is_err());
    assert!(build(u64::MAX, 2, 20, 1, 32).is_err());
    assert!(build(u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX).is_err());
    // 2^30 with bucket size 2: 2^29 buckets (1 GiB, zeroed lazily).
    let f = build(1 << 30, 2, 20, 1, 32).unwrap();
    assert_eq!(f.info().buckets, 1 << 29);
    assert_eq!(f.info().size, 40 + 16 + (1 << 30));
}

#[test]
fn the_empty_item_is_an_item() {
    let f = build(4, 1, 20, 1, 32).unwrap();
    assert!(!f.contains(""));
    f.insert("").unwrap();
    assert!(f.contains(""));
    assert_eq!(f.count(""), 1);
    assert_eq!(f.insert_unique(""), Ok(false));
    // H("") = 0, fp 1: bucket 0, alternate 0x5bd1e995 % 4 = 1.
    assert_eq!(f.scandump()[1].1, [1, 0, 0, 0]);
    assert!(f.remove(""));
    assert!(!f.remove(""));
    assert!(!f.contains(""));
}

/// max_expansions 1: the only sub-filter already reaches the limit, so Redis refuses every
/// add with "Maximum expansions reached" (checked before the item).
#[test]
fn max_expansions_one_refuses_every_insert_like_redis() {
    let f = build(100, 2, 20, 1, 1).unwrap();
    assert_eq!(f.insert("a"), Err(RedisInsertError::MaxExpansionsReached));
    assert_eq!(
        f.insert_unique("a"),
        Err(RedisInsertError::MaxExpansionsReached)
    );
    assert_eq!(
        f.insert_many(["a"]),
        Err(RedisInsertError::MaxExpansionsReached)
    );
    assert_eq!(f.info().items, 0);
    let mut m = Model::reserve(100, 2, 20, 1, 1);
    assert_eq!(m.insert(b"a"), Err(MErr::MaxExp));
}

/// Expansion 32768: sub-filter 1 has 32768 times the buckets; sub-filter 2 would pass 4 GiB
/// and is refused cleanly, changing nothing.
#[test]
fn expansion_32768_grows_then_refuses_past_4_gib_cleanly() {
    let f = build(4, 2, 20, 32768, 32).unwrap();
    let mut m = Model::reserve(4, 2, 20, 32768, 32);
    let mut i = 0u64;
    while f.info().filters < 2 {
        let it = i.to_le_bytes();
        assert_eq!(f.insert(it).map_err(map_err), m.insert(&it));
        i += 1;
    }
    let chunks = f.scandump();
    let lens: Vec<usize> = chunks.iter().map(|c| c.1.len()).collect();
    assert_eq!(lens, [38, 4, 2 * 32768 * 2]);
    assert_eq!(chunks, m.scandump());
    assert_eq!(f.info().size, 40 + 32 + 4 + 131_072);
    // A loaded filter of the same geometry with every slot taken: the next insert needs
    // sub-filter 2 (2 × 2^30 buckets × 4 bytes = 8 GiB).
    let mut head = chunks[0].1.clone();
    head[32..34].copy_from_slice(&4u16.to_le_bytes());
    let sub0 = vec![0x11u8; 8];
    let sub1 = vec![0x22u8; 2 * 32768 * 4];
    head[0..8].copy_from_slice(&((sub0.len() + sub1.len()) as u64).to_le_bytes());
    let full = vec![(1, head), (9, sub0), (9 + 262_144, sub1)];
    let g = load(&full);
    let before = g.scandump();
    match g.insert("x") {
        Err(RedisInsertError::GrowthFailed { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(g.scandump(), before, "a refused growth changed bytes");
    assert_eq!(g.info().filters, 2);
    assert_eq!(
        g.insert_many(["x", "y"]).map(|_| ()).unwrap_err(),
        RedisInsertError::GrowthFailed { bytes: 8 << 30 }
    );
    assert_eq!(g.scandump(), before);
}

/// Bucket size 255 with the smallest capacity (510: 2 buckets), kicks and growth.
#[test]
fn bucket_size_255_smallest_capacity_matches_the_model() {
    let s = seed("bucket_size_255_smallest_capacity");
    let mut rng = Rng::new(s);
    for exp in [0u64, 1, 2] {
        let f = build(510, 255, 3, exp, 4).unwrap();
        let mut m = Model::reserve(510, 255, 3, exp, 4);
        let mut live: Vec<[u8; 8]> = Vec::new();
        for op in 0..6000 {
            if rng.below(4) != 0 || live.is_empty() {
                let it = rng.next_u64().to_le_bytes();
                let r = f.insert(it).map_err(map_err);
                assert_eq!(r, m.insert(&it), "exp {exp} op {op}");
                if r.is_ok() {
                    live.push(it);
                }
            } else {
                let it = live.swap_remove(rng.below(live.len() as u64) as usize);
                assert_eq!(f.remove(it), m.remove(&it));
            }
        }
        assert_eq!(f.scandump(), m.scandump(), "exp {exp}");
    }
}

/// max_iterations 65535 (the u16 edge of Redis's loop counter) on a full table.
#[test]
fn max_iterations_65535_rolls_back_exactly() {
    for bs in [1u64, 2, 3] {
        let f = build(8 * bs, bs, 65535, 0, 32).unwrap();
        let mut m = Model::reserve(8 * bs, bs, 65535, 0, 32);
        let mut fails = 0;
        let mut i = 0u64;
        while fails < 5 {
            let it = i.to_le_bytes();
            let before = f.scandump();
            let r = f.insert(it).map_err(map_err);
            assert_eq!(r, m.insert(&it), "bs {bs} #{i}");
            if r.is_err() {
                fails += 1;
                assert_eq!(f.scandump(), before);
            }
            i += 1;
        }
        assert_eq!(f.scandump(), m.scandump());
    }
}

/// A filter of `n` sub-filters (nb 2, bs 1, expansion 1) made by the model, loaded, then
/// driven by random operations; the loaded filter has the default limit of 32 sub-filters.
fn loaded_many(n: usize, s: u64) {
    let mut rng = Rng::new(s);
    let mut m = Model::reserve(2, 1, 5, 1, 100_000);
    let mut live: Vec<[u8; 8]> = Vec::new();
    while m.subs.len() < n {
        let it = rng.next_u64().to_le_bytes();
        m.insert(&it).unwrap();
        live.push(it);
    }
    m.max_exp = 32;
    let f = load(&m.scandump());
    assert_eq!(f.info().filters, n as u64);
    assert_eq!(f.scandump(), m.scandump());
    for it in &live {
        assert!(f.contains(it));
    }
    assert_eq!(f.insert("new"), Err(RedisInsertError::MaxExpansionsReached));
    assert_eq!(
        f.insert_many(["new"]),
        Err(RedisInsertError::MaxExpansionsReached)
    );
    for op in 0..3000 {
        let ctx = format!("n {n} seed {s} op {op}");
        match rng.below(5) {
            0 | 1 if !live.is_empty() => {
                let it = live.swap_remove(rng.below(live.len() as u64) as usize);
                assert_eq!(f.remove(it), m.remove(&it), "{ctx}");
            }
            2 => {
                let it = rng.next_u64().to_le_bytes();
                let r = f.insert(it).map_err(map_err);
                assert_eq!(r, m.insert(&it), "{ctx}");
                if r.is_ok() {
                    live.push(it);
                }
            }
            3 => {
                f.compact();
                m.compact(true);
            }
            _ => {
                let it = rng.next_u64().to_le_bytes();
                assert_eq!(f.contains(it), m.contains(&it), "{ctx}");
            }
        }
        assert_eq!(f.scandump(), m.scandump(), "{ctx}");
        assert_eq!(f.info().filters, m.subs.len() as u64, "{ctx}");
    }
}

#[test]
fn a_loaded_filter_with_40_sub_filters_works_like_redis() {
    loaded_many(40, seed("loaded_40"));
}

#[test]
fn a_loaded_filter_with_100_sub_filters_works_like_redis() {
    loaded_many(100, seed("loaded_100"));
}

/// SCANDUMP's 16 MiB pieces, after a small first sub-filter (so the pieces start mid-stream),
/// against the model; and reloading them.
#[test]
fn scandump_splits_a_32_mib_second_sub_filter_like_redis() {
    // nb 1024, bs 1, expansion 32768: sub-filter 1 is 2^25 bytes.
    let f = build(1024, 1, 20, 32768, 32).unwrap();
    let mut m = Model::reserve(1024, 1, 20, 32768, 32);
    let mut i = 0u64;
    while m.subs.len() < 2 {
        let it = i.to_le_bytes();
        assert_eq!(f.insert(it).map_err(map_err), m.insert(&it));
        i += 1;
    }
    for j in 0..1000u64 {
        let it = (1_000_000 + j).to_le_bytes();
        assert_eq!(f.insert(it).map_err(map_err), m.insert(&it));
    }
    let chunks = f.scandump();
    let shape: Vec<(u64, usize)> = chunks.iter().map(|(i, d)| (*i, d.len())).collect();
    assert_eq!(
        shape,
        [
            (1, 38),
            (1025, 1024),
            (1025 + (16 << 20), 16 << 20),
            (1025 + (32 << 20), 16 << 20)
        ]
    );
    assert!(chunks == m.scandump(), "bytes differ from the model");
    let g = load(&chunks);
    assert!(g.scandump() == chunks);
    assert_eq!(g.info().size, 40 + 32 + 1024 + (32 << 20));
}

/// A 24 MiB sub-filter (bucket size 3) comes as 16 MiB + 8 MiB.
#[test]
fn scandump_splits_24_mib_into_16_and_8() {
    let f = build(3 << 23, 3, 20, 1, 32).unwrap();
    f.insert("a").unwrap();
    let chunks = f.scandump();
    let shape: Vec<(u64, usize)> = chunks.iter().map(|(i, d)| (*i, d.len())).collect();
    assert_eq!(
        shape,
        [
            (1, 38),
            (1 + (16 << 20), 16 << 20),
            (1 + (24 << 20), 8 << 20)
        ]
    );
    let mut m = Model::reserve(3 << 23, 3, 20, 1, 32);
    m.insert(b"a").unwrap();
    assert!(chunks == m.scandump());
}

/// CF.COUNT's double count where both buckets are one (REDISBLOOM.md §6), through every
/// sub-filter, against the model.
#[test]
fn count_double_counts_in_every_sub_filter() {
    let f = build(4, 2, 20, 1, 32).unwrap();
    let mut m = Model::reserve(4, 2, 20, 1, 32);
    for _ in 0..9 {
        assert_eq!(f.insert("b").map_err(map_err), m.insert(b"b"));
        assert_eq!(f.count("b"), m.count(b"b"));
    }
    assert!(f.info().filters >= 3);
    assert_eq!(f.count("b"), 18);
    assert_eq!(f.scandump(), m.scandump());
}

/// The most sub-filters a header allows (65535; one-bucket, one-slot sub-filters), loaded from
/// 65535 data chunks and from a payload, then looked up, dumped, deleted from and compacted
/// like the model.
#[test]
fn a_loaded_filter_with_65535_sub_filters_works_like_redis() {
    let n = 65_535usize;
    let mut subs = vec![vec![0u8]; n];
    subs[0][0] = 7;
    subs[n / 2][0] = 9;
    subs[n - 1][0] = 11;
    let mut m = Model {
        nb: 1,
        bs: 1,
        max_iter: 20,
        expansion: 1,
        max_exp: 32,
        subs,
        items: 3,
        deletes: 0,
    };
    let chunks = m.scandump();
    assert_eq!(chunks.len(), n + 1);
    let f = load(&chunks);
    assert_eq!(f.info().filters, n as u64);
    assert_eq!(f.info().size, 40 + 17 * n as u64);
    assert!(f.scandump() == chunks);
    let p = f.dump_payload(atomic_cuckoo::redisbloom::PORTABLE_RDB_VERSION);
    let g = RedisCuckooFilter::from_dump_payload(&p).unwrap();
    assert!(g.scandump() == chunks);
    assert_eq!(f.insert("x"), Err(RedisInsertError::MaxExpansionsReached));
    // Items whose fingerprint is 7, 9 and 11 (every item is in bucket 0 of a 1-bucket filter).
    let with_fp = |fp: u8| {
        (0u64..)
            .map(|i| i.to_le_bytes())
            .find(|it| serial_model::params(it).0 == fp)
            .unwrap()
    };
    for fp in [7u8, 9, 11] {
        assert!(f.contains(with_fp(fp)));
        assert_eq!(f.count(with_fp(fp)), m.count(&with_fp(fp)));
    }
    // Delete fp 11 (in the last sub-filter): 1 delete > 0.2, auto-compaction (cont = false)
    // drops every empty sub-filter from the newest down, moving 9 into sub-filter 1 (0 is
    // full) on the way, and stops at sub-filter 1, which cannot move.
    assert_eq!(f.remove(with_fp(11)), m.remove(&with_fp(11)));
    assert_eq!(f.info().filters, m.subs.len() as u64);
    assert!(f.scandump() == m.scandump());
    f.compact();
    m.compact(true);
    assert_eq!(f.info().filters, m.subs.len() as u64);
    assert!(f.scandump() == m.scandump());
    assert_eq!(f.info().filters, 2);
    // Below 32 sub-filters, inserts work again.
    assert_eq!(f.insert("x").map_err(map_err), m.insert(b"x"));
    assert!(f.scandump() == m.scandump());
}
