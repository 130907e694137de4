//! Inserts and removes. Every write that moves or takes away a fingerprint holds the stripes of
//! both its buckets, so lookups validated against either stripe see it whole or not at all; an
//! insert into a free lane of a plain table claims it with one compare-and-swap instead (see
//! `claim_as`), since a fingerprint that only appears cannot hide another.

use super::{is_one_part, Table, GENERAL, SORTED64, STRADDLING, WITHIN, WORD};
use crate::bucket_layout::Access;
use crate::cuckoo_path::{NoRoom, Placed};
use crate::hashing::ItemKey;
use crate::shards::Claim;
use crate::storage::PREFETCH_FROM_BYTES;
use crate::sync::Ordering;

/// What an item's two buckets hold, as `Table::pair_state` saw them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PairState {
    /// A lane is free.
    Room,
    /// Full, of repeated fingerprints only (each at least twice), the item's own among them
    /// (at least twice too): the item is a hot key, and the fingerprints there can only move
    /// between buckets as full of them.
    RepeatsWithOwnCopies,
    /// Full, with other fingerprints: a cuckoo path in a larger table would free a slot.
    Crowded,
}

/// Whether an insert stores another copy regardless, or only when the item is absent.
pub(crate) trait Uniqueness: Copy {
    /// Whether the insert must not add a copy that exists already.
    const UNIQUE: bool;
    /// For unique inserts: whether some other level holds the item (asked while both buckets'
    /// stripes are held).
    fn elsewhere(self) -> bool;
}

/// Store one more copy (multiset insert).
#[derive(Clone, Copy)]
pub(crate) struct Multiset;

impl Uniqueness for Multiset {
    const UNIQUE: bool = false;
    fn elsewhere(self) -> bool {
        false
    }
}

/// Store only if neither bucket holds the fingerprint and the closure (the other levels) says
/// no other level holds it either.
#[derive(Clone, Copy)]
pub(crate) struct Unique<F: Fn() -> bool + Copy>(pub(crate) F);

impl<F: Fn() -> bool + Copy> Uniqueness for Unique<F> {
    const UNIQUE: bool = true;
    fn elsewhere(self) -> bool {
        (self.0)()
    }
}

impl Table {
    /// Inserts a copy of the key's fingerprint (or, with `unique`, only if none is there).
    ///
    /// When both buckets are full, a cuckoo path to a free lane is searched without locks and
    /// executed from its free end back to the key's buckets, one locked move at a time; then the
    /// placement is tried again. The fingerprint being inserted is never stored until a lane is
    /// free for it, and a move never leaves a fingerprint outside the table, so giving up at any
    /// point loses nothing.
    pub(crate) fn insert<U: Uniqueness>(&self, key: ItemKey, mode: U) -> Result<Placed, NoRoom> {
        // Branch on the layout's access once, as lookups do, and run code specialised for it.
        match self.layout.access() {
            Access::Word => self.insert_as::<WORD, U>(key, mode),
            Access::Within => self.insert_as::<WITHIN, U>(key, mode),
            Access::Straddling => self.insert_as::<STRADDLING, U>(key, mode),
            Access::Sorted64 => self.insert_as::<SORTED64, U>(key, mode),
            Access::General => self.insert_as::<GENERAL, U>(key, mode),
        }
    }

    /// `insert` for a table whose layout's access is `A`.
    #[inline(always)]
    fn insert_as<const A: u8, U: Uniqueness>(
        &self,
        key: ItemKey,
        mode: U,
    ) -> Result<Placed, NoRoom> {
        let (a, b) = self.buckets_of(key);
        // In a table larger than the caches, both buckets' lines are on their way while the
        // stripes are taken (a locked instruction waits for earlier loads, not for prefetches).
        if self.words.len() as u64 * 8 >= PREFETCH_FROM_BYTES {
            self.prefetch_bucket(a);
            self.prefetch_bucket(b);
        }
        // A plain table's insert claims a free lane with one compare-and-swap, without stripes.
        if is_one_part(A) && !U::UNIQUE {
            if let Some(placed) = self.claim_as::<A>(a, b, key.fingerprint) {
                return Ok(placed);
            }
        }
        for _ in 0..self.limits.insert_rounds {
            if let Some(placed) = self.try_place_as::<A, U>(a, b, key.fingerprint, mode) {
                return Ok(placed);
            }
            let hops = self.find_path::<A>(a, b).ok_or(NoRoom)?;
            // A failed move means another writer changed the path; search again.
            self.execute_path::<A>(&hops);
        }
        Err(NoRoom)
    }

