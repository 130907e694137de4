//! [`ExpandingFilter`]: a cuckoo filter that grows by doubling its one table in place, so a
//! lookup reads two buckets however far it has grown.
//!
//! `keys` says where an item lies at any size, `table` holds the packed lanes and splits them
//! on a doubling, `doubling` spreads a doubling over the inserts after it, `kicks` places an
//! entry by a random walk, `builder` picks the lane width for the target rate and the planned growth,
//! `snapshot` saves and restores a filter (validated, in a format of its own).

mod builder;
mod doubling;
mod keys;
mod kicks;
mod snapshot;
mod std_impls;
mod table;

use std::fmt;
use std::hash::{BuildHasher, Hash};

pub use builder::ExpandingBuilder;

use crate::error::InsertError;
use crate::hasher::DefaultHashBuilder;
use keys::{field_tail_bits, Key, KeyMap, Pos, ANCHOR_BITS};
use table::{Table, LANES};

/// Entries a table takes before it doubles: 95 % of its lanes (four-lane buckets fill to
/// about 97 % before an insert fails).
const MAX_LOAD: f64 = 0.95;

/// Moves of one random-walk kick chain before the table doubles.
const MAX_KICKS: u32 = 500;

/// Buckets of an unfinished doubling that each insert splits. A doubling has as many buckets
/// to split as the table had, and the next doubling comes at least 3.8 inserts per bucket
/// later, so two per insert finish it in the first eighth of that time.
const SPLITS_PER_INSERT: u64 = 2;

const ANCHOR_MASK: u64 = (1 << ANCHOR_BITS) - 1;

/// A cuckoo filter that grows without slowing its lookups: when it fills, its table doubles in
/// place, and a lookup still reads exactly two buckets.
///
/// Each stored entry keeps a few bits of its item's hash beyond what chooses its bucket; a
/// doubling turns one of those bits into a bucket bit, so no item needs to be seen again.
/// Older entries therefore keep fewer bits, and the lane width is chosen so that the rate
/// stays at the target for the planned number of doublings
/// ([`ExpandingBuilder::max_doublings`], 12 by default: 4096 times the first capacity).
///
/// Compared with a growing [`CuckooFilter`](crate::CuckooFilter), whose lookups probe one
/// table per level, this filter keeps the lookup cost of one table and takes less memory per
/// item at the same target, but its writes take `&mut self`: build it on one thread (or
/// behind a lock) and share it for reading, for example as `Arc<ExpandingFilter>` once built.
/// Lookups through `&self` can run on any number of threads.
///
/// A doubling is spread over the inserts that follow it: the insert that doubles only adds the
/// new buckets, and each insert then splits two old buckets (and those it touches), so no
/// insert waits for a whole table to be rewritten. Until every bucket is split, a lookup reads
/// one bit more per bucket (whether it is split);
/// [`finish_doubling`](ExpandingFilter::finish_doubling) splits the rest at once.
///
/// ```
/// use atomic_cuckoo::ExpandingFilter;
///
/// let mut filter = ExpandingFilter::builder()
///     .capacity(1_000)
///     .false_positive_rate(0.01)
///     .build()?;
/// for id in 0..100_000u64 {
///     filter.insert(&id)?;
/// }
/// assert!(filter.doublings() >= 6);
/// assert!((0..100_000u64).all(|id| filter.contains(&id)));
/// assert!(filter.false_positive_rate() <= 0.01);
/// assert!(filter.remove(&42u64));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ExpandingFilter<S = DefaultHashBuilder> {
    keys: KeyMap,
    table: Table,
    /// Doublings begun: the table has `base · 2^doublings` buckets.
    doublings: u32,
    /// The buckets the latest doubling has not split yet, if any.
    splitting: Option<Splitting>,
    /// The most doublings the lane width allows at the target rate.
    max_doublings: u32,
    /// Tail bits of a new entry: the lane width less the marker and the anchor.
    tail_bits: u32,
    /// Items stored (inserts less removes).
    items: usize,
    /// Lanes in use: items plus the extra copies of entries that ran out of tail bits.
    occupied: u64,
    /// Entries by tail length, for the rate estimate.
    by_tail: [u64; 32],
    target: f64,
    /// State of the kick chains' victim choice (xorshift).
    rng: u64,
    hasher: S,
}

