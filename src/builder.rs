//! Configuring and building a filter.

use std::fmt;
use std::hash::BuildHasher;

use crate::bucket_layout::LayoutKind;
use crate::bucket_word::{MAX_BITS, MIN_BITS};
use crate::error::BuildError;
use crate::filter::{Body, CuckooFilter};
use crate::fixed::{Fixed, PlanError, TablePlan, WidthRule};
use crate::growth;
use crate::hasher::DefaultHashBuilder;
use crate::params;
use crate::table::{Limits, Table};

/// Capacity of a builder that was not given one.
pub const DEFAULT_CAPACITY: usize = 1_000_000;

/// Configures a [`CuckooFilter`]: capacity, false-positive rate or fingerprint width, growth,
/// hasher.
///
/// Every setting has a default: [`DEFAULT_CAPACITY`] items, a false-positive rate of 1 %, no
/// growth (a full filter reports [`InsertError::Full`](crate::InsertError::Full)), and
/// [`DefaultHashBuilder`]. Settings are checked by [`Builder::build`], which returns a
/// [`BuildError`] for any value it cannot honour instead of panicking.
///
/// ```
/// use atomic_cuckoo::CuckooFilter;
///
/// let filter = CuckooFilter::builder()
///     .capacity(100_000)
///     .false_positive_rate(0.001)
///     .build()?;
/// assert!(filter.capacity() >= 100_000);
/// assert!(filter.false_positive_rate() == 0.0); // empty: no false positives yet
/// # Ok::<(), atomic_cuckoo::BuildError>(())
/// ```
#[derive(Clone)]
pub struct Builder<S = DefaultHashBuilder> {
    capacity: usize,
    rate: Option<f64>,
    bits: Option<u32>,
    growable: bool,
    expected_items: Option<usize>,
    huge_pages: bool,
    prefault: bool,
    layout: Option<Layout>,
    hasher: S,
}

/// How a filter lays out its buckets in memory: the trade between memory and speed
/// ([`Builder::layout`]).
///
/// Every layout gives the same answers and the same guarantees; they differ in bits per item
/// at a false-positive rate and in speed. Each variant below gives its memory at a 1 % target;
/// the [parameter table](crate#choosing-parameters) compares the packed and compact layouts
/// at other targets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// Four fingerprints per bucket, bit-packed, so that a fingerprint costs exactly its width
    /// (a 10-bit fingerprint takes 10 bits): about 10.4 bits per item at a 1 % target. The
    /// default.
    #[default]
    Packed,
    /// Like [`Packed`](Layout::Packed), with the top 4 bits of a bucket's fingerprints stored
    /// sorted as one 12-bit index (the cuckoo filter paper's semi-sorted buckets): one bit per
    /// item less (about 9.3 bits per item at 1 %), and slower lookups and inserts, which
    /// decode and re-encode buckets.
    Compact,
    /// One bucket per 64-bit word, holding `64 / bits` fingerprints: the fastest lookups and
    /// inserts, at more memory (about 13.7 bits per item at 1 %: the widths that fill a word
    /// best over-deliver most targets).
    OneWord,
}

impl Layout {
    pub(crate) fn kind(self) -> LayoutKind {
        match self {
            Layout::Packed => LayoutKind::Packed,
            Layout::Compact => LayoutKind::SemiSorted,
            Layout::OneWord => LayoutKind::OneWord,
        }
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            capacity: DEFAULT_CAPACITY,
            rate: None,
            bits: None,
            growable: false,
            expected_items: None,
            huge_pages: true,
            prefault: false,
            layout: None,
            hasher: DefaultHashBuilder,
        }
    }
}

