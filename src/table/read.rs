//! Lookups: wait-free, optimistic, validated against one stripe version.

use super::Table;
use crate::hashing::ItemKey;
use crate::sync::{reader_pause, Ordering};

/// The outcome of a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A lane holds the fingerprint.
    Present,
    /// Both buckets were read in one consistent state and neither holds the fingerprint.
    Absent,
    /// Every optimistic attempt collided with a writer; the answer falls back to "maybe".
    Unproven,
}

impl Table {
    /// One lock-free look at both buckets.
    ///
    /// Loads are Acquire and the erase of every move is a Release store made after its copy, so
    /// a move from `b` to `a` that completes between our loads of `a` and `b` is still caught:
    /// having seen `b` after the erase, the second load of `a` sees the copy. Together with the
    /// `a`-then-`b` order (which catches moves from `a` to `b`) this means a fingerprint that
    /// makes one hop while we look is always found, without validation or retry. The load of
    /// `b` may also return a *later* writer's Relaxed store instead of the erase; that writer's
    /// release fence (see `lock_pair`) then gives the same guarantee.
    #[inline]
    fn probe(&self, a: usize, b: usize, fp: u64) -> bool {
        let layout = &self.layout;
        let first = self.word(a).load(Ordering::Acquire);
        let second = self.word(b).load(Ordering::Acquire);
        // `|`, not `||`: which bucket holds a present item is a coin toss; one branch on both
        // is predictable (nearly always true for present items, false for absent ones).
        (layout.holds(first, fp) | layout.holds(second, fp))
            || layout.holds(self.word(a).load(Ordering::Acquire), fp)
    }

    /// Looks up a key: a hit needs no validation; a miss is only reported as `Absent` once
    /// validated against the version of the primary bucket's stripe.
    ///
    /// One stripe suffices: every write that can take this fingerprint out of `a` or `b` (a
    /// move between them, or a remove) holds the stripes of *both* buckets, so it is visible in
    /// either version. Writes that hold only one of them (moves of other fingerprints out of
    /// `b`, inserts into `b`) rewrite `b` under its lock and keep our lane as it was.
    #[inline]
    pub(crate) fn lookup(&self, key: ItemKey) -> Lookup {
        self.lookup_counting_attempts(key).0
    }

    /// `lookup`, also returning how many attempts it took (loom models assert on it).
    #[inline]
    pub(crate) fn lookup_counting_attempts(&self, key: ItemKey) -> (Lookup, u32) {
        let (a, b) = self.buckets_of(key);
        let stripe = self.stripes.of(a);
        for attempt in 1..=self.limits.read_attempts {
            let begun = stripe.read_begin();
            if self.probe(a, b, key.fingerprint) {
                return (Lookup::Present, attempt);
            }
            if stripe.read_validate(begun) {
                return (Lookup::Absent, attempt);
            }
            if attempt < self.limits.read_attempts {
                reader_pause();
            }
        }
        (Lookup::Unproven, self.limits.read_attempts)
    }

    /// Copies of the fingerprint in the key's buckets (counted once if both are one bucket).
    ///
    /// Optimistic like `lookup`; when every attempt collides with a writer it takes the pair's
    /// stripes, since a count has no "maybe" to fall back on.
    pub(crate) fn count(&self, key: ItemKey) -> usize {
        let (a, b) = self.buckets_of(key);
        let fp = key.fingerprint;
        let stripe = self.stripes.of(a);
        for _ in 0..self.limits.read_attempts {
            let begun = stripe.read_begin();
            // Acquire: orders the validating load after these (see `Stripe::read_validate`).
            let n = self.count_in(a, b, fp, Ordering::Acquire);
            if stripe.read_validate(begun) {
                return n;
            }
            reader_pause();
        }
        let _guard = self.stripes.lock_pair(a, b);
        // Relaxed: we hold both stripes, and the lock's Acquire made the last writes visible.
        self.count_in(a, b, fp, Ordering::Relaxed)
    }

    fn count_in(&self, a: usize, b: usize, fp: u64, order: Ordering) -> usize {
        let in_a = self.layout.count(self.word(a).load(order), fp);
        let in_b = if b == a {
            0
        } else {
            self.layout.count(self.word(b).load(order), fp)
        };
        (in_a + in_b) as usize
    }
}
