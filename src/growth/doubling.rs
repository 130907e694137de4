//! A doubling spread over the inserts after it: the new buckets are added at once, and old
//! buckets are split in order (claimed by inserts, split sixteen at a time under one pair of
//! stripes) or when an operation is about to touch them.
//!
//! Concurrency. A doubling is begun under the grow lock, with every writer held back for a
//! moment (a freeze of the stripes): it adds the segment and a bitmap with a bit set per old
//! bucket, shifts the counters, and publishes the new count (Release). A split takes the
//! stripes of both halves, moves the entries, and clears the bucket's bit (Release) before it
//! lets them go. A lookup that reads a bit set reads the old bucket under the old bucket's
//! stripe, which the split holds while it clears the bit; one that reads it clear reads the
//! new bucket under its stripe (see `Doubling::lookup`). Every writer splits the
//! buckets it is about to touch, locks, and checks under its stripes that the count did not
//! change.

use super::keys::{low_mask, Key, Pos};
use super::table::words_for;
use super::Doubling;
use crate::error::InsertError;
use crate::freeze;
use crate::sync::Ordering;
use crate::table::BucketWords;

/// Old buckets in a run: inserts claim old buckets (`SPLITS_PER_INSERT`, `RUN_CLAIMS_FROM`),
/// and a claim splits what is left of each run it reaches. Sixteen are the old buckets whose upper
/// halves form one stripe group (`Table::stripe_key`), so most runs take one lock of one pair
/// of stripes.
pub(super) const SPLIT_RUN: u64 = 16;

/// Old buckets of an unfinished doubling that an insert claims to split, in a table of fewer
/// than `RUN_CLAIMS_FROM` old buckets. A doubling has as many buckets to split as the table
/// had, and the next doubling comes at least 3.8 inserts per bucket later, so two per insert
/// finish it in the first eighth of that time.
const SPLITS_PER_INSERT: u64 = 2;

/// Old buckets from which inserts claim whole runs instead: one insert in eight (chosen by
/// its item, `Key::claims_run`) claims a run of sixteen, two buckets an insert on average.
/// The counter of claims is shared by every writer, and each claim moves its cache line
/// between cores, so a claim per eight inserts rather than per insert. The claims of a
/// doubling of `4096 · 2^j` old buckets take about `2048 · 2^j` inserts, with a standard
/// deviation of at most `128 · 2^(j/2)`; the next doubling comes at least `15,564 · 2^j`
/// inserts later, over a hundred deviations on. Smaller tables keep the exact pace.
const RUN_CLAIMS_FROM: u64 = 4096;

/// One insert in this many claims a run of old buckets (from `RUN_CLAIMS_FROM` on).
const CLAIM_ONE_IN: u64 = SPLIT_RUN / SPLITS_PER_INSERT;

/// Inserts in a row on one thread that claimed nothing, after which the next claims a run
/// anyway: items that repeat (the same few inserted and removed over and over, or items
/// chosen not to claim) still end a doubling, within 16 inserts per old bucket. Distinct
/// items never reach it: 256 in a row none of which claims come once in 10^15.
#[cfg(not(loom))]
const UNCLAIMED_LIMIT: u32 = 256;

/// Whether this insert claims a run: if its item does (`claims`), or if this thread's
/// inserts have claimed nothing `UNCLAIMED_LIMIT` times in a row (counted per thread, for
/// any filter: only a pace). Under loom, the item alone (a thread-local count would carry
/// over from one interleaving to the next).
fn claims_or_overdue(claims: bool) -> bool {
    #[cfg(not(loom))]
    {
        use std::cell::Cell;
        thread_local! {
            static UNCLAIMED: Cell<u32> = const { Cell::new(0) };
        }
        UNCLAIMED.with(|unclaimed| {
            let overdue = !claims && unclaimed.get() + 1 >= UNCLAIMED_LIMIT;
            unclaimed.set(if claims || overdue {
                0
            } else {
                unclaimed.get() + 1
            });
            claims || overdue
        })
    }
    #[cfg(loom)]
    {
        claims
    }
}

/// The bucket of doubling `k` that old bucket `old` splits into besides itself.
fn upper_half(old: Pos, k: u32) -> Pos {
    Pos {
        home: old.home,
        high: old.high + (1 << (k - 1)),
    }
}

