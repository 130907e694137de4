//! Levels: a filter that grows by appending tables instead of failing when full.
//!
//! Level 0 is built with the filter. When an insert finds the newest level full and growth is
//! configured, a new level of `factor ×` the previous capacity is added under a cold-path lock
//! and published by a Release store of the level count. A large level is prepared ahead: once
//! the newest level is near capacity, a background thread allocates the next one and faults in
//! its pages, so the insert that adds it only publishes it (see `prepare_next`).
//!
//! Levels are append-only and never freed while the filter is shared (only
//! `shrink_to_fit(&mut self)` drops empty ones), so readers need no reclamation scheme and
//! never wait: they load the count and look at every published level but the released ones.
//!
//! An older level found empty may be *released* (`release_empty_levels`): frozen, checked to
//! be all zeros, marked, and its memory given back to the OS while it stays mapped (it reads
//! as zeros). No writer stores into a released level again (an insert that finds it released
//! under its stripes retries at the newest level, see `Table::release_if_empty`), so lookups
//! and removes skip it: it has nothing to find. The newest level is never released.
//! `shrink_to_fit` then narrows the oldest live level's fingerprints to level 0's width once
//! every level below it is released (see `narrow_oldest_live_level`).
//!
//! Inserts go to the newest level; lookups, counts and removes look at every level, newest
//! first. `insert_unique` uses the item's level-0 bucket pair as a gate: holding its stripes,
//! no other `insert_unique` of the same item can run, whatever level it would insert into.
//! Locks are always taken in (level, stripe) order, so the gate cannot deadlock.

use std::sync::OnceLock;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::bucket_layout::{Bucket, BucketLayout, LayoutKind};
use crate::error::InsertError;
use crate::freeze::{self, Frozen, Mark, Nested};
use crate::hashing::ItemKey;
use crate::optimistic_read::Lookup;
use crate::params;
use crate::sync::{AtomicU64, AtomicUsize, GrowLock, Ordering};
use crate::table::{
    Limits, Multiset, NoRoom, PairState, Placed, Table, TableShape, Unique, BATCH, PREFETCH_AHEAD,
};

/// Levels whose reads one pass of `lookup_levels` begins before validating any: a filter grown
/// 30,000-fold by doubling (16 levels) in one pass, with their versions in two cache lines.
const PROBED: usize = 16;

/// How each level's fingerprint width is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum WidthRule {
    /// Every level uses this width.
    Fixed(u32),
    /// Widths follow from the filter's target false-positive rate, split over the levels by
    /// the harmonic budget (see `GrowthPlan::level_rate`).
    Rate(f64),
    /// Widths follow from the target rate split by the budget of earlier builds: half of it
    /// geometrically, half evenly (see `GrowthPlan::level_rate`). Their snapshots store only
    /// the plan, and each level's shape must be the one it derives, so they load with it and
    /// grow on with it.
    SplitRate(f64),
}

/// Why a level cannot be built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LevelError {
    /// Its capacity overflows or needs more than the largest table.
    TooLarge { items: usize },
    /// No fingerprint width reaches its share of the rate.
    Unreachable { rate: f64 },
}

/// Everything needed to derive the shape of any level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GrowthPlan {
    /// Capacity multiplier of each new level; 0 means the filter never grows.
    pub(crate) factor: u32,
    /// Most levels, the first included.
    pub(crate) max_levels: u32,
    /// Capacity of level 0, in items.
    pub(crate) base_capacity: usize,
    pub(crate) width: WidthRule,
    /// How every level lays out its buckets.
    pub(crate) layout: LayoutKind,
}

impl GrowthPlan {
    /// The target false-positive rate of the whole filter, if its widths follow one.
    pub(crate) fn target_rate(&self) -> Option<f64> {
        match self.width {
            WidthRule::Fixed(_) => None,
            WidthRule::Rate(rate) | WidthRule::SplitRate(rate) => Some(rate),
        }
    }

    /// Whether levels can be added: a factor, and room for more than one level (a growing
    /// filter limited to one level is a fixed filter, and is sized and rated as one).
    pub(crate) fn grows(&self) -> bool {
        self.factor > 0 && self.max_levels > 1
    }

    /// The share of the target rate `P` that level `level` may use: its fingerprint width is
    /// the narrowest whose expected rate at the sizing load is within it (and no narrower than
    /// the level before's). Without growth, the whole target.
    ///
    /// `WidthRule::Rate`, the harmonic budget: level `i` takes the fraction
    /// `w_i / (w_i + … + w_{L-1})`, with `w_j = 1 / (j + 1)` and `L = max_levels`, of what the
    /// levels before it left of `P`, that is of `P` less their widths' expected rates. So the
    /// shares fall off slowly (a filter that does not know its final size needs about
    /// `log2(log2 n)` bits more than a static one; weights that fall faster cost more bits per
    /// fingerprint, see BENCHMARKS.md, "Constants chosen by measurement"), what the rounding up
    /// to whole bits leaves unused is passed on to the next level, and the last possible level
    /// takes all that is left: over any number of levels up to `L`, the expected rates sum to
    /// at most `P`.
    ///
    /// `WidthRule::SplitRate`, the earlier budget: half of `P` split geometrically
    /// (`P / 2^(level + 2)`) and half evenly (`P / (2 L)`).
    pub(crate) fn level_rate(&self, level: u32) -> Result<Option<f64>, LevelError> {
        let rate = match self.width {
            WidthRule::Fixed(_) => return Ok(None),
            WidthRule::Rate(rate) | WidthRule::SplitRate(rate) if !self.grows() => rate,
            WidthRule::Rate(rate) => self.harmonic_share(rate, level)?.0,
            WidthRule::SplitRate(rate) => {
                let geometric = rate / 2f64.powi(level as i32 + 2);
                let even = rate / (2.0 * f64::from(self.max_levels));
                geometric + even
            }
        };
        Ok(Some(rate))
    }

    /// Level `level`'s share of `rate` under the harmonic budget (see `level_rate`), and the
    /// width of the level before it (0 for level 0), which is the least width it may have.
    fn harmonic_share(&self, rate: f64, level: u32) -> Result<(f64, u32), LevelError> {
        let weight = |j: u32| 1.0 / f64::from(j + 1);
        let (mut left, mut before) = (rate, 0);
        for i in 0..=level {
            // Past the last level (never built) the share is all that is left.
            let rest = (i..self.max_levels).map(weight).sum::<f64>().max(weight(i));
            let share = left * (weight(i) / rest);
            if i == level {
                return Ok((share, before));
            }
            let bits = self.width_for(share, before)?;
            // A width within `share <= left` leaves `left >= 0`, also in floating point.
            left -= self.expected_rate(bits)?;
            before = bits;
        }
        unreachable!("the loop returns at i == level")
    }

    /// The narrowest width of the plan's layout whose expected rate at the sizing load is at
    /// most `rate`, and at least `least` (widths never shrink from one level to the next).
    fn width_for(&self, rate: f64, least: u32) -> Result<u32, LevelError> {
        let bits =
            params::bits_for_rate(self.layout, rate).ok_or(LevelError::Unreachable { rate })?;
        Ok(bits.max(least))
    }

