//! [`ShardedFilter`]: one logical RedisBloom cuckoo filter split over several
//! [`RedisCuckooFilter`] shards, and the rule that puts an item in its shard.
//!
//! The rule (written out for other languages in `docs/SHARDED.md`): the item's MurmurHash64A
//! `H`, as `CF.ADD` computes it, picks shard `((H >> 32) × shards) >> 32`. A shard's buckets
//! use the low bits of `H` (while it has at most 2^32 buckets in a sub-filter) and its
//! fingerprint is `H mod 255 + 1`, which the high half leaves uniform: every shard is an
//! ordinary filter for the items it gets.

use std::fmt;

use super::error::{RedisInsertError, ReserveError};
use super::filter::{in_hashed_batches, RedisBuilder, RedisCuckooFilter};
use super::hash::ItemHash;

/// Most shards a [`ShardedFilter`] has: Redis Cluster's hash slots, so that every shard can
/// have a slot of its own.
pub const MAX_SHARDS: usize = 16_384;

/// The shard, among `shards`, of an item whose MurmurHash64A is `hash`: its high 32 bits
/// scaled to the shard count (a multiply and a shift, which every language can write).
#[inline]
pub(crate) fn shard_of_hash(hash: u64, shards: usize) -> usize {
    // `shards` is at most MAX_SHARDS, so the product fits 64 bits.
    (((hash >> 32) * shards as u64) >> 32) as usize
}

/// Why a [`ShardedFilter`] could not be created.
///
/// ```
/// use atomic_cuckoo::redisbloom::{ShardError, ShardedFilter};
///
/// let error = ShardedFilter::reserve(1_000_000, 0).unwrap_err();
/// assert_eq!(error, ShardError::ShardCount { shards: 0 });
/// assert_eq!(error.to_string(), "a sharded filter has 1 to 16384 shards, not 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardError {
    /// The shard count is 0 or above [`MAX_SHARDS`].
    ShardCount {
        /// The count that was given.
        shards: usize,
    },
    /// A shard could not be created: its `CF.RESERVE` parameters are out of range, or its
    /// memory could not be allocated.
    Reserve {
        /// The capacity each shard was given.
        shard_capacity: u64,
        /// Why the shard was refused.
        error: ReserveError,
    },
}

impl fmt::Display for ShardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardError::ShardCount { shards } => write!(
                f,
                "a sharded filter has 1 to {MAX_SHARDS} shards, not {shards}"
            ),
            ShardError::Reserve {
                shard_capacity,
                error,
            } => write!(f, "a shard of capacity {shard_capacity}: {error}"),
        }
    }
}

impl std::error::Error for ShardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ShardError::Reserve { error, .. } => Some(error),
            ShardError::ShardCount { .. } => None,
        }
    }
}

/// One logical cuckoo filter over `n` RedisBloom filters (shards): each item lives in the one
/// shard that its RedisBloom hash picks, so each shard can be one key of a Redis Cluster, and
/// any client that follows the rule finds an item with one `CF.EXISTS` on its shard.
///
/// **The rule**: with `H` the item's MurmurHash64A (seed 0, as `CF.ADD` computes it), the
/// item's shard among `n` is `((H >> 32) × n) >> 32`. A shard's buckets use the low bits of
/// `H` and its fingerprint `H mod 255 + 1`, which the high bits leave uniform, so each shard
/// keeps the false-positive rate of one filter. `docs/SHARDED.md` writes the rule out for
/// other languages, with the key names and the manifest of a filter in Redis.
///
/// Every operation takes `&self` and goes to the item's shard, a [`RedisCuckooFilter`] with
/// its [concurrency rules](crate::redisbloom#concurrency): share the filter as
/// `Arc<ShardedFilter>`. Each shard is byte for byte the RedisBloom filter that the same
/// commands, sent to its key, would build.
///
/// ```
/// use atomic_cuckoo::redisbloom::ShardedFilter;
///
/// let filter = ShardedFilter::reserve(1_000_000, 4)?; // 4 shards of CF.RESERVE key 250000
/// filter.insert("user:42").unwrap();
/// assert!(filter.contains("user:42"));
/// let shard = filter.shard_of("user:42");
/// assert!(filter.shards()[shard].contains("user:42"));
/// assert_eq!(filter.len(), 1);
/// # Ok::<(), atomic_cuckoo::redisbloom::ShardError>(())
/// ```
pub struct ShardedFilter {
    shards: Box<[RedisCuckooFilter]>,
}

