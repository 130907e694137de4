//! The 38-byte header of `CF.SCANDUMP` / `CF.LOADCHUNK` (packed, little-endian), and the
//! checks a header must pass before sub-filters are allocated for it.

use super::error::LoadError;
use super::params::{Geometry, MAX_BUCKET_SIZE};

/// Length of the packed header.
pub(crate) const HEADER_LEN: usize = 38;

/// Redis's limit on sub-filter 0's bucket count.
const MAX_BUCKETS: u64 = (1 << 56) - 1;

/// Largest total of sub-filter bytes accepted: 1 TiB. Redis accepts larger headers but cannot
/// allocate them (a key of this size is beyond any server's memory), and the cap keeps stream
/// offsets, iterators and `CF.INFO`'s size far from overflowing. A 32-bit target is capped
/// lower, at what one allocation can hold.
pub(crate) const MAX_TOTAL_BYTES: u64 = {
    let cap = 1u64 << 40;
    if (isize::MAX as u64) < cap {
        isize::MAX as u64
    } else {
        cap
    }
};

/// The SCANDUMP header, field for field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// Items inserted minus items deleted.
    pub(crate) items: u64,
    /// Buckets of sub-filter 0.
    pub(crate) buckets: u64,
    /// Deletes since the last compaction.
    pub(crate) deletes: u64,
    /// Sub-filters: a `u64` field that Redis truncates to 16 bits on load.
    pub(crate) filters: u64,
    /// Slots per bucket.
    pub(crate) bucket_size: u16,
    /// Maximum kicks.
    pub(crate) max_iterations: u16,
    /// Growth factor (the rounded value).
    pub(crate) expansion: u16,
}

