//! Growth: a table that doubles in place, so that a lookup reads two buckets however far the
//! filter has grown (the body of a [`CuckooFilter`](crate::CuckooFilter) built with
//! [`growable`](crate::Builder::growable)).
//!
//! Each stored entry keeps a few bits of its item's hash beyond what chooses its bucket; a
//! doubling turns one of those bits into a bucket bit, so no item needs to be seen again.
//! Older entries therefore keep fewer bits, and the lane width is chosen so that the rate
//! stays at the target for the planned number of doublings (`width`); past them the table
//! still doubles, and the rate rises slowly (an entry with no tail bit left is copied into
//! both halves of its bucket, Aleph's rule).
//!
//! A doubling is spread over the inserts that follow it: the insert that doubles only adds the
//! new buckets, holding writers back for that moment, and each insert then splits two old
//! buckets (and those it touches), so no insert waits for a whole table to be rewritten.
//! Until every bucket is split, a lookup reads one bit more per bucket (whether it is split).
//!
//! `keys` says where an item lies at any size, `batch` overlaps the cache misses of many items, `table` holds the packed lanes and splits them
//! on a doubling, `doubling` spreads a doubling over the inserts after it, `kicks` places an
//! entry, along a cuckoo path when its buckets are full, `halving` undoes doublings for `shrink_to_fit`, `width` picks the lane width for the
//! target rate and the planned growth, `counts` keeps the per-shard counters, `snapshot`
//! saves and restores a table (validated, in a format of its own).

mod batch;
mod counts;
mod doubling;
mod halving;
mod keys;
mod kicks;
#[cfg(loom)]
mod loom_hook;
mod snapshot;
mod table;
mod width;

use std::fmt;
use std::sync::OnceLock;

use crossbeam_utils::CachePadded;

use counts::{Counts, Totals};

use crate::cuckoo_path::{NoRoom, Placed, SearchLimits};
use crate::error::InsertError;
use crate::freeze::{self, Frozen, Nested};
use crate::optimistic_read::{retry_read, Lookup, READ_ATTEMPTS};
use crate::params;
use crate::stripe::StripeSet;
use crate::sync::{AtomicBool, AtomicU64, GrowLock, Ordering};
use crate::table::BucketWords;
use keys::{field_tail_bits, Key, KeyMap, Pos, ANCHOR_BITS};
use table::{Located, Table, LANES};

pub(crate) use snapshot::{expected_len as snapshot_len, MAGIC};
pub(crate) use width::{build, doublings_to_reach, PLANNED_DOUBLINGS};

/// Entries a table takes before it doubles: 95 % of its lanes (four-lane buckets fill to
/// about 97 % before an insert fails).
const MAX_LOAD: f64 = 0.95;

/// Most doublings: the table's segment cells and the bit stream of a key (a doubling uses one
/// stream bit, and a lane's tail bits follow them). A first table of two buckets doubled this
/// often has 2^33 buckets, more memory than a machine has at any lane width: an insert that
/// would double past it fails as a doubling whose memory was refused.
pub(crate) const MAX_DOUBLINGS: u32 = 32;

/// How far an insert's search for a cuckoo path goes before the table doubles: as a fixed
/// table's.
#[cfg(not(loom))]
const PATH_LIMITS: SearchLimits = SearchLimits::DEFAULT;
/// Under loom, a few buckets (models place their items so that paths are short).
#[cfg(loom)]
const PATH_LIMITS: SearchLimits = SearchLimits {
    nodes: 24,
    depth: 3,
};

const ANCHOR_MASK: u64 = (1 << ANCHOR_BITS) - 1;

/// Buckets from which a failed search below half the doubling load refuses the item instead
/// of doubling (see `insert_key`). In a smaller table a few distinct items can share both of
/// an item's buckets and the few around them (nine over one pair of buckets of a table of 6:
/// rare, but found by randomized fills), which the next bit parts; and however often such a
/// table doubles for jams, it stops at this size: 4,096 buckets of at most 32-bit lanes are
/// 64 KiB, twice the lock stripes every growable filter holds.
const JAMS_REFUSED_FROM: u64 = 4096;