    /// Stores `fp` in the emptier of its two buckets, under both stripes (a table whose
    /// layout's access is `A`).
    #[inline(always)]
    fn try_place_as<const A: u8, U: Uniqueness>(
        &self,
        a: usize,
        b: usize,
        fp: u64,
        mode: U,
    ) -> Option<Placed> {
        let guard = self.stripes.lock_pair(a, b);
        // Relaxed: we hold both stripes, and the lock's Acquire made the last writes visible.
        // Unmasked: only lanes are read and written (see `probe_from`).
        let word_a = self.probe_as::<A>(a, Ordering::Relaxed);
        let word_b = self.probe_as::<A>(b, Ordering::Relaxed);
        if U::UNIQUE
            && (self.holds_as::<A>(&word_a, fp)
                || self.holds_as::<A>(&word_b, fp)
                || mode.elsewhere())
        {
            return Some(Placed::AlreadyPresent);
        }
        // The emptier bucket first: spreading load keeps kick chains rare and short. Which one
        // is emptier is a coin toss, so select without a branch (a branch here mispredicted on
        // about every third insert and cost a fifth of the insert rate).
        let prefer_b = self.occupied_as::<A>(&word_b) < self.occupied_as::<A>(&word_a);
        let first = std::hint::select_unpredictable(prefer_b, (b, word_b), (a, word_a));
        let second = std::hint::select_unpredictable(prefer_b, (a, word_a), (b, word_b));
        for (bucket, word) in [first, second] {
            // Relaxed: ordered for readers by the lock's release fence (see `lock_pair`).
            if self.put_as::<A>(bucket, word, fp, Ordering::Relaxed) {
                guard.add_items(1);
                return Some(Placed::Inserted);
            }
        }
        None
    }

    /// Stores `fp` in a free lane of the emptier of buckets `a` and `b` with one
    /// compare-and-swap, taking no stripe (a plain table's insert, see `shards`); `None` when
    /// neither has a free lane that lies in one word (the locked path then places it, or
    /// searches for a cuckoo path).
    ///
    /// Lookups need no stripe's version to change: a claim only turns an empty lane into a
    /// fingerprint, so a lookup that misses it overlaps the insert and may answer either way,
    /// and no stored fingerprint is moved or taken away (moves and removes still hold both
    /// stripes, and write with atomic read-modify-writes that keep claimed lanes: `put_as`,
    /// `erase_as`).
    #[inline(always)]
    fn claim_as<const A: u8>(&self, a: usize, b: usize, fp: u64) -> Option<Placed> {
        let mut claim = self.stripes.claim(a)?;
        self.claim_with::<A>(a, b, fp, &mut claim)
            .then_some(Placed::Inserted)
    }