    /// The expected rate of a level of `bits`-bit fingerprints at its sizing load.
    fn expected_rate(&self, bits: u32) -> Result<f64, LevelError> {
        let layout =
            BucketLayout::new(self.layout, bits).ok_or(LevelError::Unreachable { rate: 0.0 })?;
        Ok(params::expected_false_positive_rate(
            &layout,
            params::sizing_load(&layout),
        ))
    }

    /// Fingerprint width of level `level`.
    pub(crate) fn level_bits(&self, level: u32) -> Result<u32, LevelError> {
        match self.width {
            WidthRule::Fixed(bits) => Ok(bits),
            WidthRule::Rate(rate) if self.grows() => {
                let (share, least) = self.harmonic_share(rate, level)?;
                self.width_for(share, least)
            }
            WidthRule::Rate(_) | WidthRule::SplitRate(_) => {
                let rate = self.level_rate(level)?.unwrap_or(0.0);
                self.width_for(rate, 0)
            }
        }
    }

    /// Bucket geometry of level `level`.
    pub(crate) fn level_layout(&self, level: u32) -> Result<BucketLayout, LevelError> {
        let bits = self.level_bits(level)?;
        // Widths are validated by the builder (and a snapshot's loader) against 4..=32, where
        // every layout exists; a rate's width comes from `bits_for_rate`, which only returns
        // widths of the layout.
        BucketLayout::new(self.layout, bits).ok_or(LevelError::Unreachable { rate: 0.0 })
    }

    /// Capacity of level `level`, in items: `base × factor^level`.
    pub(crate) fn level_capacity(&self, level: u32) -> Option<usize> {
        let factor = (self.factor.max(1)) as usize;
        (0..level).try_fold(self.base_capacity, |c, _| c.checked_mul(factor))
    }

    /// Buckets of level 0. Every later level has this times a power of two, so a growing
    /// filter sizes it for the width of the later levels too (a wider fingerprint means fewer
    /// per bucket): otherwise every later level would fall short of its planned capacity by
    /// that ratio. This costs level 0 a few buckets when the widths differ.
    fn base_buckets(&self, base: &BucketLayout) -> Result<usize, LevelError> {
        let too_large = LevelError::TooLarge {
            items: self.base_capacity,
        };
        let own = params::buckets_for(self.base_capacity, base).ok_or(too_large)?;
        if !self.grows() {
            return Ok(own);
        }
        let later = params::buckets_at_sizing_load(self.base_capacity, &self.level_layout(1)?)
            .ok_or(too_large)?;
        Ok(own.max(later))
    }

    /// The table shape of level `level`.
    ///
    /// Levels nest (see `hashing`): level `i` has level 0's buckets times a power of two, the
    /// one nearest (in log scale) to `factor^i` times level 0's capacity at level `i`'s width
    /// (so with a power-of-two factor and one width, exactly `factor^i ×` level 0's buckets),
    /// and widths never shrink from one level to the next.
    pub(crate) fn level_shape(&self, level: u32) -> Result<TableShape, LevelError> {
        let base = self.level_layout(0)?;
        let (base_bits, base_buckets) = (base.bits(), self.base_buckets(&base)?);
        if level == 0 {
            let stripes = params::stripes_for(base_buckets);
            return Ok(TableShape::flat(
                self.layout,
                base_buckets,
                base_bits,
                stripes,
            ));
        }
        let bits = self.level_bits(level)?;
        debug_assert!(bits >= self.level_bits(level - 1)?, "widths never shrink");
        let items = self
            .level_capacity(level)
            .ok_or(LevelError::TooLarge { items: usize::MAX })?;
        // Level 0's buckets were sized for level 1's width (see `base_buckets`): level `i`
        // needs `factor^i` times as many, times the ratio of per-bucket capacities of those
        // widths. Rounded in log scale, so a power-of-two factor with one width doubles exactly.
        let per_bucket = |level| Ok(params::items_per_bucket(&self.level_layout(level)?));
        let growth = f64::from(self.factor).log2() * f64::from(level);
        let widening = (per_bucket(1)? / per_bucket(level)?).log2();
        let doublings = (growth + widening).round().max(0.0);
        let buckets = (doublings < 32.0)
            .then(|| base_buckets.checked_shl(doublings as u32))
            .flatten()
            .filter(|&b| b as u64 <= crate::hashing::MAX_BUCKETS)
            .ok_or(LevelError::TooLarge { items })?;
        Ok(TableShape {
            layout: self.layout,
            buckets,
            bits,
            stripes: params::stripes_for(buckets),
            base_buckets,
            base_bits,
        })
    }
}

/// One insert in this many (chosen by hash) checks whether to prepare the next level: the check
/// sums the newest level's stripe counters, a few microseconds for the largest tables.
const PREPARE_SAMPLE: u64 = 1 << 12;

/// Levels on huge pages at least this large (bytes of bucket words) are prepared ahead. Smaller
/// ones are built by the insert that adds them in tens of microseconds; larger ones are mapped
/// and faulted in lazily (see `table::storage`), and one huge-page fault zeroes 2 MiB and can
/// take milliseconds in a VM. On 4 KiB pages a fault takes microseconds: those levels are built
/// on demand, and their memory is taken only as it is touched.
const PREPARE_BYTES: usize = 2 << 20;

/// A level built ahead of need, or the decision not to.
struct Prepared {
    /// Which level.
    level: usize,
    /// The thread that allocates it and faults in its pages; `None` if the level is small or the
    /// thread could not be started. A thread still running when the level is needed is left to
    /// finish and drop its table.
    build: Option<JoinHandle<Option<Table>>>,
}

/// The levels of one filter.
pub(crate) struct Levels {
    first: Table,
    /// Levels 1.. in order; empty when the filter does not grow.
    more: Box<[OnceLock<Table>]>,
    /// Published levels, the first included (>= 1).
    published: AtomicUsize,
    /// Bit `i` set: level `i` was released (its table's flag was set first). Lookups load it
    /// once and probe only the other levels; filters have at most 64 levels (the builder's
    /// and the snapshot format's limit).
    released: AtomicU64,
    grow_lock: GrowLock,
    plan: GrowthPlan,
    limits: Limits,
    /// Whether new levels ask for transparent huge pages.
    huge_pages: bool,
    /// The next level, prepared ahead (see `prepare_next`). Locked only by a sampled insert
    /// into a level near capacity, and by `grow` under the grow lock.
    next: Mutex<Option<Prepared>>,
}

impl Levels {
    pub(crate) fn new(first: Table, plan: GrowthPlan, limits: Limits, huge_pages: bool) -> Self {
        let extra = if plan.grows() {
            plan.max_levels as usize - 1
        } else {
            0
        };
        Levels {
            first,
            more: (0..extra).map(|_| OnceLock::new()).collect(),
            published: AtomicUsize::new(1),
            released: AtomicU64::new(0),
            grow_lock: GrowLock::new(),
            plan,
            limits,
            huge_pages,
            next: Mutex::new(None),
        }
    }