/// A table that doubles in place, with its stripes, counters and doubling state. Shared by
/// reference: inserts and removes lock only the stripes of the buckets they change, and
/// lookups never wait (they read optimistically and validate against the stripes' versions).
pub(crate) struct Doubling {
    keys: KeyMap,
    table: Table,
    /// The writers' locks and the lookups' versions, keyed by `Table::stripe_key`.
    stripes: StripeSet,
    /// Doublings begun: the table has `base · 2^doublings` buckets. Changed only under the
    /// grow lock with every writer held back (a freeze of `stripes`).
    doublings: AtomicU64,
    /// Per doubling `d ≥ 1`, a bit per bucket of the table before it (bucket
    /// `home + base · high`), set until that bucket is split. Cleared under the bucket's
    /// stripe; a finished doubling's bitmap is all zeros, and its pages are given back.
    bitmaps: Box<[OnceLock<BucketWords>]>,
    /// Whether the latest doubling has buckets left to split: set when it is published,
    /// cleared (`Release`) by the split of its last bucket. Read by every lookup, written twice
    /// a doubling (`left` and `next` change as buckets are split, on lines of their own).
    splitting: AtomicBool,
    /// Words of the latest doubling's bitmap with a bucket not split yet (0 when it is
    /// finished): the split that clears a word's last bit counts it down, so writers share
    /// this line once per 64 buckets, not once per split.
    left: CachePadded<AtomicU64>,
    /// The next old bucket the inserts split, in order.
    next: CachePadded<AtomicU64>,
    /// Bytes of finished doublings' bitmaps that could not be given back (small ones).
    kept_bitmap_bytes: AtomicU64,
    /// The doublings the lane width keeps the target rate for; the table doubles past them.
    planned: u32,
    /// Tail bits of a new entry: the lane width less the marker and the anchor.
    tail_bits: u32,
    /// Items, lanes in use and entries by tail length.
    counts: Counts,
    /// Per doubling count, the lanes in use at which the table doubles (`load_limit`):
    /// computed once, since every insert compares against it.
    load_limits: [u64; MAX_DOUBLINGS as usize + 1],
    target: f64,
    /// A seed the snapshot format keeps (the kick walks' random choices used it once; cuckoo
    /// paths are searched breadth first and need none).
    rng: u64,
    /// Serializes doublings, snapshots and clones (each freezes the stripes).
    grow: GrowLock,
}

impl Doubling {
    #[inline(always)]
    fn key(&self, hash: u64) -> Key {
        self.keys.key(hash)
    }

    /// Doublings begun.
    #[inline(always)]
    fn doublings_now(&self) -> u32 {
        // Acquire: pairs with the Release store in `double`, so the segment and the bitmap of
        // every doubling counted here are set, and `left` is at least as new.
        self.doublings.load(Ordering::Acquire) as u32
    }

    /// Looks the item of `hash` up. Never waits: a lookup that keeps meeting writers in its
    /// buckets is `Unproven` ("maybe present") after a bounded number of attempts.
    #[inline]
    pub(crate) fn lookup_hash(&self, hash: u64) -> Lookup {
        self.lookup_retried(hash, &self.key(hash))
    }

    /// Looks `key` (the key of `hash`) up: optimistic attempts (`lookup`), at most
    /// `READ_ATTEMPTS` of them.
    #[inline(always)]
    fn lookup_retried(&self, hash: u64, key: &Key) -> Lookup {
        Lookup::of(retry_read(READ_ATTEMPTS, |_| {
            self.read_pair(hash, key, Matches)
        }))
    }

    /// One optimistic read of `key`'s (the key of `hash`) two buckets by `read`: its answer,
    /// or `None` when the answer cannot be trusted (a writer changed one of the buckets, or
    /// the table doubled) unless `read` says it needs no proof (a hit: answering "maybe
    /// present" is always allowed).
    #[inline(always)]
    fn read_pair<R: PairRead>(&self, hash: u64, key: &Key, read: R) -> Option<R::Out> {
        let k = self.doublings_now();
        // Acquire: a `false` stored by the last split of doubling `k` makes every split of it
        // visible.
        if k > 0 && self.splitting.load(Ordering::Acquire) {
            return self.read_pair_splitting(hash, k, read);
        }
        // In a table larger than the caches, the second bucket's line is on its way while the
        // first is tested: a lookup that needs it then waits for one miss, not two. (Two
        // copies of the read, so that neither pays for the other's choice.)
        if self.table.beyond_caches(k) {
            self.read_pair_unsplitting::<R, true>(key, k, read)
        } else {
            self.read_pair_unsplitting::<R, false>(key, k, read)
        }
    }

