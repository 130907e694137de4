//! Parameter arithmetic: table size for a capacity, fingerprint width for a rate, and the
//! expected false-positive rate at a load.

use crate::bucket_layout::{BucketLayout, LayoutKind};
use crate::bucket_word::{MAX_BITS, MIN_BITS};
use crate::hashing::{MAX_BUCKETS, MIN_BUCKETS};

/// One-word fingerprint widths that use their word best: the widest width for each lane count.
/// Narrower widths with the same lane count cost the same memory and give a higher rate.
pub(crate) const EFFICIENT_WIDTHS: [u32; 11] = [4, 5, 6, 7, 8, 9, 10, 12, 16, 21, 32];

/// The load a table is sized for: at the load where its first insert fails, measured for this
/// crate's search (`tests/filter/load_factor.rs` checks it; `BENCHMARKS.md` has the figures),
/// less the spread of that load from table to table, which `buckets_for`'s spare buckets cover.
///
/// One-word layouts keep their earlier sizing (their snapshots promise those capacities). 4-bit
/// fingerprints get more headroom: with only 15 distinct values, a bucket's fingerprints can
/// move to just 15 other buckets. In four-lane buckets that headroom is not enough for a
/// promise: now and then a few buckets fill with items that have nowhere else to go, at loads
/// from 57 % up, more often in larger tables (5 in 20,000 item sets of 20,000 items, 4 in 100
/// of a million), and a larger search or a lower load hardly changes it (a search of 64K
/// buckets, 16 deep, failed on the same items). So 4 bits are sized for their typical load,
/// and `InsertError::Full` documents that they may fall short of it.
pub(crate) fn sizing_load(layout: &BucketLayout) -> f64 {
    match (layout.kind(), layout.slots()) {
        (LayoutKind::OneWord, 16) => 0.90,
        (LayoutKind::OneWord, 12) => 0.94,
        (LayoutKind::OneWord, 5..=10) => 0.95,
        (LayoutKind::OneWord, 4) => 0.93,
        (LayoutKind::OneWord, 3) => 0.89,
        (LayoutKind::OneWord, _) => 0.80,
        // Four lanes, by width. The first failed insert comes at a lower load in a larger
        // table (more inserts, more chances of one unlucky search): with 10-bit fingerprints
        // at 0.969-0.977 with 100,000 and 1M items, 0.971 with 10M and 0.968 with 50M; with
        // 8 bits at 0.959-0.971 (1M), 0.960-0.965 (10M), 0.959 (50M). With 1M and 4M items
        // (100 and 12 tables), 5 bits first failed at 0.902 once and otherwise from 0.909 (its
        // 0.905 stays: snapshots of 5-bit filters record tables sized by it, and no table of
        // 5 bits fell short of its capacity); 6 and 7 bits (40 and 20 tables at 1M, 8 at 4M)
        // from 0.927 and 0.949. 4 bits: a median of 0.88 at 1M, and 4 tables in 100 from 0.60
        // to 0.74 (see above); packed and semi-sorted alike, the search being the same. The sizing load sits under the lowest
        // first failure of the largest tables by about its spread; `buckets_for`'s spare
        // buckets (0.4 % at a million items) add the larger spread of small tables. Narrow
        // fingerprints have few distinct values, so a bucket's fingerprints can move to few
        // other buckets.
        (_, _) => match layout.bits() {
            4 => 0.76,
            5 => 0.905,
            6 => 0.915,
            7 => 0.935,
            8 => 0.95,
            9 => 0.955,
            _ => 0.96,
        },
    }
}

/// Items one bucket of `layout` holds at its sizing load.
pub(crate) fn items_per_bucket(layout: &BucketLayout) -> f64 {
    f64::from(layout.slots()) * sizing_load(layout)
}

/// Probability that a lookup of an absent item matches some stored fingerprint, in a table of
/// `layout` at `load`: each of the `2 * slots * load` occupied lanes it compares against
/// matches with probability `1 / (2^bits - 1)`.
pub(crate) fn expected_false_positive_rate(layout: &BucketLayout, load: f64) -> f64 {
    let lanes = 2.0 * f64::from(layout.slots()) * load.clamp(0.0, 1.0);
    let miss_one = 1.0 - 1.0 / layout.max_fingerprint() as f64;
    1.0 - miss_one.powf(lanes)
}

