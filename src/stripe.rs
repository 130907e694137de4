//! Versioned lock stripes: the writers' locks and the readers' validation.
//!
//! Bucket `b` belongs to stripe `(b >> g) & (S - 1)` for `S` stripes (a power of two) and runs
//! of `2^g` consecutive buckets (`g = 0` for one bucket per word; a layout that packs several
//! buckets in a word groups them, so that every word belongs to one stripe: see
//! `StripeSet::grouped`). A stripe's version word has bit 0 set while a writer holds it; every
//! release adds 2, so a reader that sees the same even version before and after its reads knows
//! that no writer touched the stripe's buckets in between (a seqlock, read the way Boehm's "Can
//! seqlocks get along with programming language memory models?" shows).
//!
//! A writer changes bucket data only while it holds the stripes of *both* buckets of the
//! fingerprint it moves, inserts or removes, or claims an empty lane (`shards`). Items are
//! counted in per-thread shards, so `len()` is a sum over shards and no insert touches a shared
//! counter.
//!
//! A save freezes a table without holding any stripe while it copies (see `StripeSet::freeze`):
//! writers check a gate after taking their stripes and sleep while it is closed; readers and
//! read-only lockers ignore it. Inserts that claim a lane without stripes check the same gate
//! (see `shards`).

use crate::shards::{Claim, Shards};
use crate::sync::{fence, AtomicU64, Gate, Ordering, SpinWait};

/// One lock stripe: a version word (eight to a cache line).
pub(crate) struct Stripe {
    version: AtomicU64,
}

impl Stripe {
    fn new() -> Self {
        Stripe {
            version: AtomicU64::new(0),
        }
    }

    /// Takes the stripe and returns the even version it had.
    ///
    /// A load, then a compare-exchange from that (even) version. An attempt that fails writes
    /// nothing: every store to a version word is a successful lock or its holder's unlock, one
    /// chain in modification order. (A `fetch_or` that fails would store the odd value again;
    /// harmless on hardware, but loom does not order such a store against the holder's plain
    /// unlock store (tokio-rs/loom#389), and lets the waiter read its own stale store forever.)
    fn lock(&self) -> u64 {
        let wait = SpinWait::new();
        loop {
            // Relaxed: only chooses the value to compare against; the exchange synchronizes.
            let current = self.version.load(Ordering::Relaxed);
            // Acquire on success: the holder must see every store of the previous holder,
            // whose Release unlock this reads from.
            if current & 1 == 0
                && self
                    .version
                    .compare_exchange(current, current | 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return current;
            }
            wait.wait();
        }
    }

    /// Releases the stripe taken at even version `held`, after writing under it.
    fn unlock(&self, held: u64) {
        // Release: readers and the next holder that see the new version see our data stores.
        self.version.store(held.wrapping_add(2), Ordering::Release);
    }

    /// Releases the stripe taken at even version `held` without having written under it: the
    /// version stays `held`, so a reader that validates across the hold is right (nothing
    /// changed) and does not retry.
    fn unlock_unchanged(&self, held: u64) {
        // Release: keeps the lock hand-offs a happens-before chain, so the next holder sees all
        // that this one saw (a save's closed gate included, see `StripeSet::freeze`).
        self.version.store(held, Ordering::Release);
    }

    /// Starts an optimistic read: the current version (odd while a writer holds the stripe).
    #[inline]
    pub(crate) fn read_begin(&self) -> u64 {
        // Acquire: the bucket loads that follow see every store published by the unlock that
        // this version came from.
        self.version.load(Ordering::Acquire)
    }

