//! A growable table's counters: items, lanes in use and entries by tail length, in shards
//! that writers change while they hold a stripe, and an estimate of the lanes in use that an
//! insert can read without touching every shard.
//!
//! A writer counts into its own thread's shard (under loom, its stripe's), so writers on
//! different threads rarely share a counter's cache line. A freeze waits for every stripe, so
//! it sees every shard settled. Shards wrap: a remove may be counted in another shard than its
//! insert, and only the sums mean anything.
//!
//! The estimate is the sum over shards of each shard's lanes in use rounded down to a multiple
//! of `FLUSH`: the add that crosses a multiple adds or takes `FLUSH` from it, so the lanes in
//! use are the estimate plus less than `FLUSH` per shard. An insert checks the load limit
//! against the estimate and sums the shards only when the limit is that close.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

// Counter shards: one per writer thread up to sixteen (threads take them in turn, as for
// lock-free inserts), so that sixteen writers share no counter's cache line (6 KiB in all).
use crate::shards::SHARDS;

/// The granularity of the estimate of lanes in use.
const FLUSH: i64 = 64;

/// One shard.
#[derive(Default)]
struct Shard {
    /// Items stored (inserts less removes).
    items: AtomicU64,
    /// Lanes in use: items plus the extra copies of entries that ran out of tail bits.
    occupied: AtomicU64,
    /// Lanes in use by tail length, for the rate estimate.
    by_tail: [AtomicU64; 32],
}

/// The sums of every shard, read while writers are held back (or approximately, while they
/// run).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Totals {
    pub items: u64,
    pub occupied: u64,
    pub by_tail: [u64; 32],
}

/// Every counter of a filter.
pub(super) struct Counts {
    shards: Box<[CachePadded<Shard>]>,
    /// Lanes in use, rounded down per shard to a multiple of `FLUSH` (see the module docs).
    estimate: CachePadded<AtomicU64>,
}

impl Counts {
    /// Counters holding `totals` (all in the first shard).
    pub(crate) fn new(totals: &Totals) -> Self {
        let counts = Counts {
            shards: (0..SHARDS).map(|_| CachePadded::default()).collect(),
            estimate: CachePadded::default(),
        };
        counts.reset(totals);
        counts
    }

    /// The shard of a writer that holds stripe `stripe`.
    #[inline]
    pub(crate) fn shard_for(&self, stripe: usize) -> usize {
        #[cfg(not(loom))]
        {
            let _ = stripe;
            crate::shards::writer_shard()
        }
        // Under loom, the same shard in every interleaving (a thread-local assignment would
        // carry over from one to the next).
        #[cfg(loom)]
        {
            stripe % SHARDS
        }
    }

    /// Adds `items` items, and `lanes` lanes in use (`±1`) holding entries of `tail` bits, to
    /// shard `shard`. The caller holds a stripe.
    #[inline]
    pub(crate) fn add(&self, shard: usize, items: i64, lanes: i64, tail: u32) {
        debug_assert!(lanes.abs() == 1);
        let shard = &self.shards[shard];
        // Relaxed: independent counters, summed exactly only while writers are held back
        // (whose freeze orders them), approximately otherwise.
        shard.items.fetch_add(items as u64, Ordering::Relaxed);
        shard.by_tail[tail as usize].fetch_add(lanes as u64, Ordering::Relaxed);
        let before = shard.occupied.fetch_add(lanes as u64, Ordering::Relaxed) as i64;
        let after = before.wrapping_add(lanes);
        let crossed = after.div_euclid(FLUSH) - before.div_euclid(FLUSH);
        if crossed != 0 {
            // Relaxed: an estimate; a freeze sets it exactly.
            let step = (crossed * FLUSH) as u64;
            self.estimate.fetch_add(step, Ordering::Relaxed);
        }
    }

    /// Whether the lanes in use are at least `limit`: from the estimate when that is far
    /// enough below, else from every shard. Exact while no writer runs.
    #[inline]
    pub(crate) fn occupied_at_least(&self, limit: u64) -> bool {
        // Relaxed: a load-limit check, approximate while writers run.
        let estimate = self.estimate.load(Ordering::Relaxed) as i64;
        let slack = SHARDS as i64 * FLUSH;
        if estimate.saturating_add(slack) < limit as i64 {
            return false;
        }
        self.occupied() >= limit
    }

    /// Lanes in use, summed over the shards (exact while no writer runs).
    pub(crate) fn occupied(&self) -> u64 {
        self.shards.iter().fold(0u64, |sum, shard| {
            // Relaxed: approximate while writers run.
            sum.wrapping_add(shard.occupied.load(Ordering::Relaxed))
        })
    }

    /// Items, summed over the shards ("negative" sums, from removes of items never inserted,
    /// read as 0).
    pub(crate) fn items(&self) -> usize {
        let items = self.shards.iter().fold(0u64, |sum, shard| {
            // Relaxed: statistics, exact once writers are done.
            sum.wrapping_add(shard.items.load(Ordering::Relaxed))
        });
        (items as i64).max(0) as usize
    }

