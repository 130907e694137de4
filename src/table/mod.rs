//! One cuckoo table: bucket words, their lock stripes, and the limits of a search.
//!
//! `read.rs` holds the wait-free lookups, `write.rs` inserts and removes, `path.rs` the search
//! for a cuckoo path and the moves that execute it.

mod batch;
mod path;
mod read;
mod storage;
mod write;

use crate::bucket_word::WordLayout;
use crate::hashing::{ItemKey, KeyMapper, Nesting};
use crate::stripe::{FreezeGuard, StripeSet};
use crate::sync::{AtomicU64, Ordering};

pub(crate) use batch::{BATCH, PREFETCH_AHEAD};
pub(crate) use read::Lookup;
pub(crate) use storage::BucketWords;
pub(crate) use write::{Multiset, NoRoom, PairState, Placed, Unique};

/// Bounds on the work of one operation (guarantees 2 and 3: readers finish in a bounded number
/// of steps, and an insert that finds no room gives up without having changed anything).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Optimistic attempts of a lookup before it answers "maybe present".
    pub(crate) read_attempts: u32,
    /// Buckets a path search may visit.
    pub(crate) path_nodes: u32,
    /// Longest cuckoo path, in hops.
    pub(crate) path_depth: u32,
    /// Place/search/move rounds of one insert before it reports `Full`.
    pub(crate) insert_rounds: u32,
}

impl Limits {
    pub(crate) const DEFAULT: Limits = Limits {
        read_attempts: 64,
        path_nodes: 2048,
        path_depth: 8,
        insert_rounds: 16,
    };
}

/// The shape of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableShape {
    pub(crate) buckets: usize,
    pub(crate) bits: u32,
    pub(crate) stripes: usize,
    /// Buckets of the first level of its filter, which this table nests in (see `hashing`).
    pub(crate) base_buckets: usize,
    /// Fingerprint width of the first level of its filter.
    pub(crate) base_bits: u32,
}

impl TableShape {
    /// A table that nests only in itself: a filter's first level.
    pub(crate) fn flat(buckets: usize, bits: u32, stripes: usize) -> Self {
        TableShape {
            buckets,
            bits,
            stripes,
            base_buckets: buckets,
            base_bits: bits,
        }
    }

    /// How keys are derived in this table.
    pub(crate) fn nesting(&self) -> Nesting {
        Nesting {
            buckets: self.buckets,
            bits: self.bits,
            base_buckets: self.base_buckets,
            base_bits: self.base_bits,
        }
    }
}

/// The bucket words could not be allocated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AllocationFailed {
    pub(crate) bytes: usize,
}

pub(crate) struct Table {
    shape: TableShape,
    layout: WordLayout,
    mapper: KeyMapper,
    words: BucketWords,
    stripes: StripeSet,
    limits: Limits,
}

impl Table {
    /// A table of zeroed (empty) buckets. `shape` must already be valid: `bits` in range, a
    /// valid nesting (see `Nesting::is_valid`), `stripes` a power of two. A large table's pages
    /// are backed on first touch (see `storage`); `fault_in` backs them all at once.
    pub(crate) fn new(
        shape: TableShape,
        limits: Limits,
        huge_pages: bool,
    ) -> Result<Self, AllocationFailed> {
        // The search's nodes store depths in a u8 and parents in a u32 below a sentinel.
        debug_assert!(limits.path_depth < 255 && limits.path_nodes < u32::MAX);
        let layout = WordLayout::new(shape.bits).expect("fingerprint width validated by caller");
        Ok(Table {
            shape,
            layout,
            mapper: KeyMapper::new(shape.nesting()),
            words: BucketWords::zeroed(shape.buckets, huge_pages)?,
            stripes: StripeSet::new(shape.stripes),
            limits,
        })
    }

    /// Backs every page of this new, empty table now, on this thread: a table built off the
    /// insert path (level 0 at build, a level prepared ahead) then costs no insert a page fault.
    pub(crate) fn fault_in(&mut self) {
        self.words.fault_in();
    }

    /// How many of the pages of the bucket words are resident now, of how many.
    #[cfg(all(test, target_os = "linux", not(loom)))]
    pub(crate) fn resident_pages(&self) -> (usize, usize) {
        self.words.resident_pages()
    }

    /// A table holding `words` (checked by the caller: lanes in range, `items` of them full).
    pub(crate) fn from_words(
        shape: TableShape,
        words: BucketWords,
        items: usize,
        limits: Limits,
    ) -> Self {
        let layout = WordLayout::new(shape.bits).expect("fingerprint width validated by caller");
        debug_assert_eq!(words.len(), shape.buckets);
        let mut stripes = StripeSet::new(shape.stripes);
        stripes.set_items(items);
        Table {
            shape,
            layout,
            mapper: KeyMapper::new(shape.nesting()),
            words,
            stripes,
            limits,
        }
    }