    /// `read_pair` when no doubling is splitting buckets; with `EARLY`, the second bucket's
    /// line is asked for before the first bucket is tested.
    #[inline(always)]
    fn read_pair_unsplitting<R: PairRead, const EARLY: bool>(
        &self,
        key: &Key,
        k: u32,
        read: R,
    ) -> Option<R::Out> {
        let at = [key.pos(0, k), key.pos(1, k)];
        // The seqlock read under one stripe, the first bucket's: its version, the buckets, the
        // version again. One suffices, as in a fixed table: every write that can take the
        // item's entry out of either bucket holds the stripes of both (a move between them,
        // a remove of a matching entry, whose other bucket is the item's other bucket), and a
        // split changes the doubling count first (`same_size`). Writes under the second
        // bucket's stripe alone fill empty lanes and keep every stored lane as it was.
        let (first_at, stripe_key) = self.table.located_with_stripe_key(at[0]);
        let stripe = self.stripes.of(stripe_key);
        let begun = stripe.read_begin();
        let early = EARLY.then(|| {
            let second = self.table.located(at[1]);
            second.prefetch();
            second
        });
        // A hit needs no proof: most items are found in their first bucket, without reading
        // the second.
        let first = read.bucket(self, key, 0, first_at, k);
        if R::settled(first) {
            return Some(first);
        }
        let second = early.unwrap_or_else(|| self.table.located(at[1]));
        let out = R::merge(first, read.bucket(self, key, 1, second, k));
        if R::settled(out) {
            return Some(out);
        }
        (stripe.read_validate(begun) && self.same_size(k)).then_some(out)
    }

    /// Whether the doubling count is still `k`, for a lookup that read it before its bucket
    /// loads.
    #[inline(always)]
    fn same_size(&self, k: u32) -> bool {
        // Relaxed: ordered after the Acquire bucket loads. A bucket split by a newer doubling
        // was split after that doubling was published (the splitter read the count with
        // Acquire, then took its stripes and their release fence), so a bucket load that sees
        // the split makes this load see the new count.
        cfg!(loom_mutant = "doubling_reader_ignores_doublings")
            || self.doublings.load(Ordering::Relaxed) as u32 == k
    }

    /// `read_pair` while doubling `k` splits buckets: an old bucket not split yet is read as
    /// the table before the doubling, and an answer that needs proof is validated against
    /// every stripe read under (a split of either side holds only that side's).
    ///
    /// Out of line, and given the hash rather than the key: the caller's key then stays in
    /// registers on the path that reads a finished table.
    #[cold]
    #[inline(never)]
    fn read_pair_splitting<R: PairRead>(&self, hash: u64, k: u32, read: R) -> Option<R::Out> {
        let key = &self.key(hash);
        // The stripes read under, with the version each had (at most two per side).
        let mut begun = [(0usize, 0u64); 4];
        let mut count = 0;
        let begin = |begun: &mut [(usize, u64); 4], count: &mut usize, stripe_key: usize| {
            begun[*count] = (stripe_key, self.stripes.of(stripe_key).read_begin());
            *count += 1;
        };
        let mut out = [None; 2];
        for (side, out) in out.iter_mut().enumerate() {
            let old = key.pos(side, k - 1);
            // The old bucket's stripe first: a split clears the bucket's bit while it holds
            // that stripe, so a bit read after this is checked by its validation.
            begin(&mut begun, &mut count, self.table.stripe_key(old));
            let (pos, doublings) = if self.is_unsplit(k, old) {
                if cfg!(loom_mutant = "doubling_unvalidated_old") {
                    // The broken variant: an unsplit bucket's read taken as proven.
                    count -= 1;
                }
                (old, k - 1)
            } else {
                let pos = key.pos(side, k);
                if pos != old {
                    begin(&mut begun, &mut count, self.table.stripe_key(pos));
                }
                (pos, k)
            };
            *out = Some(read.bucket(self, key, side, self.table.located(pos), doublings));
        }
        let out = R::merge(out[0]?, out[1]?);
        if R::settled(out) {
            return Some(out);
        }
        let unchanged = begun[..count]
            .iter()
            .all(|&(stripe_key, version)| self.stripes.of(stripe_key).read_validate(version));
        (unchanged && self.same_size(k)).then_some(out)
    }

    /// Whether the old bucket `old` of doubling `k` (in progress) is not split yet.
    #[inline(always)]
    fn is_unsplit(&self, k: u32, old: Pos) -> bool {
        let index = self.old_index(old);
        // A doubling in progress has its bitmap set before it is published. A copy of a filter
        // (a clone, a restore) made after doubling `k` finished has no bitmap `k`: every bucket
        // of it is split. (A thread that read the count `k` may see the flag of doubling
        // `k + 1`; its count check fails later.)
        let Some(bitmap) = self.bitmaps[k as usize].get() else {
            return false;
        };
        // Acquire: pairs with the Release clear in `split_old`; a lookup that sees the bucket
        // split then begins the new bucket's stripe after the split took it.
        bitmap[(index / 64) as usize].load(Ordering::Acquire) >> (index % 64) & 1 == 1
    }

    /// The index of a bucket of the table before the latest doubling.
    #[inline(always)]
    fn old_index(&self, old: Pos) -> u64 {
        old.home + self.table.base() * old.high
    }

