//! RedisBloom's compaction (`CF.COMPACT`, and the automatic one after deletes), exact.
//!
//! From the newest sub-filter down to sub-filter 1, bucket by bucket and slot by slot, each
//! fingerprint moves to the oldest sub-filter whose two buckets for it (`b` and
//! `b ^ (fp × 0x5bd1e995)`, reduced to that sub-filter) have a free slot. The newest sub-filter
//! is dropped when it was emptied; the automatic compaction stops at the first sub-filter it
//! could not empty.
//!
//! It runs with every sub-filter frozen (no other writer), yet readers go on: each move holds
//! the fingerprint's pair in both sub-filters, writes the older copy first and erases the newer
//! one second, and readers visit sub-filters newest first. A reader that finds the newer slot
//! erased read a stripe version published after the erase, hence after the copy, which it then
//! finds in the older sub-filter.

use super::hash::bucket_of;
use super::sub_filter::{Slot, SubFilter};
use crate::stripe::FreezeGuard;
use crate::sync::Ordering;

/// RedisBloom's multiplier for the alternate bucket.
const ALT_MULTIPLIER: u64 = 0x5bd1_e995;

/// Compacts the frozen sub-filters `held` (oldest first). `cont`: go on past a sub-filter that
/// could not be emptied. `publish(live)` is called when the newest sub-filter is dropped, with
/// the new number of live sub-filters.
pub(crate) fn compact(held: &[(&SubFilter, FreezeGuard<'_>)], cont: bool, publish: impl Fn(usize)) {
    let mut live = held.len();
    for newer in (1..held.len()).rev() {
        let emptied = empty_into_older(held, newer);
        if emptied && newer == live - 1 {
            live -= 1;
            publish(live);
        }
        if !emptied && !cont {
            break;
        }
    }
}

/// Moves every fingerprint of sub-filter `newer` that has room in an older one; returns
/// whether all of them moved.
fn empty_into_older(held: &[(&SubFilter, FreezeGuard<'_>)], newer: usize) -> bool {
    let (source, source_frozen) = &held[newer];
    let mut all_moved = true;
    for bucket in 0..source.buckets() as usize {
        for slot in 0..source.bucket_size() {
            // Relaxed: frozen, and we are the only writer.
            let fp = source.slot(bucket, slot, Ordering::Relaxed);
            if fp == 0 {
                continue;
            }
            let h1 = bucket as u64;
            let h2 = h1 ^ (u64::from(fp) * ALT_MULTIPLIER);
            let moved = held[..newer].iter().any(|(target, target_frozen)| {
                let pair = (
                    bucket_of(h1, target.buckets()) as usize,
                    bucket_of(h2, target.buckets()) as usize,
                );
                // Mutant `rb_erase_before_copy`: erase from the newer sub-filter and release it,
                // then copy into the older one.
                if cfg!(loom_mutant = "rb_erase_before_copy") && target.free_slot(pair).is_some() {
                    let erase = source.lock_pair_frozen(
                        source_frozen,
                        bucket,
                        source.alternate(fp, bucket),
                    );
                    source.write_slot(Slot { bucket, slot }, fp, 0);
                    erase.add_items(-1);
                    drop(erase);
                    let copy = target.lock_pair_frozen(target_frozen, pair.0, pair.1);
                    target.write_slot(target.free_slot(pair).expect("checked"), 0, fp);
                    copy.add_items(1);
                    return true;
                }
                // Lock order (sub-filter, stripe): the older sub-filter first.
                let target_guard = target.lock_pair_frozen(target_frozen, pair.0, pair.1);
                let Some(at) = target.free_slot(pair) else {
                    return false;
                };
                let source_guard =
                    source.lock_pair_frozen(source_frozen, bucket, source.alternate(fp, bucket));
                target.write_slot(at, 0, fp);
                target_guard.add_items(1);
                source.write_slot(Slot { bucket, slot }, fp, 0);
                source_guard.add_items(-1);
                true
            });
            all_moved &= moved;
        }
    }
    all_moved
}