    /// Whether nothing was written under this stripe since `read_begin` returned `begun`.
    ///
    /// The caller's bucket loads must be `Acquire` (or be followed by an acquire fence): that is
    /// what orders this load after them and makes a load that saw a writer's data store also see
    /// the writer's lock here.
    #[inline]
    pub(crate) fn read_validate(&self, begun: u64) -> bool {
        #[cfg(loom_mutant = "no_version_check")]
        {
            return begun & 1 == 0;
        }
        #[cfg(not(loom_mutant = "no_version_check"))]
        {
            // Relaxed: ordered after the reader's Acquire bucket loads, see above.
            begun & 1 == 0 && self.version.load(Ordering::Relaxed) == begun
        }
    }

    /// The version now, for a reader that validates against several stripes at once (see
    /// `read_validate` for what must come before it).
    #[inline]
    pub(crate) fn version_now(&self) -> u64 {
        // Relaxed: ordered after the reader's Acquire bucket loads, as in `read_validate`.
        self.version.load(Ordering::Relaxed)
    }
}

/// All stripes of one table, the gate a save closes to freeze it, and (for a table that counts
/// its items here) the per-thread shards that count them.
pub(crate) struct StripeSet {
    stripes: Box<[Stripe]>,
    mask: usize,
    /// Buckets `b` with the same `b >> group_shift` share a stripe (see `grouped`).
    group_shift: u32,
    /// Closed while a save copies the table: writers wait, see `freeze`.
    frozen: Gate,
    /// The item counts of the table's writers, and the busy counts of its claims (inserts
    /// that take no stripe, which a freeze waits for too); see `shards`. `None` for a set whose
    /// owner counts elsewhere (a growable table) or nothing.
    shards: Option<Shards>,
}

impl StripeSet {
    /// `count` stripes; `count` must be a power of two.
    pub(crate) fn new(count: usize) -> Self {
        Self::grouped(count, 0)
    }

    /// `count` stripes, each guarding runs of `2^group_shift` consecutive buckets: a table whose
    /// words hold several buckets groups them so that every word belongs to one stripe.
    pub(crate) fn grouped(count: usize, group_shift: u32) -> Self {
        debug_assert!(count.is_power_of_two());
        StripeSet {
            stripes: (0..count).map(|_| Stripe::new()).collect(),
            mask: count - 1,
            group_shift,
            frozen: Gate::new(),
            shards: None,
        }
    }

    /// These stripes, counting the items of a table whose bucket words take `word_bytes` in
    /// per-thread shards (see `shards`), which also take claims.
    pub(crate) fn counting(mut self, word_bytes: usize) -> Self {
        self.shards = Some(Shards::for_words(word_bytes));
        self
    }

