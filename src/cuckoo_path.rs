//! Cuckoo paths: a breadth-first search for a free lane, and the moves that walk a path back.
//! One engine for every table that moves entries between an item's two buckets one hop at a
//! time (`CuckooFilter`'s table, the doubling table); `RedisCuckooFilter` keeps RedisBloom's own
//! walk, which its byte-for-byte compatibility fixes.
//!
//! The search reads buckets without locks (as in MemC3 and libcuckoo); what it finds is only a
//! plan. Each move re-checks its part of the plan under the two stripes it changes, so a stale
//! plan costs a new search, never a lost entry.

use std::ops::{ControlFlow, Deref};

/// What placing an entry did, in every table that places entries along cuckoo paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    /// A new copy of the entry was stored.
    Inserted,
    /// Only an absent item was to be stored, and a matching entry was already there; nothing
    /// changed.
    AlreadyPresent,
    /// The table changed shape under the writer (it doubled, or it was released as an empty
    /// older level); nothing was stored: look at the table again and start over.
    Retry,
}

/// No room could be found within the search's limits; the table is as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NoRoom;

/// What the search needs of a table: its buckets' lanes as they are now, each entry's other
/// bucket, and the move of one entry under its two buckets' stripes.
pub(crate) trait PathSpace {
    /// A bucket's name.
    type Bucket: Copy + Eq;

    /// Calls `visit` with each lane of `bucket` as `(position, entry)`, read now without a
    /// lock (advisory: every move checks again), until it breaks; entry 0 is an empty lane.
    fn visit_lanes<R>(
        &self,
        bucket: Self::Bucket,
        visit: impl FnMut(u32, u64) -> ControlFlow<R>,
    ) -> ControlFlow<R>;

    /// The other bucket of `entry`, stored in `bucket`, and the entry it becomes there.
    fn alternate(&self, bucket: Self::Bucket, entry: u64) -> (Self::Bucket, u64);

    /// Whether `bucket` has an empty lane now (lock-free, advisory).
    fn has_room(&self, bucket: Self::Bucket) -> bool {
        self.visit_lanes(bucket, |_, entry| {
            if entry == 0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .is_break()
    }

    /// Carries out `hop` under the stripes of both its buckets if the plan still holds there
    /// (the lane still holds the entry, the destination still has room): copies the entry
    /// first and erases it second, so a lock-free lookup never misses it. Whether it moved.
    fn move_entry(&self, hop: &Hop<Self::Bucket>) -> bool;
}

/// Move the entry in the lane at `position` of bucket `from` to its other bucket `to`, where it
/// is stored as `moved`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hop<B> {
    pub(crate) from: B,
    pub(crate) position: u32,
    pub(crate) entry: u64,
    pub(crate) to: B,
    pub(crate) moved: u64,
}

/// How far a search may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SearchLimits {
    /// Buckets a search may visit.
    pub(crate) nodes: u32,
    /// Longest path, in hops.
    pub(crate) depth: u32,
}

impl SearchLimits {
    /// The limits of every table's inserts (loom models set smaller ones). 8192 buckets rather
    /// than 2048 let four-lane tables fill a little further before the first failed insert, at
    /// the cost of a longer search only near a full table (measured in BENCHMARKS.md,
    /// "Constants chosen by measurement").
    pub(crate) const DEFAULT: SearchLimits = SearchLimits {
        nodes: 8192,
        depth: 8,
    };
}

/// A bucket reached by the search, and how: through the lane at `position` of its parent,
/// whose entry has this bucket as its other one.
#[derive(Clone, Copy)]
struct Node<B> {
    bucket: B,
    parent: u32,
    /// Entries are at most 32 bits wide: a node of a table named by `u32`s takes 16 bytes.
    entry: u32,
    position: u8,
    depth: u8,
}

const ROOT: u32 = u32::MAX;

/// Nodes a search allocates room for before it grows: most searches end within two levels of
/// the roots (2 + 8 + 32 nodes with four lanes), and an allocation this small stays in the
/// allocator's per-thread cache, where the 256 nodes allocated before cost an insert near full
/// a tenth of its instructions.
const SEARCH_START: usize = 48;

/// A path of moves, in execution order: most are one hop, which need no allocation.
pub(crate) enum Path<B> {
    /// One of the buckets has room already.
    Empty,
    /// One move frees a lane.
    One(Hop<B>),
    /// Longer paths.
    Many(Vec<Hop<B>>),
}

impl<B> Deref for Path<B> {
    type Target = [Hop<B>];

