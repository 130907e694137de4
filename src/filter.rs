//! The public filter type.

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::panic::{RefUnwindSafe, UnwindSafe};

use crate::bucket_layout::LayoutKind;
use crate::builder::{Builder, Layout};
use crate::error::{InsertError, InsertManyError};
use crate::fixed::Fixed;
use crate::growth::Doubling;
use crate::hasher::DefaultHashBuilder;
use crate::optimistic_read::Lookup;
use crate::table::BATCH;

/// A concurrent cuckoo filter: an approximate set with deletions, shared by reference
/// (typically `Arc<CuckooFilter>`) between any number of threads.
///
/// Every operation takes `&self`. Lookups are wait-free; writers lock only the two stripes of the
/// buckets they change.
///
/// # Semantics
///
/// - **No false negatives.** Once `insert(x)` has returned `Ok`, `contains(x)` is `true` until a
///   `remove(x)` starts, whatever other threads do meanwhile.
/// - **False positives.** `contains(y)` may be `true` for an item never inserted, with
///   probability about [`false_positive_rate`](CuckooFilter::false_positive_rate). A lookup that
///   keeps colliding with writers may also answer `true` ("maybe present") after a bounded number
///   of attempts; it never answers `false` without having seen both buckets in one consistent
///   state.
/// - **Multiset.** [`insert`](CuckooFilter::insert) stores one more copy every time; use
///   [`insert_unique`](CuckooFilter::insert_unique) for set semantics. One item can be stored at
///   most `2 × slots per bucket` times (its two buckets hold nothing else then); past that,
///   `insert` returns [`InsertError::ItemBucketsFull`], and a growable filter does not double
///   for it (a hot key cannot take all memory).
/// - **False deletes.** [`remove`](CuckooFilter::remove) removes one copy of the item's
///   fingerprint. Removing an item that was never inserted may remove the fingerprint of another
///   item that collides with it, which can then no longer be found. Only remove what you
///   inserted.
/// - **Failed inserts change nothing.** When no room can be found, `insert` returns
///   [`InsertError::Full`] and every item stored before is still stored.
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use atomic_cuckoo::CuckooFilter;
///
/// let filter = Arc::new(CuckooFilter::with_capacity(10_000));
/// let writers: Vec<_> = (0..2u64)
///     .map(|t| {
///         let filter = Arc::clone(&filter);
///         thread::spawn(move || {
///             for i in 0..1_000u64 {
///                 filter.insert(&(t * 1_000 + i)).unwrap();
///             }
///         })
///     })
///     .collect();
/// for w in writers {
///     w.join().unwrap();
/// }
/// assert_eq!(filter.len(), 2_000);
/// assert!((0..2_000u64).all(|i| filter.contains(&i)));
/// ```
pub struct CuckooFilter<S = DefaultHashBuilder> {
    body: Body,
    hasher: S,
}

/// What a filter is made of: one table of fixed size, or one that doubles in place.
// The growable body is about 1.3 KiB (its key maps and padded counters) inline: boxing it would
// put one more dependent load before every lookup's buckets.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Body {
    Fixed(Fixed),
    Growable(Doubling),
}

/// Runs `$e` with `$t` bound to the body's table, whichever it is.
macro_rules! either {
    ($body:expr, $t:ident => $e:expr) => {
        match $body {
            Body::Fixed($t) => $e,
            Body::Growable($t) => $e,
        }
    };
}

impl CuckooFilter {
    /// A filter for `items` items at the default false-positive rate (1 %, which gives 10-bit
    /// fingerprints) with the default hasher. `with_capacity(0)` gives the smallest filter.
    ///
    /// # Panics
    ///
    /// Like `Vec::with_capacity`: if the table for `items` items is larger than supported or
    /// cannot be allocated. [`CuckooFilter::builder`] reports those cases as errors instead.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(1_000);
    /// assert!(filter.capacity() >= 1_000);
    /// assert!(filter.is_empty());
    /// ```
    pub fn with_capacity(items: usize) -> Self {
        CuckooFilter::with_capacity_and_hasher(items, DefaultHashBuilder)
    }

    /// A [`Builder`] with default settings.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder()
    ///     .capacity(1_000)
    ///     .fingerprint_bits(16)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(filter.fingerprint_bits(), 16);
    /// ```
    pub fn builder() -> Builder {
        Builder::default()
    }
}