    /// Starts an insert that claims a lane without taking stripes (`bucket`, the item's first,
    /// chooses its shard under loom); waits while a save has the table frozen. `None` for a set
    /// that does not count.
    #[inline]
    pub(crate) fn claim(&self, bucket: usize) -> Option<Claim<'_>> {
        let shards = self.shards.as_ref()?;
        loop {
            if let Some(claim) = shards.enter(&self.frozen, bucket) {
                return Some(claim);
            }
            self.frozen.wait_open();
        }
    }

    /// Counts `delta` items for a writer holding stripe `stripe` (which chooses the shard
    /// under loom).
    fn add_items(&self, stripe: usize, delta: i64) {
        self.shards
            .as_ref()
            .expect("only a counting stripe set counts items")
            .add_items(stripe, delta);
    }

    /// Bytes the stripes and shards take.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.stripes) + self.shards.as_ref().map_or(0, Shards::bytes)
    }

    /// Number of stripes.
    pub(crate) fn count(&self) -> usize {
        self.stripes.len()
    }

    /// Stripe index of a bucket.
    #[inline]
    pub(crate) fn index_of(&self, bucket: usize) -> usize {
        (bucket >> self.group_shift) & self.mask
    }

    /// The stripe that guards `bucket`.
    #[inline]
    pub(crate) fn of(&self, bucket: usize) -> &Stripe {
        &self.stripes[self.index_of(bucket)]
    }

    /// Takes the stripes of buckets `a` and `b`: ascending stripe order (so two lockers can
    /// never wait for each other in a cycle), once if they share a stripe.
    fn hold_pair(&self, a: usize, b: usize) -> HeldPair<'_> {
        let (sa, sb) = (self.index_of(a), self.index_of(b));
        let (low, high) = (sa.min(sb), sa.max(sb));
        let low_held = self.stripes[low].lock();
        if cfg!(loom_mutant = "fence_between_locks") {
            fence(Ordering::Release);
        }
        let high_held = (high != low).then(|| (&self.stripes[high], self.stripes[high].lock()));
        HeldPair {
            low: (&self.stripes[low], low_held),
            high: high_held,
            low_index: low,
        }
    }

    /// Locks the stripes of buckets `a` and `b` for writing (see `hold_pair` for the order).
    ///
    /// While a save has the table frozen, a writer gives the stripes back with their versions
    /// unchanged (it wrote nothing), sleeps until the save is done, and tries again.
    pub(crate) fn lock_pair(&self, a: usize, b: usize) -> PairGuard<'_> {
        loop {
            let held = self.hold_pair(a, b);
            if self.writer_admitted() {
                return PairGuard { set: self, held };
            }
            held.release(Stripe::unlock_unchanged);
            self.frozen.wait_open();
        }
    }

    /// After a writer took its stripes: whether it may write (no save has the table frozen),
    /// and if so, the fence that makes its writes safe for readers.
    #[inline]
    fn writer_admitted(&self) -> bool {
        if cfg!(loom_mutant = "writer_ignores_freeze") || !self.frozen.is_closed() {
            // Release fence, after *all* locks: our data stores are Relaxed; a reader whose
            // Acquire load sees one of them synchronizes with this fence, so it also sees the
            // odd versions written above, and every write that happened before any lock, and
            // fails its validation (Boehm's seqlock writer).
            if !cfg!(loom_mutant = "no_release_fence") && !cfg!(loom_mutant = "fence_between_locks")
            {
                fence(Ordering::Release);
            }
            return true;
        }
        false
    }

    /// Locks the stripes of every bucket in `buckets` for writing, for a writer that changes
    /// more than one pair at once (a kick walk that must end in exactly the state a serial
    /// walk would leave). Ascending stripe order, each stripe once, so lockers of sets and of
    /// pairs never wait for each other in a cycle; a save's freeze is honoured as in
    /// `lock_pair`.
    pub(crate) fn lock_buckets(&self, buckets: impl IntoIterator<Item = usize>) -> SetGuard<'_> {
        let mut indices: Vec<usize> = buckets.into_iter().map(|b| self.index_of(b)).collect();
        indices.sort_unstable();
        indices.dedup();
        loop {
            let held: Vec<u64> = indices.iter().map(|&i| self.stripes[i].lock()).collect();
            if self.writer_admitted() {
                return SetGuard {
                    set: self,
                    indices,
                    held,
                };
            }
            for (&i, &version) in indices.iter().zip(&held).rev() {
                self.stripes[i].unlock_unchanged(version);
            }
            self.frozen.wait_open();
        }
    }

    /// Locks the stripes of buckets `a` and `b` for writing while `frozen` (this set's
    /// freeze, held by the caller) keeps every other writer out: for a whole-filter operation
    /// that moves fingerprints (a compaction), whose readers must still see each move.
    pub(crate) fn lock_pair_frozen(
        &self,
        frozen: &FreezeGuard<'_>,
        a: usize,
        b: usize,
    ) -> PairGuard<'_> {
        debug_assert!(frozen.freezes(self), "another set's freeze");
        self.lock_pair_admitted(a, b)
    }

    /// Locks the stripes of buckets `a` and `b` for a writer that need not check the freeze's
    /// gate (it holds the freeze, or a claim that passed the gate, which a freeze waits for).
    fn lock_pair_admitted(&self, a: usize, b: usize) -> PairGuard<'_> {
        let held = self.hold_pair(a, b);
        // Release: as in `writer_admitted`.
        fence(Ordering::Release);
        PairGuard { set: self, held }
    }

    /// Locks the stripes of buckets `a` and `b` only to read under them: a save's freeze does
    /// not hold this up (nothing is written), and the versions are left as they were.
    pub(crate) fn lock_pair_to_read(&self, a: usize, b: usize) -> ReadPairGuard<'_> {
        ReadPairGuard {
            set: self,
            held: self.hold_pair(a, b),
        }
    }

    /// Takes the stripe of `bucket` for an insert that claims a lane only its holders write (a
    /// lane across two words, see `Table::claim_straddling`), as a writer: released on drop
    /// with a new version, so that a validated read never sees half the lane. The claim passed
    /// the save's gate when it started (`claim`), and a save waits for it to end before it
    /// takes any stripe.
    pub(crate) fn lock_for_claim(&self, bucket: usize) -> PairGuard<'_> {
        self.lock_pair_admitted(bucket, bucket)
    }

    /// Freezes the table for a whole-table read (a save): until the guard is dropped no writer
    /// changes a bucket or a counter, while lookups keep running and stay exact (no stripe is
    /// held while the caller copies) and read-only lockers are not held up. Callers serialize
    /// freezes (a save holds the filter's grow lock).
    ///
    /// The gate is closed first, then every stripe is taken and given back once, in ascending
    /// order, its version unchanged. That stops every writer:
    /// - a writer that takes a stripe after we gave it back (its Acquire lock reads from our
    ///   Release unlock, or from a later store: a chain of hand-offs, each synchronizing)
    ///   happens after our close, so its check in `lock_pair` finds the gate closed;
    /// - a writer that held a stripe before we took it is waited for, and our Acquire lock
    ///   makes everything it wrote visible to the copy (it may also have seen the gate closed
    ///   and written nothing).
    ///
    /// Before the pass, a counting set waits until no claim (an insert that takes no stripe)
    /// is in flight (`Shards::wait_idle`: those that start later find the gate closed).
    ///
    /// After the pass, every bucket and counter can be read with Relaxed loads.
    ///
    /// We hold one stripe at a time, for an instant, and never wait for a sleeping writer as
    /// long as a filter's levels are frozen in ascending order: a writer sleeps only at a
    /// closed gate, holding at most stripes of lower levels (locks go in (level, stripe)
    /// order), which were passed already.
    pub(crate) fn freeze(&self) -> FreezeGuard<'_> {
        self.frozen.close();
        if let Some(shards) = &self.shards {
            shards.wait_idle(&self.frozen);
        }
        let mut still_held = Vec::new();
        for stripe in self.stripes.iter() {
            let held = stripe.lock();
            if cfg!(loom_mutant = "freeze_through_version") {
                // The old freeze: hold every lock bit while the caller copies.
                still_held.push(held);
            } else {
                stripe.unlock_unchanged(held);
            }
        }
        FreezeGuard {
            set: self,
            still_held,
        }
    }

    /// Sets the item count of a table restored from a snapshot (see `Shards::set_items`).
    pub(crate) fn set_items(&mut self, items: usize) {
        if let Some(shards) = &self.shards {
            shards.set_items(items as u64);
        }
    }

    /// Items in the table, summed over the shards (0 for a set that does not count).
    pub(crate) fn items(&self) -> usize {
        let sum = self.shards.as_ref().map_or(0, Shards::items);
        // A transiently "negative" sum (racing false deletes) reads as empty.
        (sum as i64).max(0) as usize
    }

    /// Resets the item count. Only while no writer can run: `frozen` is this set's freeze, or
    /// `None` for a caller with exclusive access (checked in debug builds).
    pub(crate) fn reset_items(&self, frozen: Option<&FreezeGuard<'_>>) {
        debug_assert!(
            frozen.is_none_or(|f| f.freezes(self)),
            "another set's freeze"
        );
        if let Some(shards) = &self.shards {
            // No writer runs (see above); later writers are ordered after us by the gate
            // (`Gate::open` is a Release store) or by the exclusive borrow's end.
            shards.set_items(0);
        }
    }
}