    /// Every counter, summed over the shards.
    pub(crate) fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for shard in self.shards.iter() {
            // Relaxed: statistics, exact once writers are done.
            let load = |count: &AtomicU64| count.load(Ordering::Relaxed);
            totals.items = totals.items.wrapping_add(load(&shard.items));
            totals.occupied = totals.occupied.wrapping_add(load(&shard.occupied));
            for (sum, count) in totals.by_tail.iter_mut().zip(&shard.by_tail) {
                *sum = sum.wrapping_add(load(count));
            }
        }
        totals
    }

    /// Sets the counters to `totals` (in the first shard). Only while no writer runs (the
    /// caller's exclusive access or freeze).
    pub(crate) fn reset(&self, totals: &Totals) {
        for (i, shard) in self.shards.iter().enumerate() {
            let value = |total: u64| if i == 0 { total } else { 0 };
            // Relaxed: no writer runs (see above).
            shard.items.store(value(totals.items), Ordering::Relaxed);
            shard
                .occupied
                .store(value(totals.occupied), Ordering::Relaxed);
            for (count, &total) in shard.by_tail.iter().zip(&totals.by_tail) {
                count.store(value(total), Ordering::Relaxed);
            }
        }
        self.settle_estimate();
    }

    /// Counts every entry as split by a doubling just begun: each loses a tail bit, and one
    /// with none left becomes two (lanes included). No entry has more than `tail_bits` tail
    /// bits, so the counts above stay zero. Only while no writer runs (a freeze).
    pub(crate) fn split_all(&self, tail_bits: u32) {
        for shard in self.shards.iter() {
            // Relaxed: no writer runs (the freeze).
            let tails = &shard.by_tail[..=tail_bits as usize];
            let old: Vec<u64> = tails.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            let exhausted = old[0];
            for (tail, count) in tails.iter().enumerate() {
                let mut shifted = old.get(tail + 1).copied().unwrap_or(0);
                if tail == 0 {
                    shifted = shifted.wrapping_add(exhausted.wrapping_mul(2));
                }
                count.store(shifted, Ordering::Relaxed);
            }
            let occupied = shard.occupied.load(Ordering::Relaxed);
            let occupied = occupied.wrapping_add(exhausted);
            shard.occupied.store(occupied, Ordering::Relaxed);
        }
        self.settle_estimate();
    }

    /// Sets the estimate from the shards, while no writer runs.
    fn settle_estimate(&self) {
        let estimate = self.shards.iter().fold(0i64, |sum, shard| {
            // Relaxed: no writer runs (see the callers).
            let occupied = shard.occupied.load(Ordering::Relaxed) as i64;
            sum.wrapping_add(occupied.div_euclid(FLUSH) * FLUSH)
        });
        // Relaxed: as above; writers that follow are ordered after us by the freeze's end or
        // the end of the exclusive borrow.
        self.estimate.store(estimate as u64, Ordering::Relaxed);
    }

    /// Bytes the counters take.
    pub(crate) fn bytes(&self) -> usize {
        self.shards.len() * std::mem::size_of::<CachePadded<Shard>>()
            + std::mem::size_of::<CachePadded<AtomicU64>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_below_the_lanes_in_use_by_less_than_a_flush_per_shard() {
        let counts = Counts::new(&Totals::default());
        let mut exact = 0i64;
        let mut x = 7u64;
        for step in 0..20_000 {
            x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(step);
            let shard = (x >> 40) as usize % SHARDS;
            // Mostly inserts, some removes (also below zero in a shard: shards wrap).
            let lanes = if (x >> 20).is_multiple_of(3) { -1 } else { 1 };
            counts.add(shard, lanes, lanes, 3);
            exact += lanes;
            let estimate = counts.estimate.load(Ordering::Relaxed) as i64;
            assert!(estimate <= exact, "step {step}: {estimate} > {exact}");
            assert!(exact - estimate < SHARDS as i64 * FLUSH, "step {step}");
            assert_eq!(counts.occupied() as i64, exact);
            for limit in [exact - 1, exact, exact + 1] {
                if limit >= 0 {
                    let limit = limit as u64;
                    assert_eq!(counts.occupied_at_least(limit), exact as u64 >= limit);
                }
            }
        }
    }

    #[test]
    fn split_all_shifts_the_tails_and_copies_the_exhausted() {
        let mut totals = Totals {
            items: 10,
            occupied: 10,
            ..Totals::default()
        };
        totals.by_tail[0] = 3;
        totals.by_tail[1] = 2;
        totals.by_tail[4] = 5;
        let counts = Counts::new(&totals);
        counts.split_all(4);
        let after = counts.totals();
        assert_eq!(after.items, 10);
        assert_eq!(after.occupied, 13, "three exhausted entries copied");
        assert_eq!(&after.by_tail[..5], &[2 + 6, 0, 0, 5, 0]);
    }
}
