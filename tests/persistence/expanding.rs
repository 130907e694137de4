//! `ExpandingFilter` snapshots: exact round trips (doublings in progress included), and every
//! malformed, truncated, foreign or hostile input a typed error, never a panic or a big
//! allocation.

use std::collections::hash_map::RandomState;

use atomic_cuckoo::{CuckooFilter, ExpandingFilter, PersistError};

use crate::common;
use crate::format_model::checksum;

/// Header words (see FORMAT.md, "ExpandingFilter snapshots").
const HEADER_WORDS: usize = 11;

/// A filter with duplicates and removals, `items` inserts long; stops at the first refused
/// insert. Returns the keys it still holds.
fn filled(capacity: usize, rate: f64, items: usize, seed: u64) -> (ExpandingFilter, Vec<u64>) {
    let mut filter = ExpandingFilter::builder()
        .capacity(capacity)
        .false_positive_rate(rate)
        .build()
        .unwrap();
    let mut kept = Vec::new();
    for (i, k) in common::distinct_keys(seed, items).into_iter().enumerate() {
        if filter.insert(&k).is_err() {
            break;
        }
        if i % 7 == 0 {
            let _ = filter.insert(&k); // a second copy
        }
        if i % 5 == 0 {
            assert!(filter.remove(&k));
        } else {
            kept.push(k);
        }
    }
    (filter, kept)
}

/// Inserts distinct keys until a doubling is in progress past `doublings` doublings.
fn mid_doubling(
    capacity: usize,
    rate: f64,
    doublings: u32,
    seed: u64,
) -> (ExpandingFilter, Vec<u64>) {
    let mut filter = ExpandingFilter::builder()
        .capacity(capacity)
        .false_positive_rate(rate)
        .build()
        .unwrap();
    let mut kept = Vec::new();
    for k in common::distinct_keys(seed, 1_000_000) {
        filter.insert(&k).unwrap();
        kept.push(k);
        if filter.doublings() >= doublings && filter.is_doubling() {
            return (filter, kept);
        }
    }
    unreachable!("the filter doubles")
}

/// Everything observable of `a` and `b` agrees, on `kept` and on as many absent keys.
fn assert_same(a: &ExpandingFilter, b: &ExpandingFilter, kept: &[u64], seed: u64) {
    assert_eq!(a.len(), b.len());
    assert_eq!(a.capacity(), b.capacity());
    assert_eq!(a.buckets(), b.buckets());
    assert_eq!(a.doublings(), b.doublings());
    assert_eq!(a.max_doublings(), b.max_doublings());
    assert_eq!(a.is_doubling(), b.is_doubling());
    assert_eq!(a.lane_bits(), b.lane_bits());
    assert_eq!(a.load_factor(), b.load_factor());
    assert_eq!(a.false_positive_rate(), b.false_positive_rate());
    assert_eq!(
        a.target_false_positive_rate(),
        b.target_false_positive_rate()
    );
    assert_eq!(a.memory_usage(), b.memory_usage());
    assert!(kept.iter().all(|k| b.contains(k)), "an item was lost");
    let absent = common::distinct_keys(seed ^ 0xabcd, 5_000);
    assert!(absent.iter().all(|k| a.contains(k) == b.contains(k)));
    assert_eq!(
        a.to_bytes(),
        b.to_bytes(),
        "the restored filter saves differently"
    );
}