impl<S: BuildHasher> CuckooFilter<S> {
    /// A filter for `items` items at the default false-positive rate (1 %) that hashes with
    /// `hasher`, like `HashSet::with_capacity_and_hasher`. `0` gives the smallest filter.
    ///
    /// # Panics
    ///
    /// As [`with_capacity`](CuckooFilter::with_capacity).
    ///
    /// ```
    /// use atomic_cuckoo::{AHashBuilder, CuckooFilter};
    ///
    /// let filter = CuckooFilter::with_capacity_and_hasher(1_000, AHashBuilder::default());
    /// filter.insert("fast, not portable").unwrap();
    /// assert!(filter.capacity() >= 1_000);
    /// ```
    pub fn with_capacity_and_hasher(items: usize, hasher: S) -> Self {
        match Builder::default()
            .capacity(items.max(1))
            .hasher(hasher)
            .build()
        {
            Ok(filter) => filter,
            Err(e) => panic!("CuckooFilter::with_capacity_and_hasher({items}): {e}"),
        }
    }
}

impl<S> CuckooFilter<S> {
    pub(crate) fn from_parts(body: Body, hasher: S) -> Self {
        CuckooFilter { body, hasher }
    }

    pub(crate) fn body(&self) -> &Body {
        &self.body
    }

    /// How many pages of a fixed filter's bucket words are resident now, of how many.
    #[cfg(all(test, target_os = "linux", not(loom)))]
    pub(crate) fn resident_pages(&self) -> (usize, usize) {
        match &self.body {
            Body::Fixed(fixed) => fixed.table().resident_pages(),
            Body::Growable(_) => (0, 0),
        }
    }

