//! RedisBloom's kick walk (`Filter_KOInsert`), deterministic and exact, run under locks.
//!
//! RedisBloom swaps the new fingerprint into its first bucket at a rotating victim slot, moves
//! the evicted one to its other bucket, and so on, up to `max_iterations` times; on failure it
//! undoes every swap. The walk's path depends only on the bytes it reads, so it is first
//! simulated on a private copy of the buckets it touches. If it fails, nothing is written at
//! all (the same bytes as Redis's rollback). If it succeeds, the stripes of every bucket on the
//! path are held together while the changed slots are written: every fingerprint the walk
//! moves has both of its buckets on the path, so a reader of any of them fails its validation
//! and looks again, and never proves an absence from a half-done walk.

use std::collections::HashMap;

use super::sub_filter::{Slot, SubFilter};
use crate::stripe::SetGuard;
use crate::sync::Ordering;

/// The buckets a walk touched, in their state before and after it.
struct Walk {
    /// Touched buckets, in the order first touched.
    order: Vec<usize>,
    before: HashMap<usize, Vec<u8>>,
    after: HashMap<usize, Vec<u8>>,
    placed: bool,
}

/// Simulates RedisBloom's walk for `fp` from bucket `start`, reading buckets with `read`.
fn simulate(
    sub: &SubFilter,
    fp: u8,
    start: usize,
    max_iterations: u16,
    read: impl Fn(usize) -> Vec<u8>,
) -> Walk {
    let mut walk = Walk {
        order: Vec::new(),
        before: HashMap::new(),
        after: HashMap::new(),
        placed: false,
    };
    let touch = |walk: &mut Walk, bucket: usize| {
        if !walk.after.contains_key(&bucket) {
            let bytes = read(bucket);
            walk.order.push(bucket);
            walk.before.insert(bucket, bytes.clone());
            walk.after.insert(bucket, bytes);
        }
    };
    let bucket_size = sub.bucket_size();
    let (mut carried, mut bucket, mut victim) = (fp, start, 0);
    for _ in 0..max_iterations {
        touch(&mut walk, bucket);
        let slots = walk.after.get_mut(&bucket).expect("touched");
        std::mem::swap(&mut slots[victim], &mut carried);
        bucket = sub.alternate(carried, bucket);
        touch(&mut walk, bucket);
        let slots = walk.after.get_mut(&bucket).expect("touched");
        if let Some(free) = slots.iter().position(|&b| b == 0) {
            slots[free] = carried;
            walk.placed = true;
            return walk;
        }
        victim = (victim + 1) % bucket_size;
    }
    walk
}

/// Runs the walk for `fp` from `start` in `sub`: `Some(guard)` when it placed the fingerprint
/// (the guard still holds the path's stripes, for the caller's item count and checks), `None`
/// when it found no room (nothing changed). `still_current` is asked once the path is locked,
/// and a `false` abandons the walk with nothing written (the sub-filter was dropped).
pub(crate) fn kick<'s>(
    sub: &'s SubFilter,
    fp: u8,
    start: usize,
    max_iterations: u16,
    still_current: impl Fn() -> bool,
) -> KickOutcome<'s> {
    // Acquire: a first, unlocked guess at the path; it is re-checked under the locks.
    let unlocked = |bucket| sub.bucket_bytes(bucket, Ordering::Acquire);
    let mut cover = simulate(sub, fp, start, max_iterations, unlocked).order;
    for round in 0.. {
        if round == 4 {
            // Other writers keep changing the path: take the whole sub-filter once.
            cover = sub.every_stripe();
        }
        let guard = sub.lock_buckets(&cover);
        if !still_current() {
            return KickOutcome::Stale;
        }
        // Relaxed: buckets whose stripes are held are stable; others are re-read below.
        let walk = simulate(sub, fp, start, max_iterations, |bucket| {
            sub.bucket_bytes(bucket, Ordering::Relaxed)
        });
        if let Some(&outside) = walk.order.iter().find(|&&b| !guard.covers(b)) {
            cover.extend(walk.order.iter().copied().filter(|&b| !guard.covers(b)));
            debug_assert!(!guard.covers(outside));
            continue;
        }
        if !walk.placed {
            return KickOutcome::NoRoom;
        }
        // Mutant `rb_no_path_locks`: write the walk holding only the new fingerprint's pair.
        #[cfg(loom_mutant = "rb_no_path_locks")]
        let guard = {
            drop(guard);
            sub.lock_buckets(&[start, sub.alternate(fp, start)])
        };
        apply(sub, &walk);
        return KickOutcome::Placed(guard);
    }
    unreachable!("the loop returns")
}

/// What a kick walk did.
pub(crate) enum KickOutcome<'s> {
    /// The fingerprint is in; the path's stripes are still held.
    Placed(SetGuard<'s>),
    /// No room within `max_iterations`; nothing changed.
    NoRoom,
    /// The sub-filter is no longer the newest published one; nothing changed.
    Stale,
}

/// Writes the slots a successful walk changed; the caller holds every stripe on the path.
fn apply(sub: &SubFilter, walk: &Walk) {
    for &bucket in &walk.order {
        let (before, after) = (&walk.before[&bucket], &walk.after[&bucket]);
        for (slot, (&old, &new)) in before.iter().zip(after).enumerate() {
            if old != new {
                sub.write_slot(Slot { bucket, slot }, old, new);
            }
        }
    }
}
