//! [`RedisCuckooFilter`]: a RedisBloom cuckoo filter in process memory, shared by threads.

use std::fmt;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::OnceLock;

use super::chunks;
use super::error::{LoadError, RedisInsertError, ReserveError};
use super::hash::ItemHash;
use super::header::Header;
use super::kick::{kick, KickOutcome};
use super::params::{self, Geometry};
use super::payload;
use super::raw::RawFilter;
use super::sub_filter::{Probe, SubFilter};
use crate::freeze::{self, Frozen};
use crate::optimistic_read::{retry_read, Lookup, READ_ATTEMPTS};
use crate::stripe::{Stripe, StripeSet};
use crate::sync::{fence, AtomicU64, AtomicUsize, GrowLock, Ordering};
use crate::table::AllocationFailed;

#[cfg(loom)]
#[path = "loom_hook.rs"]
mod loom_hook;

/// Most sub-filters a lookup reads in one pass (see `lookup_observed`); a filter with more
/// asks them one at a time.
const PROBED: usize = 8;

/// Items per batch of `insert_many` and `contains_many`: the batch's buckets are loaded (in
/// every sub-filter) before any item is handled, so their cache misses overlap.
const BATCH: usize = 32;

/// Stripes of the gate that makes `insert_unique` of one item atomic.
const UNIQUE_GATES: usize = 256;

/// Sub-filter cells: the first 32 in one block, then blocks of 32, 64, … up to 65,536 cells,
/// each allocated when first needed. A filter can have up to 65,535 sub-filters (one
/// `CF.INSERT` can grow far past `max_expansions`, and a dump can hold that many), but most
/// have a few: this costs them 32 cells.
struct Cells {
    blocks: [OnceLock<Block>; 12],
}

/// One block of cells.
type Block = Box<[OnceLock<Box<SubFilter>>]>;

impl Cells {
    /// Most sub-filters (`numFilters` is 16 bits wide).
    const MAX: usize = 65_535;

    fn new() -> Self {
        Cells {
            blocks: Default::default(),
        }
    }

    /// Block and offset of cell `i`: block 0 holds 0..32, block `k` holds `2^(k+4)..2^(k+5)`.
    #[inline]
    fn place(i: usize) -> (usize, usize) {
        if i < 32 {
            (0, i)
        } else {
            let k = i.ilog2() as usize - 4;
            (k, i - (1 << (k + 4)))
        }
    }

    /// Cell `i`, allocating its block if needed; `None` past `MAX`.
    fn cell(&self, i: usize) -> Option<&OnceLock<Box<SubFilter>>> {
        if i >= Self::MAX {
            return None;
        }
        let (k, offset) = Self::place(i);
        let len = if k == 0 { 32 } else { 1 << (k + 4) };
        let block = self.blocks[k].get_or_init(|| (0..len).map(|_| OnceLock::new()).collect());
        Some(&block[offset])
    }

    /// Sub-filter `i`, if set.
    #[inline]
    fn get(&self, i: usize) -> Option<&SubFilter> {
        let (k, offset) = Self::place(i);
        self.blocks[k].get()?.get(offset)?.get().map(|b| &**b)
    }

    /// Every sub-filter set, live or dropped.
    fn all(&self) -> impl Iterator<Item = &SubFilter> {
        self.blocks
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|b| b.iter().filter_map(OnceLock::get).map(|b| &**b))
    }

    /// Heap bytes of the cells themselves.
    fn heap_bytes(&self) -> usize {
        self.blocks
            .iter()
            .filter_map(OnceLock::get)
            .map(|b| std::mem::size_of_val(&**b))
            .sum()
    }
}

/// A cuckoo filter that is byte for byte a RedisBloom `CF.*` filter: the same hashing, layout,
/// insertion and kick order, deletes, compaction and counters, so that after the same commands
/// it holds the same bytes as Redis and gives the same replies. Shared by reference between
/// threads: every operation takes `&self`, lookups are wait-free, and writers lock only the
/// stripes of the buckets they change (see [the concurrency rules](crate::redisbloom#concurrency)).
///
/// ```
/// use atomic_cuckoo::redisbloom::RedisCuckooFilter;
///
/// let f = RedisCuckooFilter::reserve(1_000)?;          // CF.RESERVE key 1000
/// f.insert("user:42").unwrap();                        // CF.ADD
/// assert!(f.contains("user:42"));                      // CF.EXISTS
/// assert_eq!(f.insert_unique("user:42"), Ok(false));   // CF.ADDNX
/// assert_eq!(f.count("user:42"), 1);                   // CF.COUNT
/// assert!(f.remove("user:42"));                        // CF.DEL
/// assert_eq!(f.info().items, 0);                       // CF.INFO
/// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
/// ```
pub struct RedisCuckooFilter {
    geometry: Geometry,
    max_expansions: u32,
    /// Sub-filters in order; `published` of them are live. A compaction that empties the
    /// newest unpublishes it but keeps it (zeroed) for the next growth: readers may still be
    /// looking at it.
    subs: Cells,
    published: AtomicUsize,
    /// `numDeletes`: deletes since the last compaction.
    deletes: AtomicU64,
    /// A sequence count, odd while a compaction moves fingerprints between sub-filters: a
    /// `count` that saw it change may have seen a fingerprint in both or in neither.
    compacting: AtomicU64,
    /// Serializes growth and whole-filter operations (compaction, dumps).
    grow_lock: GrowLock,
    /// Two `insert_unique`s of one item hold the same gate stripe while they look and insert.
    unique_gates: StripeSet,
}

