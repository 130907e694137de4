//! `ShardedFilter`: the shard rule as `docs/SHARDED.md` writes it (checked against an
//! implementation written from the text), every item in its shard and only there, batches in
//! order, a shard's refusal stopping a batch where it happens, the false-positive rate of the
//! shards against one filter of the same capacity (and that the measurement catches a rule that
//! biases the shards), and threads sharing one filter.

use crate::common::{seed, Rng};
use crate::serial_model::murmur;
use atomic_cuckoo::redisbloom::{
    RedisCuckooFilter, RedisInsertError, ReserveError, ShardError, ShardedFilter, MAX_SHARDS,
};
use std::sync::Arc;

/// The documented rule, written from `docs/SHARDED.md`: the high 32 bits of MurmurHash64A,
/// times the shard count, shifted down by 32.
fn documented_shard(item: &[u8], shards: usize) -> usize {
    let high = murmur(item) >> 32;
    ((u128::from(high) * shards as u128) >> 32) as usize
}

fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

/// The vectors of `docs/SHARDED.md` (computed there with its Python reference), and random
/// items of every length from 0 to 40 bytes for several shard counts.
#[test]
fn the_shard_rule_is_the_documented_one() {
    for (item, hash, shards) in [
        (
            &b"user:42"[..],
            0xbcc2_6ebc_12a8_e649_u64,
            [0, 1, 2, 2, 11, 12_080],
        ),
        (b"a", 0x0717_17d2_d36b_6b11, [0, 0, 0, 0, 0, 453]),
        (b"", 0, [0, 0, 0, 0, 0, 0]),
    ] {
        assert_eq!(murmur(item), hash, "{item:?}");
        for (n, want) in [1, 2, 3, 4, 16, 16_384].into_iter().zip(shards) {
            let filter = ShardedFilter::reserve(4 * n as u64, n).unwrap();
            assert_eq!(filter.shard_of(item), want, "{item:?} among {n}");
        }
    }
    let mut rng = Rng::new(seed("the_shard_rule_is_the_documented_one"));
    for n in [1, 2, 3, 5, 7, 64, 1000, MAX_SHARDS] {
        let filter = ShardedFilter::reserve(4 * n as u64, n).unwrap();
        for _ in 0..2_000 {
            let len = rng.below(41) as usize;
            let item: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let shard = filter.shard_of(&item);
            assert_eq!(shard, documented_shard(&item, n), "{item:?} among {n}");
            assert!(shard < n);
        }
    }
}

/// Each inserted item is in its own shard (found there, and counted there), and the shards'
/// item counts add up to the items routed to each.
#[test]
fn each_item_lives_in_its_shard_only() {
    let filter = ShardedFilter::reserve(40_000, 5).unwrap();
    let all = items("in-its-shard-", 20_000);
    let mut routed = [0usize; 5];
    for item in &all {
        filter.insert(item).unwrap();
        routed[documented_shard(item, 5)] += 1;
    }
    for item in &all {
        let shard = documented_shard(item, 5);
        assert!(filter.contains(item));
        assert!(filter.shards()[shard].contains(item), "{item:?}");
        assert_eq!(filter.count(item), filter.shards()[shard].count(item));
    }
    for (shard, &n) in routed.iter().enumerate() {
        assert_eq!(filter.shards()[shard].len(), n, "shard {shard}");
        assert!(n > 3_000, "shard {shard} got only {n} of 20,000 items");
    }
    assert_eq!(filter.len(), all.len());
    for item in &all {
        assert!(filter.remove(item));
    }
    assert!(filter.is_empty());
}

/// `insert_many`, `insert_many_unique` and `contains_many` answer as per-item calls on a twin
/// filter do, in the items' order, and leave the same shards, byte for byte.
#[test]
fn batches_answer_as_single_calls_in_order() {
    for n in [0, 1, 31, 32, 33, 1000] {
        let batched = ShardedFilter::reserve(4_000, 3).unwrap();
        let single = ShardedFilter::reserve(4_000, 3).unwrap();
        // Duplicates inside the batch and across its boundaries.
        let list: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("b{}", i % 700).into_bytes())
            .collect();
        let stored = batched.insert_many(&list).unwrap();
        let one_by_one: Vec<bool> = list.iter().map(|x| single.insert(x).is_ok()).collect();
        assert_eq!(stored, one_by_one, "{n} items");
        let unique = batched.insert_many_unique(&list).unwrap();
        let unique_single: Vec<Option<bool>> =
            list.iter().map(|x| single.insert_unique(x).ok()).collect();
        assert_eq!(unique, unique_single, "{n} items");
        for (a, b) in batched.shards().iter().zip(single.shards()) {
            assert_eq!(a.scandump(), b.scandump(), "{n} items");
        }
        let probes: Vec<Vec<u8>> = (0..n + 50).map(|i| format!("b{i}").into_bytes()).collect();
        let mut found = vec![true; 3];
        batched.contains_many(&probes, &mut found);
        let want: Vec<bool> = probes.iter().map(|x| single.contains(x)).collect();
        assert_eq!(found, want, "{n} items");
    }
}

