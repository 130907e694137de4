//! A filter that does not grow: one table of the width and layout its plan gives, the freeze
//! its saves, clears and copies take, and the rules that turn a failed search into an error.

use crate::bucket_layout::{BucketLayout, LayoutKind};
use crate::error::InsertError;
use crate::freeze::{self, Frozen, Nested};
use crate::hashing::ItemKey;
use crate::optimistic_read::Lookup;
use crate::params;
use crate::sync::GrowLock;
use crate::table::{Limits, Multiset, NoRoom, PairState, Placed, Table, TableShape, Unique, BATCH};

/// How the fingerprint width is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum WidthRule {
    /// This width.
    Fixed(u32),
    /// The narrowest width whose expected rate at the sizing load is within this target.
    Rate(f64),
}

/// Why a table cannot be built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum PlanError {
    /// Its capacity needs more than the largest table.
    TooLarge,
    /// No fingerprint width reaches the rate.
    Unreachable,
}

/// Everything needed to derive the table's shape (and all a snapshot stores of it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TablePlan {
    /// Capacity, in items.
    pub(crate) capacity: usize,
    pub(crate) width: WidthRule,
    pub(crate) layout: LayoutKind,
}

impl TablePlan {
    /// The target false-positive rate, if the width follows one.
    pub(crate) fn target_rate(&self) -> Option<f64> {
        match self.width {
            WidthRule::Fixed(_) => None,
            WidthRule::Rate(rate) => Some(rate),
        }
    }

    /// The fingerprint width.
    pub(crate) fn bits(&self) -> Result<u32, PlanError> {
        match self.width {
            WidthRule::Fixed(bits) => Ok(bits),
            WidthRule::Rate(rate) => {
                params::bits_for_rate(self.layout, rate).ok_or(PlanError::Unreachable)
            }
        }
    }

    /// The table's shape: buckets for the capacity at the width's sizing load.
    pub(crate) fn shape(&self) -> Result<TableShape, PlanError> {
        let bits = self.bits()?;
        // Widths are validated by the builder (and a snapshot's loader) against 4..=32, where
        // every layout exists; a rate's width comes from `bits_for_rate`, which only returns
        // widths of the layout.
        let layout = BucketLayout::new(self.layout, bits).ok_or(PlanError::Unreachable)?;
        let buckets = params::buckets_for(self.capacity, &layout).ok_or(PlanError::TooLarge)?;
        Ok(TableShape::flat(
            self.layout,
            buckets,
            bits,
            params::stripes_for(buckets),
        ))
    }
}

/// A filter's one table, with its plan.
pub(crate) struct Fixed {
    table: Table,
    plan: TablePlan,
    limits: Limits,
    /// Serializes saves, clears and copies (each freezes the stripes).
    grow: GrowLock,
    /// Whether copies ask for transparent huge pages.
    huge_pages: bool,
}

impl Fixed {
    pub(crate) fn new(table: Table, plan: TablePlan, limits: Limits, huge_pages: bool) -> Self {
        Fixed {
            table,
            plan,
            limits,
            grow: GrowLock::new(),
            huge_pages,
        }
    }

    pub(crate) fn plan(&self) -> &TablePlan {
        &self.plan
    }

    pub(crate) fn table(&self) -> &Table {
        &self.table
    }

