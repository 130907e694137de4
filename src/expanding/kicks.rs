//! Placing an entry: into an empty lane of its two buckets under their stripes, else by a
//! random walk of kicks planned without locks and carried out under the stripes of every
//! bucket it touches, if none of them changed meanwhile; and the tests that tell a full table
//! from buckets jammed by copies of a few items.

use std::hash::BuildHasher;

use super::keys::{field_tail_bits, mix, Key, Pos, ANCHOR_BITS};
use super::table::{lane_of, LANES};
use super::{ExpandingFilter, Placement, ANCHOR_MASK, MAX_KICKS};

/// The buckets a planned walk read, each with the lanes it read and the lanes it would leave.
#[derive(Default)]
struct Plan {
    buckets: Vec<(Pos, u128, u128)>,
    /// Once the walk has read more than `SCANNED_BUCKETS` buckets (a walk may be hundreds of
    /// kicks long), an open-addressing index of them by position: a power of two of slots, at
    /// least twice as many as buckets, each 0 (empty) or a bucket's index plus one.
    slots: Vec<u32>,
}

/// Buckets a walk plans before `Plan` indexes them: up to this many, a scan is cheaper.
const SCANNED_BUCKETS: usize = 8;

impl Plan {
    /// The index in `buckets` of the bucket at `pos`, read now if the walk has not read it.
    fn bucket<S: BuildHasher>(&mut self, filter: &ExpandingFilter<S>, pos: Pos) -> usize {
        if self.slots.is_empty() {
            if let Some(i) = self.buckets.iter().position(|(at, _, _)| *at == pos) {
                return i;
            }
        } else {
            let mut slot = self.first_slot(pos);
            loop {
                match self.slots[slot] {
                    0 => break,
                    i if self.buckets[i as usize - 1].0 == pos => return i as usize - 1,
                    _ => slot = (slot + 1) & (self.slots.len() - 1),
                }
            }
        }
        let lanes = filter.table.lanes(pos);
        self.buckets.push((pos, lanes, lanes));
        let len = self.buckets.len();
        if len > SCANNED_BUCKETS && 2 * len > self.slots.len() {
            self.slots = vec![0; (4 * len).next_power_of_two()];
            for i in 0..len {
                self.index(i);
            }
        } else if !self.slots.is_empty() {
            self.index(len - 1);
        }
        len - 1
    }

    /// Enters bucket `i` into the index.
    fn index(&mut self, i: usize) {
        let mut slot = self.first_slot(self.buckets[i].0);
        while self.slots[slot] != 0 {
            slot = (slot + 1) & (self.slots.len() - 1);
        }
        self.slots[slot] = i as u32 + 1;
    }

    /// Where the search for `pos` starts in `slots` (multiplicative hashing of its position).
    fn first_slot(&self, pos: Pos) -> usize {
        let bits = self.slots.len().trailing_zeros();
        let position = pos.home ^ pos.high.rotate_left(32);
        (position.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
    }

    /// The lanes of planned bucket `i` as the walk has left them so far.
    fn lanes(&self, i: usize) -> u128 {
        self.buckets[i].2
    }

    /// Sets lane `lane` of planned bucket `i` to `value`, in the plan.
    fn write(&mut self, i: usize, lane: u64, value: u64, width: u32) {
        let now = &mut self.buckets[i].2;
        let shift = lane * u64::from(width);
        let mask = ((1u128 << width) - 1) << shift;
        *now = (*now & !mask) | (u128::from(value) << shift);
    }
}

impl<S: BuildHasher> ExpandingFilter<S> {
    /// Places `key`'s entry after `k` doublings (its buckets split): into an empty lane of
    /// either bucket, else by a random walk. With `unique`, nothing is placed if a lane of
    /// its buckets matches it.
    pub(super) fn place(&self, key: &Key, k: u32, unique: bool) -> Placement {
        let first = key.pos(0, k);
        let entry = (key.field(0, k, self.tail_bits) << ANCHOR_BITS) | key.anchor;
        let starts = [(first, entry), self.alternate(first, entry, k)];
        {
            let _held = self.lock_pair(starts[0].0, starts[1].0);
            if !self.still(k) {
                return Placement::Retry;
            }
            if unique
                && (self.matching_lane(key, 0, k).is_some()
                    || self.matching_lane(key, 1, k).is_some())
            {
                return Placement::Present;
            }
            for (pos, entry) in starts {
                if let Some(lane) = self.table.empty_lane(pos) {
                    self.table.set(pos, lane, entry);
                    self.count(first, 1, 1, self.tail_bits);
                    return Placement::Placed;
                }
            }
        }
        self.walk(key, k, unique, starts)
    }

