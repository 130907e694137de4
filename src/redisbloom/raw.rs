//! [`RawFilter`]: a filter image read from Redis, checked to be one this crate can hold.

use super::error::LoadError;
use super::header::Header;
use super::params::Geometry;

/// A RedisBloom filter's header and sub-filter bytes, as assembled from `CF.SCANDUMP` chunks
/// or decoded from a `DUMP` payload.
///
/// Invariants: the header validates to `geometry`; there are `header.filters` sub-filters;
/// sub-filter `i` is `geometry.sub_bytes(i)` bytes long; `header.items` is the number of
/// non-zero slots. The fingerprints' placement is not checked (Redis never checks it either,
/// and answers lookups from the bytes as they are).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawFilter {
    /// The counters and geometry as Redis stores them.
    pub(crate) header: Header,
    /// The header's geometry.
    pub(crate) geometry: Geometry,
    /// Slot bytes of each sub-filter, oldest first (bucket-major, 0 = empty).
    pub(crate) filters: Vec<Vec<u8>>,
}

impl RawFilter {
    /// Wraps sub-filters already checked against the geometry, after checking that the header's
    /// item count is the number of occupied slots.
    pub(crate) fn with_counted_items(
        header: Header,
        geometry: Geometry,
        filters: Vec<Vec<u8>>,
    ) -> Result<RawFilter, LoadError> {
        debug_assert!(filters
            .iter()
            .enumerate()
            .all(|(i, f)| Some(f.len() as u64) == geometry.sub_bytes(i as u16)));
        let stored = occupied_slots(&filters);
        if stored != header.items {
            return Err(LoadError::ItemCount {
                header: header.items,
                stored,
            });
        }
        Ok(RawFilter {
            header,
            geometry,
            filters,
        })
    }

    /// The sub-filters as slices, as the encoders take them.
    #[cfg(test)]
    pub(crate) fn filter_slices(&self) -> Vec<&[u8]> {
        self.filters.iter().map(Vec::as_slice).collect()
    }
}

/// Non-zero slots in all sub-filters.
pub(crate) fn occupied_slots(filters: &[Vec<u8>]) -> u64 {
    filters
        .iter()
        .map(|f| f.iter().filter(|&&slot| slot != 0).count() as u64)
        .sum()
}
