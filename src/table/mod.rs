//! One cuckoo table: bucket words, their lock stripes, and the limits of a search.
//!
//! `read.rs` holds the wait-free lookups, `write.rs` inserts and removes, `path.rs` the search
//! for a cuckoo path and the moves that execute it.

mod batch;
mod path;
mod read;
mod write;

use crate::bucket_layout::{join_words, Access, Span};
use crate::bucket_layout::{Bucket, BucketLayout, LayoutKind};
use crate::cuckoo_path::SearchLimits;
use crate::hashing::{ItemKey, KeyMapper, Nesting};
use crate::optimistic_read::READ_ATTEMPTS;
use crate::stripe::{FreezeGuard, StripeSet};

/// How many consecutive buckets share a stripe: the runs that fill whole words (see
/// `BucketLayout::word_group_shift`), so that every word belongs to one stripe.
fn stripe_group_shift(layout: &BucketLayout) -> u32 {
    // Mutant `words_shared_by_stripes`: a stripe per bucket, as in a one-word table, so that
    // one word holds buckets of several stripes.
    if cfg!(loom_mutant = "words_shared_by_stripes") {
        return 0;
    }
    layout.word_group_shift()
}

/// The stripes of a table, counting its items (in shards that also take the claims of a plain
/// table's inserts, see `Table::claim_as`).
fn stripes_for(shape: &TableShape, layout: &BucketLayout) -> StripeSet {
    let words = layout.words_for(shape.buckets).unwrap_or(0);
    StripeSet::grouped(shape.stripes, stripe_group_shift(layout)).counting(words * 8)
}

/// Whether a lookup's miss must be validated against the stripes of both of its buckets, not
/// only the primary's.
///
/// A write into bucket `b` holds `b`'s stripe but maybe not that of the other bucket `a` of an
/// item stored in `b`. In a plain layout it leaves that item's lane as it was, so a reader needs
/// no more than `a`'s stripe. A semi-sorted bucket is re-encoded as a whole (its lanes re-sorted,
/// the index rewritten), and when it spans several words a reader's loads may see some words
/// before the write and some after: a code that decodes to neither, in which the item is
/// missing. Only `b`'s stripe tells such a reader that its read was torn.
fn misses_need_both_stripes(layout: &BucketLayout) -> bool {
    // Mutant `compact_one_stripe_miss`: compact misses validated against `a`'s stripe alone.
    !cfg!(loom_mutant = "compact_one_stripe_miss")
        && layout.kind() == LayoutKind::SemiSorted
        && layout.span() != Span::One
}

/// [`Access`] as a const generic parameter of the specialised hot paths.
const WORD: u8 = 0;
const WITHIN: u8 = 1;
const STRADDLING: u8 = 2;
const SORTED64: u8 = 3;
const GENERAL: u8 = 4;

/// Whether a bucket of access `A` is one part of plain lanes (`Bucket::lanes`): the
/// accesses whose write paths use `WordLayout`'s operations directly.
const fn is_one_part(access: u8) -> bool {
    matches!(access, WORD | WITHIN | STRADDLING)
}

const fn access_code(access: Access) -> u8 {
    match access {
        Access::Word => WORD,
        Access::Within => WITHIN,
        Access::Straddling => STRADDLING,
        Access::Sorted64 => SORTED64,
        Access::General => GENERAL,
    }
}
use crate::sync::{AtomicU64, Ordering};

pub(crate) use crate::cuckoo_path::{NoRoom, Placed};
#[cfg(all(test, not(loom)))]
pub(crate) use crate::storage::FAIL_ALLOCATION;
pub(crate) use crate::storage::{AllocationFailed, BucketWords};
pub(crate) use batch::{BATCH, PREFETCH_AHEAD};
pub(crate) use write::{Multiset, PairState, Unique};

/// Bounds on the work of one operation (guarantees 2 and 3: readers finish in a bounded number
/// of steps, and an insert that finds no room gives up without having changed anything).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Optimistic attempts of a lookup or count before it gives up: the crate's one
    /// [`READ_ATTEMPTS`], or fewer in a loom model that wants an impatient reader.
    pub(crate) read_attempts: u32,
    /// How far a search for a cuckoo path goes.
    pub(crate) path: SearchLimits,
    /// Place/search/move rounds of one insert before it reports `Full`.
    pub(crate) insert_rounds: u32,
}

