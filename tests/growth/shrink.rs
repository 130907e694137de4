//! `shrink_to_fit` of a growable filter: halvings, the inverse of doublings, while the entries
//! fit; every item kept, the rate kept, and memory that follows the live items.

use atomic_cuckoo::CuckooFilter;

use crate::common::{distinct_keys, growable, seed};

/// The share of a table's lanes that its entries may fill for a halving (the 95 % doubling
/// load of the halved table, which has half the lanes).
const HALVING_LOAD: f64 = 0.95 / 2.0;

/// The measured false-positive rate over `absent` keys.
fn measured_rate(filter: &CuckooFilter, absent: &[u64]) -> f64 {
    absent.iter().filter(|k| filter.contains(*k)).count() as f64 / absent.len() as f64
}

/// Keys of another seed, none of which is in `distinct_keys(seed, _)` (tagged by the top bit).
fn absent_keys(seed: u64, n: usize) -> Vec<u64> {
    distinct_keys(seed ^ 0x5555, n)
        .into_iter()
        .map(|k| k | 1 << 63)
        .collect()
}

/// Grown 200× and emptied to 2.5 %: the table halves until its entries would not fit once
/// more, frees most of its memory, keeps every item, its `len` and its rate.
#[test]
fn shrink_to_fit_halves_while_the_items_fit_and_keeps_every_item() {
    let seed = seed("growable shrink");
    for rate in [0.01, 0.001] {
        let mut filter = growable(1_000, rate);
        let keys: Vec<u64> = distinct_keys(seed, 200_000)
            .into_iter()
            .map(|k| k & !(1 << 63))
            .collect();
        for key in &keys {
            filter.insert(key).unwrap();
        }
        for key in &keys[5_000..] {
            assert!(filter.remove(key), "seed {seed}");
        }
        let (doublings, bytes) = (filter.doublings(), filter.memory_usage());
        filter.shrink_to_fit();
        let kept = &keys[..5_000];
        assert_eq!(filter.len(), kept.len(), "seed {seed}");
        assert!(kept.iter().all(|k| filter.contains(k)), "seed {seed}");
        // 40 times fewer items: five halvings, or more.
        assert!(
            filter.doublings() + 5 <= doublings,
            "seed {seed} rate {rate}: {doublings} doublings, then {filter:?}"
        );
        // As far as it goes: the entries (no copies at this size) fit one halving less, and
        // would not fit one more.
        let load = filter.len() as f64 / filter.slots() as f64;
        assert!(
            load <= 2.0 * HALVING_LOAD && (load > HALVING_LOAD || filter.doublings() == 0),
            "seed {seed} rate {rate}: load {load} after shrinking, {filter:?}"
        );
        assert!(
            filter.memory_usage() < bytes / 3,
            "seed {seed} rate {rate}: {bytes} bytes, then {filter:?}"
        );
        assert!(filter.capacity() >= filter.len());
        let measured = measured_rate(&filter, &absent_keys(seed, 200_000));
        assert!(
            measured <= rate,
            "seed {seed} rate {rate}: measured {measured} after shrinking, {filter:?}"
        );
    }
}

/// A grown filter that nobody removed from is at least half its doubling load (it doubled at
/// that load): its entries need the whole table, and `shrink_to_fit` leaves it byte for byte.
#[test]
fn shrink_to_fit_leaves_a_table_its_entries_need_as_it_was() {
    let seed = seed("growable shrink, full");
    for n in [3_000, 50_000, 123_456] {
        let mut filter = growable(1_000, 0.01);
        for key in distinct_keys(seed, n) {
            filter.insert(&key).unwrap();
        }
        filter.finish_doubling();
        let bytes = filter.to_bytes();
        filter.shrink_to_fit();
        assert!(filter.to_bytes() == bytes, "seed {seed} n {n}: {filter:?}");
    }
}