    /// Plans a random walk of kicks from one of `starts` (both full when last seen), then
    /// carries it out under the stripes of every bucket it read if none of them changed.
    fn walk(&self, key: &Key, k: u32, unique: bool, starts: [(Pos, u64); 2]) -> Placement {
        let width = self.table.width();
        let mut rng = walk_state(self.rng, key);
        let mut plan = Plan::default();
        // Start the walk from either bucket.
        let (mut pos, mut entry) = starts[usize::from(next_random(&mut rng) & 4 != 0)];
        let mut placed = false;
        for kick in 0..=MAX_KICKS {
            // (The first bucket is split, and was full under its stripe: it is read again
            // here in case a remove made room since.)
            self.split_at(pos, k);
            let planned = plan.bucket(self, pos);
            let lanes = plan.lanes(planned);
            if let Some(lane) = (0..LANES).find(|&l| lane_of(lanes, l, width) == 0) {
                plan.write(planned, lane, entry, width);
                placed = true;
                break;
            }
            if kick == MAX_KICKS {
                break;
            }
            // Displace a random entry and carry it on, never a copy of the entry carried in:
            // between two buckets full of one hot key's copies, a walk that swapped copies
            // would never leave them.
            let lane = victim_lane(lanes, entry, width, &mut rng);
            let victim = lane_of(lanes, lane, width);
            if victim >> ANCHOR_BITS == 0 {
                // No entry has an empty field: a read torn by a writer. Plan again.
                return Placement::Retry;
            }
            plan.write(planned, lane, entry, width);
            (pos, entry) = self.alternate(pos, victim, k);
        }
        if !placed {
            // Nothing was written: splits made on the way stay, and change no answer.
            return Placement::Failed;
        }
        let stripes = plan
            .buckets
            .iter()
            .map(|&(at, _, _)| at)
            .chain(starts.map(|(at, _)| at))
            .map(|at| self.table.stripe_key(at));
        let _held = self.stripes.lock_buckets(stripes);
        if !self.still(k) {
            return Placement::Retry;
        }
        let unchanged = cfg!(loom_mutant = "expanding_walk_unvalidated")
            || plan
                .buckets
                .iter()
                .all(|&(at, read, _)| self.table.lanes(at) == read);
        if !unchanged {
            return Placement::Retry;
        }
        if unique
            && (self.matching_lane(key, 0, k).is_some() || self.matching_lane(key, 1, k).is_some())
        {
            return Placement::Present;
        }
        for &(at, read, now) in &plan.buckets {
            for lane in 0..LANES {
                let value = lane_of(now, lane, width);
                if lane_of(read, lane, width) != value {
                    self.table.set(at, lane, value);
                }
            }
        }
        self.count(starts[0].0, 1, 1, self.tail_bits);
        Placement::Placed
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
            let lanes = self.table.bucket(pos);
            (0..LANES).all(|lane| {
                let entry = lane_of(lanes, lane, self.table.width());
                let field = entry >> ANCHOR_BITS;
                field != 0
                    && entry & ANCHOR_MASK == key.anchor
                    && field == key.field(side, k, field_tail_bits(field))
            })
        })
    }

    /// Whether every lane of `key`'s two (split) buckets holds an entry that another lane of
    /// them also holds: copies of one item (the same entry, seen from either bucket). Read
    /// without locks, as `buckets_hold_only`.
    pub(super) fn buckets_jammed(&self, key: &Key, k: u32) -> bool {
        let mut entries = [(Pos { home: 0, high: 0 }, 0u64); 2 * LANES as usize];
        for side in 0..2 {
            let pos = key.pos(side, k);
            let lanes = self.table.bucket(pos);
            for lane in 0..LANES {
                let entry = lane_of(lanes, lane, self.table.width());
                if entry >> ANCHOR_BITS == 0 {
                    // Room (or a read torn by a writer): not jammed.
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
        entries
            .iter()
            .enumerate()
            .all(|(i, e)| entries.iter().enumerate().any(|(j, f)| i != j && e == f))
    }
}

/// A random lane of a (full) bucket whose entry differs from `entry`, or any lane if all
/// hold `entry`.
fn victim_lane(lanes: u128, entry: u64, width: u32, rng: &mut u64) -> u64 {
    let start = next_random(rng) & 3;
    (0..LANES)
        .map(|i| (start + i) % LANES)
        .find(|&lane| lane_of(lanes, lane, width) != entry)
        .unwrap_or(start)
}

/// The random state of a walk for `key`: the filter's seed mixed with the item's hash, so
/// that concurrent walks write no shared state (a walk for the same item in the same table
/// takes the same path, which a retry after a changed table does not need to avoid).
fn walk_state(seed: u64, key: &Key) -> u64 {
    let hash = key.stream[0] ^ key.home[0].rotate_left(32) ^ key.anchor.rotate_left(59);
    // Xorshift's state must not be zero.
    mix(seed ^ hash) | 1
}

/// The kick chains' random choices (xorshift64).
fn next_random(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_finds_every_bucket_it_read_before_and_after_indexing_them() {
        let filter = ExpandingFilter::builder().capacity(10_000).build().unwrap();
        let mut plan = Plan::default();
        let base = filter.table.base();
        // 300 distinct buckets of the first table: the plan scans the first few and indexes
        // the rest, growing its index as it goes.
        let positions: Vec<Pos> = (0..300u64)
            .map(|i| Pos {
                home: (i * 7) % base,
                high: 0,
            })
            .collect();
        assert!(base > 7 * 300, "distinct positions");
        for (n, &pos) in positions.iter().enumerate() {
            let i = plan.bucket(&filter, pos);
            assert_eq!(i, n, "a new bucket goes last");
            plan.write(i, 0, n as u64 + 1, filter.table.width());
            // Every bucket read so far is found, with what the plan wrote into it.
            for (m, &earlier) in positions[..=n].iter().enumerate() {
                let j = plan.bucket(&filter, earlier);
                assert_eq!(j, m, "{earlier:?} read again after {n} buckets");
                assert_eq!(
                    lane_of(plan.lanes(j), 0, filter.table.width()),
                    m as u64 + 1
                );
            }
        }
        assert!(!plan.slots.is_empty(), "long plans are indexed");
    }
}
