//! Batched operations: the bucket loads of a whole batch of items are issued before any of them
//! is evaluated, so the processor overlaps their cache misses instead of waiting for one item's
//! buckets at a time. Per item, the protocol is exactly that of `lookup` and `insert`.

use super::{Lookup, Table};
use crate::hashing::ItemKey;
use crate::sync::Ordering;

/// Items per batch: enough independent loads in flight to cover the memory latency, few enough
/// that the batch's state (about 3 KiB) stays in L1. Measured at 50M items on a 2-core EPYC:
/// 8 items gave 1.6x the one-at-a-time rate, 16 gave 2.1x, 32 gave 2.5x, 64 gave 2.7x.
pub(crate) const BATCH: usize = 64;

impl Table {
    /// Looks up at most `BATCH` keys; `out[i]` gets the answer for `keys[i]`.
    pub(crate) fn lookup_batch(&self, keys: &[ItemKey], out: &mut [Lookup]) {
        debug_assert!(keys.len() <= BATCH && out.len() == keys.len());
        let mut buckets = [(0usize, 0usize); BATCH];
        let mut begun = [0u64; BATCH];
        let mut words = [(0u64, 0u64); BATCH];
        for (i, &key) in keys.iter().enumerate() {
            buckets[i] = self.buckets_of(key);
        }
        // Phase 1: every load of the batch, none depending on another. Per item the order is
        // the lookup's: stripe version (Acquire), then both words (Acquire).
        for i in 0..keys.len() {
            let (a, b) = buckets[i];
            begun[i] = self.stripes.of(a).read_begin();
            words[i] = (
                self.word(a).load(Ordering::Acquire),
                self.word(b).load(Ordering::Acquire),
            );
        }
        // Phase 2: answers, exactly as `lookup` gives them: a hit needs no validation; a miss
        // is absent if the version is unchanged; an item that collided with a writer falls
        // back to the one-at-a-time lookup (which re-reads and retries).
        for (i, &key) in keys.iter().enumerate() {
            let (a, _) = buckets[i];
            let fp = key.fingerprint;
            let (first, second) = words[i];
            out[i] = if self.layout.holds(first, fp) | self.layout.holds(second, fp) {
                Lookup::Present
            } else if self.stripes.of(a).read_validate(begun[i]) {
                Lookup::Absent
            } else {
                self.lookup(key)
            };
        }
    }

    /// Loads both bucket words of each key (and its stripe) so that the inserts that follow find
    /// them in cache; the values are not used.
    pub(crate) fn touch_batch(&self, keys: &[ItemKey]) {
        let mut sink = 0u64;
        for &key in keys {
            let (a, b) = self.buckets_of(key);
            // Relaxed: only brings the lines into cache; the insert reads them again under lock.
            sink ^= self.word(a).load(Ordering::Relaxed) ^ self.word(b).load(Ordering::Relaxed);
            sink ^= self.stripes.of(a).read_begin();
        }
        std::hint::black_box(sink);
    }
}
