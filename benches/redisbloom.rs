//! The contenders of the RedisBloom comparison (`benches/redisbloom.rs`, criterion, and
//! `benches/redisbloom_quick.rs`, a timed loop): [`CuckooFilter`] against
//! [`RedisCuckooFilter`] on the same u64 keys, the same item count, one thread.
//!
//! Our filter hashes the `u64` (its usual `Hash` input); RedisBloom hashes an item's bytes, so
//! it gets the key's 8 little-endian bytes, as a Redis client would send them.

use atomic_cuckoo::redisbloom::RedisCuckooFilter;
use atomic_cuckoo::{AHashBuilder, CuckooFilter};

/// Keys probed per lookup measurement (present: inserted keys, spread evenly over the order of
/// insertion, so that they sit in every sub-filter as the whole fill does; absent: fresh keys).
/// 2M random probes of a 50M filter are DRAM-bound already, and keep the slowest contenders'
/// criterion samples short.
pub const MAX_PROBES: usize = 2_000_000;

/// A filter under test, used by one thread.
pub trait Contender: Sync + Sized {
    /// An empty filter for `items` items.
    fn build(items: usize) -> Self;
    /// Inserts one key; whether it was stored.
    fn insert(&self, key: u64) -> bool;
    /// Whether the key may be present.
    fn contains(&self, key: u64) -> bool;
    /// Inserts the keys with the batched call; how many were stored.
    fn insert_many(&self, keys: &[u64]) -> usize;
    /// Looks the keys up with the batched call.
    fn contains_many(&self, keys: &[u64], results: &mut Vec<bool>);
    /// Heap bytes held.
    fn memory(&self) -> usize;
    /// Sub-filters in use (ours: always one table, fixed or doubled in place).
    fn parts(&self) -> usize;
}

/// Our filter with the default 1 % target rate and the given hasher.
fn ours<S: std::hash::BuildHasher + Default>(items: usize) -> CuckooFilter<S> {
    CuckooFilter::builder()
        .capacity(items)
        .false_positive_rate(0.01)
        .hasher(S::default())
        .build()
        .expect("a valid configuration")
}

macro_rules! ours_contender {
    ($hasher:ty) => {
        impl Contender for CuckooFilter<$hasher> {
            fn build(items: usize) -> Self {
                ours::<$hasher>(items)
            }
            #[inline]
            fn insert(&self, key: u64) -> bool {
                CuckooFilter::insert(self, &key).is_ok()
            }
            #[inline]
            fn contains(&self, key: u64) -> bool {
                CuckooFilter::contains(self, &key)
            }
            fn insert_many(&self, keys: &[u64]) -> usize {
                match CuckooFilter::insert_many(self, keys) {
                    Ok(()) => keys.len(),
                    Err(e) => e.index,
                }
            }
            fn contains_many(&self, keys: &[u64], results: &mut Vec<bool>) {
                CuckooFilter::contains_many(self, keys, results)
            }
            fn memory(&self) -> usize {
                self.memory_usage()
            }
            fn parts(&self) -> usize {
                1
            }
        }
    };
}

ours_contender!(atomic_cuckoo::DefaultHashBuilder);
ours_contender!(AHashBuilder);

/// A [`RedisCuckooFilter`] of bucket size `BS` reserved for `CAP ×` the items
/// (`CF.RESERVE key CAP×items BUCKETSIZE BS`), RedisBloom's other defaults: expansion 1, so a
/// full filter grows another sub-filter of the same size and inserts do not fail.
pub struct Redis<const BS: u64, const CAP: u64>(pub RedisCuckooFilter);

impl<const BS: u64, const CAP: u64> Contender for Redis<BS, CAP> {
    fn build(items: usize) -> Self {
        let filter = RedisCuckooFilter::builder()
            .capacity(items as u64 * CAP)
            .bucket_size(BS)
            .build()
            .expect("a valid configuration");
        Redis(filter)
    }
    #[inline]
    fn insert(&self, key: u64) -> bool {
        self.0.insert(key.to_le_bytes()).is_ok()
    }
    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.0.contains(key.to_le_bytes())
    }
    fn insert_many(&self, keys: &[u64]) -> usize {
        let stored = self.0.insert_many(keys.iter().map(|k| k.to_le_bytes()));
        stored.map_or(0, |s| s.iter().filter(|&&s| s).count())
    }
    fn contains_many(&self, keys: &[u64], results: &mut Vec<bool>) {
        self.0
            .contains_many(keys.iter().map(|k| k.to_le_bytes()), results)
    }
    fn memory(&self) -> usize {
        self.0.memory_usage()
    }
    fn parts(&self) -> usize {
        self.0.info().filters as usize
    }
}

