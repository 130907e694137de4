//! How a table lays its buckets out in its array of `u64` words, and what one bucket holds.
//!
//! - **One word** ([`LayoutKind::OneWord`]): bucket `b` is word `b`, with `64 / f` lanes of `f`
//!   bits. A word belongs to one bucket, so a writer stores whole words. Fast, but the lane
//!   count is tied to the width, so most widths waste memory or over-deliver the rate.
//! - **Packed** ([`LayoutKind::Packed`]): 4 lanes per bucket, `4f` bits, bucket `b` at bit
//!   `4f · b` of the array, for any `f`. A bucket may straddle two words (three when `4f > 64`).
//!   A word may hold lanes of several buckets, so the table gives every run of buckets that
//!   fills whole words one lock stripe ([`BucketLayout::word_group_shift`]): every word then
//!   belongs to one stripe, and its writers, holding that stripe, may store whole words.
//! - **Semi-sorted** ([`LayoutKind::SemiSorted`]): packed 4-lane buckets whose lanes' top 4 bits
//!   are stored sorted, as one 12-bit index (`semi_sorted`): `4f − 4` bits per bucket.
//!
//! A bucket is read into a [`Bucket`]: its lanes in one or two *parts*, each a `u64` of `f`-bit
//! lanes that [`WordLayout`]'s SWAR operations work on (two parts of two lanes when four lanes do
//! not fit a `u64`). A lane is named by its *position*, `part · 64 + shift`.
//!
//! Everything here is a pure function of its arguments; the loads and `fetch_xor`s on the
//! table's atomics are the table's (`table/mod.rs`), and its memory is `table::storage`'s.

use crate::bucket_word::{WordLayout, MAX_BITS, MIN_BITS};
use crate::semi_sorted;

/// The 64 bits from bit `shift` of `first` on, continued in `second`.
#[inline(always)]
pub(crate) const fn join_words(first: u64, second: u64, shift: u32) -> u64 {
    // `<< 1 << (63 - shift)`: a shift by 64 when `shift` is 0 would overflow.
    (first >> shift) | ((second << 1) << (63 - shift))
}

/// Which layout a table's buckets have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LayoutKind {
    /// One bucket per word, `64 / f` lanes.
    OneWord,
    /// Four lanes per bucket, bit-packed.
    Packed,
    /// Four lanes per bucket, bit-packed, the lanes' top 4 bits semi-sorted.
    SemiSorted,
}

/// How many words the loads of one bucket touch, at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Span {
    /// Buckets never cross a word boundary.
    One,
    /// A bucket of at most 64 bits may cross one boundary.
    Two,
    /// A bucket of more than 64 bits may cross two.
    Three,
}

impl Span {
    /// Words the loads of a bucket read (the last ones may be past the table: see
    /// [`BucketLayout::words_for`]).
    pub(crate) const fn words(self) -> usize {
        match self {
            Span::One => 1,
            Span::Two => 2,
            Span::Three => 3,
        }
    }
}

/// How a bucket is read and written: the cases the hot paths specialise on, chosen per table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// A bucket is one whole word (one-word buckets, and packed 16-bit ones): one load.
    Word,
    /// Plain lanes in one part, never crossing a word boundary: one load, a shift, a mask.
    Within,
    /// Plain lanes in one part that may cross one boundary: two loads.
    Straddling,
    /// Semi-sorted buckets of at most 64 bits: one or two loads, the code tested as a `u64`.
    Sorted64,
    /// Two parts, or wider semi-sorted buckets: the general path.
    General,
}

/// One bucket as read: one or two parts of `f`-bit lanes, or, semi-sorted, its code (low and
/// high 64 bits), which its operations decode as they need (a lookup mostly need not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bucket {
    parts: [u64; 2],
}

impl Bucket {
    /// A one-part bucket (see [`BucketLayout::part`]) whose lanes are `lanes`.
    #[inline(always)]
    pub(crate) const fn of_lanes(lanes: u64) -> Bucket {
        Bucket { parts: [lanes, 0] }
    }

    /// The lanes of a one-part bucket.
    #[inline(always)]
    pub(crate) const fn lanes(&self) -> u64 {
        self.parts[0]
    }
}