/// `CF.INFO`'s fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisInfo {
    /// `Size`: `40 + 16 × filters +` the slot bytes, as RedisBloom reports it.
    pub size: u64,
    /// `Number of buckets` of the first sub-filter.
    pub buckets: u64,
    /// `Number of filters`.
    pub filters: u64,
    /// `Number of items inserted` (minus those deleted).
    pub items: u64,
    /// `Number of items deleted` since the last compaction.
    pub deletes: u64,
    /// `Bucket size`.
    pub bucket_size: u64,
    /// `Expansion rate` (rounded up to a power of two).
    pub expansion: u64,
    /// `Max iterations`.
    pub max_iterations: u64,
}

/// Configures a [`RedisCuckooFilter`] like `CF.RESERVE`'s options; the defaults are
/// RedisBloom's (capacity 1024, bucket size 2, max iterations 20, expansion 1, 32 sub-filters
/// at most).
///
/// ```
/// use atomic_cuckoo::redisbloom::RedisCuckooFilter;
///
/// let f = RedisCuckooFilter::builder()
///     .capacity(1_000_000)
///     .bucket_size(4)
///     .max_iterations(20)
///     .expansion(2)
///     .max_expansions(32)
///     .build()?;
/// assert_eq!(f.info().buckets, 262_144);
/// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
/// ```
#[derive(Clone, Debug)]
pub struct RedisBuilder {
    capacity: u64,
    bucket_size: u64,
    max_iterations: u64,
    expansion: u64,
    max_expansions: u64,
}

impl Default for RedisBuilder {
    fn default() -> Self {
        RedisBuilder {
            capacity: params::DEFAULT_CAPACITY,
            bucket_size: u64::from(params::DEFAULT_BUCKET_SIZE),
            max_iterations: u64::from(params::DEFAULT_MAX_ITERATIONS),
            expansion: u64::from(params::DEFAULT_EXPANSION),
            max_expansions: u64::from(params::DEFAULT_MAX_EXPANSIONS),
        }
    }
}

impl RedisBuilder {
    /// The capacity given to [`capacity`](RedisBuilder::capacity), checked or not.
    pub(crate) fn shard_capacity(&self) -> u64 {
        self.capacity
    }

    /// `CF.RESERVE`'s capacity: `2 × bucket_size ..= 2^30`. The first sub-filter gets
    /// `capacity / bucket_size` buckets rounded up to a power of two.
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::RedisCuckooFilter::builder().capacity(1_000).build()?;
    /// assert_eq!(f.info().buckets, 512);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn capacity(mut self, capacity: u64) -> Self {
        self.capacity = capacity;
        self
    }

    /// `BUCKETSIZE`: slots per bucket, `1..=255` (default 2).
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::RedisCuckooFilter::builder().bucket_size(4).build()?;
    /// assert_eq!(f.info().bucket_size, 4);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn bucket_size(mut self, bucket_size: u64) -> Self {
        self.bucket_size = bucket_size;
        self
    }

    /// `MAXITERATIONS`: kicks before an insert gives up on a sub-filter, `1..=65535`
    /// (default 20).
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::RedisCuckooFilter::builder().max_iterations(5).build()?;
    /// assert_eq!(f.info().max_iterations, 5);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn max_iterations(mut self, max_iterations: u64) -> Self {
        self.max_iterations = max_iterations;
        self
    }

    /// `EXPANSION`: each new sub-filter has this many times the previous one's buckets,
    /// `0..=32768`, rounded up to a power of two; `0` never grows (default 1).
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::RedisCuckooFilter::builder().expansion(3).build()?;
    /// assert_eq!(f.info().expansion, 4);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn expansion(mut self, expansion: u64) -> Self {
        self.expansion = expansion;
        self
    }

    /// RedisBloom's `cf-max-expansions`: inserts fail with
    /// [`RedisInsertError::MaxExpansionsReached`] once the filter has this many sub-filters,
    /// `1..=65536` (default 32).
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::RedisCuckooFilter::builder().max_expansions(4).build()?;
    /// assert_eq!(f.info().filters, 1);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn max_expansions(mut self, max_expansions: u64) -> Self {
        self.max_expansions = max_expansions;
        self
    }

    /// Builds the filter.
    ///
    /// # Errors
    ///
    /// A [`ReserveError`] for a parameter outside Redis's range, or when the first
    /// sub-filter cannot be allocated.
    pub fn build(self) -> Result<RedisCuckooFilter, ReserveError> {
        let geometry = Geometry::reserve(
            self.capacity,
            self.bucket_size,
            self.max_iterations,
            self.expansion,
        )?;
        let max_expansions = params::max_expansions(self.max_expansions)?;
        let first = SubFilter::new(geometry.buckets, geometry.bucket_size)
            .map_err(|e| ReserveError::AllocationFailed { bytes: e.bytes })?;
        Ok(RedisCuckooFilter::with_subs(
            geometry,
            max_expansions,
            vec![first],
            0,
        ))
    }
}

