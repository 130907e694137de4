//! A doubling spread over the inserts after it: the new buckets are added at once, and old
//! buckets are split in order (two per insert) or when an operation is about to touch them.

use std::hash::BuildHasher;

use super::keys::{low_mask, Key, Pos};
use super::{ExpandingFilter, Splitting};
use crate::error::InsertError;

impl<S: BuildHasher> ExpandingFilter<S> {
    /// Begins a doubling: finishes the one before, if any, and adds the new buckets, which the
    /// inserts after it split into.
    pub(super) fn double(&mut self) -> Result<(), InsertError> {
        self.finish_doubling();
        let bytes = self.table.next_segment_bytes();
        let old = self.table.buckets();
        let mut split = Vec::new();
        if bytes == usize::MAX || split.try_reserve_exact(old.div_ceil(64) as usize).is_err() {
            return Err(InsertError::GrowthFailed { bytes });
        }
        split.resize(old.div_ceil(64) as usize, 0);
        self.table
            .add_segment()
            .map_err(|bytes| InsertError::GrowthFailed { bytes })?;
        self.doublings += 1;
        self.splitting = Some(Splitting {
            split,
            next: 0,
            left: old,
        });
        // Counted as if split already: each entry loses a tail bit, and one with none left
        // becomes two (lanes included). Removes split a bucket before they touch it, so this
        // stays exact.
        let exhausted = self.by_tail[0];
        self.occupied += exhausted;
        self.by_tail.copy_within(1.., 0);
        self.by_tail[31] = 0;
        self.by_tail[0] += 2 * exhausted;
        Ok(())
    }

    /// Splits the old bucket of a (current) position, if a doubling has not split it yet.
    pub(super) fn split_at(&mut self, pos: Pos) {
        if self.splitting.is_some() {
            let k = self.doublings - 1;
            let old = Pos {
                home: pos.home,
                high: pos.high & low_mask(k),
            };
            self.split_old(old);
        }
    }

    /// Splits both of `key`'s buckets, if a doubling has not split them yet.
    pub(super) fn split_buckets_of(&mut self, key: &Key) {
        if self.splitting.is_some() {
            for side in 0..2 {
                self.split_old(key.pos(side, self.doublings - 1));
            }
        }
    }

    /// Splits the old bucket at `old` unless it is split already.
    fn split_old(&mut self, old: Pos) {
        let index = self.old_index(old);
        let Some(splitting) = &mut self.splitting else {
            return;
        };
        if splitting.is_split(index) {
            return;
        }
        splitting.split[(index / 64) as usize] |= 1 << (index % 64);
        splitting.left -= 1;
        if splitting.left == 0 {
            self.splitting = None;
        }
        // The copies it makes were counted when the doubling began.
        self.table.split(old, self.doublings - 1);
    }

    /// Splits up to `count` more old buckets of an unfinished doubling, in order.
    pub(super) fn split_next(&mut self, count: u64) {
        for _ in 0..count {
            let Some(splitting) = &mut self.splitting else {
                return;
            };
            // Skip those already split by the inserts that touched them.
            while splitting.is_split(splitting.next) {
                splitting.next += 1;
            }
            let index = splitting.next;
            let base = self.table.base();
            self.split_old(Pos {
                home: index % base,
                high: index / base,
            });
        }
    }

    /// Splits every bucket an unfinished doubling has left, so lookups read one bucket per
    /// side again without first checking whether it is split. Inserts do this gradually (two
    /// buckets each); call this when the filter is built and will only be read.
    pub fn finish_doubling(&mut self) {
        while let Some(splitting) = &self.splitting {
            let left = splitting.left;
            self.split_next(left);
        }
    }

    /// Whether a doubling is still splitting buckets (see
    /// [`finish_doubling`](Self::finish_doubling)).
    pub fn is_doubling(&self) -> bool {
        self.splitting.is_some()
    }
}
