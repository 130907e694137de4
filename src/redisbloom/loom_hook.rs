//! Test-only access to [`RedisCuckooFilter`]'s internals for the loom models (compiled only
//! with `--cfg loom`; `crate::loom_hook` turns these into the models' functions). A child of
//! `filter`, so that it reaches the filter's private parts without widening them.

use super::RedisCuckooFilter;
use crate::optimistic_read::Lookup;
use crate::redisbloom::hash::ItemHash;
use crate::redisbloom::params::{Geometry, DEFAULT_MAX_EXPANSIONS};
use crate::redisbloom::sub_filter::{Slot, SubFilter};
use crate::sync::Ordering;

impl RedisCuckooFilter {
    /// A filter of `sub_filters` live sub-filters, each of `buckets` buckets (expansion 1) of
    /// `bucket_size` slots, whose kick walks give up after `max_iterations` kicks.
    pub(crate) fn loom_tiny(
        buckets: u64,
        bucket_size: u16,
        sub_filters: usize,
        max_iterations: u16,
    ) -> Self {
        let geometry = Geometry {
            buckets,
            bucket_size,
            expansion: 1,
            max_iterations,
        };
        let subs = (0..sub_filters)
            .map(|_| SubFilter::new(buckets, bucket_size).expect("a tiny sub-filter"))
            .collect();
        Self::with_subs(geometry, DEFAULT_MAX_EXPANSIONS, subs, 0)
    }

    /// The fingerprint of `item`, and its two buckets in sub-filter `sub`.
    pub(crate) fn loom_key(&self, sub: usize, item: &[u8]) -> (u8, (usize, usize)) {
        let h = ItemHash::of(item);
        (h.fp, self.sub(sub).pair(&h))
    }

    /// Stores `fp` in the lowest free slot of `bucket` in sub-filter `sub` (counted as one
    /// item); false when the bucket is full.
    pub(crate) fn loom_place(&self, sub: usize, bucket: usize, fp: u8) -> bool {
        let sub = self.sub(sub);
        let guard = sub.lock_buckets(&[bucket]);
        // Relaxed: the stripe is held.
        let Some(slot) = sub.find(bucket, 0, Ordering::Relaxed) else {
            return false;
        };
        sub.write_slot(Slot { bucket, slot }, 0, fp);
        guard.add_items(bucket, 1);
        true
    }

    /// Copies of `fp` in `bucket` of sub-filter `sub` (set, live or dropped).
    pub(crate) fn loom_copies_in(&self, sub: usize, bucket: usize, fp: u8) -> usize {
        let sub = self
            .subs
            .get(sub)
            .expect("the model's sub-filters are all set");
        // Acquire: models count after joining every thread; any order would do then.
        sub.count_in(bucket, fp, Ordering::Acquire)
    }

    /// The full outcome of `contains(item)`, and the answer of each sub-filter it asked, in
    /// the order asked: the probes (a miss recorded as `Absent`), then, when every probe
    /// missed, the proofs (`lookup_observed`, the lookup `contains` runs).
    pub(crate) fn loom_lookup(&self, item: &[u8]) -> (Lookup, Vec<Lookup>) {
        let h = ItemHash::of(item);
        let mut asked = Vec::new();
        let answer = self.lookup_observed(&h, |answer| asked.push(answer));
        (answer, asked)
    }
}
