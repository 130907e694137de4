//! Parameter arithmetic: table size for a capacity, fingerprint width for a rate, and the
//! expected false-positive rate at a load.

use crate::bucket_word::WordLayout;
use crate::hashing::{MAX_BUCKETS, MIN_BUCKETS};

/// Fingerprint widths that use their bucket word best: the widest width for each lane count.
/// Narrower widths with the same lane count cost the same memory and give a higher rate.
pub(crate) const EFFICIENT_WIDTHS: [u32; 11] = [4, 5, 6, 7, 8, 9, 10, 12, 16, 21, 32];

/// The load a table of `bits`-wide fingerprints is sized for: safely below the load at which
/// the first insert fails, so that a filter built for `n` items takes all `n`.
///
/// First-failure loads were measured for this crate's search (`tests/load_factor.rs` checks
/// them; the README lists them); the sizing load leaves a few points of headroom under each.
/// 4-bit fingerprints get more headroom: with only 15 distinct values, a bucket's fingerprints
/// can move to just 15 other buckets.
pub(crate) fn sizing_load(bits: u32) -> f64 {
    match 64 / bits {
        16 => 0.90,
        12 => 0.94,
        5..=10 => 0.95,
        4 => 0.93,
        3 => 0.89,
        _ => 0.80,
    }
}

/// Probability that a lookup of an absent item matches some stored fingerprint, for a table of
/// `bits`-wide fingerprints at `load`: each of the `2 * slots * load` occupied lanes it compares
/// against matches with probability `1 / (2^bits - 1)`.
pub(crate) fn expected_false_positive_rate(bits: u32, load: f64) -> f64 {
    let Some(layout) = WordLayout::new(bits) else {
        return 1.0;
    };
    let lanes = 2.0 * f64::from(layout.slots()) * load.clamp(0.0, 1.0);
    let miss_one = 1.0 - 1.0 / layout.max_fingerprint() as f64;
    1.0 - miss_one.powf(lanes)
}

/// The narrowest efficient width whose rate at the sizing load is at most `rate`.
pub(crate) fn bits_for_rate(rate: f64) -> Option<u32> {
    EFFICIENT_WIDTHS
        .into_iter()
        .find(|&bits| expected_false_positive_rate(bits, sizing_load(bits)) <= rate)
}

/// Buckets needed for `items` items of `bits`-wide fingerprints (an even number, see
/// `hashing`), or `None` past `MAX_BUCKETS`.
///
/// The load at which the first insert fails varies from table to table by about the inverse
/// square root of the bucket count, so small tables get `2 * sqrt(buckets)` spare buckets (a
/// tenth of a percent at a million buckets).
pub(crate) fn buckets_for(items: usize, bits: u32) -> Option<usize> {
    let per_bucket = f64::from(64 / bits) * sizing_load(bits);
    let needed = items as f64 / per_bucket;
    let buckets = (needed + 2.0 * needed.sqrt())
        .ceil()
        .max(MIN_BUCKETS as f64);
    let even = buckets + buckets % 2.0;
    (even <= MAX_BUCKETS as f64).then_some(even as usize)
}

/// The most items a table of `buckets` buckets of `bits`-wide fingerprints is sized for: the
/// inverse of [`buckets_for`], so a table built for `n` items promises at least `n`, and small
/// tables keep their spare buckets as headroom.
pub(crate) fn items_for(buckets: usize, bits: u32) -> usize {
    let per_bucket = f64::from(64 / bits) * sizing_load(bits);
    // buckets >= needed + 2 sqrt(needed)  <=>  sqrt(needed) <= sqrt(1 + buckets) - 1.
    let root = (1.0 + buckets as f64).sqrt() - 1.0;
    let mut items = (root * root * per_bucket) as usize;
    // Float rounding may land one off either side of the exact inverse.
    while items > 0 && buckets_for(items, bits).is_none_or(|b| b > buckets) {
        items -= 1;
    }
    while buckets_for(items + 1, bits).is_some_and(|b| b <= buckets) {
        items += 1;
    }
    items
}

/// Buckets that hold `items` items of `bits`-wide fingerprints at exactly the sizing load (an
/// even number), without the spare buckets of [`buckets_for`]; `None` past `MAX_BUCKETS`.
pub(crate) fn buckets_at_sizing_load(items: usize, bits: u32) -> Option<usize> {
    let per_bucket = f64::from(64 / bits) * sizing_load(bits);
    let buckets = (items as f64 / per_bucket).ceil().max(MIN_BUCKETS as f64);
    let even = buckets + buckets % 2.0;
    (even <= MAX_BUCKETS as f64).then_some(even as usize)
}

