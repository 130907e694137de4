//! Releasing the empty older levels of a grown filter (`release_empty_levels`): which levels
//! are released, that a released level never receives an item again (so lookups may skip it),
//! that its memory is given back, and that no live item is ever missed while writers, readers
//! and releases run at once.
//!
//! Most tests use 32-bit fingerprints, where no two of a few hundred thousand keys collide in
//! practice: a remove then always takes the removed item's own copy, so the level each item
//! went to is the level that empties when its items are removed.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use atomic_cuckoo::{CuckooFilter, InsertError};
use common::Rng;

/// One test at a time where a test measures the process's resident set.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn growing(capacity: usize) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .expansion(2)
        .fingerprint_bits(32)
        .build()
        .unwrap()
}

/// Inserts `items` one by one; returns the level each went to (single-threaded, an insert goes
/// to the newest level, which is the newest once it returns).
fn insert_tracking_levels(
    filter: &CuckooFilter,
    items: impl IntoIterator<Item = u64>,
) -> Vec<(u64, usize)> {
    items
        .into_iter()
        .map(|i| {
            filter.insert(&i).unwrap();
            (i, filter.levels() - 1)
        })
        .collect()
}

fn released_levels(filter: &CuckooFilter) -> Vec<bool> {
    filter.level_stats().iter().map(|l| l.released).collect()
}

#[test]
fn nothing_is_released_while_every_level_holds_items() {
    let filter = growing(1_000);
    insert_tracking_levels(&filter, 0..10_000);
    assert!(filter.levels() >= 4);
    let (memory, slots) = (filter.memory_usage(), filter.slots());
    assert_eq!(filter.release_empty_levels(), 0);
    assert!(released_levels(&filter).iter().all(|&r| !r));
    assert_eq!((filter.memory_usage(), filter.slots()), (memory, slots));
    assert!((0..10_000u64).all(|i| filter.contains(&i)));
}

#[test]
fn the_newest_level_is_never_released() {
    // A filter that does not grow, empty: its one level is the newest.
    let fixed = CuckooFilter::with_capacity(1_000);
    assert_eq!(fixed.release_empty_levels(), 0);
    // A growing filter on its first level, empty.
    let filter = growing(1_000);
    assert_eq!(filter.release_empty_levels(), 0);
    // Grown, then cleared: every level is empty, and all but the newest are released.
    insert_tracking_levels(&filter, 0..10_000);
    let levels = filter.levels();
    filter.clear();
    assert_eq!(filter.release_empty_levels(), levels - 1);
    let released = released_levels(&filter);
    assert_eq!(released.iter().filter(|&&r| r).count(), levels - 1);
    assert!(!released[levels - 1], "the newest level was released");
    assert_eq!(filter.release_empty_levels(), 0, "released twice");
    // Inserts go on into the newest level.
    insert_tracking_levels(&filter, 20_000..20_500);
    assert_eq!(filter.len(), 500);
    assert_eq!(filter.level_stats()[levels - 1].len, 500);
    assert!((20_000..20_500u64).all(|i| filter.contains(&i)));
}

#[test]
fn a_level_emptied_in_the_middle_is_released_alone() {
    let filter = growing(1_000);
    let placed = insert_tracking_levels(&filter, 0..20_000);
    let levels = filter.levels();
    assert!(levels >= 5, "{levels} levels");
    let before = filter.level_stats();
    let (fpr, slots, capacity) = (
        filter.false_positive_rate(),
        filter.slots(),
        filter.capacity(),
    );
    let middle = 2;
    for &(i, _) in placed.iter().filter(|(_, level)| *level == middle) {
        assert!(filter.remove(&i));
    }
    assert_eq!(filter.level_stats()[middle].len, 0);
    assert_eq!(filter.release_empty_levels(), 1);
    let released = released_levels(&filter);
    assert_eq!(
        released,
        (0..levels).map(|l| l == middle).collect::<Vec<_>>()
    );
    for &(i, level) in &placed {
        assert_eq!(
            filter.contains(&i),
            level != middle,
            "item {i} of level {level}"
        );
    }
    let mut found = Vec::new();
    filter.contains_many(placed.iter().map(|&(i, _)| i), &mut found);
    assert!(placed
        .iter()
        .zip(&found)
        .all(|(&(_, level), &found)| found == (level != middle)));
    // A released level counts no items, slots, memory (beyond its stripes) or rate.
    let live = placed.iter().filter(|(_, l)| *l != middle).count();
    assert_eq!(filter.len(), live);
    assert_eq!(filter.capacity(), capacity - before[middle].len);
    assert_eq!(filter.slots(), slots - before[middle].slots);
    assert!(filter.false_positive_rate() < fpr);
    assert_eq!(filter.levels(), levels);
    assert!(filter.load_factor() > 0.0);
}

