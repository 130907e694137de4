//! `shrink_to_fit` on a grown filter whose older levels were all emptied (a sliding window):
//! the oldest live level's fingerprints are truncated to the first level's width. Every live
//! item is still found, the measured rate stays under the target, snapshots and clones keep
//! the narrowed level (with the empty levels below it released), the filter goes on sliding
//! and growing, and a snapshot that narrows a level above a non-empty one is refused.

use crate::common::{self, Rng};
use crate::format_model::{self, Snapshot};
use crate::release::spawn_window_readers;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use atomic_cuckoo::{CuckooFilter, InsertError, Layout, PersistError};

const LAYOUTS: [Layout; 3] = [Layout::Packed, Layout::Compact, Layout::OneWord];
const TARGET: f64 = 0.01;

/// A filter of `capacity(1_000)` growing by 2 at a 1 % target, after a window of `live` ids
/// slid over `0..ids`.
fn slid(layout: Layout, live: u64, ids: u64) -> CuckooFilter {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .expansion(2)
        .false_positive_rate(TARGET)
        .layout(layout)
        .build()
        .unwrap();
    slide(&filter, 0, live, ids);
    filter
}

/// Inserts `from..to`, removing each id `live` below the one inserted.
fn slide(filter: &CuckooFilter, from: u64, live: u64, to: u64) {
    for id in from..to {
        filter.insert(&id).unwrap();
        if id >= live {
            assert!(
                filter.remove(&(id - live)),
                "live id {} not found",
                id - live
            );
        }
    }
}

/// The share of 200,000 ids never inserted that the filter reports present.
fn measured_rate(filter: &CuckooFilter) -> f64 {
    let absent = (1u64 << 40..(1 << 40) + 200_000)
        .filter(|id| filter.contains(id))
        .count();
    absent as f64 / 200_000.0
}

fn widths(filter: &CuckooFilter) -> Vec<u32> {
    filter
        .level_stats()
        .iter()
        .map(|l| l.fingerprint_bits)
        .collect()
}

#[test]
fn shrink_to_fit_narrows_the_oldest_live_level_to_the_first_levels_width() {
    for layout in LAYOUTS {
        let mut filter = slid(layout, 20_000, 200_000);
        let before = filter.level_stats();
        let memory = filter.memory_usage();
        filter.shrink_to_fit();
        let after = filter.level_stats();
        let live = after.iter().position(|l| !l.released).unwrap();
        let rate = measured_rate(&filter);
        println!(
            "{layout:?}: widths {:?} -> {:?}, {} -> {} bytes, {:.2} bits per live id, \
             measured rate {:.3} % (expected {:.3} %)",
            before
                .iter()
                .map(|l| l.fingerprint_bits)
                .collect::<Vec<_>>(),
            widths(&filter),
            memory,
            filter.memory_usage(),
            filter.memory_usage() as f64 * 8.0 / filter.len() as f64,
            rate * 100.0,
            filter.false_positive_rate() * 100.0
        );
        assert!(live > 0 && live == after.len() - 1, "{layout:?}: {after:?}");
        assert!(before[live].fingerprint_bits > before[0].fingerprint_bits);
        assert_eq!(after[live].fingerprint_bits, before[0].fingerprint_bits);
        assert_eq!(after[live].len, 20_000);
        assert!(filter.memory_usage() < memory);
        assert!((180_000..200_000u64).all(|id| filter.contains(&id)));
        assert!(rate <= TARGET, "{layout:?}: measured {rate}");
        assert!(filter.false_positive_rate() <= TARGET);
        // Nothing to narrow a second time.
        let bytes = filter.to_bytes();
        filter.shrink_to_fit();
        assert_eq!(filter.to_bytes(), bytes);
    }
}

#[test]
fn nothing_is_narrowed_while_an_older_level_holds_items() {
    let mut filter = slid(Layout::Packed, 20_000, 30_000);
    // Ids 0..10,000 were removed, not all older levels emptied: level 0 held the first ones.
    let before = widths(&filter);
    let bytes = filter.to_bytes();
    filter.insert(&5u64).unwrap();
    filter.shrink_to_fit();
    assert_eq!(widths(&filter), before);
    assert!(filter.contains(&5u64));
    assert!(filter.remove(&5u64));
    assert_eq!(filter.to_bytes(), bytes);
}

#[test]
fn a_narrowed_level_survives_snapshots_and_clones_with_the_levels_below_released() {
    for layout in LAYOUTS {
        let mut filter = slid(layout, 20_000, 200_000);
        filter.shrink_to_fit();
        let bytes = filter.to_bytes();
        let copies = [
            ("from_bytes", CuckooFilter::from_bytes(&bytes).unwrap()),
            ("read_from", CuckooFilter::read_from(&bytes[..]).unwrap()),
            ("clone", filter.clone()),
        ];
        for (how, copy) in copies {
            assert_eq!(widths(&copy), widths(&filter), "{layout:?} {how}");
            let released: Vec<bool> = copy.level_stats().iter().map(|l| l.released).collect();
            let want: Vec<bool> = filter.level_stats().iter().map(|l| l.released).collect();
            assert_eq!(released, want, "{layout:?} {how}");
            assert!(
                (180_000..200_000u64).all(|id| copy.contains(&id)),
                "{layout:?} {how}"
            );
            assert_eq!(copy.to_bytes(), bytes, "{layout:?} {how}");
        }
    }
}

