//! `CF.RESERVE`'s parameter ranges (Redis 8), its creation arithmetic, and the sub-filter
//! geometry that follows from them.

use super::error::ReserveError;

/// Largest capacity `CF.RESERVE` accepts (Redis 8).
pub(crate) const MAX_CAPACITY: u64 = 1 << 30;
/// Largest bucket size (slots per bucket).
pub(crate) const MAX_BUCKET_SIZE: u64 = 255;
/// Largest maximum number of kicks.
pub(crate) const MAX_MAX_ITERATIONS: u64 = 65535;
/// Largest expansion factor (before rounding; it is a power of two already).
pub(crate) const MAX_EXPANSION: u64 = 32768;
/// Largest `cf-max-expansions`.
pub(crate) const MAX_MAX_EXPANSIONS: u64 = 65536;

/// Capacity of a filter that `CF.ADD` creates.
pub(crate) const DEFAULT_CAPACITY: u64 = 1024;
/// Default bucket size.
pub(crate) const DEFAULT_BUCKET_SIZE: u16 = 2;
/// Default maximum number of kicks.
pub(crate) const DEFAULT_MAX_ITERATIONS: u16 = 20;
/// Default expansion factor.
pub(crate) const DEFAULT_EXPANSION: u16 = 1;
/// Default `cf-max-expansions`: inserts fail once a filter has this many sub-filters.
pub(crate) const DEFAULT_MAX_EXPANSIONS: u32 = 32;

/// RedisBloom's `next_pow2`: the smallest power of two `>= n`, computed with wrapping `u64`
/// arithmetic, so 0 gives 0 and anything above 2^63 gives 0.
pub(crate) fn next_pow2_u64(n: u64) -> u64 {
    let mut n = n.wrapping_sub(1);
    n |= n >> 1;
    n |= n >> 2;
    n |= n >> 4;
    n |= n >> 8;
    n |= n >> 16;
    n |= n >> 32;
    n.wrapping_add(1)
}

/// Sub-filter 0's bucket count for a capacity: `next_pow2(capacity / bucket_size)`, at least 1
/// (integer division first, as Redis does).
pub(crate) fn num_buckets(capacity: u64, bucket_size: u16) -> u64 {
    next_pow2_u64(capacity / u64::from(bucket_size.max(1))).max(1)
}

/// `CF.INFO`'s `Size`: 40 bytes for the filter, 16 per sub-filter, and the sub-filters' bytes.
pub(crate) fn info_size(sub_filter_bytes: impl IntoIterator<Item = u64>) -> u64 {
    sub_filter_bytes.into_iter().fold(40u64, |size, bytes| {
        size.saturating_add(16).saturating_add(bytes)
    })
}

/// Checks `cf-max-expansions` (`1..=65536`, default 32).
pub(crate) fn max_expansions(value: u64) -> Result<u32, ReserveError> {
    match value {
        1..=MAX_MAX_EXPANSIONS => Ok(value as u32),
        _ => Err(ReserveError::MaxExpansions {
            max_expansions: value,
        }),
    }
}

/// The shape of a filter: sub-filter `i` has `buckets * expansion^i` buckets of `bucket_size`
/// one-byte slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Buckets of sub-filter 0 (a power of two).
    pub(crate) buckets: u64,
    /// Slots per bucket, `1..=255`.
    pub(crate) bucket_size: u16,
    /// Growth factor of each new sub-filter, rounded up to a power of two; 0: no growth.
    pub(crate) expansion: u16,
    /// Kicks before an insert gives up on the newest sub-filter, `1..=65535`.
    pub(crate) max_iterations: u16,
}

impl Geometry {
    /// What `CF.ADD` creates for a missing key: capacity 1024, bucket size 2 (512 buckets),
    /// 20 iterations, expansion 1.
    #[cfg(test)]
    pub(crate) const AUTO_CREATE: Geometry = Geometry {
        buckets: 512,
        bucket_size: DEFAULT_BUCKET_SIZE,
        expansion: DEFAULT_EXPANSION,
        max_iterations: DEFAULT_MAX_ITERATIONS,
    };