/// The geometry of one layout at one fingerprint width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BucketLayout {
    kind: LayoutKind,
    /// The SWAR constants of one part.
    part: WordLayout,
    /// Whether a bucket's lanes take two parts (packed lanes of more than 16 bits).
    two_parts: bool,
    /// Bits of one bucket in the word array.
    stride: u32,
    span: Span,
    access: Access,
    /// The low `stride` bits (all of them when the stride is 64 or more).
    stride_mask: u64,
    /// The constants of a semi-sorted bucket's low-part search (unused by other kinds).
    low_search: semi_sorted::LowSearch,
}

impl BucketLayout {
    /// The layout `kind` for `bits`-wide fingerprints, or `None` outside `MIN_BITS..=MAX_BITS`.
    pub(crate) const fn new(kind: LayoutKind, bits: u32) -> Option<Self> {
        if bits < MIN_BITS || bits > MAX_BITS {
            return None;
        }
        let (lanes_per_part, two_parts, stride) = match kind {
            LayoutKind::OneWord => (64 / bits, false, 64),
            LayoutKind::Packed => {
                let two = 4 * bits > 64;
                (if two { 2 } else { 4 }, two, 4 * bits)
            }
            // The lanes stay encoded in the bucket (see `Bucket`): the part layout only gives
            // the width.
            LayoutKind::SemiSorted => (1, false, semi_sorted::encoded_bits(bits)),
        };
        let Some(part) = WordLayout::with_lanes(bits, lanes_per_part) else {
            return None;
        };
        let span = if stride > 64 {
            Span::Three
        } else if 64 % stride == 0 {
            Span::One
        } else {
            Span::Two
        };
        let access = match (kind, two_parts, span) {
            (LayoutKind::OneWord | LayoutKind::Packed, false, Span::One) if stride == 64 => {
                Access::Word
            }
            (LayoutKind::OneWord | LayoutKind::Packed, false, Span::One) => Access::Within,
            (LayoutKind::OneWord | LayoutKind::Packed, false, Span::Two) => Access::Straddling,
            (LayoutKind::SemiSorted, _, Span::One | Span::Two) => Access::Sorted64,
            _ => Access::General,
        };
        let stride_mask = if stride >= 64 {
            u64::MAX
        } else {
            (1 << stride) - 1
        };
        Some(BucketLayout {
            kind,
            part,
            two_parts,
            stride,
            span,
            access,
            stride_mask,
            low_search: semi_sorted::LowSearch::new(bits),
        })
    }

    /// The lane geometry of a one-part bucket ([`Access::Word`], [`Access::Within`] and
    /// [`Access::Straddling`]: `parts[0]` holds every lane), for paths specialised to them.
    #[inline(always)]
    pub(crate) const fn part(&self) -> &WordLayout {
        &self.part
    }

    pub(crate) const fn kind(&self) -> LayoutKind {
        self.kind
    }

    /// Fingerprint width in bits.
    #[inline]
    pub(crate) const fn bits(&self) -> u32 {
        self.part.bits()
    }

    /// Lanes per bucket.
    #[inline]
    pub(crate) const fn slots(&self) -> u32 {
        match self.kind {
            LayoutKind::SemiSorted => 4,
            _ => self.part.slots() * if self.two_parts { 2 } else { 1 },
        }
    }

    #[inline(always)]
    fn is_sorted(&self) -> bool {
        self.kind == LayoutKind::SemiSorted
    }

    /// A semi-sorted bucket's code.
    #[inline(always)]
    fn sorted_code(bucket: &Bucket) -> u128 {
        u128::from(bucket.parts[0]) | (u128::from(bucket.parts[1]) << 64)
    }

    /// A semi-sorted bucket's lanes, ascending.
    #[inline]
    fn sorted_lanes(&self, bucket: &Bucket) -> [u32; 4] {
        semi_sorted::decode(self.bits(), Self::sorted_code(bucket))
    }

    // The semi-sorted halves of the lane operations below, out of line: a table's layout never
    // changes, so the branch to them is predicted, and the plain layouts' halves stay small
    // enough to inline into the insert, remove and search loops.

    #[inline(never)]
    fn sorted_count(&self, bucket: &Bucket, fp: u64) -> u32 {
        semi_sorted::count(self.bits(), Self::sorted_code(bucket), fp as u32)
    }

    #[inline(never)]
    fn sorted_occupied(&self, bucket: &Bucket) -> u32 {
        semi_sorted::occupied(self.bits(), Self::sorted_code(bucket))
    }

