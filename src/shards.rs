//! Per-thread shards of a stripe set: the items its writers stored, and the busy counts by which
//! inserts that take no stripe (claims) announce themselves to a freeze.
//!
//! **Counts.** Every write that stores or takes away an item counts it in its thread's shard
//! (threads take shards in turn, as a growable filter's counters do), so writers on different
//! threads write cache lines of their own instead of one shared counter or the stripes' lines.
//! A remove may be counted in another shard than its insert: shards wrap, and only their sum
//! means anything.
//!
//! **Claims.** An insert into a free lane of a plain (packed or one-word) table is one
//! compare-and-swap on the lane's word, with no stripe taken (see `Table::claim_as`); a lane
//! across two words is written under its bucket's one stripe. A
//! whole-filter operation must still see one moment, so it has to keep such inserts out as the
//! stripes keep writers out. Each claiming insert first adds 1 to its shard's busy count, then
//! checks the freeze's gate; a freeze closes the gate, then waits until every shard's busy
//! count is 0, all with sequentially consistent accesses (`Gate::announce`; under loom, the
//! equivalent `SeqCst` fences). Whichever comes first in their single total order, one side
//! sees the other (Dekker's mutual exclusion):
//! - the insert's add first: the freeze's loads of the shards see its busy count (or what
//!   followed it), so the freeze waits for the insert, whose Release end it then reads: the
//!   copy sees the lane it claimed and the item it counted;
//! - the freeze's close first: the insert sees the gate closed, takes its count back, having
//!   written nothing else, and waits for the gate to open.
//!
//! A shard word holds the busy count in its low 16 bits and the item count above them.

use crate::sync::{AtomicU64, Gate, Ordering, SpinWait};

/// Shards at most: one per writing thread up to sixteen (threads take them in turn).
#[cfg(not(loom))]
pub(crate) const SHARDS: usize = 16;
/// Under loom, fewer (each is a modelled object).
#[cfg(loom)]
pub(crate) const SHARDS: usize = 2;

/// One item in a shard word: the busy count lives in the bits below.
const ITEM: u64 = 1 << 16;
/// The busy count's bits.
const BUSY: u64 = ITEM - 1;

/// Bytes of bucket words per shard: a table gets one shard per 16 KiB of words (rounded down to
/// a power of two), at least one and at most `SHARDS`. Shards then take at most 1/128 of the
/// table's memory (about as much as the stripes' counters they replace), and eight threads
/// have a shard each from about 100,000 items on (sixteen from about 200,000); in a smaller
/// table writers share fewer, as they share its sixteen stripes.
const WORD_BYTES_PER_SHARD: usize = 16 << 10;

/// One shard: two cache lines of its own (128 bytes, as crossbeam pads: processors that fetch
/// lines in adjacent pairs would otherwise move a neighbour's shard with ours), so that
/// threads with different shards never write one line or one pair.
#[repr(align(128))]
struct Shard(AtomicU64);

/// The shards of one stripe set.
pub(crate) struct Shards {
    shards: Box<[Shard]>,
}

impl Shards {
    /// Shards for a table whose bucket words take `word_bytes` (see `WORD_BYTES_PER_SHARD`).
    pub(crate) fn for_words(word_bytes: usize) -> Self {
        // A power of two, so that a thread's shard is a mask away (a division cost more than
        // the rest of a claim's bookkeeping).
        let shards = 1 << (word_bytes / WORD_BYTES_PER_SHARD).clamp(1, SHARDS).ilog2();
        Shards {
            shards: (0..shards).map(|_| Shard(AtomicU64::new(0))).collect(),
        }
    }

    /// The shard word of a writer whose key is `key`: its thread's shard, except under loom,
    /// where a thread-local assignment would carry over from one interleaving to the next and
    /// the caller's key (a bucket or a stripe) chooses instead.
    #[inline]
    fn shard(&self, key: usize) -> &AtomicU64 {
        #[cfg(not(loom))]
        let index = {
            let _ = key;
            writer_shard()
        };
        #[cfg(loom)]
        let index = key;
        &self.shards[index & (self.shards.len() - 1)].0
    }

    /// Counts `delta` items (+1 stored, -1 taken away) for a writer whose key is `key`.
    #[inline]
    pub(crate) fn add_items(&self, key: usize, delta: i64) {
        // Relaxed: independent counters, summed exactly only while no writer runs (whose
        // freeze orders them: a writer counts while it holds its stripes, or inside a claim).
        self.shard(key)
            .fetch_add((delta as u64).wrapping_mul(ITEM), Ordering::Relaxed);
    }