    /// Whether a lane of the bucket at `at` (whose entries have seen `doublings` doublings)
    /// matches `key` on `side`.
    #[inline(always)]
    fn bucket_matches(&self, key: &Key, side: usize, at: Located<'_>, doublings: u32) -> bool {
        // The item's entry as it would be with every bit of its stream: an entry matches when
        // it agrees with this below its marker (its highest set bit), which shifting the
        // difference up by the entry's leading zeros, then one more, tests at once.
        let full = ((key.stream[side] >> doublings) << ANCHOR_BITS) | key.anchor;
        let matches = |entry: u64| {
            // An empty lane, or a lane read torn by a writer with no marker, matches nothing.
            // (`| 1` keeps the shift below 64 for an empty lane; a lane with a marker has the
            // same leading zeros either way.)
            let marker_to_top = (entry | 1).leading_zeros();
            (entry > ANCHOR_MASK) & (((entry ^ full) << marker_to_top) << 1 == 0)
        };
        if !self.table.is_narrow() {
            let entries = self.table.entries_at(at);
            // Most lanes of an absent item's buckets differ in the anchor: test those first.
            if entries.iter().all(|e| e & ANCHOR_MASK != key.anchor) {
                return false;
            }
            return entries
                .into_iter()
                .fold(false, |hit, entry| hit | matches(entry));
        }
        // A narrow bucket's four anchors are tested at once; only the lanes that agree (one,
        // for most present items; none, for most absent ones) are tested in full.
        let lanes = self.table.narrow_bucket_at(at);
        let mut agree = self.table.anchors_agree(lanes, key.anchor);
        while agree != 0 {
            // The lane's first bit: its flag lies `ANCHOR_BITS` above it.
            let first = agree.trailing_zeros() - ANCHOR_BITS;
            if matches((lanes >> first) & self.table.lane_mask()) {
                return true;
            }
            agree &= agree - 1;
        }
        false
    }

    /// The lane of `key`'s bucket on `side` holding its longest matching entry, with that
    /// entry's tail length. The bucket must be split, its stripe held.
    fn matching_lane(&self, key: &Key, side: usize, k: u32) -> Option<(u64, u32)> {
        let pos = key.pos(side, k);
        let mut best = None;
        for (lane, entry) in (0..LANES).zip(self.table.entries(pos)) {
            if entry == 0 || entry & ANCHOR_MASK != key.anchor {
                continue;
            }
            let field = entry >> ANCHOR_BITS;
            let tail = field_tail_bits(field);
            if field == key.field(side, k, tail) && best.is_none_or(|(_, longest)| tail > longest) {
                best = Some((lane, tail));
            }
        }
        best
    }

    /// How many lanes of the bucket at `at` (whose entries have seen `doublings`
    /// doublings) match `key` on `side`.
    fn matching_lanes(&self, key: &Key, side: usize, at: Located<'_>, doublings: u32) -> usize {
        self.table
            .entries_at(at)
            .into_iter()
            .filter(|&entry| {
                // A lane read torn by a writer may have no marker: it matches nothing, and the
                // read's validation fails.
                entry & ANCHOR_MASK == key.anchor && entry >> ANCHOR_BITS != 0 && {
                    let field = entry >> ANCHOR_BITS;
                    field == key.field(side, doublings, field_tail_bits(field))
                }
            })
            .count()
    }

    /// Counts `items` items and `lanes` lanes of entries with `tail` tail bits, for a writer
    /// that holds the stripe of the bucket at `pos`.
    fn count(&self, pos: Pos, items: i64, lanes: i64, tail: u32) {
        let stripe = self.stripes.index_of(self.table.stripe_key(pos));
        self.counts
            .add(self.counts.shard_for(stripe), items, lanes, tail);
    }

    /// Whether the doubling count is still `k`, for a writer that holds stripes it locked
    /// after seeing `k` doublings.
    fn still(&self, k: u32) -> bool {
        // Relaxed: a doubling is published while every writer is held back (a freeze, which
        // waits for our stripes), and our admission read the freeze's gate open with Acquire
        // after it: so this reads the count as it is while we hold the stripes.
        cfg!(loom_mutant = "doubling_writer_ignores_doublings")
            || self.doublings.load(Ordering::Relaxed) as u32 == k
    }