/// The old buckets of a doubling in progress: a bit per bucket of the table before it (bucket
/// `home + base · high`), set once split.
#[derive(Clone, Debug)]
struct Splitting {
    /// A bit per old bucket, set once split.
    split: Vec<u64>,
    /// The next old bucket the inserts split.
    next: u64,
    /// Old buckets not split yet.
    left: u64,
}

impl Splitting {
    fn is_split(&self, old: u64) -> bool {
        self.split[(old / 64) as usize] >> (old % 64) & 1 == 1
    }
}

impl ExpandingFilter {
    /// A builder with the defaults: room for 1,000,000 items before the first doubling, a
    /// 1 % false-positive rate, 12 doublings planned.
    pub fn builder() -> ExpandingBuilder {
        ExpandingBuilder::default()
    }
}

impl<S: BuildHasher> ExpandingFilter<S> {
    fn key<T: Hash + ?Sized>(&self, item: &T) -> Key {
        self.keys.key(self.hasher.hash_one(item))
    }

    /// Whether `item` may be in the filter: `false` means it certainly is not.
    #[inline]
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let key = self.key(item);
        self.side_matches(&key, 0) | self.side_matches(&key, 1)
    }

    /// Where `key`'s bucket on `side` is now, and the doublings its entries have seen: the
    /// old bucket while a doubling has not split it yet.
    #[inline(always)]
    fn locate(&self, key: &Key, side: usize) -> (Pos, u32) {
        let k = self.doublings;
        match &self.splitting {
            Some(splitting) => {
                let old = key.pos(side, k - 1);
                if splitting.is_split(self.old_index(old)) {
                    (key.pos(side, k), k)
                } else {
                    (old, k - 1)
                }
            }
            None => (key.pos(side, k), k),
        }
    }

    /// The index of a bucket of the table before the latest doubling.
    #[inline(always)]
    fn old_index(&self, old: Pos) -> u64 {
        old.home + self.table.base() * old.high
    }

    /// Whether a lane of `key`'s bucket on `side` matches it, without a branch per lane.
    #[inline(always)]
    fn side_matches(&self, key: &Key, side: usize) -> bool {
        let (pos, doublings) = self.locate(key, side);
        let lanes = self.table.bucket(pos);
        let width = self.table.width();
        let lane_mask = (1u64 << width) - 1;
        let stream = key.stream[side] >> doublings;
        // Two lanes per 64-bit half (a lane has at most 32 bits): one 128-bit shift in all.
        let halves = [lanes as u64, (lanes >> (2 * width)) as u64];
        let entries = [0, 1, 2, 3]
            .map(|lane: u32| (halves[lane as usize / 2] >> ((lane % 2) * width)) & lane_mask);
        // Most lanes of an absent item's buckets differ in the anchor: test those first.
        if entries.iter().all(|e| e & ANCHOR_MASK != key.anchor) {
            return false;
        }
        let mut hit = false;
        for entry in entries {
            let field = entry >> ANCHOR_BITS;
            // An empty lane's field 0 never equals an expected field (its marker is set).
            let tail = field_tail_bits(field | 1);
            let expected = (1 << tail) | (stream & ((1 << tail) - 1));
            hit |= (entry & ANCHOR_MASK == key.anchor) & (field == expected);
        }
        hit
    }

    /// The lane of `key`'s bucket on `side` holding its longest matching entry, with that
    /// entry's tail length. The bucket must be split.
    fn matching_lane(&self, key: &Key, side: usize) -> Option<(u64, u32)> {
        let pos = key.pos(side, self.doublings);
        let mut best = None;
        for lane in 0..LANES {
            let entry = self.table.get(pos, lane);
            if entry == 0 || entry & ANCHOR_MASK != key.anchor {
                continue;
            }
            let field = entry >> ANCHOR_BITS;
            let tail = field_tail_bits(field);
            if field == key.field(side, self.doublings, tail)
                && best.is_none_or(|(_, longest)| tail > longest)
            {
                best = Some((lane, tail));
            }
        }
        best
    }

    /// Adds `item`, doubling the table when it is full. Inserting an item twice stores two
    /// copies (see [`remove`](Self::remove)).
    ///
    /// # Errors
    ///
    /// Every item stored before a failed insert is still stored, and `len` is unchanged. The
    /// table may have doubled for it, and a doubling in progress may have split more buckets;
    /// neither changes an answer.
    /// - [`InsertError::ItemBucketsFull`]: both of the item's buckets hold only copies of it
    ///   (one item is stored at most eight times), or no room could be made in them while the
    ///   table is below half its doubling load, or below 90 % of it with the buckets holding
    ///   only repeated copies of a few items, which a doubling would not separate. An entry's
    ///   other bucket depends on 5 of its bits, so one item in 32 of those that share a bucket
    ///   with a hot key (an item stored many times) shares both, and is refused while the hot
    ///   key's copies fill them.
    /// - [`InsertError::MaxDoublingsReached`]: the table is at its doubling load (95 % of its
    ///   lanes) and has doubled as often as its lane width allows at the target rate.
    /// - [`InsertError::GrowthFailed`]: the new buckets could not be allocated.
    pub fn insert<T: Hash + ?Sized>(&mut self, item: &T) -> Result<(), InsertError> {
        let key = self.key(item);
        self.split_next(SPLITS_PER_INSERT);
        loop {
            self.split_buckets_of(&key);
            if self.occupied >= self.load_limit() {
                // A hot key is refused before anything grows for it.
                if self.buckets_hold_only(&key) {
                    return Err(InsertError::ItemBucketsFull);
                }
                if self.doublings == self.max_doublings {
                    return Err(InsertError::MaxDoublingsReached {
                        doublings: self.max_doublings,
                    });
                }
                self.double()?;
                continue;
            }
            if self.place(&key) {
                self.items += 1;
                self.occupied += 1;
                self.by_tail[self.tail_bits as usize] += 1;
                return Ok(());
            }
            // A doubling separates entries of different items (by their next bit), but never
            // copies of one item: buckets jammed by repeated items stay jammed, so the table
            // does not grow for them unless it is nearly due (90 % of the doubling load). Nor
            // does it grow for a failed walk below half that load, where only such jams (some
            // not seen from these two buckets) make walks fail: so a jam costs at most one
            // doubling, and the table stays at least a quarter full.
            let limit = self.load_limit();
            if self.buckets_hold_only(&key)
                || (self.occupied < limit * 9 / 10 && self.buckets_jammed(&key))
                || self.occupied < limit / 2
            {
                return Err(InsertError::ItemBucketsFull);
            }
            if self.doublings == self.max_doublings {
                return Err(InsertError::MaxDoublingsReached {
                    doublings: self.max_doublings,
                });
            }
            self.double()?;
        }
    }

    /// Adds `item` unless it may be present already (set semantics): `Ok(true)` if it was
    /// added, `Ok(false)` if `contains` already answered `true` for it (it, or an item whose
    /// entry matches it, is stored). Remove an item added this way once per `Ok(true)`.
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert).
    ///
    /// ```
    /// let mut filter = atomic_cuckoo::ExpandingFilter::builder().capacity(100).build()?;
    /// assert_eq!(filter.insert_unique("a"), Ok(true));
    /// assert_eq!(filter.insert_unique("a"), Ok(false));
    /// assert_eq!(filter.len(), 1);
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn insert_unique<T: Hash + ?Sized>(&mut self, item: &T) -> Result<bool, InsertError> {
        if self.contains(item) {
            return Ok(false);
        }
        self.insert(item).map(|()| true)
    }

    /// Removes one copy of `item`; `false` if none matched.
    ///
    /// Remove only items you inserted (once per insert): an item never inserted may match, and
    /// so remove, another item's entry. Of the entries that match, the one with the most bits
    /// left is removed: any other item that matches it also matches every shorter one, so the
    /// remove cannot make an inserted item unfindable.
    pub fn remove<T: Hash + ?Sized>(&mut self, item: &T) -> bool {
        let key = self.key(item);
        self.split_buckets_of(&key);
        let (side, (lane, tail)) = match (self.matching_lane(&key, 0), self.matching_lane(&key, 1))
        {
            (None, None) => return false,
            (Some(a), None) => (0, a),
            (None, Some(b)) => (1, b),
            (Some(a), Some(b)) => {
                if b.1 > a.1 {
                    (1, b)
                } else {
                    (0, a)
                }
            }
        };
        self.table.set(key.pos(side, self.doublings), lane, 0);
        // An item never inserted may have matched a copy left behind by a doubling (see
        // `table`), which no item counts: `len` never goes below zero for it.
        self.items = self.items.saturating_sub(1);
        self.occupied -= 1;
        self.by_tail[tail as usize] -= 1;
        true
    }

    /// Removes every item, keeping the table's size.
    pub fn clear(&mut self) {
        self.table.clear();
        self.splitting = None;
        self.items = 0;
        self.occupied = 0;
        self.by_tail = [0; 32];
    }

    /// Items stored (inserts less removes).
    pub fn len(&self) -> usize {
        self.items
    }

    /// Whether no item is stored.
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Items the table takes before its next doubling.
    pub fn capacity(&self) -> usize {
        let extra = self.occupied - self.items as u64;
        usize::try_from(self.load_limit().saturating_sub(extra)).unwrap_or(usize::MAX)
    }

    fn load_limit(&self) -> u64 {
        (self.table.buckets() as f64 * LANES as f64 * MAX_LOAD) as u64
    }

    /// Lanes in use over all lanes: items, and the copies doublings made of entries with no
    /// tail bit left. The table doubles at 0.95.
    pub fn load_factor(&self) -> f64 {
        self.occupied as f64 / (self.table.buckets() * LANES) as f64
    }

    /// Doublings so far.
    pub fn doublings(&self) -> u32 {
        self.doublings
    }

    /// The most doublings this filter makes: as many as its lane width allows at the target
    /// rate (at least what the builder asked for). A full table past them refuses inserts.
    pub fn max_doublings(&self) -> u32 {
        self.max_doublings
    }

    /// Buckets in the table (four lanes each).
    pub fn buckets(&self) -> u64 {
        self.table.buckets()
    }

    /// Bits per lane: one marker bit, then the entry's bits (a new entry uses all of them).
    pub fn lane_bits(&self) -> u32 {
        self.table.width()
    }

    /// The false-positive rate the filter was built for.
    pub fn target_false_positive_rate(&self) -> f64 {
        self.target
    }

    /// The expected false-positive rate of a lookup of an absent item now, from the bits every
    /// stored entry has left: `2 · Σ 2^-(bits of an entry) / buckets`. It rises as the filter
    /// fills and doubles, and stays at or below the target until
    /// [`max_doublings`](Self::max_doublings).
    pub fn false_positive_rate(&self) -> f64 {
        let sum: f64 = (0..32)
            .map(|tail| self.by_tail[tail] as f64 * (-f64::from(ANCHOR_BITS + tail as u32)).exp2())
            .sum();
        2.0 * sum / self.table.buckets() as f64
    }

    /// Bytes of memory the filter holds: the table and the filter itself.
    pub fn memory_usage(&self) -> usize {
        let splitting = self
            .splitting
            .as_ref()
            .map_or(0, |s| s.split.capacity() * 8);
        self.table.bytes() + splitting + std::mem::size_of::<Self>()
    }

    /// The filter's hasher.
    pub fn hasher(&self) -> &S {
        &self.hasher
    }
}

impl<S> fmt::Debug for ExpandingFilter<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpandingFilter")
            .field("items", &self.items)
            .field("buckets", &self.table.buckets())
            .field("lane_bits", &self.table.width())
            .field("doublings", &self.doublings)
            .field("doubling_in_progress", &self.splitting.is_some())
            .field("max_doublings", &self.max_doublings)
            .field("target_false_positive_rate", &self.target)
            .finish_non_exhaustive()
    }
}
