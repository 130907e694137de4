//! The expanding filter's table: buckets of four lanes of `width` bits, packed one after the
//! other in `u64` words, and the doubling that splits every bucket in place.
//!
//! A lane holds `(field << ANCHOR_BITS) | anchor`, where the field is a marker bit above the
//! entry's tail bits; 0 is an empty lane. A doubling appends as many buckets as there are and
//! moves each entry of bucket `b` to `b` or `b + n` by its lowest tail bit, dropping that bit
//! (the field shifts right by one). An entry with no tail bit left matches both halves, so it
//! is copied into both. The two halves of a bucket only receive that bucket's entries, so a
//! doubling never overflows a bucket and never kicks.

use std::collections::TryReserveError;

use super::keys::ANCHOR_BITS;

/// Lanes per bucket.
pub(super) const LANES: u64 = 4;

/// The packed lanes.
#[derive(Clone, Debug)]
pub(super) struct Table {
    /// Lane width in bits, at most 32.
    width: u32,
    buckets: u64,
    /// The lanes, plus two spare zero words so that a bucket read never needs a bounds test.
    words: Vec<u64>,
}

/// Words for `buckets` buckets of four `width`-bit lanes, plus the spare words.
fn words_for(buckets: u64, width: u32) -> Option<usize> {
    let bits = buckets.checked_mul(LANES * u64::from(width))?;
    usize::try_from(bits.div_ceil(64) + 2).ok()
}

impl Table {
    /// An empty table, or the bytes it would need when they cannot be had.
    pub fn new(buckets: u64, width: u32) -> Result<Self, usize> {
        debug_assert!((ANCHOR_BITS + 2..=32).contains(&width));
        let len = words_for(buckets, width).ok_or(usize::MAX)?;
        let mut words = Vec::new();
        words
            .try_reserve_exact(len)
            .map_err(|_| len.saturating_mul(8))?;
        words.resize(len, 0);
        Ok(Table {
            width,
            buckets,
            words,
        })
    }

    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    /// Bytes held by the words.
    pub fn bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    /// Lane `lane` of bucket `bucket`.
    #[inline(always)]
    pub fn get(&self, bucket: u64, lane: u64) -> u64 {
        let bit = (bucket * LANES + lane) * u64::from(self.width);
        let word = (bit / 64) as usize;
        let shift = (bit % 64) as u32;
        // Two words as one 128-bit window: a lane of at most 32 bits never spans more.
        let window = u128::from(self.words[word]) | (u128::from(self.words[word + 1]) << 64);
        (window >> shift) as u64 & ((1u64 << self.width) - 1)
    }

    /// The four lanes of `bucket`, lane 0 in the lowest bits (at most 128 bits).
    #[inline(always)]
    pub fn bucket(&self, bucket: u64) -> u128 {
        let bit = bucket * LANES * u64::from(self.width);
        let word = (bit / 64) as usize;
        let shift = (bit % 64) as u32;
        let low = u128::from(self.words[word]) | (u128::from(self.words[word + 1]) << 64);
        // The third word's bits land from bit 128 - shift up, none when the bucket starts a
        // word: shifting in two steps keeps each shift below 128 and gives 0 for shift 0.
        let high = (u128::from(self.words[word + 2]) << 1) << (127 - shift);
        (low >> shift) | high
    }

    /// Sets lane `lane` of bucket `bucket` to `value` (which fits the width).
    #[inline(always)]
    pub fn set(&mut self, bucket: u64, lane: u64, value: u64) {
        debug_assert!(value >> self.width == 0);
        let bit = (bucket * LANES + lane) * u64::from(self.width);
        let word = (bit / 64) as usize;
        let shift = (bit % 64) as u32;
        let mask = ((1u128 << self.width) - 1) << shift;
        let window = u128::from(self.words[word]) | (u128::from(self.words[word + 1]) << 64);
        let window = (window & !mask) | (u128::from(value) << shift);
        self.words[word] = window as u64;
        self.words[word + 1] = (window >> 64) as u64;
    }

    /// The first empty lane of `bucket`.
    #[inline(always)]
    pub fn empty_lane(&self, bucket: u64) -> Option<u64> {
        (0..LANES).find(|&lane| self.get(bucket, lane) == 0)
    }