    /// A filter's levels as restored from a snapshot: `tables` (at least one, at most
    /// `plan.max_levels`) all published.
    pub(crate) fn restore(
        plan: GrowthPlan,
        tables: Vec<Table>,
        limits: Limits,
        huge_pages: bool,
    ) -> Self {
        let mut tables = tables.into_iter();
        let first = tables.next().expect("a snapshot has at least one level");
        let levels = Levels::new(first, plan, limits, huge_pages);
        let mut published = 1;
        for (slot, table) in levels.more.iter().zip(tables) {
            if slot.set(table).is_err() {
                unreachable!("a new filter's level slots are empty");
            }
            published += 1;
        }
        levels.published.store(published, Ordering::Relaxed);
        // A level narrowed by `shrink_to_fit` (narrower than planned) had every level below it
        // released, which a snapshot or a copy holds as empty ones: release them again, so
        // that no lookup derives a key for a level wider than a newer one (`KeyMapper::narrow`)
        // or probes a level that can hold nothing.
        let narrowed = (1..published).rev().find(|&i| {
            let planned = levels.plan.level_bits(i as u32);
            planned.is_ok_and(|bits| levels.level(i).shape().bits < bits)
        });
        if let Some(narrowed) = narrowed {
            for i in 0..narrowed {
                let released = levels.level(i).release_if_empty();
                debug_assert!(released, "the levels below a narrowed one are empty");
                // Relaxed: the levels are not shared yet.
                levels.released.fetch_or(1 << i, Ordering::Relaxed);
            }
        }
        levels
    }

    pub(crate) fn plan(&self) -> &GrowthPlan {
        &self.plan
    }