    /// Number of stored items (fingerprints). Exact when no writer is running; while writers
    /// run, a sum of per-thread counters taken at slightly different moments.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// filter.insert("a").unwrap();
    /// filter.insert("a").unwrap();
    /// assert_eq!(filter.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        either!(&self.body, t => t.len())
    }

    /// Whether [`len`](CuckooFilter::len) is zero.
    ///
    /// ```
    /// assert!(atomic_cuckoo::CuckooFilter::with_capacity(10).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of distinct items the filter holds without failing (or, when it grows, without
    /// doubling), like `HashSet::capacity`: at least the capacity it was built for, and
    /// `capacity() - len()` more distinct items always fit. Two exceptions fail earlier now
    /// and then (see [`InsertError::Full`]): 4-bit fingerprints in the
    /// [`Packed`](Layout::Packed) and [`Compact`](Layout::Compact) layouts, which have too few
    /// values for a promise, and [`OneWord`](Layout::OneWord) buckets of two or three lanes
    /// (17 to 32 bits) in tables of a hundred items or fewer.
    ///
    /// A fixed table is sized for its slots times the load its fingerprint width is built for
    /// (90–95 %); a growable one doubles at 95 % of its lanes, or sooner when a search for
    /// room fails, which happens now and then in tables of a few hundred buckets or fewer
    /// (measured: in 8 of 1,500 item sets in tables of 66 and 132 buckets, a few items before
    /// its capacity; in 1 of about 4,000 sets of 264 to 5,280 buckets). Repeated copies of one item
    /// count like distinct items, but an item's own two buckets hold at most `2 ×`
    /// slots-per-bucket copies of it ([`InsertError::ItemBucketsFull`]).
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(1_000);
    /// assert!(filter.capacity() >= 1_000);
    /// assert!(filter.capacity() < filter.slots());
    /// for i in 0..filter.capacity() {
    ///     filter.insert(&i).unwrap();
    /// }
    /// ```
    pub fn capacity(&self) -> usize {
        match &self.body {
            Body::Fixed(fixed) => fixed.item_capacity(),
            Body::Growable(table) => table.capacity(),
        }
    }

    /// Total fingerprint slots (buckets × slots per bucket): the most items the table could
    /// hold at its size now, more than [`capacity`](CuckooFilter::capacity).
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder()
    ///     .capacity(1_000)
    ///     .fingerprint_bits(16) // four slots per bucket
    ///     .build()?;
    /// assert_eq!(filter.slots() % 4, 0);
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn slots(&self) -> usize {
        match &self.body {
            Body::Fixed(fixed) => fixed.slots(),
            Body::Growable(table) => usize::try_from(table.buckets() * 4).unwrap_or(usize::MAX),
        }
    }

    /// Whether the filter grows when it fills ([`Builder::growable`](crate::Builder::growable)).
    ///
    /// ```
    /// use atomic_cuckoo::CuckooFilter;
    ///
    /// assert!(!CuckooFilter::with_capacity(100).is_growable());
    /// assert!(CuckooFilter::builder().growable(true).build()?.is_growable());
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn is_growable(&self) -> bool {
        matches!(self.body, Body::Growable(_))
    }

    /// How many times a growable filter has doubled its table (0 for a fixed one).
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder()
    ///     .capacity(1_000)
    ///     .growable(true)
    ///     .build()?;
    /// filter.insert_many(0..10_000u32)?;
    /// assert!(filter.doublings() >= 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn doublings(&self) -> u32 {
        match &self.body {
            Body::Fixed(_) => 0,
            Body::Growable(table) => table.doublings(),
        }
    }

    /// Whether a doubling is still splitting buckets: inserts finish it gradually (two old
    /// buckets each), and until then a lookup reads one bit more per bucket. `false` for a
    /// fixed filter.
    pub fn is_doubling(&self) -> bool {
        match &self.body {
            Body::Fixed(_) => false,
            Body::Growable(table) => table.is_doubling(),
        }
    }

    /// Splits every bucket an unfinished doubling has left, so lookups read one bucket per
    /// side again without first checking whether it is split. Inserts do this gradually;
    /// call this when a grown filter is built and will mostly be read. Does nothing on a
    /// fixed filter.
    ///
    /// # Panics
    ///
    /// If called by the writer of a save of this same filter, on the saving thread: its
    /// splits would wait for that save forever.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder()
    ///     .capacity(1_000)
    ///     .growable(true)
    ///     .build()?;
    /// filter.insert_many(0..5_000u32)?;
    /// filter.finish_doubling();
    /// assert!(!filter.is_doubling());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish_doubling(&self) {
        match &self.body {
            Body::Fixed(fixed) => {
                crate::freeze::refuse_if_frozen_here(fixed).unwrap_or_else(|nested| nested.panic());
            }
            Body::Growable(table) => table.finish_doubling(),
        }
    }

    /// The share of slots in use: `len() / slots()`.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(1_000);
    /// assert_eq!(filter.load_factor(), 0.0);
    /// ```
    pub fn load_factor(&self) -> f64 {
        self.len() as f64 / self.slots() as f64
    }

    /// Expected probability that `contains` returns `true` for an item that was never inserted,
    /// at the current load: `1 - (1 - 1/(2^f - 1))^(2 · slots · load)`, about
    /// `2 · slots · load / 2^f`; for a growable filter, whose entries keep fewer bits the
    /// more doublings they have seen, `2 · Σ 2^-(bits an entry has left) / buckets`.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder().capacity(1_000).build().unwrap();
    /// for i in 0..1_000 {
    ///     filter.insert(&i).unwrap();
    /// }
    /// assert!(filter.false_positive_rate() < 0.01);
    /// ```
    pub fn false_positive_rate(&self) -> f64 {
        either!(&self.body, t => t.false_positive_rate())
    }

    /// The false-positive rate the filter was built for ([`Builder::false_positive_rate`], 1 %
    /// by default), which [`false_positive_rate`](CuckooFilter::false_positive_rate) stays
    /// under at any load up to [`capacity`](CuckooFilter::capacity) (a growable filter: for
    /// 131,072 times its first capacity); `None` for a filter built with a fingerprint width
    /// instead ([`Builder::fingerprint_bits`]). Restored snapshots keep it.
    ///
    /// ```
    /// use atomic_cuckoo::CuckooFilter;
    ///
    /// let filter = CuckooFilter::builder().false_positive_rate(0.001).build()?;
    /// assert_eq!(filter.target_false_positive_rate(), Some(0.001));
    /// assert_eq!(CuckooFilter::with_capacity(10).target_false_positive_rate(), Some(0.01));
    /// let by_width = CuckooFilter::builder().fingerprint_bits(12).build()?;
    /// assert_eq!(by_width.target_false_positive_rate(), None);
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn target_false_positive_rate(&self) -> Option<f64> {
        match &self.body {
            Body::Fixed(fixed) => fixed.plan().target_rate(),
            Body::Growable(table) => Some(table.target_false_positive_rate()),
        }
    }

    /// Fingerprint width in bits: of every fingerprint of a fixed filter; of a growable
    /// filter's new entries (its lane width less the marker bit), which give up a bit with
    /// each doubling they see.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder().fingerprint_bits(8).build().unwrap();
    /// assert_eq!(filter.fingerprint_bits(), 8);
    /// ```
    pub fn fingerprint_bits(&self) -> u32 {
        match &self.body {
            Body::Fixed(fixed) => fixed.table().layout().bits(),
            Body::Growable(table) => table.lane_bits() - 1,
        }
    }

    /// How the filter lays out its buckets ([`Builder::layout`](crate::Builder::layout)). A
    /// filter restored from a snapshot written before layouts were selectable is
    /// [`Layout::OneWord`]; a growable filter packs its lanes ([`Layout::Packed`]).
    ///
    /// ```
    /// use atomic_cuckoo::{CuckooFilter, Layout};
    ///
    /// assert_eq!(CuckooFilter::with_capacity(100).layout(), Layout::Packed);
    /// let compact = CuckooFilter::builder().layout(Layout::Compact).build().unwrap();
    /// assert_eq!(compact.layout(), Layout::Compact);
    /// ```
    pub fn layout(&self) -> Layout {
        let kind = match &self.body {
            Body::Fixed(fixed) => fixed.plan().layout,
            Body::Growable(_) => LayoutKind::Packed,
        };
        match kind {
            LayoutKind::OneWord => Layout::OneWord,
            LayoutKind::Packed => Layout::Packed,
            LayoutKind::SemiSorted => Layout::Compact,
        }
    }

    /// Bytes of memory held by the filter: its table, lock stripes and counters, and the
    /// filter itself; for a growable filter also the bitmap of a doubling in progress (a bit
    /// per bucket it splits) and what finished doublings' small bitmaps keep.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(1_000_000);
    /// let bits_per_item = filter.memory_usage() as f64 * 8.0 / 1_000_000.0;
    /// assert!(bits_per_item < 16.0);
    /// ```
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Self>()
            + match &self.body {
                Body::Fixed(fixed) => fixed.heap_bytes(),
                Body::Growable(table) => table.memory_usage(),
            }
    }

    /// The filter's hasher.
    pub fn hasher(&self) -> &S {
        &self.hasher
    }

    /// Removes every item. Callable through an `Arc` while other threads use the filter.
    ///
    /// Consistent like a save ([`write_to`](CuckooFilter::write_to)): writers wait until the
    /// clear is over, so an insert either ends before it (and is cleared) or starts after it
    /// (and stays). Lookups do not wait; one that overlaps the clear may still find some of the
    /// items being cleared.
    ///
    /// A growable filter keeps its size (its memory cannot be freed while other threads may
    /// read it), and a doubling in progress is finished. Memory: the filter keeps its table
    /// and lock stripes, all that [`memory_usage`](CuckooFilter::memory_usage) counts, and
    /// all of it resident (the clear writes every bucket).
    ///
    /// # Panics
    ///
    /// If called by the writer of a save of this same filter (it would store half-cleared
    /// data).
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let filter = Arc::new(atomic_cuckoo::CuckooFilter::with_capacity(100));
    /// filter.insert("x").unwrap();
    /// let shared = Arc::clone(&filter);
    /// std::thread::spawn(move || shared.clear()).join().unwrap();
    /// assert!(filter.is_empty() && !filter.contains("x"));
    /// ```
    pub fn clear(&self) {
        either!(&self.body, t => t.clear());
    }

    /// Frees what the filter holds beyond its items' needs, like `Vec::shrink_to_fit`; takes
    /// `&mut self`, so no other thread is using it (and none can be reading the memory it
    /// frees). A fixed filter holds nothing beyond its table and is left as it is.
    ///
    /// A growable filter halves its table, the inverse of a doubling, as many times as its
    /// entries fit the halved table below its doubling load (so a filter shrunk close to that
    /// load doubles again after a few inserts, as a `Vec` reallocates after `shrink_to_fit`);
    /// a doubling in progress is finished first. Each halving frees half the table. Every stored item is still found, and `len` is unchanged.
    /// Entries stored with every tail bit their lanes hold give up the highest one, so the
    /// false-positive rate may rise a little
    /// ([`false_positive_rate`](CuckooFilter::false_positive_rate) says by how much). A
    /// halving is built beside the table (half its memory again, for the moment) and kept
    /// only if every entry finds a lane: when memory runs out or some entries cannot be
    /// placed, the table stays as it was. Entries with no tail bit left (stored more doublings
    /// ago than their lanes have tail bits: 9 at 1 %) were copied into both halves by every
    /// later doubling, and each copy keeps a lane, also after its item is removed (a remove
    /// takes the copy in the item's bucket): a filter grown that far whose oldest items are
    /// gone may stop halving after a few, where those copies no longer fit their buckets. They
    /// cannot be told from live items' entries (`len` says how many items are stored, not
    /// which lanes are theirs), so they stay until [`clear`](CuckooFilter::clear): a filter
    /// emptied of its items is best cleared, which then halves back to its first table.
    ///
    /// ```
    /// let mut filter = atomic_cuckoo::CuckooFilter::builder()
    ///     .capacity(1_000)
    ///     .growable(true)
    ///     .build()
    ///     .unwrap();
    /// for i in 0..100_000u64 {
    ///     filter.insert(&i).unwrap();
    /// }
    /// for i in 1_000..100_000u64 {
    ///     filter.remove(&i);
    /// }
    /// let (doublings, bytes) = (filter.doublings(), filter.memory_usage());
    /// filter.shrink_to_fit();
    /// assert!(filter.doublings() < doublings && filter.memory_usage() < bytes / 2);
    /// assert!((0..1_000u64).all(|i| filter.contains(&i)));
    /// ```
    pub fn shrink_to_fit(&mut self) {
        if let Body::Growable(table) = &mut self.body {
            table.shrink();
        }
    }
}

