//! Test-only access for the loom models in `loom-tests/` (compiled only with `--cfg loom`).
//!
//! Models need tiny tables with exact shapes, items placed in chosen buckets, and the full
//! outcome of a lookup (so that a "maybe present" fallback cannot pass for a proven hit). All of
//! it drives the real table code: a model's filter is a [`CuckooFilter`] whose body is a fixed
//! table or a growable (doubling) one, built tiny here.

use std::hash::{BuildHasher, Hasher};

use crate::bucket_layout::LayoutKind;
use crate::builder::Layout;
use crate::cuckoo_path::SearchLimits;
use crate::filter::{Body, CuckooFilter};
use crate::fixed::{Fixed, TablePlan, WidthRule};
use crate::growth::Doubling;
use crate::optimistic_read::Lookup;
use crate::redisbloom::RedisCuckooFilter;
use crate::table::{Limits, Table, TableShape};

/// A hasher that returns the `u64` it is given: models choose an item's hash, and so its
/// primary bucket and fingerprint, directly.
#[derive(Clone, Copy, Debug, Default)]
pub struct PassThrough;

/// The hasher built by [`PassThrough`].
#[derive(Default)]
pub struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    /// Items are `u64`s (see `write_u64`); bytes come only from a save's hasher check, which
    /// needs some deterministic value.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl BuildHasher for PassThrough {
    type Hasher = PassThroughHasher;
    fn build_hasher(&self) -> PassThroughHasher {
        PassThroughHasher::default()
    }
}

/// What a lookup proved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Found a copy of the fingerprint.
    Present,
    /// Proved absence.
    Absent,
    /// Gave up and answered "maybe present".
    Unproven,
}

/// A fixed filter with exactly `buckets` buckets, `stripes` stripes and `bits`-wide
/// fingerprints, items hashed by [`PassThrough`].
pub fn tiny_filter(buckets: usize, stripes: usize, bits: u32) -> CuckooFilter<PassThrough> {
    tiny_filter_with_read_attempts(buckets, stripes, bits, Limits::DEFAULT.read_attempts)
}

/// A filter like [`tiny_filter`] whose lookups answer "maybe present" after `read_attempts`
/// failed validations (at least 1).
pub fn tiny_filter_with_read_attempts(
    buckets: usize,
    stripes: usize,
    bits: u32,
    read_attempts: u32,
) -> CuckooFilter<PassThrough> {
    assert!(read_attempts >= 1);
    tiny_fixed_filter(LayoutKind::OneWord, buckets, stripes, bits, read_attempts)
}

/// A filter like [`tiny_filter`] whose buckets have `layout` (packed and compact buckets hold
/// four fingerprints, and may straddle words; see [`Layout`]).
pub fn tiny_layout_filter(
    layout: Layout,
    buckets: usize,
    stripes: usize,
    bits: u32,
) -> CuckooFilter<PassThrough> {
    let read_attempts = Limits::DEFAULT.read_attempts;
    tiny_fixed_filter(layout.kind(), buckets, stripes, bits, read_attempts)
}

/// One fixed table of `buckets` buckets of `kind`, tiny search limits.
fn tiny_fixed_filter(
    kind: LayoutKind,
    buckets: usize,
    stripes: usize,
    bits: u32,
    read_attempts: u32,
) -> CuckooFilter<PassThrough> {
    let shape = TableShape::flat(kind, buckets, bits, stripes);
    let limits = Limits {
        path: SearchLimits {
            nodes: 16,
            depth: 4,
        },
        read_attempts,
        ..Limits::DEFAULT
    };
    let table = Table::new(shape, limits, false).expect("tiny table");
    // The plan only describes the table (a save stores it); the table is built from `shape`.
    let plan = TablePlan {
        capacity: 1,
        width: WidthRule::Fixed(bits),
        layout: kind,
    };
    let fixed = Fixed::new(table, plan, limits, false);
    CuckooFilter::from_parts(Body::Fixed(fixed), PassThrough)
}

/// The table of a filter built by [`tiny_filter`] (or its variants).
fn table(filter: &CuckooFilter<PassThrough>) -> &Table {
    match filter.body() {
        Body::Fixed(fixed) => fixed.table(),
        Body::Growable(_) => panic!("a fixed filter's helper given a growable filter"),
    }
}

/// The stripe (its index) that guards `bucket`: packed and compact tables give one stripe to
/// each run of buckets that fills whole words.
pub fn stripe_of(filter: &CuckooFilter<PassThrough>, bucket: usize) -> usize {
    table(filter).stripe_index(bucket)
}

/// The word where `bucket` starts, and the word where it ends.
pub fn words_of(filter: &CuckooFilter<PassThrough>, bucket: usize) -> (usize, usize) {
    table(filter).bucket_words(bucket)
}

/// The item (hash) whose primary bucket is `primary` and whose fingerprint is `fp`.
pub fn item(filter: &CuckooFilter<PassThrough>, primary: usize, fp: u64) -> u64 {
    table(filter).mapper().hash_for(primary, fp)
}

/// The alternate bucket of fingerprint `fp` stored in `bucket`.
pub fn alternate(filter: &CuckooFilter<PassThrough>, bucket: usize, fp: u64) -> usize {
    table(filter).mapper().alternate(bucket, fp)
}

/// Stores `fp` in `bucket` (counted as one item); false when the bucket is full.
pub fn place(filter: &CuckooFilter<PassThrough>, bucket: usize, fp: u64) -> bool {
    table(filter).place_raw(bucket, fp)
}

/// Copies of `fp` in `bucket`.
pub fn copies_in(filter: &CuckooFilter<PassThrough>, bucket: usize, fp: u64) -> u32 {
    table(filter).raw_count(bucket, fp)
}