/// After narrowing, the window slides on and widens to 100,000 ids, which adds levels above
/// the narrowed one (at their planned widths); another `shrink_to_fit` later narrows again.
/// Every live id is found at every checkpoint, and removing them all empties the filter.
#[test]
fn a_narrowed_filter_goes_on_sliding_and_growing_without_missing_a_live_item() {
    for layout in LAYOUTS {
        let mut filter = slid(layout, 20_000, 200_000);
        filter.shrink_to_fit();
        let narrowed = widths(&filter);
        // Widen the window: nothing removed until 100,000 ids are live.
        for id in 200_000..280_000u64 {
            filter.insert(&id).unwrap();
        }
        assert!(
            (180_000..280_000u64).all(|id| filter.contains(&id)),
            "{layout:?}"
        );
        assert!(
            filter.levels() > narrowed.len(),
            "{layout:?}: no level added"
        );
        slide(&filter, 280_000, 100_000, 1_000_000);
        assert!(
            (900_000..1_000_000u64).all(|id| filter.contains(&id)),
            "{layout:?}"
        );
        filter.shrink_to_fit();
        let again = widths(&filter);
        let live = filter
            .level_stats()
            .iter()
            .position(|l| !l.released)
            .unwrap();
        println!("{layout:?}: widths {narrowed:?}, then {again:?}, live from level {live}");
        assert!(live >= narrowed.len(), "{layout:?}: {again:?}");
        assert_eq!(again[live], again[0], "{layout:?}");
        assert!(
            (900_000..1_000_000u64).all(|id| filter.contains(&id)),
            "{layout:?}"
        );
        assert!(measured_rate(&filter) <= TARGET, "{layout:?}");
        for id in 900_000..1_000_000u64 {
            assert!(filter.remove(&id), "{layout:?}: {id}");
        }
        assert!(filter.is_empty());
    }
}

/// FORMAT.md: a level may be narrower than the plan says (down to the first level's width)
/// only above levels that hold nothing.
#[test]
fn a_snapshot_narrowing_a_level_above_a_non_empty_one_or_below_the_first_width_is_refused() {
    let mut filter = slid(Layout::OneWord, 20_000, 200_000);
    filter.shrink_to_fit();
    let genuine = Snapshot::parse(&filter.to_bytes());
    let live = genuine.levels.iter().position(|l| l.items > 0).unwrap();
    let refused = |snapshot: &Snapshot, what: &str| {
        let bytes = snapshot.encode(false);
        assert!(
            matches!(
                CuckooFilter::from_bytes(&bytes),
                Err(PersistError::InvalidParameter { .. })
            ),
            "{what}: accepted"
        );
    };
    // The re-encoding itself is accepted.
    assert!(CuckooFilter::from_bytes(&genuine.encode(false)).is_ok());

    let mut older_item = genuine.clone();
    older_item.levels[live - 1].words[0] = 1;
    refused(&older_item, "an item below the narrowed level");

    let mut too_narrow = genuine.clone();
    too_narrow.levels[live].bits -= 1;
    refused(&too_narrow, "narrower than the first level");
}

/// Random sliding-window sequences on tiny growing filters, mostly with short fingerprints (so
/// that items collide, also after narrowing; one target gives fingerprints of more than 16
/// bits, whose packed buckets take two parts), against a multiset model: inserts, repeated copies,
/// `insert_unique`, removes (mostly of the oldest item, so older levels empty), releases,
/// `shrink_to_fit`, `clear`, snapshots and clones taking the filter's place. After every step
/// the length is exact and every live item is found as often as it is live; a remove of a live
/// item always succeeds; released levels hold nothing; and after each `shrink_to_fit` the
/// oldest live level, once every level below it is released, has the first level's width.
#[test]
fn random_narrowing_sequences_keep_every_live_item_and_an_exact_length() {
    let seed = common::seed("random_narrowing_sequences_keep_every_live_item_and_an_exact_length");
    let mut rng = Rng::new(seed);
    for layout in LAYOUTS {
        for rate in [0.5, 0.2, 0.1, 0.01, 1e-5] {
            for capacity in [8, 24, 64] {
                let expansion = [1, 2, 3, 4][rng.below(4) as usize];
                let max_levels = [3, 5, 32][rng.below(3) as usize];
                let case = format!(
                    "seed {seed}, {layout:?}, rate {rate}, capacity {capacity}, expansion \
                     {expansion}, max_levels {max_levels}"
                );
                let filter = CuckooFilter::builder()
                    .capacity(capacity)
                    .expansion(expansion)
                    .max_levels(max_levels)
                    .false_positive_rate(rate)
                    .layout(layout)
                    .build()
                    .unwrap();
                run_model_sequence(&mut rng, filter, capacity, 3_000, &case);
            }
        }
    }
}