    /// The table frozen (see `freeze::freeze`): no writer changes it until the guard is
    /// dropped; lookups and counts are not held up.
    ///
    /// [`Nested`] when this thread is freezing this filter already (a save whose destination
    /// saves, clears or clones the same filter): taking the lock again would wait forever.
    pub(crate) fn frozen(&self) -> Result<Frozen<'_, Table>, Nested> {
        freeze::freeze(self, &self.grow, || [&self.table], Table::freeze)
    }

    #[inline]
    pub(crate) fn lookup(&self, hash: u64) -> Lookup {
        self.table.lookup(self.table.key(hash))
    }

    /// Looks up up to `BATCH` hashes at once; `out[i]` answers `hashes[i]`.
    pub(crate) fn lookup_batch(&self, hashes: &[u64], out: &mut [Lookup]) {
        debug_assert!(hashes.len() <= BATCH && out.len() == hashes.len());
        let mut keys = [ItemKey::default(); BATCH];
        for (key, &hash) in keys.iter_mut().zip(hashes) {
            *key = self.table.key(hash);
        }
        self.table.lookup_batch(&keys[..hashes.len()], out);
    }

    /// Inserts one copy.
    #[inline]
    pub(crate) fn insert(&self, hash: u64) -> Result<(), InsertError> {
        let key = self.table.key(hash);
        let mut retries = 0;
        loop {
            match self.table.insert(key, Multiset) {
                Ok(Placed::Inserted | Placed::AlreadyPresent) => return Ok(()),
                // Only a released table asks for a retry, and a fixed one is never released.
                Ok(Placed::Retry) => {}
                Err(NoRoom) => self.after_no_room(key, &mut retries)?,
            }
        }
    }

    /// Inserts unless the table (maybe) holds the item already.
    pub(crate) fn insert_unique(&self, hash: u64) -> Result<bool, InsertError> {
        let key = self.table.key(hash);
        let mut retries = 0;
        loop {
            match self.table.insert(key, Unique(&|| false)) {
                Ok(Placed::Inserted) => return Ok(true),
                Ok(Placed::AlreadyPresent) => return Ok(false),
                Ok(Placed::Retry) => {}
                Err(NoRoom) => self.after_no_room(key, &mut retries)?,
            }
        }
    }

    /// After an insert of `key` found no room: `Ok` to try again (a remove freed a slot since
    /// the search gave up, a few times), or the error to report. A table that is not near its
    /// capacity (90 % of the items it is sized for) refuses a hot key (an item whose two
    /// buckets hold only repeated items, its own copies among them) with `ItemBucketsFull`;
    /// any other failure is `Full`.
    fn after_no_room(&self, key: ItemKey, retries: &mut u32) -> Result<(), InsertError> {
        match self.table.pair_state(key) {
            PairState::Room if *retries < self.limits.insert_rounds => {
                *retries += 1;
                Ok(())
            }
            PairState::Room | PairState::RepeatsWithOwnCopies if !self.table.is_near_capacity() => {
                Err(InsertError::ItemBucketsFull)
            }
            _ => Err(InsertError::Full),
        }
    }

    /// Inserts up to `BATCH` items by hash, in order, their buckets prefetched a few items
    /// ahead; stops at the first that fails and returns its index in `hashes`.
    pub(crate) fn insert_batch(&self, hashes: &[u64]) -> Result<(), (usize, InsertError)> {
        self.insert_batch_with(hashes, true, |hash| self.insert(hash))
    }

    /// As `insert_batch`, with set semantics (`insert_unique`): returns how many were added.
    pub(crate) fn insert_unique_batch(
        &self,
        hashes: &[u64],
    ) -> Result<usize, (usize, InsertError)> {
        let mut added = 0;
        self.insert_batch_with(hashes, false, |hash| {
            added += usize::from(self.insert_unique(hash)?);
            Ok(())
        })?;
        Ok(added)
    }

    /// Runs `insert` on each hash in order through `Table::insert_batch` (which prefetches the
    /// buckets of the items a few places ahead and, when `claiming`, claims lanes for the items
    /// that find one, `insert` taking the others); stops at the first that fails and returns
    /// its index in `hashes`.
    fn insert_batch_with(
        &self,
        hashes: &[u64],
        claiming: bool,
        mut insert: impl FnMut(u64) -> Result<(), InsertError>,
    ) -> Result<(), (usize, InsertError)> {
        debug_assert!(hashes.len() <= BATCH);
        let mut keys = [ItemKey::default(); BATCH];
        for (key, &hash) in keys.iter_mut().zip(hashes) {
            *key = self.table.key(hash);
        }
        self.table
            .insert_batch(&keys[..hashes.len()], claiming, |i| insert(hashes[i]))
    }

    pub(crate) fn count_copies(&self, hash: u64) -> usize {
        self.table.count(self.table.key(hash))
    }

    pub(crate) fn remove(&self, hash: u64) -> bool {
        self.table.remove(self.table.key(hash))
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn slots(&self) -> usize {
        self.table.slots()
    }

    pub(crate) fn item_capacity(&self) -> usize {
        self.table.item_capacity()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.table.heap_bytes()
    }

    pub(crate) fn false_positive_rate(&self) -> f64 {
        let load = self.len() as f64 / self.slots() as f64;
        params::expected_false_positive_rate(self.table.layout(), load)
    }

    /// Empties the table, keeping it. Writers wait meanwhile, as for a save; readers do not.
    ///
    /// # Panics
    ///
    /// When this thread is saving the same filter (the save's writer called it): the save
    /// would store a half-cleared table.
    pub(crate) fn clear(&self) {
        let frozen = self.frozen().unwrap_or_else(|nested| nested.panic());
        for (table, held) in frozen.parts() {
            table.clear_frozen(held);
        }
    }

    /// A deep copy of one consistent state (taken like a save), with the same plan and limits.
    ///
    /// # Panics
    ///
    /// When this thread is saving the same filter (see `frozen`), or memory runs out.
    pub(crate) fn deep_copy(&self) -> Fixed {
        let frozen = self.frozen().unwrap_or_else(|nested| nested.panic());
        let (table, held) = &frozen.parts()[0];
        let copy = table
            .copy_frozen(held, self.huge_pages)
            .unwrap_or_else(|e| panic!("copying a filter: {} bytes unavailable", e.bytes));
        drop(frozen);
        Fixed::new(copy, self.plan, self.limits, self.huge_pages)
    }
}