/// The stripes of two buckets, each with the even version it had when taken, and the lower
/// one's index.
struct HeldPair<'a> {
    low: (&'a Stripe, u64),
    high: Option<(&'a Stripe, u64)>,
    low_index: usize,
}

impl HeldPair<'_> {
    /// Gives both stripes back with `unlock`, the higher first.
    fn release(&self, unlock: fn(&Stripe, u64)) {
        if let Some((stripe, held)) = self.high {
            unlock(stripe, held);
        }
        unlock(self.low.0, self.low.1);
    }
}

/// The stripes of two buckets, held by a writer; released on drop with new versions.
pub(crate) struct PairGuard<'a> {
    set: &'a StripeSet,
    held: HeldPair<'a>,
}

impl PairGuard<'_> {
    /// Counts `delta` items (+1 insert, -1 remove) in this thread's shard.
    pub(crate) fn add_items(&self, delta: i64) {
        self.set.add_items(self.held.low_index, delta);
    }
}

impl Drop for PairGuard<'_> {
    fn drop(&mut self) {
        self.held.release(Stripe::unlock);
    }
}

/// The stripes of a set of buckets, held by a writer (see `StripeSet::lock_buckets`); released
/// on drop with new versions.
pub(crate) struct SetGuard<'a> {
    set: &'a StripeSet,
    /// Stripe indices, ascending.
    indices: Vec<usize>,
    /// The even version each stripe had when taken.
    held: Vec<u64>,
}