    /// The published levels frozen (see `freeze::freeze`): no writer changes any of them and no
    /// level is added until the guard is dropped; lookups and counts are not held up. Frozen
    /// oldest first, the order writers lock levels in (see `StripeSet::freeze`).
    ///
    /// [`Nested`] when this thread is freezing these levels already (a save whose destination
    /// saves, clears or clones the same filter): taking the grow lock again would wait forever.
    pub(crate) fn frozen(&self) -> Result<Frozen<'_, Table>, Nested> {
        freeze::freeze(self, &self.grow_lock, || self.all(), Table::freeze)
    }

    #[cfg(loom)]
    pub(crate) fn first(&self) -> &Table {
        &self.first
    }

    /// Adds a level now, as an insert that found the newest full would (loom models race it).
    #[cfg(loom)]
    pub(crate) fn add_level(&self) -> Result<(), InsertError> {
        self.grow(self.count())
    }

    /// Number of published levels.
    #[inline]
    pub(crate) fn count(&self) -> usize {
        if self.more.is_empty() {
            return 1;
        }
        // Acquire: pairs with the Release store in `grow`, so every level counted here is set.
        self.published.load(Ordering::Acquire)
    }

    /// Level `i`, which must be below a count returned by `count`.
    #[inline]
    pub(crate) fn level(&self, i: usize) -> &Table {
        if i == 0 {
            &self.first
        } else {
            self.more[i - 1]
                .get()
                .expect("a counted level was set before the count was published")
        }
    }

    /// The published levels, newest first.
    fn newest_first(&self) -> impl Iterator<Item = &Table> {
        (0..self.count()).rev().map(|i| self.level(i))
    }

    /// The published levels, oldest first.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Table> {
        (0..self.count()).map(|i| self.level(i))
    }

    #[inline]
    pub(crate) fn lookup(&self, hash: u64) -> Lookup {
        if self.more.is_empty() {
            return self.first.lookup(self.first.key(hash));
        }
        let count = self.count();
        if count == 1 {
            return self.first.lookup(self.first.key(hash));
        }
        let probed = self.probed(count);
        if probed == 1 << (count - 1) {
            // Every older level released: a lookup of the newest alone.
            let newest = self.level(count - 1);
            return newest.lookup(newest.key(hash));
        }
        self.lookup_levels(count, probed, hash)
    }

    /// The levels below `count` that a lookup probes: bit `i` set for level `i` unless it was
    /// released. The newest level is never released, so its bit is always set.
    #[inline]
    fn probed(&self, count: usize) -> u64 {
        let published = u64::MAX >> (64 - count);
        // Relaxed: skipping needs no ordering (see `Table::is_released`): a bit is set only
        // after its level was released, and a bit not seen yet only costs a probe.
        published & !self.released.load(Ordering::Relaxed)
    }

    /// A lookup over `count > 1` levels, newest first, in passes of up to `PROBED` levels.
    ///
    /// The item's key is derived once, in the newest level; every older level's buckets and
    /// fingerprint are that key with low bits dropped (`KeyMapper::narrow`, which the nesting
    /// of levels makes exact). Each level's seqlock read is begun (stripe version, both words)
    /// and tested, with no branch but "hit", before the next level's; the misses are validated
    /// after the last level's loads, so the levels' loads overlap.
    ///
    /// Why the answer is the one a level-by-level lookup gives: a hit is a hit in any order;
    /// each validated miss proves the fingerprint absent from its level over an interval from
    /// its version load to its validation; a miss that fails validation gets that level's
    /// ordinary lookup, from the start. (The intervals of one pass even share a moment, between
    /// its last version load and its first validation.)
    ///
    /// Only the levels in `probed` (see `probed`) are read: the others were released, and
    /// hold nothing.
    #[inline(never)]
    fn lookup_levels(&self, count: usize, probed: u64, hash: u64) -> Lookup {
        if cfg!(loom_mutant = "unnested_levels") {
            // Levels that do not nest have keys of their own.
            return Lookup::over(self.newest_first().map(|t| t.lookup(t.key(hash))));
        }
        let newest = self.level(count - 1);
        let key = newest.key(hash);
        let pair = newest.buckets_of(key);
        let mut unproven = false;
        let mut top = count;
        while top > 0 {
            let low = top.saturating_sub(PROBED);
            let mut begun = [0u64; PROBED];
            for (begun, level) in begun.iter_mut().zip((low..top).rev()) {
                if probed & 1 << level == 0 {
                    continue;
                }
                let table = self.level(level);
                let at = table
                    .mapper()
                    .narrow(newest.mapper(), pair, key.fingerprint);
                let (version, words) = table.begin_read(at);
                // A branch per level, never taken for an absent item: issuing every level's
                // loads before testing any measured slower (BENCHMARKS.md, "Constants chosen by
                // measurement").
                if table.holds_fingerprint(words, at) {
                    return Lookup::Present;
                }
                *begun = version;
            }
            for (&begun, level) in begun.iter().zip((low..top).rev()) {
                if probed & 1 << level == 0 {
                    continue;
                }
                let table = self.level(level);
                let at = table
                    .mapper()
                    .narrow(newest.mapper(), pair, key.fingerprint);
                if table.miss_proven(at, begun) {
                    continue;
                }
                match table.lookup(table.key(hash)) {
                    Lookup::Present => return Lookup::Present,
                    Lookup::Unproven => unproven = true,
                    Lookup::Absent => {}
                }
            }
            top = low;
        }
        if unproven {
            Lookup::Unproven
        } else {
            Lookup::Absent
        }
    }

    /// Looks up up to `BATCH` hashes at once; `out[i]` answers `hashes[i]`.
    ///
    /// Level by level, newest first, over the items not yet found: each level begins the
    /// seqlock reads of all of them (so their loads overlap) before validating any, as
    /// `Table::lookup_batch` does in one table, and keys are narrowed from the newest level's
    /// as in `lookup_levels`. Each answer is the level-by-level one: `Present` if a level has
    /// the item, else `Unproven` if a level stayed unproven, else `Absent`.
    pub(crate) fn lookup_batch(&self, hashes: &[u64], out: &mut [Lookup]) {
        debug_assert!(hashes.len() <= BATCH && out.len() == hashes.len());
        let n = hashes.len();
        let count = self.count();
        let mut keys = [ItemKey::default(); BATCH];
        if count == 1 {
            for (key, &hash) in keys.iter_mut().zip(hashes) {
                *key = self.first.key(hash);
            }
            self.first.lookup_batch(&keys[..n], out);
            return;
        }
        if cfg!(loom_mutant = "unnested_levels") {
            out.fill(Lookup::Absent);
            let mut level_out = [Lookup::Absent; BATCH];
            for table in self.newest_first() {
                for (key, &hash) in keys.iter_mut().zip(hashes) {
                    *key = table.key(hash);
                }
                table.lookup_batch(&keys[..n], &mut level_out[..n]);
                for (answer, &level) in out.iter_mut().zip(&level_out[..n]) {
                    *answer = Lookup::over([*answer, level].into_iter());
                }
            }
            return;
        }
        let probed = self.probed(count);
        let newest = self.level(count - 1);
        let mut pairs = [(0usize, 0usize); BATCH];
        for i in 0..n {
            keys[i] = newest.key(hashes[i]);
            pairs[i] = newest.buckets_of(keys[i]);
        }
        out.fill(Lookup::Absent);
        // Indices of the items not found yet, in order.
        let mut pending = [0u8; BATCH];
        for (i, p) in pending.iter_mut().enumerate().take(n) {
            *p = i as u8;
        }
        let mut left = n;
        let mut begun = [0u64; BATCH];
        let mut words = [(Bucket::default(), Bucket::default()); BATCH];
        for level in (0..count).rev() {
            if probed & 1 << level == 0 {
                continue;
            }
            let table = self.level(level);
            let at = |i: usize| {
                table
                    .mapper()
                    .narrow(newest.mapper(), pairs[i], keys[i].fingerprint)
            };
            // The loads of every pending item first, with no branch between them.
            for &i in &pending[..left] {
                let i = usize::from(i);
                (begun[i], words[i]) = table.begin_read(at(i));
            }
            let mut kept = 0;
            for k in 0..left {
                let i = usize::from(pending[k]);
                if table.holds_fingerprint(words[i], at(i)) {
                    out[i] = Lookup::Present;
                } else if !table.miss_proven(at(i), begun[i]) {
                    match table.lookup(table.key(hashes[i])) {
                        Lookup::Present => out[i] = Lookup::Present,
                        Lookup::Unproven => out[i] = Lookup::Unproven,
                        Lookup::Absent => {}
                    }
                }
                if out[i] != Lookup::Present {
                    pending[kept] = pending[k];
                    kept += 1;
                }
            }
            left = kept;
            if left == 0 {
                break;
            }
        }
    }

    /// Inserts up to `BATCH` items by hash, in order, their buckets prefetched a few items ahead;
    /// stops at the first that fails and returns its index in `hashes`.
    pub(crate) fn insert_batch(&self, hashes: &[u64]) -> Result<(), (usize, InsertError)> {
        self.insert_batch_with(hashes, |hash| self.insert(hash))
    }

    /// As `insert_batch`, with set semantics (`insert_unique`): returns how many were added.
    pub(crate) fn insert_unique_batch(
        &self,
        hashes: &[u64],
    ) -> Result<usize, (usize, InsertError)> {
        let mut added = 0;
        self.insert_batch_with(hashes, |hash| {
            added += usize::from(self.insert_unique(hash)?);
            Ok(())
        })?;
        Ok(added)
    }

    /// Runs `insert` on each hash in order, the buckets of the items a few places ahead
    /// prefetched; stops at the first that fails and returns its index in `hashes`.
    fn insert_batch_with(
        &self,
        hashes: &[u64],
        mut insert: impl FnMut(u64) -> Result<(), InsertError>,
    ) -> Result<(), (usize, InsertError)> {
        debug_assert!(hashes.len() <= BATCH);
        let mut keys = [ItemKey::default(); BATCH];
        let newest = self.level(self.count() - 1);
        for (key, &hash) in keys.iter_mut().zip(hashes) {
            *key = newest.key(hash);
        }
        // The first items' buckets are asked for at once; then each insert asks for the
        // buckets of the item `PREFETCH_AHEAD` places later, so their round trips overlap the
        // inserts in between (a growth mid-batch only makes some hints useless).
        let keys = &keys[..hashes.len()];
        for key in keys.iter().take(PREFETCH_AHEAD) {
            newest.prefetch(*key);
        }
        for (i, &hash) in hashes.iter().enumerate() {
            if let Some(key) = keys.get(i + PREFETCH_AHEAD) {
                newest.prefetch(*key);
            }
            insert(hash).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    pub(crate) fn count_copies(&self, hash: u64) -> usize {
        self.all()
            .filter(|t| !t.is_released())
            .map(|t| t.count(t.key(hash)))
            .sum()
    }

    /// Removes one copy, from the newest level that has one (a released level has none).
    pub(crate) fn remove(&self, hash: u64) -> bool {
        self.newest_first()
            .filter(|t| !t.is_released())
            .any(|t| t.remove(t.key(hash)))
    }

    /// Inserts one copy into the newest level, growing when it is full.
    #[inline]
    pub(crate) fn insert(&self, hash: u64) -> Result<(), InsertError> {
        let mut retries = 0;
        loop {
            let levels = self.count();
            let newest = self.level(levels - 1);
            let key = newest.key(hash);
            #[cfg(test)]
            insert_pause::run();
            match newest.insert(key, Multiset) {
                Ok(Placed::Inserted | Placed::AlreadyPresent) => {
                    self.after_insert(levels, hash);
                    return Ok(());
                }
                // A newer level was added meanwhile and this one released: the count loaded
                // next is larger (see `Table::released_for_writers`).
                Ok(Placed::Retry) => {}
                Err(NoRoom) => self.after_no_room(levels, newest, key, &mut retries)?,
            }
        }
    }

    /// After an insert of `key` found no room in the newest of `seen` levels (`newest`): `Ok` to
    /// try again (a level was added, or a slot was freed meanwhile), or the error to report.
    ///
    /// A level that is not near its capacity (90 % of the items it is sized for) is not grown
    /// for a hot key: an item whose two buckets hold only repeated items, its own copies among
    /// them (one key inserted again and again, or a few that share buckets). Hot keys fill the
    /// same buckets in every level, so growing for them would take all memory and still not
    /// hold the next copy; the insert fails with `ItemBucketsFull` instead, and memory stays at
    /// most one level above what the other items need. Any other failure grows: a new item
    /// blocked by others' copies, or a small level that failed early.
    fn after_no_room(
        &self,
        seen: usize,
        newest: &Table,
        key: ItemKey,
        retries: &mut u32,
    ) -> Result<(), InsertError> {
        match newest.pair_state(key) {
            // A remove freed a slot since the search gave up: try again, a few times.
            PairState::Room if *retries < self.limits.insert_rounds => {
                *retries += 1;
                Ok(())
            }
            PairState::Room | PairState::RepeatsWithOwnCopies if !newest.is_near_capacity() => {
                Err(InsertError::ItemBucketsFull)
            }
            _ => self.grow(seen),
        }
    }

    /// Inserts unless some level (maybe) holds the item already.
    pub(crate) fn insert_unique(&self, hash: u64) -> Result<bool, InsertError> {
        let mut retries = 0;
        loop {
            let levels = self.count();
            let target = levels - 1;
            let placed = if target == 0 {
                // Level 0 is both the gate and the target: the newer levels that may appear
                // meanwhile are checked under its locks.
                let newer = || self.maybe_in(1.., hash);
                self.first.insert(self.first.key(hash), Unique(&newer))
            } else {
                let gate = self.first.lock_item(self.first.key(hash));
                if gate.holds() || self.maybe_in(1..target, hash) {
                    return Ok(false);
                }
                let newest = self.level(target);
                let newer = || self.maybe_in(target + 1.., hash);
                newest.insert(newest.key(hash), Unique(&newer))
            };
            match placed {
                Ok(Placed::Inserted) => {
                    self.after_insert(levels, hash);
                    return Ok(true);
                }
                Ok(Placed::AlreadyPresent) => return Ok(false),
                // As in `insert`: the target level was released, so a newer one exists.
                Ok(Placed::Retry) => {}
                Err(NoRoom) => {
                    let newest = self.level(target);
                    self.after_no_room(levels, newest, newest.key(hash), &mut retries)?;
                }
            }
        }
    }

    /// After an insert of `hash` into the newest of `seen` levels: now and then (one insert in
    /// `PREPARE_SAMPLE`), see whether the next level should be prepared.
    #[inline]
    fn after_insert(&self, seen: usize, hash: u64) {
        if hash & (PREPARE_SAMPLE - 1) == 0 {
            self.prepare_next(seen);
        }
    }

    /// Starts building level `seen` (the next one, if on huge pages and large: see
    /// `PREPARE_BYTES`) on a background thread once level `seen - 1` is near capacity (90 % of
    /// the items it is sized for), so that `grow` finds it allocated and its pages faulted in.
    /// The newest level fills for a while yet, which leaves the thread time; if it is not done
    /// when the level is needed, `grow` builds one itself.
    ///
    /// Costs memory early: the next level is held from then on, while `memory_usage` counts it
    /// only once it is added (`clear`, `shrink_to_fit` and drop free it). Nothing here waits:
    /// another inserter already on it, or a level prepared already, ends the check.
    #[cold]
    #[inline(never)]
    fn prepare_next(&self, seen: usize) {
        let can_grow = self.plan.grows() && seen < self.plan.max_levels as usize;
        // Loom models tiny tables, and a real thread would escape the model.
        if cfg!(loom) || !self.huge_pages || !can_grow {
            return;
        }
        let Some(mut next) = self.next.try_lock() else {
            return;
        };
        let decided = next.as_ref().is_some_and(|p| p.level == seen);
        if decided || self.count() != seen || !self.level(seen - 1).is_near_capacity() {
            return;
        }
        let build = self
            .plan
            .level_shape(seen as u32)
            .ok()
            .filter(|shape| shape.words().unwrap_or(usize::MAX).saturating_mul(8) >= PREPARE_BYTES)
            .and_then(|shape| self.spawn_build(shape));
        *next = Some(Prepared { level: seen, build });
    }

    /// A thread that allocates a table of `shape` and faults in its pages; `None` if no thread
    /// can be started.
    fn spawn_build(&self, shape: TableShape) -> Option<JoinHandle<Option<Table>>> {
        let (limits, huge_pages) = (self.limits, self.huge_pages);
        std::thread::Builder::new()
            .name("atomic-cuckoo-level".into())
            .spawn(move || {
                let mut table = Table::new(shape, limits, huge_pages).ok()?;
                table.fault_in();
                Some(table)
            })
            .ok()
    }

    /// Level `level` as prepared ahead, if its thread has finished; whatever was prepared is
    /// taken either way. Called under the grow lock.
    fn take_prepared(&self, level: usize) -> Option<Table> {
        let prepared = self.next.lock().take()?;
        let build = prepared
            .build
            .filter(|b| prepared.level == level && b.is_finished())?;
        // A panicked or failed build leaves `grow` to build the level itself.
        build.join().ok().flatten()
    }

    /// Frees the level prepared ahead, if any, waiting for its thread when it is still
    /// faulting pages in, so that its memory is given back before this returns. Nothing but
    /// `grow` ever reads a prepared level (it is published only once `grow` has set it in its
    /// slot), so dropping it here cannot pull memory from under a reader. The lock is not held
    /// while waiting: a `grow` meanwhile builds its level itself.
    fn discard_prepared(&self) {
        let prepared = self.next.lock().take();
        if let Some(build) = prepared.and_then(|p| p.build) {
            // A panicked build has nothing to free.
            drop(build.join());
        }
    }

    /// Whether a level in `range` (clipped to the published ones) holds the item's
    /// fingerprint. Proven either way: a lookup that stays unproven (it kept colliding with
    /// writers) is settled under the item's stripes in that level, so `insert_unique` never
    /// answers "already there" for an item that is nowhere. The caller holds stripes of lower
    /// levels only, so the (level, stripe) lock order is kept.
    fn maybe_in(&self, range: impl std::ops::RangeBounds<usize>, hash: u64) -> bool {
        (0..self.count()).filter(|i| range.contains(i)).any(|i| {
            let t = self.level(i);
            !t.is_released() && t.holds(t.key(hash))
        })
    }

    /// Adds a level after an insert found the newest of `seen` levels full. Returns `Ok` when a
    /// level was added, here or by another thread meanwhile.
    fn grow(&self, seen: usize) -> Result<(), InsertError> {
        if !self.plan.grows() {
            return Err(InsertError::Full);
        }
        let _grow = self.grow_lock.lock();
        // Relaxed: `published` is only written under this lock, which we hold.
        let now = self.published.load(Ordering::Relaxed);
        if now > seen {
            return Ok(());
        }
        if now >= self.plan.max_levels as usize {
            return Err(InsertError::MaxLevelsReached {
                levels: self.plan.max_levels,
            });
        }
        let shape = self
            .plan
            .level_shape(now as u32)
            .map_err(|_| InsertError::GrowthFailed { bytes: usize::MAX })?;
        let table = match self.take_prepared(now) {
            Some(table) => table,
            None => Table::new(shape, self.limits, self.huge_pages)
                .map_err(|e| InsertError::GrowthFailed { bytes: e.bytes })?,
        };
        debug_assert_eq!(table.shape(), shape, "a level prepared for another shape");
        if self.more[now - 1].set(table).is_err() {
            unreachable!("level {now} is only set here, under the grow lock");
        }
        // Release: a reader that sees the new count also sees the level set just above.
        self.published.store(now + 1, Ordering::Release);
        Ok(())
    }

    /// Items in all levels (exact when no writer is running).
    pub(crate) fn len(&self) -> usize {
        self.all().map(Table::len).sum()
    }

    /// Slots in all levels but the released ones (which never hold an item again).
    pub(crate) fn slots(&self) -> usize {
        self.all()
            .filter(|t| !t.is_released())
            .map(Table::slots)
            .sum()
    }

    /// Distinct items the levels hold before an insert adds a level: what the older levels
    /// hold now (inserts go only to the newest, so their free slots stay free) plus what the
    /// newest level is sized for.
    pub(crate) fn item_capacity(&self) -> usize {
        let newest = self.count() - 1;
        let older: usize = (0..newest).map(|i| self.level(i).len()).sum();
        older + self.level(newest).item_capacity()
    }

    /// Drops the newest levels while they are empty (released ones included), keeping the
    /// first, then releases the empty older levels; exclusive access. A released level left as
    /// the newest (only the first can be: a released level is empty) is made an ordinary one
    /// again, since inserts go there. Then narrows the oldest live level where it can (see
    /// `narrow_oldest_live_level`).
    pub(crate) fn shrink_to_fit(&mut self) {
        let mut published = self.count();
        while published > 1 && self.level(published - 1).len() == 0 {
            self.more[published - 2].take();
            published -= 1;
        }
        let newest = match published {
            1 => &mut self.first,
            n => self.more[n - 2]
                .get_mut()
                .expect("a published level is set"),
        };
        newest.unrelease();
        // A level prepared ahead is for the level after the old newest one.
        self.discard_prepared();
        self.published.store(published, Ordering::Relaxed);
        // The levels kept below the newest keep their bits; the newest and the dropped ones
        // have none. Relaxed: `&mut self`.
        let below_newest = (1u64 << (published - 1)) - 1;
        let kept = self.released.load(Ordering::Relaxed) & below_newest;
        self.released.store(kept, Ordering::Relaxed);
        self.release_empty_levels();
        self.narrow_oldest_live_level();
    }

    /// Once every level below the oldest live one is released, truncates that level's
    /// fingerprints to the first level's width (see `Table::narrowed`); exclusive access.
    ///
    /// Why the rate still holds: the levels below it probe nothing, and the first level's
    /// share of the target rate (see `GrowthPlan::level_rate`) was computed for that width at
    /// the same load per bucket, so the narrowed level takes that share at most; each later
    /// level keeps its own. Why nesting still holds: the levels below are empty and never
    /// receive an item again (only the newest level does, and a released level left as the
    /// newest by `shrink_to_fit` is one with no live level above it); later levels are at
    /// least as wide, and keys nest by width and buckets (see `hashing`). If the narrower
    /// table cannot be allocated, the level is kept as it is.
    fn narrow_oldest_live_level(&mut self) {
        let count = self.count();
        // Relaxed: `&mut self`.
        let oldest_live = self.released.load(Ordering::Relaxed).trailing_ones() as usize;
        if oldest_live == 0 || oldest_live >= count {
            return;
        }
        let huge_pages = self.huge_pages;
        let table = self.more[oldest_live - 1]
            .get_mut()
            .expect("a published level is set");
        let base_bits = table.shape().base_bits;
        if table.shape().bits == base_bits {
            return;
        }
        if let Ok(narrowed) = table.narrowed(base_bits, huge_pages) {
            *table = narrowed;
        }
    }

    /// Releases every empty level but the newest (see `Table::release_if_empty`); returns how
    /// many were released by this call.
    ///
    /// Holds the grow lock, which serializes it with saves, clears and copies (a level's freeze
    /// has one closer at a time) and with growth. No level is released that was the newest in
    /// the count loaded here; the count only grows meanwhile, so none is ever the newest when
    /// released. Levels that do not look empty (their item counters) are not frozen at all;
    /// one that looks empty is frozen while its words are checked, so writers to it (removes
    /// passing through it, stale inserts) wait that long.
    ///
    /// Returns 0 on the thread that is saving this filter (from inside the save's destination):
    /// taking the grow lock there would wait forever.
    pub(crate) fn release_empty_levels(&self) -> usize {
        if self.more.is_empty() {
            return 0;
        }
        let Ok(_this_thread) = Mark::enter(self) else {
            return 0;
        };
        let _no_growth = self.grow_lock.lock();
        let count = self.count();
        let mut released = 0;
        for i in 0..count - 1 {
            let table = self.level(i);
            if !table.is_released() && table.len() == 0 && table.release_if_empty() {
                // Relaxed: only lookups read the mask, and need no ordering (see `probed`).
                self.released.fetch_or(1 << i, Ordering::Relaxed);
                released += 1;
            }
        }
        released
    }

    /// Heap memory of all levels and the level slots.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.all().map(Table::heap_bytes).sum::<usize>() + std::mem::size_of_val(&*self.more)
    }

    /// Expected rate of a lookup over all levels it probes (released ones are skipped):
    /// `1 - Π(1 - rate_i)`.
    pub(crate) fn false_positive_rate(&self) -> f64 {
        let miss_all: f64 = self
            .all()
            .filter(|t| !t.is_released())
            .map(|t| {
                let load = t.len() as f64 / t.slots() as f64;
                1.0 - params::expected_false_positive_rate(t.layout(), load)
            })
            .product();
        1.0 - miss_all
    }

    /// Empties every level, keeping them all: freeing a level would need every reader gone,
    /// and unpublishing one would strand a writer that chose it before the clear (see
    /// `shrink_to_fit`). Released levels stay released (and are not written: they are zeros
    /// already); the others stay unreleased, empty, until `release_empty_levels`. Writers wait meanwhile, as for a save; readers do not. Then frees the
    /// level prepared ahead, which no reader can see: after the sweep, so that a check for
    /// preparing that starts later finds the levels empty and prepares nothing.
    ///
    /// # Panics
    ///
    /// When this thread is saving the same filter (the save's writer called it): the save
    /// would store half-cleared levels.
    pub(crate) fn clear(&self) {
        let frozen = self.frozen().unwrap_or_else(|nested| nested.panic());
        for (table, held) in frozen.parts() {
            table.clear_frozen(held);
        }
        drop(frozen);
        self.discard_prepared();
    }

    /// A deep copy of one consistent state (taken like a save), with the same plan and limits.
    ///
    /// # Panics
    ///
    /// When this thread is saving the same filter (see `frozen`), or memory runs out.
    pub(crate) fn deep_copy(&self) -> Levels {
        let frozen = self.frozen().unwrap_or_else(|nested| nested.panic());
        let tables = frozen
            .parts()
            .iter()
            .map(|(table, held)| table.copy_frozen(held, self.huge_pages))
            .collect::<Result<Vec<Table>, _>>()
            .unwrap_or_else(|e| panic!("copying a filter: {} bytes unavailable", e.bytes));
        drop(frozen);
        Levels::restore(self.plan, tables, self.limits, self.huge_pages)
    }
}