/// The full outcome of `contains(item)` and how many of its validations failed (0: answered
/// by its first probe, or by its first validated read).
pub fn lookup(filter: &CuckooFilter<PassThrough>, item: u64) -> (Outcome, u32) {
    let table = table(filter);
    let (lookup, attempts) = table.lookup_traced(table.key(item));
    (outcome(lookup), attempts)
}

/// The fingerprint of `item`.
pub fn fingerprint(filter: &CuckooFilter<PassThrough>, item: u64) -> u64 {
    table(filter).key(item).fingerprint
}

fn outcome(lookup: Lookup) -> Outcome {
    match lookup {
        Lookup::Present => Outcome::Present,
        Lookup::Absent => Outcome::Absent,
        Lookup::Unproven => Outcome::Unproven,
    }
}

/// A RedisBloom filter of `sub_filters` live sub-filters of `buckets` buckets of `bucket_size`
/// one-byte slots each (a tiny sub-filter has one stripe per bucket), whose kick walks give up
/// after `max_iterations` kicks. Items are byte strings, hashed as RedisBloom hashes them.
pub fn rb_filter(
    buckets: u64,
    bucket_size: u16,
    sub_filters: usize,
    max_iterations: u16,
) -> RedisCuckooFilter {
    RedisCuckooFilter::loom_tiny(buckets, bucket_size, sub_filters, max_iterations)
}

/// The fingerprint of `item`, and its two buckets (first: the one its lookup validates) in
/// sub-filter `sub`.
pub fn rb_key(filter: &RedisCuckooFilter, sub: usize, item: &[u8]) -> (u8, (usize, usize)) {
    filter.loom_key(sub, item)
}

/// Stores `fp` in `bucket` of sub-filter `sub` (counted as one item); false when it is full.
pub fn rb_place(filter: &RedisCuckooFilter, sub: usize, bucket: usize, fp: u8) -> bool {
    filter.loom_place(sub, bucket, fp)
}

/// Copies of `fp` in `bucket` of sub-filter `sub`.
pub fn rb_copies_in(filter: &RedisCuckooFilter, sub: usize, bucket: usize, fp: u8) -> usize {
    filter.loom_copies_in(sub, bucket, fp)
}

/// The full outcome of `contains(item)`, and the outcome in each live sub-filter it asked, in
/// the order asked (newest first, up to the first that holds the item).
pub fn rb_lookup(filter: &RedisCuckooFilter, item: &[u8]) -> (Outcome, Vec<Outcome>) {
    let (answer, asked) = filter.loom_lookup(item);
    (outcome(answer), asked.into_iter().map(outcome).collect())
}

/// An empty growable filter (a doubling table, see `growth`) of `base` (even) first-table
/// buckets of four `lane_bits`-bit lanes whose width is planned for `planned` doublings (it
/// doubles past them too), items hashed by [`PassThrough`]. Its stripes: every bucket of the
/// first table on one, each later segment's on another (so a split takes two, and a lookup of
/// a split bucket validates both).
pub fn tiny_doubling(base: u64, lane_bits: u32, planned: u32) -> CuckooFilter<PassThrough> {
    let doubling = Doubling::loom_tiny(base, lane_bits, planned);
    CuckooFilter::from_parts(Body::Growable(doubling), PassThrough)
}

/// The doubling table of a filter built by [`tiny_doubling`].
fn doubling(filter: &CuckooFilter<PassThrough>) -> &Doubling {
    match filter.body() {
        Body::Growable(doubling) => doubling,
        Body::Fixed(_) => panic!("a growable filter's helper given a fixed filter"),
    }
}

/// `item`'s bucket on each side after `doublings` doublings: (home, high part).
pub fn doubling_buckets(
    filter: &CuckooFilter<PassThrough>,
    item: u64,
    doublings: u32,
) -> [(u64, u64); 2] {
    doubling(filter).loom_buckets(item, doublings)
}

/// Stores `item`'s entry in its bucket on `side`; false when that bucket is full.
pub fn doubling_place(filter: &CuckooFilter<PassThrough>, item: u64, side: usize) -> bool {
    doubling(filter).loom_place(item, side)
}

/// Whether `item`'s bucket on `side` holds an entry that matches it.
pub fn doubling_holds(filter: &CuckooFilter<PassThrough>, item: u64, side: usize) -> bool {
    doubling(filter).loom_holds(item, side)
}

/// The full outcome of `contains(item)`.
pub fn doubling_lookup(filter: &CuckooFilter<PassThrough>, item: u64) -> Outcome {
    outcome(doubling(filter).loom_lookup(item))
}

/// Begins the next doubling now (adds the segment and the split bitmap, publishes the count);
/// no bucket is split yet.
pub fn begin_doubling(filter: &CuckooFilter<PassThrough>) {
    doubling(filter).loom_begin_doubling();
}

/// Splits old bucket `index` (`home + base · high`) of the doubling in progress, if not split.
pub fn split_old(filter: &CuckooFilter<PassThrough>, index: u64) {
    doubling(filter).loom_split_old(index);
}

/// Claims `count` more old buckets of the doubling in progress for splitting, as an insert
/// does, and splits the runs whose first bucket it claimed.
pub fn split_next(filter: &CuckooFilter<PassThrough>, count: u64) {
    doubling(filter).loom_split_next(count);
}

/// Splits `item`'s old bucket on `side` if the doubling in progress has not split it yet.
pub fn split(filter: &CuckooFilter<PassThrough>, item: u64, side: usize) {
    doubling(filter).loom_split(item, side);
}