    /// The geometry `CF.RESERVE key capacity BUCKETSIZE b MAXITERATIONS m EXPANSION e`
    /// creates, or the first parameter out of Redis 8's range (bucket size, iterations and
    /// expansion are checked before the capacity, whose lower bound depends on the bucket size).
    pub(crate) fn reserve(
        capacity: u64,
        bucket_size: u64,
        max_iterations: u64,
        expansion: u64,
    ) -> Result<Geometry, ReserveError> {
        if !(1..=MAX_BUCKET_SIZE).contains(&bucket_size) {
            return Err(ReserveError::BucketSize { bucket_size });
        }
        if !(1..=MAX_MAX_ITERATIONS).contains(&max_iterations) {
            return Err(ReserveError::MaxIterations { max_iterations });
        }
        if expansion > MAX_EXPANSION {
            return Err(ReserveError::Expansion { expansion });
        }
        let min = 2 * bucket_size;
        if capacity < min {
            return Err(ReserveError::CapacityTooSmall { capacity, min });
        }
        if capacity > MAX_CAPACITY {
            return Err(ReserveError::CapacityTooLarge { capacity });
        }
        // The casts are exact: every value was checked to fit 16 bits (32768 rounds to itself).
        let bucket_size = bucket_size as u16;
        Ok(Geometry {
            buckets: num_buckets(capacity, bucket_size),
            bucket_size,
            expansion: next_pow2_u64(expansion) as u16,
            max_iterations: max_iterations as u16,
        })
    }

    /// Buckets of sub-filter `index`: `buckets * expansion^index`, or `None` if that overflows
    /// or the sub-filter cannot exist (with expansion 0, only sub-filter 0 does).
    pub(crate) fn sub_buckets(&self, index: u16) -> Option<u64> {
        if self.expansion == 0 {
            return (index == 0).then_some(self.buckets);
        }
        let growth = u64::from(self.expansion).checked_pow(u32::from(index))?;
        self.buckets.checked_mul(growth)
    }

    /// Bytes of sub-filter `index` (its buckets times the bucket size), or `None` as for
    /// [`sub_buckets`](Self::sub_buckets).
    pub(crate) fn sub_bytes(&self, index: u16) -> Option<u64> {
        self.sub_buckets(index)?
            .checked_mul(u64::from(self.bucket_size))
    }