impl Limits {
    pub(crate) const DEFAULT: Limits = Limits {
        read_attempts: READ_ATTEMPTS,
        path: SearchLimits::DEFAULT,
        insert_rounds: 16,
    };
}

/// The shape of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableShape {
    /// How the buckets are laid out in the words.
    pub(crate) layout: LayoutKind,
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
    pub(crate) fn flat(layout: LayoutKind, buckets: usize, bits: u32, stripes: usize) -> Self {
        TableShape {
            layout,
            buckets,
            bits,
            stripes,
            base_buckets: buckets,
            base_bits: bits,
        }
    }

    /// The bucket geometry; `None` when the width is out of range for the layout.
    pub(crate) fn bucket_layout(&self) -> Option<BucketLayout> {
        BucketLayout::new(self.layout, self.bits)
    }

    /// Words of the table's array (see `BucketLayout::words_for`); `None` when the shape is
    /// invalid or the count overflows.
    pub(crate) fn words(&self) -> Option<usize> {
        self.bucket_layout()?.words_for(self.buckets)
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

pub(crate) struct Table {
    shape: TableShape,
    layout: BucketLayout,
    /// Whether a miss must be validated against the stripes of both buckets (see
    /// `misses_need_both_stripes`).
    misses_need_both: bool,
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
        debug_assert!(limits.path.depth < 255 && limits.path.nodes < u32::MAX);
        let layout = shape
            .bucket_layout()
            .expect("fingerprint width validated by caller");
        let words = layout
            .words_for(shape.buckets)
            .ok_or(AllocationFailed { bytes: usize::MAX })?;
        Ok(Table {
            shape,
            layout,
            misses_need_both: misses_need_both_stripes(&layout),
            mapper: KeyMapper::new(shape.nesting()),
            words: BucketWords::zeroed(words, huge_pages)?,
            stripes: stripes_for(&shape, &layout),
            limits,
        })
    }

    /// Backs every page of this new, empty table now, on this thread: a table built off the
    /// insert path (level 0 at a prefaulting build, a level prepared ahead) then costs no insert
    /// a page fault.
    pub(crate) fn fault_in(&mut self) {
        self.words.fault_in();
    }

    /// How many of the pages of the bucket words are resident now, of how many.
    #[cfg(all(test, target_os = "linux", not(loom)))]
    pub(crate) fn resident_pages(&self) -> (usize, usize) {
        self.words.resident_pages()
    }

    /// A table holding `words` (checked by the caller: as many as `shape.words()`, every
    /// bucket a valid code, bits past the last bucket zero, `items` lanes full).
    pub(crate) fn from_words(
        shape: TableShape,
        words: BucketWords,
        items: usize,
        limits: Limits,
    ) -> Self {
        let layout = shape
            .bucket_layout()
            .expect("fingerprint width validated by caller");
        debug_assert_eq!(Some(words.len()), layout.words_for(shape.buckets));
        let mut stripes = stripes_for(&shape, &layout);
        stripes.set_items(items);
        Table {
            shape,
            layout,
            misses_need_both: misses_need_both_stripes(&layout),
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

    pub(crate) fn layout(&self) -> &BucketLayout {
        &self.layout
    }

    /// Where an item with this hash lives.
    #[inline]
    pub(crate) fn key(&self, hash: u64) -> ItemKey {
        self.mapper.key(hash)
    }

    /// The table's key mapper (loom models place items by bucket and fingerprint).
    #[cfg(loom)]
    pub(crate) fn mapper(&self) -> &KeyMapper {
        &self.mapper
    }

    /// Total slots.
    pub(crate) fn slots(&self) -> usize {
        self.shape.buckets * self.layout.slots() as usize
    }

    /// Words of the table's array.
    pub(crate) fn word_count(&self) -> usize {
        self.words.len()
    }

    /// Items stored (exact when no writer is running).
    pub(crate) fn len(&self) -> usize {
        self.stripes.items()
    }

    /// Bytes of memory held by the table: its words and its stripes.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words) + self.stripes.bytes()
    }

    /// Items the table is sized for (see `params::items_for`): at least what it was built for.
    pub(crate) fn item_capacity(&self) -> usize {
        crate::params::items_for(self.shape.buckets, &self.layout)
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
        let words = BucketWords::zeroed(self.words.len(), huge_pages)?;
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

    /// Reads `bucket` with loads of `order` (one to three words, see `BucketLayout::span`).
    #[inline(always)]
    fn load(&self, bucket: usize, order: Ordering) -> Bucket {
        match self.layout.access() {
            Access::Word => self.load_as::<WORD>(bucket, order),
            Access::Within => self.load_as::<WITHIN>(bucket, order),
            Access::Straddling => self.load_as::<STRADDLING>(bucket, order),
            Access::Sorted64 => self.load_as::<SORTED64>(bucket, order),
            Access::General => self.load_as::<GENERAL>(bucket, order),
        }
    }

    /// `load` for a table whose layout's access is `A` (one of the consts below): the hot
    /// paths branch on the access once and run code specialised for it.
    #[inline(always)]
    fn load_as<const A: u8>(&self, bucket: usize, order: Ordering) -> Bucket {
        debug_assert_eq!(A, access_code(self.layout.access()));
        let at = self.locate_as::<A>(bucket);
        self.bucket_from::<A>(self.words_at::<A>(at, order), at.1)
    }

    /// Where `bucket` starts: its first word and the bit in it.
    #[inline(always)]
    fn locate_as<const A: u8>(&self, bucket: usize) -> (usize, u32) {
        if A == WORD {
            (bucket, 0)
        } else {
            self.layout.locate(bucket)
        }
    }

    /// The words a bucket starting at `at` spans, with loads of `order` (those it does not
    /// span read as 0).
    #[inline(always)]
    fn words_at<const A: u8>(&self, at: (usize, u32), order: Ordering) -> [u64; 3] {
        Self::words_in::<A>(&self.words, self.layout.span(), at, order)
    }

    /// `words_at` in `words` (a lookup takes the slice once: its pointer and length stay in
    /// registers across the loads).
    #[inline(always)]
    fn words_in<const A: u8>(
        words: &[AtomicU64],
        span: Span,
        (first, _): (usize, u32),
        order: Ordering,
    ) -> [u64; 3] {
        let word = |k: usize| words[first + k].load(order);
        // One bounds check for both words: `first` is a shift of a product, so `first + 2`
        // cannot overflow and the slice's check is one comparison.
        let two = |words: &[AtomicU64; 2]| [words[0].load(order), words[1].load(order), 0];
        match A {
            WORD | WITHIN => [word(0), 0, 0],
            STRADDLING => two(words[first..first + 2].try_into().expect("two words")),
            // A span of one word has no padding word to read past the last bucket.
            SORTED64 if span == Span::One => [word(0), 0, 0],
            SORTED64 => [word(0), word(1), 0],
            _ => match span {
                Span::One => [word(0), 0, 0],
                Span::Two => [word(0), word(1), 0],
                Span::Three => [word(0), word(1), word(2)],
            },
        }
    }

    /// Whether two reads of `words_at` saw the same words (only the words it loads count).
    #[inline(always)]
    fn same_words<const A: u8>(x: &[u64; 3], y: &[u64; 3]) -> bool {
        match A {
            WORD | WITHIN => x[0] == y[0],
            STRADDLING | SORTED64 => x[0] == y[0] && x[1] == y[1],
            _ => x == y,
        }
    }

    /// The bucket that `words_at` read, starting at bit `shift` of its first word.
    #[inline(always)]
    fn bucket_from<const A: u8>(&self, words: [u64; 3], shift: u32) -> Bucket {
        match A {
            WORD => self.layout.whole(words[0]),
            WITHIN => self.layout.within(words[0], shift),
            // The code's bits, as `Bucket` holds a semi-sorted bucket (a span of one word reads
            // its second word as 0, which the stride's mask drops).
            STRADDLING | SORTED64 => self.layout.straddling(words[0], words[1], shift),
            _ => self.layout.bucket_at(words, shift),
        }
    }

    /// The bucket that `words_at` read, for the lane operations only (`holds_as`,
    /// `occupied_as`, `first_empty_as`, `first_match_as`, `lane_as`, `put_as`, `erase_as`):
    /// in a plain one-part layout the bits above its last lane are left as they are (they
    /// belong to the next bucket), since those look at lanes only (`WordLayout::zero_lanes`,
    /// `WordLayout::lane`); other accesses mask them. Not for comparing or storing buckets.
    #[inline(always)]
    fn probe_from<const A: u8>(&self, words: [u64; 3], shift: u32) -> Bucket {
        match A {
            WITHIN => Bucket::of_lanes(words[0] >> shift),
            STRADDLING => Bucket::of_lanes(join_words(words[0], words[1], shift)),
            _ => self.bucket_from::<A>(words, shift),
        }
    }

    /// `load_as`, the bucket read as `probe_from` leaves it (for lane tests and lane writes).
    #[inline(always)]
    fn probe_as<const A: u8>(&self, bucket: usize, order: Ordering) -> Bucket {
        let at = self.locate_as::<A>(bucket);
        self.probe_from::<A>(self.words_at::<A>(at, order), at.1)
    }

    /// `layout.holds` for a table whose layout's access is `A`.
    #[inline(always)]
    fn holds_as<const A: u8>(&self, bucket: &Bucket, fp: u64) -> bool {
        match A {
            GENERAL => self.layout.holds(bucket, fp),
            SORTED64 => self.layout.holds_sorted64(bucket, fp),
            _ => self.layout.holds_one_part(bucket, fp),
        }
    }

    /// `layout.occupied` for a table whose layout's access is `A`.
    #[inline(always)]
    fn occupied_as<const A: u8>(&self, bucket: &Bucket) -> u32 {
        if is_one_part(A) {
            self.layout.part().occupied(bucket.lanes())
        } else {
            self.layout.occupied(bucket)
        }
    }

    /// `layout.first_empty` for a table whose layout's access is `A`.
    #[inline(always)]
    fn first_empty_as<const A: u8>(&self, bucket: &Bucket) -> Option<u32> {
        if is_one_part(A) {
            self.layout.part().first_empty(bucket.lanes())
        } else {
            self.layout.first_empty(bucket)
        }
    }

    /// `layout.first_match` for a table whose layout's access is `A`.
    #[inline(always)]
    fn first_match_as<const A: u8>(&self, bucket: &Bucket, fp: u64) -> Option<u32> {
        if is_one_part(A) {
            let part = self.layout.part();
            part.lowest_lane(part.matching_lanes(bucket.lanes(), fp))
        } else {
            self.layout.first_match(bucket, fp)
        }
    }

    /// `layout.lane` for a table whose layout's access is `A`.
    #[inline(always)]
    fn lane_as<const A: u8>(&self, bucket: &Bucket, position: u32) -> u64 {
        if is_one_part(A) {
            self.layout.part().lane(bucket.lanes(), position)
        } else {
            self.layout.lane(bucket, position)
        }
    }

    /// `layout.with_lane` for a table whose layout's access is `A`.
    #[inline(always)]
    fn with_lane_as<const A: u8>(&self, bucket: Bucket, position: u32, fp: u64) -> Bucket {
        if is_one_part(A) {
            let lanes = self.layout.part().with_lane(bucket.lanes(), position, fp);
            Bucket::of_lanes(lanes)
        } else {
            self.layout.with_lane(bucket, position, fp)
        }
    }

    /// Turns `bucket`, which holds `old`, into `new`, with stores of `order`, in a table whose
    /// layout's access is `A`. The caller holds the bucket's stripe, and every word holding
    /// bits of the bucket belongs to that stripe alone (`BucketLayout::word_group_shift`), so
    /// no other locked writer changes these words. Only for semi-sorted buckets (and tests):
    /// a plain table's words are also written by claims, which take no stripe, so its writers
    /// use `put_as` and `erase_as`.
    #[inline(always)]
    fn store_as<const A: u8>(&self, bucket: usize, old: &Bucket, new: &Bucket, order: Ordering) {
        if A == WORD {
            // The bucket is the whole word, and only its stripe's writers write it.
            self.words[bucket].store(new.lanes(), order);
            return;
        }
        let (first, shift) = self.layout.locate(bucket);
        if is_one_part(A) {
            let diff = old.lanes() ^ new.lanes();
            // The bits shifted out of the first word (`>> 1 >> (63 - shift)`: no shift by 64
            // when `shift` is 0); none for a bucket within its word.
            let rest = if A == WITHIN {
                0
            } else {
                (diff >> 1) >> (63 - shift)
            };
            return self.store_masks(first, &[diff << shift, rest], order);
        }
        let masks = self.layout.change_masks(old, new, shift);
        self.store_masks(first, &masks[..self.layout.span().words()], order);
    }

    /// Flips the bits of `masks[k]` in word `first + k`, each changed word with a store of
    /// `order` (the caller holds the stripe that owns these words, see `store_as`).
    #[inline(always)]
    fn store_masks(&self, first: usize, masks: &[u64], order: Ordering) {
        for (k, &mask) in masks.iter().enumerate() {
            if mask != 0 {
                let word = &self.words[first + k];
                // Mutant `erase_release_last_word_only`: only the last word changed gets
                // `order`, as if one Release store at the end published the whole bucket.
                let order = if cfg!(loom_mutant = "erase_release_last_word_only")
                    && masks[k + 1..].iter().any(|&m| m != 0)
                {
                    Ordering::Relaxed
                } else {
                    order
                };
                // Relaxed: the stripe's lock made the last writes of this word visible.
                word.store(word.load(Ordering::Relaxed) ^ mask, order);
            }
        }
    }

    /// Writes `fp` into an empty lane of `bucket`, which the caller read as `old` and whose
    /// stripe it holds, with writes of `order`; false when no lane is empty (any more).
    ///
    /// A plain table's inserts claim empty lanes without stripes (`claim_as`), so a lane that
    /// lies in one word is taken with a compare-and-swap that fails if one of them took it
    /// first (then the next empty lane is tried); a lane that straddles two words is never
    /// claimed, so an atomic OR into each word takes it without losing their lanes beside it.
    /// A semi-sorted bucket, rewritten whole, is only ever written under its stripe.
    #[inline(always)]
    fn put_as<const A: u8>(&self, bucket: usize, old: Bucket, fp: u64, order: Ordering) -> bool {
        if !is_one_part(A) {
            let Some(position) = self.first_empty_as::<A>(&old) else {
                return false;
            };
            let new = self.with_lane_as::<A>(old, position, fp);
            self.store_as::<A>(bucket, &old, &new, order);
            return true;
        }
        let part = self.layout.part();
        let (first, shift) = self.locate_as::<A>(bucket);
        let mut lanes = old.lanes();
        loop {
            let Some(position) = part.first_empty(lanes) else {
                return false;
            };
            let at = shift + position;
            if self.lane_straddles::<A>(at) {
                let parts = [(first, fp << at), (first + 1, fp >> (64 - at))];
                for (word, bits) in parts.map(|(k, bits)| (&self.words[k], bits)) {
                    if cfg!(loom_mutant = "locked_put_plain_store") {
                        // Relaxed: the mutant's load, then a store that may lose a claim.
                        word.store(word.load(Ordering::Relaxed) | bits, order);
                    } else {
                        word.fetch_or(bits, order);
                    }
                }
                return true;
            }
            let word = &self.words[first + (at / 64) as usize];
            let lane = part.max_fingerprint() << (at % 64);
            // Relaxed: the compare-and-swap below checks it.
            let current = word.load(Ordering::Relaxed);
            if cfg!(loom_mutant = "locked_put_plain_store") && current & lane == 0 {
                word.store(current | fp << (at % 64), order);
                return true;
            }
            // Relaxed on failure: we read the bucket again and choose again.
            if current & lane == 0
                && word
                    .compare_exchange(current, current | fp << (at % 64), order, Ordering::Relaxed)
                    .is_ok()
            {
                return true;
            }
            // Relaxed: we hold the stripe; claims since our read are what we need to see.
            lanes = self.probe_as::<A>(bucket, Ordering::Relaxed).lanes();
        }
    }

    /// Empties lane `position` of `bucket`, which the caller read as `old` and whose stripe it
    /// holds, with writes of `order`.
    ///
    /// In a plain table the lane holds a fingerprint, which only writers holding this stripe
    /// change, so an atomic AND of each word it lies in clears it without losing lanes that
    /// inserts claim beside it meanwhile (see `put_as`).
    #[inline(always)]
    fn erase_as<const A: u8>(&self, bucket: usize, old: Bucket, position: u32, order: Ordering) {
        if !is_one_part(A) {
            let new = self.with_lane_as::<A>(old, position, 0);
            self.store_as::<A>(bucket, &old, &new, order);
            return;
        }
        let part = self.layout.part();
        let (first, shift) = self.locate_as::<A>(bucket);
        let at = shift + position;
        let lane = part.max_fingerprint();
        if self.lane_straddles::<A>(at) {
            // Mutant `erase_release_last_word_only`: only the last word's write has `order`, as
            // if one Release store at the end published the whole erase.
            let first_order = if cfg!(loom_mutant = "erase_release_last_word_only") {
                Ordering::Relaxed
            } else {
                order
            };
            self.words[first].fetch_and(!(lane << at), first_order);
            self.words[first + 1].fetch_and(!(lane >> (64 - at)), order);
            return;
        }
        self.words[first + (at / 64) as usize].fetch_and(!(lane << (at % 64)), order);
    }

    /// The lanes of a plain bucket starting at bit `shift` that straddle two words, as a mask
    /// of their high bits (see `WordLayout::zero_lanes`): the lanes an insert may not claim
    /// without a stripe (see `put_as`).
    #[inline(always)]
    fn straddling_lanes<const A: u8>(&self, shift: u32) -> u64 {
        if A != STRADDLING {
            return 0;
        }
        // A lane straddles when its high bit is among the f - 1 bits from the word's end on:
        // those f - 1 bits shifted up by 64 - shift, as `<< 1 << (63 - shift)` (without a
        // branch, a shift by 64 for a bucket that starts a word, shift 0, which has none).
        let below_high = self.layout.part().max_fingerprint() >> 1;
        (below_high << 1) << (63 - shift)
    }

    /// Whether the lane at bit `at` of a bucket's first word crosses into the next word (only
    /// in a table whose layout's access is `STRADDLING`). `&`, not `&&`: whether the lane lies
    /// in the first word is a coin toss, and one branch on the whole test is taken only for
    /// the few lanes that straddle.
    #[inline(always)]
    fn lane_straddles<const A: u8>(&self, at: u32) -> bool {
        A == STRADDLING && ((at < 64) & (at + self.layout.part().bits() > 64))
    }

    /// Asks for the first word of `bucket` ahead of its use (see `storage::prefetch`).
    #[inline]
    pub(super) fn prefetch_bucket(&self, bucket: usize) {
        crate::storage::prefetch(&self.words[self.layout.locate(bucket).0]);
    }

    /// Writes `fp` into a lane of `bucket` directly, bypassing the search (loom models use this
    /// to set up a kick chain). Returns false when the bucket is full.
    #[cfg(loom)]
    pub(crate) fn place_raw(&self, bucket: usize, fp: u64) -> bool {
        // The fingerprint's pair, as an insert would lock it (and charge its lower stripe).
        let guard = self
            .stripes
            .lock_pair(bucket, self.mapper.alternate(bucket, fp));
        let old = self.load(bucket, Ordering::Relaxed);
        let put = match self.layout.access() {
            Access::Word => self.put_as::<WORD>(bucket, old, fp, Ordering::Relaxed),
            Access::Within => self.put_as::<WITHIN>(bucket, old, fp, Ordering::Relaxed),
            Access::Straddling => self.put_as::<STRADDLING>(bucket, old, fp, Ordering::Relaxed),
            Access::Sorted64 => self.put_as::<SORTED64>(bucket, old, fp, Ordering::Relaxed),
            Access::General => self.put_as::<GENERAL>(bucket, old, fp, Ordering::Relaxed),
        };
        if put {
            guard.add_items(1);
        }
        put
    }

    /// The index of the stripe that guards `bucket` (a loom model checks its setup with it).
    #[cfg(loom)]
    pub(crate) fn stripe_index(&self, bucket: usize) -> usize {
        self.stripes.index_of(bucket)
    }

    /// The first and last word holding bits of `bucket` (a loom model checks its setup with it).
    #[cfg(loom)]
    pub(crate) fn bucket_words(&self, bucket: usize) -> (usize, usize) {
        let stride = self.layout.stride() as usize;
        let first_bit = bucket * stride;
        (first_bit / 64, (first_bit + stride - 1) / 64)
    }

    /// How many lanes of `bucket` hold `fp` right now (a loom model's view of the table).
    #[cfg(loom)]
    pub(crate) fn raw_count(&self, bucket: usize, fp: u64) -> u32 {
        let _guard = self.stripes.lock_pair_to_read(bucket, bucket);
        self.layout.count(&self.load(bucket, Ordering::Relaxed), fp)
    }
}

#[cfg(all(test, not(loom)))]
mod specialised_tests;