impl Drop for Levels {
    /// Waits for a level still being prepared ahead, so that a dropped filter has given back all
    /// its memory (a thread left running would hold that level until it is done).
    fn drop(&mut self) {
        self.discard_prepared();
    }
}

/// A pause, for tests, between the moment an insert has chosen the newest level and its
/// stores: set on one thread, it runs once, on that thread's next insert.
#[cfg(test)]
mod insert_pause {
    use std::cell::RefCell;

    thread_local! {
        static HOOK: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
    }

    /// Runs `hook` in this thread's next insert, after it chose its level.
    #[cfg(not(loom))]
    pub(super) fn set(hook: Box<dyn FnOnce()>) {
        HOOK.with(|h| *h.borrow_mut() = Some(hook));
    }

    pub(super) fn run() {
        if let Some(hook) = HOOK.with(|h| h.borrow_mut().take()) {
            hook();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod release_tests {
    use std::sync::mpsc;

    use super::*;

    /// An insert that chose the newest level, and then found it released (a newer level was
    /// added and the chosen one emptied and released meanwhile), stores nothing there and goes
    /// to the newest level: the item is found, and the released level stays empty.
    #[test]
    fn an_insert_whose_level_was_released_meanwhile_goes_to_the_newest() {
        let plan = GrowthPlan {
            factor: 2,
            max_levels: 4,
            base_capacity: 1_000,
            width: WidthRule::Fixed(16),
            layout: LayoutKind::Packed,
        };
        let first = Table::new(plan.level_shape(0).unwrap(), Limits::DEFAULT, false).unwrap();
        let levels = Levels::new(first, plan, Limits::DEFAULT, false);
        let probe = 0x5eed_u64.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut hashes = (1u64..).map(|i| i.wrapping_mul(0xd1b5_4a32_d192_ed03));
        let (paused, wait_paused) = mpsc::channel();
        let (resume, wait_resume) = mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let inserter = scope.spawn(|| {
                insert_pause::set(Box::new(move || {
                    paused.send(()).unwrap();
                    wait_resume.recv().unwrap();
                }));
                levels.insert(probe).unwrap();
            });
            // The inserter has chosen level 0, the newest. Fill it until a level is added, then
            // take out everything level 0 holds and release it.
            wait_paused.recv().unwrap();
            let mut in_level_0 = Vec::new();
            while levels.count() == 1 {
                let hash = hashes.next().unwrap();
                levels.insert(hash).unwrap();
                if levels.count() == 1 {
                    in_level_0.push(hash);
                }
            }
            for hash in &in_level_0 {
                assert!(levels.remove(*hash));
            }
            assert_eq!(levels.level(0).len(), 0);
            assert_eq!(levels.release_empty_levels(), 1);
            assert!(levels.level(0).is_released());
            resume.send(()).unwrap();
            inserter.join().unwrap();
        });
        assert_eq!(levels.count_copies(probe), 1);
        assert_eq!(
            levels.level(0).len(),
            0,
            "nothing stored in the released level"
        );
        assert_eq!(
            levels.level(1).len(),
            2,
            "the probe and the item that added level 1"
        );
    }
}

#[cfg(all(test, target_os = "linux", not(loom)))]
mod tests {
    use super::*;