    /// Bytes of the first `filters` sub-filters together, or `None` if it overflows.
    pub(crate) fn total_bytes(&self, filters: u16) -> Option<u64> {
        (0..filters).try_fold(0u64, |sum, i| sum.checked_add(self.sub_bytes(i)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_pow2_matches_the_spec() {
        let cases = [
            (0, 0),
            (1, 1),
            (2, 2),
            (3, 4),
            (5, 8),
            (32767, 32768),
            (32768, 32768),
            (1 << 63, 1 << 63),
            ((1 << 63) + 1, 0),
            (u64::MAX, 0),
        ];
        for (n, want) in cases {
            assert_eq!(next_pow2_u64(n), want, "next_pow2({n})");
        }
    }

    /// The `CF.DEBUG` observations of spec §4.
    #[test]
    fn reserve_matches_redis_examples() {
        let g = Geometry::reserve(1000, 2, 20, 1).unwrap();
        assert_eq!((g.buckets, g.expansion), (512, 1));
        let g = Geometry::reserve(1025, 4, 20, 3).unwrap();
        assert_eq!((g.buckets, g.expansion), (256, 4));
        let g = Geometry::reserve(100, 3, 20, 1).unwrap();
        assert_eq!(g.buckets, 64);
        let g = Geometry::reserve(7, 2, 20, 5).unwrap();
        assert_eq!((g.buckets, g.expansion), (4, 8));
        // CF.INSERT CAPACITY 100 with the default bucket size.
        assert_eq!(num_buckets(100, DEFAULT_BUCKET_SIZE), 64);
    }

    #[test]
    fn auto_create_is_reserve_with_the_defaults() {
        let g = Geometry::reserve(
            DEFAULT_CAPACITY,
            DEFAULT_BUCKET_SIZE.into(),
            DEFAULT_MAX_ITERATIONS.into(),
            DEFAULT_EXPANSION.into(),
        );
        assert_eq!(g, Ok(Geometry::AUTO_CREATE));
    }

    #[test]
    fn expansion_rounds_up_to_a_power_of_two() {
        for (given, rounded) in [(0, 0), (1, 1), (2, 2), (3, 4), (1000, 1024), (32768, 32768)] {
            let g = Geometry::reserve(1024, 2, 20, given).unwrap();
            assert_eq!(g.expansion, rounded, "EXPANSION {given}");
        }
    }

    #[test]
    fn reserve_rejects_each_range_at_its_edges() {
        use ReserveError::*;
        assert_eq!(
            Geometry::reserve(100, 0, 20, 1),
            Err(BucketSize { bucket_size: 0 })
        );
        assert_eq!(
            Geometry::reserve(1000, 256, 20, 1),
            Err(BucketSize { bucket_size: 256 })
        );
        assert!(Geometry::reserve(1000, 255, 20, 1).is_ok());
        assert_eq!(
            Geometry::reserve(100, 2, 0, 1),
            Err(MaxIterations { max_iterations: 0 })
        );
        assert_eq!(
            Geometry::reserve(100, 2, 65536, 1),
            Err(MaxIterations {
                max_iterations: 65536
            })
        );
        assert!(Geometry::reserve(100, 2, 65535, 1).is_ok());
        assert_eq!(
            Geometry::reserve(100, 2, 20, 32769),
            Err(Expansion { expansion: 32769 })
        );
        assert_eq!(
            Geometry::reserve(5, 3, 20, 1),
            Err(CapacityTooSmall {
                capacity: 5,
                min: 6
            })
        );
        assert!(Geometry::reserve(6, 3, 20, 1).is_ok());
        assert_eq!(
            Geometry::reserve(MAX_CAPACITY + 1, 2, 20, 1),
            Err(CapacityTooLarge {
                capacity: MAX_CAPACITY + 1
            })
        );
        let g = Geometry::reserve(MAX_CAPACITY, 1, 20, 1).unwrap();
        assert_eq!(g.buckets, 1 << 30);
    }

    #[test]
    fn reserve_error_texts_are_redis_8s() {
        let text = |r: Result<Geometry, ReserveError>| r.unwrap_err().to_string();
        assert_eq!(
            text(Geometry::reserve(100, 256, 20, 1)),
            "BUCKETSIZE: value must be in the range [1, 255]"
        );
        assert_eq!(
            text(Geometry::reserve(100, 2, 0, 1)),
            "MAXITERATIONS: value must be in the range [1, 65535]"
        );
        assert_eq!(
            text(Geometry::reserve(100, 2, 20, 40000)),
            "EXPANSION: value must be in the range [0, 32768]"
        );
        for capacity in [1, 1 << 31] {
            assert_eq!(
                text(Geometry::reserve(capacity, 2, 20, 1)),
                "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"
            );
        }
    }

    #[test]
    fn max_expansions_range() {
        assert_eq!(max_expansions(1), Ok(1));
        assert_eq!(max_expansions(65536), Ok(65536));
        assert_eq!(
            max_expansions(0),
            Err(ReserveError::MaxExpansions { max_expansions: 0 })
        );
        assert!(max_expansions(65537).is_err());
    }

    #[test]
    fn sub_filter_sizes_grow_by_the_expansion() {
        let g = Geometry {
            buckets: 4,
            bucket_size: 3,
            expansion: 2,
            max_iterations: 20,
        };
        assert_eq!(g.sub_buckets(0), Some(4));
        assert_eq!(g.sub_buckets(3), Some(32));
        assert_eq!(g.sub_bytes(3), Some(96));
        assert_eq!(g.total_bytes(3), Some(12 + 24 + 48));
        assert_eq!(g.sub_buckets(61), Some(1 << 63));
        assert_eq!(g.sub_buckets(62), None);
        assert_eq!(g.sub_bytes(61), None);
        assert_eq!(g.total_bytes(61), None);
        let one = Geometry { expansion: 1, ..g };
        assert_eq!(one.sub_buckets(65535), Some(4));
        assert_eq!(one.total_bytes(100), Some(1200));
    }

    #[test]
    fn expansion_zero_has_only_sub_filter_zero() {
        let g = Geometry {
            buckets: 8,
            bucket_size: 2,
            expansion: 0,
            max_iterations: 20,
        };
        assert_eq!(g.sub_buckets(0), Some(8));
        assert_eq!(g.sub_buckets(1), None);
        assert_eq!(g.sub_bytes(1), None);
        assert_eq!(g.total_bytes(1), Some(16));
        assert_eq!(g.total_bytes(2), None);
    }

    /// Spec §7.3: 100 for three 4-byte sub-filters, 760 for forty 2-byte ones.
    #[test]
    fn info_size_matches_redis() {
        assert_eq!(info_size([4, 4, 4]), 100);
        assert_eq!(info_size(std::iter::repeat_n(2, 40)), 760);
        assert_eq!(info_size([]), 40);
    }
}
