//! Placing an entry: into an empty lane of its two buckets under their stripes, else along a
//! cuckoo path (`cuckoo_path`'s breadth-first search over split buckets, then one checked move
//! at a time under the two stripes it changes); and the tests that tell a full table from
//! buckets jammed by copies of a few items.

use std::ops::ControlFlow;

use super::keys::{field_tail_bits, Key, Pos, ANCHOR_BITS};
use super::table::LANES;
use super::{Doubling, ANCHOR_MASK, PATH_LIMITS};
use crate::cuckoo_path::{self, Hop, NoRoom, PathSpace, Placed};

/// Place, search and move rounds of one insert before it counts as failed (a move whose
/// check fails means another writer changed the path: search again).
const PLACE_ROUNDS: u32 = 16;

/// The table after `k` doublings, as the path search sees it: every bucket it reads is split
/// first, and every move checks under its stripes that the table has not doubled since.
struct Paths<'f> {
    filter: &'f Doubling,
    k: u32,
}

impl PathSpace for Paths<'_> {
    type Bucket = Pos;

    #[inline(always)]
    fn visit_lanes<R>(
        &self,
        pos: Pos,
        mut visit: impl FnMut(u32, u64) -> ControlFlow<R>,
    ) -> ControlFlow<R> {
        let filter = self.filter;
        // Writers only ever see split buckets.
        filter.split_at(pos, self.k);
        for (lane, entry) in (0..LANES).zip(filter.table.entries(pos)) {
            // No stored entry has an empty field: this lane was read torn by a writer (a lane
            // may lie on two words). Its move would fail its check; leave it out.
            if entry != 0 && entry >> ANCHOR_BITS == 0 {
                continue;
            }
            visit(lane as u32, entry)?;
        }
        ControlFlow::Continue(())
    }

    fn has_room(&self, pos: Pos) -> bool {
        // Writers only ever see split buckets.
        self.filter.split_at(pos, self.k);
        self.filter.table.has_empty_lane(pos)
    }

    #[inline(always)]
    fn alternate(&self, pos: Pos, entry: u64) -> (Pos, u64) {
        self.filter.alternate(pos, entry, self.k)
    }

    fn move_entry(&self, hop: &Hop<Pos>) -> bool {
        let filter = self.filter;
        // Both buckets were split by the search (`visit_lanes`) in this doubling.
        // Mutant `doubling_move_unlocked`: the move takes no stripe.
        let _held = (!cfg!(loom_mutant = "doubling_move_unlocked"))
            .then(|| filter.lock_pair(hop.from, hop.to));
        // Positions name buckets of the table after `k` doublings: a newer doubling moved
        // entries under them.
        if !filter.still(self.k) {
            return false;
        }
        let lane = u64::from(hop.position);
        if filter.table.entries(hop.from)[lane as usize] != hop.entry {
            return false;
        }
        // Copy before erase: a lookup that misses the entry in both buckets fails its
        // validation (this move holds both of their stripes), so either order is safe; this
        // one lets a lookup that reads `from` after the erase find the copy more often.
        if !filter.table.put(hop.to, hop.moved) {
            return false;
        }
        filter.table.set(hop.from, lane, 0);
        true
    }
}

impl Doubling {
    /// Places `key`'s entry after `k` doublings (its buckets split): into an empty lane of
    /// either bucket, else along a cuckoo path that frees one. With `unique`, nothing is
    /// placed if a lane of its buckets matches it.
    #[inline(always)]
    pub(super) fn place(&self, key: &Key, k: u32, unique: bool) -> Result<Placed, NoRoom> {
        let first = key.pos(0, k);
        let entry = (key.field(0, k, self.tail_bits) << ANCHOR_BITS) | key.anchor;
        self.place_entry(first, entry, self.tail_bits, k, unique.then_some(key))
    }

    /// Places `entry`, which has `tail` tail bits and belongs in the (split) bucket at `first`
    /// after `k` doublings, there or in its other bucket, else along a cuckoo path that frees
    /// a lane in one of them. With `unique_to`, nothing is placed if a lane of that key's
    /// buckets (these two) matches it. Counted as one item.
    #[inline(always)]
    pub(super) fn place_entry(
        &self,
        first: Pos,
        entry: u64,
        tail: u32,
        k: u32,
        unique_to: Option<&Key>,
    ) -> Result<Placed, NoRoom> {
        let starts = [(first, entry), self.alternate(first, entry, k)];
        let paths = Paths { filter: self, k };
        for _ in 0..PLACE_ROUNDS {
            {
                let _held = self.lock_pair(starts[0].0, starts[1].0);
                if !self.still(k) {
                    return Ok(Placed::Retry);
                }
                if unique_to.is_some_and(|key| {
                    self.matching_lane(key, 0, k).is_some()
                        || self.matching_lane(key, 1, k).is_some()
                }) {
                    return Ok(Placed::AlreadyPresent);
                }
                for (pos, entry) in starts {
                    if self.table.put(pos, entry) {
                        self.count(first, 1, 1, tail);
                        return Ok(Placed::Inserted);
                    }
                }
            }
            let Some(hops) = cuckoo_path::find_path(&paths, starts[0].0, starts[1].0, PATH_LIMITS)
            else {
                // Nothing was written: splits made on the way stay, and change no answer.
                return Err(NoRoom);
            };
            cuckoo_path::execute_path(&paths, &hops);
        }
        Err(NoRoom)
    }

    /// The other bucket and lane value of `entry` in the (split) bucket at `pos`, after `k`
    /// doublings.
    #[inline(always)]
    pub(super) fn alternate(&self, pos: Pos, entry: u64, k: u32) -> (Pos, u64) {
        let anchor = entry & ANCHOR_MASK;
        let (other, field) = self.keys.alternate(pos, anchor, entry >> ANCHOR_BITS, k);
        (other, (field << ANCHOR_BITS) | anchor)
    }

    /// Whether every lane of both of `key`'s (split) buckets matches it (read without locks:
    /// a refusal's reason, not a promise).
    pub(super) fn buckets_hold_only(&self, key: &Key, k: u32) -> bool {
        (0..2).all(|side| {
            let pos = key.pos(side, k);
            self.table.entries(pos).into_iter().all(|entry| {
                let field = entry >> ANCHOR_BITS;
                field != 0
                    && entry & ANCHOR_MASK == key.anchor
                    && field == key.field(side, k, field_tail_bits(field))
            })
        })
    }

    /// Whether `key`'s two (split) buckets are full of copies of at most two entries (the
    /// same entry seen from either bucket counts once): one or two hot keys. Read without
    /// locks, as `buckets_hold_only`.
    pub(super) fn buckets_held_by_hot_keys(&self, key: &Key, k: u32) -> bool {
        let mut entries = [(Pos { home: 0, high: 0 }, 0u64); 2 * LANES as usize];
        for side in 0..2 {
            let pos = key.pos(side, k);
            for (lane, entry) in (0..LANES).zip(self.table.entries(pos)) {
                if entry >> ANCHOR_BITS == 0 {
                    // Room (or a read torn by a writer): not held.
                    return false;
                }
                // The same entry in either bucket, named by the smaller of its two places.
                let other = self.alternate(pos, entry, k);
                let here = (pos, entry);
                let key = |(p, e): (Pos, u64)| (p.high, p.home, e);
                entries[side * LANES as usize + lane as usize] =
                    if key(here) <= key(other) { here } else { other };
            }
        }
        let first = entries[0];
        let second = entries.iter().find(|&&e| e != first).copied();
        entries.iter().all(|&e| e == first || Some(e) == second)
    }
}
