//! The semi-sorted bucket encoding (Fan et al., CoNEXT 2014, §5.2): a bucket of four `f`-bit
//! lanes in `4f - 4` bits instead of `4f`.
//!
//! The lanes are sorted ascending by value, which also sorts their top 4 bits (*nibbles*) and
//! orders lanes with equal nibbles by their low parts, so the same multiset of lanes always gives
//! the same code, whatever order it came in. Four sorted nibbles are a multiset of 4 values out of
//! 16, one of C(19, 4) = 3876, so a 12-bit index names them; the low `w = f - 4` bits of each lane
//! follow in the same sorted order:
//!
//! ```text
//! bit 0           12        12+w       12+2w      12+3w      12+4w = 4f-4
//!     | nibble index | low 0  |  low 1   |  low 2   |  low 3   |
//! ```
//!
//! The index of sorted nibbles `a <= b <= c <= d` is the colex rank of the strictly increasing
//! `(a, b+1, c+2, d+3)` in the combinatorial number system, so `{0, 0, 0, 0}` gets index 0 and an
//! empty bucket (every lane 0) is code 0, which is what zeroed table memory holds. Ranking is a
//! few multiplications; unranking is one load from an 8 KiB table, built at compile time.
//!
//! Lane value 0 means empty, so stored fingerprints live in `1..2^f`, as in `bucket_word`.

/// Bits of the nibble-multiset index at the bottom of a code.
const INDEX_BITS: u32 = 12;
/// Number of multisets of 4 nibbles: C(16 + 4 - 1, 4).
const MULTISETS: u32 = 3876;

/// Index -> the four sorted nibbles, lane `k` in bits `4k..4k+4`. Indices past [`MULTISETS`]
/// (never produced by [`encode`]) map to 0, so decoding any 12 bits stays in bounds.
static NIBBLES: [u16; 1 << INDEX_BITS] = nibbles_by_index();

/// Colex rank of sorted nibbles `a <= b <= c <= d`: `C(a,1) + C(b+1,2) + C(c+2,3) + C(d+3,4)`.
const fn rank(a: u32, b: u32, c: u32, d: u32) -> u32 {
    a + (b + 1) * b / 2 + (c + 2) * (c + 1) * c / 6 + (d + 3) * (d + 2) * (d + 1) * d / 24
}

const fn nibbles_by_index() -> [u16; 1 << INDEX_BITS] {
    let mut table = [0u16; 1 << INDEX_BITS];
    let mut d = 0;
    while d < 16 {
        let mut c = 0;
        while c <= d {
            let mut b = 0;
            while b <= c {
                let mut a = 0;
                while a <= b {
                    table[rank(a, b, c, d) as usize] = (a | b << 4 | c << 8 | d << 12) as u16;
                    a += 1;
                }
                b += 1;
            }
            c += 1;
        }
        d += 1;
    }
    table
}

/// Bits of one encoded bucket of four `f`-bit lanes.
pub(crate) const fn encoded_bits(f: u32) -> u32 {
    4 * f - 4
}

/// The mask of a lane's low part (`w = f - 4` bits).
#[inline]
const fn low_mask(f: u32) -> u32 {
    (1 << (f - 4)) - 1
}

/// The code of a bucket holding `lanes` (0 = empty), in any order; bits from
/// [`encoded_bits`]`(f)` up are zero. Lane bits at or above `f` are ignored.
#[inline]
pub(crate) fn encode(f: u32, lanes: [u32; 4]) -> u128 {
    debug_assert!((4..=32).contains(&f), "width {f}");
    let w = f - 4;
    let mut lanes = lanes.map(|v| v & (u32::MAX >> (32 - f)));
    lanes.sort_unstable();
    let [a, b, c, d] = lanes.map(|v| v >> w);
    let mut code = u128::from(rank(a, b, c, d));
    for (k, v) in (0u32..).zip(lanes) {
        code |= u128::from(v & low_mask(f)) << (INDEX_BITS + k * w);
    }
    code
}

