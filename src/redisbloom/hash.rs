//! RedisBloom's item hashing: MurmurHash64A, the fingerprint, and the two bucket indexes.
//!
//! Every sub-filter of a valid filter has a power-of-two bucket count, so `x % n` is
//! `x & (n - 1)` and the alternate index is an involution in every sub-filter.

/// MurmurHash64A's multiplier.
const M: u64 = 0xc6a4_a793_5bd1_e995;
/// MurmurHash64A's shift.
const R: u32 = 47;
/// RedisBloom's multiplier for the alternate index (`fp * 0x5bd1e995`, below 2^40 for a u8).
pub(crate) const ALT_MULTIPLIER: u64 = 0x5bd1_e995;

/// Appleby's MurmurHash64A with seed 0, as RedisBloom hashes an item's raw bytes.
///
/// Inlined: for an item of a length known at the call (a `u64`'s 8 bytes), the block loop and
/// the tail fold to straight-line code.
#[inline]
pub(crate) fn murmur64a(bytes: &[u8]) -> u64 {
    let mut h = (bytes.len() as u64).wrapping_mul(M);
    let mut blocks = bytes.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("8-byte block"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        // The C switch falls through from `len & 7` down to 1: byte `i` goes to bits 8i.., which
        // is a little-endian read of the zero-padded tail.
        let mut padded = [0u8; 8];
        padded[..tail.len()].copy_from_slice(tail);
        h ^= u64::from_le_bytes(padded);
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^ (h >> R)
}

/// An item's fingerprint and its two bucket hashes, valid in every sub-filter (reduce them with
/// [`bucket_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ItemHash {
    /// `H % 255 + 1`: never 0, which marks an empty slot.
    pub(crate) fp: u8,
    /// The primary bucket hash: `H` itself.
    pub(crate) h1: u64,
    /// The alternate bucket hash: `H ^ (fp * 0x5bd1e995)`.
    pub(crate) h2: u64,
}

impl ItemHash {
    /// The hashes of an item given as its raw bytes (the RESP bulk string).
    #[inline]
    pub(crate) fn of(bytes: &[u8]) -> Self {
        Self::from_hash(murmur64a(bytes))
    }

    /// The hashes derived from an item's MurmurHash64A value.
    #[inline]
    pub(crate) fn from_hash(h: u64) -> Self {
        let fp = (h % 255 + 1) as u8;
        ItemHash {
            fp,
            h1: h,
            h2: h ^ (u64::from(fp) * ALT_MULTIPLIER),
        }
    }
}

/// The bucket of hash `h` in a sub-filter of `buckets` buckets (a power of two).
///
/// RedisBloom computes `h % buckets`; for a power of two that is the low bits, `h & (buckets - 1)`.
#[inline]
pub(crate) fn bucket_of(h: u64, buckets: u64) -> u64 {
    debug_assert!(buckets.is_power_of_two());
    h & buckets.wrapping_sub(1)
}