    /// The position of the lowest lane holding `value` (0: the lowest empty lane); a
    /// semi-sorted lane's position is its index in the ascending lanes.
    #[inline(never)]
    fn sorted_position(&self, bucket: &Bucket, value: u64) -> Option<u32> {
        self.sorted_lanes(bucket)
            .iter()
            .position(|&v| u64::from(v) == value)
            .map(|k| k as u32)
    }

    #[inline(never)]
    fn sorted_lane(&self, bucket: &Bucket, position: u32) -> u64 {
        u64::from(self.sorted_lanes(bucket)[position as usize])
    }

    #[inline(never)]
    fn sorted_with_lane(&self, bucket: &Bucket, position: u32, fp: u64) -> Bucket {
        let mut lanes = self.sorted_lanes(bucket);
        lanes[position as usize] = fp as u32;
        self.bucket_of_sorted_lanes(lanes)
    }

    fn bucket_of_sorted_lanes(&self, lanes: [u32; 4]) -> Bucket {
        let code = semi_sorted::encode(self.bits(), lanes);
        Bucket {
            parts: [code as u64, (code >> 64) as u64],
        }
    }

    /// Bits one bucket takes in the word array.
    #[inline]
    pub(crate) const fn stride(&self) -> u32 {
        self.stride
    }

    #[inline]
    pub(crate) const fn span(&self) -> Span {
        self.span
    }

    #[inline(always)]
    pub(crate) const fn access(&self) -> Access {
        self.access
    }

    /// The bucket that is `word` ([`Access::Word`] only).
    #[inline(always)]
    pub(crate) const fn whole(&self, word: u64) -> Bucket {
        Bucket { parts: [word, 0] }
    }

    /// The bucket at bit `shift` of `word` ([`Access::Within`] only).
    #[inline(always)]
    pub(crate) const fn within(&self, word: u64, shift: u32) -> Bucket {
        Bucket {
            parts: [(word >> shift) & self.stride_mask, 0],
        }
    }

    /// The bucket at bit `shift` of `first`, continued in `second` ([`Access::Straddling`]
    /// only).
    #[inline(always)]
    pub(crate) const fn straddling(&self, first: u64, second: u64, shift: u32) -> Bucket {
        Bucket {
            parts: [join_words(first, second, shift) & self.stride_mask, 0],
        }
    }

    /// Whether a semi-sorted bucket of at most 64 bits ([`Access::Sorted64`]) holds `fp`.
    #[inline(always)]
    pub(crate) fn holds_sorted64(&self, bucket: &Bucket, fp: u64) -> bool {
        semi_sorted::contains_narrow(&self.low_search, bucket.parts[0], fp as u32)
    }

    /// Whether a one-part bucket ([`Access::Within`] or [`Access::Straddling`]) holds `fp`.
    #[inline(always)]
    pub(crate) const fn holds_one_part(&self, bucket: &Bucket, fp: u64) -> bool {
        self.part.holds(bucket.parts[0], fp)
    }

    /// `log2` of the buckets in the shortest run of whole buckets that fills whole words:
    /// `64 / gcd(stride, 64)` buckets, a power of two (1 when a bucket is one or two words, 8
    /// for 40-bit buckets, at most 16 since strides are multiples of 4). No bucket of such a
    /// run shares a word with a bucket of another run, so when runs share lock stripes, every
    /// word belongs to one stripe.
    pub(crate) fn word_group_shift(&self) -> u32 {
        let common = 1u32 << self.stride.trailing_zeros().min(6);
        (64 / common).trailing_zeros()
    }

    /// Largest fingerprint value; fingerprints range over `1..=max_fingerprint`.
    #[inline]
    pub(crate) const fn max_fingerprint(&self) -> u64 {
        self.part.max_fingerprint()
    }

    /// Words a table of `buckets` buckets takes: the buckets' bits rounded up to whole words,
    /// and the words past the last bucket that its loads read (always zero), so that loads
    /// need no bounds test. `None` on overflow.
    pub(crate) fn words_for(&self, buckets: usize) -> Option<usize> {
        let bits = (buckets as u128).checked_mul(u128::from(self.stride))?;
        let words = bits.div_ceil(64) + (self.span.words() as u128 - 1);
        usize::try_from(words).ok()
    }