/// The four lanes of `code`, ascending (empty lanes, 0, first).
#[inline]
pub(crate) fn decode(f: u32, code: u128) -> [u32; 4] {
    let w = f - 4;
    let nibbles = u32::from(NIBBLES[code as usize & ((1 << INDEX_BITS) - 1)]);
    let low_pairs = low_pairs(f, code);
    let mask = u64::from(low_mask(f));
    let mut lanes = [0; 4];
    for (k, lane) in (0u32..).zip(&mut lanes) {
        let low = (low_pairs[k as usize / 2] >> (k % 2 * w) & mask) as u32;
        *lane = (nibbles >> (4 * k) & 0xF) << w | low;
    }
    lanes
}

/// Whether `code` is one [`encode`] can produce: a valid nibble index and no bit above
/// [`encoded_bits`]`(f)` (for checking codes read from outside, e.g. a snapshot).
pub(crate) fn is_valid(f: u32, code: u128) -> bool {
    code >> encoded_bits(f) == 0 && (code as u32 & ((1 << INDEX_BITS) - 1)) < MULTISETS
}

/// The SWAR constants of the low-part search for one width `f`: a table computes them once
/// (see [`contains_narrow`]) rather than on every lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LowSearch {
    f: u32,
    /// Bits of a lane's low part, `f - 4`.
    w: u32,
    /// One low part's bits.
    mask: u64,
    /// Bit 0 of both low parts of a pair: multiplying repeats a value in both.
    ones: u64,
    /// The highest bit of both low parts.
    highs: u64,
    /// The bits of both low parts below their highest bit.
    below_highs: u64,
}

impl LowSearch {
    /// The constants for fingerprints of `f` bits (`f - 4` low bits, at most 28).
    pub(crate) const fn new(f: u32) -> LowSearch {
        let w = f - 4;
        let mask = low_mask(f) as u64;
        let ones = 1 | 1 << w;
        let (highs, below_highs) = if w == 0 {
            (0, 0)
        } else {
            (ones << (w - 1), ones * (mask >> 1))
        };
        LowSearch {
            f,
            w,
            mask,
            ones,
            highs,
            below_highs,
        }
    }

    /// The lanes whose low part equals `fp`'s, as bit `4k` for lane `k` (0 when none), by SWAR
    /// over the two pairs of `w`-bit low parts (the trick of `bucket_word::WordLayout::zero_lanes`).
    /// It reads no table, and a random miss finds no lane with probability about `1 - 4 / 2^w`,
    /// so most lookups of absent items stop at its first test.
    #[inline(always)]
    fn lanes(&self, [pair0, pair1]: [u64; 2], fp: u32) -> u32 {
        let w = self.w;
        if w == 0 {
            return 0x1111;
        }
        let (highs, below_highs) = (self.highs, self.below_highs);
        let pattern = self.ones * (u64::from(fp) & self.mask);
        // Per lane, adding the bits below the high bit to all-ones carries into the high bit
        // exactly when one of them is set, and never out of the lane; bits above the pair are
        // masked off.
        let zero_lanes = |x: u64| !(((x & below_highs) + below_highs) | x | below_highs) & highs;
        let (z0, z1) = (zero_lanes(pair0 ^ pattern), zero_lanes(pair1 ^ pattern));
        if z0 | z1 == 0 {
            return 0;
        }
        // A pair's high bits sit at bits w - 1 and 2w - 1: move them to bits 0 and 4 (8 and 12).
        let spread = |z: u64| {
            let z = z >> (w - 1);
            (z & 1) as u32 | (((z >> w) & 1) as u32) << 4
        };
        spread(z0) | spread(z1) << 8
    }
}

/// The lanes of `code` that hold `fp`, as bit `4k` for lane `k`: those whose low part and
/// whose nibble both equal `fp`'s, without decoding the lanes.
#[inline]
fn matching_lanes(f: u32, code: u128, fp: u32) -> u32 {
    lanes_matching(&LowSearch::new(f), code as usize, low_pairs(f, code), fp)
}

/// `matching_lanes` from the code's low bits (its index) and its low pairs (`low_pairs`).
#[inline]
fn lanes_matching(search: &LowSearch, low_bits: usize, pairs: [u64; 2], fp: u32) -> u32 {
    let (f, low) = (search.f, search.lanes(pairs, fp));
    if low == 0 {
        return 0;
    }
    let nibbles = u32::from(NIBBLES[low_bits & ((1 << INDEX_BITS) - 1)]);
    // A nibble of `differ` is zero where the lane's nibble is `fp`'s; OR-folding each nibble
    // into its lowest bit leaves that bit clear exactly there.
    let differ = nibbles ^ ((fp >> (f - 4)) * 0x1111);
    let folded = differ | differ >> 1;
    let folded = folded | folded >> 2;
    low & !folded & 0x1111
}

