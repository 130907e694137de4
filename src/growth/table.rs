//! A growable table: buckets of four lanes of `width` bits, packed one after the
//! other in `u64` words, in segments that double the table one at a time, and the split that
//! moves a bucket's entries into its two halves.
//!
//! A bucket is named by its position ([`Pos`]): its home among the first table's `base`
//! buckets and its *high* part, the bucket bits that doublings added. Segment 0 holds the
//! first table (high 0); segment `s ≥ 1` holds the `base · 2^(s−1)` buckets whose high part has
//! `s` bits, added by doubling `s`. Segments are never moved, so a doubling writes nothing
//! but the buckets it splits, and its memory is zeroed by the kernel as it is first touched.
//!
//! A lane holds `(field << ANCHOR_BITS) | anchor`, where the field is a marker bit above the
//! entry's tail bits; 0 is an empty lane. Splitting bucket `(home, high)` at doubling `k + 1`
//! moves each entry to `(home, high)` or `(home, high + 2^k)` by its lowest tail bit, dropping
//! that bit (the field shifts right by one). An entry with no tail bit left matches both
//! halves, so it is copied into both. The two halves only receive that bucket's entries, so a
//! split never overflows a bucket and never kicks.

use std::sync::OnceLock;

use super::keys::{Pos, ANCHOR_BITS};
use super::MAX_DOUBLINGS;
use crate::storage::PREFETCH_FROM_BYTES;
use crate::sync::Ordering;
use crate::table::BucketWords;

/// Lanes per bucket.
pub(super) const LANES: u64 = 4;

/// Buckets per stripe group, `2^GROUP_SHIFT`: sixteen buckets of four lanes are `width` whole
/// words at any width, so no word holds lanes of two groups and writers under different
/// stripes never load and store one word.
const GROUP_SHIFT: u32 = 4;

/// The packed lanes, segment by segment.
pub(super) struct Table {
    /// Lane width in bits, at most 32.
    width: u32,
    base: u64,
    /// One cell per doubling allowed, plus the first table: set, under the grow lock, before
    /// the doubling that uses it is published (so a lookup that sees the doubling count finds
    /// its segment set). Each has two spare zero words past its last bucket, so that a bucket
    /// read never needs a bounds test.
    segments: Box<[OnceLock<BucketWords>]>,
    /// Whether segments ask for transparent huge pages (`Builder::huge_pages`).
    huge_pages: bool,
    /// The low `width` bits set: one lane.
    lane_mask: u64,
    /// The lowest bit of each of a bucket's four lanes, when they fit one word (else 0).
    lane_ones: u64,
    /// The anchor bits of each of a narrow bucket's four lanes (`anchors_agree`).
    anchor_fields: u64,
    /// Doublings from which the table outgrows the caches closest to a core
    /// (`storage::PREFETCH_FROM_BYTES`).
    prefetch_from: u32,
}

/// A bucket's segment and first bit (`Table::located`).
#[derive(Clone, Copy)]
pub(crate) struct Located<'t> {
    words: &'t BucketWords,
    bit: u64,
}

impl Located<'_> {
    /// Asks for the line of the bucket's first word without waiting for it (see
    /// `storage::prefetch`).
    #[inline(always)]
    pub(crate) fn prefetch(self) {
        crate::storage::prefetch(&self.words[(self.bit / 64) as usize]);
    }
}

/// The stripe key of bucket `bucket` of segment `segment` (`Table::stripe_key`).
#[inline(always)]
fn group_stripe_key(segment: usize, bucket: u64) -> usize {
    ((bucket >> GROUP_SHIFT) as usize).wrapping_add(segment.wrapping_mul(0x9e37_79b9))
}

/// Words for `buckets` buckets of four `width`-bit lanes, plus the spare words.
pub(super) fn words_for(buckets: u64, width: u32) -> Option<usize> {
    let bits = buckets.checked_mul(LANES * u64::from(width))?;
    usize::try_from(bits.div_ceil(64) + 2).ok()
}

/// A segment of `buckets` buckets, or the bytes it would need when they cannot be had.
fn segment(buckets: u64, width: u32, huge_pages: bool) -> Result<BucketWords, usize> {
    let len = words_for(buckets, width).ok_or(usize::MAX)?;
    BucketWords::zeroed(len, huge_pages).map_err(|failed| failed.bytes)
}