fn run_model_sequence(
    rng: &mut Rng,
    mut filter: CuckooFilter,
    capacity: usize,
    steps: usize,
    case: &str,
) {
    // Live items in insertion order (an item once per live copy), and the copies per item.
    let mut order: VecDeque<u64> = VecDeque::new();
    let mut copies: HashMap<u64, usize> = HashMap::new();
    let mut next = 0u64;
    let mut log: Vec<String> = Vec::new();
    // The number of live copies the window holds; it changes now and then, so that the
    // filter grows by several levels and then empties its older ones.
    let mut window = 4 * capacity;
    for step in 0..steps {
        if step % 300 == 0 {
            window = capacity / 2 + rng.below(16 * capacity as u64) as usize;
        }
        let op = if order.len() > window {
            60
        } else {
            rng.below(1_000) / 10
        };
        let what = match op {
            // A new item.
            0..=49 => {
                next += 1;
                let item = next;
                match filter.insert(&item) {
                    Ok(()) => {
                        order.push_back(item);
                        *copies.entry(item).or_default() += 1;
                        format!("insert {item}")
                    }
                    Err(
                        e @ (InsertError::ItemBucketsFull | InsertError::MaxLevelsReached { .. }),
                    ) => {
                        format!("insert {item}: {e}")
                    }
                    Err(e) => fail(case, &log, &format!("insert {item}: {e}")),
                }
            }
            // Another copy of a live item.
            50..=54 if !order.is_empty() => {
                let item = order[rng.below(order.len() as u64) as usize];
                match filter.insert(&item) {
                    Ok(()) => {
                        order.push_back(item);
                        *copies.entry(item).or_default() += 1;
                        format!("insert copy {item}")
                    }
                    Err(
                        e @ (InsertError::ItemBucketsFull | InsertError::MaxLevelsReached { .. }),
                    ) => {
                        format!("insert copy {item}: {e}")
                    }
                    Err(e) => fail(case, &log, &format!("insert copy {item}: {e}")),
                }
            }
            // `insert_unique` of a new or a live item.
            55..=59 => {
                let item = if rng.below(3) == 0 && !order.is_empty() {
                    order[rng.below(order.len() as u64) as usize]
                } else {
                    next += 1;
                    next
                };
                let present = filter.contains(&item);
                match filter.insert_unique(&item) {
                    Ok(true) => {
                        if present {
                            fail(
                                case,
                                &log,
                                &format!("insert_unique {item} added a present item"),
                            );
                        }
                        order.push_back(item);
                        *copies.entry(item).or_default() += 1;
                        format!("insert_unique {item}: added")
                    }
                    Ok(false) => {
                        if !present {
                            fail(
                                case,
                                &log,
                                &format!("insert_unique {item}: absent, not added"),
                            );
                        }
                        format!("insert_unique {item}: present")
                    }
                    Err(
                        e @ (InsertError::ItemBucketsFull | InsertError::MaxLevelsReached { .. }),
                    ) => {
                        format!("insert_unique {item}: {e}")
                    }
                    Err(e) => fail(case, &log, &format!("insert_unique {item}: {e}")),
                }
            }
            // Removes: the oldest copy while the window is over-full, else a random one.
            60..=84 if !order.is_empty() => {
                let at = if order.len() > window || rng.below(4) != 0 {
                    0
                } else {
                    rng.below(order.len() as u64) as usize
                };
                let item = order.remove(at).unwrap();
                let left = copies.get_mut(&item).unwrap();
                *left -= 1;
                if *left == 0 {
                    copies.remove(&item);
                }
                if !filter.remove(&item) {
                    fail(case, &log, &format!("remove of live {item} found nothing"));
                }
                format!("remove {item}")
            }
            85..=89 => format!("release_empty_levels: {}", filter.release_empty_levels()),
            90..=93 => {
                filter.shrink_to_fit();
                check_oldest_live_width(&filter, case, &log);
                format!("shrink_to_fit: {}", describe(&filter))
            }
            94..=98 => {
                let (how, copy) = match rng.below(3) {
                    0 => (
                        "from_bytes",
                        CuckooFilter::from_bytes(&filter.to_bytes()).unwrap(),
                    ),
                    1 => {
                        let mut bytes = Vec::new();
                        filter.write_to(&mut bytes).unwrap();
                        ("read_from", CuckooFilter::read_from(&bytes[..]).unwrap())
                    }
                    _ => ("clone", filter.clone()),
                };
                if widths(&copy) != widths(&filter) {
                    fail(
                        case,
                        &log,
                        &format!("{how} changed the widths: {}", describe(&copy)),
                    );
                }
                filter = copy;
                format!("{how}: {}", describe(&filter))
            }
            99 if rng.below(20) == 0 => {
                filter.clear();
                order.clear();
                copies.clear();
                "clear".to_string()
            }
            _ => continue,
        };
        log.push(format!("{step}: {what}"));
        check_model(&filter, &order, &copies, case, &log);
    }
    println!("{case}: ended with {}", describe(&filter));
}