impl<S: BuildHasher> CuckooFilter<S> {
    #[inline]
    fn hash_of<T: Hash + ?Sized>(&self, item: &T) -> u64 {
        self.hasher.hash_one(item)
    }

    /// Adds one copy of `item`.
    ///
    /// The item is hashed through its [`Hash`] implementation, so its type is part of it:
    /// `42i32` and `42u64` hash differently and are different items. Look an item up, and
    /// remove it, as the type it was inserted as.
    ///
    /// # Errors
    ///
    /// Nothing changes when an insert fails:
    /// - [`InsertError::Full`]: no free slot can be reached (a filter without growth);
    /// - [`InsertError::ItemBucketsFull`]: the item's own two buckets are full of its copies
    ///   (or of items that share them) while the filter has room;
    /// - [`InsertError::GrowthFailed`]: a growable filter needed to double and could not
    ///   allocate the new buckets (nothing stored is lost; a later insert doubles once memory
    ///   is there).
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// filter.insert(&42u64)?;
    /// assert!(filter.contains(&42u64));
    /// # Ok::<(), atomic_cuckoo::InsertError>(())
    /// ```
    #[inline]
    pub fn insert<T: Hash + ?Sized>(&self, item: &T) -> Result<(), InsertError> {
        either!(&self.body, t => t.insert(self.hash_of(item)))
    }