fn words_of(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The words as bytes, with the checksum made right again.
fn resealed(mut words: Vec<u64>) -> Vec<u8> {
    let n = words.len() - 1;
    words[n] = checksum(&words[..n]);
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A small snapshot with every part: three doublings, the fourth in progress (a split bitmap),
/// copies of exhausted entries at a coarse rate.
fn small() -> (ExpandingFilter, Vec<u64>) {
    let (mut filter, mut kept) = mid_doubling(20, 0.2, 3, 17);
    // A few inserts more, so that the doubling has split a few buckets in order.
    for k in common::distinct_keys(18, 3) {
        filter.insert(&k).unwrap();
        kept.push(k);
    }
    assert!(filter.is_doubling());
    (filter, kept)
}

#[test]
fn round_trip_at_several_sizes_and_rates() {
    let seed = common::seed("expanding round trip");
    for (capacity, rate, items) in [
        (10, 0.01, 5),
        (100, 0.2, 3_000),
        (1_000, 0.01, 20_000),
        (500, 0.001, 30_000),
        (5_000, 1e-5, 10_000),
    ] {
        let (mut filter, kept) = filled(capacity, rate, items, seed);
        for f in [&filter.clone(), {
            filter.finish_doubling();
            &filter
        }] {
            let bytes = f.to_bytes();
            assert_eq!(bytes.len(), f.snapshot_size());
            let whole = ExpandingFilter::from_bytes(&bytes).unwrap();
            let streamed = ExpandingFilter::read_from(&bytes[..]).unwrap();
            assert_same(f, &whole, &kept, seed);
            assert_same(f, &streamed, &kept, seed);
        }
        println!(
            "capacity {capacity}, rate {rate}: {} items, {} doublings",
            filter.len(),
            filter.doublings()
        );
    }
}

#[test]
fn an_empty_filter_round_trips() {
    let filter = ExpandingFilter::builder().capacity(1).build().unwrap();
    let restored = ExpandingFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_same(&filter, &restored, &[], 1);
}

#[test]
fn a_doubling_in_progress_round_trips_and_goes_on_identically() {
    let seed = common::seed("expanding mid-doubling");
    for (capacity, rate, doublings) in [(20, 0.2, 1), (2_000, 0.01, 2), (300, 0.001, 4)] {
        let (mut filter, kept) = mid_doubling(capacity, rate, doublings, seed);
        let mut restored = ExpandingFilter::from_bytes(&filter.to_bytes()).unwrap();
        assert!(restored.is_doubling());
        assert_same(&filter, &restored, &kept, seed);
        // The same inserts and removes split, kick and double the same way in both.
        let more = common::distinct_keys(seed ^ 0x5eed, 4 * filter.buckets() as usize);
        for (i, k) in more.iter().enumerate() {
            assert_eq!(filter.insert(k).is_ok(), restored.insert(k).is_ok());
            if i % 3 == 0 {
                assert_eq!(
                    filter.remove(&kept[i % kept.len()]),
                    restored.remove(&kept[i % kept.len()])
                );
            }
        }
        assert_eq!(filter.to_bytes(), restored.to_bytes());
        filter.finish_doubling();
        restored.finish_doubling();
        assert_eq!(filter.to_bytes(), restored.to_bytes());
    }
}

#[test]
fn a_clone_and_its_restore_save_identically() {
    let seed = common::seed("expanding clone");
    let (filter, kept) = mid_doubling(100, 0.01, 2, seed);
    let clone = filter.clone();
    assert_eq!(clone.to_bytes(), filter.to_bytes());
    let restored = ExpandingFilter::from_bytes(&clone.to_bytes()).unwrap();
    assert_same(&filter, &restored, &kept, seed);
    assert_same(&clone, &restored.clone(), &kept, seed);
}

#[test]
fn a_snapshot_can_be_followed_by_other_data_but_not_in_from_bytes() {
    let (filter, kept) = small();
    let bytes = filter.to_bytes();
    let stream = [bytes.as_slice(), bytes.as_slice(), b"tail"].concat();
    let mut reader = &stream[..];
    assert_same(
        &filter,
        &ExpandingFilter::read_from(&mut reader).unwrap(),
        &kept,
        3,
    );
    assert_same(
        &filter,
        &ExpandingFilter::read_from(&mut reader).unwrap(),
        &kept,
        3,
    );
    assert_eq!(reader, b"tail");
    for extra in [1, 7, 8, 100] {
        let padded = [bytes.as_slice(), &vec![0; extra]].concat();
        assert!(matches!(
            ExpandingFilter::from_bytes(&padded),
            Err(PersistError::TrailingBytes { extra: e }) if e == extra
        ));
    }
}

#[test]
fn truncation_at_every_length_is_reported() {
    let bytes = small().0.to_bytes();
    for len in 0..bytes.len() {
        let prefix = &bytes[..len];
        assert!(
            matches!(
                ExpandingFilter::from_bytes(prefix),
                Err(PersistError::Truncated)
            ),
            "from_bytes of {len} bytes"
        );
        assert!(
            matches!(
                ExpandingFilter::read_from(prefix),
                Err(PersistError::Truncated)
            ),
            "read_from of {len} bytes"
        );
    }
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let bytes = small().0.to_bytes();
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut corrupt = bytes.clone();
            corrupt[i] ^= 1 << bit;
            assert!(
                ExpandingFilter::from_bytes(&corrupt).is_err(),
                "byte {i} bit {bit}"
            );
            assert!(
                ExpandingFilter::read_from(&corrupt[..]).is_err(),
                "byte {i} bit {bit}"
            );
        }
    }
    println!("{} single-bit corruptions rejected", bytes.len() * 8);
}