fn check_model(
    filter: &CuckooFilter,
    order: &VecDeque<u64>,
    copies: &HashMap<u64, usize>,
    case: &str,
    log: &[String],
) {
    if filter.len() != order.len() {
        fail(
            case,
            log,
            &format!("len {} but {} live copies", filter.len(), order.len()),
        );
    }
    for (&item, &n) in copies {
        if !filter.contains(&item) || filter.count(&item) < n {
            fail(
                case,
                log,
                &format!(
                    "live item {item} ({n} copies) found {} times, contains {}",
                    filter.count(&item),
                    filter.contains(&item)
                ),
            );
        }
    }
    let mut found = Vec::new();
    filter.contains_many(copies.keys(), &mut found);
    if let Some(i) = found.iter().position(|&f| !f) {
        let item = copies.keys().nth(i).unwrap();
        fail(case, log, &format!("contains_many misses live item {item}"));
    }
    if let Some(l) = filter
        .level_stats()
        .iter()
        .find(|l| l.released && l.len > 0)
    {
        fail(
            case,
            log,
            &format!("a released level holds {} items", l.len),
        );
    }
}

/// After `shrink_to_fit`: when every level below the oldest live one is released, that level
/// has the first level's width, and no level probed is wider than a newer one.
fn check_oldest_live_width(filter: &CuckooFilter, case: &str, log: &[String]) {
    let stats = filter.level_stats();
    let live = stats.iter().position(|l| !l.released).unwrap();
    if stats[live].fingerprint_bits != stats[0].fingerprint_bits {
        fail(
            case,
            log,
            &format!(
                "oldest live level {live} not narrowed: {}",
                describe(filter)
            ),
        );
    }
    let probed: Vec<u32> = stats
        .iter()
        .filter(|l| !l.released)
        .map(|l| l.fingerprint_bits)
        .collect();
    if probed.windows(2).any(|w| w[0] > w[1]) {
        fail(
            case,
            log,
            &format!("an older live level is wider: {}", describe(filter)),
        );
    }
}