    /// A new level whose memory is refused: the insert that asked for it gets `GrowthFailed`,
    /// nothing stored is lost, no level is added, and the next insert grows the filter once
    /// memory is there again.
    #[test]
    fn a_level_whose_memory_is_refused_fails_the_insert_and_loses_nothing() {
        use crate::table::FAIL_ALLOCATION;
        use crate::{CuckooFilter, InsertError};
        let builder = CuckooFilter::builder().capacity(1_000).expansion(2);
        let filter = builder.huge_pages(false).build().unwrap();
        FAIL_ALLOCATION.with(|left| left.set(1));
        let mut key = 0u64;
        let refused = loop {
            match filter.insert(&key) {
                Ok(()) => key += 1,
                Err(e) => break e,
            }
        };
        FAIL_ALLOCATION.with(|left| left.set(0));
        assert!(
            matches!(refused, InsertError::GrowthFailed { bytes } if bytes > 0),
            "{refused:?}"
        );
        assert_eq!(filter.levels(), 1);
        assert_eq!(filter.len(), key as usize);
        assert!((0..key).all(|k| filter.contains(&k)));
        filter.insert(&key).unwrap();
        assert_eq!(filter.levels(), 2);
        assert!((0..=key).all(|k| filter.contains(&k)));
    }

    /// A level large enough to be prepared ahead is, once the newest nears capacity, and the
    /// insert that adds it finds it with every page resident: it neither zeroes nor faults.
    /// Checked by the pages themselves, not by a time.
    #[test]
    fn a_large_level_is_prepared_ahead_and_added_resident() {
        let plan = GrowthPlan {
            factor: 2,
            max_levels: 3,
            base_capacity: 2_000_000,
            width: WidthRule::Fixed(16),
            layout: LayoutKind::Packed,
        };
        let shape = plan.level_shape(1).unwrap();
        assert!(
            shape.words().unwrap() * 8 >= PREPARE_BYTES,
            "level 1 is prepared"
        );
        let first = Table::new(plan.level_shape(0).unwrap(), Limits::DEFAULT, true).unwrap();
        let levels = Levels::new(first, plan, Limits::DEFAULT, true);
        // Distinct, well-spread hashes; every PREPARE_SAMPLE-th one is sampled.
        let mut hashes = (1u64..).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let prepared = |levels: &Levels| {
            let next = levels.next.lock();
            next.as_ref()
                .map(|p| (p.level, p.build.as_ref().map(|b| b.is_finished())))
        };
        while prepared(&levels).is_none() {
            levels.insert(hashes.next().unwrap()).unwrap();
        }
        assert!(levels.level(0).is_near_capacity());
        assert_eq!(levels.count(), 1, "prepared before level 0 was full");
        // Wait for the thread (it has more time in real use: the rest of level 0's fill).
        while prepared(&levels) != Some((1, Some(true))) {
            assert_eq!(prepared(&levels), Some((1, Some(false))));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        while levels.count() == 1 {
            levels.insert(hashes.next().unwrap()).unwrap();
        }
        let (resident, pages) = levels.level(1).resident_pages();
        assert_eq!(resident, pages, "level 1 was added without its pages");
    }
}

#[cfg(all(test, not(loom)))]
mod budget_tests {
    use super::*;