/// Restores `bytes` both ways; a restored filter is used (lookups, inserts, removes, doublings,
/// a save): none of it may panic. Returns the `from_bytes` result.
fn restore_and_use(bytes: &[u8], probes: &[u64]) -> Result<ExpandingFilter, PersistError> {
    let streamed = ExpandingFilter::read_from(bytes);
    let whole = ExpandingFilter::from_bytes(bytes);
    assert_eq!(
        streamed.is_ok(),
        whole.is_ok(),
        "read_from and from_bytes disagree: {:?} / {:?}",
        streamed.as_ref().err(),
        whole.as_ref().err()
    );
    if let Ok(mut f) = streamed {
        for k in probes {
            let _ = f.contains(k);
        }
        for k in probes {
            let _ = f.insert(k);
            let _ = f.remove(&(k ^ 1));
        }
        let _ = (f.capacity(), f.false_positive_rate(), f.load_factor());
        ExpandingFilter::from_bytes(&f.to_bytes()).expect("a used restored filter restores");
    }
    whole
}

/// The checksum guards the data, so corrupt the content and reseal it: every field and lane
/// change is refused by the validation, or restores a filter that works.
#[test]
fn resealed_bit_flips_give_errors_or_working_filters() {
    let seed = common::seed("expanding resealed flips");
    let (filter, _) = small();
    let words = words_of(&filter.to_bytes());
    let probes = common::distinct_keys(seed, 200);
    let (mut refused, mut accepted) = (0, 0);
    for i in 0..words.len() - 1 {
        for bit in 0..64 {
            let mut corrupt = words.clone();
            corrupt[i] ^= 1 << bit;
            match restore_and_use(&resealed(corrupt), &probes) {
                Ok(_) => accepted += 1,
                Err(_) => refused += 1,
            }
        }
    }
    println!("{refused} refused, {accepted} restored (and used without a panic)");
    assert!(refused > accepted);
}

#[test]
fn specific_corruptions_get_specific_errors() {
    let (filter, _) = small();
    let words = words_of(&filter.to_bytes());
    let with = |i: usize, f: &dyn Fn(u64) -> u64| {
        let mut w = words.clone();
        w[i] = f(w[i]);
        ExpandingFilter::from_bytes(&resealed(w))
    };
    let invalid = |r: Result<ExpandingFilter, PersistError>, what: &str| match r {
        Err(PersistError::InvalidParameter { field }) if field.contains(what) => {}
        other => panic!("{what}: {other:?}"),
    };
    assert!(matches!(with(0, &|w| w ^ 1), Err(PersistError::BadMagic)));
    assert!(matches!(
        with(1, &|w| w + 1),
        Err(PersistError::UnsupportedVersion { version: 2 })
    ));
    invalid(with(1, &|w| w | 1 << 16), "reserved");
    invalid(with(1, &|w| w + (1 << 32)), "lane width");
    invalid(with(1, &|w| w & 0xffff_ffff | 40 << 32), "lane width");
    // A doubling more: a longer snapshot (or a split position past the old buckets).
    assert!(with(2, &|w| w + 1).is_err());
    invalid(with(2, &|w| w | 0xffff), "doublings");
    invalid(with(2, &|w| w + (1 << 32)), "max_doublings");
    invalid(with(3, &|_| 1e-9f64.to_bits()), "max_doublings");
    invalid(with(3, &|_| f64::NAN.to_bits()), "rate");
    invalid(with(4, &|w| w + 1), "bucket count");
    invalid(with(4, &|_| 0), "bucket count");
    invalid(with(5, &|w| w + 1_000_000), "item or lane count");
    assert!(matches!(
        with(6, &|w| w + 1),
        Err(PersistError::CountMismatch {
            what: "occupied lane count",
            ..
        })
    ));
    invalid(with(7, &|_| 0), "kick generator");
    invalid(with(8, &|_| u64::MAX), "split position");
    invalid(with(9, &|_| 0), "split position");
    // The bitmap: a bucket below `next` not split.
    invalid(with(HEADER_WORDS, &|w| w & !1), "split bitmap");
    // A lane with an anchor but no marker (the first lane of bucket 0 of segment 0).
    let lane_bits = filter.lane_bits();
    let first_segment = HEADER_WORDS + 1;
    let mut emptied = words.clone();
    emptied[first_segment] &= !((1 << lane_bits) - 1);
    emptied[first_segment] |= 3;
    invalid(ExpandingFilter::from_bytes(&resealed(emptied)), "marker");
    // The checksum itself.
    let mut bytes = filter.to_bytes();
    *bytes.last_mut().unwrap() ^= 0x80;
    assert!(matches!(
        ExpandingFilter::from_bytes(&bytes),
        Err(PersistError::ChecksumMismatch { .. })
    ));
}

