//! Configuring and building a filter.

use std::fmt;
use std::hash::BuildHasher;

use crate::bucket_word::{MAX_BITS, MIN_BITS};
use crate::error::BuildError;
use crate::filter::CuckooFilter;
use crate::hashing::DefaultHashBuilder;
use crate::params;
use crate::table::{Limits, Table, TableShape};

/// Capacity of a builder that was not given one.
pub const DEFAULT_CAPACITY: usize = 1_000_000;

/// Configures a [`CuckooFilter`]: capacity, false-positive rate or fingerprint width, hasher.
///
/// Every setting has a default: [`DEFAULT_CAPACITY`] items, a false-positive rate of 1 %, and
/// [`DefaultHashBuilder`]. Settings are checked by [`Builder::build`], which returns a
/// [`BuildError`] for any value it cannot honour instead of panicking.
///
/// ```
/// use atomic_cuckoo::CuckooFilter;
///
/// let filter = CuckooFilter::builder()
///     .capacity(100_000)
///     .false_positive_rate(0.001)
///     .build()?;
/// assert!(filter.capacity() >= 100_000);
/// assert!(filter.false_positive_rate() == 0.0); // empty: no false positives yet
/// # Ok::<(), atomic_cuckoo::BuildError>(())
/// ```
#[derive(Clone)]
pub struct Builder<S = DefaultHashBuilder> {
    capacity: usize,
    rate: Option<f64>,
    bits: Option<u32>,
    hasher: S,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            capacity: DEFAULT_CAPACITY,
            rate: None,
            bits: None,
            hasher: DefaultHashBuilder::default(),
        }
    }
}

impl<S> fmt::Debug for Builder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("capacity", &self.capacity)
            .field("false_positive_rate", &self.rate)
            .field("fingerprint_bits", &self.bits)
            .finish_non_exhaustive()
    }
}

impl<S> Builder<S> {
    /// Number of items the filter must hold. The table is sized so that this many distinct
    /// items fit with room to spare (see the README's parameter table); `0` is an error.
    pub fn capacity(mut self, items: usize) -> Self {
        self.capacity = items;
        self
    }

    /// Target false-positive rate when the filter is full, strictly between 0 and 1. The builder
    /// picks the narrowest fingerprint width that meets it. Ignored when
    /// [`fingerprint_bits`](Builder::fingerprint_bits) is also set (but still validated).
    pub fn false_positive_rate(mut self, rate: f64) -> Self {
        self.rate = Some(rate);
        self
    }

    /// Explicit fingerprint width, `4..=32` bits; a bucket holds `64 / bits` fingerprints.
    pub fn fingerprint_bits(mut self, bits: u32) -> Self {
        self.bits = Some(bits);
        self
    }

    /// The hasher for items. Any `BuildHasher` works; it must be the same one (same seeds)
    /// wherever the filter's contents are interpreted.
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> Builder<S2> {
        Builder {
            capacity: self.capacity,
            rate: self.rate,
            bits: self.bits,
            hasher,
        }
    }

    /// Builds the filter, or says which setting cannot be honoured.
    pub fn build(self) -> Result<CuckooFilter<S>, BuildError> {
        let shape = self.shape()?;
        let table = Table::new(shape, Limits::DEFAULT)
            .map_err(|e| BuildError::AllocationFailed { bytes: e.bytes })?;
        Ok(CuckooFilter::from_parts(table, self.hasher))
    }

    /// Validates the settings and derives the table's shape.
    fn shape(&self) -> Result<TableShape, BuildError> {
        if let Some(bits) = self.bits {
            if !(MIN_BITS..=MAX_BITS).contains(&bits) {
                return Err(BuildError::InvalidFingerprintBits { bits });
            }
        }
        if let Some(rate) = self.rate {
            if !params::rate_is_valid(rate) {
                return Err(BuildError::InvalidFalsePositiveRate { rate });
            }
        }
        if self.capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let rate = self.rate.unwrap_or(params::DEFAULT_FALSE_POSITIVE_RATE);
        let bits = match self.bits {
            Some(bits) => bits,
            None => params::bits_for_rate(rate)
                .ok_or(BuildError::UnreachableFalsePositiveRate { rate })?,
        };
        let buckets =
            params::buckets_for(self.capacity, bits).ok_or(BuildError::CapacityTooLarge {
                items: self.capacity,
            })?;
        Ok(TableShape {
            buckets,
            bits,
            stripes: params::stripes_for(buckets),
        })
    }
}
