//! `Builder::expected_items`: a growable filter told how far it will grow sizes its lanes for
//! that, not for 131,072 times its first capacity, and still grows past it.

use atomic_cuckoo::{BuildError, CuckooFilter};

use crate::common::{distinct_keys, seed};

fn growable(capacity: usize, rate: f64, expected: Option<usize>) -> CuckooFilter {
    crate::common::growable_planned(capacity, rate, expected)
}

#[test]
fn expected_items_without_growth_is_refused_by_name() {
    let err = CuckooFilter::builder()
        .capacity(1_000)
        .expected_items(1_000_000)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::GrowableOnly {
            setting: "expected_items"
        }
    );
    assert!(err.to_string().contains("expected_items"), "{err}");
    assert!(err.to_string().contains("growable(true)"), "{err}");
}

#[test]
fn a_nearer_expected_size_gives_narrower_entries_and_never_wider() {
    for rate in [0.1, 0.01, 0.001, 1e-5] {
        let open_ended = growable(1_000, rate, None).fingerprint_bits();
        let mut previous = 0;
        for expected in [1_000, 32_000, 1_000_000, 32_000_000, 1 << 40] {
            let bits = growable(1_000, rate, Some(expected)).fingerprint_bits();
            assert!(
                bits >= previous,
                "{rate}: expecting {expected} gave {bits} bits, fewer than a nearer size's {previous}"
            );
            previous = bits;
        }
        // Expecting 1M from 1,000 plans 10 doublings, fewer than the 17 of no expectation.
        let planned = growable(1_000, rate, Some(1_000_000)).fingerprint_bits();
        assert!(planned <= open_ended, "{rate}: {planned} > {open_ended}");
        // And far beyond 131,072 times the capacity plans at least as much as no expectation.
        let far = growable(1_000, rate, Some(1 << 40)).fingerprint_bits();
        assert!(far >= open_ended, "{rate}: {far} < {open_ended}");
    }
    // At 1 %, the one bit the copies' bound adds for 17 doublings is saved.
    assert_eq!(growable(1_000, 0.01, None).fingerprint_bits(), 14);
    assert_eq!(
        growable(1_000, 0.01, Some(1_000_000)).fingerprint_bits(),
        13
    );
}

#[test]
fn a_filter_grown_to_its_expected_size_keeps_the_rate_and_takes_less_memory() {
    let seed = seed("expected items");
    let keys = distinct_keys(seed, 300_000);
    let planned = growable(1_000, 0.01, Some(300_000));
    let open_ended = growable(1_000, 0.01, None);
    planned.insert_many(&keys).unwrap();
    open_ended.insert_many(&keys).unwrap();
    assert!(keys.iter().all(|k| planned.contains(k)));
    assert!(
        planned.memory_usage() < open_ended.memory_usage(),
        "{} against {}",
        planned.memory_usage(),
        open_ended.memory_usage()
    );
    // Measured over keys never inserted.
    let inserted: std::collections::HashSet<u64> = keys.iter().copied().collect();
    let probes: Vec<u64> = (0..200_000u64)
        .map(|i| i | 1 << 63)
        .filter(|k| !inserted.contains(k))
        .collect();
    let false_positives = probes.iter().filter(|k| planned.contains(*k)).count();
    let measured = false_positives as f64 / probes.len() as f64;
    assert!(measured <= 0.01, "seed {seed}: measured rate {measured}");
}

#[test]
fn a_filter_grows_past_its_expected_size_and_finds_every_item() {
    let seed = seed("past expected items");
    let keys = distinct_keys(seed, 100_000);
    let filter = growable(100, 0.01, Some(1_000));
    for (i, key) in keys.iter().enumerate() {
        filter
            .insert(key)
            .unwrap_or_else(|e| panic!("seed {seed}: insert {i} refused: {e}"));
    }
    assert!(filter.doublings() >= 9, "{} doublings", filter.doublings());
    assert_eq!(filter.len(), keys.len());
    assert!(keys.iter().all(|k| filter.contains(k)), "seed {seed}");
}

/// Lanes planned for no doubling at a high rate still keep enough tail bits that doublings
/// far past the plan lower the load: the copies of entries with no tail bit left stay a small
/// share of the lanes. (With one tail bit, every entry ran out of bits after one doubling, each
/// doubling copied every entry into both halves, and the table doubled on every insert: 24
/// doublings and 228 MiB at 487 items.)
#[test]
fn lanes_planned_for_no_doubling_grow_far_past_the_plan_without_running_away() {
    let seed = seed("far past the plan");
    for (capacity, rate) in [(10, 0.2), (2, 0.5), (100, 0.05)] {
        let filter = growable(capacity, rate, Some(capacity));
        let keys = distinct_keys(seed, 200_000);
        // Doubling on every item would take each table to its last doubling within a few
        // hundred items; 200,000 items take at most 17 (from two buckets) at a load of 47.5 %
        // or more, and copies bring that up by a fifth at most. Checked as it grows, so that
        // a table running away fails here, not by exhausting memory.
        for (i, key) in keys.iter().enumerate() {
            filter
                .insert(key)
                .unwrap_or_else(|e| panic!("seed {seed}: insert {i} refused: {e}"));
            assert!(
                filter.doublings() <= 17,
                "seed {seed} capacity {capacity}: at item {i}, {filter:?}"
            );
        }
        let bits = filter.memory_usage() as f64 * 8.0 / filter.len() as f64;
        assert!(
            bits < 64.0,
            "seed {seed} capacity {capacity}: {bits} bits, {filter:?}"
        );
        assert!(keys.iter().all(|k| filter.contains(k)), "seed {seed}");
    }
}