    fn deref(&self) -> &[Hop<B>] {
        match self {
            Path::Empty => &[],
            Path::One(hop) => std::slice::from_ref(hop),
            Path::Many(hops) => hops,
        }
    }
}

/// Searches, breadth first from buckets `a` and `b`, for the shortest path of moves that frees
/// a lane in `a` or `b`. Returns the hops in execution order (the one into the free lane
/// first); an empty path when `a` or `b` already has room; `None` when nothing was found
/// within `limits`.
#[inline(always)]
pub(crate) fn find_path<P: PathSpace>(
    space: &P,
    a: P::Bucket,
    b: P::Bucket,
    limits: SearchLimits,
) -> Option<Path<P::Bucket>> {
    // The roots and their first level, in the order the search below visits them, without
    // allocating: most searches end there. (The node limit cannot stop a search this close
    // to its roots in any table's limits but the loom models'; a path found here is valid
    // under any limit.)
    if limits.depth >= 1 {
        for root in [a, b] {
            let found = space.visit_lanes(root, |position, entry| {
                if entry == 0 {
                    return ControlFlow::Break(Path::Empty);
                }
                let (to, moved) = space.alternate(root, entry);
                if to != root && space.has_room(to) {
                    return ControlFlow::Break(Path::One(Hop {
                        from: root,
                        position,
                        entry,
                        to,
                        moved,
                    }));
                }
                ControlFlow::Continue(())
            });
            if let ControlFlow::Break(path) = found {
                return Some(path);
            }
        }
    }
    let mut nodes: Vec<Node<P::Bucket>> =
        Vec::with_capacity((limits.nodes as usize).min(SEARCH_START));
    for root in [a, b] {
        if nodes.first().is_some_and(|n| n.bucket == root) {
            continue;
        }
        if space.has_room(root) {
            return Some(Path::Empty);
        }
        nodes.push(Node {
            bucket: root,
            parent: ROOT,
            entry: 0,
            position: 0,
            depth: 0,
        });
    }
    let mut next = 0;
    while next < nodes.len() {
        let node = nodes[next];
        if u32::from(node.depth) < limits.depth {
            let found = space.visit_lanes(node.bucket, |position, entry| {
                if entry == 0 {
                    // Emptied since it was judged full: the path to it is enough.
                    return ControlFlow::Break(Some(next));
                }
                let (to, _) = space.alternate(node.bucket, entry);
                if to == node.bucket || on_path(&nodes, next, to) {
                    return ControlFlow::Continue(());
                }
                if nodes.len() >= limits.nodes as usize {
                    return ControlFlow::Break(None);
                }
                debug_assert!(entry <= u64::from(u32::MAX), "entries are at most 32 bits");
                nodes.push(Node {
                    bucket: to,
                    parent: next as u32,
                    entry: entry as u32,
                    position: position as u8,
                    depth: node.depth + 1,
                });
                if space.has_room(to) {
                    return ControlFlow::Break(Some(nodes.len() - 1));
                }
                ControlFlow::Continue(())
            });
            if let ControlFlow::Break(end) = found {
                return end.map(|end| Path::Many(hops_to(space, &nodes, end)));
            }
        }
        next += 1;
    }
    None
}

/// Executes hops in order; stops at the first whose check fails. Returns whether all ran.
pub(crate) fn execute_path<P: PathSpace>(space: &P, hops: &[Hop<P::Bucket>]) -> bool {
    hops.iter().all(|hop| space.move_entry(hop))
}

/// The hops that lead from a root to node `end`, in execution order (last hop first).
fn hops_to<P: PathSpace>(space: &P, nodes: &[Node<P::Bucket>], end: usize) -> Vec<Hop<P::Bucket>> {
    let mut hops = Vec::with_capacity(nodes[end].depth as usize);
    let mut at = end;
    while nodes[at].parent != ROOT {
        let node = nodes[at];
        let from = nodes[node.parent as usize].bucket;
        let entry = u64::from(node.entry);
        hops.push(Hop {
            from,
            position: u32::from(node.position),
            entry,
            to: node.bucket,
            moved: space.alternate(from, entry).1,
        });
        at = node.parent as usize;
    }
    hops
}

/// Whether `bucket` is node `at` or one of its ancestors (a path must not revisit a bucket).
fn on_path<B: Copy + Eq>(nodes: &[Node<B>], mut at: usize, bucket: B) -> bool {
    loop {
        if nodes[at].bucket == bucket {
            return true;
        }
        if nodes[at].parent == ROOT {
            return false;
        }
        at = nodes[at].parent as usize;
    }
}