    /// The word where `bucket` starts, and the bit in it.
    #[inline(always)]
    pub(crate) fn locate(&self, bucket: usize) -> (usize, u32) {
        let bit = bucket as u64 * u64::from(self.stride);
        ((bit >> 6) as usize, (bit & 63) as u32)
    }

    /// The bucket whose `stride` bits start at bit `shift` of `words[0]` (the words that
    /// follow it in the array after it; those past `span` are ignored).
    #[inline(always)]
    pub(crate) fn bucket_at(&self, words: [u64; 3], shift: u32) -> Bucket {
        self.bucket_of_code(self.code_at(words, shift))
    }

    /// The stored bits of the bucket at bit `shift` of `words[0]` (see `bucket_at`).
    #[inline(always)]
    pub(crate) fn code_at(&self, words: [u64; 3], shift: u32) -> u128 {
        let code = match self.span {
            Span::One => u128::from(words[0] >> shift),
            Span::Two => {
                // `<< 1 << (63 - shift)`: a shift by 64 when `shift` is 0 would overflow.
                u128::from((words[0] >> shift) | ((words[1] << 1) << (63 - shift)))
            }
            Span::Three => {
                let two = u128::from(words[0]) | (u128::from(words[1]) << 64);
                (two >> shift) | ((u128::from(words[2]) << 1) << (127 - shift))
            }
        };
        code & (u128::MAX >> (128 - self.stride))
    }

    /// The xor masks that turn bucket `old` into `new` in the (up to three) words starting at
    /// the bucket's first word, for a bucket starting at bit `shift` of it.
    #[inline]
    pub(crate) fn change_masks(&self, old: &Bucket, new: &Bucket, shift: u32) -> [u64; 3] {
        if self.access != Access::General {
            // One part of at most 64 bits: its bits are the code.
            let diff = old.parts[0] ^ new.parts[0];
            return [diff << shift, (diff >> 1) >> (63 - shift), 0];
        }
        let diff = self.code(old) ^ self.code(new);
        let low = (diff << shift) as u64;
        // The bits shifted out of the low word, then out of the second (0 when `shift` is 0:
        // `>> 1 >> (63 - shift)` avoids a shift by 64).
        let rest = (diff >> 1) >> (63 - shift);
        [low, rest as u64, (rest >> 64) as u64]
    }

    /// The bucket stored as `code` (at most `stride` bits).
    #[inline(always)]
    fn bucket_of_code(&self, code: u128) -> Bucket {
        match self.kind {
            LayoutKind::OneWord | LayoutKind::Packed => self.split(code),
            LayoutKind::SemiSorted => Bucket {
                parts: [code as u64, (code >> 64) as u64],
            },
        }
    }

    /// What a bucket is stored as: its lanes' bits, or their semi-sorted code.
    #[inline]
    pub(crate) fn code(&self, bucket: &Bucket) -> u128 {
        match self.kind {
            LayoutKind::OneWord | LayoutKind::Packed => self.join(bucket),
            LayoutKind::SemiSorted => Self::sorted_code(bucket),
        }
    }

    /// Whether `code` is a bucket this layout can store (a semi-sorted code's index in range).
    pub(crate) fn is_valid_code(&self, code: u128) -> bool {
        if self.is_sorted() {
            return semi_sorted::is_valid(self.bits(), code);
        }
        // One-word buckets leave the bits above their last lane unused.
        let lanes = self.part.slots() * self.bits() * if self.two_parts { 2 } else { 1 };
        code.checked_shr(lanes).unwrap_or(0) == 0
    }

    #[inline(always)]
    fn split(&self, lanes_bits: u128) -> Bucket {
        if self.two_parts {
            let part_bits = 2 * self.bits();
            let mask = (1u128 << part_bits) - 1;
            Bucket {
                parts: [
                    (lanes_bits & mask) as u64,
                    ((lanes_bits >> part_bits) & mask) as u64,
                ],
            }
        } else {
            Bucket {
                parts: [lanes_bits as u64, 0],
            }
        }
    }

    #[inline]
    fn join(&self, bucket: &Bucket) -> u128 {
        let [low, high] = bucket.parts.map(u128::from);
        if self.two_parts {
            low | (high << (2 * self.bits()))
        } else {
            low
        }
    }

