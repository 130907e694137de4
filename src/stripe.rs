//! Versioned lock stripes: the writers' locks and the readers' validation.
//!
//! Bucket `b` belongs to stripe `b & (S - 1)`. A stripe's version word has bit 0 set while a
//! writer holds it; every release adds 2, so a reader that sees the same even version before and
//! after its reads knows that no writer touched the stripe's buckets in between (a seqlock, read
//! the way Boehm's "Can seqlocks get along with programming language memory models?" shows).
//!
//! A writer changes bucket data only while it holds the stripes of *both* buckets of the
//! fingerprint it moves, inserts or removes. Every stripe also counts the items charged to it, so
//! `len()` is a sum over stripes and no insert touches a shared counter.

use crate::sync::{fence, AtomicU64, Ordering, SpinWait};

/// One lock stripe: a version word and the number of items charged to it.
///
/// Aligned to 16 bytes so that four stripes share a cache line and no stripe straddles two.
#[repr(align(16))]
pub(crate) struct Stripe {
    version: AtomicU64,
    /// Items inserted minus items removed under this stripe (wrapping: a remove of an item that
    /// was never inserted may take the fingerprint charged to another stripe).
    items: AtomicU64,
}

impl Stripe {
    fn new() -> Self {
        Stripe {
            version: AtomicU64::new(0),
            items: AtomicU64::new(0),
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

    /// Releases the stripe taken at even version `held`.
    fn unlock(&self, held: u64) {
        // Release: readers and the next holder that see the new version see our data stores.
        self.version.store(held.wrapping_add(2), Ordering::Release);
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

    /// Items charged to this stripe (may be "negative" as a wrapped value, see `items`).
    fn items(&self) -> u64 {
        // Relaxed: len() is a sum of independent counters, exact only at quiescence.
        self.items.load(Ordering::Relaxed)
    }
}

/// All stripes of one table.
pub(crate) struct StripeSet {
    stripes: Box<[Stripe]>,
    mask: usize,
}

impl StripeSet {
    /// `count` stripes; `count` must be a power of two.
    pub(crate) fn new(count: usize) -> Self {
        debug_assert!(count.is_power_of_two());
        StripeSet {
            stripes: (0..count).map(|_| Stripe::new()).collect(),
            mask: count - 1,
        }
    }

    /// Number of stripes.
    pub(crate) fn count(&self) -> usize {
        self.stripes.len()
    }

    /// Stripe index of a bucket.
    #[inline]
    fn index_of(&self, bucket: usize) -> usize {
        bucket & self.mask
    }

    /// The stripe that guards `bucket`.
    #[inline]
    pub(crate) fn of(&self, bucket: usize) -> &Stripe {
        &self.stripes[self.index_of(bucket)]
    }

    /// Locks the stripes of buckets `a` and `b`: ascending stripe order (so two writers can never
    /// wait for each other in a cycle), once if they share a stripe.
    pub(crate) fn lock_pair(&self, a: usize, b: usize) -> PairGuard<'_> {
        let (sa, sb) = (self.index_of(a), self.index_of(b));
        let (low, high) = (sa.min(sb), sa.max(sb));
        let low_held = self.stripes[low].lock();
        if cfg!(loom_mutant = "fence_between_locks") {
            fence(Ordering::Release);
        }
        let high_held = (high != low).then(|| (&self.stripes[high], self.stripes[high].lock()));
        // Release fence, after *both* locks: our data stores are Relaxed; a reader whose Acquire
        // load sees one of them synchronizes with this fence, so it also sees the odd versions
        // written above, and every write that happened before either lock, and fails its
        // validation (Boehm's seqlock writer).
        if !cfg!(loom_mutant = "no_release_fence") && !cfg!(loom_mutant = "fence_between_locks") {
            fence(Ordering::Release);
        }
        PairGuard {
            low: (&self.stripes[low], low_held),
            high: high_held,
        }
    }

    /// Locks every stripe, in ascending order (whole-table operations such as a snapshot; a
    /// snapshot only reads, so no release fence is needed).
    pub(crate) fn lock_all(&self) -> AllGuard<'_> {
        let held = self.stripes.iter().map(Stripe::lock).collect();
        AllGuard { set: self, held }
    }

    /// Sets the item count of a table restored from a snapshot, charged to stripe 0. Only the
    /// sum of the counters means anything (see `Stripe::items`), so any split is as good.
    pub(crate) fn set_items(&mut self, items: usize) {
        self.reset_items();
        self.stripes[0].items.store(items as u64, Ordering::Relaxed);
    }

    /// Items in the table: the sum of every stripe's counter.
    pub(crate) fn items(&self) -> usize {
        let sum = self
            .stripes
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.items()));
        // A transiently "negative" sum (racing false deletes) reads as empty.
        (sum as i64).max(0) as usize
    }

    /// Resets every counter; only for callers with exclusive access.
    pub(crate) fn reset_items(&mut self) {
        for s in self.stripes.iter() {
            s.items.store(0, Ordering::Relaxed);
        }
    }
}

/// The stripes of two buckets, held; released on drop.
pub(crate) struct PairGuard<'a> {
    low: (&'a Stripe, u64),
    high: Option<(&'a Stripe, u64)>,
}

impl PairGuard<'_> {
    /// Charges `delta` items (+1 insert, -1 remove) to the pair's lower stripe.
    ///
    /// Every operation on an item locks the same pair, so its insert and its remove are charged
    /// to the same stripe.
    pub(crate) fn add_items(&self, delta: i64) {
        let items = &self.low.0.items;
        // Relaxed: we hold the stripe, so no other writer updates this counter concurrently.
        let now = items.load(Ordering::Relaxed).wrapping_add(delta as u64);
        items.store(now, Ordering::Relaxed);
    }
}

impl Drop for PairGuard<'_> {
    fn drop(&mut self) {
        if let Some((stripe, held)) = self.high {
            stripe.unlock(held);
        }
        self.low.0.unlock(self.low.1);
    }
}

/// Every stripe of a table, held; released on drop.
pub(crate) struct AllGuard<'a> {
    set: &'a StripeSet,
    held: Vec<u64>,
}

impl Drop for AllGuard<'_> {
    fn drop(&mut self) {
        for (stripe, &held) in self.set.stripes.iter().zip(&self.held).rev() {
            stripe.unlock(held);
        }
    }
}
