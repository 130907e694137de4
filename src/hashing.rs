//! From an item's 64-bit hash to its two candidate buckets and its fingerprint, in every level.
//!
//! The upper 32 bits of the hash choose the primary bucket and the lower 32 bits choose the
//! fingerprint, so the two are independent (drawing both from the same bits would make items that
//! share a bucket share fingerprints too, and inflate the false-positive rate).
//!
//! # One level
//!
//! The alternate bucket is `alt(i, fp) = (H(fp) - i) mod n`. It works for any even bucket count
//! `n`, not only powers of two, and is an involution: `alt(alt(i, fp), fp) = i`, so a fingerprint
//! can always be moved back without knowing the item it came from. `H(fp)` is always odd and `n`
//! even, so `2i = H (mod n)` has no solution: an item's two buckets are never the same bucket
//! (with any `H`, about one item in `n` would get a single bucket, which fills small tables
//! early). Even buckets pair with odd ones, as in cuckoo hashing with two tables.
//!
//! # Nested levels
//!
//! A growing filter's levels must be *nested*: when two items have the same key (fingerprint and
//! bucket pair) in a newer level, they have the same key in every older level. A remove takes
//! the newest copy that matches; if that copy belonged to another item `y`, the removed item's
//! own copy sits in an older level, where it matches `y` too, so `y` is still found (the two
//! items have swapped copies). Without nesting, `y` would be lost.
//!
//! Level `j` has `n_j = n_0 · 2^d` buckets (`d = digit_bits`, growing with `j`). Its bucket
//! `p` is read as `p = q · 2^d + r`: `q < n_0` is a bucket of level 0 and `r` the `d` low bits.
//!
//! - **Primary**: `p = ⌊h · n_j / 2^32⌋` for the upper hash bits `h`. Then
//!   `⌊p / 2^e⌋ = ⌊h · n_j / 2^(32+e)⌋` for every `e ≤ d` (`⌊⌊x⌋ / m⌋ = ⌊x / m⌋` for an
//!   integer `m`): an older level's primary bucket is the newer one with low bits dropped.
//! - **Fingerprint**: the top `f_j` of the lower 32 hash bits, `0` replaced by `1`:
//!   `fp_j = max(l >> (32 - f_j), 1)`. Widths never shrink (`f_i ≤ f_j` for `i < j`), so
//!   `fp_i = max(fp_j >> (f_j - f_i), 1)`: an older fingerprint is a function of a newer one
//!   (if `l >> (32 - f_j)` is 0 or 1, the truncation is 0 or, for equal widths, 1: either way 1).
//! - **Alternate**: with `fp_0` the level-0 truncation of `fp_j`,
//!   `alt_j(q · 2^d + r, fp_j) = alt_0(q, fp_0) · 2^d + (r XOR T_d(fp_0))`, where `alt_0` is the
//!   one-level alternate of level 0 and `T_d(fp_0)` the top `d` bits of a 32-bit mix of `fp_0`.
//!   It is an involution (both parts are), and never maps a bucket to itself (`alt_0` does
//!   not). Dropping `e` low bits of the result gives `alt_0(q) · 2^(d-e) + ((r >> e) XOR
//!   T_(d-e))`, because `T_(d-e)` is the top `d - e` bits of the same mix, i.e. `T_d >> e`:
//!   that is the alternate, in the older level, of the older primary bucket.
//!
//! So if `x` and `y` share a fingerprint and a bucket pair in level `j`, either their primaries
//! are equal (then so are all older primaries, and fingerprints) or `p_y = alt_j(p_x)`, and then
//! `⌊p_y / 2^e⌋ = alt_i(⌊p_x / 2^e⌋)`: the same pair in level `i` too. The XOR part lets
//! fingerprints move between all of a level's `2^d` blocks of `n_0` buckets, so a level behaves
//! like one table of its full size (a chained constant such as `H_(j+1) = 2 H_j + 1` would also
//! nest, but splits level `j` into independent tables of `2 n_0` buckets, which fill unevenly).

