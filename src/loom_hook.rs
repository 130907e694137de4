//! Test-only access for the loom models in `loom-tests/` (compiled only with `--cfg loom`).
//!
//! Models need tiny tables with exact shapes, items placed in chosen buckets, and the full
//! outcome of a lookup (so that a "maybe present" fallback cannot pass for a proven hit). All of
//! it drives the real table code.

use std::hash::{BuildHasher, Hasher};

use crate::bucket_layout::LayoutKind;
use crate::builder::Layout;
use crate::cuckoo_path::SearchLimits;
use crate::filter::CuckooFilter;
use crate::levels::{GrowthPlan, Levels, WidthRule};
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

/// A filter with exactly `buckets` buckets, `stripes` stripes and `bits`-wide fingerprints,
/// items hashed by [`PassThrough`].
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

/// One level of `buckets` buckets of `kind`, no growth, tiny search limits.
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
    let plan = GrowthPlan {
        factor: 0,
        max_levels: 1,
        base_capacity: 1,
        width: WidthRule::Fixed(bits),
        layout: kind,
    };
    CuckooFilter::from_parts(Levels::new(table, plan, limits, false), PassThrough)
}

/// The stripe (its index) that guards `bucket`: packed and compact tables give one stripe to
/// each run of buckets that fills whole words.
pub fn stripe_of(filter: &CuckooFilter<PassThrough>, bucket: usize) -> usize {
    filter.levels_ref().first().stripe_index(bucket)
}

/// The word where `bucket` starts, and the word where it ends.
pub fn words_of(filter: &CuckooFilter<PassThrough>, bucket: usize) -> (usize, usize) {
    filter.levels_ref().first().bucket_words(bucket)
}

/// A filter like [`tiny_filter`] (4 buckets of two 32-bit fingerprints) that grows: its second
/// and last level has 4 buckets too.
pub fn tiny_growing_filter(stripes: usize) -> CuckooFilter<PassThrough> {
    let limits = Limits {
        path: SearchLimits {
            nodes: 16,
            depth: 4,
        },
        ..Limits::DEFAULT
    };
    let shape = TableShape::flat(LayoutKind::OneWord, 4, 32, stripes);
    let plan = GrowthPlan {
        factor: 1,
        max_levels: 2,
        // Two items of 32-bit fingerprints size a level at 4 buckets (see `params`).
        base_capacity: 2,
        width: WidthRule::Fixed(32),
        layout: LayoutKind::OneWord,
    };
    assert_eq!(plan.level_shape(1).map(|s| s.buckets), Ok(4));
    let table = Table::new(shape, limits, false).expect("tiny table");
    CuckooFilter::from_parts(Levels::new(table, plan, limits, false), PassThrough)
}

/// The item (hash) whose primary bucket is `primary` and whose fingerprint is `fp`.
pub fn item(filter: &CuckooFilter<PassThrough>, primary: usize, fp: u64) -> u64 {
    filter.levels_ref().first().mapper().hash_for(primary, fp)
}

/// The alternate bucket of fingerprint `fp` stored in `bucket`.
pub fn alternate(filter: &CuckooFilter<PassThrough>, bucket: usize, fp: u64) -> usize {
    filter.levels_ref().first().mapper().alternate(bucket, fp)
}

/// Stores `fp` in `bucket` (counted as one item); false when the bucket is full.
pub fn place(filter: &CuckooFilter<PassThrough>, bucket: usize, fp: u64) -> bool {
    filter.levels_ref().first().place_raw(bucket, fp)
}

/// Copies of `fp` in `bucket`.
pub fn copies_in(filter: &CuckooFilter<PassThrough>, bucket: usize, fp: u64) -> u32 {
    filter.levels_ref().first().raw_count(bucket, fp)
}

/// The full outcome of `contains(item)` and how many of its validations failed (0: answered
/// by its first probe, or by its first validated read).
pub fn lookup(filter: &CuckooFilter<PassThrough>, item: u64) -> (Outcome, u32) {
    let table = filter.levels_ref().first();
    let (lookup, attempts) = table.lookup_traced(table.key(item));
    (outcome(lookup), attempts)
}

/// The fingerprint of `item`.
pub fn fingerprint(filter: &CuckooFilter<PassThrough>, item: u64) -> u64 {
    filter.levels_ref().first().key(item).fingerprint
}