/// After level k is emptied and released, inserts and removes go on (with repeated copies)
/// and the filter grows further, releasing as it goes: every live item is found as often as it
/// is live, the counts add up, and no released level ever holds an item.
#[test]
fn a_released_level_never_receives_items() {
    let seed = common::seed("a_released_level_never_receives_items");
    let mut rng = Rng::new(seed);
    let filter = growing(500);
    let placed = insert_tracking_levels(&filter, 0..6_000);
    let k = 1;
    let mut live: HashMap<u64, usize> = HashMap::new();
    for &(i, level) in &placed {
        if level == k {
            assert!(filter.remove(&i));
        } else {
            *live.entry(i).or_default() += 1;
        }
    }
    assert_eq!(filter.release_empty_levels(), 1);
    let mut next = 1_000_000u64;
    for round in 0..40 {
        for _ in 0..1_000 {
            match rng.below(10) {
                // A new item, or another copy of a live one (an item's buckets hold a few
                // copies per level: a failed insert changes nothing, and is not counted).
                0..=4 => {
                    let item = if rng.below(4) == 0 && !live.is_empty() {
                        *live
                            .keys()
                            .nth(rng.below(live.len() as u64) as usize)
                            .unwrap()
                    } else {
                        next += 1;
                        next
                    };
                    match filter.insert(&item) {
                        Ok(()) => *live.entry(item).or_default() += 1,
                        Err(InsertError::ItemBucketsFull) => {}
                        Err(e) => panic!("seed {seed}: insert {item}: {e}"),
                    }
                }
                // Remove one copy of a live item, oldest items most often.
                _ => {
                    let Some(&item) = live.keys().min_by_key(|&&i| (i ^ rng.next_u64()) % 64)
                    else {
                        continue;
                    };
                    assert!(filter.remove(&item), "seed {seed}: remove {item}");
                    let copies = live.get_mut(&item).unwrap();
                    *copies -= 1;
                    if *copies == 0 {
                        live.remove(&item);
                    }
                }
            }
        }
        if round % 4 == 3 {
            filter.release_empty_levels();
        }
        let stats = filter.level_stats();
        for (level, s) in stats.iter().enumerate() {
            assert!(
                !s.released || s.len == 0,
                "seed {seed}: released level {level} holds {}",
                s.len
            );
        }
        assert!(stats[k].released);
        assert!(!stats.last().unwrap().released);
        assert_eq!(filter.len(), live.values().sum::<usize>(), "seed {seed}");
        for (&item, &copies) in &live {
            assert!(filter.contains(&item), "seed {seed}: {item} lost");
            assert_eq!(filter.count(&item), copies, "seed {seed}: copies of {item}");
        }
    }
    println!(
        "{} levels, released {:?}",
        filter.levels(),
        released_levels(&filter)
    );
}