fn describe(filter: &CuckooFilter) -> String {
    filter
        .level_stats()
        .iter()
        .map(|l| {
            let released = if l.released { " released" } else { "" };
            format!("[{} bits, {} items{released}]", l.fingerprint_bits, l.len)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn fail(case: &str, log: &[String], what: &str) -> ! {
    let recent = &log[log.len().saturating_sub(40)..];
    panic!("{case}: {what}\nlast steps:\n{}", recent.join("\n"));
}

/// The released flags and widths of a filter's levels.
fn released_and_widths(filter: &CuckooFilter) -> Vec<(bool, u32)> {
    filter
        .level_stats()
        .iter()
        .map(|l| (l.released, l.fingerprint_bits))
        .collect()
}

/// `from_bytes`, `read_from` and `clone` of `filter`, named.
fn copies(filter: &CuckooFilter) -> [(&'static str, CuckooFilter); 3] {
    let bytes = filter.to_bytes();
    [
        ("from_bytes", CuckooFilter::from_bytes(&bytes).unwrap()),
        ("read_from", CuckooFilter::read_from(&bytes[..]).unwrap()),
        ("clone", filter.clone()),
    ]
}

/// Level 1 narrowed to the first level's width is as wide as level 0: a copy must still see
/// that it was narrowed, and release level 0 below it.
#[test]
fn a_copy_of_a_narrowed_second_level_releases_the_first() {
    for layout in LAYOUTS {
        let mut filter = CuckooFilter::builder()
            .capacity(1_000)
            .expansion(2)
            .false_positive_rate(TARGET)
            .layout(layout)
            .build()
            .unwrap();
        let mut id = 0u64;
        while filter.levels() < 2 {
            filter.insert(&id).unwrap();
            id += 1;
        }
        let last = id - 1;
        for i in 0..last {
            assert!(filter.remove(&i));
        }
        let planned = widths(&filter);
        filter.shrink_to_fit();
        let narrowed = released_and_widths(&filter);
        assert!(planned[1] > planned[0], "{layout:?}: {planned:?}");
        assert_eq!(
            narrowed,
            [(true, planned[0]), (false, planned[0])],
            "{layout:?}"
        );
        for (how, copy) in copies(&filter) {
            assert_eq!(released_and_widths(&copy), narrowed, "{layout:?} {how}");
            assert!(copy.contains(&last), "{layout:?} {how}");
            assert_eq!(
                copy.memory_usage(),
                filter.memory_usage(),
                "{layout:?} {how}"
            );
        }
    }
}

/// A window slides past a narrowed level too: `shrink_to_fit` then narrows the next one, and
/// the first narrowed level, empty, is released with the others below. A copy releases all of
/// them again, the once-narrowed level included, and takes no more memory than the filter.
#[test]
fn a_copy_after_two_narrowings_releases_every_level_below_the_second() {
    for layout in LAYOUTS {
        let mut filter = slid(layout, 2_000, 20_000);
        filter.shrink_to_fit();
        let first = released_and_widths(&filter);
        let live = first.iter().position(|&(released, _)| !released).unwrap();
        assert!(
            live > 0 && first[live].1 == first[0].1,
            "{layout:?}: {first:?}"
        );
        // Grow a level above the narrowed one, then slide on until the narrowed one is empty.
        let mut id = 20_000u64;
        while filter.levels() <= live + 1 {
            filter.insert(&id).unwrap();
            id += 1;
        }
        let window = id - 18_000;
        for _ in 0..100 {
            if filter.level_stats()[live].len == 0 {
                break;
            }
            slide(&filter, id, window, id + 1_000);
            id += 1_000;
        }
        assert_eq!(filter.level_stats()[live].len, 0, "{layout:?}");
        filter.shrink_to_fit();
        let second = released_and_widths(&filter);
        let now_live = second.iter().position(|&(released, _)| !released).unwrap();
        assert!(now_live > live, "{layout:?}: {second:?}");
        assert_eq!(second[now_live].1, second[0].1, "{layout:?}: {second:?}");
        for (how, copy) in copies(&filter) {
            assert_eq!(released_and_widths(&copy), second, "{layout:?} {how}");
            assert!(
                (id - window..id).all(|i| copy.contains(&i)),
                "{layout:?} {how}"
            );
            assert_eq!(
                copy.memory_usage(),
                filter.memory_usage(),
                "{layout:?} {how}"
            );
        }
    }
}

/// A one-word level (FORMAT.md layout 0) with every fingerprint cut to its top `bits`, `0`
/// becoming `1`, each bucket's fingerprints packed into its lowest lanes in their order:
/// narrowing written from the spec.
fn truncated_one_word_level(level: &format_model::Level, bits: u32) -> format_model::Level {
    let shift = level.bits - bits;
    let words = level
        .words
        .iter()
        .map(|&word| {
            format_model::lanes(word, level.bits)
                .into_iter()
                .filter(|&fp| fp != 0)
                .map(|fp| (fp >> shift).max(1))
                .enumerate()
                .fold(0u64, |packed, (lane, fp)| {
                    packed | fp << (lane as u32 * bits)
                })
        })
        .collect();
    format_model::Level {
        bits,
        buckets: level.buckets,
        items: level.items,
        words,
    }
}

/// A one-word filter after a window of 2,000 ids slid over `0..20,000`, its empty levels
/// released (not narrowed yet), and the index of its oldest live level.
fn slid_one_word() -> (CuckooFilter, usize) {
    let filter = slid(Layout::OneWord, 2_000, 20_000);
    filter.release_empty_levels();
    let live = filter
        .level_stats()
        .iter()
        .position(|l| !l.released)
        .unwrap();
    (filter, live)
}

/// `shrink_to_fit` cuts the oldest live level's fingerprints exactly as FORMAT.md's key
/// mapping says a narrower level holds them, in place, and changes no other level.
#[test]
fn a_narrowed_one_word_level_holds_its_fingerprints_truncated_in_their_buckets() {
    let (mut filter, live) = slid_one_word();
    let before = Snapshot::parse(&filter.to_bytes());
    filter.shrink_to_fit();
    let after = Snapshot::parse(&filter.to_bytes());
    let first = before.levels[0].bits;
    assert!(live > 0 && before.levels[live].bits > first, "{before:?}");
    assert_eq!(after.levels.len(), before.levels.len());
    for (i, (was, now)) in before.levels.iter().zip(&after.levels).enumerate() {
        if i == live {
            assert_eq!(*now, truncated_one_word_level(was, first), "level {i}");
        } else {
            assert_eq!(now, was, "level {i}");
        }
    }
}

/// FORMAT.md: a level above levels that hold nothing may have any width from level 0's up
/// to the plan's. Each such snapshot loads (both loaders), finds every live id, releases the
/// levels below, lets every live id be removed, and narrows to level 0's width on
/// `shrink_to_fit`, to the very snapshot that narrowing the filter in memory gives.
#[test]
fn a_snapshot_may_hold_a_level_narrowed_to_any_width_down_to_the_first() {
    let (mut filter, live) = slid_one_word();
    let planned = Snapshot::parse(&filter.to_bytes());
    filter.shrink_to_fit();
    let narrowed_in_memory = filter.to_bytes();
    let first = planned.levels[0].bits;
    let own = planned.levels[live].bits;
    for bits in first..own {
        let mut snapshot = planned.clone();
        snapshot.levels[live] = truncated_one_word_level(&planned.levels[live], bits);
        let bytes = snapshot.encode(false);
        let loaded = [
            ("from_bytes", CuckooFilter::from_bytes(&bytes)),
            ("read_from", CuckooFilter::read_from(&bytes[..])),
        ];
        for (how, restored) in loaded {
            let mut restored = restored.unwrap_or_else(|e| panic!("{bits} bits, {how}: {e}"));
            let stats = restored.level_stats();
            assert_eq!(stats[live].fingerprint_bits, bits, "{how}");
            assert!(
                stats[..live].iter().all(|l| l.released),
                "{bits} bits, {how}"
            );
            assert!(
                (18_000..20_000u64).all(|id| restored.contains(&id)),
                "{bits} bits, {how}"
            );
            let copy = restored.clone();
            restored.shrink_to_fit();
            assert_eq!(
                restored.to_bytes(),
                narrowed_in_memory,
                "{bits} bits, {how}"
            );
            for id in 18_000..20_000u64 {
                assert!(copy.remove(&id), "{bits} bits, {how}: {id}");
            }
            assert!(copy.is_empty(), "{bits} bits, {how}");
        }
    }
}

/// The loader refuses, with a typed error, a level narrower than level 0's width, wider than
/// the plan's, a narrowed first level, and a narrowed level above one that holds items (also
/// when that one is narrowed too).
#[test]
fn a_snapshot_narrowing_a_level_the_format_forbids_is_refused() {
    let (filter, live) = slid_one_word();
    // Widen the window so that a newer level holds items above the oldest live one.
    let mut id = 20_000u64;
    while filter.levels() <= live + 1 {
        filter.insert(&id).unwrap();
        id += 1;
    }
    let planned = Snapshot::parse(&filter.to_bytes());
    let first = planned.levels[0].bits;
    let newer = live + 1;
    assert!(planned.levels[newer].items > 0 && planned.levels[live].items > 0);
    let refused = |snapshot: &Snapshot, what: &str| {
        let bytes = snapshot.encode(false);
        for (how, loaded) in [
            ("from_bytes", CuckooFilter::from_bytes(&bytes)),
            ("read_from", CuckooFilter::read_from(&bytes[..])),
        ] {
            assert!(
                matches!(loaded, Err(PersistError::InvalidParameter { .. })),
                "{what}, {how}: {:?}",
                loaded.map(|f| widths(&f))
            );
        }
    };
    let with = |level: usize, bits: u32| {
        let mut snapshot = planned.clone();
        snapshot.levels[level] = truncated_one_word_level(&planned.levels[level], bits);
        snapshot
    };
    // The narrowing the format allows is accepted.
    assert!(CuckooFilter::from_bytes(&with(live, first).encode(false)).is_ok());
    refused(&with(live, first - 1), "narrower than level 0");
    refused(&with(0, first - 1), "level 0 narrowed");
    refused(&with(newer, first), "narrowed above a level with items");
    let mut both = with(live, first);
    both.levels[newer] = truncated_one_word_level(&planned.levels[newer], first);
    refused(&both, "narrowed above a narrowed level with items");
    let mut wider = planned.clone();
    let own = planned.levels[live].bits;
    wider.levels[live] = format_model::Level {
        bits: own + 1,
        ..truncated_one_word_level(&planned.levels[live], own)
    };
    refused(&wider, "wider than the plan");
}

/// A narrowed filter shared again: per round, two writers slide windows of ids (one with
/// `insert`, one with `insert_many`), a thread releases empty levels in a loop, and two readers
/// (`contains`, `contains_many`) check that every live id is found; between rounds, with the
/// threads joined, `shrink_to_fit` narrows the oldest live level. The windows widen (each
/// time more, so that a level is added above the narrowed one) and narrow from round to round,
/// so narrowed levels are filled, emptied, released under the readers, and the next one
/// narrowed. Short fingerprints, so ids collide.
#[test]
fn a_narrowed_filter_shared_again_never_misses_a_live_item_under_releases() {
    for layout in LAYOUTS {
        let mut filter = CuckooFilter::builder()
            .capacity(64)
            .expansion(2)
            .false_positive_rate(0.1)
            .layout(layout)
            .build()
            .unwrap();
        // Per writer, ids `lo..hi` are live (ids of writer w are `w << 32 | i`).
        let mut windows = [(0u64, 0u64); 2];
        let mut narrowings = 0;
        for (round, window) in [400, 50, 1_600, 50, 6_400, 50].into_iter().enumerate() {
            let shared = Arc::new(filter);
            windows = shared_round(&shared, windows, window, window.max(1_000) + 500);
            filter = Arc::try_unwrap(shared).unwrap_or_else(|_| unreachable!("threads joined"));
            let before = widths(&filter);
            filter.shrink_to_fit();
            if widths(&filter) != before {
                narrowings += 1;
            }
            for (w, &(lo, hi)) in windows.iter().enumerate() {
                assert!(
                    (lo..hi).all(|i| filter.contains(&((w as u64) << 32 | i))),
                    "{layout:?}, round {round}: {}",
                    describe(&filter)
                );
            }
            let live: u64 = windows.iter().map(|&(lo, hi)| hi - lo).sum();
            assert_eq!(filter.len() as u64, live, "{layout:?}, round {round}");
        }
        println!(
            "{layout:?}: {narrowings} narrowings, ended with {}",
            describe(&filter)
        );
        assert!(narrowings >= 2, "{layout:?}: {narrowings} narrowings");
    }
}

/// One round of `a_narrowed_filter_shared_again_never_misses_a_live_item_under_releases`: each
/// writer inserts `ids` more ids and removes its oldest while more than `window` are live.
/// Returns the windows after the round.
fn shared_round(
    filter: &Arc<CuckooFilter>,
    start: [(u64, u64); 2],
    window: u64,
    ids: u64,
) -> [(u64, u64); 2] {
    let windows: Arc<[(AtomicU64, AtomicU64); 2]> =
        Arc::new(start.map(|(lo, hi)| (AtomicU64::new(lo), AtomicU64::new(hi))));
    let done = Arc::new(AtomicBool::new(false));
    let id = |w: usize, i: u64| (w as u64) << 32 | i;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (filter, windows) = (Arc::clone(filter), Arc::clone(&windows));
            std::thread::spawn(move || {
                let (lo, hi) = &windows[w];
                let first = hi.load(Ordering::Relaxed);
                for i in first..first + ids {
                    if w == 0 {
                        filter.insert(&id(w, i)).unwrap();
                    } else {
                        filter.insert_many([id(w, i)]).unwrap();
                    }
                    // Release: a reader that sees `hi` past i finds i's insert done.
                    hi.store(i + 1, Ordering::Release);
                    while i + 1 - lo.load(Ordering::Relaxed) > window {
                        let leaving = lo.load(Ordering::Relaxed);
                        // Release: raised before the remove starts (see the readers).
                        lo.store(leaving + 1, Ordering::Release);
                        assert!(filter.remove(&id(w, leaving)), "remove of a live id failed");
                    }
                }
            })
        })
        .collect();
    let releaser = {
        let (filter, done) = (Arc::clone(filter), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                filter.release_empty_levels();
                std::thread::yield_now();
            }
        })
    };
    let readers = spawn_window_readers(filter, &windows, &done);
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    releaser.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    let end = |w: usize| {
        let (lo, hi) = &windows[w];
        (lo.load(Ordering::Relaxed), hi.load(Ordering::Relaxed))
    };
    [end(0), end(1)]
}

