//! From an item's 64-bit hash to its two candidate buckets and its fingerprint.
//!
//! The upper 32 bits of the hash choose the primary bucket and the lower 32 bits choose the
//! fingerprint, so the two are independent (drawing both from the same bits would make items that
//! share a bucket share fingerprints too, and inflate the false-positive rate).
//!
//! The alternate bucket is `alt(i, fp) = (H(fp) - i) mod n`. It works for any even bucket count
//! `n`, not only powers of two, and is an involution: `alt(alt(i, fp), fp) = i`, so a fingerprint
//! can always be moved back without knowing the item it came from. `H(fp)` is always odd and `n`
//! even, so `2i = H (mod n)` has no solution: an item's two buckets are never the same bucket
//! (with any `H`, about one item in `n` would get a single bucket, which fills small tables
//! early). Even buckets pair with odd ones, as in cuckoo hashing with two tables.

use std::hash::BuildHasher;

/// Largest supported bucket count: bucket indices are derived from 32 hash bits.
pub(crate) const MAX_BUCKETS: u64 = 1 << 32;

/// Smallest bucket count: an item needs two distinct buckets.
pub(crate) const MIN_BUCKETS: u64 = 2;

/// Odd 64-bit constant (2^64 / golden ratio) that spreads small fingerprints over all bits.
const FINGERPRINT_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Fixed seeds of the default hasher: the same item hashes the same way in every run.
const DEFAULT_SEEDS: [u64; 4] = [
    0x243F_6A88_85A3_08D3,
    0x1319_8A2E_0370_7344,
    0xA409_3822_299F_31D0,
    0x082E_FA98_EC4E_6C89,
];

/// The default [`BuildHasher`] of a [`CuckooFilter`](crate::CuckooFilter): `ahash` with fixed
/// seeds.
///
/// Fixed seeds make results reproducible: the same items give the same filter (and the same
/// false positives) in every run of the same build. `ahash` does not promise the same output
/// across its versions or CPU features, so a filter saved by one build is checked against the
/// hasher of the build that loads it rather than trusted blindly.
///
/// ```
/// use std::hash::BuildHasher;
/// use atomic_cuckoo::DefaultHashBuilder;
///
/// let a = DefaultHashBuilder::default().hash_one("item");
/// let b = DefaultHashBuilder::default().hash_one("item");
/// assert_eq!(a, b);
/// ```
#[derive(Clone, Debug)]
pub struct DefaultHashBuilder(ahash::RandomState);

impl Default for DefaultHashBuilder {
    fn default() -> Self {
        let [a, b, c, d] = DEFAULT_SEEDS;
        DefaultHashBuilder(ahash::RandomState::with_seeds(a, b, c, d))
    }
}

impl BuildHasher for DefaultHashBuilder {
    type Hasher = ahash::AHasher;

    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

/// Where an item lives: its primary bucket and its fingerprint (never 0; the `Default` value is
/// only a placeholder in batch arrays).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ItemKey {
    pub(crate) primary: usize,
    pub(crate) fingerprint: u64,
}

/// Maps hashes to buckets and fingerprints for a table of `buckets` buckets and `bits`-wide
/// fingerprints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyMapper {
    buckets: u64,
    max_fingerprint: u64,
}

impl KeyMapper {
    /// `buckets` must be even and in `MIN_BUCKETS..=MAX_BUCKETS`; `max_fingerprint` is
    /// `2^bits - 1`.
    pub(crate) fn new(buckets: usize, max_fingerprint: u64) -> Self {
        debug_assert!(buckets.is_multiple_of(2));
        debug_assert!((MIN_BUCKETS..=MAX_BUCKETS).contains(&(buckets as u64)));
        KeyMapper {
            buckets: buckets as u64,
            max_fingerprint,
        }
    }

    /// The primary bucket and fingerprint of an item with this hash.
    #[inline]
    pub(crate) fn key(&self, hash: u64) -> ItemKey {
        // Multiply-shift maps 32 uniform bits onto 0..n without a division.
        let primary = (((hash >> 32) * self.buckets) >> 32) as usize;
        // Same trick onto 0..2^bits-1, then +1 so that 0 stays free to mean "empty lane".
        let fingerprint = (((hash & 0xFFFF_FFFF) * self.max_fingerprint) >> 32) + 1;
        ItemKey {
            primary,
            fingerprint,
        }
    }

    /// The other bucket of a fingerprint stored in `bucket`: `(H(fp) - bucket) mod n`, with
    /// `H(fp)` odd and in `1..n`; never `bucket` itself.
    #[inline]
    pub(crate) fn alternate(&self, bucket: usize, fingerprint: u64) -> usize {
        let n = self.buckets;
        let h = 2 * (((fingerprint.wrapping_mul(FINGERPRINT_MIX) >> 32) * (n / 2)) >> 32) + 1;
        let diff = h.wrapping_sub(bucket as u64);
        // diff is in (-n, n); add n back when it went negative, without a branch.
        let wrap = n & ((diff as i64 >> 63) as u64);
        diff.wrapping_add(wrap) as usize
    }