/// A first level of 4M items (about 8 MiB of buckets, so mapped on its own) is emptied and
/// released: `memory_usage` drops by its words, and on Linux so does the resident set; its
/// items read as absent, and new items go to level 1 and are found.
#[test]
fn releasing_a_large_level_gives_its_memory_back() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let filter = CuckooFilter::builder()
        .capacity(4_000_000)
        .expansion(2)
        .build()
        .unwrap();
    // A level holds more than its capacity: insert one by one until the level is added, by
    // the insert of `first` (items before it are in level 0).
    filter.insert_many(0..filter.capacity() as u64).unwrap();
    assert_eq!(filter.levels(), 1);
    let mut first = filter.capacity() as u64;
    loop {
        filter.insert(&first).unwrap();
        if filter.levels() == 2 {
            break;
        }
        first += 1;
    }
    filter.insert_many(first + 1..first + 100_000).unwrap();
    let level_zero = filter.level_stats()[0].clone();
    assert!(level_zero.memory_usage > 4 << 20, "{level_zero:?}");
    // Level 1's items first: a remove looks at the newest level first, and may take a level-1
    // copy that collides with a level-0 item's key (its own copy then stands in for the other).
    for i in (first..first + 100_000).chain(0..first) {
        assert!(filter.remove(&i));
    }
    assert_eq!(filter.level_stats()[0].len, 0);
    let memory = filter.memory_usage();
    #[cfg(target_os = "linux")]
    let rss = common::resident();
    assert_eq!(filter.release_empty_levels(), 1);
    let given_back = memory - filter.memory_usage();
    #[cfg(target_os = "linux")]
    {
        let dropped = rss.saturating_sub(common::resident());
        println!(
            "level 0: {} bytes; memory_usage fell by {given_back}, the resident set by {dropped}",
            level_zero.memory_usage
        );
        assert!(given_back * 10 >= level_zero.memory_usage * 9);
        assert!(
            dropped * 10 >= given_back * 9,
            "resident set fell by only {dropped}"
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = given_back;
    filter.insert_many(first..first + 100_000).unwrap();
    assert!((first..first + 100_000).all(|i| filter.contains(&i)));
    assert_eq!(filter.level_stats()[0].len, 0);
    let false_hits = (0..100_000u64).filter(|i| filter.contains(i)).count();
    assert!(
        false_hits < 2_000,
        "{false_hits} of 100,000 removed items still found"
    );
}

/// A sliding window of 40,000 ids over 400,000 empties the older levels of a filter that
/// started at 1,000 items. Released, every level with at least 16 KiB of buckets (each has a
/// mapping of its own) gives its words back, in the filter itself and in copies restored by
/// `from_bytes` and by `read_from` (whose levels are copied into mappings too): what is left of
/// such a level is its stripes.
#[test]
fn released_levels_give_their_memory_back_from_16_kib_and_after_a_restore() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .expansion(2)
        .build()
        .unwrap();
    for id in 0..400_000u64 {
        filter.insert(&id).unwrap();
        if id >= 40_000 {
            filter.remove(&(id - 40_000));
        }
    }
    let bytes = filter.to_bytes();
    let restored = [
        ("built", filter),
        ("from_bytes", CuckooFilter::from_bytes(&bytes).unwrap()),
        ("read_from", CuckooFilter::read_from(&bytes[..]).unwrap()),
    ];
    for (how, filter) in restored {
        let before = filter.level_stats();
        let released = filter.release_empty_levels();
        let after = filter.level_stats();
        println!(
            "{how}: {} levels, {released} released; bytes per level before {:?}, after {:?}",
            before.len(),
            before.iter().map(|l| l.memory_usage).collect::<Vec<_>>(),
            after.iter().map(|l| l.memory_usage).collect::<Vec<_>>()
        );
        let mut large_released = 0;
        for (i, (was, now)) in before.iter().zip(&after).enumerate() {
            // Words and stripes: 16 KiB of words and a few hundred bytes of stripes at least.
            if now.released && was.memory_usage >= 17 << 10 {
                large_released += 1;
                assert!(
                    now.memory_usage * 16 < was.memory_usage,
                    "{how}: level {i} released but kept {} of {} bytes",
                    now.memory_usage,
                    was.memory_usage
                );
            }
        }
        assert!(
            large_released >= 2,
            "{how}: {large_released} large levels released"
        );
        assert!(
            (360_000..400_000u64).all(|id| filter.contains(&id)),
            "{how}"
        );
    }
}

/// `shrink_to_fit` drops empty levels at the newest end, released ones included; a released
/// first level left as the newest becomes an ordinary level that takes inserts again.
#[test]
fn shrink_to_fit_drops_released_levels_and_revives_the_first() {
    let mut filter = growing(1_000);
    insert_tracking_levels(&filter, 0..10_000);
    filter.clear();
    assert!(filter.release_empty_levels() > 0);
    filter.shrink_to_fit();
    assert_eq!(filter.levels(), 1);
    assert_eq!(released_levels(&filter), [false]);
    insert_tracking_levels(&filter, 0..500);
    assert_eq!(filter.level_stats()[0].len, 500);
    assert!((0..500u64).all(|i| filter.contains(&i)));

    // Items left in the newest level: the empty older ones are released by the shrink.
    let mut filter = growing(1_000);
    let placed = insert_tracking_levels(&filter, 0..10_000);
    let newest = filter.levels() - 1;
    for &(i, level) in &placed {
        if level != newest {
            assert!(filter.remove(&i));
        }
    }
    filter.shrink_to_fit();
    assert_eq!(filter.levels(), newest + 1);
    let released = released_levels(&filter);
    assert!(released[..newest].iter().all(|&r| r) && !released[newest]);
}