/// A filter of `levels.len()` published levels with 32-bit fingerprints; level `i` has
/// `levels[i]` buckets (each a power-of-two multiple of the first, so that they nest), all
/// guarded by `stripes` stripes, and lookups that give up after `read_attempts` validations.
pub fn tiny_levels_filter(
    levels: &[usize],
    stripes: usize,
    read_attempts: u32,
) -> CuckooFilter<PassThrough> {
    let limits = Limits {
        path: SearchLimits {
            nodes: 16,
            depth: 4,
        },
        read_attempts,
        ..Limits::DEFAULT
    };
    let tables = levels
        .iter()
        .map(|&buckets| {
            let shape = TableShape {
                layout: LayoutKind::OneWord,
                buckets,
                bits: 32,
                stripes,
                base_buckets: levels[0],
                base_bits: 32,
            };
            Table::new(shape, limits, false).expect("tiny table")
        })
        .collect();
    let plan = GrowthPlan {
        factor: 2,
        max_levels: levels.len() as u32,
        base_capacity: 2,
        width: WidthRule::Fixed(32),
        layout: LayoutKind::OneWord,
    };
    CuckooFilter::from_parts(Levels::restore(plan, tables, limits, false), PassThrough)
}

/// The item (hash) whose primary bucket in level `level` is `primary` and whose fingerprint
/// is `fp`.
pub fn item_in(filter: &CuckooFilter<PassThrough>, level: usize, primary: usize, fp: u64) -> u64 {
    filter
        .levels_ref()
        .level(level)
        .mapper()
        .hash_for(primary, fp)
}

/// The primary bucket of `item` in level `level`.
pub fn primary_in(filter: &CuckooFilter<PassThrough>, level: usize, item: u64) -> usize {
    let table = filter.levels_ref().level(level);
    table.key(item).primary
}

/// The alternate bucket, in level `level`, of fingerprint `fp` stored in `bucket`.
pub fn alternate_in(
    filter: &CuckooFilter<PassThrough>,
    level: usize,
    bucket: usize,
    fp: u64,
) -> usize {
    filter
        .levels_ref()
        .level(level)
        .mapper()
        .alternate(bucket, fp)
}

/// Stores `fp` in `bucket` of level `level`; false when the bucket is full.
pub fn place_in(filter: &CuckooFilter<PassThrough>, level: usize, bucket: usize, fp: u64) -> bool {
    filter.levels_ref().level(level).place_raw(bucket, fp)
}

/// Adds a level to a growing filter now, as an insert that found the newest level full would.
pub fn grow(filter: &CuckooFilter<PassThrough>) {
    filter
        .levels_ref()
        .add_level()
        .expect("room for another level");
}

/// Items in level `level`, and whether it was released.
pub fn level_state(filter: &CuckooFilter<PassThrough>, level: usize) -> (usize, bool) {
    let table = filter.levels_ref().level(level);
    (table.len(), table.is_released())
}

/// The full outcome of `contains(item)` over every level.
pub fn lookup_all(filter: &CuckooFilter<PassThrough>, item: u64) -> Outcome {
    outcome(filter.levels_ref().lookup(item))
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

/// An empty [`ExpandingFilter`](crate::ExpandingFilter) of `base` (even) first-table buckets
/// of four `lane_bits`-bit lanes that may double `max_doublings` times, items hashed by
/// [`PassThrough`]. Its stripes: every bucket of the first table on one, each later segment's
/// on another (so a split takes two, and a lookup of a split bucket validates both).
pub fn tiny_expanding(
    base: u64,
    lane_bits: u32,
    max_doublings: u32,
) -> crate::ExpandingFilter<PassThrough> {
    crate::ExpandingFilter::loom_tiny(base, lane_bits, max_doublings)
}

/// `item`'s bucket on each side after `doublings` doublings: (home, high part).
pub fn expanding_buckets(
    filter: &crate::ExpandingFilter<PassThrough>,
    item: u64,
    doublings: u32,
) -> [(u64, u64); 2] {
    filter.loom_buckets(item, doublings)
}

/// Stores `item`'s entry in its bucket on `side`; false when that bucket is full.
pub fn expanding_place(
    filter: &crate::ExpandingFilter<PassThrough>,
    item: u64,
    side: usize,
) -> bool {
    filter.loom_place(item, side)
}

/// Whether `item`'s bucket on `side` holds an entry that matches it.
pub fn expanding_holds(
    filter: &crate::ExpandingFilter<PassThrough>,
    item: u64,
    side: usize,
) -> bool {
    filter.loom_holds(item, side)
}

/// The full outcome of `contains(item)`.
pub fn expanding_lookup(filter: &crate::ExpandingFilter<PassThrough>, item: u64) -> Outcome {
    outcome(filter.loom_lookup(item))
}

/// Begins the next doubling now (adds the segment and the split bitmap, publishes the count);
/// no bucket is split yet.
pub fn expanding_begin_doubling(filter: &crate::ExpandingFilter<PassThrough>) {
    filter.loom_begin_doubling();
}

/// Splits old bucket `index` (`home + base · high`) of the doubling in progress, if not split.
pub fn expanding_split_old(filter: &crate::ExpandingFilter<PassThrough>, index: u64) {
    filter.loom_split_old(index);
}

/// Splits `item`'s old bucket on `side` if the doubling in progress has not split it yet.
pub fn expanding_split(filter: &crate::ExpandingFilter<PassThrough>, item: u64, side: usize) {
    filter.loom_split(item, side);
}