/// Keeps one of each distinct hash, in an order unrelated to the bits that choose buckets and
/// fingerprints: collecting into a filter stores each distinct item once. Sorted by the hash
/// itself, neighbours would share a bucket (and in a doubling table a fingerprint prefix), so
/// inserts would meet full buckets in runs. So the hashes are mixed by a bijection, sorted and
/// deduplicated as plain integers (equal hashes are equal mixes), and mixed back.
pub(crate) fn dedup_hashes(hashes: &mut Vec<u64>) {
    for h in hashes.iter_mut() {
        *h = mix(*h);
    }
    hashes.sort_unstable();
    hashes.dedup();
    for h in hashes.iter_mut() {
        *h = unmix(*h);
    }
}

/// Multipliers of `mix`, odd, so each has an inverse modulo 2^64.
const MIX_MULTIPLIERS: [u64; 2] = [0xff51_afd7_ed55_8ccd, 0xc4ce_b9fe_1a85_ec53];

/// The finaliser of MurmurHash3's 64-bit variant: xor-shifts and odd multiplications, each
/// invertible, so distinct hashes get distinct mixes (`unmix` undoes it).
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(MIX_MULTIPLIERS[0]);
    h ^= h >> 33;
    h = h.wrapping_mul(MIX_MULTIPLIERS[1]);
    h ^ (h >> 33)
}

/// The inverse of `mix`: `x ^= x >> 33` is its own inverse (a shift of 33 or more leaves
/// nothing of the shifted bits to shift again), and each multiplication is undone by the
/// multiplier's inverse.
fn unmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(inverse_mod_2_64(MIX_MULTIPLIERS[1]));
    h ^= h >> 33;
    h = h.wrapping_mul(inverse_mod_2_64(MIX_MULTIPLIERS[0]));
    h ^ (h >> 33)
}

/// The inverse of odd `a` modulo 2^64, by Newton's iteration: `a` is its own inverse modulo 8,
/// and each step doubles the bits that are right (3, 6, 12, 24, 48, 96).
const fn inverse_mod_2_64(a: u64) -> u64 {
    let mut x = a;
    let mut step = 0;
    while step < 5 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
        step += 1;
    }
    x
}

/// Largest supported bucket count: bucket indices are derived from 32 hash bits.
pub(crate) const MAX_BUCKETS: u64 = 1 << 32;

/// Smallest bucket count: an item needs two distinct buckets.
pub(crate) const MIN_BUCKETS: u64 = 2;

/// Odd 64-bit constant (2^64 / golden ratio) that spreads small fingerprints over all bits.
const FINGERPRINT_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Where an item lives: its primary bucket and its fingerprint (never 0; the `Default` value is
/// only a placeholder in batch arrays).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ItemKey {
    pub(crate) primary: usize,
    pub(crate) fingerprint: u64,
}

/// The geometry that a level's keys are derived from: its own size and width, and those of the
/// first level, which it nests inside (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Nesting {
    /// Buckets of this level: `base_buckets · 2^digit_bits`.
    pub(crate) buckets: usize,
    /// Fingerprint width of this level.
    pub(crate) bits: u32,
    /// Buckets of level 0 (even).
    pub(crate) base_buckets: usize,
    /// Fingerprint width of level 0 (at most `bits`).
    pub(crate) base_bits: u32,
}

impl Nesting {
    /// A level that nests only in itself (level 0, or a filter that never grows).
    #[cfg(test)]
    pub(crate) fn flat(buckets: usize, bits: u32) -> Self {
        Nesting {
            buckets,
            bits,
            base_buckets: buckets,
            base_bits: bits,
        }
    }

    /// Whether the geometry can nest: even base, a power-of-two multiple of it, widths that do
    /// not shrink, all within the supported ranges.
    pub(crate) fn is_valid(&self) -> bool {
        let (n, base) = (self.buckets as u64, self.base_buckets as u64);
        (MIN_BUCKETS..=MAX_BUCKETS).contains(&n)
            && base >= MIN_BUCKETS
            && base.is_multiple_of(2)
            && n.is_multiple_of(base)
            && (n / base).is_power_of_two()
            && self.base_bits <= self.bits
            && (1..=32).contains(&self.base_bits)
            && self.bits <= 32
    }
}