impl ShardedFilter {
    /// `shards` shards of RedisBloom's default shape that hold `capacity` items together: each
    /// is `CF.RESERVE key ⌈capacity / shards⌉`. RedisBloom rounds a filter's buckets up to a
    /// power of two, so a power-of-two shard count gives the shards exactly the slots of one
    /// filter of `capacity` (the same memory and false-positive rate); another count rounds
    /// each shard on its own.
    ///
    /// # Errors
    ///
    /// [`ShardError::ShardCount`] for 0 or more than [`MAX_SHARDS`] shards;
    /// [`ShardError::Reserve`] when a shard's capacity is outside `CF.RESERVE`'s range (from 4
    /// to 2^30 items) or its memory cannot be allocated.
    pub fn reserve(capacity: u64, shards: usize) -> Result<Self, ShardError> {
        let each = capacity.div_ceil(shards.max(1) as u64);
        Self::with_builder(shards, &RedisCuckooFilter::builder().capacity(each))
    }

    /// `shards` shards, each built by `shard` (its capacity is each shard's, not the
    /// total).
    ///
    /// ```
    /// use atomic_cuckoo::redisbloom::{RedisCuckooFilter, ShardedFilter};
    ///
    /// let each = RedisCuckooFilter::builder().capacity(1 << 20).bucket_size(4);
    /// let filter = ShardedFilter::with_builder(8, &each)?;
    /// assert_eq!(filter.shards()[7].info().bucket_size, 4);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ShardError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`reserve`](ShardedFilter::reserve).
    pub fn with_builder(shards: usize, shard: &RedisBuilder) -> Result<Self, ShardError> {
        check_count(shards)?;
        let built = (0..shards)
            .map(|_| shard.clone().build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| ShardError::Reserve {
                shard_capacity: shard.shard_capacity(),
                error,
            })?;
        Ok(ShardedFilter {
            shards: built.into_boxed_slice(),
        })
    }

    /// A sharded filter of these shards, in order (shard `i` holds the items the rule sends
    /// to `i` among `shards.len()`): for instance shards loaded from their `DUMP` payloads.
    /// They may differ in shape.
    ///
    /// # Errors
    ///
    /// [`ShardError::ShardCount`] for none or more than [`MAX_SHARDS`].
    pub fn from_shards(shards: Vec<RedisCuckooFilter>) -> Result<Self, ShardError> {
        check_count(shards.len())?;
        Ok(ShardedFilter {
            shards: shards.into_boxed_slice(),
        })
    }

    /// The shards, in order.
    pub fn into_shards(self) -> Vec<RedisCuckooFilter> {
        self.shards.into_vec()
    }

    /// The shards, in order: shard `i` is the filter whose key holds the items the rule sends
    /// to `i`.
    pub fn shards(&self) -> &[RedisCuckooFilter] {
        &self.shards
    }

    /// The shard that holds `item`, `0..shards().len()`, by the rule of
    /// [`ShardedFilter`].
    ///
    /// ```
    /// use atomic_cuckoo::redisbloom::ShardedFilter;
    ///
    /// let filter = ShardedFilter::reserve(1_000, 3)?;
    /// // MurmurHash64A("user:42") = 0xbcc2_6ebc_12a8_e649: (0xbcc26ebc × 3) >> 32 = 2.
    /// assert_eq!(filter.shard_of("user:42"), 2);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ShardError>(())
    /// ```
    pub fn shard_of(&self, item: impl AsRef<[u8]>) -> usize {
        self.shard_index(&ItemHash::of(item.as_ref()))
    }

