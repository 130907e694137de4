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

/// First-level nodes a search keeps from its scan (two roots of up to eight lanes); a search
/// with more visits the first level again.
const FIRST_LEVEL: usize = 16;

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
/// first); an empty path when `a` or `b` already has room, unless a move of an entry of theirs
/// scanned before the empty lane frees one first; `None` when nothing was found within
/// `limits`.
#[inline(always)]
pub(crate) fn find_path<P: PathSpace>(
    space: &P,
    a: P::Bucket,
    b: P::Bucket,
    limits: SearchLimits,
) -> Option<Path<P::Bucket>> {
    // The roots and their first level, without allocating: most searches end there. Each
    // root's lanes are scanned and each alternate tested as it is found, so a move may be
    // found before a root's own room (writers search only after finding both buckets full,
    // so one of them has room again only under a race). (The node limit cannot stop a
    // search this close to its roots in any table's limits but the loom models'; a path
    // found here is valid under any limit.) The first level is kept, so that a deeper search
    // goes on from it instead of reading it again.
    let roots: &[P::Bucket] = if a == b { &[a] } else { &[a, b] };
    let mut level: [Option<Node<P::Bucket>>; FIRST_LEVEL] = [None; FIRST_LEVEL];
    let mut kept = 0;
    if limits.depth >= 1 {
        for (r, &root) in roots.iter().enumerate() {
            let found = space.visit_lanes(root, |position, entry| {
                if entry == 0 {
                    return ControlFlow::Break(Path::Empty);
                }
                let (to, moved) = space.alternate(root, entry);
                if to == root {
                    return ControlFlow::Continue(());
                }
                if space.has_room(to) {
                    return ControlFlow::Break(Path::One(Hop {
                        from: root,
                        position,
                        entry,
                        to,
                        moved,
                    }));
                }
                debug_assert!(entry <= u64::from(u32::MAX), "entries are at most 32 bits");
                if let Some(slot) = level.get_mut(kept) {
                    *slot = Some(Node {
                        bucket: to,
                        parent: r as u32,
                        entry: entry as u32,
                        position: position as u8,
                        depth: 1,
                    });
                }
                kept += 1;
                ControlFlow::Continue(())
            });
            if let ControlFlow::Break(path) = found {
                return Some(path);
            }
        }
    }
    let mut nodes: Vec<Node<P::Bucket>> =
        Vec::with_capacity((limits.nodes as usize).min(SEARCH_START));
    for &root in roots {
        nodes.push(Node {
            bucket: root,
            parent: ROOT,
            entry: 0,
            position: 0,
            depth: 0,
        });
    }
    let mut next = 0;
    if limits.depth >= 1 && kept <= FIRST_LEVEL {
        // The search below would visit the roots (full, as the scan saw them) and add this
        // level, none with room, up to the node limit. (With more than `FIRST_LEVEL` nodes in
        // it, the search reads the first level again, from the roots.)
        if nodes.len() + kept > limits.nodes as usize {
            return None;
        }
        nodes.extend(level.into_iter().flatten());
        next = roots.len();
    } else if roots.iter().any(|&root| space.has_room(root)) {
        return Some(Path::Empty);
    }
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::VecDeque;

    use super::*;
    use crate::test_rng::SplitMix;

    /// A toy table: entry `id` (nonzero) lives in one of the two buckets `homes[id]`.
    struct Toy {
        lanes: RefCell<Vec<Vec<u64>>>,
        homes: Vec<[u32; 2]>,
    }

    impl PathSpace for Toy {
        type Bucket = u32;

        fn visit_lanes<R>(
            &self,
            bucket: u32,
            mut visit: impl FnMut(u32, u64) -> ControlFlow<R>,
        ) -> ControlFlow<R> {
            let lanes = self.lanes.borrow()[bucket as usize].clone();
            for (position, entry) in lanes.into_iter().enumerate() {
                visit(position as u32, entry)?;
            }
            ControlFlow::Continue(())
        }

        fn alternate(&self, bucket: u32, entry: u64) -> (u32, u64) {
            let [one, two] = self.homes[entry as usize];
            (if bucket == one { two } else { one }, entry)
        }

        fn move_entry(&self, hop: &Hop<u32>) -> bool {
            let mut lanes = self.lanes.borrow_mut();
            if lanes[hop.from as usize][hop.position as usize] != hop.entry {
                return false;
            }
            let Some(free) = lanes[hop.to as usize].iter().position(|&e| e == 0) else {
                return false;
            };
            lanes[hop.to as usize][free] = hop.moved;
            lanes[hop.from as usize][hop.position as usize] = 0;
            true
        }
    }

    /// A toy of `buckets` buckets of `lanes` lanes, filled to all but `empty` lanes, each
    /// entry's two buckets drawn at random (sometimes the same bucket twice).
    fn toy(rng: &mut SplitMix, buckets: u32, lanes: usize, empty: usize) -> Toy {
        let total = buckets as usize * lanes;
        let mut table = vec![vec![0u64; lanes]; buckets as usize];
        let mut homes = vec![[0, 0]];
        let mut slots: Vec<usize> = (0..total).collect();
        for i in (1..total).rev() {
            slots.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        for &slot in &slots[..total - empty.min(total)] {
            let bucket = (slot / lanes) as u32;
            let other = if rng.next().is_multiple_of(16) {
                bucket
            } else {
                (rng.next() % u64::from(buckets)) as u32
            };
            table[slot / lanes][slot % lanes] = homes.len() as u64;
            homes.push(if rng.next().is_multiple_of(2) {
                [bucket, other]
            } else {
                [other, bucket]
            });
        }
        Toy {
            lanes: RefCell::new(table),
            homes,
        }
    }

    /// The fewest moves that free a lane in `a` or `b` (a breadth-first search over buckets).
    fn fewest_moves(toy: &Toy, a: u32, b: u32) -> Option<u32> {
        let lanes = toy.lanes.borrow();
        let mut distance = vec![u32::MAX; lanes.len()];
        let mut queue = VecDeque::new();
        for root in [a, b] {
            distance[root as usize] = 0;
            queue.push_back(root);
        }
        while let Some(bucket) = queue.pop_front() {
            if lanes[bucket as usize].contains(&0) {
                return Some(distance[bucket as usize]);
            }
            for &entry in &lanes[bucket as usize] {
                let (to, _) = toy.alternate(bucket, entry);
                if distance[to as usize] == u32::MAX {
                    distance[to as usize] = distance[bucket as usize] + 1;
                    queue.push_back(to);
                }
            }
        }
        None
    }

    /// Paths found with no node limit are shortest, and moving along them frees a lane in
    /// one of the two buckets; within a depth limit, nothing is found only when every path is
    /// longer. Buckets of four and of nine lanes (more than the first level a search keeps).
    #[test]
    fn paths_are_shortest_and_free_a_lane_of_either_bucket() {
        let mut rng = SplitMix(0x0005_eed0_f9a7);
        let mut lengths = [0u32; 6];
        for round in 0..4_000 {
            let lanes = if round % 4 == 0 { 9 } else { 4 };
            let buckets = 2 + (rng.next() % 60) as u32;
            let empty = (rng.next() % 4) as usize;
            let toy = toy(&mut rng, buckets, lanes, empty);
            let a = (rng.next() % u64::from(buckets)) as u32;
            let b = if rng.next().is_multiple_of(8) {
                a
            } else {
                (rng.next() % u64::from(buckets)) as u32
            };
            let depth = 1 + (rng.next() % 5) as u32;
            let limits = SearchLimits {
                nodes: u32::MAX,
                depth,
            };
            let fewest = fewest_moves(&toy, a, b).filter(|&moves| moves <= depth);
            let path = find_path(&toy, a, b, limits);
            let at = format!("round {round}, a {a}, b {b}, depth {depth}");
            let length = path.as_ref().map(|p| p.len() as u32);
            // Room in a root may come second to a move found before it (see `find_path`).
            assert!(
                length == fewest || (fewest == Some(0) && length == Some(1)),
                "{at}: {length:?} moves, {fewest:?} needed"
            );
            if let Some(path) = path {
                lengths[path.len().min(5)] += 1;
                assert!(execute_path(&toy, &path), "{at}");
                let lanes = toy.lanes.borrow();
                assert!(
                    lanes[a as usize].contains(&0) || lanes[b as usize].contains(&0),
                    "{at}"
                );
            }
        }
        // Every length occurs, so the first level's scan and the deeper search are both run.
        assert!(lengths[..4].iter().all(|&n| n > 20), "{lengths:?}");
    }

    /// A node limit stops the search: it then finds nothing, or a path no longer than the
    /// depth limit that frees a lane; never more nodes than the limit, counted from the roots.
    #[test]
    fn a_node_limit_stops_the_search_without_a_wrong_path() {
        let mut rng = SplitMix(0x0001_1417);
        let (mut found, mut stopped) = (0, 0);
        for round in 0..4_000 {
            let buckets = 4 + (rng.next() % 40) as u32;
            let toy = toy(&mut rng, buckets, 4, 1);
            let (a, b) = (
                (rng.next() % u64::from(buckets)) as u32,
                (rng.next() % u64::from(buckets)) as u32,
            );
            let nodes = 1 + (rng.next() % 24) as u32;
            let limits = SearchLimits { nodes, depth: 8 };
            let at = format!("round {round}, nodes {nodes}");
            match find_path(&toy, a, b, limits) {
                Some(path) => {
                    found += 1;
                    // A path of n hops needs its n + 1 buckets, a root among them.
                    assert!((path.len() as u32) < nodes.max(2), "{at}");
                    assert!(execute_path(&toy, &path), "{at}");
                }
                None => {
                    stopped += 1;
                    // With no limit, a path would have been found unless none exists.
                    let free = fewest_moves(&toy, a, b);
                    assert!(free.is_none_or(|moves| moves > 0), "{at}");
                }
            }
        }
        assert!(
            found > 100 && stopped > 100,
            "{found} found, {stopped} stopped"
        );
    }
}
