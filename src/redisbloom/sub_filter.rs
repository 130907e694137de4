//! One RedisBloom sub-filter: `bucket_size` one-byte slots per bucket, packed little-endian into
//! atomic words (byte `i` of the sub-filter is byte `i % 8` of word `i / 8`), guarded by the
//! crate's lock stripes (`crate::stripe`), with the same protocol as the main table:
//!
//! - a writer changes a slot only while it holds the stripes of *both* buckets of the
//!   fingerprint it adds, removes or moves (the pair is fixed by the fingerprint and either
//!   bucket, see `hash::alt_bucket`);
//! - a reader looks first (a hit needs no validation), then validates a miss against the
//!   version of its primary bucket's stripe, and after a bounded number of failed attempts
//!   answers "maybe".
//!
//! Buckets need not fill whole words (bucket sizes 1 to 255), so two buckets of different
//! stripes can share a word: a slot is written with an atomic `fetch_xor` of the change, which
//! leaves the word's other bytes as their own writers left them.

use std::ops::Range;

use super::hash::{alt_bucket, bucket_of, ItemHash};
use crate::optimistic_read::{retry_read, Lookup, READ_ATTEMPTS};
use crate::stripe::{FreezeGuard, PairGuard, SetGuard, Stripe, StripeSet};
use crate::sync::Ordering;
use crate::table::{AllocationFailed, BucketWords};

/// Every byte of a word set to one.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The low seven bits of every byte.
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// The high bit of each byte of `x` that is zero, and no other bit (exact, unlike the classic
/// `(x - ONES) & !x` test, whose borrows mark bytes above a zero byte too).
#[inline]
fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// One sub-filter.
pub(crate) struct SubFilter {
    buckets: u64,
    bucket_size: usize,
    /// For bucket sizes up to 8, whose buckets read as one word (`bucket_word`): the high bit
    /// of each of the low `bucket_size` bytes. 0 for larger buckets, which take `word_masks`.
    slot_mask: u64,
    /// Whether a bucket can straddle two words (bucket sizes 3, 5, 6 and 7).
    straddles: bool,
    /// Slot bytes (`buckets × bucket_size`); the last word may have unused bytes, always 0.
    bytes: usize,
    words: BucketWords,
    stripes: StripeSet,
}

/// What one unvalidated read of an item's buckets found (`SubFilter::probe`).
#[derive(Clone, Copy)]
pub(crate) enum Probe<'a> {
    /// A bucket holds the fingerprint.
    Hit,
    /// Neither does, if the stripe still has version `begun` (`Stripe::read_validate`).
    Miss { stripe: &'a Stripe, begun: u64 },
}

/// Where a writer put or found a fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) bucket: usize,
    pub(crate) slot: usize,
}

impl SubFilter {
    /// An empty sub-filter of `buckets` (a power of two) buckets of `bucket_size` slots.
    pub(crate) fn new(buckets: u64, bucket_size: u16) -> Result<Self, AllocationFailed> {
        let bytes = Self::checked_bytes(buckets, bucket_size)?;
        let slot_mask = match bucket_size {
            1..=7 => ((1u64 << (8 * bucket_size)) - 1) & (ONES << 7),
            8 => ONES << 7,
            _ => 0,
        };
        Ok(SubFilter {
            buckets,
            bucket_size: usize::from(bucket_size),
            slot_mask,
            straddles: 8 % bucket_size != 0,
            bytes,
            words: BucketWords::zeroed(bytes.div_ceil(8).max(1), false)?,
            stripes: StripeSet::new(crate::params::stripes_for(buckets as usize)).counting(bytes),
        })
    }

    /// A sub-filter holding `data` (its slot bytes, `buckets × bucket_size` of them).
    pub(crate) fn from_bytes(
        buckets: u64,
        bucket_size: u16,
        data: &[u8],
    ) -> Result<Self, AllocationFailed> {
        let mut sub = SubFilter::new(buckets, bucket_size)?;
        debug_assert_eq!(data.len(), sub.bytes);
        for (word, chunk) in sub.words.iter().zip(data.chunks(8)) {
            let mut le = [0u8; 8];
            le[..chunk.len()].copy_from_slice(chunk);
            // Relaxed: the sub-filter is not shared yet.
            word.store(u64::from_le_bytes(le), Ordering::Relaxed);
        }
        let occupied = data.iter().filter(|&&b| b != 0).count();
        sub.stripes.set_items(occupied);
        Ok(sub)
    }