/// The worst case for the rate: the narrowed level is the newest, and takes inserts at level
/// 0's width until it is full and a level is added above it. The measured rate then stays
/// under the target, at short and long fingerprints, in every layout.
#[test]
fn a_narrowed_newest_level_filled_to_growth_keeps_the_measured_rate_under_the_target() {
    for layout in LAYOUTS {
        for target in [0.2, 0.05, 0.01] {
            let mut filter = CuckooFilter::builder()
                .capacity(200)
                .expansion(2)
                .false_positive_rate(target)
                .layout(layout)
                .build()
                .unwrap();
            slide(&filter, 0, 600, 8_000);
            let planned = widths(&filter);
            filter.shrink_to_fit();
            let narrowed = widths(&filter);
            let live = filter
                .level_stats()
                .iter()
                .position(|l| !l.released)
                .unwrap();
            assert_eq!(
                live,
                narrowed.len() - 1,
                "{layout:?} {target}: {}",
                describe(&filter)
            );
            let case = format!("{layout:?} at {target}: {planned:?} -> {narrowed:?}");
            assert!(narrowed[live] < planned[live], "{case}");
            let mut id = 8_000u64;
            while filter.levels() == narrowed.len() {
                filter.insert(&id).unwrap();
                id += 1;
            }
            let rate = measured_rate(&filter);
            println!(
                "{case}: {} items in the narrowed level, measured {:.3} %",
                filter.level_stats()[live].len,
                rate * 100.0
            );
            assert!(rate <= target, "{case}: measured {rate}");
            assert!((7_400..id).all(|i| filter.contains(&i)), "{case}");
        }
    }
}