/// The low parts of lanes 0 and 1, and of lanes 2 and 3, at the bottom of two words (2 * 28 bits
/// fit in a `u64`, so later shifts are `u64` ones, much cheaper than variable `u128` shifts).
#[inline]
fn low_pairs(f: u32, code: u128) -> [u64; 2] {
    let w = f - 4;
    [
        (code >> INDEX_BITS) as u64,
        (code >> (INDEX_BITS + 2 * w)) as u64,
    ]
}

/// Whether a lane of `code` holds `fp` (a fingerprint, `1..2^f`).
#[inline]
pub(crate) fn contains(f: u32, code: u128, fp: u32) -> bool {
    matching_lanes(f, code, fp) != 0
}

/// `contains` for a code that fits a `u64` (`f` at most 17): only `u64` shifts, and the
/// width's constants computed once (`search` is `LowSearch::new(f)`).
#[inline(always)]
pub(crate) fn contains_narrow(search: &LowSearch, code: u64, fp: u32) -> bool {
    debug_assert!(encoded_bits(search.f) <= 64);
    let pairs = [code >> INDEX_BITS, code >> (INDEX_BITS + 2 * search.w)];
    lanes_matching(search, code as usize, pairs, fp) != 0
}

/// How many lanes of `code` hold `fp` (a fingerprint, `1..2^f`).
#[inline]
pub(crate) fn count(f: u32, code: u128, fp: u32) -> u32 {
    matching_lanes(f, code, fp).count_ones()
}

/// How many lanes of `code` are occupied (non-zero).
#[inline]
pub(crate) fn occupied(f: u32, code: u128) -> u32 {
    decode(f, code).iter().filter(|&&v| v != 0).count() as u32
}

/// `code` with `fp` (a fingerprint, `1..2^f`) in one more lane, or `None` when all four are full.
#[cfg(test)]
pub(crate) fn with_inserted(f: u32, code: u128, fp: u32) -> Option<u128> {
    debug_assert!(fp != 0, "0 marks an empty lane");
    let mut lanes = decode(f, code);
    // Sorted ascending, so an empty lane, if there is one, is the first.
    if lanes[0] != 0 {
        return None;
    }
    lanes[0] = fp;
    Some(encode(f, lanes))
}

