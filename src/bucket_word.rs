//! Branch-free operations on one bucket packed into a `u64` (SWAR: SIMD within a register).
//!
//! A bucket of `f`-bit fingerprints holds `64 / f` lanes; lane `k` occupies bits `k*f .. k*f+f`
//! and any bits above the last lane stay zero. A lane that reads 0 is empty, so stored
//! fingerprints live in `1..2^f`. Every function here is a pure function of its arguments, which
//! is what makes them testable exhaustively for small widths.
//!
//! A lane is named by its *shift* (the position of its lowest bit) rather than by its index, so
//! finding a lane never needs a division by a width that is not a power of two.

/// Smallest supported fingerprint width in bits.
pub(crate) const MIN_BITS: u32 = 4;
/// Largest supported fingerprint width in bits.
pub(crate) const MAX_BITS: u32 = 32;

/// The lane geometry of one fingerprint width, with the constants the SWAR tricks need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WordLayout {
    bits: u32,
    slots: u32,
    /// Bit 0 of every lane: multiplying a fingerprint by it repeats it in every lane.
    lane_ones: u64,
    /// The highest bit of every lane.
    lane_highs: u64,
    /// The bits of every lane below its highest bit.
    lane_lows: u64,
    /// The mask of one lane at shift 0.
    lane_mask: u64,
}

impl WordLayout {
    /// The layout for `bits`-wide fingerprints in as many lanes as fit a word, or `None` outside
    /// `MIN_BITS..=MAX_BITS`.
    #[cfg(test)]
    pub(crate) const fn new(bits: u32) -> Option<Self> {
        if bits < MIN_BITS || bits > MAX_BITS {
            return None;
        }
        Self::with_lanes(bits, 64 / bits)
    }

    /// The layout of `lanes` lanes of `bits`-wide fingerprints in the low bits of a word, or
    /// `None` when they do not fit in 64 bits (a part of a packed bucket, see `bucket_layout`).
    pub(crate) const fn with_lanes(bits: u32, lanes: u32) -> Option<Self> {
        if bits < MIN_BITS || bits > MAX_BITS || lanes == 0 || lanes * bits > 64 {
            return None;
        }
        let slots = lanes;
        let lane_mask = (1u64 << bits) - 1;
        let mut lane_ones = 0u64;
        let mut k = 0;
        while k < slots {
            lane_ones |= 1u64 << (k * bits);
            k += 1;
        }
        let lane_highs = lane_ones << (bits - 1);
        let lane_lows = lane_ones * (lane_mask >> 1);
        Some(WordLayout {
            bits,
            slots,
            lane_ones,
            lane_highs,
            lane_lows,
            lane_mask,
        })
    }

    /// Fingerprint width in bits.
    #[inline]
    pub(crate) const fn bits(&self) -> u32 {
        self.bits
    }

    /// Lanes per bucket.
    #[inline]
    pub(crate) const fn slots(&self) -> u32 {
        self.slots
    }

    /// Largest fingerprint value (`2^bits - 1`); fingerprints range over `1..=max_fingerprint`.
    #[inline]
    pub(crate) const fn max_fingerprint(&self) -> u64 {
        self.lane_mask
    }

    /// The high bit of every lane of `word` that is zero, and no other bit.
    ///
    /// Per lane: adding the low bits to an all-ones low mask carries into the high bit exactly
    /// when some low bit is set, and the sum never leaves the lane (at most `2 * (2^(f-1) - 1)`),
    /// so unlike the classic `(x - 0x01..) & !x & 0x80..` trick there are no false hits above a
    /// zero lane and the result can be used to pick a lane.
    #[inline]
    pub(crate) const fn zero_lanes(&self, word: u64) -> u64 {
        let low_set = (word & self.lane_lows).wrapping_add(self.lane_lows);
        !(low_set | word | self.lane_lows) & self.lane_highs
    }

    /// The high bit of every lane of `word` that holds `fp`.
    #[inline]
    pub(crate) const fn matching_lanes(&self, word: u64, fp: u64) -> u64 {
        self.zero_lanes(word ^ fp.wrapping_mul(self.lane_ones))
    }

    /// Whether some lane of `word` holds `fp`.
    #[inline]
    pub(crate) const fn holds(&self, word: u64, fp: u64) -> bool {
        self.matching_lanes(word, fp) != 0
    }

    /// How many lanes of `word` hold `fp`.
    #[inline]
    pub(crate) const fn count(&self, word: u64, fp: u64) -> u32 {
        self.matching_lanes(word, fp).count_ones()
    }