/// A snapshot and a clone hold a released level as an ordinary empty one; the copies find
/// every item, and can release it themselves.
#[test]
fn snapshots_and_clones_hold_released_levels_as_empty_ones() {
    let filter = growing(1_000);
    let placed = insert_tracking_levels(&filter, 0..10_000);
    for &(i, level) in &placed {
        if level == 0 {
            assert!(filter.remove(&i));
        }
    }
    assert_eq!(filter.release_empty_levels(), 1);
    let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
    let copy = filter.clone();
    for other in [&restored, &copy] {
        assert_eq!(other.levels(), filter.levels());
        assert_eq!(other.len(), filter.len());
        assert!(released_levels(other).iter().all(|&r| !r));
        assert_eq!(other.level_stats()[0].len, 0);
        assert!(placed
            .iter()
            .all(|&(i, level)| other.contains(&i) == (level != 0)));
        assert_eq!(other.release_empty_levels(), 1);
    }
    // A clear keeps the released level released.
    filter.clear();
    assert!(released_levels(&filter)[0]);
    assert!(filter.is_empty());
}

/// Tiny levels, two writers sliding windows of ids (one with `insert`, one with `insert_many`),
/// a thread releasing empty levels in a loop, and two readers (one `contains`, one
/// `contains_many`) checking that every live id is found: an id is live from its insert's
/// return until its writer raises the window's low end past it, which it does before
/// removing it. Many rounds, each on a new filter, so that levels are added and released
/// while the others run again and again.
#[test]
fn sliding_windows_with_concurrent_releases_never_miss_a_live_item() {
    let (mut released, mut checked) = (0, 0);
    for _ in 0..20 {
        let (r, c) = sliding_window_round();
        released += r;
        checked += c;
    }
    println!("{released} levels released, {checked} live lookups checked");
    assert!(released > 0, "no level was released");
}

/// One round of `sliding_windows_with_concurrent_releases_never_miss_a_live_item`: levels
/// released, live lookups checked.
fn sliding_window_round() -> (usize, u64) {
    const WINDOW: u64 = 200;
    const IDS: u64 = 3_000;
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(16)
            .expansion(2)
            .build()
            .unwrap(),
    );
    // Per writer: ids `lo..hi` are live (ids of writer w are `w << 32 | i`).
    let windows: Arc<[(AtomicU64, AtomicU64); 2]> = Arc::new(Default::default());
    let done = Arc::new(AtomicBool::new(false));
    let id = |w: usize, i: u64| (w as u64) << 32 | i;

    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (filter, windows) = (Arc::clone(&filter), Arc::clone(&windows));
            std::thread::spawn(move || {
                let (lo, hi) = &windows[w];
                for i in 0..IDS {
                    if w == 0 {
                        filter.insert(&id(w, i)).unwrap();
                    } else {
                        filter.insert_many([id(w, i)]).unwrap();
                    }
                    // Release: a reader that sees `hi` past i finds i's insert done.
                    hi.store(i + 1, Ordering::Release);
                    if i >= WINDOW {
                        let leaving = i - WINDOW;
                        // Release: raised before the remove starts (see the readers).
                        lo.store(leaving + 1, Ordering::Release);
                        assert!(filter.remove(&id(w, leaving)), "remove of a live id failed");
                    }
                }
            })
        })
        .collect();
    let releaser = {
        let (filter, done) = (Arc::clone(&filter), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut released = 0;
            while !done.load(Ordering::Relaxed) {
                released += filter.release_empty_levels();
                std::thread::yield_now();
            }
            released
        })
    };
    let readers = spawn_window_readers(&filter, &windows, &done);
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let released = releaser.join().unwrap();
    let checked: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert_eq!(filter.len(), 2 * WINDOW as usize);
    for w in 0..2 {
        assert!((IDS - WINDOW..IDS).all(|i| filter.contains(&id(w, i))));
    }
    let stats = filter.level_stats();
    assert!(stats.iter().all(|s| !s.released || s.len == 0));
    (released, checked)
}

/// Two readers of a shared sliding window, one with `contains` and one with `contains_many`,
/// each checking every live id of both writers' windows until `done`: per writer `w`, ids
/// `lo..hi` of `windows[w]` are live, and writer `w`'s id `i` is `w << 32 | i`. A writer raises
/// `hi` (Release) after an insert and `lo` (Release) before the remove; a miss is a failure
/// unless `lo` has passed the id by then. Each reader returns how many lookups it checked.
pub(super) fn spawn_window_readers(
    filter: &Arc<CuckooFilter>,
    windows: &Arc<[(AtomicU64, AtomicU64); 2]>,
    done: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<u64>> {
    let id = |w: usize, i: u64| (w as u64) << 32 | i;
    (0..2)
        .map(|r| {
            let (filter, windows, done) =
                (Arc::clone(filter), Arc::clone(windows), Arc::clone(done));
            std::thread::spawn(move || {
                let mut checked = 0u64;
                let mut found = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    for (w, (lo, hi)) in windows.iter().enumerate() {
                        // Acquire: every id below `hi` was inserted before we look it up.
                        let top = hi.load(Ordering::Acquire);
                        let bottom = lo.load(Ordering::Acquire);
                        let ids: Vec<u64> = (bottom..top).map(|i| id(w, i)).collect();
                        if r == 0 {
                            found.clear();
                            found.extend(ids.iter().map(|i| filter.contains(i)));
                        } else {
                            filter.contains_many(&ids, &mut found);
                        }
                        for (i, &present) in (bottom..top).zip(&found) {
                            // Acquire: a miss is only allowed once the remove may have started.
                            if !present && lo.load(Ordering::Acquire) <= i {
                                panic!("live id {i} of writer {w} not found (reader {r})");
                            }
                        }
                        checked += found.len() as u64;
                    }
                }
                checked
            })
        })
        .collect()
}