    /// Announces a claim (an insert that takes no stripe) for a writer whose key is `key`;
    /// `None`, having taken the announcement back, while `gate` (the table's freeze) is closed.
    #[inline]
    pub(crate) fn enter<'a>(&'a self, gate: &Gate, key: usize) -> Option<Claim<'a>> {
        let count = self.shard(key);
        if cfg!(loom_mutant = "claim_ignores_freeze") {
            // Relaxed: the mutant's announcement, made without the handshake.
            count.fetch_add(1, Ordering::Relaxed);
        } else if gate.announce(count) {
            // Relaxed: nothing was written under the announcement.
            count.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Claim { count, stored: 0 })
    }

    /// Waits until no claim is in flight, after the caller closed `gate`, the one `enter`
    /// checks: afterwards none starts until the gate opens, and every lane and item counted by
    /// those that ran is visible to the caller.
    pub(crate) fn wait_idle(&self, gate: &Gate) {
        for Shard(count) in self.shards.iter() {
            let wait = SpinWait::new();
            // `announced` reads with Acquire: each claim that was in flight ends with a Release
            // add, so its lane and its count are visible to the caller once we read that.
            while gate.announced(count) & BUSY != 0 {
                wait.wait();
            }
        }
    }

    /// Items counted, summed over the shards, as a two's complement value (a sum that is
    /// "negative" for a moment, from racing removes of items never inserted, stays so).
    pub(crate) fn items(&self) -> u64 {
        let sum = self.shards.iter().fold(0u64, |sum, Shard(count)| {
            // Relaxed: a sum of independent counters, exact only while no writer runs.
            sum.wrapping_add(count.load(Ordering::Relaxed) >> BUSY.count_ones())
        });
        // The counts are 48-bit: sign-extend their sum.
        ((sum << BUSY.count_ones()) as i64 >> BUSY.count_ones()) as u64
    }

    /// Sets the item count to `items` (in the first shard, the others to 0), while no writer
    /// can run (a freeze or exclusive access). Busy counts stay: a claim that found the gate
    /// closed may be taking its announcement back.
    pub(crate) fn set_items(&self, items: u64) {
        for (i, Shard(count)) in self.shards.iter().enumerate() {
            let value = if i == 0 { items.wrapping_mul(ITEM) } else { 0 };
            // Relaxed: no writer counts meanwhile (see above); later ones are ordered after us
            // by the gate's opening or the end of the exclusive borrow.
            let _ = count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                Some(value | (word & BUSY))
            });
        }
    }

    /// Bytes the shards take.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.shards)
    }
}

/// A claim in flight (see `Shards::enter`), for one insert or a batch of them; ends, counting
/// the items they stored, when dropped.
pub(crate) struct Claim<'a> {
    count: &'a AtomicU64,
    stored: u64,
}

impl Claim<'_> {
    /// An insert under this claim stored its item: count it when the claim ends.
    pub(crate) fn stored(&mut self) {
        self.stored += 1;
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        // The items, and the busy count taken back.
        let change = self.stored.wrapping_mul(ITEM).wrapping_sub(1);
        // Release: a freeze that reads this (in `wait_idle`) sees the lane we claimed.
        self.count.fetch_add(change, Ordering::Release);
    }
}

/// This thread's shard among `SHARDS`: threads take shards in turn as they first write.
#[cfg(not(loom))]
#[inline]
pub(crate) fn writer_shard() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::thread_local! {
        // A const initializer: reading it is one thread-local load, with no lazy-init check.
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD.with(|shard| {
        let mut index = shard.get();
        if index == usize::MAX {
            // Relaxed: any spread of threads over shards is correct; round robin is the aim.
            index = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SHARDS;
            shard.set(index);
        }
        index
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn items_sum_over_shards_whatever_the_busy_counts() {
        let shards = Shards::for_words(16 * WORD_BYTES_PER_SHARD);
        let gate = Gate::new();
        for stored in 0..3 {
            let mut claim = shards.enter(&gate, 0).expect("the gate is open");
            for _ in 0..stored {
                claim.stored();
            }
        }
        let pending = shards.enter(&gate, 0).expect("the gate is open");
        assert_eq!(shards.items(), 3);
        // A remove counted in another shard than the inserts: "negative" there.
        shards.shards[(writer_shard() + 1) % SHARDS]
            .0
            .fetch_sub(ITEM, Ordering::Relaxed);
        assert_eq!(shards.items(), 2);
        drop(pending);
        assert_eq!(shards.items(), 2);
        assert!(shards
            .shards
            .iter()
            .all(|s| s.0.load(Ordering::Relaxed) & BUSY == 0));
        shards.set_items(7);
        assert_eq!(shards.items(), 7);
    }

    #[test]
    fn a_closed_gate_refuses_a_claim_and_leaves_no_busy_count() {
        let shards = Shards::for_words(0);
        let gate = Gate::new();
        gate.close();
        assert!(shards.enter(&gate, 1).is_none());
        assert_eq!(shards.shards[0].0.load(Ordering::Relaxed), 0);
        // Nothing in flight: returns at once.
        shards.wait_idle(&gate);
        gate.open();
        assert!(shards.enter(&gate, 1).is_some());
    }

    #[test]
    fn shards_follow_the_table_size() {
        assert_eq!(Shards::for_words(0).shards.len(), 1);
        assert_eq!(Shards::for_words(3 * WORD_BYTES_PER_SHARD).shards.len(), 2);
        assert_eq!(Shards::for_words(8 * WORD_BYTES_PER_SHARD).shards.len(), 8);
        assert_eq!(Shards::for_words(1 << 40).shards.len(), SHARDS);
    }
}