    /// Inserts one copy of the item of `hash`, doubling the table when it is full.
    ///
    /// Every item stored before a failed insert is still stored, and `len` is unchanged. The
    /// table may have doubled for it, and a doubling in progress may have split more buckets;
    /// neither changes an answer.
    /// - [`InsertError::ItemBucketsFull`]: both of the item's buckets hold only copies of it
    ///   (one item is stored at most eight times), or, below 90 % of the doubling load, only
    ///   copies of one or two items (hot keys), which a doubling parts only by chance; or no
    ///   room could be made while a table of `JAMS_REFUSED_FROM` buckets or more is below half
    ///   its doubling load (only jams, some out of sight of these buckets, fail a search
    ///   there).
    /// - [`InsertError::GrowthFailed`]: the new buckets could not be allocated.
    pub(crate) fn insert(&self, hash: u64) -> Result<(), InsertError> {
        self.insert_key(&self.key(hash), false).map(|_| ())
    }

    /// Inserts the item of `hash` unless a lane matches it (set semantics): `Ok(true)` if it
    /// was added. Of several threads adding the same item this way, exactly one gets
    /// `Ok(true)`.
    pub(crate) fn insert_unique(&self, hash: u64) -> Result<bool, InsertError> {
        self.insert_key(&self.key(hash), true)
    }

    /// Inserts `key`'s entry (unless `unique` and a lane matches it): `Ok(true)` if stored.
    fn insert_key(&self, key: &Key, unique: bool) -> Result<bool, InsertError> {
        // In a table larger than the caches, both buckets' lines are on their way while the
        // insert claims its splits and takes its stripes (a hint: a doubling in between only
        // wastes it).
        let k = self.doublings_now();
        if self.table.beyond_caches(k) {
            self.table.prefetch(key.pos(0, k));
            self.table.prefetch(key.pos(1, k));
        }
        self.claim_splits(key);
        // Whether a failed search below half the doubling load was tried again (see below).
        let mut searched_again = false;
        loop {
            let k = self.doublings_now();
            self.split_buckets_of(key, k);
            let limit = self.load_limit(k);
            if self.counts.occupied_at_least(limit) {
                if unique {
                    match self.present(key, k) {
                        Some(true) => return Ok(false),
                        Some(false) => {}
                        None => continue,
                    }
                }
                // A hot key is refused before anything grows for it.
                if self.buckets_hold_only(key, k) {
                    return Err(InsertError::ItemBucketsFull);
                }
                self.double(k)?;
                continue;
            }
            match self.place(key, k, unique) {
                Ok(Placed::Inserted) => return Ok(true),
                Ok(Placed::AlreadyPresent) => return Ok(false),
                Ok(Placed::Retry) => continue,
                // A path searched in a table that has doubled since: the refusal rules below
                // would judge the old table.
                Err(NoRoom) if self.doublings_now() != k => continue,
                Err(NoRoom) => {}
            }
            // A doubling separates entries of different items (by their next bit), but never
            // copies of one item: buckets that only copies of this item fill stay full, and
            // so, unless the table is nearly due (90 % of the doubling load), do buckets that
            // copies of one or two items fill (hot keys: an item shares both of a hot key's
            // buckets one time in 32 of those it shares one with, and only a doubling's bit
            // can part them, one time in two). Doubling for those would cost memory per hot
            // key, so the item is refused. Nor does a table of `JAMS_REFUSED_FROM` buckets or
            // more grow for a failed search below half its doubling load, where only jams
            // (some not seen from these two buckets, as when many hot keys share the buckets
            // around them) make searches fail: so a jam costs at most one doubling there, and
            // the table stays at least a quarter full. Any other failed search doubles the
            // table: the items in the way are parted by the next bit.
            let occupied = self.occupied();
            if self.buckets_hold_only(key, k)
                || (occupied < limit * 9 / 10 && self.buckets_held_by_hot_keys(key, k))
            {
                return Err(InsertError::ItemBucketsFull);
            }
            if occupied < limit / 2 {
                // A search that other writers' moves kept from finishing (its plans went stale
                // round after round, or it read a bucket mid-move) fails like a jam: one more
                // try tells them apart, since a jam fails again.
                if !searched_again {
                    searched_again = true;
                    continue;
                }
                if self.table.buckets(k) >= JAMS_REFUSED_FROM {
                    return Err(InsertError::ItemBucketsFull);
                }
            }
            self.double(k)?;
        }
    }

    /// Whether a lane of `key`'s (split) buckets matches it, read under their stripes; `None`
    /// if the table doubled since it had `k` doublings.
    fn present(&self, key: &Key, k: u32) -> Option<bool> {
        let _held = self.lock_pair(key.pos(0, k), key.pos(1, k));
        if !self.still(k) {
            return None;
        }
        Some(self.matching_lane(key, 0, k).is_some() || self.matching_lane(key, 1, k).is_some())
    }