    /// `claim_as` under a claim already announced (a batch's); whether `fp` was stored.
    #[inline(always)]
    pub(super) fn claim_with<const A: u8>(
        &self,
        a: usize,
        b: usize,
        fp: u64,
        claim: &mut Claim<'_>,
    ) -> bool {
        let part = self.layout.part();
        loop {
            let (at_a, at_b) = (self.locate_as::<A>(a), self.locate_as::<A>(b));
            // Relaxed: a stale word only makes the compare-and-swap fail.
            let words_a = self.words_at::<A>(at_a, Ordering::Relaxed);
            let words_b = self.words_at::<A>(at_b, Ordering::Relaxed);
            // Unmasked: only lane tests read these (see `probe_from`).
            let lanes_a = self.probe_from::<A>(words_a, at_a.1).lanes();
            let lanes_b = self.probe_from::<A>(words_b, at_b.1).lanes();
            let (empty_a, empty_b) = (part.zero_lanes(lanes_a), part.zero_lanes(lanes_b));
            let free_a = empty_a & !self.straddling_lanes::<A>(at_a.1);
            let free_b = empty_b & !self.straddling_lanes::<A>(at_b.1);
            if free_a | free_b == 0 {
                if empty_a | empty_b == 0 {
                    return false;
                }
                // Only lanes that straddle two words are empty (a packed bucket's, 7 % of the
                // inserts that fill a table to 95 %): write one under the bucket's stripe.
                let bucket = if empty_a != 0 { a } else { b };
                if self.claim_straddling::<A>(bucket, fp) {
                    claim.stored();
                    return true;
                }
                continue;
            }
            // The emptier bucket first, as `try_place_as` chooses, and without a branch: `|` and
            // `&`, not `||` and `&&`, and a select of each value on its own (a select of the
            // tuple of them was compiled to branches, which mispredicted on every third claim).
            let prefer_b =
                (free_a == 0) | ((free_b != 0) & (part.occupied(lanes_b) < part.occupied(lanes_a)));
            use std::hint::select_unpredictable as pick;
            let (first, shift) = (
                pick(prefer_b, at_b.0, at_a.0),
                pick(prefer_b, at_b.1, at_a.1),
            );
            let free = pick(prefer_b, free_b, free_a);
            let at = shift + part.lowest_lane(free).unwrap_or(0);
            let (k, bit) = ((at / 64) as usize, at % 64);
            let current = pick(prefer_b, words_b[k], words_a[k]);
            let word = &self.words[first + k];
            if cfg!(loom_mutant = "claim_plain_store") {
                word.store(current | fp << bit, Ordering::Relaxed);
                claim.stored();
                return true;
            }
            // Relaxed: readers need only the value (see above); a freeze sees it through the
            // claim's Release end.
            if word
                .compare_exchange(
                    current,
                    current | fp << bit,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                claim.stored();
                return true;
            }
        }
    }

    /// Stores `fp` in an empty lane of `bucket` under the bucket's stripe alone, for a claim
    /// whose only empty lanes straddle two words; false when the bucket has none any more.
    ///
    /// Every writer of such a lane holds this stripe (claims without stripes never take one),
    /// so holding it makes the two words' writes one step for every other writer, while claims
    /// of the lanes beside it go on (`put_as` writes with atomic read-modify-writes). The stripe
    /// is held as a writer holds it, its version changed: a lookup's hit may see half the lane
    /// for an instant, as it may see any locked write (a half fingerprint is only another
    /// fingerprint, never one taken away), but a validated read (a miss, a `count`) never does.
    #[inline(never)]
    fn claim_straddling<const A: u8>(&self, bucket: usize, fp: u64) -> bool {
        // Mutant `straddle_claim_unlocked`: the lane written without the stripe, so that two
        // claims may write one lane at once. Mutant `straddle_claim_unchanged_version`: the
        // stripe held as a reader holds it (no fence, its version unchanged), so that a `count`
        // may validate a read of half the lane.
        let unlocked = cfg!(loom_mutant = "straddle_claim_unlocked");
        let unchanged = cfg!(loom_mutant = "straddle_claim_unchanged_version");
        let _writer = (!unlocked && !unchanged).then(|| self.stripes.lock_for_claim(bucket));
        let _reader = unchanged.then(|| self.stripes.lock_pair_to_read(bucket, bucket));
        // Relaxed: the stripe's lock made its last holder's writes visible, and claims of the
        // lanes beside ours make `put_as` read again.
        let old = self.probe_as::<A>(bucket, Ordering::Relaxed);
        // Relaxed: readers need only the value, as for any claim (see `claim_as`).
        self.put_as::<A>(bucket, old, fp, Ordering::Relaxed)
    }