/// Buckets in segment `s`: the first table, then as many as the table had before doubling `s`.
pub(super) fn segment_buckets(base: u64, s: usize) -> u64 {
    if s == 0 {
        base
    } else {
        base << (s - 1)
    }
}

impl Table {
    /// An empty table of `base` buckets with room for `MAX_DOUBLINGS` segments more, or the
    /// bytes it would need when they cannot be had.
    pub(crate) fn new(base: u64, width: u32, huge_pages: bool) -> Result<Self, usize> {
        debug_assert!((ANCHOR_BITS + 2..=32).contains(&width));
        let table = Table::of(
            width,
            base,
            (0..=MAX_DOUBLINGS).map(|_| OnceLock::new()).collect(),
            huge_pages,
        );
        table.add_segment(0)?;
        Ok(table)
    }

    /// A table made of restored segments (`segment_buckets` buckets in segment `s`, each
    /// `words_for` words long), with room for `MAX_DOUBLINGS` segments more than the first.
    pub(super) fn from_segments(
        base: u64,
        width: u32,
        huge_pages: bool,
        restored: Vec<BucketWords>,
    ) -> Self {
        debug_assert!(restored
            .iter()
            .enumerate()
            .all(|(s, words)| { words_for(segment_buckets(base, s), width) == Some(words.len()) }));
        debug_assert!(restored.len() <= MAX_DOUBLINGS as usize + 1);
        let segments: Box<[OnceLock<BucketWords>]> =
            (0..=MAX_DOUBLINGS).map(|_| OnceLock::new()).collect();
        for (cell, words) in segments.iter().zip(restored) {
            let _ = cell.set(words);
        }
        Table::of(width, base, segments, huge_pages)
    }

    fn of(width: u32, base: u64, segments: Box<[OnceLock<BucketWords>]>, huge_pages: bool) -> Self {
        let narrow = LANES as u32 * width <= 64;
        let lane_ones = if narrow {
            (0..LANES)
                .map(|lane| 1u64 << (lane * u64::from(width)))
                .sum()
        } else {
            0
        };
        Table {
            width,
            base,
            segments,
            huge_pages,
            lane_mask: (1u64 << width) - 1,
            lane_ones,
            anchor_fields: ((1 << ANCHOR_BITS) - 1) * lane_ones,
            prefetch_from: {
                let buckets = PREFETCH_FROM_BYTES * 8 / (LANES * u64::from(width));
                (0..=MAX_DOUBLINGS)
                    .find(|&d| base << d >= buckets)
                    .unwrap_or(MAX_DOUBLINGS)
            },
        }
    }

    /// Whether the table after `doublings` doublings is large enough that a lookup should
    /// ask for its second bucket's line early (see `storage::PREFETCH_FROM_BYTES`).
    #[inline(always)]
    pub(crate) fn beyond_caches(&self, doublings: u32) -> bool {
        if cfg!(any(loom, test)) {
            // The models' and unit tests' tables are tiny: alternate, so that both reads are
            // checked.
            return doublings % 2 == 1;
        }
        doublings >= self.prefetch_from
    }

    /// An empty table of this one's first table and width with the segments of `doublings`
    /// doublings, or the bytes it would need when they cannot be had.
    pub(super) fn empty_of(&self, doublings: u32) -> Result<Self, usize> {
        let table = Table::new(self.base, self.width, self.huge_pages)?;
        for s in 1..=doublings as usize {
            table.add_segment(s)?;
        }
        Ok(table)
    }

    /// Makes every segment added so far resident (`Builder::prefault`).
    pub(super) fn fault_in(&mut self) {
        for words in self.segments.iter_mut().filter_map(OnceLock::get_mut) {
            words.fault_in();
        }
    }

    /// The segments added so far, oldest first.
    pub(super) fn segments(&self) -> impl Iterator<Item = &BucketWords> {
        self.segments.iter().map_while(OnceLock::get)
    }

    /// Buckets after `doublings` doublings.
    pub(crate) fn buckets(&self, doublings: u32) -> u64 {
        self.base << doublings
    }

    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    pub(crate) fn width(&self) -> u32 {
        self.width
    }

    /// Bytes held by the segments added so far.
    pub(crate) fn bytes(&self) -> usize {
        self.segments().map(|s| s.len() * 8).sum()
    }