    /// Freezes the table: no writer changes it until the guard is dropped, while lookups and
    /// counts go on (see `StripeSet::freeze`).
    pub(crate) fn freeze(&self) -> FreezeGuard<'_> {
        self.stripes.freeze()
    }

    /// The bucket words, read while `frozen` (this table's `freeze`) keeps writers out.
    pub(crate) fn frozen_words<'a>(
        &'a self,
        frozen: &'a FreezeGuard<'a>,
    ) -> impl Iterator<Item = u64> + 'a {
        debug_assert!(frozen.freezes(&self.stripes), "another table's freeze");
        // Relaxed: the freeze took every stripe after its last writer (Acquire), and no writer
        // has written since.
        self.words.iter().map(|w| w.load(Ordering::Relaxed))
    }

    pub(crate) fn shape(&self) -> TableShape {
        self.shape
    }

    pub(crate) fn layout(&self) -> &WordLayout {
        &self.layout
    }

    /// Where an item with this hash lives.
    #[inline]
    pub(crate) fn key(&self, hash: u64) -> ItemKey {
        self.mapper.key(hash)
    }

    #[inline]
    pub(crate) fn mapper(&self) -> &KeyMapper {
        &self.mapper
    }

    /// Total slots.
    pub(crate) fn slots(&self) -> usize {
        self.words.len() * self.layout.slots() as usize
    }

    /// Items stored (exact when no writer is running).
    pub(crate) fn len(&self) -> usize {
        self.stripes.items()
    }

    /// Bytes of heap memory held by the table.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words) + self.stripes.count() * 16
    }

    /// Items the table is sized for (see `params::items_for`): at least what it was built for.
    pub(crate) fn item_capacity(&self) -> usize {
        crate::params::items_for(self.shape.buckets, self.layout.bits())
    }

    /// Empties every bucket while `frozen` (this table's `freeze`) keeps writers out.
    ///
    /// No stripe is taken, so readers go on: one that overlaps the sweep may see some of the
    /// items and not others, which is a fair answer for items being cleared. Writers that come
    /// after see every zero: they pass the freeze's gate, which `Gate::open` publishes with a
    /// Release store after the sweep.
    pub(crate) fn clear_frozen(&self, frozen: &FreezeGuard<'_>) {
        debug_assert!(frozen.freezes(&self.stripes), "another table's freeze");
        for w in self.words.iter() {
            // Relaxed: see above.
            w.store(0, Ordering::Relaxed);
        }
        self.stripes.reset_items(Some(frozen));
    }

    /// A copy of this table, taken while `frozen` (this table's `freeze`) keeps writers out, so
    /// that it is one consistent state.
    pub(crate) fn copy_frozen(
        &self,
        frozen: &FreezeGuard<'_>,
        huge_pages: bool,
    ) -> Result<Table, AllocationFailed> {
        let words = BucketWords::zeroed(self.shape.buckets, huge_pages)?;
        for (to, from) in words.iter().zip(self.frozen_words(frozen)) {
            // Relaxed: the copy is not shared until it is returned.
            to.store(from, Ordering::Relaxed);
        }
        Ok(Table::from_words(
            self.shape,
            words,
            self.len(),
            self.limits,
        ))
    }

    /// The two buckets of a key (equal when the fingerprint maps the bucket onto itself).
    #[inline]
    pub(crate) fn buckets_of(&self, key: ItemKey) -> (usize, usize) {
        (
            key.primary,
            self.mapper.alternate(key.primary, key.fingerprint),
        )
    }

    #[inline]
    fn word(&self, bucket: usize) -> &AtomicU64 {
        &self.words[bucket]
    }

    /// Writes `fp` into a lane of `bucket` directly, bypassing the search (loom models use this
    /// to set up a kick chain). Returns false when the bucket is full.
    #[cfg(loom)]
    pub(crate) fn place_raw(&self, bucket: usize, fp: u64) -> bool {
        // The fingerprint's pair, as an insert would lock it (and charge its lower stripe).
        let guard = self
            .stripes
            .lock_pair(bucket, self.mapper.alternate(bucket, fp));
        let word = self.word(bucket).load(Ordering::Relaxed);
        let Some(shift) = self.layout.first_empty(word) else {
            return false;
        };
        self.word(bucket)
            .store(self.layout.with_lane(word, shift, fp), Ordering::Relaxed);
        guard.add_items(1);
        true
    }

    /// How many lanes of `bucket` hold `fp` right now (a loom model's view of the table).
    #[cfg(loom)]
    pub(crate) fn raw_count(&self, bucket: usize, fp: u64) -> u32 {
        let _guard = self.stripes.lock_pair_to_read(bucket, bucket);
        self.layout
            .count(self.word(bucket).load(Ordering::Relaxed), fp)
    }
}