/// The widths a layout is built with: one-word layouts only the efficient ones, the others every
/// width.
fn widths(kind: LayoutKind) -> impl Iterator<Item = u32> {
    let all = (MIN_BITS..=MAX_BITS).filter(move |_| kind != LayoutKind::OneWord);
    let efficient = EFFICIENT_WIDTHS
        .into_iter()
        .filter(move |_| kind == LayoutKind::OneWord);
    efficient.chain(all)
}

/// The narrowest width of layout `kind` whose rate at the sizing load is at most `rate`: the
/// least memory per item for it (within one layout, memory per item grows with the width).
pub(crate) fn bits_for_rate(kind: LayoutKind, rate: f64) -> Option<u32> {
    widths(kind).find(|&bits| {
        BucketLayout::new(kind, bits)
            .is_some_and(|l| expected_false_positive_rate(&l, sizing_load(&l)) <= rate)
    })
}

/// Buckets needed for `items` items in `layout` (an even number, see `hashing`), or `None` past
/// `MAX_BUCKETS`.
///
/// The load at which the first insert fails varies from table to table by about the inverse
/// square root of the bucket count, so small tables get `2 * sqrt(buckets)` spare buckets (a
/// tenth of a percent at a million buckets).
pub(crate) fn buckets_for(items: usize, layout: &BucketLayout) -> Option<usize> {
    let needed = items as f64 / items_per_bucket(layout);
    let buckets = (needed + 2.0 * needed.sqrt())
        .ceil()
        .max(MIN_BUCKETS as f64);
    let even = buckets + buckets % 2.0;
    (even <= MAX_BUCKETS as f64).then_some(even as usize)
}

/// The most items a table of `buckets` buckets of `layout` is sized for: the inverse of
/// [`buckets_for`], so a table built for `n` items promises at least `n`, and small tables keep
/// their spare buckets as headroom.
pub(crate) fn items_for(buckets: usize, layout: &BucketLayout) -> usize {
    // buckets >= needed + 2 sqrt(needed)  <=>  sqrt(needed) <= sqrt(1 + buckets) - 1.
    let root = (1.0 + buckets as f64).sqrt() - 1.0;
    let mut items = (root * root * items_per_bucket(layout)) as usize;
    // Float rounding may land one off either side of the exact inverse.
    while items > 0 && buckets_for(items, layout).is_none_or(|b| b > buckets) {
        items -= 1;
    }
    while buckets_for(items + 1, layout).is_some_and(|b| b <= buckets) {
        items += 1;
    }
    items
}

/// Fewest lock stripes (unless the table has fewer buckets).
const MIN_STRIPES: usize = 16;
/// Most lock stripes: 64 KiB of stripes, small enough to stay in cache for readers.
const MAX_STRIPES: usize = 4096;
/// Buckets per lock stripe, at least: 16 bytes of stripe per 256 buckets of four lanes (under
/// 0.07 bits per item in a `CuckooFilter`).
const BUCKETS_PER_STRIPE: usize = 256;

