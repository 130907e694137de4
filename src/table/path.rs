//! Cuckoo paths: a breadth-first search for a free lane, and the moves that walk a path back.
//!
//! The search reads bucket words without locks (as in MemC3 and libcuckoo); what it finds is
//! only a plan. Each move re-checks its part of the plan under the two stripes it changes, so a
//! stale plan costs a new search, never a lost fingerprint.

use super::{is_one_part, Table};
use crate::sync::Ordering;

/// Move the fingerprint in the lane at `position` of bucket `from` (see `bucket_layout`) to its
/// alternate bucket `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hop {
    pub(crate) from: usize,
    pub(crate) position: u32,
    pub(crate) fingerprint: u64,
    pub(crate) to: usize,
}

/// A bucket reached by the search, and how: through the lane at `position` of its parent, whose
/// fingerprint has this bucket as its alternate.
#[derive(Clone, Copy)]
struct Node {
    bucket: u32,
    parent: u32,
    fingerprint: u32,
    position: u8,
    depth: u8,
}

const ROOT: u32 = u32::MAX;

/// Nodes a search allocates room for before it grows: most searches end within two levels of
/// the roots (2 + 8 + 32 nodes with four lanes), and an allocation this small stays in the
/// allocator's per-thread cache, where the 256 nodes allocated before cost an insert near full
/// a tenth of its instructions.
const SEARCH_START: usize = 48;

impl Table {
    /// Searches, breadth first from buckets `a` and `b`, for the shortest path of moves that
    /// frees a lane in `a` or `b`. Returns the hops in execution order (the one into the free
    /// lane first); an empty list when `a` or `b` already has room; `None` when nothing was
    /// found within the limits.
    ///
    /// `A` is the table's layout's access (see `Table::insert`).
    pub(crate) fn find_path<const A: u8>(&self, a: usize, b: usize) -> Option<Vec<Hop>> {
        let limits = self.limits;
        let mut nodes: Vec<Node> =
            Vec::with_capacity((limits.path_nodes as usize).min(SEARCH_START));
        for root in [a, b] {
            if nodes.first().is_some_and(|n| n.bucket as usize == root) {
                continue;
            }
            if self.has_room::<A>(root) {
                return Some(Vec::new());
            }
            nodes.push(Node {
                bucket: root as u32,
                parent: ROOT,
                fingerprint: 0,
                position: 0,
                depth: 0,
            });
        }
        let mut next = 0;
        while next < nodes.len() {
            let node = nodes[next];
            if u32::from(node.depth) < limits.path_depth {
                // Relaxed: a stale view only makes a move fail its check later.
                let word = self.load_as::<A>(node.bucket as usize, Ordering::Relaxed);
                for position in self.positions_as::<A>() {
                    let fingerprint = self.lane_as::<A>(&word, position);
                    if fingerprint == 0 {
                        // Emptied since it was judged full: the path to it is enough.
                        return Some(self.hops_to(&nodes, next));
                    }
                    let to = self.mapper.alternate(node.bucket as usize, fingerprint);
                    if to == node.bucket as usize || on_path(&nodes, next, to) {
                        continue;
                    }
                    if nodes.len() >= limits.path_nodes as usize {
                        return None;
                    }
                    nodes.push(Node {
                        bucket: to as u32,
                        parent: next as u32,
                        fingerprint: fingerprint as u32,
                        position: position as u8,
                        depth: node.depth + 1,
                    });
                    if self.has_room::<A>(to) {
                        return Some(self.hops_to(&nodes, nodes.len() - 1));
                    }
                }
            }
            next += 1;
        }
        None
    }

    /// Executes hops in order; stops at the first whose check fails. Returns whether all ran.
    pub(crate) fn execute_path<const A: u8>(&self, hops: &[Hop]) -> bool {
        hops.iter().all(|&hop| self.move_fingerprint::<A>(hop))
    }

    /// Moves one fingerprint to its alternate bucket under the stripes of both buckets, after
    /// checking that it is still where the search saw it and that the destination has room.
    pub(crate) fn move_fingerprint<const A: u8>(&self, hop: Hop) -> bool {
        let Hop {
            from,
            position,
            fingerprint,
            to,
        } = hop;
        let _guard = if cfg!(loom_mutant = "move_locks_one_stripe") {
            self.stripes.lock_pair(from, from)
        } else {
            self.stripes.lock_pair(from, to)
        };
        // Relaxed: we hold both stripes, and the lock's Acquire made the last writes visible.
        let source = self.load_as::<A>(from, Ordering::Relaxed);
        if self.lane_as::<A>(&source, position) != fingerprint {
            return false;
        }
        let destination = self.load_as::<A>(to, Ordering::Relaxed);
        let Some(free) = self.first_empty_as::<A>(&destination) else {
            return false;
        };
        let copied = self.with_lane_as::<A>(destination, free, fingerprint);
        let erased = self.with_lane_as::<A>(source, position, 0);
        #[cfg(not(loom_mutant = "erase_before_copy"))]
        {
            // Copy before erase, and every word of the erase with Release: a lock-free probe
            // that sees any part of the erase also sees the whole copy, so a moving fingerprint
            // is never missing (see `reprobe`).
            self.store_as::<A>(to, &destination, &copied, Ordering::Relaxed);
            self.store_as::<A>(from, &source, &erased, Ordering::Release);
        }
        #[cfg(loom_mutant = "erase_before_copy")]
        {
            self.store_as::<A>(from, &source, &erased, Ordering::Release);
            self.store_as::<A>(to, &destination, &copied, Ordering::Relaxed);
        }
        true
    }

    /// Whether `bucket` has an empty lane right now (lock-free, advisory).
    #[inline(always)]
    fn has_room<const A: u8>(&self, bucket: usize) -> bool {
        // Relaxed: advisory, checked again under the lock before anything is written.
        self.first_empty_as::<A>(&self.load_as::<A>(bucket, Ordering::Relaxed))
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

    /// The hops that lead from a root to node `end`, in execution order (last hop first).
    fn hops_to(&self, nodes: &[Node], end: usize) -> Vec<Hop> {
        let mut hops = Vec::with_capacity(nodes[end].depth as usize);
        let mut at = end;
        while nodes[at].parent != ROOT {
            let node = nodes[at];
            hops.push(Hop {
                from: nodes[node.parent as usize].bucket as usize,
                position: u32::from(node.position),
                fingerprint: u64::from(node.fingerprint),
                to: node.bucket as usize,
            });
            at = node.parent as usize;
        }
        hops
    }
}

/// Whether `bucket` is node `at` or one of its ancestors (a path must not revisit a bucket).
fn on_path(nodes: &[Node], mut at: usize, bucket: usize) -> bool {
    loop {
        if nodes[at].bucket as usize == bucket {
            return true;
        }
        if nodes[at].parent == ROOT {
            return false;
        }
        at = nodes[at].parent as usize;
    }
}