    /// Whether some lane of `bucket` holds `fp`.
    #[inline(always)]
    pub(crate) fn holds(&self, bucket: &Bucket, fp: u64) -> bool {
        // The table's layout, so predicted right every time.
        if self.is_sorted() {
            semi_sorted::contains(self.bits(), Self::sorted_code(bucket), fp as u32)
        } else if self.two_parts {
            self.part.holds(bucket.parts[0], fp) | self.part.holds(bucket.parts[1], fp)
        } else {
            self.part.holds(bucket.parts[0], fp)
        }
    }

    /// How many lanes of `bucket` hold `fp`.
    #[inline(always)]
    pub(crate) fn count(&self, bucket: &Bucket, fp: u64) -> u32 {
        if self.is_sorted() {
            return self.sorted_count(bucket, fp);
        }
        self.part.count(bucket.parts[0], fp) + self.part.count(bucket.parts[1], fp)
    }

    /// How many lanes of `bucket` are occupied.
    #[inline(always)]
    pub(crate) fn occupied(&self, bucket: &Bucket) -> u32 {
        if self.is_sorted() {
            return self.sorted_occupied(bucket);
        }
        let second = if self.two_parts {
            self.part.occupied(bucket.parts[1])
        } else {
            0
        };
        self.part.occupied(bucket.parts[0]) + second
    }

    /// The position of the lowest empty lane of `bucket`.
    #[inline(always)]
    pub(crate) fn first_empty(&self, bucket: &Bucket) -> Option<u32> {
        if self.is_sorted() {
            return self.sorted_position(bucket, 0);
        }
        match self.part.first_empty(bucket.parts[0]) {
            Some(shift) => Some(shift),
            None if self.two_parts => self.part.first_empty(bucket.parts[1]).map(|s| 64 + s),
            None => None,
        }
    }

    /// The position of the lowest lane of `bucket` that holds `fp`.
    #[inline(always)]
    pub(crate) fn first_match(&self, bucket: &Bucket, fp: u64) -> Option<u32> {
        if self.is_sorted() {
            return self.sorted_position(bucket, fp);
        }
        let [low, high] = bucket.parts.map(|p| self.part.matching_lanes(p, fp));
        match self.part.lowest_lane(low) {
            Some(shift) => Some(shift),
            None => self.part.lowest_lane(high).map(|s| 64 + s),
        }
    }

    /// The fingerprint in the lane at `position` (0 when empty).
    #[inline(always)]
    pub(crate) fn lane(&self, bucket: &Bucket, position: u32) -> u64 {
        if self.is_sorted() {
            return self.sorted_lane(bucket, position);
        }
        self.part
            .lane(bucket.parts[(position >> 6) as usize], position & 63)
    }

    /// `bucket` with the lane at `position` set to `fp` (0 empties it).
    #[inline(always)]
    pub(crate) fn with_lane(&self, bucket: Bucket, position: u32, fp: u64) -> Bucket {
        if self.is_sorted() {
            return self.sorted_with_lane(&bucket, position, fp);
        }
        let mut parts = bucket.parts;
        let part = &mut parts[(position >> 6) as usize];
        *part = self.part.with_lane(*part, position & 63, fp);
        Bucket { parts }
    }