#[test]
fn restoring_with_another_hasher_is_refused() {
    let mut filter = ExpandingFilter::builder()
        .capacity(100)
        .hasher(RandomState::new())
        .build()
        .unwrap();
    filter.insert("k").unwrap();
    let bytes = filter.to_bytes();
    assert!(matches!(
        ExpandingFilter::from_bytes_with_hasher(&bytes, RandomState::new()),
        Err(PersistError::HasherMismatch)
    ));
    assert!(matches!(
        ExpandingFilter::read_from_with_hasher(&bytes[..], RandomState::new()),
        Err(PersistError::HasherMismatch)
    ));
    assert!(matches!(
        ExpandingFilter::from_bytes(&bytes),
        Err(PersistError::HasherMismatch)
    ));
    let same = ExpandingFilter::from_bytes_with_hasher(&bytes, filter.hasher().clone()).unwrap();
    assert!(same.contains("k"));
}

#[test]
fn a_cuckoo_filter_snapshot_is_refused_and_the_other_way_round() {
    let cuckoo = CuckooFilter::with_capacity(100);
    cuckoo.insert(&1u64).unwrap();
    let bytes = cuckoo.to_bytes();
    assert!(matches!(
        ExpandingFilter::from_bytes(&bytes),
        Err(PersistError::BadMagic)
    ));
    assert!(matches!(
        ExpandingFilter::read_from(&bytes[..]),
        Err(PersistError::BadMagic)
    ));
    let expanding = small().0.to_bytes();
    assert!(matches!(
        CuckooFilter::from_bytes(&expanding),
        Err(PersistError::BadMagic)
    ));
    assert!(matches!(
        CuckooFilter::read_from(&expanding[..]),
        Err(PersistError::BadMagic)
    ));
}

/// Headers claiming tables of petabytes behind a few hundred bytes: `from_bytes` refuses them
/// by length before allocating, `read_from` as the data runs out (an allocation of the claimed
/// size would fail, which would be `AllocationFailed`). The bound on what `read_from`
/// allocates meanwhile is measured in the memory tests (`restore_heap.rs`).
#[test]
fn headers_claiming_huge_tables_are_refused_without_allocating_them() {
    let filter = ExpandingFilter::builder()
        .capacity(20)
        .max_doublings(32)
        .build()
        .unwrap();
    assert_eq!(filter.max_doublings(), 32);
    let words = words_of(&filter.to_bytes());
    let max = u64::from(filter.max_doublings()) << 32;
    for (base, doublings, split) in [
        (1u64 << 32, 0u64, false),
        (1 << 32, 20, false),
        (1 << 32, 20, true),
        (1 << 20, 31, true),
        (2, 32, true),
    ] {
        let mut w = words.clone();
        w[2] = max | doublings;
        w[4] = base;
        if split {
            w[9] = 1;
        }
        let bytes = resealed(w);
        assert!(
            matches!(
                ExpandingFilter::from_bytes(&bytes),
                Err(PersistError::Truncated)
            ),
            "{base} {doublings}"
        );
        assert!(
            matches!(
                ExpandingFilter::read_from(&bytes[..]),
                Err(PersistError::Truncated)
            ),
            "{base} {doublings}"
        );
    }
    // Past 2^64 buckets: a parameter error.
    let mut w = words.clone();
    w[2] = max | 32;
    w[4] = 1 << 32;
    assert!(matches!(
        ExpandingFilter::from_bytes(&resealed(w)),
        Err(PersistError::InvalidParameter {
            field: "table size"
        })
    ));
}