    /// Adds `item` unless it is (maybe) present already: returns `Ok(true)` if it was added,
    /// `Ok(false)` if its fingerprint was already in one of its buckets (the item, or another
    /// that collides with it). Two threads racing to insert the same item cannot both get
    /// `Ok(true)`.
    ///
    /// # Errors
    ///
    /// As [`insert`](CuckooFilter::insert), when the item is not present and cannot be added.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// assert_eq!(filter.insert_unique("k"), Ok(true));
    /// assert_eq!(filter.insert_unique("k"), Ok(false));
    /// assert_eq!(filter.count("k"), 1);
    /// ```
    pub fn insert_unique<T: Hash + ?Sized>(&self, item: &T) -> Result<bool, InsertError> {
        either!(&self.body, t => t.insert_unique(self.hash_of(item)))
    }

    /// Whether `item` may be in the filter: never `false` for an inserted item, `true` for an
    /// absent one with probability about [`false_positive_rate`](CuckooFilter::false_positive_rate).
    /// Wait-free.
    ///
    /// "Inserted" means inserted as the same type: `42i32` and `42u64` hash differently, so
    /// after `insert(&42i32)` a lookup of `&42u64` is a lookup of another item (literals
    /// without a suffix are `i32`).
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// filter.insert("present").unwrap();
    /// assert!(filter.contains("present"));
    /// ```
    pub fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        let hash = self.hash_of(item);
        let found = match &self.body {
            Body::Fixed(fixed) => fixed.lookup(hash),
            Body::Growable(table) => table.lookup_hash(hash),
        };
        found != Lookup::Absent
    }

    /// Looks up many items at once (any `IntoIterator`: a slice, a `Vec`, an iterator):
    /// `results` is cleared and receives one answer per item, in order, each exactly what
    /// [`contains`](CuckooFilter::contains) would say.
    ///
    /// Faster than one `contains` per item, most of all when the table is larger than the CPU
    /// caches: the buckets of 64 items are fetched together, so their memory latencies overlap.
    /// Reuse `results` across calls to avoid allocating.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(1_000);
    /// filter.insert(&1u32).unwrap();
    /// filter.insert(&3u32).unwrap();
    /// let mut found = Vec::new();
    /// filter.contains_many(&[1u32, 2, 3], &mut found);
    /// assert!(found[0] && found[2]);
    /// ```
    pub fn contains_many<I>(&self, items: I, results: &mut Vec<bool>)
    where
        I: IntoIterator,
        I::Item: Hash,
    {
        results.clear();
        let mut items = items.into_iter();
        results.reserve(items.size_hint().0);
        let mut hashes = [0u64; BATCH];
        let mut answers = [Lookup::Absent; BATCH];
        loop {
            let n = self.hash_batch(&mut items, &mut hashes);
            if n == 0 {
                return;
            }
            match &self.body {
                Body::Fixed(fixed) => fixed.lookup_batch(&hashes[..n], &mut answers[..n]),
                Body::Growable(table) => table.lookup_batch(&hashes[..n], &mut answers[..n]),
            }
            results.extend(answers[..n].iter().map(|&a| a != Lookup::Absent));
        }
    }

    /// Hashes up to `BATCH` items from `items` into `hashes`; returns how many.
    #[inline]
    fn hash_batch<T: Hash>(
        &self,
        items: &mut impl Iterator<Item = T>,
        hashes: &mut [u64; BATCH],
    ) -> usize {
        let mut n = 0;
        for (hash, item) in hashes.iter_mut().zip(items) {
            *hash = self.hash_of(&item);
            n += 1;
        }
        n
    }

    /// Inserts every item of any `IntoIterator`, in order (each one copy, as
    /// [`insert`](CuckooFilter::insert)).
    /// Faster than one `insert` per item for tables larger than the CPU caches: each item's
    /// buckets are prefetched a few items before it is placed, so their memory latencies
    /// overlap.
    ///
    /// # Errors
    ///
    /// Stops at the first item that cannot be inserted: [`InsertManyError`] holds its index and
    /// the [`InsertError`] (see [`insert`](CuckooFilter::insert)). The items before it are in
    /// the filter; that item and those after it are not.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(1_000);
    /// filter.insert_many(&["a", "b", "c"]).unwrap();
    /// assert!(filter.contains("b"));
    /// ```
    pub fn insert_many<I>(&self, items: I) -> Result<(), InsertManyError>
    where
        I: IntoIterator,
        I::Item: Hash,
    {
        self.insert_batches(items, |hashes| match &self.body {
            Body::Fixed(fixed) => fixed.insert_batch(hashes).map(|()| hashes.len()),
            Body::Growable(table) => table.insert_batch(hashes, false),
        })
        .map(|_| ())
    }

    /// Inserts every item of any `IntoIterator` that is not (maybe) present yet, in order, each
    /// as [`insert_unique`](CuckooFilter::insert_unique) would: set semantics, so repeated items
    /// are stored once. Returns how many items were added. This is the fallible form of
    /// [`Extend`] and [`FromIterator`], which use it.
    ///
    /// # Errors
    ///
    /// Stops at the first item that is not present and cannot be inserted: [`InsertManyError`]
    /// holds its index and the [`InsertError`] (see [`insert`](CuckooFilter::insert)). The
    /// items before it are in the filter; that item and those after it are not added.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(1_000);
    /// let added = filter.insert_many_unique([7u64, 7, 7, 8])?;
    /// assert_eq!((added, filter.len()), (2, 2));
    /// assert_eq!(filter.insert_many_unique([8u64, 9])?, 1);
    /// # Ok::<(), atomic_cuckoo::InsertManyError>(())
    /// ```
    pub fn insert_many_unique<I>(&self, items: I) -> Result<usize, InsertManyError>
    where
        I: IntoIterator,
        I::Item: Hash,
    {
        self.insert_batches(items, |hashes| match &self.body {
            Body::Fixed(fixed) => fixed.insert_unique_batch(hashes),
            Body::Growable(table) => table.insert_batch(hashes, true),
        })
    }

    /// Hashes `items` a batch at a time and hands each batch to `insert`, which returns how
    /// many it added or the index in the batch of the item that failed; sums the added.
    fn insert_batches<I>(
        &self,
        items: I,
        mut insert: impl FnMut(&[u64]) -> Result<usize, (usize, InsertError)>,
    ) -> Result<usize, InsertManyError>
    where
        I: IntoIterator,
        I::Item: Hash,
    {
        let mut items = items.into_iter();
        let mut hashes = [0u64; BATCH];
        let (mut done, mut added) = (0, 0);
        loop {
            let n = self.hash_batch(&mut items, &mut hashes);
            if n == 0 {
                return Ok(added);
            }
            added += insert(&hashes[..n]).map_err(|(i, error)| InsertManyError {
                index: done + i,
                error,
            })?;
            done += n;
        }
    }

    /// Removes one copy of `item`; returns whether a copy was found.
    ///
    /// Only remove items you inserted: see the false-delete caveat on [`CuckooFilter`].
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// filter.insert("gone").unwrap();
    /// assert!(filter.remove("gone"));
    /// assert!(!filter.contains("gone"));
    /// assert!(!filter.remove("gone"));
    /// ```
    pub fn remove<T: Hash + ?Sized>(&self, item: &T) -> bool {
        either!(&self.body, t => t.remove(self.hash_of(item)))
    }

    /// Number of stored copies of `item`'s fingerprint in its buckets: the number of times it
    /// was inserted (and not removed), plus any colliding items.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// filter.insert("twice").unwrap();
    /// filter.insert("twice").unwrap();
    /// assert_eq!(filter.count("twice"), 2);
    /// ```
    pub fn count<T: Hash + ?Sized>(&self, item: &T) -> usize {
        either!(&self.body, t => t.count_copies(self.hash_of(item)))
    }
}