    fn checked_bytes(buckets: u64, bucket_size: u16) -> Result<usize, AllocationFailed> {
        let bytes = buckets.checked_mul(u64::from(bucket_size));
        // RedisBloom computes byte offsets in 32 bits: a sub-filter past 4 GiB would wrap there.
        bytes
            .filter(|&b| b <= u64::from(u32::MAX))
            .map(|b| b as usize)
            .ok_or(AllocationFailed {
                bytes: bytes.map_or(usize::MAX, |b| b as usize),
            })
    }

    pub(crate) fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Slot bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Heap bytes: words and stripes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * 8 + self.stripes.bytes()
    }

    /// Fingerprints stored (exact when no writer runs).
    pub(crate) fn len(&self) -> usize {
        self.stripes.items()
    }

    /// The item's two buckets here (equal when its fingerprint maps a bucket onto itself).
    #[inline]
    pub(crate) fn pair(&self, h: &ItemHash) -> (usize, usize) {
        (
            bucket_of(h.h1, self.buckets) as usize,
            bucket_of(h.h2, self.buckets) as usize,
        )
    }

    /// The other bucket of `fp` stored in `bucket`.
    #[inline]
    pub(crate) fn alternate(&self, fp: u8, bucket: usize) -> usize {
        alt_bucket(fp, bucket as u64, self.buckets) as usize
    }

    /// The byte range of a bucket's slots.
    #[inline]
    fn span(&self, bucket: usize) -> Range<usize> {
        let start = bucket * self.bucket_size;
        start..start + self.bucket_size
    }

    /// For each word a bucket touches: the word's index and the mask of the bucket's bytes'
    /// high bits in it.
    #[inline]
    fn word_masks(&self, bucket: usize) -> impl Iterator<Item = (usize, u64)> {
        let Range { start, end } = self.span(bucket);
        (start / 8..end.div_ceil(8)).map(move |w| {
            let from = start.max(w * 8) - w * 8;
            let to = end.min(w * 8 + 8) - w * 8;
            let bytes = if to - from == 8 {
                u64::MAX
            } else {
                ((1u64 << ((to - from) * 8)) - 1) << (from * 8)
            };
            (w, bytes & (ONES << 7))
        })
    }

    /// A bucket of at most 8 slots as one word, slot `i` in byte `i` (the bytes above the
    /// bucket's are another bucket's: mask them with `slot_mask`). One load, or two when the
    /// bucket straddles words (bucket sizes 3, 5, 6 and 7).
    #[inline(always)]
    fn bucket_word(&self, bucket: usize, order: Ordering) -> u64 {
        debug_assert!(self.slot_mask != 0);
        let start = bucket * self.bucket_size;
        let (w, shift) = (start / 8, start % 8 * 8);
        let low = self.words[w].load(order) >> shift;
        if !self.straddles || shift + self.bucket_size * 8 <= 64 {
            low
        } else {
            low | self.words[w + 1].load(order) << (64 - shift)
        }
    }

    /// The high bit of each slot of a bucket word (`bucket_word`) that holds `value`.
    #[inline(always)]
    fn matches(&self, word: u64, value: u8) -> u64 {
        zero_bytes(word ^ (ONES * u64::from(value))) & self.slot_mask
    }

    /// The lowest slot of `bucket` holding `value` (0: an empty slot).
    #[inline]
    pub(crate) fn find(&self, bucket: usize, value: u8, order: Ordering) -> Option<usize> {
        if self.slot_mask != 0 {
            let hits = self.matches(self.bucket_word(bucket, order), value);
            return (hits != 0).then(|| hits.trailing_zeros() as usize / 8);
        }
        let pattern = ONES * u64::from(value);
        let base = bucket * self.bucket_size;
        self.word_masks(bucket).find_map(|(w, mask)| {
            let hits = zero_bytes(self.words[w].load(order) ^ pattern) & mask;
            (hits != 0).then(|| w * 8 + hits.trailing_zeros() as usize / 8 - base)
        })
    }

    /// How many slots of `bucket` hold `value`.
    #[inline]
    pub(crate) fn count_in(&self, bucket: usize, value: u8, order: Ordering) -> usize {
        if self.slot_mask != 0 {
            return self
                .matches(self.bucket_word(bucket, order), value)
                .count_ones() as usize;
        }
        let pattern = ONES * u64::from(value);
        self.word_masks(bucket)
            .map(|(w, mask)| {
                (zero_bytes(self.words[w].load(order) ^ pattern) & mask).count_ones() as usize
            })
            .sum()
    }

    /// The byte in a slot.
    #[inline]
    pub(crate) fn slot(&self, bucket: usize, slot: usize, order: Ordering) -> u8 {
        let i = bucket * self.bucket_size + slot;
        (self.words[i / 8].load(order) >> (i % 8 * 8)) as u8
    }

    /// The bytes of a bucket, read with `order`.
    pub(crate) fn bucket_bytes(&self, bucket: usize, order: Ordering) -> Vec<u8> {
        (0..self.bucket_size)
            .map(|s| self.slot(bucket, s, order))
            .collect()
    }

    /// Changes a slot from `old` to `new`. The caller holds the stripes of the buckets of
    /// both fingerprints involved, so `old` is what the slot holds.
    #[inline]
    pub(crate) fn write_slot(&self, at: Slot, old: u8, new: u8) {
        let i = at.bucket * self.bucket_size + at.slot;
        // Relaxed: published by the stripe unlock (Release), like every data store; an atomic
        // xor because the word may hold bytes of another stripe's buckets.
        #[cfg(not(loom_mutant = "rb_plain_store"))]
        self.words[i / 8].fetch_xor(u64::from(old ^ new) << (i % 8 * 8), Ordering::Relaxed);
        // Mutant `rb_plain_store`: a load and a store, losing another stripe's write between them.
        #[cfg(loom_mutant = "rb_plain_store")]
        self.words[i / 8].store(
            self.words[i / 8].load(Ordering::Relaxed) ^ u64::from(old ^ new) << (i % 8 * 8),
            Ordering::Relaxed,
        );
    }

    /// Whether either bucket holds `fp`.
    #[inline(always)]
    fn holds_either(&self, (a, b): (usize, usize), fp: u8) -> bool {
        // Acquire: orders the validating version load after these (`Stripe::read_validate`),
        // and the next sub-filter's loads after these (a compaction copies into an older
        // sub-filter before it erases from a newer one, see `RedisCuckooFilter::lookup`).
        if self.slot_mask != 0 {
            let (first, second) = (
                self.bucket_word(a, Ordering::Acquire),
                self.bucket_word(b, Ordering::Acquire),
            );
            // `|`, not `||`: both loads are issued before either is tested (see table/read.rs).
            return (self.matches(first, fp) | self.matches(second, fp)) != 0;
        }
        self.find(a, fp, Ordering::Acquire).is_some()
            || self.find(b, fp, Ordering::Acquire).is_some()
    }

    /// One seqlock read of the item's buckets, not yet validated: the primary stripe's
    /// version, then both buckets. A hit needs no validation; a miss is proven only once
    /// `Stripe::read_validate(begun)` holds (the caller may validate later, after probing other
    /// sub-filters: see `RedisCuckooFilter::lookup`).
    #[inline(always)]
    pub(crate) fn probe(&self, h: &ItemHash) -> Probe<'_> {
        let pair = self.pair(h);
        let stripe = self.stripes.of(pair.0);
        let begun = stripe.read_begin();
        if self.holds_either(pair, h.fp) {
            Probe::Hit
        } else {
            Probe::Miss { stripe, begun }
        }
    }

    /// Loads the item's bucket words and its primary stripe so that the operation that follows
    /// finds them in cache (batches: `insert_many`, `contains_many`); the value means nothing.
    #[inline]
    pub(crate) fn touch(&self, h: &ItemHash) -> u64 {
        let (a, b) = self.pair(h);
        let first_word =
            |bucket: usize| self.words[bucket * self.bucket_size / 8].load(Ordering::Relaxed);
        // Relaxed: only brings the lines into cache; the operation reads them again.
        first_word(a) ^ first_word(b) ^ self.stripes.of(a).read_begin()
    }

    /// Wait-free lookup: a hit needs no validation; a miss is proven against the version of
    /// the primary bucket's stripe (every write that can take `fp` out of either bucket holds
    /// both stripes); after `READ_ATTEMPTS` collisions with writers, "maybe".
    #[inline]
    pub(crate) fn lookup(&self, h: &ItemHash) -> Lookup {
        let pair = self.pair(h);
        // A first look without the stripe: a hit skips the line that writers rewrite.
        if self.holds_either(pair, h.fp) {
            return Lookup::Present;
        }
        let stripe = self.stripes.of(pair.0);
        Lookup::of(retry_read(READ_ATTEMPTS, |_| {
            let begun = stripe.read_begin();
            if self.holds_either(pair, h.fp) {
                return Some(true);
            }
            stripe.read_validate(begun).then_some(false)
        }))
    }

    /// Whether either bucket holds `fp`, proven: a lookup, settled under the pair's stripes
    /// (read-only) when it stays unproven.
    pub(crate) fn holds(&self, h: &ItemHash) -> bool {
        match self.lookup(h) {
            Lookup::Present => true,
            Lookup::Absent => false,
            Lookup::Unproven => {
                let (a, b) = self.pair(h);
                let _read = self.stripes.lock_pair_to_read(a, b);
                // Relaxed: the stripes are held, and taking them made the last writes visible.
                self.find(a, h.fp, Ordering::Relaxed).is_some()
                    || self.find(b, h.fp, Ordering::Relaxed).is_some()
            }
        }
    }

    /// `CF.COUNT` in this sub-filter: copies in bucket `h1`, plus copies in bucket `h2`, which
    /// counts one bucket twice when both are the same (as RedisBloom does).
    pub(crate) fn count(&self, h: &ItemHash) -> usize {
        let (a, b) = self.pair(h);
        let both = |order| self.count_in(a, h.fp, order) + self.count_in(b, h.fp, order);
        let stripe = self.stripes.of(a);
        let counted = retry_read(READ_ATTEMPTS, |_| {
            let begun = stripe.read_begin();
            // Acquire: orders the validating load after these (see `Stripe::read_validate`).
            let n = both(Ordering::Acquire);
            stripe.read_validate(begun).then_some(n)
        });
        if let Some(n) = counted {
            return n;
        }
        // Every attempt met a writer: count under the pair's stripes (read-only).
        let _read = self.stripes.lock_pair_to_read(a, b);
        both(Ordering::Relaxed)
    }

    /// Locks the item's pair for writing.
    pub(crate) fn lock_item(&self, h: &ItemHash) -> PairGuard<'_> {
        let (a, b) = self.pair(h);
        self.stripes.lock_pair(a, b)
    }

    /// Locks the stripes of `buckets` for writing (a kick walk).
    pub(crate) fn lock_buckets(&self, buckets: &[usize]) -> SetGuard<'_> {
        self.stripes.lock_buckets(buckets.iter().copied())
    }

    /// Every stripe's first bucket: locking these locks the whole sub-filter.
    pub(crate) fn every_stripe(&self) -> Vec<usize> {
        (0..self.stripes.count()).collect()
    }

    /// Locks a fingerprint's pair while `frozen` keeps other writers out (a compaction).
    pub(crate) fn lock_pair_frozen(
        &self,
        frozen: &FreezeGuard<'_>,
        a: usize,
        b: usize,
    ) -> PairGuard<'_> {
        self.stripes.lock_pair_frozen(frozen, a, b)
    }

    /// The lowest empty slot of bucket `h1`, else of bucket `h2`, as RedisBloom fills them.
    /// The caller holds the pair.
    pub(crate) fn free_slot(&self, pair: (usize, usize)) -> Option<Slot> {
        self.first_holding(pair, 0)
    }

    /// Whether both buckets look full, read without their stripes: a hint that lets an insert
    /// skip locking a sub-filter with no room (a slot freed meanwhile may be missed, as if the
    /// insert had come first).
    #[inline]
    pub(crate) fn looks_full(&self, pair: (usize, usize)) -> bool {
        // Relaxed loads (in `first_holding`): only a hint; the insert re-checks under the locks.
        self.first_holding(pair, 0).is_none()
    }

    /// The lowest slot holding `fp` in bucket `h1`, else in bucket `h2`, as RedisBloom
    /// deletes. The caller holds the pair.
    pub(crate) fn slot_of(&self, pair: (usize, usize), fp: u8) -> Option<Slot> {
        self.first_holding(pair, fp)
    }

    /// The lowest slot holding `value` in bucket `a`, else in bucket `b`, read Relaxed: the
    /// callers hold both stripes, or only want a hint (`looks_full`).
    fn first_holding(&self, (a, b): (usize, usize), value: u8) -> Option<Slot> {
        [a, b].into_iter().find_map(|bucket| {
            self.find(bucket, value, Ordering::Relaxed)
                .map(|slot| Slot { bucket, slot })
        })
    }

    /// Freezes the sub-filter (see `StripeSet::freeze`).
    pub(crate) fn freeze(&self) -> FreezeGuard<'_> {
        self.stripes.freeze()
    }

    /// The slot bytes, read while `frozen` (this sub-filter's freeze) keeps writers out.
    pub(crate) fn frozen_bytes(&self, frozen: &FreezeGuard<'_>) -> Vec<u8> {
        debug_assert!(frozen.freezes(&self.stripes), "another sub-filter's freeze");
        let mut out = Vec::with_capacity(self.words.len() * 8);
        for word in self.words.iter() {
            // Relaxed: the freeze took every stripe after its last writer.
            out.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        out.truncate(self.bytes);
        out
    }

    pub(crate) fn bucket_size(&self) -> usize {
        self.bucket_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_bytes_marks_exactly_the_zero_bytes() {
        for x in [
            0u64,
            1,
            0x0100,
            0x00ff_0000_0100_0001,
            u64::MAX,
            0x8000_0000_0000_0000,
        ] {
            let marked = zero_bytes(x);
            for byte in 0..8 {
                let is_zero = (x >> (byte * 8)) & 0xff == 0;
                assert_eq!(
                    marked >> (byte * 8 + 7) & 1 == 1,
                    is_zero,
                    "{x:#x} byte {byte}"
                );
            }
            assert_eq!(marked & !(ONES << 7), 0);
        }
    }

    #[test]
    fn slots_of_every_bucket_size_read_back_as_written() {
        for bucket_size in [1u16, 2, 3, 4, 5, 7, 8, 9, 17, 255] {
            let sub = SubFilter::new(16, bucket_size).unwrap();
            let bs = usize::from(bucket_size);
            for bucket in 0..16 {
                for slot in 0..bs {
                    let value = ((bucket * 31 + slot * 7) % 255 + 1) as u8;
                    sub.write_slot(Slot { bucket, slot }, 0, value);
                }
            }
            for bucket in 0..16 {
                let bytes = sub.bucket_bytes(bucket, Ordering::Relaxed);
                for (slot, &byte) in bytes.iter().enumerate() {
                    assert_eq!(byte, ((bucket * 31 + slot * 7) % 255 + 1) as u8);
                    let first = bytes.iter().position(|&b| b == byte).unwrap();
                    assert_eq!(sub.find(bucket, byte, Ordering::Relaxed), Some(first));
                }
                assert_eq!(sub.find(bucket, 0, Ordering::Relaxed), None, "bs={bs}");
            }
            sub.write_slot(
                Slot {
                    bucket: 5,
                    slot: bs - 1,
                },
                sub.slot(5, bs - 1, Ordering::Relaxed),
                0,
            );
            assert_eq!(sub.find(5, 0, Ordering::Relaxed), Some(bs - 1));
            assert_eq!(
                sub.count_in(4, 0, Ordering::Relaxed),
                0,
                "neighbours untouched"
            );
            assert_eq!(
                sub.count_in(6, 0, Ordering::Relaxed),
                0,
                "neighbours untouched"
            );
        }
    }
}
