//! Placing an entry: a random walk of kicks, undone if it fails, and the tests that tell a
//! full table from buckets jammed by copies of a few items.

use std::hash::BuildHasher;

use super::keys::{field_tail_bits, Key, Pos, ANCHOR_BITS};
use super::table::LANES;
use super::{ExpandingFilter, ANCHOR_MASK, MAX_KICKS};

impl<S: BuildHasher> ExpandingFilter<S> {
    /// Places `key`'s entry, kicking others along a random walk; on failure undoes every move.
    /// Every bucket it reads or writes is split first.
    pub(super) fn place(&mut self, key: &Key) -> bool {
        let mut pos = key.pos(0, self.doublings);
        let mut entry = (key.field(0, self.doublings, self.tail_bits) << ANCHOR_BITS) | key.anchor;
        // The kicks so far: (bucket, lane, entry it held), undone in reverse on failure.
        let mut undo: Vec<(Pos, u64, u64)> = Vec::new();
        for kick in 0..=MAX_KICKS {
            self.split_at(pos);
            if let Some(lane) = self.table.empty_lane(pos) {
                self.table.set(pos, lane, entry);
                return true;
            }
            // The other bucket of a carried entry is the one it was just kicked from, full.
            if kick == 0 {
                let (other, other_entry) = self.alternate(pos, entry);
                self.split_at(other);
                if let Some(lane) = self.table.empty_lane(other) {
                    self.table.set(other, lane, other_entry);
                    return true;
                }
                // Start the walk from either bucket.
                if self.next_random() & 4 != 0 {
                    (pos, entry) = (other, other_entry);
                }
            }
            if kick == MAX_KICKS {
                break;
            }
            // Displace a random entry and carry it on, never a copy of the entry carried in:
            // between two buckets full of one hot key's copies, a walk that swapped copies
            // would never leave them.
            let lane = self.victim_lane(pos, entry);
            let victim = self.table.get(pos, lane);
            self.table.set(pos, lane, entry);
            undo.push((pos, lane, victim));
            (pos, entry) = self.alternate(pos, victim);
        }
        // Splits made on the way stay: they change no answer, and no undone bucket was split
        // after its change (each was split before it was first touched).
        for (at, lane, victim) in undo.into_iter().rev() {
            self.table.set(at, lane, victim);
        }
        false
    }

    /// A random lane of the (full) bucket at `pos` whose entry differs from `entry`, or any
    /// lane if all hold `entry`.
    fn victim_lane(&mut self, pos: Pos, entry: u64) -> u64 {
        let start = self.next_random() & 3;
        (0..LANES)
            .map(|i| (start + i) % LANES)
            .find(|&lane| self.table.get(pos, lane) != entry)
            .unwrap_or(start)
    }

    /// The kick chains' random choices (xorshift64).
    fn next_random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// The other bucket and lane value of `entry` in the (split) bucket at `pos`.
    #[inline(always)]
    pub(super) fn alternate(&self, pos: Pos, entry: u64) -> (Pos, u64) {
        let anchor = entry & ANCHOR_MASK;
        let (other, field) = self
            .keys
            .alternate(pos, anchor, entry >> ANCHOR_BITS, self.doublings);
        (other, (field << ANCHOR_BITS) | anchor)
    }

    /// Whether every lane of both of `key`'s (split) buckets matches it.
    pub(super) fn buckets_hold_only(&self, key: &Key) -> bool {
        (0..2).all(|side| {
            let pos = key.pos(side, self.doublings);
            (0..LANES).all(|lane| {
                let entry = self.table.get(pos, lane);
                entry != 0 && entry & ANCHOR_MASK == key.anchor && {
                    let field = entry >> ANCHOR_BITS;
                    field == key.field(side, self.doublings, field_tail_bits(field))
                }
            })
        })
    }

    /// Whether every lane of `key`'s two (split) buckets holds an entry that another lane of
    /// them also holds: copies of one item (the same entry, seen from either bucket).
    pub(super) fn buckets_jammed(&self, key: &Key) -> bool {
        let mut entries = [(Pos { home: 0, high: 0 }, 0u64); 2 * LANES as usize];
        for side in 0..2 {
            let pos = key.pos(side, self.doublings);
            for lane in 0..LANES {
                let entry = self.table.get(pos, lane);
                // The same entry in either bucket, named by the smaller of its two places.
                let other = self.alternate(pos, entry);
                let here = (pos, entry);
                let key = |(p, e): (Pos, u64)| (p.high, p.home, e);
                entries[side * LANES as usize + lane as usize] =
                    if key(here) <= key(other) { here } else { other };
            }
        }
        entries
            .iter()
            .enumerate()
            .all(|(i, e)| entries.iter().enumerate().any(|(j, f)| i != j && e == f))
    }
}
