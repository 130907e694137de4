//! Halving, the inverse of a doubling (`shrink_to_fit`): bucket `(home, high)` and its upper
//! half `(home, high + 2^(k−1))` merge back into one, each entry taking the bucket bit back as
//! its lowest tail bit, and the last segment is freed.
//!
//! A halving takes `&mut self`: no other thread holds the filter, so no lookup can be reading
//! the segment it frees (the borrow proves what an epoch scheme or memory kept mapped would
//! have to). It builds the halved table beside the old one and keeps it only if every entry
//! found a lane, so a halving that cannot place its entries changes nothing.

use super::counts::Totals;
use super::keys::{field_tail_bits, low_mask, Pos, ANCHOR_BITS};
use super::snapshot::count_lanes;
use super::table::LANES;
use super::{Doubling, Parts, ANCHOR_MASK};
use crate::cuckoo_path::Placed;
use crate::sync::Ordering;

impl Doubling {
    /// Halves the table while its entries fit the halved table below its doubling load: the
    /// number of halvings. Finishes a doubling in progress first. Every stored item
    /// is still found; entries whose lanes have no room for the bucket bit give up their
    /// highest tail bit (see `merged`), so the rate may rise a little.
    pub(crate) fn shrink(&mut self) -> u32 {
        let mut halvings = 0;
        loop {
            self.finish_doubling();
            // Relaxed: `&mut self`, no other thread.
            let k = self.doublings.load(Ordering::Relaxed) as u32;
            if k == 0 {
                return halvings;
            }
            // Every entry keeps a lane (see `merge`); the halved table takes them below its
            // doubling load.
            if self.counts.occupied() > self.load_limit(k - 1) {
                return halvings;
            }
            match self.halved(k) {
                Some(halved) => *self = halved,
                None => return halvings,
            }
            halvings += 1;
        }
    }

    /// This table, with `k` doublings, halved; `None` if memory for it cannot be had or an
    /// entry could not be placed.
    fn halved(&self, k: u32) -> Option<Doubling> {
        let halved = Doubling::from_parts(Parts {
            keys: self.keys.clone(),
            table: self.table.empty_of(k - 1).ok()?,
            stripes: self.stripes.count(),
            planned: self.planned,
            tail_bits: self.tail_bits,
            target: self.target,
            doublings: k - 1,
            splitting: None,
            totals: Totals::default(),
            rng: self.rng,
        });
        let base = self.table.base();
        // Entries beyond the four lanes of their merged bucket, placed once every bucket is in.
        let mut overflow = Vec::new();
        for index in 0..self.table.buckets(k - 1) {
            let lower = Pos {
                home: index % base,
                high: index / base,
            };
            let upper = Pos {
                home: lower.home,
                high: lower.high + (1 << (k - 1)),
            };
            let halves = [lower, upper].map(|pos| self.table.entries(pos).into_iter());
            let mut merged = merge(halves, self.tail_bits).into_iter().flatten();
            for lane in 0..LANES {
                match merged.next() {
                    Some(entry) => halved.table.set(lower, lane, entry),
                    None => break,
                }
            }
            overflow.extend(merged.map(|entry| (lower, entry)));
        }
        for (pos, entry) in overflow {
            let tail = field_tail_bits(entry >> ANCHOR_BITS);
            if halved.place_entry(pos, entry, tail, k - 1, None) != Ok(Placed::Inserted) {
                return None;
            }
        }
        let lanes = count_lanes(&halved.table, k - 1, None, self.tail_bits).ok()?;
        halved.counts.reset(&Totals {
            items: self.counts.totals().items,
            occupied: lanes.occupied,
            by_tail: lanes.by_tail,
        });
        Some(halved)
    }
}

/// The entries of a bucket's two halves (lower, upper) as the bucket they merge into holds
/// them, at most eight.
///
/// Each keeps its own lane, those with no tail bit left too: a lower and an upper copy of
/// one such entry (a doubling copied it into both halves) cannot be told from the entries of
/// two items, one in each half, and merged into one lane they would leave one of those items
/// without an entry once the other is removed.
fn merge(halves: [impl Iterator<Item = u64>; 2], tail_bits: u32) -> [Option<u64>; 8] {
    let mut out = [None; 8];
    let entries = halves.into_iter().zip([0, 1]).flat_map(|(half, bit)| {
        half.filter(|&e| e != 0)
            .map(move |e| merged(e, bit, tail_bits))
    });
    for (slot, entry) in out.iter_mut().zip(entries) {
        *slot = Some(entry);
    }
    out
}

/// `entry`, stored in the lower (`bit` 0) or upper (`bit` 1) half of a bucket, as the merged
/// bucket holds it: the bit goes back below its tail. An entry whose lane has no room for
/// one more tail bit (it has `tail_bits`) gives up its highest one instead: it then matches a
/// few more items, never fewer, so no stored item is lost.
fn merged(entry: u64, bit: u64, tail_bits: u32) -> u64 {
    let anchor = entry & ANCHOR_MASK;
    let field = entry >> ANCHOR_BITS;
    let tail = field_tail_bits(field);
    let longer = (field << 1) | bit;
    let field = if tail < tail_bits {
        longer
    } else {
        (1 << tail_bits) | (longer & low_mask(tail_bits))
    };
    (field << ANCHOR_BITS) | anchor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merged_entry_takes_its_bucket_bit_back_below_its_tail() {
        let anchor = 0b10110;
        let entry = |field: u64| (field << ANCHOR_BITS) | anchor;
        // Two tail bits (0b01 under the marker), room for a third.
        assert_eq!(merged(entry(0b101), 0, 4), entry(0b1010));
        assert_eq!(merged(entry(0b101), 1, 4), entry(0b1011));
        // A full tail gives up its highest bit.
        assert_eq!(merged(entry(0b11011), 1, 4), entry(0b10111));
        // No tail bit left: the bucket bit becomes its only one.
        assert_eq!(merged(entry(1), 1, 4), entry(0b11));
    }

    #[test]
    fn every_entry_of_both_halves_keeps_a_lane_with_its_half_s_bit() {
        let exhausted = (1 << ANCHOR_BITS) | 7;
        let other = (0b110 << ANCHOR_BITS) | 7;
        let lower = [exhausted, other, 0, 0];
        let upper = [exhausted, exhausted, 0, 0];
        let out = merge([lower.into_iter(), upper.into_iter()], 6);
        let out: Vec<u64> = out.into_iter().flatten().collect();
        assert_eq!(
            out,
            [
                merged(exhausted, 0, 6),
                merged(other, 0, 6),
                merged(exhausted, 1, 6),
                merged(exhausted, 1, 6)
            ]
        );
    }
}