/// The destination of a save that calls `release_empty_levels` on the filter being saved.
struct ReleasingWriter<'a> {
    filter: &'a CuckooFilter,
    released: Option<usize>,
    bytes: Vec<u8>,
}

impl std::io::Write for ReleasingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.released.is_none() {
            self.released = Some(self.filter.release_empty_levels());
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Inside a save of the same filter (its destination), a release cannot take the levels'
/// lock that the save holds: it releases nothing instead of waiting forever, and the snapshot
/// is whole.
#[test]
fn a_release_inside_its_own_filters_save_releases_nothing() {
    let filter = growing(1_000);
    insert_tracking_levels(&filter, 0..10_000);
    filter.clear();
    let mut out = ReleasingWriter {
        filter: &filter,
        released: None,
        bytes: Vec::new(),
    };
    filter.write_to(&mut out).unwrap();
    assert_eq!(out.released, Some(0));
    assert!(CuckooFilter::from_bytes(&out.bytes).unwrap().is_empty());
    assert_eq!(filter.release_empty_levels(), filter.levels() - 1);
}

/// Copies of a grown filter restored by `from_bytes` and by `read_from` (every level of 16 KiB
/// and more copied into a mapping of its own), cleared, then released: each such level gives
/// its words back, and the resident set falls by as much as `memory_usage` says, though the
/// restore and the clear wrote to every page of those levels. The released levels here are
/// all below 2 MiB, the sizes that were first given mappings of their own.
#[test]
fn restored_mid_sized_levels_give_their_resident_pages_back_when_released() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .expansion(2)
        .build()
        .unwrap();
    filter.insert_many(0..300_000u64).unwrap();
    let bytes = filter.to_bytes();
    let copies: Vec<CuckooFilter> = (0..16)
        .map(|i| {
            if i % 2 == 0 {
                CuckooFilter::from_bytes(&bytes).unwrap()
            } else {
                CuckooFilter::read_from(&bytes[..]).unwrap()
            }
        })
        .collect();
    for copy in &copies {
        copy.clear();
    }
    let before: Vec<_> = copies.iter().map(CuckooFilter::level_stats).collect();
    let memory: usize = copies.iter().map(CuckooFilter::memory_usage).sum();
    #[cfg(target_os = "linux")]
    let rss = common::resident();
    for copy in &copies {
        assert_eq!(copy.release_empty_levels(), copy.levels() - 1);
    }
    #[cfg(target_os = "linux")]
    let dropped = rss.saturating_sub(common::resident());
    let given_back = memory - copies.iter().map(CuckooFilter::memory_usage).sum::<usize>();
    let mut mid_sized = 0;
    for (copy, before) in copies.iter().zip(&before) {
        let newest = before.len() - 1;
        for (i, (was, now)) in before.iter().zip(copy.level_stats()).enumerate() {
            // Words and stripes: 16 KiB of words and a few hundred bytes of stripes at least.
            if i < newest && was.memory_usage >= 17 << 10 {
                assert!(was.memory_usage < 2 << 20, "level {i}: {was:?}");
                assert!(
                    now.memory_usage * 16 < was.memory_usage,
                    "level {i} kept {} of {} bytes",
                    now.memory_usage,
                    was.memory_usage
                );
                mid_sized += 1;
            }
        }
    }
    assert!(mid_sized >= 16 * 3, "{mid_sized} mid-sized levels released");
    #[cfg(target_os = "linux")]
    {
        println!(
            "{mid_sized} mid-sized levels released: memory_usage fell by {given_back}, the \
             resident set by {dropped}"
        );
        assert!(
            dropped * 10 >= given_back * 9,
            "resident set fell by only {dropped} of {given_back}"
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = given_back;
    for copy in &copies {
        copy.insert_many(0..1_000u64).unwrap();
        assert!((0..1_000u64).all(|i| copy.contains(&i)));
    }
}