/// Maps hashes to buckets and fingerprints for one level (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyMapper {
    buckets: u64,
    /// `32 - bits`: the fingerprint is the top `bits` of the low hash word.
    fingerprint_shift: u32,
    /// `bits - base_bits`: truncates this level's fingerprint to level 0's.
    base_shift: u32,
    /// `base_buckets / 2`: `alt_0`'s odd constant is drawn from `0..base_buckets`.
    base_half: u64,
    /// `d`: this level has `2^d` blocks of `base_buckets`.
    digit_bits: u32,
    /// `d == 0` and equal widths: the level is its own base (a first level).
    flat: bool,
}

impl KeyMapper {
    /// The mapper of a level; `nesting` must be valid (see [`Nesting::is_valid`]).
    pub(crate) fn new(nesting: Nesting) -> Self {
        debug_assert!(nesting.is_valid(), "{nesting:?}");
        let ratio = (nesting.buckets / nesting.base_buckets) as u64;
        KeyMapper {
            buckets: nesting.buckets as u64,
            fingerprint_shift: 32 - nesting.bits,
            base_shift: nesting.bits - nesting.base_bits,
            base_half: nesting.base_buckets as u64 / 2,
            digit_bits: ratio.trailing_zeros(),
            flat: ratio == 1 && nesting.bits == nesting.base_bits,
        }
    }

    /// The primary bucket and fingerprint of an item with this hash.
    #[inline]
    pub(crate) fn key(&self, hash: u64) -> ItemKey {
        // Multiply-shift maps 32 uniform bits onto 0..n without a division; dropping low bits of
        // the result gives an older level's bucket (module docs).
        let primary = (((hash >> 32) * self.buckets) >> 32) as usize;
        // The top bits of the low word, so an older, narrower fingerprint is a truncation; 0 is
        // "empty lane", so it becomes 1 (branch-free).
        let top = (hash & 0xFFFF_FFFF) >> self.fingerprint_shift;
        let fingerprint = top | u64::from(top == 0);
        ItemKey {
            primary,
            fingerprint,
        }
    }

    /// The other bucket of a fingerprint stored in `bucket`; never `bucket` itself.
    #[inline]
    pub(crate) fn alternate(&self, bucket: usize, fingerprint: u64) -> usize {
        // A first level (or a level of the same size and width) is its own base: skip the
        // truncation and the low digits. The branch depends on the table only, so it is
        // predicted right every time; it saves about a fifth of a cached lookup's instructions.
        if self.flat {
            let mixed = fingerprint.wrapping_mul(FINGERPRINT_MIX);
            return self.base_alternate(bucket as u64, mixed) as usize;
        }
        self.nested_alternate(bucket, fingerprint)
    }

    /// `alt_j` of a level that is a power-of-two multiple of level 0 (module docs).
    #[inline]
    fn nested_alternate(&self, bucket: usize, fingerprint: u64) -> usize {
        let base_fp = fingerprint >> self.base_shift;
        let base_fp = base_fp | u64::from(base_fp == 0);
        let mixed = base_fp.wrapping_mul(FINGERPRINT_MIX);
        let block = (bucket as u64) >> self.digit_bits;
        let alt_block = self.base_alternate(block, mixed);
        // The low digits: XOR with the top `d` bits of the mix's lower half (0 when d = 0).
        let low_mask = (1u64 << self.digit_bits) - 1;
        let flip = (mixed & 0xFFFF_FFFF) >> (32 - self.digit_bits);
        ((alt_block << self.digit_bits) | ((bucket as u64 & low_mask) ^ flip)) as usize
    }

    /// `alt_0(block) = (H - block) mod n_0`, with `H` odd in `1..n_0` drawn from the upper half
    /// of the level-0 fingerprint's mix.
    #[inline]
    fn base_alternate(&self, block: u64, mixed: u64) -> u64 {
        let n0 = 2 * self.base_half;
        let h = 2 * (((mixed >> 32) * self.base_half) >> 32) + 1;
        let diff = h.wrapping_sub(block);
        // diff is in (-n_0, n_0); add n_0 back when it went negative, without a branch.
        diff.wrapping_add(n0 & ((diff as i64 >> 63) as u64))
    }