    /// Adds segment `s` (`s ≥ 1`: the buckets of doubling `s`, as many as the table had). On
    /// an allocation failure nothing changes. Callers serialize (the grow lock).
    pub(crate) fn add_segment(&self, s: usize) -> Result<(), usize> {
        let cell = self.segments.get(s).ok_or(usize::MAX)?;
        if cell.get().is_none() {
            let _ = cell.set(segment(
                segment_buckets(self.base, s),
                self.width,
                self.huge_pages,
            )?);
        }
        Ok(())
    }

    /// The segment index and the bucket's index within it, for the bucket at `pos`.
    #[inline(always)]
    fn segment_of(&self, pos: Pos) -> (usize, u64) {
        // The high part's bit length is its segment; the segment starts at high 2^(s-1).
        let segment = (64 - pos.high.leading_zeros()) as usize;
        let first_high = (1u64 << segment) >> 1;
        (segment, pos.home + self.base * (pos.high - first_high))
    }

    /// Where the bucket at `pos` lies, for a reader that asks for its line early
    /// ([`prefetch`](Located::prefetch)) and reads it later without locating it again.
    #[inline(always)]
    pub(crate) fn located(&self, pos: Pos) -> Located<'_> {
        let (segment, bucket) = self.segment_of(pos);
        self.located_in(segment, bucket)
    }

    /// Where bucket `bucket` of segment `segment` lies.
    #[inline(always)]
    fn located_in(&self, segment: usize, bucket: u64) -> Located<'_> {
        let words = self.segments[segment]
            .get()
            .expect("a bucket's segment is added before its doubling is published");
        Located {
            words,
            bit: bucket * LANES * u64::from(self.width),
        }
    }

    /// The key of the stripe that guards the bucket at `pos`: its group of sixteen buckets
    /// within its segment (see `GROUP_SHIFT`), the segment mixed in.
    #[inline(always)]
    pub(crate) fn stripe_key(&self, pos: Pos) -> usize {
        let (segment, bucket) = self.segment_of(pos);
        group_stripe_key(segment, bucket)
    }

    /// [`located`](Self::located) and [`stripe_key`](Self::stripe_key) of one bucket, its
    /// segment found once.
    #[inline(always)]
    pub(crate) fn located_with_stripe_key(&self, pos: Pos) -> (Located<'_>, usize) {
        let (segment, bucket) = self.segment_of(pos);
        (
            self.located_in(segment, bucket),
            group_stripe_key(segment, bucket),
        )
    }

    /// The four lanes of the bucket at `pos`, lane 0 in the lowest bits, followed by bits of
    /// the buckets after it (see [`entries`](Self::entries) for the four lanes alone).
    #[inline(always)]
    pub(crate) fn bucket(&self, pos: Pos) -> u128 {
        self.bucket_at(self.located(pos))
    }

    /// [`bucket`](Self::bucket), of a located bucket.
    #[inline(always)]
    pub(crate) fn bucket_at(&self, at: Located<'_>) -> u128 {
        let Located { words, bit } = at;
        let word = (bit / 64) as usize;
        let shift = (bit % 64) as u32;
        // One bounds test for the three words (the spare words make it always pass).
        let [a, b, c] = match words.get(word..word + 3) {
            Some([a, b, c]) => [a, b, c],
            _ => unreachable!("two spare words follow every bucket"),
        };
        // Acquire: a lookup validates its stripe's version after these loads (the seqlock
        // reader, see `stripe`); a load that sees a writer's store must order that check after
        // it. Plain loads on x86.
        let load = |w: &crate::sync::AtomicU64| u128::from(w.load(Ordering::Acquire));
        let low = load(a) | (load(b) << 64);
        // The third word's bits land from bit 128 - shift up, none when the bucket starts a
        // word: shifting in two steps keeps each shift below 128 and gives 0 for shift 0.
        let high = (load(c) << 1) << (127 - shift);
        (low >> shift) | high
    }

    /// The four lanes of the bucket at `pos`, lane 0 in the lowest bits, for a table whose
    /// buckets fit one word (`width ≤ 16`), followed by bits of the buckets after it. Loads
    /// only the words the bucket lies on: a lookup then touches no cache line its bucket does
    /// not.
    #[inline(always)]
    pub(crate) fn narrow_bucket(&self, pos: Pos) -> u64 {
        self.narrow_bucket_at(self.located(pos))
    }

    /// [`narrow_bucket`](Self::narrow_bucket), of a located bucket.
    #[inline(always)]
    pub(crate) fn narrow_bucket_at(&self, at: Located<'_>) -> u64 {
        debug_assert!(LANES as u32 * self.width <= 64);
        let Located { words, bit } = at;
        let word = (bit / 64) as usize;
        let shift = (bit % 64) as u32;
        let [a, b] = match words.get(word..word + 2) {
            Some([a, b]) => [a, b],
            _ => unreachable!("two spare words follow every bucket"),
        };
        // Acquire: as in `bucket`.
        let low = a.load(Ordering::Acquire) >> shift;
        if shift + LANES as u32 * self.width <= 64 {
            low
        } else {
            // `shift > 0` here: the second word's bits land from bit 64 - shift up.
            low | (b.load(Ordering::Acquire) << (64 - shift))
        }
    }

    /// Asks for the line of the bucket at `pos`'s first word without waiting for it (see
    /// `storage::prefetch`).
    #[inline(always)]
    pub(crate) fn prefetch(&self, pos: Pos) {
        self.located(pos).prefetch();
    }

    /// The four lanes of the bucket at `pos`, each in the low bits of a word of its own (a
    /// narrow table's bucket is read from the words it lies on, see `narrow_bucket`).
    #[inline(always)]
    pub(crate) fn entries(&self, pos: Pos) -> [u64; LANES as usize] {
        self.entries_at(self.located(pos))
    }

    /// [`entries`](Self::entries), of a located bucket.
    #[inline(always)]
    pub(crate) fn entries_at(&self, at: Located<'_>) -> [u64; LANES as usize] {
        let width = self.width;
        let mask = self.lane_mask;
        if self.is_narrow() {
            self.narrow_entries(self.narrow_bucket_at(at))
        } else {
            let lanes = self.bucket_at(at);
            // Two lanes per 64-bit half (a lane has at most 32 bits): one 128-bit shift in all.
            let halves = [lanes as u64, (lanes >> (2 * width)) as u64];
            [
                halves[0] & mask,
                (halves[0] >> width) & mask,
                halves[1] & mask,
                (halves[1] >> width) & mask,
            ]
        }
    }

    /// Whether a bucket's four lanes fit one word (every table of a 1 % target does).
    #[inline(always)]
    pub(crate) fn is_narrow(&self) -> bool {
        self.lane_ones != 0
    }

    /// For the four lanes of a narrow table's bucket as `narrow_bucket` read them, a flag at
    /// bit `ANCHOR_BITS` of each lane whose anchor is `anchor`, without a branch per lane.
    #[inline(always)]
    pub(crate) fn anchors_agree(&self, lanes: u64, anchor: u64) -> u64 {
        debug_assert!(self.is_narrow());
        let (ones, fields) = (self.lane_ones, self.anchor_fields);
        let flags = ones << ANCHOR_BITS;
        // A lane's anchor field XOR `anchor` is zero when they agree, and adding 31 to a 5-bit
        // field sets the bit above it unless the field is zero (a lane has at least 7 bits, so
        // the sum stays in its lane; bits past the fourth lane are masked off first).
        !(((lanes ^ (anchor * ones)) & fields) + fields) & flags
    }

    /// The low `width` bits set: one lane.
    #[inline(always)]
    pub(crate) fn lane_mask(&self) -> u64 {
        self.lane_mask
    }

    /// The four lanes of a narrow table's bucket as `narrow_bucket` read them.
    #[inline(always)]
    pub(crate) fn narrow_entries(&self, lanes: u64) -> [u64; LANES as usize] {
        let (width, mask) = (self.width, self.lane_mask);
        // (Spelled out: `[_; 4].map` is not always inlined, and lookups run this.)
        [
            lanes & mask,
            (lanes >> width) & mask,
            (lanes >> (2 * width)) & mask,
            (lanes >> (3 * width)) & mask,
        ]
    }

    /// Sets the four lanes of the bucket at `pos` to `entries`, storing only the words the
    /// bucket lies on and keeping their other bits. The caller holds the bucket's stripe.
    #[inline(always)]
    fn set_entries(&self, pos: Pos, entries: [u64; LANES as usize]) {
        let width = self.width;
        let span = LANES as u32 * width;
        if span > 64 {
            // Wide lanes (over up to three words): lane by lane.
            for (lane, entry) in (0..LANES).zip(entries) {
                self.set(pos, lane, entry);
            }
            return;
        }
        let lanes = entries[0]
            | entries[1] << width
            | entries[2] << (2 * width)
            | entries[3] << (3 * width);
        self.set_narrow_bucket(pos, lanes);
    }

    /// Sets the four lanes of the bucket at `pos` of a narrow table to `lanes` (lane 0 in the
    /// lowest bits, nothing above the fourth), storing only the words the bucket lies on. The
    /// caller holds the bucket's stripe.
    #[inline(always)]
    fn set_narrow_bucket(&self, pos: Pos, lanes: u64) {
        let span = LANES as u32 * self.width;
        debug_assert!(span <= 64 && (span == 64 || lanes >> span == 0));
        let Located { words, bit } = self.located(pos);
        let word = (bit / 64) as usize;
        let shift = (bit % 64) as u32;
        let mask = (u128::from(u64::MAX >> (64 - span))) << shift;
        let value = u128::from(lanes) << shift;
        for (i, (mask, value)) in [
            (mask as u64, value as u64),
            ((mask >> 64) as u64, (value >> 64) as u64),
        ]
        .into_iter()
        .enumerate()
        {
            if mask != 0 {
                // Relaxed: as in `set`.
                let old = words[word + i].load(Ordering::Relaxed);
                words[word + i].store((old & !mask) | value, Ordering::Relaxed);
            }
        }
    }

    /// Lane `lane` of the bucket at `pos`.
    #[cfg(test)]
    pub(crate) fn get(&self, pos: Pos, lane: u64) -> u64 {
        self.entries(pos)[lane as usize]
    }

    /// Sets lane `lane` of the bucket at `pos` to `value` (which fits the width). The caller
    /// holds the bucket's stripe: only the words the lane lies on are stored, so a word of
    /// another group is never written back.
    #[inline(always)]
    pub(crate) fn set(&self, pos: Pos, lane: u64, value: u64) {
        self.set_at(self.located(pos), lane, value);
    }

    /// [`set`](Self::set), of a located bucket.
    #[inline(always)]
    fn set_at(&self, at: Located<'_>, lane: u64, value: u64) {
        debug_assert!(value >> self.width == 0);
        let width = self.width;
        let Located {
            words,
            bit: bucket_bit,
        } = at;
        let bit = bucket_bit + lane * u64::from(width);
        let word = (bit / 64) as usize;
        let shift = (bit % 64) as u32;
        let mask = ((1u128 << width) - 1) << shift;
        // Relaxed: we hold the stripe (the lock's Acquire ordered us after its last writer), and
        // the stores are published by the stripe's release fence and unlock.
        let first = u128::from(words[word].load(Ordering::Relaxed));
        let straddles = shift + width > 64;
        let second = if straddles {
            u128::from(words[word + 1].load(Ordering::Relaxed))
        } else {
            0
        };
        let window = ((first | (second << 64)) & !mask) | (u128::from(value) << shift);
        words[word].store(window as u64, Ordering::Relaxed);
        if straddles {
            words[word + 1].store((window >> 64) as u64, Ordering::Relaxed);
        }
    }

    /// Whether the bucket at `pos` has an empty lane, without a branch per lane.
    #[inline(always)]
    pub(crate) fn has_empty_lane(&self, pos: Pos) -> bool {
        if !self.is_narrow() {
            return self.entries(pos).contains(&0);
        }
        self.empty_tops(self.narrow_bucket(pos)) != 0
    }

    /// For the four lanes of a narrow table's bucket as `narrow_bucket` read them, the top
    /// bit of each empty lane, without a branch per lane.
    #[inline(always)]
    fn empty_tops(&self, lanes: u64) -> u64 {
        let top = self.lane_tops();
        // A lane's bits below its top bit plus `2^(width-1) - 1` reach its top bit unless
        // they are all zero, and never carry out of the lane; with the top bit itself, each
        // lane's top bit then says whether the lane holds anything.
        let below = (self.lane_mask >> 1) * self.lane_ones;
        !(((lanes & below) + below) | lanes) & top
    }

    /// The first empty lane of the bucket at `pos`.
    #[cfg(test)]
    fn empty_lane(&self, pos: Pos) -> Option<u64> {
        self.empty_lane_at(self.located(pos))
    }

    /// Writes `value` into the first empty lane of the bucket at `pos` (located once for the
    /// read and the write); `false`, writing nothing, if the bucket is full. The caller holds
    /// the bucket's stripe.
    #[inline(always)]
    pub(crate) fn put(&self, pos: Pos, value: u64) -> bool {
        let at = self.located(pos);
        let Some(lane) = self.empty_lane_at(at) else {
            return false;
        };
        self.set_at(at, lane, value);
        true
    }

    /// [`empty_lane`](Self::empty_lane), of a located bucket.
    #[inline(always)]
    fn empty_lane_at(&self, at: Located<'_>) -> Option<u64> {
        if !self.is_narrow() {
            let entries = self.entries_at(at);
            return (0..LANES).find(|&lane| entries[lane as usize] == 0);
        }
        let empty = self.empty_tops(self.narrow_bucket_at(at));
        // The lane of the lowest empty top: how many lanes' tops lie below it.
        let below_first = (empty & empty.wrapping_neg()).wrapping_sub(1);
        (empty != 0).then(|| u64::from((self.lane_tops() & below_first).count_ones()))
    }

    /// The top bit of each of a narrow bucket's four lanes.
    #[inline(always)]
    fn lane_tops(&self) -> u64 {
        self.lane_ones << (self.width - 1)
    }

    /// Empties every lane (the caller keeps writers out).
    pub(crate) fn clear(&self) {
        for words in self.segments() {
            for word in words.iter() {
                word.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Splits the bucket at `pos`, of a table of `base · 2^k` buckets whose segment `k + 1`
    /// has been added, into `pos` and `pos` plus `2^k` in its high part. Returns how many
    /// entries were copied into both (those with no tail bit left). The caller holds both
    /// halves' stripes.
    pub(crate) fn split(&self, pos: Pos, k: u32) -> u64 {
        let upper = Pos {
            home: pos.home,
            high: pos.high + (1 << k),
        };
        if !self.is_narrow() {
            return self.split_wide(pos, upper);
        }
        // Both halves are packed in registers, then each bucket is written once.
        let (width, mask) = (self.width, self.lane_mask);
        let lanes = self.narrow_bucket(pos);
        let (mut halves, mut filled, mut copied) = ([0u64; 2], [0u32; 2], 0);
        for lane in 0..LANES as u32 {
            let entry = (lanes >> (lane * width)) & mask;
            if entry == 0 {
                continue;
            }
            let anchor = entry & ((1 << ANCHOR_BITS) - 1);
            let field = entry >> ANCHOR_BITS;
            let moved = ((field >> 1).max(1) << ANCHOR_BITS) | anchor;
            // Its lowest tail bit names its half; with none left it goes to both.
            let exhausted = field == 1;
            copied += u64::from(exhausted);
            for (half, goes) in [exhausted | (field & 1 == 0), exhausted | (field & 1 == 1)]
                .into_iter()
                .enumerate()
            {
                if goes {
                    // At most four entries reach a half: the shift stays below 64.
                    halves[half] |= moved << filled[half];
                    filled[half] += width;
                }
            }
        }
        self.set_narrow_bucket(pos, halves[0]);
        self.set_narrow_bucket(upper, halves[1]);
        copied
    }

    /// `split` for a table whose buckets take more than a word.
    fn split_wide(&self, pos: Pos, upper: Pos) -> u64 {
        // Both halves are built in registers, then each bucket is written once.
        let mut halves = [[0u64; LANES as usize]; 2];
        let mut filled = [0usize; 2];
        let mut copied = 0;
        for entry in self.entries(pos) {
            if entry == 0 {
                continue;
            }
            let anchor = entry & ((1 << ANCHOR_BITS) - 1);
            let field = entry >> ANCHOR_BITS;
            let moved = ((field >> 1).max(1) << ANCHOR_BITS) | anchor;
            let to: &[usize] = if field == 1 {
                copied += 1;
                &[0, 1]
            } else {
                &[(field & 1) as usize]
            };
            for &half in to {
                halves[half][filled[half]] = moved;
                filled[half] += 1;
            }
        }
        self.set_entries(pos, halves[0]);
        self.set_entries(upper, halves[1]);
        copied
    }
}

/// A copy of `words` (the caller keeps writers out while it reads them).
///
/// # Panics
///
/// When memory for the copy runs out (a clone's documented panic, taken before anything
/// changes).
pub(super) fn copy_words(words: &BucketWords, huge_pages: bool) -> BucketWords {
    let copy = BucketWords::zeroed(words.len(), huge_pages)
        .unwrap_or_else(|failed| panic!("copying a filter: {} bytes unavailable", failed.bytes));
    for (from, to) in words.iter().zip(copy.iter()) {
        // Relaxed: no writer runs (see above), and `copy` is not shared yet.
        let word = from.load(Ordering::Relaxed);
        if word != 0 {
            to.store(word, Ordering::Relaxed);
        }
    }
    copy
}

impl Table {
    /// A copy of the table, for a filter's clone (the caller keeps writers out).
    pub(super) fn copy(&self) -> Self {
        let segments: Box<[OnceLock<BucketWords>]> =
            self.segments.iter().map(|_| OnceLock::new()).collect();
        for (cell, words) in segments.iter().zip(self.segments()) {
            let _ = cell.set(copy_words(words, self.huge_pages));
        }
        Table::of(self.width, self.base, segments, self.huge_pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_empty_lane_and_empty_lane_find_the_lanes_that_are_zero() {
        let mut x = 0x0fed_cba9_8765_4321u64;
        for width in ANCHOR_BITS + 2..=32 {
            let table = Table::new(4, width, false).unwrap();
            let at = pos(&table, 1);
            for round in 0..5_000 {
                x = super::super::keys::mix(x);
                // Lanes of a few bits, one bit, or none, so that each case is common.
                let mut entries = [0u64; LANES as usize];
                for (lane, entry) in entries.iter_mut().enumerate() {
                    let draw = x >> (lane * 16);
                    *entry = match draw & 3 {
                        0 => 0,
                        1 => 1 << ((draw >> 2) % u64::from(width)),
                        _ => (draw >> 4) & table.lane_mask(),
                    };
                }
                table.set_entries(at, entries);
                // The next bucket's lanes are set too: bits past a bucket must not count.
                table.set_entries(pos(&table, 2), [x & table.lane_mask(); LANES as usize]);
                assert_eq!(
                    table.has_empty_lane(at),
                    entries.contains(&0),
                    "width {width}, round {round}, {entries:x?}"
                );
                assert_eq!(
                    table.empty_lane(at),
                    (0..LANES).find(|&lane| entries[lane as usize] == 0),
                    "width {width}, round {round}, {entries:x?}"
                );
            }
        }
    }

    #[test]
    fn anchors_agree_flags_exactly_the_lanes_with_the_anchor() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        for width in ANCHOR_BITS + 2..=16 {
            let table = Table::new(2, width, false).unwrap();
            for _ in 0..20_000 {
                x = super::super::keys::mix(x);
                // Lanes drawn from a few anchors so that agreements are common; bits past
                // the fourth lane are arbitrary (the next bucket's).
                let lanes = x & !0x0842_1084_2108_4210;
                for anchor in 0..1 << ANCHOR_BITS {
                    let expected: u64 = (0..LANES)
                        .filter(|&lane| {
                            (lanes >> (lane * u64::from(width))) & ((1 << ANCHOR_BITS) - 1)
                                == anchor
                        })
                        .map(|lane| 1 << (lane * u64::from(width) + u64::from(ANCHOR_BITS)))
                        .sum();
                    assert_eq!(
                        table.anchors_agree(lanes, anchor),
                        expected,
                        "width {width}, lanes {lanes:#x}, anchor {anchor}"
                    );
                }
            }
        }
    }

    fn pos(table: &Table, bucket: u64) -> Pos {
        Pos {
            home: bucket % table.base,
            high: bucket / table.base,
        }
    }

    #[test]
    fn lanes_of_every_width_read_back_what_was_set() {
        for width in ANCHOR_BITS + 2..=32 {
            let table = Table::new(10, width, false).unwrap();
            table.add_segment(1).unwrap();
            let slots = table.buckets(1) * LANES;
            let mut expected = vec![0u64; slots as usize];
            let mut x = u64::from(width);
            for round in 0..300 {
                x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(round);
                let slot = (x >> 7) % slots;
                let value = (x >> 20) & ((1 << width) - 1);
                table.set(pos(&table, slot / 4), slot % 4, value);
                expected[slot as usize] = value;
                for (s, &e) in expected.iter().enumerate() {
                    let s = s as u64;
                    assert_eq!(table.get(pos(&table, s / 4), s % 4), e, "width {width}");
                }
            }
        }
    }

    /// The narrow split (both halves packed in one word each) leaves exactly what the wide
    /// split (lane by lane) leaves, on a copy of the same table, for every narrow width, at
    /// every bucket of two segments (buckets that straddle words, the last bucket), with
    /// exhausted entries, empty lanes and full buckets common; the buckets around are kept.
    #[test]
    fn a_narrow_split_leaves_what_the_wide_split_leaves() {
        let mut x = 0x5eed_0f5b_1175_u64;
        for width in ANCHOR_BITS + 2..=16 {
            for base in [1u64, 3, 5, 7, 17] {
                let table = Table::new(base, width, false).unwrap();
                table.add_segment(1).unwrap();
                table.add_segment(2).unwrap();
                let all = table.buckets(2);
                for round in 0..40 {
                    // Fill every bucket: lanes empty, exhausted (field 1), or random.
                    for bucket in 0..all {
                        let mut entries = [0u64; LANES as usize];
                        for entry in entries.iter_mut() {
                            x = super::super::keys::mix(x.wrapping_add(0x9e37_79b9));
                            let anchor = x & ((1 << ANCHOR_BITS) - 1);
                            let field = (x >> 8) & ((1 << (width - ANCHOR_BITS)) - 1);
                            *entry = match (x >> 40) % 5 {
                                0 => 0,
                                1 => (1 << ANCHOR_BITS) | anchor,
                                2 => {
                                    // A short field: a marker low, a tail of one or two bits.
                                    let short = if width - ANCHOR_BITS >= 3 {
                                        (x >> 50) & 3 | 4
                                    } else {
                                        (x >> 50) & 1 | 2
                                    };
                                    (short << ANCHOR_BITS) | anchor
                                }
                                _ => ((field.max(1)) << ANCHOR_BITS) | anchor,
                            };
                        }
                        table.set_entries(pos(&table, bucket), entries);
                    }
                    // One old bucket of the table after one doubling, split into segment 2.
                    let old_buckets = table.buckets(1);
                    let old = pos(&table, (round * 7 + u64::from(width)) % old_buckets);
                    let copy = table.copy();
                    let narrow = table.split(old, 1);
                    let upper = Pos {
                        home: old.home,
                        high: old.high + 2,
                    };
                    let wide = copy.split_wide(old, upper);
                    assert_eq!(narrow, wide, "width {width}, base {base}, {old:?}");
                    for bucket in 0..all {
                        let at = pos(&table, bucket);
                        assert_eq!(
                            table.entries(at),
                            copy.entries(at),
                            "width {width}, base {base}, split {old:?}, bucket {bucket}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_split_moves_each_entry_by_its_lowest_tail_bit() {
        let width = 12;
        let table = Table::new(2, width, false).unwrap();
        table.add_segment(1).unwrap();
        let anchor = 3;
        let at = Pos { home: 1, high: 0 };
        // Tails 0b10 (stays), 0b11 (moves up), and an entry with no tail bit left.
        table.set(at, 0, (0b110 << ANCHOR_BITS) | anchor);
        table.set(at, 1, (0b111 << ANCHOR_BITS) | anchor);
        table.set(at, 2, (1 << ANCHOR_BITS) | anchor);
        assert_eq!(table.split(at, 0), 1);
        let up = Pos { home: 1, high: 1 };
        for half in [at, up] {
            assert_eq!(table.get(half, 0), (0b11 << ANCHOR_BITS) | anchor);
            assert_eq!(table.get(half, 1), (1 << ANCHOR_BITS) | anchor);
            assert_eq!(table.get(half, 2), 0);
        }
        // The other home's buckets were not touched.
        assert_eq!(table.empty_lane(Pos { home: 0, high: 0 }), Some(0));
        assert_eq!(table.empty_lane(Pos { home: 0, high: 1 }), Some(0));
        assert_eq!(table.buckets(1), 4);
    }
}