/// Fewest lock stripes (unless the table has fewer buckets).
const MIN_STRIPES: usize = 16;
/// Most lock stripes: 64 KiB of stripes, small enough to stay in cache for readers.
const MAX_STRIPES: usize = 4096;

/// Lock stripes for a table: a power of two, one per 128 buckets or fewer (so that they cost at
/// most 1/64 of the table's memory), within `MIN_STRIPES..=MAX_STRIPES`. Writers on different
/// stripes never wait for each other; with 2048 or more stripes, two writers meet rarely.
pub(crate) fn stripes_for(buckets: usize) -> usize {
    let by_size = (buckets / 128).max(1);
    let power_below = 1usize << by_size.ilog2();
    power_below.clamp(MIN_STRIPES.min(buckets.next_power_of_two()), MAX_STRIPES)
}

/// The default false-positive rate target.
pub(crate) const DEFAULT_FALSE_POSITIVE_RATE: f64 = 0.01;

/// Whether `rate` is a usable false-positive rate target.
pub(crate) fn rate_is_valid(rate: f64) -> bool {
    rate.is_finite() && rate > 0.0 && rate < 1.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket_word::MAX_BITS;

    #[test]
    fn rate_grows_with_load_and_shrinks_with_width() {
        for bits in 4..=MAX_BITS {
            let low = expected_false_positive_rate(bits, 0.5);
            let high = expected_false_positive_rate(bits, 0.9);
            assert!(low < high, "bits={bits}");
            assert_eq!(expected_false_positive_rate(bits, 0.0), 0.0);
        }
        for pair in EFFICIENT_WIDTHS.windows(2) {
            let (narrow, wide) = (pair[0], pair[1]);
            assert!(
                expected_false_positive_rate(wide, 0.9) < expected_false_positive_rate(narrow, 0.9)
            );
        }
    }

    #[test]
    fn rate_matches_the_small_rate_approximation() {
        // 2 * slots * load / (2^f - 1) for 16-bit fingerprints, 4 lanes, 95 % load.
        let approx = 2.0 * 4.0 * 0.95 / 65535.0;
        let exact = expected_false_positive_rate(16, 0.95);
        assert!((exact / approx - 1.0).abs() < 1e-3, "{exact} vs {approx}");
    }

    #[test]
    fn bits_for_rate_picks_the_narrowest_width_that_meets_the_rate() {
        for rate in [0.5, 0.1, 0.03, 0.01, 0.001, 1e-4, 1e-6, 1e-9] {
            let bits = bits_for_rate(rate).unwrap();
            assert!(expected_false_positive_rate(bits, sizing_load(bits)) <= rate);
            let narrower = EFFICIENT_WIDTHS.iter().filter(|&&w| w < bits);
            for &w in narrower {
                assert!(expected_false_positive_rate(w, sizing_load(w)) > rate);
            }
        }
        let lowest = expected_false_positive_rate(MAX_BITS, sizing_load(MAX_BITS));
        assert_eq!(bits_for_rate(lowest / 2.0), None);
    }

    #[test]
    fn buckets_for_respects_sizing_load_and_limits() {
        let b = buckets_for(3_000_000, 16).unwrap();
        assert!(b as f64 * 4.0 * sizing_load(16) >= 3_000_000.0);
        assert_eq!(b % 2, 0);
        assert_eq!(buckets_for(1, 16), Some(2));
        assert_eq!(buckets_for(0, 8), Some(2));
        assert_eq!(buckets_for(9, 32), Some(12));
        assert_eq!(buckets_for(usize::MAX, 16), None);
        assert_eq!(buckets_for(usize::MAX / 3, 32), None);
    }

    #[test]
    fn items_for_inverts_buckets_for() {
        for bits in [4, 8, 12, 16, 32] {
            for items in (1..2_000).chain([12_345, 1_000_000, 123_456_789]) {
                let buckets = buckets_for(items, bits).unwrap();
                let promised = items_for(buckets, bits);
                assert!(promised >= items, "bits={bits} items={items}: {promised}");
                assert!(buckets_for(promised, bits).unwrap() <= buckets);
                assert!(buckets_for(promised + 1, bits).unwrap() > buckets);
            }
        }
    }

    #[test]
    fn stripes_are_a_power_of_two_within_bounds() {
        for buckets in [1usize, 2, 3, 7, 100, 4096, 1 << 20, 1 << 32] {
            let s = stripes_for(buckets);
            assert!(
                s.is_power_of_two() && (1..=4096).contains(&s),
                "{buckets} -> {s}"
            );
        }
    }
}