    /// What the key's two buckets hold now, read in one go under their stripes: room, only
    /// repeated items among which the key's own copies, or anything else.
    pub(crate) fn pair_state(&self, key: ItemKey) -> PairState {
        let (a, b) = self.buckets_of(key);
        let _guard = self.stripes.lock_pair_to_read(a, b);
        let layout = &self.layout;
        // Relaxed: we hold both stripes, and the lock's Acquire made the last writes visible.
        let words = [a, b].map(|bucket| self.load(bucket, Ordering::Relaxed));
        let in_pair = |fp| self.count_in(a, b, fp, Ordering::Relaxed);
        if words.iter().any(|w| layout.first_empty(w).is_some()) {
            return PairState::Room;
        }
        let only_repeats = words.iter().all(|word| {
            layout
                .positions()
                .all(|position| in_pair(layout.lane(word, position)) >= 2)
        });
        // At least two own copies: an item's second copy is not a hot key yet, and its pair
        // may be full of other items' pairs of copies (with 4-lane buckets, that happens).
        if only_repeats && in_pair(key.fingerprint) >= 2 {
            PairState::RepeatsWithOwnCopies
        } else {
            PairState::Crowded
        }
    }

    /// Whether the table holds at least 90 % of the items it is sized for.
    pub(crate) fn is_near_capacity(&self) -> bool {
        self.len() as f64 >= 0.9 * self.item_capacity() as f64
    }

    /// Removes one copy of the key's fingerprint, if there is one.
    pub(crate) fn remove(&self, key: ItemKey) -> bool {
        match self.layout.access() {
            Access::Word => self.remove_as::<WORD>(key),
            Access::Within => self.remove_as::<WITHIN>(key),
            Access::Straddling => self.remove_as::<STRADDLING>(key),
            Access::Sorted64 => self.remove_as::<SORTED64>(key),
            Access::General => self.remove_as::<GENERAL>(key),
        }
    }

    /// `remove` for a table whose layout's access is `A`.
    ///
    /// Both stripes are held as a writer holds them (the release fence, new versions),
    /// although a claim takes none: an insert and a remove of a twin (another key with the
    /// same fingerprint and the same two buckets) carry a copy from the bucket a lookup reads
    /// second into the one it read first (the insert claims a lane of the emptier bucket, the
    /// remove takes the first match in its own primary, the other one), so a lookup must see
    /// the remove as it sees a move. Loom model 20e shows the release fence is needed (without
    /// it, a lookup proves a present item absent); the new versions make the lookup's
    /// validation fail however often twins carry the copy past its reads, which no model runs.
    #[inline(always)]
    fn remove_as<const A: u8>(&self, key: ItemKey) -> bool {
        let (a, b) = self.buckets_of(key);
        // Mutant `remove_unchanged_version`: both stripes held as a reader holds them (no fence,
        // versions unchanged), which models a remove that takes no stripe.
        if cfg!(loom_mutant = "remove_unchanged_version") {
            let guard = self.stripes.lock_pair_to_read(a, b);
            let removed = self.erase_first_match_as::<A>(a, b, key.fingerprint);
            if removed {
                guard.add_items(-1);
            }
            return removed;
        }
        let guard = self.stripes.lock_pair(a, b);
        let removed = self.erase_first_match_as::<A>(a, b, key.fingerprint);
        if removed {
            guard.add_items(-1);
        }
        removed
    }

    /// Erases the first copy of `fp` in bucket `a`, or else in `b`, under both buckets'
    /// stripes (`remove_as`); whether there was one.
    #[inline(always)]
    fn erase_first_match_as<const A: u8>(&self, a: usize, b: usize, fp: u64) -> bool {
        // Relaxed: we hold both stripes. Unmasked: only `first_match_as` and `erase_as`, which
        // look at lanes only, read them (see `probe_from`).
        let word_a = self.probe_as::<A>(a, Ordering::Relaxed);
        let word_b = self.probe_as::<A>(b, Ordering::Relaxed);
        let (in_a, in_b) = (
            self.first_match_as::<A>(&word_a, fp),
            self.first_match_as::<A>(&word_b, fp),
        );
        // Which bucket holds the copy is a coin toss: select without a branch.
        let use_a = in_a.is_some();
        let (bucket, word) = std::hint::select_unpredictable(use_a, (a, word_a), (b, word_b));
        let Some(position) = std::hint::select_unpredictable(use_a, in_a, in_b) else {
            return false;
        };
        // Relaxed: a lookup that sees this store also sees our lock (release fence) and
        // retries; one that does not see it still finds the copy we take away.
        self.erase_as::<A>(bucket, word, position, Ordering::Relaxed);
        true
    }
}