    /// Empties every lane.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// The bytes a doubling would ask for (the whole doubled table), `usize::MAX` on overflow.
    pub fn doubled_bytes(&self) -> usize {
        self.buckets
            .checked_mul(2)
            .and_then(|b| words_for(b, self.width))
            .map_or(usize::MAX, |w| w.saturating_mul(8))
    }

    /// Doubles the table in place. Returns how many entries were copied into both halves
    /// (those with no tail bit left). On an allocation failure nothing changes.
    pub fn double(&mut self) -> Result<u64, TryReserveError> {
        let old = self.buckets;
        let len = words_for(old * 2, self.width).expect("checked by the caller");
        self.words.try_reserve_exact(len - self.words.len())?;
        self.words.resize(len, 0);
        self.buckets = old * 2;
        let mut copied = 0;
        for bucket in 0..old {
            let mut entries = [0u64; LANES as usize];
            for (lane, entry) in entries.iter_mut().enumerate() {
                *entry = self.get(bucket, lane as u64);
                self.set(bucket, lane as u64, 0);
            }
            let mut filled = [0u64; 2];
            for entry in entries.into_iter().filter(|&e| e != 0) {
                let anchor = entry & ((1 << ANCHOR_BITS) - 1);
                let field = entry >> ANCHOR_BITS;
                let halves: &[u64] = if field == 1 {
                    copied += 1;
                    &[0, 1]
                } else {
                    &[field & 1]
                };
                let moved = ((field >> 1).max(1) << ANCHOR_BITS) | anchor;
                for &half in halves {
                    self.set(bucket + old * half, filled[half as usize], moved);
                    filled[half as usize] += 1;
                }
            }
        }
        Ok(copied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_of_every_width_read_back_what_was_set() {
        for width in ANCHOR_BITS + 2..=32 {
            let mut table = Table::new(9, width).unwrap();
            let mut expected = vec![0u64; 36];
            let mut x = u64::from(width);
            for round in 0..200 {
                x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(round);
                let slot = (x >> 7) % 36;
                let value = (x >> 20) & ((1 << width) - 1);
                table.set(slot / 4, slot % 4, value);
                expected[slot as usize] = value;
                for (s, &e) in expected.iter().enumerate() {
                    assert_eq!(table.get(s as u64 / 4, s as u64 % 4), e, "width {width}");
                }
            }
        }
    }

    #[test]
    fn a_bucket_read_whole_holds_its_four_lanes() {
        for width in ANCHOR_BITS + 2..=32 {
            let mut table = Table::new(17, width).unwrap();
            let mut x = u64::from(width) * 77;
            for slot in 0..17 * 4 {
                x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(slot);
                table.set(slot / 4, slot % 4, (x >> 11) & ((1 << width) - 1));
            }
            for bucket in 0..17 {
                let lanes = table.bucket(bucket);
                for lane in 0..4 {
                    let got = (lanes >> (lane * u64::from(width))) as u64 & ((1 << width) - 1);
                    assert_eq!(
                        got,
                        table.get(bucket, lane),
                        "width {width} bucket {bucket}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_doubling_splits_each_bucket_by_the_lowest_tail_bit() {
        let width = 12;
        let mut table = Table::new(2, width).unwrap();
        let anchor = 3;
        // Bucket 0: tails 0b10 (goes low), 0b11 (goes high), and an exhausted entry.
        table.set(0, 0, (0b110 << ANCHOR_BITS) | anchor);
        table.set(0, 1, (0b111 << ANCHOR_BITS) | anchor);
        table.set(0, 2, (1 << ANCHOR_BITS) | anchor);
        assert_eq!(table.double().unwrap(), 1);
        assert_eq!(table.buckets(), 4);
        assert_eq!(table.get(0, 0), (0b11 << ANCHOR_BITS) | anchor);
        assert_eq!(table.get(0, 1), (1 << ANCHOR_BITS) | anchor);
        assert_eq!(table.get(0, 2), 0);
        assert_eq!(table.get(2, 0), (0b11 << ANCHOR_BITS) | anchor);
        assert_eq!(table.get(2, 1), (1 << ANCHOR_BITS) | anchor);
        assert_eq!(table.get(2, 2), 0);
        for bucket in [1, 3] {
            assert_eq!(table.empty_lane(bucket), Some(0));
        }
    }
}
