//! Lookups: wait-free, optimistic, validated against one stripe version.

use super::{is_one_part, Table, GENERAL, SORTED64, STRADDLING, WITHIN, WORD};
use crate::bucket_layout::{Access, Bucket};
use crate::hashing::ItemKey;
use crate::optimistic_read::{retry_read, Lookup};
use crate::stripe::Stripe;
use crate::sync::{AtomicU64, Ordering};

/// Where a key's two buckets start: each one's first word and the bit in it.
type PairAt = ((usize, u32), (usize, u32));

impl Table {
    /// Starts the seqlock read of a key's buckets `a` (its primary) and `b`: the version of
    /// `a`'s stripe, or, where a miss needs both (`misses_need_both_stripes`), one value for the
    /// versions of both stripes (odd while either is held).
    #[inline(always)]
    pub(super) fn read_begin(&self, a: usize, b: usize) -> u64 {
        self.miss_check(a, b).begin()
    }

    /// Whether no writer touched the stripes `read_begin` read since it returned `begun` (see
    /// `Stripe::read_validate`: the bucket loads before this must be Acquire).
    #[inline(always)]
    pub(super) fn read_validate(&self, a: usize, b: usize, begun: u64) -> bool {
        self.miss_check(a, b).validate(begun)
    }

    /// The stripes that prove a miss of a key's buckets `a` (its primary) and `b`.
    #[inline(always)]
    fn miss_check(&self, a: usize, b: usize) -> MissCheck<'_> {
        // The general access asks the table whether a miss needs both stripes.
        self.miss_check_as::<GENERAL>(a, b)
    }

    /// `miss_check` for a table whose layout's access is `A`: plain one-part layouts never
    /// need `b`'s stripe (only semi-sorted buckets are rewritten whole), which their lookups
    /// then need not ask.
    #[inline(always)]
    fn miss_check_as<const A: u8>(&self, a: usize, b: usize) -> MissCheck<'_> {
        debug_assert!(!(is_one_part(A) && self.misses_need_both));
        MissCheck {
            a: self.stripes.of(a),
            b: (!is_one_part(A) && self.misses_need_both).then(|| self.stripes.of(b)),
        }
    }

    /// Both buckets: Acquire loads, `a` first.
    #[inline(always)]
    fn load_pair(&self, a: usize, b: usize) -> (Bucket, Bucket) {
        (
            self.load(a, Ordering::Acquire),
            self.load(b, Ordering::Acquire),
        )
    }

    /// Whether either word holds `fp`.
    #[inline]
    fn holds_either(&self, (first, second): (Bucket, Bucket), fp: u64) -> bool {
        // `|`, not `||`: which bucket holds a present item is a coin toss; one branch on both
        // is predictable (nearly always true for present items, false for absent ones).
        self.layout.holds(&first, fp) | self.layout.holds(&second, fp)
    }

    /// After a probe missed and its validation failed: `a` once more.
    ///
    /// The erase of every move is a Release store made after its copy, and the probe's loads
    /// are Acquire. A move from `b` to `a` that completed between the probe's loads of `a` and
    /// `b` is caught here: having seen `b` after the erase, this load of `a` sees the copy.
    /// (The load of `b` may instead have returned a *later* writer's Relaxed store; that
    /// writer's release fence, see `lock_pair`, gives the same guarantee.) Moves from `a` to
    /// `b` are caught by the probe's own order. So a fingerprint that makes one hop during a
    /// lookup is found on the first attempt; such a hop always changes the version, which is
    /// why this re-read is needed only when validation failed.
    #[inline]
    fn reprobe(&self, a: usize, fp: u64) -> bool {
        self.layout.holds(&self.load(a, Ordering::Acquire), fp)
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
        self.lookup_traced(key).0
    }

    /// `lookup`, also returning how many of its validations failed (loom models assert on it;
    /// in `lookup` the count is dead code and compiled away).
    ///
    /// The common cases (a hit, or a miss confirmed by one seqlock read) are small enough to
    /// inline; collisions with writers go to an out-of-line retry loop. Always inlined: left
    /// to the compiler it stayed a call, about a tenth of an in-cache lookup's time.
    #[inline(always)]
    pub(crate) fn lookup_traced(&self, key: ItemKey) -> (Lookup, u32) {
        // The layout's access decides the code of the loads and tests: branch on it once, so
        // that the lookup runs code specialised for it.
        match self.layout.access() {
            Access::Word => self.lookup_as::<WORD>(key),
            Access::Within => self.lookup_as::<WITHIN>(key),
            Access::Straddling => self.lookup_as::<STRADDLING>(key),
            Access::Sorted64 => self.lookup_as::<SORTED64>(key),
            Access::General => self.lookup_as::<GENERAL>(key),
        }
    }

    /// `lookup_traced` for a table whose layout's access is `A`.
    #[inline(always)]
    fn lookup_as<const A: u8>(&self, key: ItemKey) -> (Lookup, u32) {
        let (a, b) = self.buckets_of(key);
        let fp = key.fingerprint;
        // Where each bucket starts, once for both reads below.
        let at = (self.locate_as::<A>(a), self.locate_as::<A>(b));
        // The slice once for both reads: its pointer and length stay in registers, and the
        // second read's bounds checks repeat the first's (the Acquire loads between them would
        // otherwise make the compiler read both from the table again).
        let words = &*self.words;
        // A hit needs no validation: look before touching the stripe at all. Under concurrent
        // writes this matters most: the stripe's line is the one every writer of these buckets
        // rewrites, and a reader that skips it skips those cache misses.
        let seen = self.words_of_pair::<A>(words, at);
        if self.pair_holds::<A>(seen, at, fp) {
            return (Lookup::Present, 0);
        }
        // The seqlock read: version, then the words again (cached now), then the version.
        let check = self.miss_check_as::<A>(a, b);
        let begun = check.begin();
        let now = self.words_of_pair::<A>(words, at);
        // Unchanged words cannot hold `fp` now either: skip the test.
        let unchanged =
            Self::same_words::<A>(&now.0, &seen.0) && Self::same_words::<A>(&now.1, &seen.1);
        if !unchanged && self.pair_holds::<A>(now, at, fp) {
            return (Lookup::Present, 0);
        }
        if check.validate(begun) {
            return (Lookup::Absent, 0);
        }
        // Empty buckets as "seen": the retries test every bucket they read unless it is empty
        // (which holds nothing), and this attempt's words need not stay live to be passed.
        self.lookup_contended(a, b, fp, Default::default())
    }

    /// The words of a key's two buckets, which start at `at` (see `locate_as`): Acquire loads,
    /// the primary's first.
    #[inline(always)]
    fn words_of_pair<const A: u8>(
        &self,
        words: &[AtomicU64],
        (at_a, at_b): PairAt,
    ) -> ([u64; 3], [u64; 3]) {
        let span = self.layout.span();
        (
            Self::words_in::<A>(words, span, at_a, Ordering::Acquire),
            Self::words_in::<A>(words, span, at_b, Ordering::Acquire),
        )
    }

    /// Whether either bucket in the words `words_of_pair` read holds `fp`.
    #[inline(always)]
    fn pair_holds<const A: u8>(&self, words: ([u64; 3], [u64; 3]), at: PairAt, fp: u64) -> bool {
        let (first, second) = (
            self.probe_from::<A>(words.0, at.0 .1),
            self.probe_from::<A>(words.1, at.1 .1),
        );
        // `|`, not `||`, as in `holds_either`.
        self.holds_as::<A>(&first, fp) | self.holds_as::<A>(&second, fp)
    }

    /// The rest of a lookup whose first validation failed: the re-read of `a` that ends the
    /// first attempt, then further attempts, then "maybe present". Attempt `n` of `retry_read`
    /// has `n` failed validations behind it. `seen`: buckets that attempts need not test again
    /// while they read the same (ones tested already, or empty ones).
    #[cold]
    #[inline(never)]
    fn lookup_contended(
        &self,
        a: usize,
        b: usize,
        fp: u64,
        mut seen: (Bucket, Bucket),
    ) -> (Lookup, u32) {
        let answer = retry_read(self.limits.read_attempts, |n| {
            // Attempt 0 is `lookup_as`'s, its loads and its validation made already.
            if n > 0 {
                let begun = self.read_begin(a, b);
                let now = self.load_pair(a, b);
                if now != seen && self.holds_either(now, fp) {
                    return Some((Lookup::Present, n));
                }
                if self.read_validate(a, b, begun) {
                    return Some((Lookup::Absent, n));
                }
                seen = now;
            }
            self.reprobe(a, fp).then_some((Lookup::Present, n + 1))
        });
        answer.unwrap_or((Lookup::Unproven, self.limits.read_attempts))
    }

    /// Copies of the fingerprint in the key's buckets (counted once if both are one bucket).
    ///
    /// Optimistic like `lookup`; when every attempt collides with a writer it takes the pair's
    /// stripes, since a count has no "maybe" to fall back on. It only reads under them, so a
    /// save's freeze does not hold it up.
    pub(crate) fn count(&self, key: ItemKey) -> usize {
        let (a, b) = self.buckets_of(key);
        let fp = key.fingerprint;
        let counted = retry_read(self.limits.read_attempts, |_| {
            let begun = self.read_begin(a, b);
            // Acquire: orders the validating load after these (see `Stripe::read_validate`).
            let n = self.count_in(a, b, fp, Ordering::Acquire);
            self.read_validate(a, b, begun).then_some(n)
        });
        if let Some(n) = counted {
            return n;
        }
        let _guard = self.stripes.lock_pair_to_read(a, b);
        // Relaxed: we hold both stripes, and the lock's Acquire made the last writes visible.
        self.count_in(a, b, fp, Ordering::Relaxed)
    }

    pub(super) fn count_in(&self, a: usize, b: usize, fp: u64, order: Ordering) -> usize {
        let in_a = self.layout.count(&self.load(a, order), fp);
        let in_b = if b == a {
            0
        } else {
            self.layout.count(&self.load(b, order), fp)
        };
        (in_a + in_b) as usize
    }
}

/// One value for the versions of two stripes: odd while either is held, else their sum. Each
/// version only grows (by 2 a release, wrapping after 2^63 releases), so two even readings of
/// both stripes give the same sum only if neither stripe changed in between.
#[inline(always)]
fn both_versions(a: u64, b: u64) -> u64 {
    if (a | b) & 1 != 0 {
        1
    } else {
        a.wrapping_add(b)
    }
}

/// The stripes whose versions prove a miss: `a`'s, and `b`'s too where buckets are rewritten
/// whole across words (see `misses_need_both_stripes`).
struct MissCheck<'t> {
    a: &'t Stripe,
    b: Option<&'t Stripe>,
}

impl MissCheck<'_> {
    #[inline(always)]
    fn begin(&self) -> u64 {
        let in_a = self.a.read_begin();
        match self.b {
            None => in_a,
            Some(b) => both_versions(in_a, b.read_begin()),
        }
    }

    #[inline(always)]
    fn validate(&self, begun: u64) -> bool {
        match self.b {
            None => self.a.read_validate(begun),
            Some(b) => {
                let now = both_versions(self.a.version_now(), b.version_now());
                begun & 1 == 0 && now == begun
            }
        }
    }
}