impl RedisCuckooFilter {
    /// `CF.RESERVE key capacity` with the default options.
    ///
    /// # Errors
    ///
    /// As [`RedisBuilder::build`].
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::RedisCuckooFilter::reserve(100)?;
    /// assert_eq!(f.info().buckets, 64);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn reserve(capacity: u64) -> Result<Self, ReserveError> {
        Self::builder().capacity(capacity).build()
    }

    /// A [`RedisBuilder`] with RedisBloom's defaults.
    pub fn builder() -> RedisBuilder {
        RedisBuilder::default()
    }

    fn with_subs(
        geometry: Geometry,
        max_expansions: u32,
        subs: Vec<SubFilter>,
        deletes: u64,
    ) -> Self {
        let published = subs.len();
        let cells = Cells::new();
        for (i, sub) in subs.into_iter().enumerate() {
            let cell = cells
                .cell(i)
                .expect("validation caps sub-filters at 65,535");
            if cell.set(Box::new(sub)).is_err() {
                unreachable!("each cell is set once");
            }
        }
        RedisCuckooFilter {
            geometry,
            max_expansions,
            subs: cells,
            published: AtomicUsize::new(published),
            deletes: AtomicU64::new(deletes),
            compacting: AtomicU64::new(0),
            grow_lock: GrowLock::new(),
            unique_gates: StripeSet::new(UNIQUE_GATES),
        }
    }

    /// Live sub-filters.
    #[inline]
    fn live(&self) -> usize {
        // Acquire: pairs with the Release stores in `grow` and `compact`: every sub-filter
        // counted here is set, and a writer that sees a smaller count after taking its locks
        // knows its sub-filter was dropped.
        self.published.load(Ordering::Acquire)
    }

    #[inline]
    fn sub(&self, i: usize) -> &SubFilter {
        self.subs
            .get(i)
            .expect("a counted sub-filter was set before the count was published")
    }

    /// `CF.EXISTS`: whether the item may be in the filter. Never `false` for an inserted item
    /// (one not deleted since); wait-free.
    pub fn contains(&self, item: impl AsRef<[u8]>) -> bool {
        self.contains_hash(&ItemHash::of(item.as_ref()))
    }

    /// `contains` of a hashed item.
    #[inline]
    pub(crate) fn contains_hash(&self, h: &ItemHash) -> bool {
        self.lookup(h) != Lookup::Absent
    }

    /// Sub-filters are read newest first: a compaction copies a fingerprint into an older
    /// sub-filter before it erases it from a newer one, so a reader that missed it in the newer
    /// one (after the erase) finds it in the older one.
    #[inline]
    fn lookup(&self, h: &ItemHash) -> Lookup {
        self.lookup_observed(h, |_| {})
    }

    /// `lookup`, telling `asked` each sub-filter's answer in the order asked (the loom models
    /// record them; here `asked` does nothing and compiles away).
    ///
    /// One pass reads every sub-filter (newest first) as a seqlock read whose validation is
    /// put off until all are read: the reads do not depend on each other, so their cache
    /// misses overlap, and a hit in any needs no validation. If every read missed and every
    /// version is unchanged, each sub-filter lacked the fingerprint over an interval, and the
    /// intervals share a moment (each runs from its own version load to the validations at
    /// the end): the item was in none of them then. If a version changed, the sub-filters are
    /// asked again one at a time, each with its own retries.
    #[inline]
    fn lookup_observed(&self, h: &ItemHash, mut asked: impl FnMut(Lookup)) -> Lookup {
        let live = self.live();
        let mut misses: [Option<(&Stripe, u64)>; PROBED] = [None; PROBED];
        if live <= PROBED {
            for (k, i) in (0..live).rev().enumerate() {
                match self.sub(i).probe(h) {
                    Probe::Hit => {
                        asked(Lookup::Present);
                        return Lookup::Present;
                    }
                    Probe::Miss { stripe, begun } => {
                        asked(Lookup::Absent);
                        misses[k] = Some((stripe, begun));
                    }
                }
            }
            // Mutant `rb_unvalidated_miss`: takes the one pass's misses as proven.
            let unchanged = cfg!(loom_mutant = "rb_unvalidated_miss")
                || misses[..live]
                    .iter()
                    .flatten()
                    .all(|(stripe, begun)| stripe.read_validate(*begun));
            if unchanged {
                return Lookup::Absent;
            }
        }
        Lookup::over((0..live).rev().map(|i| {
            let answer = self.sub(i).lookup(h);
            asked(answer);
            answer
        }))
    }

    /// `CF.COUNT`: copies of the item's fingerprint in its buckets in every sub-filter. Like
    /// RedisBloom, it counts a bucket twice when the item's two buckets are the same one.
    ///
    /// Exact for one moment: a count that overlaps a compaction (which moves fingerprints from
    /// newer sub-filters to older ones) tries again, and when every attempt overlapped one
    /// (the crate's read limit, `READ_ATTEMPTS`) waits for it to end: a count has no "maybe"
    /// to fall back on.
    pub fn count(&self, item: impl AsRef<[u8]>) -> u64 {
        self.count_hash(&ItemHash::of(item.as_ref()))
    }

    /// `count` of a hashed item.
    pub(crate) fn count_hash(&self, h: &ItemHash) -> u64 {
        let sum = || (0..self.live()).map(|i| self.sub(i).count(h) as u64).sum();
        let counted = retry_read(READ_ATTEMPTS, |_| {
            // Acquire: the loads below see every move of the compaction that ended here.
            let begun = self.compacting.load(Ordering::Acquire);
            if begun & 1 != 0 {
                return None;
            }
            let n = sum();
            // Acquire fence: orders the sub-filters' loads before the re-check (a load that
            // saw a move also sees the odd count stored before it).
            fence(Ordering::Acquire);
            (self.compacting.load(Ordering::Relaxed) == begun).then_some(n)
        });
        if let Some(n) = counted {
            return n;
        }
        // Unproven: wait for the compaction. No compaction runs while the grow lock is held.
        let _grow = self.grow_lock.lock();
        sum()
    }

    /// `CF.ADD`: stores one more copy of the item.
    ///
    /// # Errors
    ///
    /// [`RedisInsertError::MaxExpansionsReached`] when the filter already has its maximum
    /// number of sub-filters (checked first, as Redis does), [`RedisInsertError::Full`] when a
    /// filter without expansion has no room, [`RedisInsertError::GrowthFailed`] when a new
    /// sub-filter cannot be allocated. Nothing changes then.
    pub fn insert(&self, item: impl AsRef<[u8]>) -> Result<(), RedisInsertError> {
        let h = ItemHash::of(item.as_ref());
        self.check_expansions()?;
        self.insert_hash(&h)
    }

    /// `CF.ADDNX`: stores the item unless it is (maybe) present; `Ok(true)` if it was stored.
    /// Two threads adding the same item this way cannot both store it.
    ///
    /// # Errors
    ///
    /// As [`insert`](RedisCuckooFilter::insert); the sub-filter limit is checked before the
    /// lookup, as Redis does.
    pub fn insert_unique(&self, item: impl AsRef<[u8]>) -> Result<bool, RedisInsertError> {
        let h = ItemHash::of(item.as_ref());
        self.check_expansions()?;
        self.insert_unique_hash(&h)
    }

    /// `CF.INSERT key ITEMS …` on an existing filter: one copy of each item, in order; the
    /// sub-filter limit is checked once, before the first item (so one call can grow past
    /// it, as in Redis). Each answer is `true` if the item was stored, `false` if there was no
    /// room (Redis's `-1`).
    ///
    /// # Errors
    ///
    /// [`RedisInsertError::MaxExpansionsReached`] before any item;
    /// [`RedisInsertError::GrowthFailed`] at the item that needed a sub-filter that could not
    /// be allocated (the items before it are in, none after it). Items are taken from the
    /// iterator 32 at a time, so after that error it may have yielded up to 31 more items than
    /// were stored: pass a slice, or count the stored items, to know which to retry.
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::RedisCuckooFilter::reserve(100)?;
    /// assert_eq!(f.insert_many(["a", "b"]).unwrap(), [true, true]);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn insert_many<I>(&self, items: I) -> Result<Vec<bool>, RedisInsertError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        self.insert_each(items, |h| self.insert_hash(h).map(|()| true), false)
    }

    /// `CF.INSERTNX key ITEMS …`: as [`insert_many`](RedisCuckooFilter::insert_many) with
    /// [`insert_unique`](RedisCuckooFilter::insert_unique) for each item: `Some(true)` stored,
    /// `Some(false)` (maybe) present already, `None` no room (Redis's `1`, `0`, `-1`).
    ///
    /// # Errors
    ///
    /// As [`insert_many`](RedisCuckooFilter::insert_many).
    pub fn insert_many_unique<I>(&self, items: I) -> Result<Vec<Option<bool>>, RedisInsertError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        self.insert_each(items, |h| self.insert_unique_hash(h).map(Some), None)
    }

    /// A `CF.INSERT`-like command: the sub-filter limit checked once, then `insert` for each
    /// item, with `no_room` as the answer for an item that did not fit.
    fn insert_each<I, T>(
        &self,
        items: I,
        insert: impl Fn(&ItemHash) -> Result<T, RedisInsertError>,
        no_room: T,
    ) -> Result<Vec<T>, RedisInsertError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
        T: Copy,
    {
        self.check_expansions()?;
        let mut answers = Vec::new();
        self.in_batches(items, |h| {
            answers.push(match insert(h) {
                Err(RedisInsertError::Full) => no_room,
                other => other?,
            });
            Ok(())
        })?;
        Ok(answers)
    }

    /// Runs `each` on the items' hashes in order, `BATCH` at a time, each batch's buckets
    /// touched first; stops at the first error.
    fn in_batches<I, E>(
        &self,
        items: I,
        each: impl FnMut(&ItemHash) -> Result<(), E>,
    ) -> Result<(), E>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        in_hashed_batches(items, |h| self.touch(h), each)
    }

    /// Loads the first word of the item's buckets in the newest sub-filters (inserts try them
    /// first, and a filter grown to thousands of sub-filters would spend more on touching than
    /// it saves): a batch touches all its items' buckets before it handles any, so that their
    /// cache misses overlap.
    #[inline]
    pub(crate) fn touch(&self, h: &ItemHash) -> u64 {
        (0..self.live())
            .rev()
            .take(PROBED)
            .fold(0, |sink, i| sink ^ self.sub(i).touch(h))
    }

    /// `CF.MEXISTS`: `results` is cleared and receives [`contains`](RedisCuckooFilter::contains)
    /// of each item, in order.
    ///
    /// ```
    /// let f = atomic_cuckoo::redisbloom::RedisCuckooFilter::reserve(100)?;
    /// f.insert("a").unwrap();
    /// let mut found = Vec::new();
    /// f.contains_many(["a", "b"], &mut found);
    /// assert!(found[0]);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn contains_many<I>(&self, items: I, results: &mut Vec<bool>)
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        results.clear();
        let done: Result<(), std::convert::Infallible> = self.in_batches(items, |h| {
            results.push(self.lookup(h) != Lookup::Absent);
            Ok(())
        });
        if let Err(never) = done {
            match never {}
        }
    }

    /// `insert_unique` of a hashed item, without the sub-filter limit check.
    pub(crate) fn insert_unique_hash(&self, h: &ItemHash) -> Result<bool, RedisInsertError> {
        let gate = (h.h1 as usize) % UNIQUE_GATES;
        let _gate = self.unique_gates.lock_pair(gate, gate);
        if (0..self.live()).rev().any(|i| self.sub(i).holds(h)) {
            return Ok(false);
        }
        self.insert_hash(h).map(|()| true)
    }

    pub(crate) fn check_expansions(&self) -> Result<(), RedisInsertError> {
        if self.live() >= self.max_expansions as usize {
            return Err(RedisInsertError::MaxExpansionsReached);
        }
        Ok(())
    }

    /// RedisBloom's insert: the lowest free slot of bucket `h1`, then `h2`, in every sub-filter
    /// from the newest; then a kick walk in the newest; then growth.
    pub(crate) fn insert_hash(&self, h: &ItemHash) -> Result<(), RedisInsertError> {
        'retry: loop {
            let live = self.live();
            for i in (0..live).rev() {
                let sub = self.sub(i);
                if sub.looks_full(sub.pair(h)) {
                    continue;
                }
                let guard = sub.lock_item(h);
                if i >= self.live() {
                    continue 'retry; // dropped by a compaction meanwhile
                }
                if let Some(at) = sub.free_slot(sub.pair(h)) {
                    sub.write_slot(at, 0, h.fp);
                    guard.add_items(1);
                    return Ok(());
                }
            }
            let newest = self.sub(live - 1);
            let start = newest.pair(h).0;
            let max_iterations = self.geometry.max_iterations;
            match kick(newest, h.fp, start, max_iterations, || self.live() == live) {
                KickOutcome::Placed(guard) => {
                    guard.add_items(start, 1);
                    return Ok(());
                }
                KickOutcome::Stale => continue 'retry,
                KickOutcome::NoRoom => {}
            }
            if self.geometry.expansion == 0 {
                return Err(RedisInsertError::Full);
            }
            self.grow(live)?;
        }
    }

    /// Adds sub-filter `seen` (a power of two times the first one's buckets) unless the count
    /// changed since the caller saw `seen`.
    fn grow(&self, seen: usize) -> Result<(), RedisInsertError> {
        let _grow = self.grow_lock.lock();
        // Relaxed: `published` is only written under this lock.
        if self.published.load(Ordering::Relaxed) != seen {
            return Ok(());
        }
        let cell = self
            .subs
            .cell(seen)
            .ok_or(RedisInsertError::MaxExpansionsReached)?;
        if cell.get().is_none() {
            let buckets = self
                .geometry
                .sub_buckets(seen as u16)
                .filter(|_| seen <= usize::from(u16::MAX))
                .ok_or(RedisInsertError::GrowthFailed { bytes: usize::MAX })?;
            let sub = SubFilter::new(buckets, self.geometry.bucket_size)
                .map_err(|e| RedisInsertError::GrowthFailed { bytes: e.bytes })?;
            if cell.set(Box::new(sub)).is_err() {
                unreachable!("sub-filters are only set under the grow lock");
            }
        }
        // Release: a reader that sees the new count sees the sub-filter set above.
        self.published.store(seen + 1, Ordering::Release);
        Ok(())
    }

    /// `CF.DEL`: removes one copy of the item, from the newest sub-filter that has one (bucket
    /// `h1` first, lowest slot first); returns whether one was found. Like Redis, it may then
    /// compact the filter (when it has several sub-filters and the deletes since the last
    /// compaction exceed a tenth of the items).
    ///
    /// Only remove items you added: removing another may remove the fingerprint of an item
    /// that collides with it.
    pub fn remove(&self, item: impl AsRef<[u8]>) -> bool {
        self.remove_hash(&ItemHash::of(item.as_ref()))
    }

    /// `remove` of a hashed item.
    pub(crate) fn remove_hash(&self, h: &ItemHash) -> bool {
        let removed = (0..self.live()).rev().any(|i| {
            let sub = self.sub(i);
            let guard = sub.lock_item(h);
            match sub.slot_of(sub.pair(h), h.fp) {
                Some(at) => {
                    sub.write_slot(at, h.fp, 0);
                    guard.add_items(-1);
                    true
                }
                None => false,
            }
        });
        if removed {
            // Relaxed: an independent counter, read by the compaction check below.
            self.deletes.fetch_add(1, Ordering::Relaxed);
            if self.live() > 1 && self.compaction_due() {
                self.compact_with(false, true);
            }
        }
        removed
    }

    /// RedisBloom's auto-compaction rule: `numDeletes > numItems × 0.1`, in doubles.
    fn compaction_due(&self) -> bool {
        // Relaxed: a heuristic trigger; the compaction re-checks it under its locks.
        let deletes = self.deletes.load(Ordering::Relaxed) as f64;
        deletes > self.items() as f64 * 0.1
    }

    /// `CF.COMPACT`: moves fingerprints from newer sub-filters into older ones where their
    /// buckets have room, and drops newest sub-filters left empty.
    pub fn compact(&self) {
        self.compact_with(true, false);
    }

    /// `numItems`: fingerprints in every sub-filter, dropped ones included (they are empty).
    fn items(&self) -> u64 {
        self.subs.all().map(|s| s.len() as u64).sum()
    }

    /// Every live sub-filter frozen (writers wait, readers go on) and growth held off until the
    /// guard is dropped (see `freeze::freeze`).
    ///
    /// None of the caller's code runs while it is held (dumps copy the bytes, then encode and
    /// send them), so no whole-filter operation of this filter can start inside another on the
    /// same thread: the mark `freeze` takes is never found, and would panic rather than wait.
    fn frozen(&self) -> Frozen<'_, SubFilter> {
        let live = move || (0..self.live()).map(move |i| self.sub(i));
        freeze::freeze(self, &self.grow_lock, live, SubFilter::freeze)
            .unwrap_or_else(|nested| nested.panic())
    }

    /// RedisBloom's compaction (`cont`: `CF.COMPACT` goes on past a sub-filter it could not
    /// empty; the automatic one stops there). `auto`: re-check the trigger under the freeze, so
    /// that racing deletes compact once.
    fn compact_with(&self, cont: bool, auto: bool) {
        let frozen = self.frozen();
        if auto && !self.compaction_due() {
            return;
        }
        // Relaxed, then a Release fence: a count that sees any move sees the odd value.
        // Only one compaction runs at a time (the grow lock), so load and store suffice.
        let seq = self.compacting.load(Ordering::Relaxed);
        self.compacting.store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        super::compact::compact(frozen.parts(), cont, |live| {
            // Release: a reader or writer that sees the smaller count sees the emptied
            // sub-filter's erases.
            self.published.store(live, Ordering::Release);
        });
        // Release: a count that reads this sees every move before it.
        self.compacting.store(seq + 2, Ordering::Release);
        // Relaxed: read by the trigger, which re-checks under the freeze.
        self.deletes.store(0, Ordering::Relaxed);
    }

    /// Number of stored items (fingerprints): `CF.INFO`'s `Number of items inserted`. Exact
    /// when no writer is running; while writers run, a sum taken at slightly different moments.
    ///
    /// ```
    /// use atomic_cuckoo::redisbloom::RedisCuckooFilter;
    ///
    /// let f = RedisCuckooFilter::reserve(100)?;
    /// f.insert("a").unwrap();
    /// f.insert("a").unwrap();
    /// assert_eq!(f.len(), 2);
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn len(&self) -> usize {
        // Items fill slots of memory this process holds, so the count fits a `usize`.
        usize::try_from(self.items()).unwrap_or(usize::MAX)
    }

    /// Whether [`len`](RedisCuckooFilter::len) is zero.
    ///
    /// ```
    /// use atomic_cuckoo::redisbloom::RedisCuckooFilter;
    ///
    /// assert!(RedisCuckooFilter::reserve(100)?.is_empty());
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.items() == 0
    }

    /// `CF.INFO`.
    pub fn info(&self) -> RedisInfo {
        let live = self.live();
        let bytes = (0..live).map(|i| self.sub(i).bytes() as u64);
        RedisInfo {
            size: params::info_size(bytes),
            buckets: self.geometry.buckets,
            filters: live as u64,
            items: self.items(),
            // Relaxed: a statistic.
            deletes: self.deletes.load(Ordering::Relaxed),
            bucket_size: u64::from(self.geometry.bucket_size),
            expansion: u64::from(self.geometry.expansion),
            max_iterations: u64::from(self.geometry.max_iterations),
        }
    }

    /// The header and every sub-filter's bytes, at one moment (writers wait meanwhile).
    pub(crate) fn snapshot(&self) -> (Header, Vec<Vec<u8>>) {
        let frozen = self.frozen();
        let held = frozen.parts();
        let data: Vec<Vec<u8>> = held.iter().map(|(s, g)| s.frozen_bytes(g)).collect();
        let header = Header {
            items: super::raw::occupied_slots(&data),
            buckets: self.geometry.buckets,
            // Relaxed: deletes change only under a sub-filter's stripes, frozen now.
            deletes: self.deletes.load(Ordering::Relaxed),
            filters: held.len() as u64,
            bucket_size: self.geometry.bucket_size,
            max_iterations: self.geometry.max_iterations,
            expansion: self.geometry.expansion,
        };
        (header, data)
    }

    /// `CF.SCANDUMP key 0, 1, …`: every reply with data, in order, of one consistent state
    /// (the iterator and the bytes). Empty for an empty filter, as Redis returns nothing then.
    pub fn scandump(&self) -> Vec<(u64, Vec<u8>)> {
        let (header, data) = self.snapshot();
        let slices: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        chunks::scandump(&header, &slices)
    }

    /// A `DUMP` payload of the filter for `RESTORE`, for a server of RDB version
    /// `rdb_version` or newer.
    ///
    /// Valid versions are 9 to 12. `RESTORE` takes a payload of its server's RDB version or
    /// an older one: 9 ([`PORTABLE_RDB_VERSION`](super::PORTABLE_RDB_VERSION)) restores on
    /// every server, 10 on Redis 7.0 and later, 11 on 7.2 and later, 12 on 7.4 and 8.x.
    /// Another value is written as given, and makes a payload that
    /// [`from_dump_payload`](RedisCuckooFilter::from_dump_payload) refuses
    /// ([`LoadError::RdbVersion`]), as does Redis for a version newer than its own.
    /// `export_to` (feature `redis`) picks the version from the server's.
    ///
    /// ```
    /// use atomic_cuckoo::redisbloom::{RedisCuckooFilter, PORTABLE_RDB_VERSION};
    ///
    /// let f = RedisCuckooFilter::reserve(100)?;
    /// f.insert("a").unwrap();
    /// let payload = f.dump_payload(PORTABLE_RDB_VERSION);
    /// assert!(RedisCuckooFilter::from_dump_payload(&payload)?.contains("a"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dump_payload(&self, rdb_version: u16) -> Vec<u8> {
        let (header, data) = self.snapshot();
        let slices: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        payload::encode(&header, &slices, rdb_version)
    }

    /// A filter from `CF.SCANDUMP` replies (as [`scandump`](RedisCuckooFilter::scandump) or a
    /// server returns them), checked before anything is allocated for them.
    ///
    /// **No checksum.** Redis's `SCANDUMP` format carries none: the checks here catch a
    /// damaged header and counters that disagree with the slots, but a flipped bit in a data
    /// chunk often still gives a consistent filter, a different one, that answers some lookups
    /// wrongly. Where integrity matters (chunks stored or sent over an unchecked channel), use
    /// `DUMP` payloads: [`dump_payload`](RedisCuckooFilter::dump_payload) and
    /// [`from_dump_payload`](RedisCuckooFilter::from_dump_payload), whose CRC-64 refuses any
    /// single flipped bit.
    ///
    /// # Errors
    ///
    /// A [`LoadError`] for anything Redis would refuse, and for what it would accept but is
    /// corrupt or could crash it.
    pub fn from_chunks<'a>(
        chunks: impl IntoIterator<Item = (u64, &'a [u8])>,
    ) -> Result<Self, LoadError> {
        Self::from_raw(chunks::assemble(chunks)?)
    }

    /// A filter from a `DUMP` payload: one made by
    /// [`dump_payload`](RedisCuckooFilter::dump_payload), or Redis's own (LZF-compressed or
    /// not).
    ///
    /// # Errors
    ///
    /// A [`LoadError`] for a payload that is truncated, corrupt (checksum), not a cuckoo
    /// filter, or inconsistent.
    pub fn from_dump_payload(payload: &[u8]) -> Result<Self, LoadError> {
        Self::from_raw(payload::decode(payload)?)
    }

    fn from_raw(raw: RawFilter) -> Result<Self, LoadError> {
        let subs = subs_from_bytes(raw.geometry, &raw.filters).map_err(|e| {
            LoadError::AllocationFailed {
                bytes: e.bytes as u64,
            }
        })?;
        Ok(Self::with_subs(
            raw.geometry,
            params::DEFAULT_MAX_EXPANSIONS,
            subs,
            raw.header.deletes,
        ))
    }

    /// Heap bytes held: every sub-filter's slots and stripes (dropped ones included).
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.subs.heap_bytes()
            + self.subs.all().map(SubFilter::heap_bytes).sum::<usize>()
    }
}