    /// The positions of every lane, lowest first.
    pub(crate) fn positions(&self) -> impl Iterator<Item = u32> {
        let (sorted, second) = (self.is_sorted(), self.two_parts);
        let part = self.part;
        let first = part.lane_shifts().filter(move |_| !sorted);
        let rest = part.lane_shifts().map(|s| s + 64).filter(move |_| second);
        let indices = (0..4).filter(move |_| sorted);
        first.chain(rest).chain(indices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [LayoutKind; 3] = [
        LayoutKind::OneWord,
        LayoutKind::Packed,
        LayoutKind::SemiSorted,
    ];

    use crate::test_rng::SplitMix;

    /// A plain bit array model: reads and writes `len` bits at `at`, one bit at a time.
    fn get_bits(words: &[u64], at: u64, len: u32) -> u128 {
        (0..u64::from(len)).fold(0u128, |acc, k| {
            let bit = at + k;
            let b = (words[(bit / 64) as usize] >> (bit % 64)) & 1;
            acc | (u128::from(b) << k)
        })
    }

    #[test]
    fn geometry_of_every_layout_and_width() {
        for bits in MIN_BITS..=MAX_BITS {
            let one = BucketLayout::new(LayoutKind::OneWord, bits).unwrap();
            assert_eq!(
                (one.slots(), one.stride(), one.span()),
                (64 / bits, 64, Span::One)
            );
            let packed = BucketLayout::new(LayoutKind::Packed, bits).unwrap();
            assert_eq!((packed.slots(), packed.stride()), (4, 4 * bits));
            let sorted = BucketLayout::new(LayoutKind::SemiSorted, bits).unwrap();
            assert_eq!((sorted.slots(), sorted.stride()), (4, 4 * bits - 4));
            for layout in [one, packed, sorted] {
                assert_eq!(layout.positions().count() as u32, layout.slots());
                assert_eq!(layout.max_fingerprint(), (1 << bits) - 1);
            }
        }
        for kind in KINDS {
            assert!(BucketLayout::new(kind, 3).is_none());
            assert!(BucketLayout::new(kind, 33).is_none());
        }
        let packed10 = BucketLayout::new(LayoutKind::Packed, 10).unwrap();
        assert_eq!(packed10.span(), Span::Two);
        assert_eq!(packed10.words_for(8), Some(5 + 1));
        assert_eq!(
            BucketLayout::new(LayoutKind::Packed, 8).unwrap().span(),
            Span::One
        );
        assert_eq!(
            BucketLayout::new(LayoutKind::Packed, 17).unwrap().span(),
            Span::Three
        );
        assert_eq!(
            BucketLayout::new(LayoutKind::OneWord, 12)
                .unwrap()
                .words_for(8),
            Some(8)
        );
        assert_eq!(
            packed10.words_for(usize::MAX),
            None.or(packed10.words_for(usize::MAX))
        );
    }

    /// Random buckets written into a random background through `change_masks`, read back with
    /// `bucket_at`, for every layout, width and position within a word; the bits of the
    /// neighbouring buckets must not change.
    #[test]
    fn buckets_round_trip_through_words_at_every_offset() {
        let seed = 0x5eed_1a70_u64;
        println!("buckets_round_trip seed = {seed:#x}");
        let mut rng = SplitMix(seed);
        for kind in KINDS {
            for bits in MIN_BITS..=MAX_BITS {
                let layout = BucketLayout::new(kind, bits).unwrap();
                let buckets = 70;
                let len = layout.words_for(buckets).unwrap();
                for _ in 0..40 {
                    let mut words: Vec<u64> = (0..len).map(|_| rng.next()).collect();
                    let bucket = (rng.next() % buckets as u64) as usize;
                    let (first, shift) = layout.locate(bucket);
                    assert_eq!(
                        u64::from(shift) + (first as u64) * 64,
                        bucket as u64 * u64::from(layout.stride())
                    );
                    // Make the bucket's own bits a valid code, as any table would hold.
                    let lanes: Vec<u64> = (0..layout.slots())
                        .map(|_| match rng.next() % 3 {
                            0 => 0,
                            _ => rng.next() & layout.max_fingerprint(),
                        })
                        .collect();
                    let want = bucket_of(&layout, &lanes);
                    let at = bucket as u64 * u64::from(layout.stride());
                    let before = get_bits(&words, at, layout.stride());
                    let before = layout.bucket_of_code(before);
                    assert_eq!(
                        layout.code_at(
                            [0, 1, 2].map(|k| words.get(first + k).copied().unwrap_or(0)),
                            shift
                        ),
                        get_bits(&words, at, layout.stride())
                    );
                    let current = read(&layout, &words, bucket);
                    assert_eq!(current, before);
                    let snapshot = words.clone();
                    for (k, mask) in layout
                        .change_masks(&current, &want, shift)
                        .iter()
                        .enumerate()
                    {
                        if *mask != 0 {
                            words[first + k] ^= mask;
                        }
                    }
                    let got = read(&layout, &words, bucket);
                    assert_eq!(
                        sorted_lanes(&layout, &got),
                        sorted_lanes(&layout, &want),
                        "{kind:?} f={bits} bucket={bucket}"
                    );
                    // Every bit outside the bucket is as it was.
                    let stride = u64::from(layout.stride());
                    for bit in 0..(len as u64 * 64) {
                        if bit / stride != bucket as u64 || bit >= stride * buckets as u64 {
                            let old = (snapshot[(bit / 64) as usize] >> (bit % 64)) & 1;
                            let new = (words[(bit / 64) as usize] >> (bit % 64)) & 1;
                            assert_eq!(old, new, "{kind:?} f={bits} bit {bit} of bucket {bucket}");
                        }
                    }
                }
            }
        }
    }

    /// The bucket holding `lanes`, built lane by lane as a writer would.
    fn bucket_of(layout: &BucketLayout, lanes: &[u64]) -> Bucket {
        let mut bucket = Bucket::default();
        for &v in lanes.iter().filter(|&&v| v != 0) {
            let free = layout.first_empty(&bucket).expect("a lane per value");
            bucket = layout.with_lane(bucket, free, v);
        }
        bucket
    }

    fn read(layout: &BucketLayout, words: &[u64], bucket: usize) -> Bucket {
        let (first, shift) = layout.locate(bucket);
        let at = |k: usize| words.get(first + k).copied().unwrap_or(0);
        layout.bucket_at([at(0), at(1), at(2)], shift)
    }

    fn sorted_lanes(layout: &BucketLayout, bucket: &Bucket) -> Vec<u64> {
        let mut lanes: Vec<u64> = layout.positions().map(|p| layout.lane(bucket, p)).collect();
        lanes.sort_unstable();
        lanes
    }

    /// The bucket operations against a plain lane model, for every layout and width.
    #[test]
    fn bucket_operations_agree_with_the_lane_model() {
        let seed = 0x5eed_b0c4_u64;
        println!("bucket_operations seed = {seed:#x}");
        let mut rng = SplitMix(seed);
        for kind in KINDS {
            for bits in MIN_BITS..=MAX_BITS {
                let layout = BucketLayout::new(kind, bits).unwrap();
                let max = layout.max_fingerprint();
                for _ in 0..2_000 {
                    let fp = rng.next() % max + 1;
                    let lanes: Vec<u64> = (0..layout.slots())
                        .map(|_| match rng.next() % 4 {
                            0 => 0,
                            1 => fp,
                            2 => fp ^ 1,
                            _ => rng.next() & max,
                        })
                        .collect();
                    let bucket = bucket_of(&layout, &lanes);
                    // Where `bucket_of` put the lanes: the values in order, then the empty
                    // lanes; semi-sorted, the lanes in ascending order.
                    let mut lanes: Vec<u64> = lanes
                        .iter()
                        .filter(|&&v| v != 0)
                        .chain(lanes.iter().filter(|&&v| v == 0))
                        .copied()
                        .collect();
                    if kind == LayoutKind::SemiSorted {
                        lanes.sort_unstable();
                    }
                    let positions: Vec<u32> = layout.positions().collect();
                    let first = |want: u64| lanes.iter().position(|&v| v == want);
                    assert_eq!(layout.holds(&bucket, fp), lanes.contains(&fp));
                    assert_eq!(
                        layout.count(&bucket, fp) as usize,
                        lanes.iter().filter(|&&v| v == fp).count()
                    );
                    assert_eq!(
                        layout.occupied(&bucket) as usize,
                        lanes.iter().filter(|&&v| v != 0).count()
                    );
                    assert_eq!(layout.first_empty(&bucket), first(0).map(|k| positions[k]));
                    assert_eq!(
                        layout.first_match(&bucket, fp),
                        first(fp).map(|k| positions[k])
                    );
                    for (k, &pos) in positions.iter().enumerate() {
                        assert_eq!(layout.lane(&bucket, pos), lanes[k]);
                    }
                    // Stored and read back: the same lanes (a semi-sorted code reorders them).
                    let code = layout.code(&bucket);
                    assert!(layout.is_valid_code(code), "{kind:?} f={bits}");
                    assert_eq!(
                        sorted_lanes(&layout, &layout.bucket_of_code(code)),
                        sorted_lanes(&layout, &bucket)
                    );
                }
            }
        }
    }

    #[test]
    fn an_empty_bucket_is_all_zero_bits_in_every_layout() {
        for kind in KINDS {
            for bits in MIN_BITS..=MAX_BITS {
                let layout = BucketLayout::new(kind, bits).unwrap();
                assert_eq!(layout.code(&Bucket::default()), 0);
                assert_eq!(layout.bucket_of_code(0), Bucket::default());
                assert_eq!(layout.occupied(&Bucket::default()), 0);
            }
        }
    }
}