impl<S> fmt::Debug for CuckooFilter<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("CuckooFilter");
        out.field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("slots", &self.slots())
            .field("load_factor", &self.load_factor())
            .field("fingerprint_bits", &self.fingerprint_bits())
            .field("layout", &self.layout());
        match &self.body {
            Body::Fixed(fixed) => {
                let shape = fixed.table().shape();
                out.field("slots_per_bucket", &fixed.table().layout().slots())
                    .field("buckets", &shape.buckets)
                    .field("stripes", &shape.stripes);
            }
            Body::Growable(table) => {
                out.field("growable", &true)
                    .field("buckets", &table.buckets())
                    .field("doublings", &table.doublings())
                    .field("doubling_in_progress", &table.is_doubling());
            }
        }
        out.field("memory_usage", &self.memory_usage()).finish()
    }
}

impl<S: Clone> Clone for CuckooFilter<S> {
    /// A deep copy of one consistent state: taken like a save (writers wait while it copies,
    /// lookups do not), so every insert either ended before the copy (and is in it) or started
    /// after it (and is not).
    ///
    /// # Panics
    ///
    /// If memory for the copy runs out, or if called by the writer of a save of this same
    /// filter.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// filter.insert("a").unwrap();
    /// let copy = filter.clone();
    /// filter.insert("b").unwrap();
    /// assert!(copy.contains("a") && copy.len() == 1);
    /// ```
    fn clone(&self) -> Self {
        let body = match &self.body {
            Body::Fixed(fixed) => Body::Fixed(fixed.deep_copy()),
            Body::Growable(table) => Body::Growable(table.deep_copy()),
        };
        CuckooFilter::from_parts(body, self.hasher.clone())
    }
}