/// A panic that unwinds out of an operation leaves the filter whole and usable, so a filter may
/// be used again after [`catch_unwind`](std::panic::catch_unwind).
///
/// No code of the caller runs while the filter is between two states: items are turned into
/// bytes (their `AsRef<[u8]>`) and hashed, and a batch call's iterator is advanced, before any
/// lock is taken. Every lock and freeze is released by a guard's `Drop`, so unwinding releases
/// it, and the locks do not poison. After such a panic the filter holds every item whose
/// insert returned (of a batch call, the items up to some point), and other threads go on.
impl RefUnwindSafe for RedisCuckooFilter {}

/// See the [`RefUnwindSafe`] implementation.
impl UnwindSafe for RedisCuckooFilter {}

impl Clone for RedisCuckooFilter {
    /// A deep copy of one consistent state, taken like a dump (writers wait while it copies,
    /// lookups do not): the same bytes, counters and settings, as `DUMP` and `RESTORE` would
    /// give.
    ///
    /// # Panics
    ///
    /// If memory for the copy runs out.
    ///
    /// ```
    /// use atomic_cuckoo::redisbloom::RedisCuckooFilter;
    ///
    /// let f = RedisCuckooFilter::reserve(100)?;
    /// f.insert("a").unwrap();
    /// let copy = f.clone();
    /// f.insert("b").unwrap();
    /// assert!(copy.contains("a") && copy.len() == 1);
    /// let same = RedisCuckooFilter::reserve(100)?;
    /// same.insert("a").unwrap();
    /// assert_eq!(copy.scandump(), same.scandump()); // byte for byte
    /// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
    /// ```
    fn clone(&self) -> Self {
        let (header, data) = self.snapshot();
        let subs = subs_from_bytes(self.geometry, &data).unwrap_or_else(|e| {
            panic!(
                "RedisCuckooFilter::clone: {} bytes could not be allocated",
                e.bytes
            )
        });
        Self::with_subs(self.geometry, self.max_expansions, subs, header.deletes)
    }
}

