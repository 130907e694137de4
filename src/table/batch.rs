//! Batched operations: the bucket loads of a whole batch of lookups are issued before any of them
//! is evaluated, so the processor overlaps their cache misses instead of waiting for one item's
//! buckets at a time; inserts prefetch their buckets a few items ahead instead (a locked
//! instruction would wait for earlier loads, not for prefetches). Per item, the protocol is
//! exactly that of `lookup` and `insert`.

use super::{is_one_part, Table, GENERAL, SORTED64, STRADDLING, WITHIN, WORD};
use crate::bucket_layout::{Access, Bucket};
use crate::hashing::ItemKey;
use crate::optimistic_read::Lookup;
use crate::sync::Ordering;

/// Items per batch: enough independent loads in flight to cover the memory latency, few enough
/// that the batch's state (about 3 KiB) stays in L1 (measured in BENCHMARKS.md, "Constants
/// chosen by measurement").
pub(crate) const BATCH: usize = 64;

/// How many items ahead `insert_many` prefetches buckets: fewer than about 8 leave round trips
/// uncovered; many more evict lines before their insert (measured in BENCHMARKS.md, "Constants
/// chosen by measurement").
pub(crate) const PREFETCH_AHEAD: usize = 12;

impl Table {
    /// Looks up at most `BATCH` keys; `out[i]` gets the answer for `keys[i]`.
    pub(crate) fn lookup_batch(&self, keys: &[ItemKey], out: &mut [Lookup]) {
        // Branch on the layout's access once a batch, as `lookup_traced` does once a lookup.
        match self.layout.access() {
            Access::Word => self.lookup_batch_as::<WORD>(keys, out),
            Access::Within => self.lookup_batch_as::<WITHIN>(keys, out),
            Access::Straddling => self.lookup_batch_as::<STRADDLING>(keys, out),
            Access::Sorted64 => self.lookup_batch_as::<SORTED64>(keys, out),
            Access::General => self.lookup_batch_as::<GENERAL>(keys, out),
        }
    }

    /// `lookup_batch` for a table whose layout's access is `A`.
    fn lookup_batch_as<const A: u8>(&self, keys: &[ItemKey], out: &mut [Lookup]) {
        debug_assert!(keys.len() <= BATCH && out.len() == keys.len());
        let mut buckets = [(0usize, 0usize); BATCH];
        let mut begun = [0u64; BATCH];
        let mut words = [(Bucket::default(), Bucket::default()); BATCH];
        for (i, &key) in keys.iter().enumerate() {
            buckets[i] = self.buckets_of(key);
            // Prefetches first: they do not hold the load queue while they wait, so the misses
            // of the whole batch overlap even where each bucket takes two loads below.
            self.prefetch_bucket(buckets[i].0);
            self.prefetch_bucket(buckets[i].1);
        }
        // Phase 1: every load of the batch, none depending on another. Per item the order is
        // the lookup's: stripe version (Acquire), then both words (Acquire), unmasked (only
        // lane tests read them, see `probe_from`).
        for i in 0..keys.len() {
            let (a, b) = buckets[i];
            begun[i] = self.read_begin(a, b);
            words[i] = (
                self.probe_as::<A>(a, Ordering::Acquire),
                self.probe_as::<A>(b, Ordering::Acquire),
            );
        }
        // Phase 2: answers, exactly as `lookup` gives them: a hit needs no validation; a miss
        // is absent if the version is unchanged; an item that collided with a writer falls
        // back to the one-at-a-time lookup (which re-reads and retries).
        for (i, &key) in keys.iter().enumerate() {
            let (a, b) = buckets[i];
            let fp = key.fingerprint;
            let (first, second) = &words[i];
            out[i] = if self.holds_as::<A>(first, fp) | self.holds_as::<A>(second, fp) {
                Lookup::Present
            } else if self.read_validate(a, b, begun[i]) {
                Lookup::Absent
            } else {
                self.lookup(key)
            };
        }
    }

    /// Inserts `keys` in order, each through `locked(i)` (the caller's insert of `keys[i]`),
    /// asking for the buckets of the key `PREFETCH_AHEAD` places later before each. When
    /// `claiming` (multiset inserts) in a table whose inserts claim lanes (see `claim_as`),
    /// the batch announces one claim for all the keys that find a lane they may claim, and only
    /// the others go to `locked`, with the claim ended first, since a locked insert may wait
    /// for a freeze, which waits for claims. Stops at the first key that `locked` fails, with
    /// its index.
    pub(crate) fn insert_batch<E>(
        &self,
        keys: &[ItemKey],
        claiming: bool,
        locked: impl FnMut(usize) -> Result<(), E>,
    ) -> Result<(), (usize, E)> {
        match self.layout.access() {
            Access::Word => self.insert_batch_as::<WORD, E>(keys, claiming, locked),
            Access::Within => self.insert_batch_as::<WITHIN, E>(keys, claiming, locked),
            Access::Straddling => self.insert_batch_as::<STRADDLING, E>(keys, claiming, locked),
            Access::Sorted64 => self.insert_batch_as::<SORTED64, E>(keys, claiming, locked),
            Access::General => self.insert_batch_as::<GENERAL, E>(keys, claiming, locked),
        }
    }

    /// `insert_batch` for a table whose layout's access is `A`.
    fn insert_batch_as<const A: u8, E>(
        &self,
        keys: &[ItemKey],
        claiming: bool,
        mut locked: impl FnMut(usize) -> Result<(), E>,
    ) -> Result<(), (usize, E)> {
        // The first keys' buckets are asked for at once; then each insert asks for those of the
        // key `PREFETCH_AHEAD` places later, so their round trips overlap the inserts between.
        for &key in keys.iter().take(PREFETCH_AHEAD) {
            self.prefetch(key);
        }
        let mut claim = None;
        for (i, &key) in keys.iter().enumerate() {
            if let Some(&ahead) = keys.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            if is_one_part(A) && claiming {
                let (a, b) = self.buckets_of(key);
                if claim.is_none() {
                    claim = self.stripes.claim(a);
                }
                if let Some(claim) = claim.as_mut() {
                    if self.claim_with::<A>(a, b, key.fingerprint, claim) {
                        continue;
                    }
                }
                claim = None;
            }
            locked(i).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// Asks for both bucket words of `key` without waiting for them (see
    /// `storage::prefetch`), so that its insert, a few items later, finds them in cache.
    #[inline]
    pub(crate) fn prefetch(&self, key: ItemKey) {
        let (a, b) = self.buckets_of(key);
        self.prefetch_bucket(a);
        self.prefetch_bucket(b);
    }
}