/// A panic that unwinds out of an operation leaves the filter whole and usable, so a filter may
/// be used again after [`catch_unwind`](std::panic::catch_unwind).
///
/// No code of the caller runs while the filter is between two states: items are hashed (their
/// `Hash`, the hasher, a batch call's iterator) before any lock is taken, and the one callback
/// that runs under a lock, the destination of a [`write_to`](CuckooFilter::write_to), runs
/// while the filter is frozen and unchanged. Every lock and freeze is released by a guard's
/// `Drop`, so unwinding releases it, and the locks do not poison. After such a panic the
/// filter holds every item whose insert returned (of a batch call, the items up to some
/// point), and other threads go on. The panics of the filter itself ([`Extend`] on a full
/// filter, [`clone`](Clone::clone) or [`clear`](CuckooFilter::clear) inside its own save, a
/// failed allocation in `clone`) come before it changes anything.
impl<S: RefUnwindSafe> RefUnwindSafe for CuckooFilter<S> {}

/// See the [`RefUnwindSafe`] implementation.
impl<S: UnwindSafe> UnwindSafe for CuckooFilter<S> {}

impl<S: BuildHasher + Default> Default for CuckooFilter<S> {
    /// A filter with the [`Builder`]'s defaults: room for
    /// [`DEFAULT_CAPACITY`](crate::DEFAULT_CAPACITY) items at a 1 % false-positive rate, no
    /// growth.
    ///
    /// # Panics
    ///
    /// If the table cannot be allocated.
    ///
    /// ```
    /// let filter: atomic_cuckoo::CuckooFilter = Default::default();
    /// assert!(filter.capacity() >= atomic_cuckoo::DEFAULT_CAPACITY);
    /// ```
    fn default() -> Self {
        CuckooFilter::with_capacity_and_hasher(crate::DEFAULT_CAPACITY, S::default())
    }
}