    /// A hash whose key is `(primary, fingerprint)`: the inverse of [`KeyMapper::key`], used by
    /// the loom models to put items exactly where a scenario needs them.
    #[cfg(any(test, loom))]
    pub(crate) fn hash_for(&self, primary: usize, fingerprint: u64) -> u64 {
        debug_assert!((primary as u64) < self.buckets);
        debug_assert!(fingerprint >= 1 && fingerprint <= self.max_fingerprint);
        let high = ((primary as u64) << 32).div_ceil(self.buckets);
        let low = ((fingerprint - 1) << 32).div_ceil(self.max_fingerprint);
        let hash = (high << 32) | low;
        debug_assert_eq!(
            self.key(hash),
            ItemKey {
                primary,
                fingerprint
            }
        );
        hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_is_a_fixed_point_free_involution_for_any_even_count() {
        for n in [2usize, 4, 6, 10, 100, 1000, 12_346, 1 << 20, (1 << 20) + 2] {
            let m = KeyMapper::new(n, 0xFFFF);
            for i in (0..n).step_by((n / 97).max(1)) {
                for fp in [1u64, 2, 3, 255, 256, 0x7FFF, 0xFFFF] {
                    let a = m.alternate(i, fp);
                    assert!(a < n, "alt out of range n={n} i={i} fp={fp}");
                    assert_ne!(a, i, "n={n} i={i} fp={fp}");
                    assert_eq!(m.alternate(a, fp), i, "n={n} i={i} fp={fp}");
                }
            }
        }
    }

    /// Every fingerprint of a bucket must be able to reach many other buckets, not a few.
    #[test]
    fn alternates_spread_over_the_table() {
        let n = 10_000;
        let m = KeyMapper::new(n, 0xFFFF);
        let reached: std::collections::HashSet<usize> =
            (1..=2000u64).map(|fp| m.alternate(17, fp)).collect();
        // 2000 draws from the 5000 buckets of opposite parity: ~1670 distinct expected.
        assert!(
            reached.len() > 1500,
            "{} distinct alternates",
            reached.len()
        );
        assert!(
            reached.iter().all(|&b| b % 2 == 0),
            "17 is odd: partners are even"
        );
    }

    #[test]
    fn alternate_works_at_the_largest_bucket_count() {
        let n = MAX_BUCKETS as usize;
        let m = KeyMapper::new(n, u32::MAX as u64);
        for i in [0usize, 1, n / 2, n - 2, n - 1] {
            for fp in [1u64, 77, u32::MAX as u64] {
                let a = m.alternate(i, fp);
                assert!(a < n);
                assert_eq!(m.alternate(a, fp), i);
            }
        }
    }

    #[test]
    fn key_stays_in_range_and_fingerprint_is_never_zero() {
        for bits in [4u32, 8, 12, 16, 32] {
            let max = (1u64 << bits) - 1;
            let m = KeyMapper::new(1000, max);
            for hash in [
                0u64,
                1,
                u64::MAX,
                0xFFFF_FFFF,
                0xFFFF_FFFF_0000_0000,
                1 << 63,
            ] {
                let k = m.key(hash);
                assert!(k.primary < 1000);
                assert!(
                    (1..=max).contains(&k.fingerprint),
                    "bits={bits} hash={hash:#x}"
                );
            }
        }
    }

    #[test]
    fn hash_for_inverts_key() {
        for (n, bits) in [(2usize, 4u32), (4, 8), (8, 32), (1000, 12), (1 << 24, 16)] {
            let max = (1u64 << bits) - 1;
            let m = KeyMapper::new(n, max);
            for primary in [0, n / 2, n - 1] {
                for fp in [1, max / 3 + 1, max] {
                    let k = m.key(m.hash_for(primary, fp));
                    assert_eq!((k.primary, k.fingerprint), (primary, fp));
                }
            }
        }
    }

    /// The fingerprint must not depend on the bucket: among items of one bucket, fingerprints
    /// must still be spread over their whole range.
    #[test]
    fn bucket_and_fingerprint_come_from_independent_bits() {
        let hasher = DefaultHashBuilder::default();
        let m = KeyMapper::new(64, 255);
        let mut per_bucket_fp = vec![[0u32; 256]; 64];
        for i in 0..200_000u64 {
            let k = m.key(hasher.hash_one(i));
            per_bucket_fp[k.primary][k.fingerprint as usize] += 1;
        }
        for counts in &per_bucket_fp {
            let distinct = counts.iter().filter(|&&c| c > 0).count();
            // ~3125 items per bucket over 255 values: every value shows up.
            assert!(
                distinct >= 250,
                "only {distinct} distinct fingerprints in a bucket"
            );
        }
    }
}