    /// Locks the stripes of the buckets at `a` and `b` for writing.
    fn lock_pair(&self, a: Pos, b: Pos) -> crate::stripe::PairGuard<'_> {
        self.stripes
            .lock_pair(self.table.stripe_key(a), self.table.stripe_key(b))
    }

    /// Removes one copy of the item of `hash`; `false` if none matched.
    ///
    /// Of the entries that match, the one with the most bits left is removed: any other item
    /// that matches it also matches every shorter one, so the remove cannot make an inserted
    /// item unfindable.
    pub(crate) fn remove(&self, hash: u64) -> bool {
        let key = self.key(hash);
        loop {
            let k = self.doublings_now();
            self.split_buckets_of(&key, k);
            let at = [key.pos(0, k), key.pos(1, k)];
            let _held = self.lock_pair(at[0], at[1]);
            if !self.still(k) {
                continue;
            }
            let (side, (lane, tail)) = match (
                self.matching_lane(&key, 0, k),
                self.matching_lane(&key, 1, k),
            ) {
                (None, None) => return false,
                (Some(a), None) => (0, a),
                (None, Some(b)) => (1, b),
                (Some(a), Some(b)) => {
                    if b.1 > a.1 {
                        (1, b)
                    } else {
                        (0, a)
                    }
                }
            };
            self.table.set(at[side], lane, 0);
            // Always counted: a remove of an item never inserted (which may take a copy left
            // behind by a doubling, see `table`, that no item counts) can take the count below
            // the items stored, and `len` reads a negative sum as 0. Deciding from the sum
            // would race with other writers' counts.
            self.count(at[0], -1, -1, tail);
            return true;
        }
    }

    /// Entries in the item of `hash`'s two buckets that match it: its copies, and those of
    /// items whose entries match it. Read like a lookup, optimistically and validated, so a
    /// save's freeze does not hold it up (an old bucket not split yet is counted as it is:
    /// its split leaves the item's half as many matching entries). A count has no "maybe" to
    /// answer with, so one that keeps colliding with writers goes on trying, yielding to them
    /// after the lookups' number of attempts.
    pub(crate) fn count_copies(&self, hash: u64) -> usize {
        let key = self.key(hash);
        loop {
            if let Some(copies) = retry_read(READ_ATTEMPTS, |_| self.read_pair(hash, &key, Copies))
            {
                return copies;
            }
            std::thread::yield_now();
        }
    }

    /// Removes every item, keeping the table's size. Callable through an `Arc` while other
    /// threads use the filter.
    ///
    /// Consistent like a save: writers wait until
    /// the clear is over, so an insert either ends before it (and is cleared) or starts after
    /// it (and stays). Lookups do not wait; one that overlaps the clear may still find some of
    /// the items being cleared. The table keeps its size (its memory cannot be freed while
    /// other threads may read it), and a doubling in progress is finished.
    ///
    /// # Panics
    ///
    /// If called by the writer of a save of this same filter (it would store half-cleared
    /// data).
    pub(crate) fn clear(&self) {
        let _frozen = self.frozen().unwrap_or_else(|nested| nested.panic());
        // Relaxed throughout: no writer runs (the freeze). Lookups that overlap may see
        // items go, in any order: every one of them is being removed.
        self.table.clear();
        let k = self.doublings.load(Ordering::Relaxed) as usize;
        if self.left.load(Ordering::Relaxed) > 0 {
            if let Some(bitmap) = self.bitmaps[k].get() {
                // Every bucket empty, so every bucket split: lookups read the new table.
                for word in bitmap.iter() {
                    word.store(0, Ordering::Relaxed);
                }
                self.give_back_bitmap(k);
            }
        }
        self.splitting.store(false, Ordering::Relaxed);
        self.left.store(0, Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        self.counts.reset(&Totals::default());
    }

    /// Items stored (inserts less removes).
    pub(crate) fn len(&self) -> usize {
        self.counts.items()
    }

    /// Items the table takes before its next doubling.
    pub(crate) fn capacity(&self) -> usize {
        let totals = self.totals();
        let extra = totals.occupied.saturating_sub(totals.items);
        let limit = self.load_limit(self.doublings_now());
        usize::try_from(limit.saturating_sub(extra)).unwrap_or(usize::MAX)
    }

    /// The lanes in use at which the table after `k` doublings doubles.
    #[inline(always)]
    fn load_limit(&self, k: u32) -> u64 {
        self.load_limits[k as usize]
    }

    /// Lanes in use (exact while no writer runs).
    fn occupied(&self) -> u64 {
        self.counts.occupied()
    }

    /// Every counter (exact while no writer runs).
    fn totals(&self) -> Totals {
        self.counts.totals()
    }

    /// Makes the table resident now (`Builder::prefault`): the first table's buckets, before
    /// any insert touches them.
    pub(crate) fn fault_in(&mut self) {
        self.table.fault_in();
    }

    /// Doublings so far.
    pub(crate) fn doublings(&self) -> u32 {
        self.doublings_now()
    }

    /// The doublings the lane width keeps the target rate for (at least what the builder
    /// planned). The table doubles past them, and its rate then rises slowly.
    #[cfg(test)]
    pub(crate) fn planned_doublings(&self) -> u32 {
        self.planned
    }

    /// Buckets in the table (four lanes each).
    pub(crate) fn buckets(&self) -> u64 {
        self.table.buckets(self.doublings_now())
    }

    /// Bits per lane: one marker bit, then the entry's bits (a new entry uses all of them).
    pub(crate) fn lane_bits(&self) -> u32 {
        self.table.width()
    }

    /// The false-positive rate the filter was built for.
    pub(crate) fn target_false_positive_rate(&self) -> f64 {
        self.target
    }

    /// The expected false-positive rate of a lookup of an absent item now, from the bits every
    /// stored entry has left: `2 · Σ 2^-(bits of an entry) / buckets`. It rises as the filter
    /// fills and doubles, and stays at or below the target for the planned doublings.
    pub(crate) fn false_positive_rate(&self) -> f64 {
        let by_tail = self.totals().by_tail;
        let sum: f64 = (0..32)
            .map(|tail| by_tail[tail] as f64 * (-f64::from(ANCHOR_BITS + tail as u32)).exp2())
            .sum();
        2.0 * sum / self.buckets() as f64
    }

    /// Bytes of memory the filter holds: the table, the bitmap of a doubling in progress, the
    /// stripes and counters, the filter itself, and what finished doublings' bitmaps keep.
    ///
    /// A doubling's bitmap (a bit per bucket it splits) cannot be freed while lookups on other
    /// threads may read it; once the doubling is finished its pages go back to the kernel
    /// where it has pages of its own (on Linux, bitmaps of 16 KiB or more). Smaller ones stay,
    /// at most 32 KiB in all; elsewhere every bitmap stays, about one bit per bucket. A clone
    /// does not copy finished doublings' bitmaps.
    pub(crate) fn memory_usage(&self) -> usize {
        let k = self.doublings_now() as usize;
        let splitting = if self.is_doubling() {
            self.bitmaps[k].get().map_or(0, |b| b.len() * 8)
        } else {
            0
        };
        let cells = (self.bitmaps.len() + MAX_DOUBLINGS as usize + 1)
            * std::mem::size_of::<OnceLock<BucketWords>>();
        self.table.bytes()
            + splitting
            + self.kept_bitmap_bytes.load(Ordering::Relaxed) as usize
            + self.stripes.bytes()
            + self.counts.bytes()
            + cells
            + std::mem::size_of::<Self>()
    }
}

