//! The sizes of a growable `CuckooFilter` in the units its tests reason in.

#![allow(dead_code)]

use atomic_cuckoo::CuckooFilter;

/// Buckets and lane width of a growable filter, from its public accessors.
pub trait GrowableSizes {
    /// Buckets of the table: `slots()` are four lanes a bucket.
    fn buckets(&self) -> u64;
    /// Bits a lane: `fingerprint_bits()` is a lane less its marker bit.
    fn lane_bits(&self) -> u32;
}

impl<S> GrowableSizes for CuckooFilter<S> {
    fn buckets(&self) -> u64 {
        debug_assert!(self.is_growable());
        self.slots() as u64 / 4
    }
    fn lane_bits(&self) -> u32 {
        debug_assert!(self.is_growable());
        self.fingerprint_bits() + 1
    }
}