    const KINDS: [LayoutKind; 3] = [
        LayoutKind::OneWord,
        LayoutKind::Packed,
        LayoutKind::SemiSorted,
    ];

    fn plan(width: WidthRule, max_levels: u32, layout: LayoutKind) -> GrowthPlan {
        GrowthPlan {
            factor: 2,
            max_levels,
            base_capacity: 1_000,
            width,
            layout,
        }
    }

    fn plan_split(rate: f64) -> GrowthPlan {
        plan(WidthRule::SplitRate(rate), 32, LayoutKind::Packed)
    }

    fn expected_rate(plan: &GrowthPlan, level: u32) -> f64 {
        plan.expected_rate(plan.level_bits(level).unwrap()).unwrap()
    }

    /// Bits per item and expected false-positive rate of `levels` levels, each at its sizing
    /// load (the moment before a growth: the fewest bits per item of that level count, and the
    /// highest rate), from the plan's shapes and the expected rate function.
    fn full_levels(plan: &GrowthPlan, levels: u32) -> (f64, f64) {
        let (mut bits, mut items, mut miss) = (0.0, 0.0, 1.0);
        for level in 0..levels {
            let shape = plan.level_shape(level).unwrap();
            let layout = BucketLayout::new(shape.layout, shape.bits).unwrap();
            let load = params::sizing_load(&layout);
            bits += shape.words().unwrap() as f64 * 64.0;
            items += (shape.buckets * layout.slots() as usize) as f64 * load;
            miss *= 1.0 - params::expected_false_positive_rate(&layout, load);
        }
        (bits / items, 1.0 - miss)
    }