/// What one optimistic read of an item's two buckets computes from each
/// (`Doubling::read_pair`).
trait PairRead: Copy {
    type Out: Copy;
    /// Reads the bucket at `at`, whose entries have seen `doublings` doublings, on `side`.
    fn bucket(
        self,
        table: &Doubling,
        key: &Key,
        side: usize,
        at: Located<'_>,
        doublings: u32,
    ) -> Self::Out;
    fn merge(a: Self::Out, b: Self::Out) -> Self::Out;
    /// Whether `out` stands without validating the read (a hit).
    fn settled(out: Self::Out) -> bool;
}

/// A lookup: whether a lane matches.
#[derive(Clone, Copy)]
struct Matches;

impl PairRead for Matches {
    type Out = bool;
    #[inline(always)]
    fn bucket(self, t: &Doubling, key: &Key, side: usize, at: Located<'_>, k: u32) -> bool {
        t.bucket_matches(key, side, at, k)
    }
    #[inline(always)]
    fn merge(a: bool, b: bool) -> bool {
        a | b
    }
    #[inline(always)]
    fn settled(hit: bool) -> bool {
        hit
    }
}

/// A count: how many lanes match.
#[derive(Clone, Copy)]
struct Copies;

impl PairRead for Copies {
    type Out = usize;
    fn bucket(self, t: &Doubling, key: &Key, side: usize, at: Located<'_>, k: u32) -> usize {
        t.matching_lanes(key, side, at, k)
    }
    fn merge(a: usize, b: usize) -> usize {
        a + b
    }
    fn settled(_: usize) -> bool {
        false
    }
}