impl Doubling {
    /// Begins doubling `k + 1`, unless another writer did since this one saw `k` doublings:
    /// finishes doubling `k`, adds the new buckets (which the inserts after it split into),
    /// and publishes the count.
    pub(super) fn double(&self, k: u32) -> Result<(), InsertError> {
        let _grow = self.grow.lock();
        if self.doublings_now() != k {
            return Ok(());
        }
        self.finish_doubling();
        let old = self.table.buckets(k);
        let failed = |bytes| InsertError::GrowthFailed { bytes };
        let segment_bytes = words_for(old, self.table.width()).map_or(usize::MAX, |w| w * 8);
        let next = k as usize + 1;
        let bitmap =
            BucketWords::zeroed(old.div_ceil(64) as usize, false).map_err(|f| failed(f.bytes))?;
        self.table
            .add_segment(next)
            .map_err(|_| failed(segment_bytes))?;
        // Every bit set: no bucket is split yet. The last word's bits past the old buckets
        // stay clear, so that a finished doubling's bitmap is all zeros.
        for (i, word) in bitmap.iter().enumerate() {
            let first = i as u64 * 64;
            let bits = if old - first >= 64 {
                u64::MAX
            } else {
                low_mask((old - first) as u32)
            };
            // Relaxed: published by the Release store of the count below.
            word.store(bits, Ordering::Relaxed);
        }
        let _ = self.bitmaps[next].set(bitmap);
        let frozen = self.stripes.freeze();
        // The splits of doubling `k` each counted down under their stripes, which the freeze
        // waited for.
        debug_assert_eq!(self.left.load(Ordering::Relaxed), 0);
        // Counted as if split already. Writers split a bucket before they touch it, so this
        // stays exact.
        self.counts.split_all(self.tail_bits);
        self.next.store(0, Ordering::Relaxed);
        self.left.store(old.div_ceil(64), Ordering::Relaxed);
        self.splitting.store(true, Ordering::Relaxed);
        // Release: a thread that sees the new count sees the segment, the bitmap and `left`.
        self.doublings.store(u64::from(k) + 1, Ordering::Release);
        drop(frozen);
        Ok(())
    }

    /// Splits the old bucket of `pos` (a position after `k` doublings), if doubling `k` is in
    /// progress and has not split it yet.
    pub(super) fn split_at(&self, pos: Pos, k: u32) {
        if k > 0 && self.is_doubling() {
            let old = Pos {
                home: pos.home,
                high: pos.high & low_mask(k - 1),
            };
            self.split_old(old, k);
        }
    }

    /// Splits both of `key`'s buckets, if doubling `k` is in progress and has not split them.
    pub(super) fn split_buckets_of(&self, key: &Key, k: u32) {
        // A hint; `split_old` decides under the stripes.
        if k > 0 && self.is_doubling() {
            for side in 0..2 {
                self.split_old(key.pos(side, k - 1), k);
            }
        }
    }

    /// Splits the old bucket at `old` of doubling `k` unless it is split already (or the
    /// table doubled again).
    pub(super) fn split_old(&self, old: Pos, k: u32) {
        if self.is_unsplit(k, old) {
            self.split_under_pair(old, 1, k);
        }
    }

    /// Splits the `n` old buckets of doubling `k` from `first` on (consecutive old indices
    /// `home + base · high`) that are not split yet: those that share a pair of stripes (their
    /// own and their upper halves') under one lock of the pair.
    fn split_run(&self, first: Pos, n: u64, k: u32) {
        let (mut at, mut left) = (first, n);
        while left > 0 {
            let pair = self.split_stripes(at, k);
            let (mut len, mut next) = (1, self.next_old(at));
            while len < left && self.split_stripes(next, k) == pair {
                len += 1;
                next = self.next_old(next);
            }
            if self.olds_from(at, len).any(|old| self.is_unsplit(k, old)) {
                self.split_under_pair(at, len, k);
            }
            (at, left) = (next, left - len);
        }
    }

    /// The stripes a split of old bucket `old` of doubling `k` holds: its own and its upper
    /// half's.
    fn split_stripes(&self, old: Pos, k: u32) -> [usize; 2] {
        [old, upper_half(old, k)].map(|pos| self.stripes.index_of(self.table.stripe_key(pos)))
    }