    /// Over any number of levels up to `max_levels`, all at their sizing load, the expected
    /// rates sum to at most the target, for every layout, target and level limit.
    #[test]
    fn expected_rates_of_any_level_count_sum_to_at_most_the_target() {
        for layout in KINDS {
            for rate in [0.2, 0.05, 0.01, 0.003, 0.001, 1e-4, 1e-5] {
                for max_levels in [2, 3, 5, 10, 32, 64] {
                    let plan = plan(WidthRule::Rate(rate), max_levels, layout);
                    if plan.level_bits(max_levels - 1).is_err() {
                        continue; // refused by the builder
                    }
                    let mut sum = 0.0;
                    for level in 0..max_levels {
                        sum += expected_rate(&plan, level);
                        assert!(
                            sum <= rate * (1.0 + 1e-12),
                            "{layout:?} P={rate} L={max_levels}: {sum} over {level} levels"
                        );
                    }
                }
            }
        }
    }

    /// Widths never shrink from one level to the next (levels nest), and every level's width
    /// meets its share, for both budgets.
    #[test]
    fn widths_never_shrink_and_meet_their_shares() {
        for layout in KINDS {
            for rate in [0.2, 0.05, 0.01, 0.003, 0.001, 1e-4] {
                for max_levels in [2, 7, 32, 64] {
                    for width in [WidthRule::Rate(rate), WidthRule::SplitRate(rate)] {
                        let plan = plan(width, max_levels, layout);
                        let Ok(last) = plan.level_bits(max_levels - 1) else {
                            continue;
                        };
                        let bits: Vec<u32> = (0..max_levels)
                            .map(|l| plan.level_bits(l).unwrap())
                            .collect();
                        assert!(bits.windows(2).all(|w| w[0] <= w[1]), "{width:?}: {bits:?}");
                        assert_eq!(*bits.last().unwrap(), last);
                        for level in 0..max_levels {
                            let share = plan.level_rate(level).unwrap().unwrap();
                            assert!(expected_rate(&plan, level) <= share, "{width:?} {level}");
                        }
                    }
                }
            }
        }
    }

    /// What the rounding up to whole bits leaves unused is passed on: a filter with all its
    /// levels full spends over 90 % of the target (the earlier budget 73 % at 1 %, 86 % at
    /// 0.1 %).
    #[test]
    fn the_harmonic_budget_spends_most_of_the_target() {
        for rate in [0.01, 0.001] {
            let plan = plan(WidthRule::Rate(rate), 32, LayoutKind::Packed);
            let spent: f64 = (0..32).map(|l| expected_rate(&plan, l)).sum();
            let split = plan_split(rate);
            let split_spent: f64 = (0..32).map(|l| expected_rate(&split, l)).sum();
            println!("P={rate}: harmonic spends {spent:.3e}, split {split_spent:.3e}");
            assert!(spent > 0.9 * rate, "P={rate}: {spent}");
        }
    }

    /// The earlier budget is kept exactly: snapshots of earlier builds derive their levels'
    /// shapes from it. Widths of `capacity(1000).expansion(2)` at 1 % and 0.1 %, 32 levels
    /// (`tests/data/snapshots-v3` holds a snapshot of the first four at 1 %).
    #[test]
    fn the_split_budget_gives_the_widths_of_earlier_builds() {
        let widths = |rate| {
            let plan = plan(WidthRule::SplitRate(rate), 32, LayoutKind::Packed);
            (0..12)
                .map(|l| plan.level_bits(l).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            widths(0.01),
            [12, 13, 14, 14, 15, 15, 16, 16, 16, 16, 16, 16]
        );
        assert_eq!(
            widths(0.001),
            [15, 16, 17, 18, 18, 19, 19, 19, 19, 19, 19, 19]
        );
    }

    /// The harmonic budget's widths at 1 % and 0.1 % with 32 levels (`Builder::expansion`'s
    /// docs quote the first).
    #[test]
    fn the_harmonic_budget_gives_the_documented_widths() {
        let widths = |rate| {
            let plan = plan(WidthRule::Rate(rate), 32, LayoutKind::Packed);
            (0..32)
                .map(|l| plan.level_bits(l).unwrap())
                .collect::<Vec<_>>()
        };
        let runs = |w: Vec<u32>| {
            let mut runs: Vec<(u32, usize)> = Vec::new();
            for b in w {
                match runs.last_mut() {
                    Some((bits, n)) if *bits == b => *n += 1,
                    _ => runs.push((b, 1)),
                }
            }
            runs
        };
        // (width, levels of that width), oldest first.
        assert_eq!(
            runs(widths(0.01)),
            [(12, 1), (13, 1), (14, 5), (15, 10), (16, 15)]
        );
        assert_eq!(
            runs(widths(0.001)),
            [(15, 1), (16, 1), (17, 2), (18, 6), (19, 22)]
        );
    }

    /// `capacity(1000).expansion(2)` grown to 10 levels (about 1M items) and to 12 (about 4M),
    /// every level at its sizing load: bits per item and expected rate from the plan. The
    /// harmonic budget saves about a bit per item over the earlier one at 10 levels, and never
    /// costs more, within the target.
    /// (A static filter takes 10.5 bits at 1 % and 13.7 at 0.1 %; a filter that does not know
    /// its final size needs about log2(log2 n) more, and level 0's spare buckets, which keep
    /// its capacity promise, are in every level.)
    #[test]
    fn grown_filters_take_about_a_bit_per_item_less_than_with_the_split_budget() {
        for (rate, most) in [(0.01, [15.5, 15.6]), (0.001, [18.8, 19.6])] {
            for (levels, most) in [10, 12].into_iter().zip(most) {
                let harmonic = plan(WidthRule::Rate(rate), 32, LayoutKind::Packed);
                let split = plan(WidthRule::SplitRate(rate), 32, LayoutKind::Packed);
                let (bits, expected) = full_levels(&harmonic, levels);
                let (split_bits, _) = full_levels(&split, levels);
                println!("P={rate}, {levels} levels: {bits:.2} bits/item at {expected:.3e} (split: {split_bits:.2})");
                assert!(expected <= rate, "P={rate} {levels} levels: {expected}");
                assert!(
                    bits <= most,
                    "P={rate} {levels} levels: {bits} bits per item"
                );
                let saved = if levels == 10 { 0.9 } else { 0.0 };
                assert!(
                    bits <= split_bits - saved,
                    "P={rate} {levels}: {bits} vs {split_bits}"
                );
            }
        }
    }
}