/// An item whose shard refuses it (its sub-filter limit reached) stops `insert_many` there:
/// the items before it are in, in every shard, and none after it.
#[test]
fn a_refusing_shard_stops_a_batch_at_its_item() {
    let open = || RedisCuckooFilter::reserve(1_000).unwrap();
    // A filter at its sub-filter limit: `max_expansions(1)` with its one sub-filter live.
    let closed = RedisCuckooFilter::builder()
        .capacity(1_000)
        .max_expansions(1)
        .build()
        .unwrap();
    let filter = ShardedFilter::from_shards(vec![open(), closed, open()]).unwrap();
    let all = items("refusing-", 200);
    let first_refused = all
        .iter()
        .position(|x| documented_shard(x, 3) == 1)
        .expect("an item of shard 1");
    assert!(
        first_refused > 0,
        "the test needs items before the refused one"
    );
    assert_eq!(
        filter.insert_many(&all),
        Err(RedisInsertError::MaxExpansionsReached)
    );
    for (i, item) in all.iter().enumerate() {
        assert_eq!(filter.contains(item), i < first_refused, "item {i}");
    }
    assert_eq!(filter.len(), first_refused);
    assert_eq!(
        filter.insert(&all[first_refused]),
        Err(RedisInsertError::MaxExpansionsReached)
    );
}

#[test]
fn shard_counts_and_capacities_out_of_range_are_refused() {
    for shards in [0, MAX_SHARDS + 1, usize::MAX] {
        assert_eq!(
            ShardedFilter::reserve(1 << 20, shards).unwrap_err(),
            ShardError::ShardCount { shards }
        );
    }
    assert!(ShardedFilter::from_shards(Vec::new()).is_err());
    assert_eq!(
        ShardedFilter::reserve(1 << 40, 2).unwrap_err(),
        ShardError::Reserve {
            shard_capacity: 1 << 39,
            error: ReserveError::CapacityTooLarge { capacity: 1 << 39 }
        }
    );
    let error = ShardedFilter::reserve(3, 3).unwrap_err();
    assert_eq!(
        error,
        ShardError::Reserve {
            shard_capacity: 1,
            error: ReserveError::CapacityTooSmall {
                capacity: 1,
                min: 4
            }
        }
    );
    let source = std::error::Error::source(&error).expect("the shard's error");
    assert_eq!(
        source.to_string(),
        "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"
    );
    let filter = ShardedFilter::reserve(4 * MAX_SHARDS as u64, MAX_SHARDS).unwrap();
    assert_eq!(filter.shards().len(), MAX_SHARDS);
    let debug = format!("{filter:?}");
    assert!(
        debug.starts_with("ShardedFilter { shards: 16384, items: 0"),
        "{debug}"
    );
}

/// False positives of shards whose items a rule picked, measured on items never inserted:
/// the rate of all, and of each shard (among the probes the rule sends to it).
struct Rates {
    all: f64,
    per_shard: Vec<f64>,
}

const FP_CAPACITY: u64 = 1 << 18;
const FP_SHARDS: usize = 4;

/// Fills `FP_SHARDS` filters of a quarter of `FP_CAPACITY` each to 80 % of it with the items
/// that `rule` (of the item's MurmurHash64A) sends to each, and measures their false positives.
fn rates_of_rule(rule: impl Fn(u64) -> usize) -> Rates {
    let shards: Vec<RedisCuckooFilter> = (0..FP_SHARDS)
        .map(|_| RedisCuckooFilter::reserve(FP_CAPACITY / FP_SHARDS as u64).unwrap())
        .collect();
    for item in items("fp-in-", (FP_CAPACITY * 8 / 10) as usize) {
        shards[rule(murmur(&item))].insert(&item).unwrap();
    }
    let mut hits = [0u64; FP_SHARDS];
    let mut asked = [0u64; FP_SHARDS];
    for item in items("fp-out-", 400_000) {
        let s = rule(murmur(&item));
        asked[s] += 1;
        hits[s] += u64::from(shards[s].contains(&item));
    }
    Rates {
        all: hits.iter().sum::<u64>() as f64 / asked.iter().sum::<u64>() as f64,
        per_shard: hits
            .iter()
            .zip(&asked)
            .map(|(&h, &n)| h as f64 / n.max(1) as f64)
            .collect(),
    }
}

