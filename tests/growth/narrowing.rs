//! `shrink_to_fit` on a grown filter whose older levels were all emptied (a sliding window):
//! the oldest live level's fingerprints are truncated to the first level's width. Every live
//! item is still found, the measured rate stays under the target, snapshots and clones keep
//! the narrowed level (with the empty levels below it released), the filter goes on sliding
//! and growing, and a snapshot that narrows a level above a non-empty one is refused.

use crate::format_model::Snapshot;

use atomic_cuckoo::{CuckooFilter, Layout, PersistError};

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