/// Any hashable item, so references too: `Extend<T>` and `Extend<&T>` are both this impl.
impl<T: Hash, S: BuildHasher> Extend<T> for CuckooFilter<S> {
    /// Inserts every item that is not (maybe) present yet, as
    /// [`insert_many_unique`](CuckooFilter::insert_many_unique) does: set semantics, like
    /// `HashSet`, so repeated items are stored once and never fill their buckets.
    ///
    /// # Panics
    ///
    /// If an item that is not present cannot be inserted (the filter is full). Use
    /// [`insert_many_unique`](CuckooFilter::insert_many_unique) to handle that as an error.
    ///
    /// ```
    /// let mut filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// filter.extend(["a", "b", "a"]);
    /// filter.extend(&[1u8, 2]);
    /// filter.extend(std::iter::repeat_n(5u64, 20));
    /// assert!(filter.contains("b") && filter.contains(&2u8) && filter.contains(&5u64));
    /// assert_eq!(filter.len(), 5);
    /// ```
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        if let Err(e) = self.insert_many_unique(items) {
            panic!("CuckooFilter::extend: {e}: {}", e.error);
        }
    }
}

impl<T: Hash, S: BuildHasher + Default> FromIterator<T> for CuckooFilter<S> {
    /// A filter sized for the distinct items (at the default 1 % rate, no growth) that holds
    /// one copy of each, like collecting into a `HashSet`: repeated items are stored once.
    /// Items are told apart by their hash, so the filter's [`len`](CuckooFilter::len) is the
    /// number of distinct items (unless two distinct items have the same 64-bit hash, or,
    /// with a weak hasher, more distinct items share a fingerprint and buckets than those
    /// buckets hold: those that find them full are found already, and not stored again).
    ///
    /// # Panics
    ///
    /// If the table cannot be allocated. Repeated items never make it panic.
    ///
    /// ```
    /// use atomic_cuckoo::CuckooFilter;
    ///
    /// let filter: CuckooFilter = (0..1_000u32).collect();
    /// assert_eq!(filter.len(), 1_000);
    /// assert!(filter.capacity() >= 1_000 && filter.contains(&999u32));
    ///
    /// let ids: CuckooFilter = [7u64, 7, 7, 8].iter().collect();
    /// assert_eq!(ids.len(), 2);
    /// ```
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let hasher = S::default();
        let mut hashes: Vec<u64> = items.into_iter().map(|i| hasher.hash_one(&i)).collect();
        crate::hashing::dedup_hashes(&mut hashes);
        let filter = CuckooFilter::with_capacity_and_hasher(hashes.len(), hasher);
        for batch in hashes.chunks(BATCH) {
            // `hashes.len()` distinct items fit in a filter of that capacity, unless more of
            // them share one fingerprint and pair of buckets than those buckets hold (a weak
            // hasher: distinct hashes whose bucket and fingerprint bits are equal). Such an
            // item is refused only because its buckets are full of entries that match it:
            // it is then found already, as `insert_unique` says, and is not stored again.
            let mut rest = batch;
            let Body::Fixed(fixed) = &filter.body else {
                unreachable!("`with_capacity_and_hasher` builds a fixed filter")
            };
            while let Err((i, _)) = fixed.insert_batch(rest) {
                if let Err(e) = fixed.insert_unique(rest[i]) {
                    panic!("CuckooFilter::from_iter: {e}");
                }
                rest = &rest[i + 1..];
            }
        }
        filter
    }
}