    /// How many lanes of `word` are occupied.
    #[inline]
    pub(crate) const fn occupied(&self, word: u64) -> u32 {
        self.slots - self.zero_lanes(word).count_ones()
    }

    /// The shift of the lowest empty lane of `word`.
    #[inline]
    pub(crate) fn first_empty(&self, word: u64) -> Option<u32> {
        self.lowest_lane(self.zero_lanes(word))
    }

    /// The fingerprint in the lane at `shift` (0 when the lane is empty).
    #[inline]
    pub(crate) const fn lane(&self, word: u64, shift: u32) -> u64 {
        (word >> shift) & self.lane_mask
    }

    /// `word` with the lane at `shift` set to `fp` (0 empties the lane).
    #[inline]
    pub(crate) const fn with_lane(&self, word: u64, shift: u32, fp: u64) -> u64 {
        (word & !(self.lane_mask << shift)) | (fp << shift)
    }

    /// Iterator over the shifts of all lanes, lowest first.
    pub(crate) fn lane_shifts(&self) -> impl Iterator<Item = u32> {
        let bits = self.bits;
        (0..self.slots).map(move |k| k * bits)
    }

    /// Turns a mask of lane high bits (from `zero_lanes` or `matching_lanes`) into the shift of
    /// the lowest such lane.
    #[inline]
    pub(crate) fn lowest_lane(&self, highs: u64) -> Option<u32> {
        // Without a branch: whether a lane matched is often a coin toss (which of an item's two
        // buckets holds it, for a remove), and a branch here mispredicted on about every second
        // remove. `trailing_zeros` of 0 is 64, a value the `None` never shows.
        let lowest = highs
            .trailing_zeros()
            .wrapping_add(1)
            .wrapping_sub(self.bits);
        std::hint::select_unpredictable(highs == 0, None, Some(lowest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain per-lane model the SWAR code must agree with.
    fn lanes_of(layout: &WordLayout, word: u64) -> Vec<u64> {
        layout
            .lane_shifts()
            .map(|s| (word >> s) & layout.lane_mask)
            .collect()
    }

    fn check_word(layout: &WordLayout, word: u64, fp: u64) {
        let lanes = lanes_of(layout, word);
        let want_hold = lanes.contains(&fp);
        let want_count = lanes.iter().filter(|&&v| v == fp).count() as u32;
        let want_first_match = lanes.iter().position(|&v| v == fp);
        let want_first_empty = lanes.iter().position(|&v| v == 0);
        let want_occupied = lanes.iter().filter(|&&v| v != 0).count() as u32;
        let shift = |k: usize| k as u32 * layout.bits;

        assert_eq!(layout.holds(word, fp), want_hold, "holds {word:#x} {fp}");
        assert_eq!(layout.count(word, fp), want_count, "count {word:#x} {fp}");
        assert_eq!(
            layout.lowest_lane(layout.matching_lanes(word, fp)),
            want_first_match.map(shift),
            "first match {word:#x} {fp}"
        );
        assert_eq!(
            layout.first_empty(word),
            want_first_empty.map(shift),
            "first_empty {word:#x}"
        );
        assert_eq!(layout.occupied(word), want_occupied, "occupied {word:#x}");
        for (k, &v) in lanes.iter().enumerate() {
            assert_eq!(layout.lane(word, shift(k)), v);
            let replaced = layout.with_lane(word, shift(k), fp);
            let mut expect = lanes.clone();
            expect[k] = fp;
            assert_eq!(
                lanes_of(layout, replaced),
                expect,
                "with_lane {word:#x} k={k}"
            );
            assert_eq!(replaced & !(layout.lane_ones * layout.lane_mask), 0);
        }
    }

    /// Packs lane values into a word.
    fn pack(layout: &WordLayout, lanes: &[u64]) -> u64 {
        lanes
            .iter()
            .zip(layout.lane_shifts())
            .fold(0, |w, (&v, s)| w | (v << s))
    }

    use crate::test_rng::SplitMix;

    #[test]
    fn layout_geometry_for_every_width() {
        for bits in MIN_BITS..=MAX_BITS {
            let l = WordLayout::new(bits).unwrap();
            assert_eq!(l.slots(), 64 / bits);
            assert_eq!(l.max_fingerprint(), (1u64 << bits) - 1);
            assert_eq!(l.lane_shifts().count() as u32, l.slots());
            assert!(l.slots() * bits <= 64);
        }
        assert!(WordLayout::new(3).is_none());
        assert!(WordLayout::new(33).is_none());
        assert!(WordLayout::new(0).is_none());
    }

    /// Every pair of values in every pair of adjacent lanes, against every query, for the widths
    /// where that is small enough; the other lanes hold a fixed mixed background. Adjacent pairs
    /// are where a carry or borrow between lanes would show.
    #[test]
    fn swar_exhaustive_adjacent_lanes_small_widths() {
        for bits in 4..=6u32 {
            let layout = WordLayout::new(bits).unwrap();
            let max = layout.max_fingerprint();
            let slots = layout.slots() as usize;
            let background: Vec<u64> = (0..slots as u64).map(|k| (k * 7 + 3) % (max + 1)).collect();
            for pos in 0..slots - 1 {
                for a in 0..=max {
                    for b in 0..=max {
                        let mut lanes = background.clone();
                        lanes[pos] = a;
                        lanes[pos + 1] = b;
                        let word = pack(&layout, &lanes);
                        for fp in 1..=max {
                            check_word(&layout, word, fp);
                        }
                    }
                }
            }
        }
    }

    /// Every single-lane value at every lane with all other lanes empty, and with all other
    /// lanes full of the query, for all widths up to 12.
    #[test]
    fn swar_exhaustive_single_lane_up_to_12_bits() {
        for bits in 4..=12u32 {
            let layout = WordLayout::new(bits).unwrap();
            let max = layout.max_fingerprint();
            let slots = layout.slots() as usize;
            for fp in [1, 2, max / 2, max / 2 + 1, max - 1, max] {
                for pos in 0..slots {
                    for v in 0..=max {
                        let mut lanes = vec![0; slots];
                        lanes[pos] = v;
                        check_word(&layout, pack(&layout, &lanes), fp);
                        let mut lanes = vec![fp; slots];
                        lanes[pos] = v;
                        check_word(&layout, pack(&layout, &lanes), fp);
                    }
                }
            }
        }
    }

    /// Random words against the per-lane model for every width; lanes are biased towards 0, the
    /// query, and its neighbours, where mistakes hide.
    #[test]
    fn swar_randomized_against_lane_model_all_widths() {
        let seed = 0x5eed_0001_u64;
        println!("swar_randomized seed = {seed:#x}");
        let mut rng = SplitMix(seed);
        for bits in MIN_BITS..=MAX_BITS {
            let layout = WordLayout::new(bits).unwrap();
            let max = layout.max_fingerprint();
            for _ in 0..20_000 {
                let fp = rng.next() % max + 1;
                let lanes: Vec<u64> = (0..layout.slots())
                    .map(|_| match rng.next() % 6 {
                        0 => 0,
                        1 => fp,
                        2 => fp ^ 1,
                        3 => (fp + 1) & max,
                        4 => max,
                        _ => rng.next() & max,
                    })
                    .collect();
                check_word(&layout, pack(&layout, &lanes), fp);
            }
        }
    }
    /// The lane tests look at lanes only: bits above the last lane (a packed bucket's
    /// neighbour, which lookups leave in place) change no answer of `holds`, `count`,
    /// `matching_lanes`, `zero_lanes`, `occupied` or `first_empty`.
    #[test]
    fn lane_tests_ignore_bits_above_the_last_lane() {
        let seed = 0x5eed_0002_u64;
        println!("lane_tests_ignore_bits_above_the_last_lane seed = {seed:#x}");
        let mut rng = SplitMix(seed);
        for bits in MIN_BITS..=MAX_BITS {
            for lanes in 1..=64 / bits {
                let layout = WordLayout::with_lanes(bits, lanes).unwrap();
                if lanes * bits == 64 {
                    continue;
                }
                let used = (1u64 << (lanes * bits)) - 1;
                let max = layout.max_fingerprint();
                for _ in 0..2_000 {
                    let fp = rng.next() % max + 1;
                    let word = pack(
                        &layout,
                        &(0..lanes)
                            .map(|_| match rng.next() % 3 {
                                0 => 0,
                                1 => fp,
                                _ => rng.next() & max,
                            })
                            .collect::<Vec<_>>(),
                    );
                    let dirty = word | (rng.next() & !used);
                    let what = format!("bits {bits} lanes {lanes} word {dirty:#x} fp {fp}");
                    assert_eq!(layout.holds(dirty, fp), layout.holds(word, fp), "{what}");
                    assert_eq!(layout.count(dirty, fp), layout.count(word, fp), "{what}");
                    assert_eq!(layout.zero_lanes(dirty), layout.zero_lanes(word), "{what}");
                    assert_eq!(layout.occupied(dirty), layout.occupied(word), "{what}");
                    assert_eq!(
                        layout.first_empty(dirty),
                        layout.first_empty(word),
                        "{what}"
                    );
                }
            }
        }
    }
}