/// The other bucket of fingerprint `fp` stored in `bucket`, in a sub-filter of `buckets`
/// buckets (a power of two): `(bucket ^ (fp * 0x5bd1e995)) % buckets`.
///
/// With a power-of-two modulus, `%` keeps the low bits, and XOR acts bitwise, so reducing
/// before or after the XOR gives the same bucket: applying it twice returns `bucket`, and
/// `bucket_of(h2) == alt_bucket(fp, bucket_of(h1))`.
#[inline]
pub(crate) fn alt_bucket(fp: u8, bucket: u64, buckets: u64) -> u64 {
    bucket_of(bucket ^ (u64::from(fp) * ALT_MULTIPLIER), buckets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MurmurHash64A read literally from its description: blocks assembled byte by byte, the
    /// tail XORed in one byte at a time from the highest, as the C switch falls through.
    fn murmur64a_bytewise(bytes: &[u8]) -> u64 {
        let mut h = (bytes.len() as u64).wrapping_mul(M);
        let whole = bytes.len() / 8 * 8;
        for block in bytes[..whole].chunks(8) {
            let mut k = 0u64;
            for (i, &b) in block.iter().enumerate() {
                k |= u64::from(b) << (8 * i);
            }
            k = k.wrapping_mul(M);
            k ^= k >> R;
            k = k.wrapping_mul(M);
            h ^= k;
            h = h.wrapping_mul(M);
        }
        let tail = &bytes[whole..];
        for i in (0..tail.len()).rev() {
            h ^= u64::from(tail[i]) << (8 * i);
        }
        if !tail.is_empty() {
            h = h.wrapping_mul(M);
        }
        h ^= h >> R;
        h = h.wrapping_mul(M);
        h ^= h >> R;
        h
    }

    #[test]
    fn spec_vectors_hash_and_fingerprint() {
        let cases: [(&[u8], u64, u8); 4] = [
            (b"", 0x0, 1),
            (b"a", 0x0717_17d2_d36b_6b11, 196),
            (b"foo", 0xcdde_3835_8fd2_5b01, 217),
            (b"b", 0xea8b_fc7d_922a_2a37, 16),
        ];
        for (item, hash, fp) in cases {
            assert_eq!(murmur64a(item), hash, "{item:?}");
            let ih = ItemHash::of(item);
            assert_eq!(ih.fp, fp, "{item:?}");
            assert_eq!(ih.h1, hash);
            assert_eq!(ih.h2, hash ^ (u64::from(fp) * 0x5bd1_e995));
        }
    }

    /// The worked example of spec §5: fingerprints and buckets of a..h in 4 buckets.
    #[test]
    fn spec_worked_example_fingerprints_and_buckets() {
        let four = |item: &[u8]| {
            let h = ItemHash::of(item);
            (h.fp, bucket_of(h.h1, 4), bucket_of(h.h2, 4))
        };
        assert_eq!(four(b"a"), (0xc4, 1, 1));
        assert_eq!(four(b"b"), (0x10, 3, 3));
        assert_eq!(four(b"c"), (0xcb, 1, 2));
        assert_eq!(four(b"d"), (0x06, 1, 3));
        assert_eq!(four(b"e"), (0xbc, 1, 1));
        assert_eq!(four(b"g"), (0x1c, 3, 3));
    }

    #[test]
    fn every_tail_length_matches_the_bytewise_formulation() {
        let data: Vec<u8> = (0..40u32)
            .map(|i| (i.wrapping_mul(0x9d) ^ 0xa5) as u8)
            .collect();
        for len in 0..=17 {
            for start in 0..8 {
                let item = &data[start..start + len];
                assert_eq!(murmur64a(item), murmur64a_bytewise(item), "len {len}");
            }
        }
        // High bytes in the tail would expose a sign extension.
        for len in 0..=17 {
            let item = vec![0xffu8; len];
            assert_eq!(murmur64a(&item), murmur64a_bytewise(&item), "0xff x {len}");
        }
    }

    #[test]
    fn fingerprint_is_never_zero() {
        for h in [0, 254, 255, 256, u64::MAX, u64::MAX - 1, 255 * 1000 - 1] {
            let fp = ItemHash::from_hash(h).fp;
            assert_ne!(fp, 0);
            assert_eq!(u64::from(fp), h % 255 + 1);
        }
    }

    #[test]
    fn alt_bucket_is_an_involution_for_powers_of_two() {
        for shift in 0..20 {
            let buckets = 1u64 << shift;
            for fp in 1..=255u8 {
                for bucket in (0..buckets).step_by((buckets as usize / 7).max(1)) {
                    let alt = alt_bucket(fp, bucket, buckets);
                    assert!(alt < buckets);
                    assert_eq!(alt_bucket(fp, alt, buckets), bucket, "fp {fp} n {buckets}");
                }
            }
        }
    }

    #[test]
    fn second_bucket_is_the_alternate_of_the_first() {
        for i in 0..2000u32 {
            let h = ItemHash::of(&i.to_le_bytes());
            for shift in [0, 1, 2, 9, 31, 40, 55, 63] {
                let n = 1u64 << shift;
                assert_eq!(bucket_of(h.h2, n), alt_bucket(h.fp, bucket_of(h.h1, n), n));
                assert_eq!(bucket_of(h.h1, n), h.h1 % n);
            }
        }
    }

    /// Spec §3: with 2 buckets every even fingerprint maps both hashes to one bucket.
    #[test]
    fn even_fingerprint_in_two_buckets_has_one_bucket() {
        let h = ItemHash::of(b"b");
        assert_eq!(h.fp % 2, 0);
        assert_eq!(bucket_of(h.h1, 2), bucket_of(h.h2, 2));
    }
}