impl SetGuard<'_> {
    /// Whether the stripe of `bucket` is held.
    pub(crate) fn covers(&self, bucket: usize) -> bool {
        self.indices
            .binary_search(&self.set.index_of(bucket))
            .is_ok()
    }

    /// Counts `delta` items in this thread's shard, for a write into `bucket`, whose stripe
    /// must be held.
    pub(crate) fn add_items(&self, bucket: usize, delta: i64) {
        debug_assert!(self.covers(bucket));
        self.set.add_items(self.set.index_of(bucket), delta);
    }
}

impl Drop for SetGuard<'_> {
    fn drop(&mut self) {
        for (&i, &held) in self.indices.iter().zip(&self.held).rev() {
            self.set.stripes[i].unlock(held);
        }
    }
}

/// The stripes of two buckets, held only to read under them; released on drop with their
/// versions unchanged.
pub(crate) struct ReadPairGuard<'a> {
    set: &'a StripeSet,
    held: HeldPair<'a>,
}

impl ReadPairGuard<'_> {
    /// Counts `delta` items as `PairGuard::add_items` does, for a loom mutant that writes
    /// under a reader's hold (`remove_unchanged_version`), so that its counts stay right.
    pub(crate) fn add_items(&self, delta: i64) {
        self.set.add_items(self.held.low_index, delta);
    }
}

impl Drop for ReadPairGuard<'_> {
    fn drop(&mut self) {
        self.held.release(Stripe::unlock_unchanged);
    }
}

/// A frozen table (see `StripeSet::freeze`); writers resume when it is dropped.
pub(crate) struct FreezeGuard<'a> {
    set: &'a StripeSet,
    /// Versions of the stripes still held (only by the `freeze_through_version` mutant).
    still_held: Vec<u64>,
}

impl FreezeGuard<'_> {
    /// Whether this guard freezes `set`.
    pub(crate) fn freezes(&self, set: &StripeSet) -> bool {
        std::ptr::eq(self.set, set)
    }
}

impl Drop for FreezeGuard<'_> {
    fn drop(&mut self) {
        for (stripe, &held) in self.set.stripes.iter().zip(&self.still_held).rev() {
            stripe.unlock_unchanged(held);
        }
        self.set.frozen.open();
    }
}