impl<S> fmt::Debug for Builder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("capacity", &self.capacity)
            .field("false_positive_rate", &self.rate)
            .field("fingerprint_bits", &self.bits)
            .field("growable", &self.growable)
            .field("expected_items", &self.expected_items)
            .field("huge_pages", &self.huge_pages)
            .field("prefault", &self.prefault)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl<S> Builder<S> {
    /// Number of items the filter must hold (default [`DEFAULT_CAPACITY`]). The table is sized
    /// so that this many distinct items fit with room to spare; `0` is an error
    /// ([`BuildError::ZeroCapacity`]).
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder().capacity(50_000).build()?;
    /// assert!(filter.capacity() >= 50_000);
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn capacity(mut self, items: usize) -> Self {
        self.capacity = items;
        self
    }

    /// Target false-positive rate when the filter is full, strictly between 0 and 1. The builder
    /// picks the narrowest fingerprint width that meets it. Default 1 %. Ignored when
    /// [`fingerprint_bits`](Builder::fingerprint_bits) is also set (but still validated: a rate
    /// outside `(0, 1)` is [`BuildError::InvalidFalsePositiveRate`]).
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder()
    ///     .capacity(1_000)
    ///     .false_positive_rate(0.001)
    ///     .build()?;
    /// assert_eq!(filter.fingerprint_bits(), 13);
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn false_positive_rate(mut self, rate: f64) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Explicit fingerprint width, `4..=32` bits ([`BuildError::InvalidFingerprintBits`]
    /// otherwise); a bucket holds 4 fingerprints, bit-packed, so each costs its width. Takes
    /// precedence over [`false_positive_rate`](Builder::false_positive_rate). With 4 bits in
    /// the [`Packed`](Layout::Packed) and [`Compact`](Layout::Compact) layouts, a filter may
    /// now and then fill before [`capacity`](CuckooFilter::capacity) items (see
    /// [`InsertError::Full`](crate::InsertError::Full)); `OneWord` 4-bit filters take theirs.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder().fingerprint_bits(8).build()?;
    /// assert_eq!(filter.fingerprint_bits(), 8);
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn fingerprint_bits(mut self, bits: u32) -> Self {
        self.bits = Some(bits);
        self
    }

    /// Whether the filter grows when it fills (default `false`: a full filter returns
    /// [`InsertError::Full`](crate::InsertError::Full)). A growable filter doubles its one
    /// table in place: [`capacity`](Builder::capacity) is what it takes before its first
    /// doubling, and a lookup reads two buckets however far it has grown.
    ///
    /// Each stored entry keeps a few bits of its item's hash beyond what chooses its bucket; a
    /// doubling turns one of those bits into a bucket bit, so no item is needed again. The
    /// lane width is chosen from [`false_positive_rate`](Builder::false_positive_rate) so that
    /// the rate stays within it for 17 doublings (131,072 times the first capacity: 14-bit
    /// entries at 1 %); the table goes on doubling after that, as long as memory lasts, and
    /// its rate then rises slowly (an entry with no bit left is copied into both halves of
    /// its bucket). A doubling is spread over the inserts after it: each splits two old
    /// buckets, and no insert rewrites the whole table.
    ///
    /// A growable filter chooses its own lane width and packs its lanes: with
    /// [`fingerprint_bits`](Builder::fingerprint_bits), or a [`layout`](Builder::layout) other
    /// than [`Packed`](Layout::Packed), `build` returns [`BuildError::NotForGrowable`].
    ///
    /// ```
    /// use atomic_cuckoo::CuckooFilter;
    ///
    /// let filter = CuckooFilter::builder().capacity(1_000).growable(true).build()?;
    /// for i in 0..100_000u32 {
    ///     filter.insert(&i)?; // never Full: it doubles
    /// }
    /// assert!(filter.doublings() >= 6);
    /// assert!((0..100_000u32).all(|i| filter.contains(&i)));
    /// assert!(filter.false_positive_rate() < 0.01);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn growable(mut self, enabled: bool) -> Self {
        self.growable = enabled;
        self
    }

    /// For a growable filter: how many items it is expected to reach. Its lanes are then
    /// sized to keep the target rate up to the first doubling past that many (at least), not
    /// for 131,072 times its first capacity: narrower lanes, less memory per item. The filter
    /// still grows past it as long as memory lasts, its rate rising slowly beyond what the
    /// lanes were sized for. At 1 % from `capacity(1_000)`, expecting 1M items gives 13-bit
    /// entries instead of 14 (15.9 bits per item at 1M instead of 17.0, see BENCHMARKS.md);
    /// at 0.1 %, 16-bit entries instead of 17.
    ///
    /// Only a growable filter takes it (a fixed filter's size is its
    /// [`capacity`](Builder::capacity)): without [`growable(true)`](Builder::growable),
    /// `build` returns [`BuildError::GrowableOnly`]. A value no larger than the capacity plans
    /// for no doubling.
    ///
    /// ```
    /// use atomic_cuckoo::CuckooFilter;
    ///
    /// let planned = CuckooFilter::builder()
    ///     .capacity(1_000)
    ///     .growable(true)
    ///     .expected_items(1_000_000)
    ///     .build()?;
    /// let open_ended = CuckooFilter::builder().capacity(1_000).growable(true).build()?;
    /// assert!(planned.fingerprint_bits() < open_ended.fingerprint_bits());
    /// planned.insert_many(0..2_000_000u64)?; // past what was expected: it still grows
    /// assert!(planned.contains(&1_999_999u64));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn expected_items(mut self, items: usize) -> Self {
        self.expected_items = Some(items);
        self
    }

    /// Whether tables of 2 MiB and more ask the kernel for transparent huge pages (Linux
    /// `madvise`; a hint that the system's THP settings decide on). Default `true`: lookups in
    /// large tables then miss the TLB far less. Turn it off where huge pages are unwelcome (THP
    /// rounds each table's memory up to 2 MiB, and the kernel backs a table 2 MiB at a time as
    /// inserts first touch it). The advice only says how pages are backed, not when: see
    /// [`prefault`](Builder::prefault) for that.
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::builder()
    ///     .capacity(10_000_000)
    ///     .huge_pages(false)
    ///     .build()?;
    /// assert!(filter.is_empty());
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn huge_pages(mut self, enabled: bool) -> Self {
        self.huge_pages = enabled;
        self
    }

    /// Whether [`build`](Builder::build) makes the whole table resident. Default `false`:
    /// `build` only maps the table (a size the kernel refuses is
    /// [`BuildError::AllocationFailed`]), and on Linux the kernel backs each page, zeroed, when
    /// an insert first touches it. Building then takes well under a millisecond whatever the
    /// capacity, and a filter built but not yet used holds no memory for its table. Items hash
    /// to random buckets, so the first inserts touch pages all over the table: on huge pages,
    /// the first 10,000 inserts made all of a 1.3 GiB table resident, each insert that touched
    /// a new 2 MiB waiting for the kernel to zero it (a fraction of a millisecond, and more
    /// where a virtual machine's host must back the memory too); with
    /// [`huge_pages(false)`](Builder::huge_pages) memory follows the fill a little longer
    /// (4 KiB at a time: in a 1.3 GiB table, 10,000 inserts made 38 MiB resident and a million
    /// 1.26 GiB).
    ///
    /// With `true`, `build` faults in every page: start-up takes time and memory in proportion
    /// to the capacity (`capacity(1 << 30)`, 1.3 GiB, took 0.14 to 3.9 s on a 2-core virtual
    /// machine), and no insert waits for the kernel. Choose it where the first inserts' latency
    /// matters more than start-up time and the memory will be used anyway. Either way, a
    /// process that touches more memory than it may have (a container's limit) is stopped by
    /// the kernel, not given an error. Restored filters ([`CuckooFilter::from_bytes`],
    /// [`CuckooFilter::read_from`]) are never faulted in: pages of empty buckets stay untouched.
    ///
    /// ```
    /// use atomic_cuckoo::CuckooFilter;
    ///
    /// // Ready for a burst of inserts with no page faults in it.
    /// let filter = CuckooFilter::builder()
    ///     .capacity(1_000_000)
    ///     .prefault(true)
    ///     .build()?;
    /// filter.insert(&42u64).unwrap();
    /// assert!(filter.contains(&42u64));
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn prefault(mut self, enabled: bool) -> Self {
        self.prefault = enabled;
        self
    }

    /// The hasher for items. Any `BuildHasher` works; it must be the same one (same seeds)
    /// wherever the filter's contents are interpreted. The default, [`DefaultHashBuilder`], is
    /// portable; [`AHashBuilder`](crate::AHashBuilder) is faster but not (see its docs).
    ///
    /// ```
    /// use atomic_cuckoo::{AHashBuilder, CuckooFilter};
    ///
    /// let filter = CuckooFilter::builder().hasher(AHashBuilder::default()).build()?;
    /// filter.insert("in memory only").unwrap();
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> Builder<S2> {
        Builder {
            capacity: self.capacity,
            rate: self.rate,
            bits: self.bits,
            growable: self.growable,
            expected_items: self.expected_items,
            huge_pages: self.huge_pages,
            prefault: self.prefault,
            layout: self.layout,
            hasher,
        }
    }

    /// How buckets are laid out in memory (default [`Layout::Packed`]): see [`Layout`].
    ///
    /// ```
    /// use atomic_cuckoo::{CuckooFilter, Layout};
    ///
    /// let fastest = CuckooFilter::builder().layout(Layout::OneWord).build()?;
    /// let smallest = CuckooFilter::builder().layout(Layout::Compact).build()?;
    /// assert!(smallest.memory_usage() < fastest.memory_usage());
    /// assert_eq!(fastest.layout(), Layout::OneWord);
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// Builds the filter.
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the setting that cannot be honoured: an invalid capacity,
    /// rate, width, expansion or level count, a rate no width reaches, a table larger than
    /// supported, or memory that cannot be allocated.
    ///
    /// ```
    /// use atomic_cuckoo::{BuildError, CuckooFilter};
    ///
    /// assert!(CuckooFilter::builder().capacity(1_000).build().is_ok());
    /// assert_eq!(
    ///     CuckooFilter::builder().fingerprint_bits(3).build().unwrap_err(),
    ///     BuildError::InvalidFingerprintBits { bits: 3 }
    /// );
    /// ```
    pub fn build(self) -> Result<CuckooFilter<S>, BuildError> {
        let plan = self.plan()?;
        if self.growable {
            return self.build_growable(plan);
        }
        if self.expected_items.is_some() {
            return Err(BuildError::GrowableOnly {
                setting: "expected_items",
            });
        }
        let shape = plan.shape().map_err(|e| self.plan_error(e))?;
        let mut table = Table::new(shape, Limits::DEFAULT, self.huge_pages)
            .map_err(|e| BuildError::AllocationFailed { bytes: e.bytes })?;
        // Left alone, the kernel backs each page when an insert first touches it: building
        // costs nothing per byte of capacity, and an unused filter holds no table memory.
        if self.prefault {
            table.fault_in();
        }
        Ok(CuckooFilter::from_parts(
            Body::Fixed(Fixed::new(table, plan, Limits::DEFAULT, self.huge_pages)),
            self.hasher,
        ))
    }

    /// A growable filter for the validated `plan`'s capacity and rate.
    fn build_growable(self, plan: TablePlan) -> Result<CuckooFilter<S>, BuildError> {
        if self.bits.is_some() {
            return Err(BuildError::NotForGrowable {
                setting: "fingerprint_bits",
            });
        }
        if self.layout.is_some_and(|layout| layout != Layout::Packed) {
            return Err(BuildError::NotForGrowable { setting: "layout" });
        }
        let rate = plan
            .target_rate()
            .unwrap_or(params::DEFAULT_FALSE_POSITIVE_RATE);
        let planned = self
            .expected_items
            .map_or(growth::PLANNED_DOUBLINGS, |items| {
                growth::doublings_to_reach(plan.capacity, items)
            });
        let mut table = growth::build(plan.capacity, rate, planned, self.huge_pages)?;
        if self.prefault {
            table.fault_in();
        }
        Ok(CuckooFilter::from_parts(Body::Growable(table), self.hasher))
    }

    /// Validates the settings and derives the table's plan.
    fn plan(&self) -> Result<TablePlan, BuildError> {
        if let Some(bits) = self.bits {
            if !(MIN_BITS..=MAX_BITS).contains(&bits) {
                return Err(BuildError::InvalidFingerprintBits { bits });
            }
        }
        if let Some(rate) = self.rate {
            if !params::rate_is_valid(rate) {
                return Err(BuildError::InvalidFalsePositiveRate { rate });
            }
        }
        if self.capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let width = match self.bits {
            Some(bits) => WidthRule::Fixed(bits),
            None => WidthRule::Rate(self.rate.unwrap_or(params::DEFAULT_FALSE_POSITIVE_RATE)),
        };
        let plan = TablePlan {
            capacity: self.capacity,
            width,
            layout: self.layout.unwrap_or_default().kind(),
        };
        if !self.growable {
            plan.bits().map_err(|e| self.plan_error(e))?;
        }
        Ok(plan)
    }

    fn plan_error(&self, e: PlanError) -> BuildError {
        match e {
            PlanError::TooLarge => BuildError::CapacityTooLarge {
                items: self.capacity,
            },
            PlanError::Unreachable => BuildError::UnreachableFalsePositiveRate {
                rate: self.rate.unwrap_or(params::DEFAULT_FALSE_POSITIVE_RATE),
            },
        }
    }
}

#[cfg(all(test, target_os = "linux", not(loom)))]
mod tests {
    use super::*;

    /// 8M items at 1 %: 10 MiB of bucket words, on huge pages when advised.
    const CAPACITY: usize = 8_000_000;

    /// `build` writes no page of the table unless asked to prefault, and then writes all of
    /// them, with huge pages advised or not. Checked by the table's own pages (mincore), so
    /// neither other tests' memory nor the system's THP mode changes the count.
    #[test]
    fn build_faults_the_table_in_only_when_asked_to() {
        for huge_pages in [true, false] {
            let build = |prefault| {
                Builder::default()
                    .capacity(CAPACITY)
                    .huge_pages(huge_pages)
                    .prefault(prefault)
                    .build()
                    .unwrap()
            };
            let (resident, pages) = build(false).resident_pages();
            assert!(pages >= 2_500, "{pages} pages");
            assert!(
                resident * 100 < pages,
                "huge pages {huge_pages}: {resident} of {pages} pages resident after build()"
            );
            let (resident, pages) = build(true).resident_pages();
            assert_eq!(
                resident, pages,
                "huge pages {huge_pages}: pages resident after a prefaulting build()"
            );
        }
    }
}