/// The same measurement of one filter of the whole capacity.
fn unsharded_rate() -> f64 {
    let one = RedisCuckooFilter::reserve(FP_CAPACITY).unwrap();
    for item in items("fp-in-", (FP_CAPACITY * 8 / 10) as usize) {
        one.insert(&item).unwrap();
    }
    let probes = items("fp-out-", 400_000);
    probes.iter().filter(|x| one.contains(x)).count() as f64 / probes.len() as f64
}

/// Whether sharded rates agree with one filter's: within 10 % for all probes (about 5,000
/// false positives: 1.4 % of noise), 20 % for each shard's (about 1,250: 2.8 %).
fn agrees(rates: &Rates, one: f64) -> Result<(), String> {
    let off = |rate: f64| (rate / one - 1.0).abs();
    if off(rates.all) > 0.10 {
        return Err(format!("all: {:.4} against {one:.4}", rates.all));
    }
    for (s, &rate) in rates.per_shard.iter().enumerate() {
        if off(rate) > 0.20 {
            return Err(format!("shard {s}: {rate:.4} against {one:.4}"));
        }
    }
    Ok(())
}

/// The shards' false-positive rate, all together and each alone, is one filter's of the same
/// total capacity and load: the rule leaves each shard's buckets and fingerprints unbiased.
/// The same measurement refuses two biased rules: one from the low bits (which are also the
/// bucket's) and one from the fingerprint's residue.
#[test]
fn shards_keep_the_false_positive_rate_of_one_filter() {
    let one = unsharded_rate();
    println!("one filter: {one:.5}");
    let ours = ShardedFilter::reserve(FP_CAPACITY, FP_SHARDS).unwrap();
    assert_eq!(
        ours.shards()[0].info().buckets * FP_SHARDS as u64,
        RedisCuckooFilter::reserve(FP_CAPACITY)
            .unwrap()
            .info()
            .buckets,
        "the same total buckets"
    );
    let rule = |h: u64| documented_shard_of_hash(h, FP_SHARDS);
    let rates = rates_of_rule(rule);
    println!("sharded: {:.5}, per shard {:?}", rates.all, rates.per_shard);
    agrees(&rates, one).unwrap();
    // The filter itself routes as the rule does.
    for item in items("fp-out-", 1_000) {
        assert_eq!(ours.shard_of(&item), rule(murmur(&item)));
    }

    let low_bits = rates_of_rule(|h| (h % FP_SHARDS as u64) as usize);
    println!(
        "low bits: {:.5}, per shard {:?}",
        low_bits.all, low_bits.per_shard
    );
    assert!(
        agrees(&low_bits, one).is_err(),
        "the low-bits rule went unnoticed"
    );
    let residue = rates_of_rule(|h| (h % 255 % FP_SHARDS as u64) as usize);
    println!("fingerprint residue: {:.5}", residue.all);
    assert!(
        agrees(&residue, one).is_err(),
        "the residue rule went unnoticed"
    );
}

fn documented_shard_of_hash(hash: u64, shards: usize) -> usize {
    ((u128::from(hash >> 32) * shards as u128) >> 32) as usize
}

/// Threads inserting into one shared filter: every item is found afterwards (no false
/// negatives), the count is exact, and lookups during the inserts never miss an item whose
/// insert had returned.
#[test]
fn threads_share_one_sharded_filter() {
    let filter = Arc::new(ShardedFilter::reserve(200_000, 7).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let filter = Arc::clone(&filter);
            std::thread::spawn(move || {
                let mine = items(&format!("thread-{t}-"), 20_000);
                for (i, item) in mine.iter().enumerate() {
                    filter.insert(item).unwrap();
                    // An earlier item of this thread, inserted before: must be found.
                    assert!(filter.contains(&mine[i / 2]), "thread {t} item {}", i / 2);
                }
                mine
            })
        })
        .collect();
    let mut total = 0;
    for handle in threads {
        let mine = handle.join().unwrap();
        let mut found = Vec::new();
        filter.contains_many(&mine, &mut found);
        assert!(found.iter().all(|&f| f));
        total += mine.len();
    }
    assert_eq!(filter.len(), total);
}