/// `insert_unique` on a narrowed filter, its first level released (the gate of a grown
/// filter's `insert_unique`): four threads race over the same fresh keys, enough of them to
/// add levels above the narrowed one meanwhile. No key is added twice, a key that no thread
/// added was already (maybe) present, the length counts exactly the added copies, and every
/// key is found. Short fingerprints, so keys collide.
#[test]
fn racing_insert_unique_on_a_narrowed_filter_adds_each_key_at_most_once() {
    for layout in LAYOUTS {
        let mut filter = CuckooFilter::builder()
            .capacity(64)
            .expansion(2)
            .false_positive_rate(0.1)
            .layout(layout)
            .build()
            .unwrap();
        slide(&filter, 0, 300, 3_000);
        filter.shrink_to_fit();
        let stats = filter.level_stats();
        assert!(stats[0].released, "{layout:?}: {}", describe(&filter));
        let (levels, len) = (filter.levels(), filter.len());
        let keys: Vec<u64> = (1u64 << 32..(1 << 32) + 3_000).collect();
        let barrier = std::sync::Barrier::new(4);
        let added: Vec<Vec<bool>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let (filter, keys, barrier) = (&filter, &keys, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        keys.iter()
                            .map(|k| match filter.insert_unique(k) {
                                Ok(added) => added,
                                Err(InsertError::ItemBucketsFull) => false,
                                Err(e) => panic!("insert_unique {k}: {e}"),
                            })
                            .collect()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut winners_total = 0;
        for (i, k) in keys.iter().enumerate() {
            let winners = added.iter().filter(|a| a[i]).count();
            assert!(winners <= 1, "{layout:?}: key {k} added {winners} times");
            assert!(filter.contains(k), "{layout:?}: key {k} not found");
            winners_total += winners;
        }
        assert!(filter.levels() > levels, "{layout:?}: no level added");
        assert_eq!(filter.len(), len + winners_total, "{layout:?}");
        assert!(
            winners_total > keys.len() / 2,
            "{layout:?}: {winners_total} added"
        );
    }
}

/// A narrowed filter cleared: `shrink_to_fit` then leaves one ordinary first level, which
/// grows again into levels of the planned widths, and a window slid over them is narrowed
/// again. Cleared and then filled without a `shrink_to_fit`, the levels kept (the narrowed one
/// among them, empty) never hide an item, and the next `shrink_to_fit` narrows the newest.
#[test]
fn a_cleared_narrowed_filter_starts_over_with_the_planned_widths() {
    for layout in LAYOUTS {
        let mut filter = slid(layout, 2_000, 20_000);
        let planned = widths(&filter);
        filter.shrink_to_fit();
        filter.clear();
        assert!(filter.is_empty());
        filter.shrink_to_fit();
        assert_eq!(
            released_and_widths(&filter),
            [(false, planned[0])],
            "{layout:?}"
        );
        slide(&filter, 0, 2_000, 20_000);
        assert_eq!(widths(&filter), planned, "{layout:?}");
        filter.shrink_to_fit();
        let narrowed = released_and_widths(&filter);
        let live = narrowed
            .iter()
            .position(|&(released, _)| !released)
            .unwrap();
        assert_eq!(narrowed[live].1, planned[0], "{layout:?}: {narrowed:?}");

        // Cleared, then refilled past a level without `shrink_to_fit`.
        filter.clear();
        let levels = filter.levels();
        let mut id = 100_000u64;
        while filter.levels() == levels {
            filter.insert(&id).unwrap();
            id += 1;
        }
        assert!((100_000..id).all(|i| filter.contains(&i)), "{layout:?}");
        assert_eq!(filter.len() as u64, id - 100_000, "{layout:?}");
        for (how, copy) in copies(&filter) {
            assert!((100_000..id).all(|i| copy.contains(&i)), "{layout:?} {how}");
        }
        // Empty the newest level but one item: the newest level is then narrowed.
        for i in 100_000..id - 1 {
            assert!(filter.remove(&i), "{layout:?}: {i}");
        }
        filter.shrink_to_fit();
        let stats = filter.level_stats();
        let newest = stats.len() - 1;
        assert!(
            stats[..newest].iter().all(|l| l.released),
            "{layout:?}: {stats:?}"
        );
        assert_eq!(stats[newest].fingerprint_bits, planned[0], "{layout:?}");
        assert!(
            filter.contains(&(id - 1)) && filter.remove(&(id - 1)),
            "{layout:?}"
        );
        assert!(filter.is_empty());
    }
}

/// As `a_narrowed_filter_shared_again_never_misses_a_live_item_under_releases`, with levels of
/// 16 KiB to a few MiB: the releasing thread gives their pages back (`MADV_DONTNEED`) while
/// the readers may still be reading them, and no reader faults or misses a live id. Between
/// rounds, every released level of 16 KiB and more holds no more than its stripes.
#[test]
fn mid_sized_levels_released_under_readers_of_a_narrowed_filter_give_their_memory_back() {
    let mut filter = CuckooFilter::builder()
        .capacity(4_096)
        .expansion(2)
        .build()
        .unwrap();
    let mut windows = [(0u64, 0u64); 2];
    // Per level, the most memory it held while live, and whether it was seen released.
    let mut held: Vec<usize> = Vec::new();
    let mut released: Vec<bool> = Vec::new();
    let mut check_given_back = |filter: &CuckooFilter| {
        for (i, level) in filter.level_stats().iter().enumerate() {
            if i == held.len() {
                held.push(0);
                released.push(false);
            }
            if !level.released {
                held[i] = held[i].max(level.memory_usage);
            } else if held[i] >= 17 << 10 {
                assert!(
                    level.memory_usage * 16 < held[i],
                    "level {i} released but kept {} of {} bytes",
                    level.memory_usage,
                    held[i]
                );
                released[i] = true;
            }
        }
        released.iter().filter(|&&r| r).count()
    };
    let mut given_back = 0;
    for window in [6_000, 200, 30_000, 200, 100_000, 200] {
        let shared = Arc::new(filter);
        windows = shared_round(&shared, windows, window, window.max(20_000) + 5_000);
        filter = Arc::try_unwrap(shared).unwrap_or_else(|_| unreachable!("threads joined"));
        check_given_back(&filter);
        filter.shrink_to_fit();
        given_back = check_given_back(&filter);
        for (w, &(lo, hi)) in windows.iter().enumerate() {
            assert!((lo..hi).all(|i| filter.contains(&((w as u64) << 32 | i))));
        }
    }
    println!(
        "{given_back} levels of 16 KiB and more released: {}",
        describe(&filter)
    );
    assert!(given_back >= 3, "{given_back} levels released");
}