/// What a builder or a snapshot supplies to make a filter.
struct Parts {
    keys: KeyMap,
    table: Table,
    /// Lock stripes: `largest_table_stripes` of the first table (loom models use fewer).
    stripes: usize,
    planned: u32,
    tail_bits: u32,
    target: f64,
    doublings: u32,
    /// The latest doubling's bitmap (a bit set per old bucket not split yet) and the next old
    /// bucket to split, if it is in progress.
    splitting: Option<(BucketWords, u64)>,
    totals: Totals,
    rng: u64,
}

impl Doubling {
    /// A table of `parts`.
    fn from_parts(parts: Parts) -> Self {
        let bitmaps: Box<[OnceLock<BucketWords>]> =
            (0..=MAX_DOUBLINGS).map(|_| OnceLock::new()).collect();
        let (mut next, mut left) = (0, 0);
        if let Some((bitmap, at)) = parts.splitting {
            // Relaxed: the bitmap is not shared yet.
            let words = bitmap.iter().filter(|w| w.load(Ordering::Relaxed) != 0);
            (next, left) = (at, words.count() as u64);
            let _ = bitmaps[parts.doublings as usize].set(bitmap);
        }
        let base = parts.table.base() as f64;
        let load_limits = std::array::from_fn(|k| {
            // `base · 2^k` exactly: a power of two scales without rounding.
            let buckets = base * 2f64.powi(k as i32);
            (buckets * LANES as f64 * MAX_LOAD) as u64
        });
        Doubling {
            stripes: StripeSet::new(parts.stripes),
            keys: parts.keys,
            table: parts.table,
            doublings: AtomicU64::new(u64::from(parts.doublings)),
            bitmaps,
            splitting: AtomicBool::new(left > 0),
            left: CachePadded::new(AtomicU64::new(left)),
            next: CachePadded::new(AtomicU64::new(next)),
            kept_bitmap_bytes: AtomicU64::new(0),
            planned: parts.planned,
            tail_bits: parts.tail_bits,
            counts: Counts::new(&parts.totals),
            load_limits,
            target: parts.target,
            rng: parts.rng,
            grow: GrowLock::new(),
        }
    }
}

impl Doubling {
    /// The filter frozen (see `freeze::freeze`): under the grow lock (no doubling begins),
    /// with the stripes frozen (writers wait; lookups go on) until the guard is dropped.
    /// [`Nested`], taking nothing, on a thread that is freezing this filter already (from
    /// inside a save's writer).
    fn frozen(&self) -> Result<Frozen<'_, StripeSet>, Nested> {
        freeze::freeze(self, &self.grow, || [&self.stripes], StripeSet::freeze)
    }
}

impl Doubling {
    /// A copy of the table as it is at one instant: writers on other threads wait while it
    /// is copied (lookups do not).
    ///
    /// # Panics
    ///
    /// If called by the writer of a save of this same filter, or when memory runs out.
    pub(crate) fn deep_copy(&self) -> Self {
        let _frozen = self.frozen().unwrap_or_else(|nested| nested.panic());
        // Relaxed: no writer runs (the freeze, which orders us after every writer).
        let doublings = self.doublings.load(Ordering::Relaxed) as u32;
        let left = self.left.load(Ordering::Relaxed);
        let splitting = (left > 0).then(|| {
            let bitmap = self.bitmaps[doublings as usize]
                .get()
                .expect("a doubling's bitmap is set before it is published");
            (
                table::copy_words(bitmap, false),
                self.next.load(Ordering::Relaxed),
            )
        });
        Doubling::from_parts(Parts {
            stripes: self.stripes.count(),
            keys: self.keys.clone(),
            table: self.table.copy(),
            planned: self.planned,
            tail_bits: self.tail_bits,
            target: self.target,
            doublings,
            splitting,
            totals: self.counts.totals(),
            rng: self.rng,
        })
    }
}

/// Stripes for a first table of `base` buckets: the crate's rule (`params::stripes_for`) for
/// the largest table it may double to, so that writers on many threads rarely meet once it
/// has grown.
pub(super) fn largest_table_stripes(base: u64) -> usize {
    let largest = u128::from(base) << MAX_DOUBLINGS;
    params::stripes_for(usize::try_from(largest).unwrap_or(usize::MAX))
}

impl fmt::Debug for Doubling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Relaxed: a snapshot for display, approximate while writers run.
        let doublings = self.doublings.load(Ordering::Relaxed) as u32;
        let items = self.counts.items();
        f.debug_struct("Doubling")
            .field("items", &items)
            .field("buckets", &self.table.buckets(doublings))
            .field("lane_bits", &self.table.width())
            .field("doublings", &doublings)
            .field(
                "doubling_in_progress",
                &self.splitting.load(Ordering::Relaxed),
            )
            .field("planned_doublings", &self.planned)
            .field("target_false_positive_rate", &self.target)
            .finish_non_exhaustive()
    }
}
