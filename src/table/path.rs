//! The table's side of cuckoo paths (`cuckoo_path` searches them): its buckets seen as a
//! [`PathSpace`], and the move of one fingerprint under the stripes of both its buckets.

use std::ops::ControlFlow;

use super::{is_one_part, Table};
use crate::cuckoo_path::{self, Hop, Path, PathSpace};
use crate::sync::Ordering;

/// A table as the path search sees it, for a layout whose access is `A` (see
/// `Table::insert`). Buckets are named by `u32`s (tables have fewer than 2^32 buckets), so a
/// search node takes 16 bytes.
pub(crate) struct Paths<'t, const A: u8>(pub(crate) &'t Table);

impl<const A: u8> PathSpace for Paths<'_, A> {
    type Bucket = u32;

    #[inline(always)]
    fn visit_lanes<R>(
        &self,
        bucket: u32,
        mut visit: impl FnMut(u32, u64) -> ControlFlow<R>,
    ) -> ControlFlow<R> {
        let table = self.0;
        // Relaxed: a stale view only makes a move fail its check later. Unmasked: only lanes
        // are read (see `probe_from`).
        let word = table.probe_as::<A>(bucket as usize, Ordering::Relaxed);
        for position in table.positions_as::<A>() {
            visit(position, table.lane_as::<A>(&word, position))?;
        }
        ControlFlow::Continue(())
    }

    #[inline(always)]
    fn alternate(&self, bucket: u32, fingerprint: u64) -> (u32, u64) {
        let to = self.0.mapper.alternate(bucket as usize, fingerprint);
        (to as u32, fingerprint)
    }

    #[inline(always)]
    fn has_room(&self, bucket: u32) -> bool {
        self.0.has_room::<A>(bucket as usize)
    }

    fn move_entry(&self, hop: &Hop<u32>) -> bool {
        self.0.move_fingerprint::<A>(hop)
    }
}

impl Table {
    /// Searches for a cuckoo path that frees a lane in `a` or `b` (see
    /// `cuckoo_path::find_path`), within this table's limits.
    pub(crate) fn find_path<const A: u8>(&self, a: usize, b: usize) -> Option<Path<u32>> {
        cuckoo_path::find_path(&Paths::<A>(self), a as u32, b as u32, self.limits.path)
    }

    /// Executes hops in order; stops at the first whose check fails. Returns whether all ran.
    pub(crate) fn execute_path<const A: u8>(&self, hops: &[Hop<u32>]) -> bool {
        cuckoo_path::execute_path(&Paths::<A>(self), hops)
    }

    /// Moves one fingerprint to its alternate bucket under the stripes of both buckets, after
    /// checking that it is still where the search saw it and that the destination has room.
    pub(crate) fn move_fingerprint<const A: u8>(&self, hop: &Hop<u32>) -> bool {
        let (from, to) = (hop.from as usize, hop.to as usize);
        let (position, fingerprint) = (hop.position, hop.entry);
        let _guard = if cfg!(loom_mutant = "move_locks_one_stripe") {
            self.stripes.lock_pair(from, from)
        } else {
            self.stripes.lock_pair(from, to)
        };
        // Relaxed: we hold both stripes, and the lock's Acquire made the last writes visible.
        // Unmasked: only lanes are read and written (see `probe_from`).
        let source = self.probe_as::<A>(from, Ordering::Relaxed);
        if self.lane_as::<A>(&source, position) != fingerprint {
            return false;
        }
        let destination = self.probe_as::<A>(to, Ordering::Relaxed);
        #[cfg(not(loom_mutant = "erase_before_copy"))]
        {
            // Copy before erase, and every word of the erase with Release: a lock-free probe
            // that sees any part of the erase also sees the whole copy, so a moving fingerprint
            // is never missing (see `reprobe`).
            if !self.put_as::<A>(to, destination, fingerprint, Ordering::Relaxed) {
                return false;
            }
            self.erase_as::<A>(from, source, position, Ordering::Release);
        }
        #[cfg(loom_mutant = "erase_before_copy")]
        {
            if self.first_empty_as::<A>(&destination).is_none() {
                return false;
            }
            self.erase_as::<A>(from, source, position, Ordering::Release);
            self.put_as::<A>(to, destination, fingerprint, Ordering::Relaxed);
        }
        true
    }

    /// Whether `bucket` has an empty lane right now (lock-free, advisory).
    #[inline(always)]
    fn has_room<const A: u8>(&self, bucket: usize) -> bool {
        // Relaxed: advisory, checked again under the lock before anything is written.
        self.first_empty_as::<A>(&self.probe_as::<A>(bucket, Ordering::Relaxed))
            .is_some()
    }

    /// The positions of a bucket's lanes (see `BucketLayout::positions`), for a table whose
    /// layout's access is `A`.
    #[inline(always)]
    pub(super) fn positions_as<const A: u8>(&self) -> impl Iterator<Item = u32> {
        let (one_part, part) = (is_one_part(A), *self.layout.part());
        let general = (!one_part).then(|| self.layout.positions());
        part.lane_shifts()
            .filter(move |_| one_part)
            .chain(general.into_iter().flatten())
    }
}