    /// A hash whose key is `(primary, fingerprint)`: the inverse of [`KeyMapper::key`], used by
    /// the loom models to put items exactly where a scenario needs them.
    #[cfg(any(test, loom))]
    pub(crate) fn hash_for(&self, primary: usize, fingerprint: u64) -> u64 {
        debug_assert!((primary as u64) < self.buckets);
        debug_assert!(fingerprint >= 1 && fingerprint >> (32 - self.fingerprint_shift) == 0);
        let high = ((primary as u64) << 32).div_ceil(self.buckets);
        let low = fingerprint << self.fingerprint_shift;
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
    #[test]
    fn unmix_undoes_mix_and_dedup_keeps_one_of_each_hash() {
        let mut rng = crate::test_rng::SplitMix(0xd1ce);
        let hashes: Vec<u64> = (0..10_000).map(|_| rng.next()).collect();
        for &h in hashes.iter().chain(&[0, 1, u64::MAX, 1 << 33]) {
            assert_eq!(super::unmix(super::mix(h)), h, "{h:#x}");
        }
        for a in super::MIX_MULTIPLIERS {
            assert_eq!(a.wrapping_mul(super::inverse_mod_2_64(a)), 1);
        }
        let mut repeated: Vec<u64> = hashes.iter().chain(&hashes[..5_000]).copied().collect();
        super::dedup_hashes(&mut repeated);
        let mut expected = hashes.clone();
        expected.sort_unstable();
        expected.dedup();
        let mut got = repeated.clone();
        got.sort_unstable();
        assert_eq!(got, expected, "one of each distinct hash");
        assert_ne!(repeated, got, "in the mixed order, not sorted by hash");
    }

    use super::*;
    use crate::hasher::DefaultHashBuilder;
    use std::hash::BuildHasher;

    fn flat(n: usize, bits: u32) -> KeyMapper {
        KeyMapper::new(Nesting::flat(n, bits))
    }

    /// Level `d` of a filter whose first level has `base` buckets of `base_bits` fingerprints.
    fn nested(base: usize, base_bits: u32, d: u32, bits: u32) -> KeyMapper {
        KeyMapper::new(Nesting {
            buckets: base << d,
            bits,
            base_buckets: base,
            base_bits,
        })
    }

    #[test]
    fn alternate_is_a_fixed_point_free_involution_for_any_even_count() {
        for n in [2usize, 4, 6, 10, 100, 1000, 12_346, 1 << 20, (1 << 20) + 2] {
            let m = flat(n, 16);
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

    #[test]
    fn nested_alternate_is_a_fixed_point_free_involution() {
        for (base, d) in [
            (2usize, 1u32),
            (2, 5),
            (6, 3),
            (1000, 1),
            (1000, 10),
            (12_346, 4),
        ] {
            let m = nested(base, 12, d, 16);
            let n = base << d;
            for i in (0..n).step_by((n / 197).max(1)) {
                for fp in [1u64, 2, 3, 255, 256, 0x7FFF, 0xFFFF] {
                    let a = m.alternate(i, fp);
                    assert!(a < n, "base={base} d={d} i={i} fp={fp}");
                    assert_ne!(a, i, "base={base} d={d} i={i} fp={fp}");
                    assert_eq!(m.alternate(a, fp), i, "base={base} d={d} i={i} fp={fp}");
                }
            }
        }
    }

    /// The property that makes removes safe in grown filters: two hashes with the same key in
    /// a newer level (same fingerprint, same bucket pair) have the same key in every older one.
    #[test]
    fn a_collision_in_a_newer_level_is_a_collision_in_every_older_level() {
        let mut state = 0x5EED_u64;
        let mut next = || {
            // splitmix64: a fixed sequence of well-mixed hashes.
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let levels = |base: usize, widths: &[u32]| -> Vec<KeyMapper> {
            (0..widths.len() as u32)
                .map(|d| nested(base, widths[0], d, widths[d as usize]))
                .collect()
        };
        let pair = |m: &KeyMapper, h: u64| {
            let k = m.key(h);
            let (a, b) = (k.primary, m.alternate(k.primary, k.fingerprint));
            (k.fingerprint, a.min(b), a.max(b))
        };
        for (base, widths) in [
            (2usize, vec![4u32, 4, 8, 8, 12]),
            (10, vec![8, 8, 8, 8]),
            (210, vec![12, 12, 16, 16, 16, 16]),
            (1000, vec![8, 12, 16, 21, 32]),
        ] {
            let mappers = levels(base, &widths);
            let newest = mappers.last().unwrap();
            let mut collisions = 0;
            for _ in 0..200_000 {
                let x = next();
                // A hash that collides with x in the newest level: x's own key, or x's
                // fingerprint in x's other bucket, with other low bits below the fingerprint.
                let k = newest.key(x);
                let bucket = if next() & 1 == 0 {
                    k.primary
                } else {
                    newest.alternate(k.primary, k.fingerprint)
                };
                let noise = next() & ((1 << (32 - widths.last().unwrap())) - 1);
                let y = newest.hash_for(bucket, k.fingerprint) | noise;
                assert_eq!(pair(newest, x), pair(newest, y));
                for (level, m) in mappers.iter().enumerate() {
                    assert_eq!(
                        pair(m, x),
                        pair(m, y),
                        "base={base} widths={widths:?} level={level} x={x:#x} y={y:#x}"
                    );
                }
                collisions += 1;
            }
            assert_eq!(collisions, 200_000);
        }
    }

    /// Unnested levels (each level a table of its own) break the property above; this is what
    /// the test would see, so it can fail.
    #[test]
    fn unnested_levels_would_not_collide_alike() {
        let (old, new) = (flat(1000, 12), flat(2000, 12));
        let differ = (0..10_000u64)
            .filter(|&i| {
                let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let k = new.key(x);
                let y = new.hash_for(new.alternate(k.primary, k.fingerprint), k.fingerprint);
                let (kx, ky) = (old.key(x), old.key(y));
                let pair_x = [kx.primary, old.alternate(kx.primary, kx.fingerprint)];
                !pair_x.contains(&ky.primary)
            })
            .count();
        // About half the pairs differ (the two alternates agree to within a bucket).
        assert!(differ > 3_000, "{differ}");
    }

    /// Every fingerprint of a bucket must be able to reach many other buckets, not a few, and
    /// in a grown level, buckets of every block.
    #[test]
    fn alternates_spread_over_the_table() {
        let n = 10_000;
        let m = flat(n, 16);
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
        // A tiny first level (4 buckets) grown 2^10 times: partners must cover the blocks.
        let grown = nested(4, 12, 10, 12);
        let blocks: std::collections::HashSet<usize> = (1..=4095u64)
            .map(|fp| grown.alternate(17, fp) & 1023)
            .collect();
        assert!(blocks.len() > 900, "{} of 1024 blocks", blocks.len());
    }

    #[test]
    fn alternate_works_at_the_largest_bucket_count() {
        let n = MAX_BUCKETS as usize;
        for m in [
            flat(n, 32),
            nested(2, 32, 31, 32),
            nested(1 << 20, 8, 12, 32),
        ] {
            for i in [0usize, 1, n / 2, n - 2, n - 1] {
                for fp in [1u64, 77, u32::MAX as u64] {
                    let a = m.alternate(i, fp);
                    assert!(a < n);
                    assert_eq!(m.alternate(a, fp), i);
                }
            }
        }
    }

    #[test]
    fn key_stays_in_range_and_fingerprint_is_never_zero() {
        for bits in [4u32, 8, 12, 16, 32] {
            let max = (1u64 << bits) - 1;
            let m = flat(1000, bits);
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
            let m = flat(n, bits);
            for primary in [0, n / 2, n - 1] {
                for fp in [1, max / 3 + 1, max] {
                    let k = m.key(m.hash_for(primary, fp));
                    assert_eq!((k.primary, k.fingerprint), (primary, fp));
                }
            }
        }
    }

    #[test]
    fn invalid_nestings_are_refused() {
        let ok = Nesting {
            buckets: 4000,
            bits: 16,
            base_buckets: 1000,
            base_bits: 12,
        };
        assert!(ok.is_valid());
        for bad in [
            Nesting {
                buckets: 3000,
                ..ok
            },
            Nesting {
                base_buckets: 999,
                buckets: 999 * 4,
                ..ok
            },
            Nesting { bits: 8, ..ok },
            Nesting { buckets: 500, ..ok },
            Nesting { bits: 33, ..ok },
        ] {
            assert!(!bad.is_valid(), "{bad:?}");
        }
    }

    /// The fingerprint must not depend on the bucket: among items of one bucket, fingerprints
    /// must still be spread over their whole range.
    #[test]
    fn bucket_and_fingerprint_come_from_independent_bits() {
        let hasher = DefaultHashBuilder;
        let m = flat(64, 8);
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
