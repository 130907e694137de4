//! Test-only access to the doubling table for the loom models (compiled only with
//! `--cfg loom`): tiny tables, entries placed in chosen buckets, a doubling begun and a bucket
//! split on demand, and the full outcome of a lookup. All of it drives the real code.

use super::counts::Totals;
use super::keys::{KeyMap, ANCHOR_BITS};
use super::table::Table;
use super::{Doubling, Parts, MAX_DOUBLINGS};
use crate::optimistic_read::Lookup;

/// Stripes of a model's filter: fewer than the crate's rule gives a tiny table (one per bucket),
/// so that a doubling's freeze is few steps to explore; the first table's buckets share one
/// stripe, the first segment added by a doubling the other (see `loom_hook::tiny_doubling`).
const LOOM_STRIPES: usize = 2;

impl Doubling {
    /// An empty table of `base` (even) first-table buckets of four `lane_bits`-bit lanes,
    /// planned for `planned` doublings (a plan, not a ceiling: it doubles past them), guarded
    /// by two stripes (`LOOM_STRIPES`). Its lookups and writers take hashes: a model's items
    /// are their own hashes.
    pub(crate) fn loom_tiny(base: u64, lane_bits: u32, planned: u32) -> Self {
        assert!(planned <= MAX_DOUBLINGS);
        let table = Table::new(base, lane_bits, false).expect("a tiny table");
        Doubling::from_parts(Parts {
            keys: KeyMap::new(base),
            // Fewer than the crate's rule gives (4,096 for the largest table), so that a model
            // creates few atomics per execution and a doubling's freeze is few steps.
            stripes: LOOM_STRIPES,
            table,
            planned,
            tail_bits: lane_bits - 1 - ANCHOR_BITS,
            target: 0.5,
            doublings: 0,
            splitting: None,
            totals: Totals::default(),
            rng: 0x2545_f491_4f6c_dd1d,
        })
    }

    /// `item`'s bucket on each side after `doublings` doublings: (home, high part).
    pub(crate) fn loom_buckets(&self, item: u64, doublings: u32) -> [(u64, u64); 2] {
        let key = self.keys.key(item);
        [0, 1].map(|side| {
            let pos = key.pos(side, doublings);
            (pos.home, pos.high)
        })
    }

    /// Stores `item`'s entry in its bucket on `side` (counted as an item); false when that
    /// bucket is full. Not during a doubling.
    pub(crate) fn loom_place(&self, item: u64, side: usize) -> bool {
        let k = self.doublings_now();
        assert!(!self.is_doubling(), "places only between doublings");
        let key = self.keys.key(item);
        let at = [key.pos(0, k), key.pos(1, k)];
        let _held = self.lock_pair(at[0], at[1]);
        let entry = (key.field(side, k, self.tail_bits) << ANCHOR_BITS) | key.anchor;
        if !self.table.put(at[side], entry) {
            return false;
        }
        self.count(at[0], 1, 1, self.tail_bits);
        true
    }

    /// Whether `item`'s bucket on `side` holds an entry that matches it (between doublings).
    pub(crate) fn loom_holds(&self, item: u64, side: usize) -> bool {
        let k = self.doublings_now();
        let key = self.keys.key(item);
        let at = [key.pos(0, k), key.pos(1, k)];
        let _held = self.lock_pair(at[0], at[1]);
        self.matching_lane(&key, side, k).is_some()
    }

    /// The full outcome of `contains(item)`.
    pub(crate) fn loom_lookup(&self, item: u64) -> Lookup {
        self.lookup_retried(item, &self.keys.key(item))
    }

    /// Begins the next doubling now, as an insert that found the table full would.
    pub(crate) fn loom_begin_doubling(&self) {
        let k = self.doublings_now();
        self.double(k).expect("room for another doubling");
    }

    /// Splits old bucket `index` (`home + base · high`) of the doubling in progress.
    pub(crate) fn loom_split_old(&self, index: u64) {
        let k = self.doublings_now();
        let base = self.table.base();
        let old = super::keys::Pos {
            home: index % base,
            high: index / base,
        };
        self.split_at(old, k);
    }

    /// Claims `count` old buckets for splitting, as an insert does (`split_next`).
    pub(crate) fn loom_split_next(&self, count: u64) {
        self.split_next(count);
    }

    /// Splits the old bucket of `item` on `side`, as a writer about to touch it would.
    pub(crate) fn loom_split(&self, item: u64, side: usize) {
        let k = self.doublings_now();
        let key = self.keys.key(item);
        self.split_at(key.pos(side, k), k);
    }
}