/// Our filter with its default (portable rapidhash) hasher: the reference of every ratio.
pub type Ours = CuckooFilter;
/// Our filter with the opt-in `AHashBuilder`.
pub type OursAhash = CuckooFilter<AHashBuilder>;

/// Name of the reference contender (every ratio is a time over its time).
pub const REFERENCE: &str = "CuckooFilter";

/// Something done once per contender type.
pub trait Visit {
    /// Called once for each contender, in [`each_contender`]'s order.
    fn visit<F: Contender>(&mut self, name: &'static str);
}

/// Visits every contender: ours (default hasher, then AHash), then RedisBloom with bucket
/// sizes 2 (Redis's default) and 4, reserved for the item count and for twice it.
pub fn each_contender(v: &mut impl Visit) {
    v.visit::<Ours>(REFERENCE);
    v.visit::<OursAhash>("CuckooFilter AHash");
    v.visit::<Redis<2, 1>>("Redis bs2");
    v.visit::<Redis<4, 1>>("Redis bs4");
    v.visit::<Redis<2, 2>>("Redis bs2 cap2x");
    v.visit::<Redis<4, 2>>("Redis bs4 cap2x");
}

/// One benchmark size: the keys every filter gets.
pub struct Size {
    /// `1M` or `50M`.
    pub label: &'static str,
    /// Items every filter is built for, and inserted.
    pub items: usize,
    /// The inserted keys.
    pub insert: Vec<u64>,
    /// Inserted keys probed, up to [`MAX_PROBES`]: every `k`-th of `insert`.
    present: Vec<u64>,
    /// Keys never inserted, up to [`MAX_PROBES`].
    pub absent: Vec<u64>,
}

impl Size {
    /// The keys for `items` items, labelled `label` in benchmark ids.
    pub fn new(label: &'static str, items: usize) -> Self {
        let insert = crate::splitmix(1, items);
        let stride = items.div_ceil(MAX_PROBES).max(1);
        Size {
            label,
            items,
            present: insert.iter().step_by(stride).copied().collect(),
            insert,
            absent: crate::splitmix(2, items.min(MAX_PROBES)),
        }
    }

    /// Inserted keys to probe, up to [`MAX_PROBES`] spread over the whole fill.
    pub fn present(&self) -> &[u64] {
        &self.present
    }

    /// Whether the filters outgrow the caches.
    pub fn is_large(&self) -> bool {
        Size::is_large_count(self.items)
    }

    /// Whether filters for `items` items outgrow the caches.
    pub fn is_large_count(items: usize) -> bool {
        items > 10_000_000
    }
}

/// The sizes named by `ATOMIC_CUCKOO_BENCH_SIZES` (`1m,50m` by default).
///
/// # Panics
///
/// On a size other than `1m` and `50m`.
pub fn sizes() -> Vec<Size> {
    crate::bench_sizes("1m,50m")
        .into_iter()
        .map(|(items, label)| Size::new(label, items))
        .collect()
}

/// Inserts the keys one at a time; how many were stored.
#[inline(never)]
pub fn fill<F: Contender>(filter: &F, keys: &[u64]) -> usize {
    keys.iter().filter(|&&k| filter.insert(k)).count()
}

/// Inserts the keys with the batched call; how many were stored.
#[inline(never)]
pub fn fill_many<F: Contender>(filter: &F, keys: &[u64]) -> usize {
    filter.insert_many(keys)
}

/// Looks the keys up one at a time; how many were (maybe) present.
#[inline(never)]
pub fn hits<F: Contender>(filter: &F, keys: &[u64]) -> usize {
    keys.iter().filter(|&&k| filter.contains(k)).count()
}

/// Looks the keys up with the batched call; how many were (maybe) present.
#[inline(never)]
pub fn hits_many<F: Contender>(filter: &F, keys: &[u64], results: &mut Vec<bool>) -> usize {
    filter.contains_many(keys, results);
    results.iter().filter(|&&r| r).count()
}

/// The operations measured, as (criterion group prefix, what it does).
pub const OPERATIONS: [&str; 6] = [
    "insert",
    "insert_many",
    "contains_present",
    "contains_absent",
    "contains_many_present",
    "contains_many_absent",
];

/// One line about a filled filter: sub-filters, memory, stored items, false-positive rate.
pub fn describe<F: Contender>(name: &str, size: &Size, filter: &F, stored: usize) -> String {
    let false_hits = hits(filter, &size.absent);
    format!(
        "{name} {}: {stored} of {} stored, {} sub-filter(s), {:.1} MiB, false-positive rate {:.3} %",
        size.label,
        size.insert.len(),
        filter.parts(),
        filter.memory() as f64 / (1 << 20) as f64,
        false_hits as f64 * 100.0 / size.absent.len() as f64
    )
}