    /// The `len` old buckets from `first` on, in index order.
    fn olds_from(&self, first: Pos, len: u64) -> impl Iterator<Item = Pos> + '_ {
        (0..len).scan(first, |pos, _| {
            Some(std::mem::replace(pos, self.next_old(*pos)))
        })
    }

    /// The old bucket after `old` in index order.
    fn next_old(&self, old: Pos) -> Pos {
        if old.home + 1 == self.table.base() {
            Pos {
                home: 0,
                high: old.high + 1,
            }
        } else {
            Pos {
                home: old.home + 1,
                high: old.high,
            }
        }
    }

    /// Splits the `len` old buckets of doubling `k` from `first` on that are not split yet;
    /// they and their upper halves lie under the stripes of `first` and its upper half, and
    /// their bits in one word of the bitmap.
    fn split_under_pair(&self, first: Pos, len: u64, k: u32) {
        if cfg!(loom_mutant = "doubling_flag_before_split")
            && self.left.load(Ordering::Relaxed) <= 1
        {
            // The broken variant: the last split clears the flag before it takes its stripes.
            self.splitting.store(false, Ordering::Release);
        }
        let word = (self.old_index(first) / 64) as usize;
        let (split, last) = {
            let _held = self.lock_pair(first, upper_half(first, k));
            if !self.still(k) {
                return;
            }
            let mut split = 0u64;
            for old in self.olds_from(first, len) {
                debug_assert_eq!(self.split_stripes(old, k), self.split_stripes(first, k));
                debug_assert_eq!((self.old_index(old) / 64) as usize, word);
                if self.is_unsplit(k, old) {
                    // The copies it makes were counted when the doubling began.
                    self.table.split(old, k - 1);
                    split |= 1 << (self.old_index(old) % 64);
                }
            }
            if split == 0 {
                return;
            }
            let after_unlock = cfg!(loom_mutant = "doubling_bit_after_unlock");
            (
                split,
                !after_unlock && self.clear_split_bits(k, word, split),
            )
        };
        let last = if cfg!(loom_mutant = "doubling_bit_after_unlock") {
            // The broken variant: the bits are cleared once the stripes are let go.
            self.clear_split_bits(k, word, split)
        } else {
            last
        };
        if last {
            self.give_back_bitmap(k as usize);
        }
    }

    /// Clears the bits `split` of word `word` of doubling `k`'s bitmap, buckets just split
    /// under stripes the caller holds (so that a freeze finds the counts settled). Counts the
    /// word down if that cleared its last bit, and ends the doubling (true) if it was the last
    /// such word.
    fn clear_split_bits(&self, k: u32, word: usize, split: u64) -> bool {
        let bitmap = self.bitmaps[k as usize]
            .get()
            .expect("a doubling's bitmap is set before it is published");
        // Release: a lookup that reads a bit clear (Acquire) then reads the new bucket's stripe
        // version no older than our lock of it. Acquire: the clear that empties the word reads
        // every clear of it before, so it happens after every split of the word.
        let before = bitmap[word].fetch_and(!split, Ordering::AcqRel);
        debug_assert_eq!(before & split, split, "a bucket split twice");
        if before & !split != 0 {
            return false;
        }
        // AcqRel: each word's last clear reads the count-down before it, so the one that
        // reaches 0 happens after every split of the doubling.
        let last = self.left.fetch_sub(1, Ordering::AcqRel) == 1;
        if last {
            // Release: a lookup that reads `false` (Acquire) sees every split, and reads
            // buckets without the bitmap.
            self.splitting.store(false, Ordering::Release);
        }
        last
    }

    /// Gives back the pages of doubling `d`'s bitmap, now all zeros: it stays readable (as
    /// zeros, "split"), and no bit is set again.
    pub(super) fn give_back_bitmap(&self, d: usize) {
        if let Some(bitmap) = self.bitmaps[d].get() {
            let given = bitmap.give_back();
            let kept = (bitmap.len() * 8).saturating_sub(given) as u64;
            // Relaxed: a statistic for `memory_usage`.
            self.kept_bitmap_bytes.fetch_add(kept, Ordering::Relaxed);
        }
    }

    /// The claim of an insert of `key`: old buckets of an unfinished doubling to split, in
    /// order (see `RUN_CLAIMS_FROM`).
    pub(super) fn claim_splits(&self, key: &Key) {
        // A hint; each split is decided under its stripes.
        if !self.is_doubling() {
            return;
        }
        let k = self.doublings_now();
        if k == 0 {
            return;
        }
        if self.table.buckets(k - 1) < RUN_CLAIMS_FROM {
            self.split_next_of(k, SPLITS_PER_INSERT);
        } else if claims_or_overdue(key.claims_run(CLAIM_ONE_IN)) {
            self.split_next_of(k, SPLIT_RUN);
        }
    }

    /// Splits up to `count` more old buckets of an unfinished doubling, in order.
    #[cfg(any(test, loom))]
    pub(super) fn split_next(&self, count: u64) {
        // A hint; each split is decided under its stripes.
        let k = self.doublings_now();
        if self.is_doubling() && k > 0 {
            self.split_next_of(k, count);
        }
    }

    /// Splits up to `count` more old buckets of doubling `k`, in order.
    fn split_next_of(&self, k: u32, count: u64) {
        let old_buckets = self.table.buckets(k - 1);
        // Relaxed: only hands out indices; each split is decided under its stripes.
        let first = self.next.fetch_add(count, Ordering::Relaxed);
        if first >= old_buckets {
            // Every bucket handed out, and the doubling not finished: a claimer has yet to
            // split its run, a writer that touched a bucket has yet to split it, or a claimer
            // gave its run up (it read the count of the doubling before with this one's
            // flag). Split what is left from the bitmap, so that inserts always finish a
            // doubling.
            self.split_from_bitmap(k, count);
            return;
        }
        // A claim splits the runs it reaches (the buckets of a stripe group under one lock of
        // their stripes, not one lock per bucket): the claimer of a run's first index splits
        // it, and a claim that starts inside a run (the first after a restore, which saves
        // the first bucket not split) splits what is left of it.
        let base = self.table.base();
        let end = (first + count).min(old_buckets);
        let mut run = first / SPLIT_RUN * SPLIT_RUN;
        while run < end {
            let n = SPLIT_RUN.min(old_buckets - run);
            if self.any_unsplit(k, run, n) {
                let first_old = Pos {
                    home: run % base,
                    high: run / base,
                };
                self.split_run(first_old, n, k);
            }
            run += SPLIT_RUN;
        }
    }

    /// Whether any of the `n` old buckets of doubling `k` from index `first` on is not split
    /// yet (a hint: each split is decided under its stripes), from one word of the bitmap
    /// (`first` a multiple of `SPLIT_RUN`, which divides 64).
    fn any_unsplit(&self, k: u32, first: u64, n: u64) -> bool {
        const { assert!(64 % SPLIT_RUN == 0) };
        let Some(bitmap) = self.bitmaps[k as usize].get() else {
            return false;
        };
        // Relaxed: a hint (above).
        let word = bitmap[(first / 64) as usize].load(Ordering::Relaxed);
        (word >> (first % 64)) & low_mask(n as u32) != 0
    }

    /// Splits every bucket an unfinished doubling has left, so lookups read one bucket per
    /// side again without first checking whether it is split. Inserts do this gradually (two
    /// buckets each); call this when the filter is built and will mostly be read.
    ///
    /// # Panics
    ///
    /// If called by the writer of a save of this same filter, on the saving thread: its
    /// splits would wait for that save forever.
    pub(crate) fn finish_doubling(&self) {
        // The splits take stripes, which a save on this thread holds frozen. Checked whether or
        // not a doubling is in progress, so that such a call fails every time.
        freeze::refuse_if_frozen_here(self).unwrap_or_else(|nested| nested.panic());
        let k = self.doublings_now();
        // A hint; each split is decided under its stripes.
        if k == 0 || !self.is_doubling() {
            return;
        }
        self.split_from_bitmap(k, u64::MAX);
    }

    /// Splits up to `count` buckets that doubling `k` has not split, lowest first, as its
    /// bitmap shows them.
    fn split_from_bitmap(&self, k: u32, count: u64) {
        let base = self.table.base();
        // Set before the doubling was published (a copy made after the doubling finished has
        // none: nothing to split).
        let Some(bitmap) = self.bitmaps[k as usize].get() else {
            return;
        };
        let mut done = 0;
        for (w, word) in bitmap.iter().enumerate() {
            // Acquire: as in `is_unsplit`.
            let mut bits = word.load(Ordering::Acquire);
            while bits != 0 {
                if done == count {
                    return;
                }
                let index = w as u64 * 64 + u64::from(bits.trailing_zeros());
                self.split_old(
                    Pos {
                        home: index % base,
                        high: index / base,
                    },
                    k,
                );
                done += 1;
                bits &= bits - 1;
            }
        }
    }

    /// Whether a doubling is still splitting buckets (see
    /// [`finish_doubling`](Self::finish_doubling)).
    pub(crate) fn is_doubling(&self) -> bool {
        // Relaxed: a report or a hint; the answer may change as soon as it is given.
        self.splitting.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::SPLIT_RUN;
    use crate::growth::keys::Pos;
    use crate::growth::{build, Doubling, PLANNED_DOUBLINGS};
    use crate::optimistic_read::Lookup;
    use crate::sync::Ordering;
    use crate::DefaultHashBuilder;

    fn filter() -> Doubling {
        build(1_000, 0.01, PLANNED_DOUBLINGS, false).unwrap()
    }

    fn hash(key: u64) -> u64 {
        DefaultHashBuilder.hash_one(key)
    }

    /// A doubling whose bitmap (the first allocation) or new segment (the second) cannot be
    /// allocated: the insert that asked for it gets `GrowthFailed`, nothing stored is lost, the
    /// table stays as it was, and the next insert doubles it once memory is there again.
    #[cfg(not(loom))]
    #[test]
    fn a_doubling_whose_memory_is_refused_fails_the_insert_and_loses_nothing() {
        use crate::table::FAIL_ALLOCATION;
        use crate::InsertError;
        for failing in [1, 2] {
            let filter = filter();
            FAIL_ALLOCATION.with(|left| left.set(failing));
            // Every insert before the one that doubles fits.
            let mut key = 0u64;
            let (refused, len, memory) = loop {
                let (len, memory) = (filter.len(), filter.memory_usage());
                match filter.insert(hash(key)) {
                    Ok(()) => key += 1,
                    Err(e) => break (e, len, memory),
                }
            };
            FAIL_ALLOCATION.with(|left| left.set(0));
            assert!(
                matches!(refused, InsertError::GrowthFailed { bytes } if bytes > 0),
                "allocation {failing} refused: {refused:?}"
            );
            assert_eq!(filter.doublings(), 0, "allocation {failing} refused");
            assert!(!filter.is_doubling());
            assert_eq!(filter.len(), len);
            assert_eq!(filter.memory_usage(), memory);
            assert!((0..key).all(|k| filter.lookup_hash(hash(k)) != Lookup::Absent));
            filter.insert(hash(key)).unwrap();
            assert_eq!(filter.doublings(), 1);
            assert!((0..=key).all(|k| filter.lookup_hash(hash(k)) != Lookup::Absent));
        }
    }

    /// A clone whose memory is refused panics, as `Clone`'s docs say (an abort from
    /// `handle_alloc_error` could not be caught), and leaves the original as it was: for each
    /// of its allocations in turn (the bitmap of the doubling in progress, then each segment).
    #[cfg(not(loom))]
    #[test]
    fn a_clone_whose_memory_is_refused_panics_and_leaves_the_original_whole() {
        use crate::table::FAIL_ALLOCATION;
        let (filter, stored) = mid_doubling(1000, 0.01, 2);
        assert!(filter.is_doubling());
        let allocations = filter.doublings() + 2;
        for failing in 1..=allocations {
            FAIL_ALLOCATION.with(|left| left.set(failing));
            let copy =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| filter.deep_copy()));
            FAIL_ALLOCATION.with(|left| left.set(0));
            assert!(
                copy.is_err(),
                "allocation {failing} of the clone refused, and it returned"
            );
            assert!((0..stored).all(|k| filter.lookup_hash(hash(k)) != Lookup::Absent));
            assert_eq!(filter.len(), stored as usize);
            filter.insert(hash(stored + u64::from(failing))).unwrap();
            assert!(filter.lookup_hash(hash(stored + u64::from(failing))) != Lookup::Absent);
            assert!(filter.remove(hash(stored + u64::from(failing))));
        }
        // With memory, the clone works.
        let copy = filter.deep_copy();
        assert!((0..stored).all(|k| copy.lookup_hash(hash(k)) != Lookup::Absent));
    }

    /// A filter of `capacity` (first table `base` buckets, not a multiple of sixteen for
    /// most) in the middle of doubling `k`, some old buckets split by the inserts' touches.
    fn mid_doubling(capacity: usize, rate: f64, k: u32) -> (Doubling, u64) {
        let filter = build(capacity, rate, PLANNED_DOUBLINGS, false).unwrap();
        let mut key = 0u64;
        while filter.doublings() < k {
            filter.insert(hash(key)).unwrap();
            key += 1;
        }
        (filter, key)
    }

    fn old_pos(filter: &Doubling, index: u64) -> Pos {
        let base = filter.table.base();
        Pos {
            home: index % base,
            high: index / base,
        }
    }

    /// Which old buckets of doubling `k` are not split yet.
    fn unsplit(filter: &Doubling, k: u32) -> Vec<bool> {
        (0..filter.table.buckets(k - 1))
            .map(|i| filter.is_unsplit(k, old_pos(filter, i)))
            .collect()
    }

    /// `split_run` from every old bucket, of every length that stays in the old table (runs
    /// that cross a segment's start, or end at the old table's last bucket): it splits exactly
    /// those buckets, counts down exactly the bitmap words it empties, and loses no item.
    #[test]
    fn a_run_splits_exactly_its_buckets_from_any_start() {
        let mut tested = 0;
        for (capacity, rate) in [(5, 0.01), (37, 0.5), (70, 1e-6), (170, 0.01)] {
            for k in 1..=4 {
                let (filter, stored) = mid_doubling(capacity, rate, k);
                if !filter.is_doubling() {
                    continue;
                }
                tested += 1;
                let old = filter.table.buckets(k - 1);
                let before = unsplit(&filter, k);
                let left = before.iter().filter(|&&b| b).count() as u64;
                for start in 0..old {
                    for n in 1..=(old - start).min(2 * SPLIT_RUN) {
                        let copy = filter.deep_copy();
                        copy.split_run(old_pos(&copy, start), n, k);
                        let after = unsplit(&copy, k);
                        let run = start..start + n;
                        let split = run.clone().filter(|&i| before[i as usize]).count() as u64;
                        for i in 0..old {
                            let expected = before[i as usize] && !run.contains(&i);
                            assert_eq!(
                                after[i as usize], expected,
                                "capacity {capacity}, k {k}, run {run:?}: bucket {i}"
                            );
                        }
                        // `left` counts the bitmap's words with a bucket not split.
                        let words_left = after.chunks(64).filter(|w| w.contains(&true)).count();
                        assert_eq!(
                            copy.left.load(Ordering::Relaxed),
                            words_left as u64,
                            "capacity {capacity}, k {k}, run {run:?}"
                        );
                        assert_eq!(copy.is_doubling(), words_left > 0);
                        assert_eq!(words_left > 0, left > split);
                        assert!(
                            (0..stored).all(|key| copy.lookup_hash(hash(key)) != Lookup::Absent),
                            "capacity {capacity}, k {k}, run {run:?}: an item lost"
                        );
                    }
                }
            }
        }
        assert!(tested >= 8, "only {tested} doublings caught in progress");
    }

    /// `split_next` from any next bucket (a restored filter's need not start a run), of any
    /// count: it splits exactly the runs of sixteen whose first bucket it claimed, each to the
    /// old table's end at most, or, every bucket handed out, `count` buckets from the bitmap.
    #[test]
    fn claims_split_exactly_the_runs_they_reach() {
        let mut tested = 0;
        for (capacity, rate) in [(5, 0.01), (37, 0.5), (170, 0.01)] {
            for k in 1..=4 {
                let (filter, _) = mid_doubling(capacity, rate, k);
                if !filter.is_doubling() {
                    continue;
                }
                tested += 1;
                let old = filter.table.buckets(k - 1);
                let before = unsplit(&filter, k);
                for next in 0..old + 3 {
                    for count in [1, 2, 3, 15, 16, 17, 40] {
                        let copy = filter.deep_copy();
                        copy.next.store(next, Ordering::Relaxed);
                        copy.split_next(count);
                        let after = unsplit(&copy, k);
                        let expected: Vec<bool> = if next >= old {
                            // The lowest `count` unsplit buckets, from the bitmap.
                            let mut left = count;
                            before
                                .iter()
                                .map(|&b| {
                                    if b && left > 0 {
                                        left -= 1;
                                        false
                                    } else {
                                        b
                                    }
                                })
                                .collect()
                        } else {
                            (0..old)
                                .map(|i| {
                                    // The runs the claim reaches, from the one it starts in.
                                    let run = i / SPLIT_RUN * SPLIT_RUN;
                                    let reached = run + SPLIT_RUN > next && run < next + count;
                                    before[i as usize] && !reached
                                })
                                .collect()
                        };
                        assert_eq!(
                            after, expected,
                            "capacity {capacity}, k {k}, next {next}, count {count}"
                        );
                        assert_eq!(
                            copy.next.load(Ordering::Relaxed),
                            next + count,
                            "capacity {capacity}, k {k}, next {next}, count {count}"
                        );
                    }
                }
            }
        }
        assert!(tested >= 6, "only {tested} doublings caught in progress");
    }

    #[test]
    fn inserts_finish_a_doubling_whose_buckets_were_all_handed_out() {
        let filter = filter();
        let mut key = 0u64;
        while filter.doublings() == 0 {
            filter.insert(hash(key)).unwrap();
            key += 1;
        }
        assert!(filter.is_doubling());
        // As if every old bucket had been claimed, some by claimers that gave them up.
        filter.next.store(u64::MAX / 2, Ordering::Relaxed);
        let stored = key;
        // Each insert splits two buckets from the bitmap (besides its own): the touches alone
        // would take several times longer to reach every bucket.
        let old_buckets = filter.buckets() / 2;
        let mut inserts = 0;
        while filter.is_doubling() {
            filter.insert(hash(key)).unwrap();
            key += 1;
            inserts += 1;
            assert!(
                inserts <= old_buckets / 2 + 1,
                "the doubling is not finished by inserts"
            );
        }
        assert!((0..stored).all(|k| filter.lookup_hash(hash(k)) != Lookup::Absent));
    }
    // -----------------------------------------------------------------------------------------
    // Attacks on the count-down by bitmap words and on the pacing switch at 4,096 old buckets.

    /// Words of doubling `k`'s bitmap with a bit set (0 without a bitmap).
    fn words_left(filter: &Doubling, k: u32) -> u64 {
        filter.bitmaps[k as usize].get().map_or(0, |bitmap| {
            bitmap
                .iter()
                .filter(|w| w.load(Ordering::Relaxed) != 0)
                .count() as u64
        })
    }

    /// `left` is the number of bitmap words with a bucket not split, `is_doubling` says whether
    /// it is positive, and no bit past the old buckets is set.
    fn assert_left_counts_words(filter: &Doubling, at: &str) {
        let k = filter.doublings();
        let left = filter.left.load(Ordering::Relaxed);
        if k == 0 {
            assert_eq!(left, 0, "{at}");
            assert!(!filter.is_doubling(), "{at}");
            return;
        }
        let old = filter.table.buckets(k - 1);
        if let Some(bitmap) = filter.bitmaps[k as usize].get() {
            assert_eq!(bitmap.len() as u64, old.div_ceil(64), "{at}: bitmap words");
            if !old.is_multiple_of(64) {
                let last = bitmap[bitmap.len() - 1].load(Ordering::Relaxed);
                assert_eq!(last >> (old % 64), 0, "{at}: a bit past the old buckets");
            }
        }
        assert_eq!(left, words_left(filter, k), "{at}: left");
        assert_eq!(filter.is_doubling(), left > 0, "{at}: is_doubling");
    }

    /// Inserts (plain and unique) and removes, checked after each: `left` counts the bitmap's
    /// words with a bucket left, the flag agrees with it (and, every few operations, with the
    /// buckets themselves), and nothing stored is lost. Old tables of every size class: one
    /// word, a partial last word, several words.
    #[test]
    fn left_counts_the_words_with_unsplit_buckets_after_every_operation() {
        let mut finished = 0;
        for (capacity, rate) in [
            (1, 0.5),
            (7, 0.01),
            (23, 0.3),
            (50, 1e-3),
            (77, 0.01),
            (130, 0.5),
            (170, 1e-4),
            (300, 0.01),
        ] {
            let filter = build(capacity, rate, PLANNED_DOUBLINGS, false).unwrap();
            let mut stored: Vec<u64> = Vec::new();
            let mut key = 0u64;
            let mut was = false;
            while filter.doublings() < 6 {
                let at = format!(
                    "capacity {capacity}, rate {rate}, key {key}, doublings {}",
                    filter.doublings()
                );
                match key % 5 {
                    3 if !stored.is_empty() => {
                        let i = (key.wrapping_mul(0x9e37_79b9) % stored.len() as u64) as usize;
                        let x = stored.swap_remove(i);
                        assert!(filter.remove(hash(x)), "{at}: remove {x}");
                    }
                    4 => {
                        if let Ok(true) = filter.insert_unique(hash(key)) {
                            stored.push(key);
                        }
                    }
                    _ => {
                        if filter.insert(hash(key)).is_ok() {
                            stored.push(key);
                        }
                    }
                }
                key += 1;
                assert_left_counts_words(&filter, &at);
                let k = filter.doublings();
                if k > 0 && key.is_multiple_of(16) {
                    let any = unsplit(&filter, k).contains(&true);
                    assert_eq!(filter.is_doubling(), any, "{at}: flag against the buckets");
                }
                if was && !filter.is_doubling() {
                    finished += 1;
                }
                was = filter.is_doubling();
                if key.is_multiple_of(97) {
                    assert!(
                        stored
                            .iter()
                            .all(|&x| filter.lookup_hash(hash(x)) != Lookup::Absent),
                        "{at}: an item lost"
                    );
                }
            }
            assert_eq!(
                filter.len(),
                stored.len(),
                "capacity {capacity}, rate {rate}"
            );
        }
        assert!(finished >= 20, "only {finished} doublings finished");
    }

    /// The old buckets of doubling `k` in the orders touches may split them: ascending,
    /// descending, the (partial) last word first, and every other bucket first.
    fn touch_orders(old: u64) -> Vec<(&'static str, Vec<u64>)> {
        let last_word = old / 64 * 64;
        let last_first: Vec<u64> = (last_word..old).chain(0..last_word).collect();
        let alternate: Vec<u64> = (0..old).step_by(2).chain((1..old).step_by(2)).collect();
        vec![
            ("ascending", (0..old).collect()),
            ("descending", (0..old).rev().collect()),
            ("last word first", last_first),
            ("alternate", alternate),
        ]
    }

    /// Writers' touches (`split_old`, `split_at` with either half's position), never a claim,
    /// split every old bucket in several orders: each split that empties a word counts it down
    /// by exactly one, and the one that empties the last word (in most orders the partial last
    /// word of the bitmap) ends the doubling, not one before.
    #[test]
    fn touches_count_each_word_down_once_and_the_last_one_ends_the_doubling() {
        let mut tested = 0;
        for (capacity, rate) in [(170, 0.01), (300, 0.5), (500, 1e-3), (1_000, 0.01)] {
            for k in 1..=3 {
                let (filter, stored) = mid_doubling(capacity, rate, k);
                let old = filter.table.buckets(k - 1);
                if !filter.is_doubling() || old.is_multiple_of(64) || old < 128 {
                    continue;
                }
                tested += 1;
                for (name, order) in touch_orders(old) {
                    let at = format!("capacity {capacity}, rate {rate}, k {k}, {name}");
                    let copy = filter.deep_copy();
                    let next = copy.next.load(Ordering::Relaxed);
                    assert_left_counts_words(&copy, &at);
                    let mut remaining = unsplit(&copy, k);
                    let mut left = remaining.chunks(64).filter(|w| w.contains(&true)).count();
                    for (n, &i) in order.iter().enumerate() {
                        let pos = old_pos(&copy, i);
                        if n % 2 == 0 {
                            copy.split_old(pos, k);
                        } else {
                            // The upper half's position: `split_at` finds its old bucket.
                            let upper = Pos {
                                home: pos.home,
                                high: pos.high + (1 << (k - 1)),
                            };
                            copy.split_at(upper, k);
                        }
                        let word = (i / 64) as usize;
                        let was_set = remaining[i as usize];
                        remaining[i as usize] = false;
                        let chunk = &remaining[word * 64..((word + 1) * 64).min(old as usize)];
                        if was_set && !chunk.contains(&true) {
                            left -= 1;
                        }
                        let at = format!("{at}, touch {n} of bucket {i}");
                        assert_eq!(copy.left.load(Ordering::Relaxed), left as u64, "{at}");
                        assert_eq!(copy.is_doubling(), left > 0, "{at}");
                        assert_left_counts_words(&copy, &at);
                    }
                    assert!(!copy.is_doubling(), "{at}");
                    assert!(!unsplit(&copy, k).contains(&true), "{at}");
                    // Touches never move the claims' position.
                    assert_eq!(copy.next.load(Ordering::Relaxed), next, "{at}");
                    assert!(
                        (0..stored).all(|x| copy.lookup_hash(hash(x)) != Lookup::Absent),
                        "{at}: an item lost"
                    );
                    // A copy of the finished filter has no doubling to finish.
                    let again = copy.deep_copy();
                    assert!(!again.is_doubling(), "{at}: copied");
                    assert_eq!(again.left.load(Ordering::Relaxed), 0, "{at}: copied");
                }
            }
        }
        assert!(
            tested >= 4,
            "only {tested} doublings with a partial last word"
        );
    }

    /// A copy whose bitmap has some words fully split, some partly and some not at all (and
    /// the last, partial, word with only its last bucket left): it counts exactly the words
    /// left, and claims alone (starting from its `next`), or `finish_doubling`, end its
    /// doubling with `left` exact at every step.
    #[test]
    fn a_copy_with_words_split_fully_and_partly_counts_and_finishes_them() {
        let mut tested = 0;
        for (capacity, rate) in [(300, 0.01), (500, 0.5), (1_000, 1e-3)] {
            for k in 1..=3 {
                let (filter, stored) = mid_doubling(capacity, rate, k);
                let old = filter.table.buckets(k - 1);
                if !filter.is_doubling() || old.is_multiple_of(64) || old < 256 {
                    continue;
                }
                tested += 1;
                let at = format!("capacity {capacity}, rate {rate}, k {k}, old {old}");
                let words = old.div_ceil(64);
                let partly = filter.deep_copy();
                for i in 0..old {
                    let word = i / 64;
                    let split = match word % 3 {
                        // Fully split words, the last (partial) one but its last bucket.
                        0 => word + 1 < words || i + 1 < old,
                        // Half split.
                        1 => i % 2 == 0,
                        // Not split (but for what the inserts split).
                        _ => false,
                    };
                    if split {
                        partly.split_old(old_pos(&partly, i), k);
                    }
                }
                assert_left_counts_words(&partly, &format!("{at}, partly split"));
                for (how, copy) in [
                    ("claims", partly.deep_copy()),
                    ("finish", partly.deep_copy()),
                ] {
                    let at = format!("{at}, {how}");
                    assert_left_counts_words(&copy, &format!("{at}, copied"));
                    assert_eq!(
                        copy.left.load(Ordering::Relaxed),
                        partly.left.load(Ordering::Relaxed),
                        "{at}"
                    );
                    if how == "finish" {
                        copy.finish_doubling();
                    } else {
                        let mut claims = 0;
                        while copy.is_doubling() {
                            copy.split_next(2);
                            claims += 1;
                            assert_left_counts_words(&copy, &format!("{at}, claim {claims}"));
                            assert!(claims <= old / 2 + 1, "{at}: claims do not finish");
                        }
                    }
                    assert_left_counts_words(&copy, &at);
                    assert!(!copy.is_doubling(), "{at}");
                    assert!(!unsplit(&copy, k).contains(&true), "{at}");
                    assert!(
                        (0..stored).all(|x| copy.lookup_hash(hash(x)) != Lookup::Absent),
                        "{at}: an item lost"
                    );
                }
            }
        }
        assert!(tested >= 3, "only {tested} doublings tested");
    }

    /// A filter whose first table has `base` buckets (the smallest capacity that gives it).
    fn with_base(base: u64, rate: f64) -> Doubling {
        let guess = (base as f64 * 3.8) as usize;
        (guess.saturating_sub(16).max(1)..guess + 16)
            .map(|capacity| build(capacity, rate, PLANNED_DOUBLINGS, false).unwrap())
            .find(|f| f.table.base() == base)
            .unwrap_or_else(|| panic!("no capacity gives a base of {base}"))
    }

    /// Around the pacing switch (old tables of 4,092 to 4,100 buckets, partial last words
    /// among them): below 4,096 every insert claims two old buckets; from 4,096 on exactly the
    /// inserts whose item `claims_run` claim sixteen, about one in eight, and the others none.
    /// `left` counts words throughout.
    #[test]
    fn inserts_claim_two_below_4096_old_buckets_and_runs_of_sixteen_from_there() {
        use super::{CLAIM_ONE_IN, RUN_CLAIMS_FROM};
        for (base, k) in [(4_094, 1), (4_096, 1), (4_098, 1), (2_046, 2), (2_050, 2)] {
            let filter = with_base(base, 0.01);
            let mut key = 0u64;
            while filter.doublings() < k {
                filter.insert(hash(key)).unwrap();
                key += 1;
            }
            let old = filter.table.buckets(k - 1);
            let at = format!("base {base}, k {k}, old {old}");
            assert!(filter.is_doubling(), "{at}");
            let (mut inserts, mut claimers) = (0u64, 0u64);
            while filter.is_doubling() && inserts < 1_000 {
                let h = hash(key);
                let claims = filter.key(h).claims_run(CLAIM_ONE_IN);
                let before = filter.next.load(Ordering::Relaxed);
                filter.insert(h).unwrap();
                key += 1;
                inserts += 1;
                let moved = filter.next.load(Ordering::Relaxed) - before;
                let expected = if old < RUN_CLAIMS_FROM {
                    2
                } else if claims {
                    SPLIT_RUN
                } else {
                    0
                };
                assert_eq!(moved, expected, "{at}, insert {inserts}: claimed");
                claimers += u64::from(claims);
                assert_left_counts_words(&filter, &format!("{at}, insert {inserts}"));
            }
            if old >= RUN_CLAIMS_FROM {
                // One in eight, give or take six deviations.
                let mean = inserts as f64 / 8.0;
                let deviation = (inserts as f64 * 7.0 / 64.0).sqrt();
                assert!(
                    (claimers as f64 - mean).abs() <= 6.0 * deviation,
                    "{at}: {claimers} claimers of {inserts} inserts"
                );
            }
        }
    }

    /// From 4,096 old buckets on, inserts claim by their item, so a workload that re-inserts
    /// (and removes) the same item, one that never claims, must still finish the doubling:
    /// each thread claims a run after `UNCLAIMED_LIMIT` inserts that claimed nothing, within
    /// 16 inserts per old bucket. (Without that, lookups would read the bitmap until
    /// `finish_doubling` or a next doubling that such a workload never reaches.)
    #[cfg(not(loom))]
    #[test]
    fn repeated_inserts_of_one_item_finish_a_doubling_of_4096_old_buckets() {
        use super::CLAIM_ONE_IN;
        let filter = with_base(4_096, 0.01);
        let mut key = 0u64;
        while filter.doublings() < 1 {
            filter.insert(hash(key)).unwrap();
            key += 1;
        }
        assert!(filter.is_doubling());
        let old = filter.table.buckets(0);
        let item = (key..)
            .map(hash)
            .find(|&h| !filter.key(h).claims_run(CLAIM_ONE_IN))
            .unwrap();
        let mut inserts = 0;
        let bound = old * SPLIT_RUN + u64::from(super::UNCLAIMED_LIMIT);
        while filter.is_doubling() && inserts <= bound {
            filter.insert(item).unwrap();
            assert!(filter.remove(item));
            inserts += 1;
        }
        assert!(
            !filter.is_doubling(),
            "{inserts} inserts (and removes) of one item left the doubling of {old} old buckets \
             unfinished: {} of {} bitmap words left",
            filter.left.load(Ordering::Relaxed),
            old.div_ceil(64)
        );
    }
}