impl Header {
    /// The packed little-endian bytes, as `CF.SCANDUMP key 0` returns them.
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&self.items.to_le_bytes());
        out[8..16].copy_from_slice(&self.buckets.to_le_bytes());
        out[16..24].copy_from_slice(&self.deletes.to_le_bytes());
        out[24..32].copy_from_slice(&self.filters.to_le_bytes());
        out[32..34].copy_from_slice(&self.bucket_size.to_le_bytes());
        out[34..36].copy_from_slice(&self.max_iterations.to_le_bytes());
        out[36..38].copy_from_slice(&self.expansion.to_le_bytes());
        out
    }

    /// Reads a header chunk; it must be exactly 38 bytes (Redis: `Invalid header`). The fields
    /// are not checked: see [`validate`](Self::validate).
    pub(crate) fn decode(bytes: &[u8]) -> Result<Header, LoadError> {
        let bytes: &[u8; HEADER_LEN] = bytes
            .try_into()
            .map_err(|_| LoadError::HeaderLength { len: bytes.len() })?;
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        Ok(Header {
            items: u64_at(0),
            buckets: u64_at(8),
            deletes: u64_at(16),
            filters: u64_at(24),
            bucket_size: u16_at(32),
            max_iterations: u16_at(34),
            expansion: u16_at(36),
        })
    }

    /// The geometry and sub-filter count of a header that describes a filter this crate can
    /// hold byte for byte.
    ///
    /// Rejects what Redis's `CuckooFilter_ValidateIntegrity` rejects (bucket size outside
    /// `1..=255`; bucket count 0, not a power of two, or above 2^56 − 1; sub-filter count 0 or
    /// above 65535; maximum iterations 0; expansion 0 with several sub-filters), and also what
    /// Redis accepts although the filter is then corrupt or crashes the server:
    ///
    /// - expansion not a power of two (the sub-filters' alternate buckets stop pairing up);
    /// - a sub-filter count whose upper 48 bits are set (Redis 8's range check lets 65536
    ///   through, which truncates to 0 sub-filters; larger values are rejected everywhere);
    /// - sub-filters whose sizes overflow `u64` or total more than [`MAX_TOTAL_BYTES`].
    ///
    /// The item and delete counters are not checked here: only the data can confirm the item
    /// count.
    pub(crate) fn validate(&self) -> Result<(Geometry, u16), LoadError> {
        if self.bucket_size == 0 || u64::from(self.bucket_size) > MAX_BUCKET_SIZE {
            return Err(LoadError::BucketSize {
                bucket_size: self.bucket_size,
            });
        }
        if !self.buckets.is_power_of_two() {
            return Err(LoadError::BucketsNotPowerOfTwo {
                buckets: self.buckets,
            });
        }
        if self.buckets > MAX_BUCKETS {
            return Err(LoadError::TooManyBuckets {
                buckets: self.buckets,
            });
        }
        let filters = match u16::try_from(self.filters) {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(LoadError::FilterCount {
                    filters: self.filters,
                })
            }
        };
        if self.max_iterations == 0 {
            return Err(LoadError::ZeroMaxIterations);
        }
        if self.expansion == 0 && filters > 1 {
            return Err(LoadError::ZeroExpansionWithSubFilters { filters });
        }
        if self.expansion != 0 && !self.expansion.is_power_of_two() {
            return Err(LoadError::ExpansionNotPowerOfTwo {
                expansion: self.expansion,
            });
        }
        let geometry = Geometry {
            buckets: self.buckets,
            bucket_size: self.bucket_size,
            expansion: self.expansion,
            max_iterations: self.max_iterations,
        };
        let bytes = geometry.total_bytes(filters).unwrap_or(u64::MAX);
        if bytes > MAX_TOTAL_BYTES {
            return Err(LoadError::TooLarge { bytes });
        }
        // RedisBloom computes byte offsets in 32 bits, so a sub-filter past 4 GiB is one it
        // would index wrongly; the newest is the largest.
        let largest = geometry.sub_bytes(filters - 1).unwrap_or(u64::MAX);
        if largest > u64::from(u32::MAX) {
            return Err(LoadError::SubFilterTooLarge { bytes: largest });
        }
        Ok((geometry, filters))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec §7.1's example: 8 items, 4 buckets, 0 deletes, 3 filters, bs 1, maxIter 20, exp 1.
    fn example() -> Header {
        crate::redisbloom::testkit::worked_example().header
    }

    #[test]
    fn encodes_the_spec_example() {
        let mut want = Vec::new();
        for word in [8u64, 4, 0, 3] {
            want.extend_from_slice(&word.to_le_bytes());
        }
        want.extend_from_slice(&[0x01, 0x00, 0x14, 0x00, 0x01, 0x00]);
        assert_eq!(example().encode().as_slice(), want.as_slice());
        assert_eq!(Header::decode(&want), Ok(example()));
    }

    #[test]
    fn field_offsets_are_packed_little_endian() {
        let h = Header {
            items: 0x0102_0304_0506_0708,
            buckets: 1 << 40,
            deletes: 0xdead_beef,
            filters: 0xffff,
            bucket_size: 0x00ff,
            max_iterations: 0xabcd,
            expansion: 0x8000,
        };
        let bytes = h.encode();
        assert_eq!(bytes[0], 0x08);
        assert_eq!(bytes[13], 0x01);
        assert_eq!(&bytes[16..20], &[0xef, 0xbe, 0xad, 0xde]);
        assert_eq!(&bytes[24..26], &[0xff, 0xff]);
        assert_eq!(&bytes[32..38], &[0xff, 0x00, 0xcd, 0xab, 0x00, 0x80]);
        assert_eq!(Header::decode(&bytes), Ok(h));
    }

    #[test]
    fn decode_needs_exactly_38_bytes() {
        let bytes = example().encode();
        assert_eq!(
            Header::decode(&bytes[..37]),
            Err(LoadError::HeaderLength { len: 37 })
        );
        let mut long = bytes.to_vec();
        long.push(0);
        assert_eq!(
            Header::decode(&long),
            Err(LoadError::HeaderLength { len: 39 })
        );
        assert_eq!(Header::decode(&[]), Err(LoadError::HeaderLength { len: 0 }));
    }

    #[test]
    fn the_example_validates() {
        let (g, filters) = example().validate().unwrap();
        assert_eq!(filters, 3);
        assert_eq!(
            g,
            Geometry {
                buckets: 4,
                bucket_size: 1,
                expansion: 1,
                max_iterations: 20
            }
        );
    }

    /// Spec §7.3's list of headers Redis answers with `Couldn't create filter!`.
    #[test]
    fn rejects_what_redis_rejects() {
        let e = example();
        let cases = [
            (
                Header { buckets: 6, ..e },
                LoadError::BucketsNotPowerOfTwo { buckets: 6 },
            ),
            (
                Header { buckets: 0, ..e },
                LoadError::BucketsNotPowerOfTwo { buckets: 0 },
            ),
            (
                Header {
                    buckets: 1 << 56,
                    ..e
                },
                LoadError::TooManyBuckets { buckets: 1 << 56 },
            ),
            (
                Header {
                    bucket_size: 0,
                    ..e
                },
                LoadError::BucketSize { bucket_size: 0 },
            ),
            (
                Header {
                    bucket_size: 256,
                    ..e
                },
                LoadError::BucketSize { bucket_size: 256 },
            ),
            (
                Header { filters: 0, ..e },
                LoadError::FilterCount { filters: 0 },
            ),
            (
                Header {
                    filters: 65536,
                    ..e
                },
                LoadError::FilterCount { filters: 65536 },
            ),
            (
                Header {
                    filters: 1 << 48 | 3,
                    ..e
                },
                LoadError::FilterCount {
                    filters: 1 << 48 | 3,
                },
            ),
            (
                Header {
                    max_iterations: 0,
                    ..e
                },
                LoadError::ZeroMaxIterations,
            ),
            (
                Header {
                    expansion: 0,
                    filters: 2,
                    ..e
                },
                LoadError::ZeroExpansionWithSubFilters { filters: 2 },
            ),
        ];
        for (header, want) in cases {
            assert_eq!(header.validate(), Err(want), "{header:?}");
        }
    }

    /// Accepted by Redis, but corrupt (§7.3: expansion 3 gives sizes 4 and 12) or too large.
    #[test]
    fn rejects_what_redis_accepts_but_cannot_use() {
        let e = example();
        assert_eq!(
            Header { expansion: 3, ..e }.validate(),
            Err(LoadError::ExpansionNotPowerOfTwo { expansion: 3 })
        );
        assert_eq!(
            Header {
                expansion: 32768,
                filters: 10,
                ..e
            }
            .validate(),
            Err(LoadError::TooLarge { bytes: u64::MAX })
        );
        // 2^40 bytes exactly is the largest accepted; one sub-filter more is not.
        let at_cap = Header {
            buckets: 1 << 31,
            filters: 512,
            ..e
        };
        assert!(at_cap.validate().is_ok());
        assert_eq!(
            Header {
                filters: 513,
                ..at_cap
            }
            .validate(),
            Err(LoadError::TooLarge { bytes: 513 << 31 })
        );
        // A sub-filter past 4 GiB (RedisBloom's offsets wrap there), even alone.
        assert_eq!(
            Header {
                buckets: 1 << 32,
                filters: 1,
                ..e
            }
            .validate(),
            Err(LoadError::SubFilterTooLarge { bytes: 1 << 32 })
        );
        assert_eq!(
            Header {
                buckets: 1 << 55,
                ..e
            }
            .validate(),
            Err(LoadError::TooLarge { bytes: 3 << 55 })
        );
    }

    #[test]
    fn accepts_the_edges_redis_accepts() {
        let e = example();
        for header in [
            Header {
                expansion: 0,
                filters: 1,
                ..e
            },
            Header {
                bucket_size: 255,
                ..e
            },
            Header {
                max_iterations: u16::MAX,
                ..e
            },
            Header {
                filters: 65535,
                ..e
            },
            Header { buckets: 1, ..e },
            Header {
                expansion: 32768,
                filters: 2,
                ..e
            },
            // Counters are not the header's to check.
            Header {
                items: u64::MAX,
                deletes: u64::MAX,
                ..e
            },
        ] {
            assert!(header.validate().is_ok(), "{header:?}");
        }
    }
}