/// Lock stripes for a table of `buckets` buckets, for every filter type: a fixed
/// `CuckooFilter`'s table, the largest table a growable one may double into, a RedisBloom
/// sub-filter. A power of two, one per 256 buckets or fewer, within
/// `MIN_STRIPES..=MAX_STRIPES` (one per bucket in a table of fewer than 16). At a million
/// items that is 512 stripes; from 1M buckets (about 4M items) up, 4096. Writers on different
/// stripes never wait for each other; with 2048 or more stripes, two writers meet rarely.
pub(crate) fn stripes_for(buckets: usize) -> usize {
    let by_size = (buckets / BUCKETS_PER_STRIPE).max(1);
    let power_below = 1usize << by_size.ilog2();
    let fewest = if buckets < MIN_STRIPES {
        buckets.next_power_of_two()
    } else {
        MIN_STRIPES
    };
    power_below.clamp(fewest, MAX_STRIPES)
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

    const KINDS: [LayoutKind; 2] = [LayoutKind::OneWord, LayoutKind::Packed];

    fn layout(kind: LayoutKind, bits: u32) -> BucketLayout {
        BucketLayout::new(kind, bits).unwrap()
    }

    #[test]
    fn rate_grows_with_load_and_shrinks_with_width() {
        for kind in KINDS {
            for bits in MIN_BITS..=MAX_BITS {
                let l = layout(kind, bits);
                let low = expected_false_positive_rate(&l, 0.5);
                let high = expected_false_positive_rate(&l, 0.9);
                assert!(low < high, "{kind:?} bits={bits}");
                assert_eq!(expected_false_positive_rate(&l, 0.0), 0.0);
            }
            let widths: Vec<u32> = widths(kind).collect();
            for pair in widths.windows(2) {
                let (narrow, wide) = (layout(kind, pair[0]), layout(kind, pair[1]));
                assert!(
                    expected_false_positive_rate(&wide, 0.9)
                        < expected_false_positive_rate(&narrow, 0.9)
                );
            }
        }
    }

    #[test]
    fn rate_matches_the_small_rate_approximation() {
        // 2 * slots * load / (2^f - 1) for 16-bit fingerprints, 4 lanes, 95 % load.
        let approx = 2.0 * 4.0 * 0.95 / 65535.0;
        for kind in KINDS {
            let exact = expected_false_positive_rate(&layout(kind, 16), 0.95);
            assert!((exact / approx - 1.0).abs() < 1e-3, "{exact} vs {approx}");
        }
    }

    #[test]
    fn bits_for_rate_picks_the_narrowest_width_that_meets_the_rate() {
        for kind in KINDS {
            let at_sizing = |bits| {
                let l = layout(kind, bits);
                expected_false_positive_rate(&l, sizing_load(&l))
            };
            for rate in [0.5, 0.1, 0.03, 0.01, 0.001, 1e-4, 1e-6, 1e-8] {
                let bits = bits_for_rate(kind, rate).unwrap();
                assert!(at_sizing(bits) <= rate);
                for w in widths(kind).filter(|&w| w < bits) {
                    assert!(at_sizing(w) > rate, "{kind:?} {rate} {w}");
                }
            }
            assert_eq!(bits_for_rate(kind, at_sizing(MAX_BITS) / 2.0), None);
        }
        // The packed layout meets 1 % with 10-bit fingerprints, 3 % with 8.
        assert_eq!(bits_for_rate(LayoutKind::Packed, 0.01), Some(10));
        assert_eq!(bits_for_rate(LayoutKind::Packed, 0.03), Some(8));
    }

    #[test]
    fn buckets_for_respects_sizing_load_and_limits() {
        let sixteen = layout(LayoutKind::OneWord, 16);
        let b = buckets_for(3_000_000, &sixteen).unwrap();
        assert!(b as f64 * 4.0 * sizing_load(&sixteen) >= 3_000_000.0);
        assert_eq!(b % 2, 0);
        assert_eq!(buckets_for(1, &sixteen), Some(2));
        assert_eq!(buckets_for(0, &layout(LayoutKind::OneWord, 8)), Some(2));
        assert_eq!(buckets_for(9, &layout(LayoutKind::OneWord, 32)), Some(12));
        assert_eq!(buckets_for(usize::MAX, &sixteen), None);
        assert_eq!(
            buckets_for(usize::MAX / 3, &layout(LayoutKind::OneWord, 32)),
            None
        );
        let packed = layout(LayoutKind::Packed, 10);
        let b = buckets_for(1_000_000, &packed).unwrap();
        assert!(b as f64 * 4.0 * sizing_load(&packed) >= 1_000_000.0);
    }

    #[test]
    fn items_for_inverts_buckets_for() {
        for kind in KINDS {
            for bits in [4, 8, 12, 16, 32] {
                let l = layout(kind, bits);
                for items in (1..2_000).chain([12_345, 1_000_000, 123_456_789]) {
                    let buckets = buckets_for(items, &l).unwrap();
                    let promised = items_for(buckets, &l);
                    assert!(promised >= items, "bits={bits} items={items}: {promised}");
                    assert!(buckets_for(promised, &l).unwrap() <= buckets);
                    assert!(buckets_for(promised + 1, &l).unwrap() > buckets);
                }
            }
        }
    }

    #[test]
    fn stripes_are_a_power_of_two_within_bounds() {
        for buckets in [1usize, 2, 3, 7, 100, 4096, 1 << 20, 1 << 32, usize::MAX] {
            let s = stripes_for(buckets);
            assert!(
                s.is_power_of_two() && (1..=4096).contains(&s),
                "{buckets} -> {s}"
            );
        }
    }

    #[test]
    fn stripes_are_one_per_256_buckets_or_fewer() {
        // Tiny tables: one stripe per bucket (the loom models rely on it), up to 16.
        assert_eq!(stripes_for(4), 4);
        assert_eq!(stripes_for(8), 8);
        assert_eq!(stripes_for(100), 16);
        assert_eq!(stripes_for(16 * 256), 16);
        assert_eq!(stripes_for(512 * 256), 512);
        assert_eq!(stripes_for(512 * 256 + 255), 512);
        assert_eq!(stripes_for(1 << 20), 4096);
        assert_eq!(stripes_for(1 << 30), 4096);
    }
}