    #[inline]
    fn shard_index(&self, h: &ItemHash) -> usize {
        shard_of_hash(h.h1, self.shards.len())
    }

    #[inline]
    fn shard(&self, h: &ItemHash) -> &RedisCuckooFilter {
        &self.shards[self.shard_index(h)]
    }

    /// `CF.EXISTS` on the item's shard: whether it may be in the filter. Never `false` for an
    /// inserted item (one not removed since); wait-free.
    pub fn contains(&self, item: impl AsRef<[u8]>) -> bool {
        let h = ItemHash::of(item.as_ref());
        self.shard(&h).contains_hash(&h)
    }

    /// `CF.MEXISTS`: `results` is cleared and receives [`contains`](ShardedFilter::contains)
    /// of each item, in order. Items are hashed 32 at a time and their buckets loaded before
    /// any is looked up, so that their cache misses overlap.
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::ShardedFilter::reserve(1_000, 4)?;
    /// f.insert("a").unwrap();
    /// let mut found = Vec::new();
    /// f.contains_many(["a", "b"], &mut found);
    /// assert!(found[0]);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ShardError>(())
    /// ```
    pub fn contains_many<I>(&self, items: I, results: &mut Vec<bool>)
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        results.clear();
        let done: Result<(), std::convert::Infallible> = self.in_batches(items, |h| {
            results.push(self.shard(h).contains_hash(h));
            Ok(())
        });
        if let Err(never) = done {
            match never {}
        }
    }

    /// `CF.COUNT` on the item's shard: copies of its fingerprint in its buckets (see
    /// [`RedisCuckooFilter::count`]).
    pub fn count(&self, item: impl AsRef<[u8]>) -> u64 {
        let h = ItemHash::of(item.as_ref());
        self.shard(&h).count_hash(&h)
    }

    /// `CF.ADD` on the item's shard: stores one more copy.
    ///
    /// # Errors
    ///
    /// As [`RedisCuckooFilter::insert`], for the item's shard. Nothing changes then.
    pub fn insert(&self, item: impl AsRef<[u8]>) -> Result<(), RedisInsertError> {
        let h = ItemHash::of(item.as_ref());
        let shard = self.shard(&h);
        shard.check_expansions()?;
        shard.insert_hash(&h)
    }

    /// `CF.ADDNX` on the item's shard: stores the item unless it is (maybe) present;
    /// `Ok(true)` if it was stored. Two threads adding the same item this way cannot both
    /// store it.
    ///
    /// # Errors
    ///
    /// As [`RedisCuckooFilter::insert_unique`], for the item's shard.
    pub fn insert_unique(&self, item: impl AsRef<[u8]>) -> Result<bool, RedisInsertError> {
        let h = ItemHash::of(item.as_ref());
        let shard = self.shard(&h);
        shard.check_expansions()?;
        shard.insert_unique_hash(&h)
    }

    /// `CF.INSERT` of each item on its shard, in order: `true` if it was stored, `false` if
    /// its shard had no room (Redis's `-1`). Like `CF.INSERT`, each shard's sub-filter limit
    /// is checked once, at the first of the call's items that goes to it.
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::ShardedFilter::reserve(1_000, 4)?;
    /// assert_eq!(f.insert_many(["a", "b"]).unwrap(), [true, true]);
    /// assert_eq!(f.len(), 2);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ShardError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`RedisInsertError::MaxExpansionsReached`] or [`RedisInsertError::GrowthFailed`] at
    /// the item whose shard refused it: the items before it are in, none after it. Items are
    /// taken from the iterator 32 at a time, so it may then have yielded up to 31 more items
    /// than were stored.
    pub fn insert_many<I>(&self, items: I) -> Result<Vec<bool>, RedisInsertError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        self.insert_each(items, |s, h| s.insert_hash(h).map(|()| true), false)
    }

    /// `CF.INSERTNX` of each item on its shard: as [`insert_many`](ShardedFilter::insert_many)
    /// with [`insert_unique`](ShardedFilter::insert_unique) for each item: `Some(true)`
    /// stored, `Some(false)` (maybe) present already, `None` no room.
    ///
    /// # Errors
    ///
    /// As [`insert_many`](ShardedFilter::insert_many).
    pub fn insert_many_unique<I>(&self, items: I) -> Result<Vec<Option<bool>>, RedisInsertError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        self.insert_each(items, |s, h| s.insert_unique_hash(h).map(Some), None)
    }

    /// `insert` of each item on its shard, with `no_room` as the answer for an item that did
    /// not fit; each shard's sub-filter limit checked at its first item.
    fn insert_each<I, T>(
        &self,
        items: I,
        insert: impl Fn(&RedisCuckooFilter, &ItemHash) -> Result<T, RedisInsertError>,
        no_room: T,
    ) -> Result<Vec<T>, RedisInsertError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
        T: Copy,
    {
        let mut checked = vec![false; self.shards.len()];
        let mut answers = Vec::new();
        self.in_batches(items, |h| {
            let index = self.shard_index(h);
            let shard = &self.shards[index];
            if !std::mem::replace(&mut checked[index], true) {
                shard.check_expansions()?;
            }
            answers.push(match insert(shard, h) {
                Err(RedisInsertError::Full) => no_room,
                other => other?,
            });
            Ok(())
        })?;
        Ok(answers)
    }

    /// Runs `each` on the items' hashes in order, 32 at a time, each batch's buckets touched
    /// in their shards first.
    fn in_batches<I, E>(
        &self,
        items: I,
        each: impl FnMut(&ItemHash) -> Result<(), E>,
    ) -> Result<(), E>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        in_hashed_batches(items, |h| self.shard(h).touch(h), each)
    }

    /// `CF.DEL` on the item's shard: removes one copy, if there is one (see
    /// [`RedisCuckooFilter::remove`]).
    pub fn remove(&self, item: impl AsRef<[u8]>) -> bool {
        let h = ItemHash::of(item.as_ref());
        self.shard(&h).remove_hash(&h)
    }

    /// `CF.COMPACT` on every shard.
    pub fn compact(&self) {
        self.shards.iter().for_each(RedisCuckooFilter::compact);
    }

    /// Items stored in all shards. Exact when no writer is running; while writers run, a sum
    /// taken at slightly different moments.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(RedisCuckooFilter::len)
            .fold(0, usize::saturating_add)
    }

    /// Whether [`len`](ShardedFilter::len) is zero.
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(RedisCuckooFilter::is_empty)
    }

    /// Heap bytes held by every shard.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Self>()
            + self
                .shards
                .iter()
                .map(RedisCuckooFilter::memory_usage)
                .sum::<usize>()
    }
}

fn check_count(shards: usize) -> Result<(), ShardError> {
    if (1..=MAX_SHARDS).contains(&shards) {
        Ok(())
    } else {
        Err(ShardError::ShardCount { shards })
    }
}

impl Clone for ShardedFilter {
    /// A deep copy, each shard copied as [`RedisCuckooFilter::clone`] copies it (each at its
    /// own moment).
    ///
    /// # Panics
    ///
    /// If memory for the copy runs out.
    fn clone(&self) -> Self {
        ShardedFilter {
            shards: self.shards.clone(),
        }
    }
}

impl fmt::Debug for ShardedFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedFilter")
            .field("shards", &self.shards.len())
            .field("items", &self.len())
            .field("first", &self.shards.first())
            .finish()
    }
}