/// `code` with one lane holding `fp` (a fingerprint, `1..2^f`) emptied, or `None` when no lane
/// holds it.
#[cfg(test)]
pub(crate) fn with_removed(f: u32, code: u128, fp: u32) -> Option<u128> {
    debug_assert!(fp != 0, "0 marks an empty lane");
    let mut lanes = decode(f, code);
    let k = lanes.iter().position(|&v| v == fp)?;
    lanes[k] = 0;
    Some(encode(f, lanes))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_rng::SplitMix;

    fn sorted(mut lanes: [u32; 4]) -> [u32; 4] {
        lanes.sort_unstable();
        lanes
    }

    /// Encoding `lanes` (any order): fits, is valid, decodes to the sorted lanes, and equals the
    /// code of the sorted lanes (so every permutation encodes alike).
    fn check_round_trip(f: u32, lanes: [u32; 4]) -> u128 {
        let code = encode(f, lanes);
        assert_eq!(code >> encoded_bits(f), 0, "f={f} {lanes:?} code {code:#x}");
        assert!(is_valid(f, code), "f={f} {lanes:?}");
        assert_eq!(decode(f, code), sorted(lanes), "f={f} {lanes:?}");
        assert_eq!(encode(f, sorted(lanes)), code, "f={f} {lanes:?}");
        code
    }

    /// The queries against a plain model of `lanes` (the bucket `code` encodes).
    fn check_ops(f: u32, lanes: [u32; 4], code: u128, fp: u32) {
        let want_count = lanes.iter().filter(|&&v| v == fp).count() as u32;
        let ctx = format!("f={f} {lanes:?} fp={fp}");
        assert_eq!(contains(f, code, fp), want_count > 0, "contains {ctx}");
        if encoded_bits(f) <= 64 {
            let narrow = contains_narrow(&LowSearch::new(f), code as u64, fp);
            assert_eq!(narrow, want_count > 0, "contains_narrow {ctx}");
        }
        assert_eq!(count(f, code, fp), want_count, "count {ctx}");
        let want_occupied = lanes.iter().filter(|&&v| v != 0).count() as u32;
        assert_eq!(occupied(f, code), want_occupied, "occupied {ctx}");
        // The model's bucket after replacing lane `k` (if any) by `v`, as the result decodes.
        let replaced = |k: Option<usize>, v| {
            k.map(|k| {
                let mut l = lanes;
                l[k] = v;
                sorted(l)
            })
        };
        let empty = lanes.iter().position(|&v| v == 0);
        let inserted = with_inserted(f, code, fp).map(|c| decode(f, c));
        assert_eq!(inserted, replaced(empty, fp), "insert {ctx}");
        let hit = lanes.iter().position(|&v| v == fp);
        let removed = with_removed(f, code, fp).map(|c| decode(f, c));
        assert_eq!(removed, replaced(hit, 0), "remove {ctx}");
    }

    #[test]
    fn empty_bucket_is_code_zero() {
        for f in 4..=32 {
            assert_eq!(encode(f, [0; 4]), 0);
            assert_eq!(decode(f, 0), [0; 4]);
            assert_eq!(occupied(f, 0), 0);
            assert_eq!(encoded_bits(f), 4 * f - 4);
        }
    }

    /// Every multiset of 4 nibbles gets its own index below 3876, and the table unranks it.
    #[test]
    fn nibble_index_is_a_bijection() {
        let mut seen = vec![false; MULTISETS as usize];
        for d in 0..16 {
            for c in 0..=d {
                for b in 0..=c {
                    for a in 0..=b {
                        let r = rank(a, b, c, d) as usize;
                        assert!(!seen[r], "index {r} twice");
                        seen[r] = true;
                        assert_eq!(u32::from(NIBBLES[r]), a | b << 4 | c << 8 | d << 12);
                    }
                }
            }
        }
        assert!(seen.iter().all(|&s| s));
        for index in MULTISETS..1 << INDEX_BITS {
            assert!(!is_valid(8, u128::from(index)), "index {index}");
            assert_eq!(decode(8, u128::from(index)), [0; 4]);
        }
        assert!(!is_valid(8, 1 << encoded_bits(8)));
        assert!(is_valid(8, u128::from(MULTISETS - 1)));
    }

    /// f = 4 and 5: every ordering of every 4 lanes round-trips, and every multiset answers
    /// every query like the model.
    #[test]
    fn exhaustive_small_widths() {
        for f in 4..=5 {
            let n = 1 << f;
            for x in 0..n * n * n * n {
                let lanes = [x % n, x / n % n, x / (n * n) % n, x / (n * n * n)];
                let code = check_round_trip(f, lanes);
                if lanes == sorted(lanes) {
                    for fp in 1..n {
                        check_ops(f, lanes, code, fp);
                    }
                }
            }
        }
    }

    /// Wider widths, random buckets biased to share nibbles or low parts with the query (where a
    /// lookup that trusts one half would go wrong), in random orders.
    #[test]
    fn randomized_wide_widths() {
        let seed = 0x5eed_5e31_u64;
        println!("semi_sorted randomized seed = {seed:#x}");
        let mut rng = SplitMix(seed);
        for f in [6, 8, 13, 16, 17, 20, 21, 24, 31, 32] {
            let max = u32::MAX >> (32 - f);
            let w = f - 4;
            for _ in 0..50_000 {
                let fp = (rng.next() % u64::from(max)) as u32 + 1;
                let mut near = || match rng.next() % 6 {
                    0 => 0,
                    1 => fp,
                    2 => fp ^ (1 + rng.next() as u32 % 15) << w, // same low part
                    3 => fp ^ (rng.next() as u32 & low_mask(f)), // same nibble
                    4 => max,
                    _ => rng.next() as u32 & max,
                };
                let lanes = [near(), near(), near(), near()];
                let code = check_round_trip(f, lanes);
                for query in [fp].into_iter().chain(lanes).filter(|&q| q != 0) {
                    check_ops(f, sorted(lanes), code, query);
                }
            }
        }
    }
}