/// Sub-filters of geometry `g` holding `data`, one slice of slot bytes each, in order (shapes
/// already checked: a validated load, or a live filter's own dump).
fn subs_from_bytes(g: Geometry, data: &[Vec<u8>]) -> Result<Vec<SubFilter>, AllocationFailed> {
    data.iter()
        .enumerate()
        .map(|(i, bytes)| {
            let buckets = g
                .sub_buckets(i as u16)
                .expect("a checked sub-filter's shape");
            SubFilter::from_bytes(buckets, g.bucket_size, bytes)
        })
        .collect()
}

/// Runs `each` on the items' hashes in order, `BATCH` at a time, after `touch` of every hash
/// of the batch (see `RedisCuckooFilter::touch`); stops at the first error.
pub(crate) fn in_hashed_batches<I, E>(
    items: I,
    touch: impl Fn(&ItemHash) -> u64,
    mut each: impl FnMut(&ItemHash) -> Result<(), E>,
) -> Result<(), E>
where
    I: IntoIterator,
    I::Item: AsRef<[u8]>,
{
    let mut items = items.into_iter();
    let mut batch = [ItemHash::from_hash(0); BATCH];
    loop {
        let mut n = 0;
        for (slot, item) in batch.iter_mut().zip(items.by_ref()) {
            *slot = ItemHash::of(item.as_ref());
            n += 1;
        }
        let hashes = &batch[..n];
        let sink = hashes.iter().fold(0, |sink, h| sink ^ touch(h));
        std::hint::black_box(sink);
        for h in hashes {
            each(h)?;
        }
        if n < BATCH {
            return Ok(());
        }
    }
}

impl fmt::Debug for RedisCuckooFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.info();
        f.debug_struct("RedisCuckooFilter")
            .field("items", &info.items)
            .field("filters", &info.filters)
            .field("buckets", &info.buckets)
            .field("bucket_size", &info.bucket_size)
            .field("expansion", &info.expansion)
            .field("max_iterations", &info.max_iterations)
            .field("max_expansions", &self.max_expansions)
            .field("deletes", &info.deletes)
            .finish()
    }
}