/// After a halving the filter grows again, saves and restores, and gives every copy back to
/// `remove`.
#[test]
fn a_shrunk_filter_grows_again_saves_and_removes_every_item() {
    let seed = seed("growable shrink, then grow");
    let keys = distinct_keys(seed, 150_000);
    let mut filter = growable(1_000, 0.01);
    for key in &keys[..100_000] {
        filter.insert(key).unwrap();
    }
    for key in &keys[5_000..100_000] {
        assert!(filter.remove(key));
    }
    let doublings = filter.doublings();
    filter.shrink_to_fit();
    assert!(filter.doublings() < doublings, "seed {seed}: {filter:?}");
    let kept: Vec<u64> = keys[..5_000]
        .iter()
        .chain(&keys[100_000..])
        .copied()
        .collect();
    for key in &keys[100_000..] {
        filter.insert(key).unwrap();
    }
    assert_eq!(filter.len(), kept.len());
    assert!(kept.iter().all(|k| filter.contains(k)), "seed {seed}");
    let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_eq!(restored.to_bytes(), filter.to_bytes());
    assert!(kept.iter().all(|k| restored.contains(k)), "seed {seed}");
    for key in &kept {
        assert!(filter.remove(key), "seed {seed}");
    }
    assert!(filter.is_empty(), "seed {seed}: {filter:?}");
}

/// Items stored up to twice each in a filter grown far past the doublings its lanes
/// were planned for (many entries have no tail bit left, and doublings copied them into both
/// halves): after a halving every copy is still found and removable, which fails if the two
/// copies of an exhausted entry are merged into one lane (an item's copy in one half and
/// another item's in the other look the same). (A copy is refused now and then where an
/// item's buckets fill with the copies of exhausted entries: the hot-key rule; the test counts
/// the copies stored.)
#[test]
fn copies_and_exhausted_entries_survive_a_halving() {
    let seed = seed("growable shrink, copies");
    let keys = distinct_keys(seed, 20_000);
    let mut filter = CuckooFilter::builder()
        .capacity(100)
        .false_positive_rate(0.01)
        .growable(true)
        .expected_items(400)
        .build()
        .unwrap();
    let copies: Vec<usize> = keys
        .iter()
        .map(|key| (0..2).take_while(|_| filter.insert(key).is_ok()).count())
        .collect();
    assert!(
        copies.iter().sum::<usize>() > 39_000,
        "seed {seed}: {filter:?}"
    );
    for (key, &stored) in keys.iter().zip(&copies).skip(2_000) {
        for _ in 0..stored {
            assert!(filter.remove(key), "seed {seed}");
        }
    }
    let doublings = filter.doublings();
    let rate = filter.false_positive_rate();
    filter.shrink_to_fit();
    assert!(filter.doublings() < doublings, "seed {seed}: {filter:?}");
    assert_eq!(filter.len(), copies[..2_000].iter().sum::<usize>());
    // Exhausted entries have no bit to take back, and full tails give one up: the rate may
    // rise, by little.
    assert!(
        filter.false_positive_rate() < 2.0 * rate,
        "seed {seed}: {filter:?}"
    );
    for (key, &stored) in keys.iter().zip(&copies).take(2_000) {
        assert!(filter.count(key) >= stored, "seed {seed}");
    }
    for (key, &stored) in keys.iter().zip(&copies).take(2_000) {
        for _ in 0..stored {
            assert!(filter.remove(key), "seed {seed}");
        }
    }
    assert!(filter.is_empty(), "seed {seed}: {filter:?}");
}

/// A sliding window (20,000 live ids over 400,000, 1 %) stops doubling once the window is
/// full, and after the stream `shrink_to_fit` brings a burst's table back to the window.
#[test]
fn a_sliding_window_does_not_grow_past_its_peak_and_shrinks_after_a_burst() {
    let seed = seed("growable sliding window");
    let window = 20_000;
    let ids = distinct_keys(seed, 400_000);
    let mut filter = growable(1_000, 0.01);
    let mut peak = 0;
    for (i, id) in ids.iter().enumerate() {
        filter.insert(id).unwrap();
        if i >= window {
            assert!(filter.remove(&ids[i - window]), "seed {seed}");
        }
        if i == 2 * window {
            peak = filter.doublings();
        }
        if i > 2 * window {
            assert_eq!(
                filter.doublings(),
                peak,
                "seed {seed}: at id {i}, {filter:?}"
            );
        }
    }
    // A burst: 200,000 more ids live at once, then gone again.
    let burst = distinct_keys(seed ^ 0xb0b0, 200_000);
    for id in &burst {
        filter.insert(id).unwrap();
    }
    let bursting = filter.memory_usage();
    for id in &burst {
        assert!(filter.remove(id), "seed {seed}");
    }
    filter.shrink_to_fit();
    assert!(filter.doublings() <= peak, "seed {seed}: {filter:?}");
    assert!(
        filter.memory_usage() < bursting / 3,
        "seed {seed}: {filter:?}"
    );
    let live = &ids[ids.len() - window..];
    assert!(live.iter().all(|id| filter.contains(id)), "seed {seed}");
}
