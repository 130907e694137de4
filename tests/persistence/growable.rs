//! Growable `CuckooFilter` snapshots (the format the former `ExpandingFilter` wrote): exact
//! round trips (doublings in progress included), and every malformed, truncated or hostile
//! input a typed error, never a panic or a big allocation.

use std::collections::hash_map::RandomState;

use atomic_cuckoo::{CuckooFilter, PersistError};

use crate::growable_sizes::GrowableSizes;

use crate::common;
use crate::format_model::{resealed, words_of};
use crate::watchdog::{inside_own_save, Refused};

/// Header words (see FORMAT.md, the growable filter's snapshots).
const HEADER_WORDS: usize = 11;

/// A filter with duplicates and removals, `items` inserts long; stops at the first refused
/// insert. Returns the keys it still holds.
fn filled(capacity: usize, rate: f64, items: usize, seed: u64) -> (CuckooFilter, Vec<u64>) {
    let filter = common::growable(capacity, rate);
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
fn mid_doubling(capacity: usize, rate: f64, doublings: u32, seed: u64) -> (CuckooFilter, Vec<u64>) {
    let filter = common::growable(capacity, rate);
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
fn assert_same(a: &CuckooFilter, b: &CuckooFilter, kept: &[u64], seed: u64) {
    assert_eq!(a.len(), b.len());
    assert_eq!(a.capacity(), b.capacity());
    assert_eq!(a.buckets(), b.buckets());
    assert_eq!(a.doublings(), b.doublings());
    assert_eq!(a.is_doubling(), b.is_doubling());
    assert_eq!(a.lane_bits(), b.lane_bits());
    assert_eq!(a.load_factor(), b.load_factor());
    assert_eq!(a.false_positive_rate(), b.false_positive_rate());
    assert_eq!(
        a.target_false_positive_rate(),
        b.target_false_positive_rate()
    );
    common::assert_memory_agrees("a restored copy", a, b);
    assert!(kept.iter().all(|k| b.contains(k)), "an item was lost");
    let absent = common::distinct_keys(seed ^ 0xabcd, 5_000);
    assert!(absent.iter().all(|k| a.contains(k) == b.contains(k)));
    assert_eq!(
        a.to_bytes(),
        b.to_bytes(),
        "the restored filter saves differently"
    );
}

/// A small snapshot with every part: three doublings, the fourth in progress (a split bitmap),
/// copies of exhausted entries at a coarse rate.
fn small() -> (CuckooFilter, Vec<u64>) {
    let (filter, mut kept) = mid_doubling(20, 0.2, 3, 17);
    // A few inserts more, so that the doubling has split a few buckets in order (the saved
    // split position, header word 8, is past 0).
    for k in common::distinct_keys(18, 8) {
        if words_of(&filter.to_bytes())[8] != 0 {
            break;
        }
        filter.insert(&k).unwrap();
        kept.push(k);
    }
    assert_ne!(words_of(&filter.to_bytes())[8], 0, "no run split in order");
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
        let (filter, kept) = filled(capacity, rate, items, seed);
        for f in [&filter.clone(), {
            filter.finish_doubling();
            &filter
        }] {
            let bytes = f.to_bytes();
            assert_eq!(bytes.len(), f.snapshot_size());
            let whole = CuckooFilter::from_bytes(&bytes).unwrap();
            let streamed = CuckooFilter::read_from(&bytes[..]).unwrap();
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
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(1)
        .build()
        .unwrap();
    let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_same(&filter, &restored, &[], 1);
}

#[test]
fn a_doubling_in_progress_round_trips_and_goes_on_identically() {
    let seed = common::seed("expanding mid-doubling");
    for (capacity, rate, doublings) in [(20, 0.2, 1), (2_000, 0.01, 2), (300, 0.001, 4)] {
        let (filter, kept) = mid_doubling(capacity, rate, doublings, seed);
        let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
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
    let restored = CuckooFilter::from_bytes(&clone.to_bytes()).unwrap();
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
        &CuckooFilter::read_from(&mut reader).unwrap(),
        &kept,
        3,
    );
    assert_same(
        &filter,
        &CuckooFilter::read_from(&mut reader).unwrap(),
        &kept,
        3,
    );
    assert_eq!(reader, b"tail");
    for extra in [1, 7, 8, 100] {
        let padded = [bytes.as_slice(), &vec![0; extra]].concat();
        assert!(matches!(
            CuckooFilter::from_bytes(&padded),
            Err(PersistError::TrailingBytes { extra: e }) if e == extra
        ));
    }
}

/// Restores `bytes` both ways; a restored filter is used (lookups, inserts, removes, doublings,
/// a save): none of it may panic. Returns the `from_bytes` result.
fn restore_and_use(bytes: &[u8], probes: &[u64]) -> Result<CuckooFilter, PersistError> {
    let streamed = CuckooFilter::read_from(bytes);
    let whole = CuckooFilter::from_bytes(bytes);
    assert_eq!(
        streamed.is_ok(),
        whole.is_ok(),
        "read_from and from_bytes disagree: {:?} / {:?}",
        streamed.as_ref().err(),
        whole.as_ref().err()
    );
    if let Ok(f) = streamed {
        for k in probes {
            let _ = f.contains(k);
        }
        for k in probes {
            let _ = f.insert(k);
            let _ = f.remove(&(k ^ 1));
        }
        let _ = (f.capacity(), f.false_positive_rate(), f.load_factor());
        CuckooFilter::from_bytes(&f.to_bytes()).expect("a used restored filter restores");
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
        CuckooFilter::from_bytes(&resealed(w))
    };
    let invalid = |r: Result<CuckooFilter, PersistError>, what: &str| match r {
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
    invalid(CuckooFilter::from_bytes(&resealed(emptied)), "marker");
    // The checksum itself.
    let mut bytes = filter.to_bytes();
    *bytes.last_mut().unwrap() ^= 0x80;
    assert!(matches!(
        CuckooFilter::from_bytes(&bytes),
        Err(PersistError::ChecksumMismatch { .. })
    ));
}

#[test]
fn restoring_with_another_hasher_is_refused() {
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(100)
        .hasher(RandomState::new())
        .build()
        .unwrap();
    filter.insert("k").unwrap();
    let bytes = filter.to_bytes();
    assert!(matches!(
        CuckooFilter::from_bytes_with_hasher(&bytes, RandomState::new()),
        Err(PersistError::HasherMismatch)
    ));
    assert!(matches!(
        CuckooFilter::read_from_with_hasher(&bytes[..], RandomState::new()),
        Err(PersistError::HasherMismatch)
    ));
    assert!(matches!(
        CuckooFilter::from_bytes(&bytes),
        Err(PersistError::HasherMismatch)
    ));
    let same = CuckooFilter::from_bytes_with_hasher(&bytes, filter.hasher().clone()).unwrap();
    assert!(same.contains("k"));
}

/// One type reads both formats: a fixed filter's snapshot restores as a fixed filter and a
/// growable filter's as a growable one, both ways, with every item.
#[test]
fn fixed_and_growable_snapshots_restore_as_their_own_kind() {
    let fixed = CuckooFilter::with_capacity(100);
    fixed.insert(&1u64).unwrap();
    let (growable, kept) = small();
    assert!(growable.is_growable() && !fixed.is_growable());
    for (original, items) in [(&fixed, vec![1u64]), (&growable, kept)] {
        let bytes = original.to_bytes();
        for restored in [
            CuckooFilter::from_bytes(&bytes).unwrap(),
            CuckooFilter::read_from(&bytes[..]).unwrap(),
        ] {
            assert_eq!(restored.is_growable(), original.is_growable());
            assert_eq!(restored.doublings(), original.doublings());
            assert_eq!(restored.len(), original.len());
            assert!(items.iter().all(|k| restored.contains(k)));
        }
    }
}

/// Headers claiming tables of petabytes behind a few hundred bytes: `from_bytes` refuses them
/// by length before allocating, `read_from` as the data runs out (an allocation of the claimed
/// size would fail, which would be `AllocationFailed`). The bound on what `read_from`
/// allocates meanwhile is measured in the memory tests (`restore_heap.rs`).
#[test]
fn headers_claiming_huge_tables_are_refused_without_allocating_them() {
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(20)
        .build()
        .unwrap();
    let words = words_of(&filter.to_bytes());
    // The planned doublings the header names (its high half); the doublings below may go
    // past them, as the table does.
    let max = words[2] & !0xFFFF_FFFF;
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
                CuckooFilter::from_bytes(&bytes),
                Err(PersistError::Truncated)
            ),
            "{base} {doublings}"
        );
        assert!(
            matches!(
                CuckooFilter::read_from(&bytes[..]),
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
        CuckooFilter::from_bytes(&resealed(w)),
        Err(PersistError::InvalidParameter {
            field: "table size"
        })
    ));
}

// ---------------------------------------------------------------- attack: a spec-written model

/// Where the parts of a snapshot lie, from its header alone (FORMAT.md, as written there).
#[derive(Clone, Debug)]
struct Layout {
    width: u32,
    base: u64,
    doublings: u32,
    /// Old buckets of a doubling in progress (0 when none).
    n_old: u64,
    bitmap_at: usize,
    bitmap_words: usize,
    /// First word of each segment.
    segments: Vec<usize>,
    checksum_at: usize,
}

impl Layout {
    fn of(words: &[u64]) -> Layout {
        let width = (words[1] >> 32) as u32;
        let doublings = words[2] as u32;
        let base = words[4];
        let doubling = words[9] != 0;
        let n_old = if doubling { (base << doublings) / 2 } else { 0 };
        let bitmap_words = n_old.div_ceil(64) as usize;
        let mut at = HEADER_WORDS + bitmap_words;
        let mut segments = Vec::new();
        for s in 0..=doublings {
            segments.push(at);
            at += Self::segment_words(Self::segment_buckets(base, s), width);
        }
        Layout {
            width,
            base,
            doublings,
            n_old,
            bitmap_at: HEADER_WORDS,
            bitmap_words,
            segments,
            checksum_at: at,
        }
    }

    fn segment_buckets(base: u64, s: u32) -> u64 {
        if s == 0 {
            base
        } else {
            base << (s - 1)
        }
    }

    fn segment_words(buckets: u64, width: u32) -> usize {
        (4 * u64::from(width) * buckets).div_ceil(64) as usize + 2
    }

    fn buckets(&self) -> u64 {
        self.base << self.doublings
    }

    /// The first bit (in the whole word vector) of lane `lane` of overall bucket `index`.
    fn lane_bit(&self, index: u64, lane: u64) -> u64 {
        let high = index / self.base;
        let s = 64 - high.leading_zeros();
        let first = if s == 0 { 0 } else { self.base << (s - 1) };
        let local = index - first;
        self.segments[s as usize] as u64 * 64
            + 4 * u64::from(self.width) * local
            + u64::from(self.width) * lane
    }

    fn lane(&self, words: &[u64], index: u64, lane: u64) -> u64 {
        let bit = self.lane_bit(index, lane);
        let (w, s) = ((bit / 64) as usize, bit % 64);
        let pair = u128::from(words[w]) | u128::from(words[w + 1]) << 64;
        (pair >> s) as u64 & ((1u64 << self.width) - 1)
    }

    fn set_lane(&self, words: &mut [u64], index: u64, lane: u64, value: u64) {
        assert!(value >> self.width == 0);
        let bit = self.lane_bit(index, lane);
        let (w, s) = ((bit / 64) as usize, bit % 64);
        let mut pair = u128::from(words[w]) | u128::from(words[w + 1]) << 64;
        pair &= !((((1u128) << self.width) - 1) << s);
        pair |= u128::from(value) << s;
        words[w] = pair as u64;
        words[w + 1] = (pair >> 64) as u64;
    }

    fn is_split(&self, words: &[u64], old: u64) -> bool {
        words[self.bitmap_at + (old / 64) as usize] >> (old % 64) & 1 == 1
    }

    /// Whether bucket `index` is the new half of an old bucket not split yet.
    fn is_unsplit_new_half(&self, words: &[u64], index: u64) -> bool {
        self.n_old != 0 && index >= self.n_old && !self.is_split(words, index - self.n_old)
    }

    /// (non-empty lanes, occupied lanes as FORMAT.md counts them).
    fn counts(&self, words: &[u64]) -> (u64, u64) {
        let (mut lanes, mut occupied) = (0, 0);
        for index in 0..self.buckets() {
            let unsplit = self.n_old != 0 && index < self.n_old && !self.is_split(words, index);
            for lane in 0..4 {
                let entry = self.lane(words, index, lane);
                if entry == 0 {
                    continue;
                }
                lanes += 1;
                occupied += if unsplit && entry >> 5 == 1 { 2 } else { 1 };
            }
        }
        (lanes, occupied)
    }

    /// Sets the header's occupied count to what the lanes give, and items to at most the lanes.
    fn recount(&self, words: &mut [u64]) {
        let (lanes, occupied) = self.counts(words);
        words[6] = occupied;
        words[5] = words[5].min(lanes);
    }
}

/// Every observable answer of `a` and `b` agrees (a lighter `assert_same`, for many states).
fn assert_agree(a: &CuckooFilter, b: &CuckooFilter, probes: &[u64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: len");
    assert_eq!(a.capacity(), b.capacity(), "{what}: capacity");
    assert_eq!(a.doublings(), b.doublings(), "{what}: doublings");
    assert_eq!(a.is_doubling(), b.is_doubling(), "{what}: is_doubling");
    assert_eq!(a.load_factor(), b.load_factor(), "{what}: load_factor");
    assert_eq!(
        a.false_positive_rate(),
        b.false_positive_rate(),
        "{what}: false_positive_rate"
    );
    assert_eq!(a.buckets(), b.buckets(), "{what}: buckets");
    for k in probes {
        assert_eq!(a.contains(k), b.contains(k), "{what}: contains({k})");
    }
    let bytes = b.to_bytes();
    assert_eq!(bytes.len(), b.snapshot_size(), "{what}: snapshot_size");
    assert_eq!(a.to_bytes(), bytes, "{what}: saved bytes");
}

/// Saves and restores `filter` (both ways) and checks the restore against it.
fn restored(filter: &CuckooFilter, probes: &[u64], what: &str) -> CuckooFilter {
    let bytes = filter.to_bytes();
    assert_eq!(bytes.len(), filter.snapshot_size(), "{what}: snapshot_size");
    let whole = CuckooFilter::from_bytes(&bytes).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let streamed = CuckooFilter::read_from(&bytes[..]).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    assert_agree(filter, &whole, probes, what);
    assert_agree(filter, &streamed, probes, what);
    whole
}

/// The same operations on `a` and `b`, answers compared, with a save and restore of `a` every
/// `every` operations replacing `b` (so a restore is checked in many states).
fn drive_together(
    a: &mut CuckooFilter,
    rng: &mut common::Rng,
    ops: usize,
    every: usize,
    what: &str,
) {
    let probes: Vec<u64> = (0..300).map(|_| rng.next_u64()).collect();
    let mut b = restored(a, &probes, what);
    let mut inserted: Vec<u64> = Vec::new();
    for op in 0..ops {
        match rng.below(10) {
            0..=5 => {
                let k = rng.next_u64();
                let (ra, rb) = (a.insert(&k), b.insert(&k));
                assert_eq!(ra.is_ok(), rb.is_ok(), "{what}: op {op} insert");
                if ra.is_ok() {
                    inserted.push(k);
                }
            }
            6 if !inserted.is_empty() => {
                // A second copy of a stored item: doublings exhaust copies too.
                let k = inserted[rng.below(inserted.len() as u64) as usize];
                assert_eq!(
                    a.insert(&k).is_ok(),
                    b.insert(&k).is_ok(),
                    "{what}: op {op}"
                );
            }
            7 | 8 if !inserted.is_empty() => {
                let i = rng.below(inserted.len() as u64) as usize;
                let k = inserted.swap_remove(i);
                assert_eq!(a.remove(&k), b.remove(&k), "{what}: op {op} remove");
            }
            _ => {
                // A key never inserted: may remove a copy left behind.
                let k = rng.next_u64();
                assert_eq!(a.remove(&k), b.remove(&k), "{what}: op {op} stray remove");
            }
        }
        if op % every == every - 1 {
            b = restored(a, &probes, &format!("{what}, after op {op}"));
        }
    }
    // (No `contains` check of `inserted`: a stray remove may take another item's entry.)
    assert_agree(a, &b, &probes, what);
}

/// Restores match the saved filter, and go on identically, in many states: coarse rates with
/// many doublings (entries that ran out of tail bits, and their copies, removed and not),
/// doublings in progress, capacities 1 to 10, after clears.
#[test]
fn attack_restores_agree_in_many_states_and_go_on_identically() {
    let seed = common::seed("attack expanding states");
    let mut rng = common::Rng::new(seed);
    let mut built = 0;
    for (capacity, rate) in [
        (1, 0.5),
        (2, 0.4),
        (3, 0.3),
        (5, 0.5),
        (7, 0.01),
        (10, 0.35),
        (4, 0.45),
        (9, 0.001),
    ] {
        let builder = CuckooFilter::builder()
            .growable(true)
            .capacity(capacity)
            .false_positive_rate(rate);
        let Ok(mut filter) = builder.build() else {
            println!("capacity {capacity}, rate {rate}: not buildable");
            continue;
        };
        built += 1;
        let what = format!("capacity {capacity}, rate {rate}");
        drive_together(&mut filter, &mut rng, 1_500, 37, &what);
        println!(
            "{what}: {} items, {} doublings, doubling {}, fpr {}",
            filter.len(),
            filter.doublings(),
            filter.is_doubling(),
            filter.false_positive_rate()
        );
        filter.clear();
        drive_together(&mut filter, &mut rng, 400, 29, &format!("{what}, cleared"));
        filter.finish_doubling();
        drive_together(&mut filter, &mut rng, 200, 41, &format!("{what}, finished"));
    }
    assert!(built >= 6, "only {built} filters built");
}

/// A doubling in progress at a coarse rate, whose unsplit buckets hold entries with no tail
/// bit left (counted twice in `occupied`): restored, then every later operation agrees,
/// including the copies a split makes and the removes of them.
#[test]
fn attack_mid_doubling_with_exhausted_entries_round_trips() {
    let seed = common::seed("attack exhausted mid-doubling");
    let mut rng = common::Rng::new(seed);
    let mut seen_exhausted = 0;
    // At these rates the entries have a few tail bits, and the table doubles past them:
    // entries stored before the first doubling run out of bits.
    for rate in [0.5, 0.4, 0.3] {
        let seen_before = seen_exhausted;
        let filter = CuckooFilter::builder()
            .growable(true)
            .capacity(8)
            .false_positive_rate(rate)
            .build()
            .unwrap();
        println!("rate {rate}: {} lane bits", filter.lane_bits());
        let mut keys = Vec::new();
        let mut refused = 0;
        // Entries keep at least seven tail bits, so only the first items run out of them, after
        // eight doublings or more; insert until this rate has shown a few such states.
        for i in 0..200_000 {
            if seen_exhausted >= seen_before + 13 {
                break;
            }
            let k = rng.next_u64();
            if let Err(e) = filter.insert(&k) {
                if refused == 0 {
                    println!("rate {rate}: first refusal {e:?} at {} items", filter.len());
                }
                refused += 1;
                if refused > 50 {
                    break;
                }
                continue;
            }
            keys.push(k);
            if filter.is_doubling() && filter.doublings() >= 8 && i % 5 == 0 {
                let words = words_of(&filter.to_bytes());
                let layout = Layout::of(&words);
                let (lanes, occupied) = layout.counts(&words);
                assert_eq!(occupied, words[6], "the model counts as the writer");
                if occupied > lanes {
                    seen_exhausted += 1;
                    let what = format!("rate {rate}, {} doublings", filter.doublings());
                    let mut copy = filter.clone();
                    drive_together(&mut copy, &mut rng, 120, 7, &what);
                }
            }
            if i % 3 == 0 {
                let i = rng.below(keys.len() as u64) as usize;
                let k = keys.swap_remove(i);
                assert!(filter.remove(&k));
            }
        }
        println!(
            "rate {rate}: reached {} doublings, {} states",
            filter.doublings(),
            seen_exhausted - seen_before
        );
        assert!(
            seen_exhausted > seen_before,
            "rate {rate}: no exhausted state"
        );
    }
    println!("{seen_exhausted} states with uncopied exhausted entries checked");
}

/// A doubling in progress at a coarse rate with an unsplit old bucket holding an entry with
/// no tail bit left (so occupied > non-empty lanes), and its layout.
fn exhausted_mid_doubling(seed: u64) -> (CuckooFilter, Vec<u64>, Layout) {
    let mut rng = common::Rng::new(seed);
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(8)
        .false_positive_rate(0.5)
        .build()
        .unwrap();
    for _ in 0..20_000 {
        let _ = filter.insert(&rng.next_u64());
        if filter.is_doubling() {
            let words = words_of(&filter.to_bytes());
            let layout = Layout::of(&words);
            let (lanes, occupied) = layout.counts(&words);
            if occupied > lanes {
                return (filter, words, layout);
            }
        }
    }
    panic!("no doubling in progress with exhausted entries (seed {seed})");
}

/// Multi-field forgeries, each resealed: every one is refused with the error the spec names.
#[test]
fn attack_forged_fields_get_typed_errors() {
    let seed = common::seed("attack forged fields");
    let (filter, words, layout) = exhausted_mid_doubling(seed);
    let (lanes, occupied) = layout.counts(&words);
    println!(
        "{} doublings, n_old {}, {lanes} lanes, {occupied} occupied",
        layout.doublings, layout.n_old
    );
    let forge = |f: &dyn Fn(&mut Vec<u64>)| {
        let mut w = words.clone();
        f(&mut w);
        let bytes = resealed(w);
        let streamed = CuckooFilter::read_from(&bytes[..]);
        let whole = CuckooFilter::from_bytes(&bytes);
        assert_eq!(
            format!("{:?}", streamed.as_ref().err()),
            format!("{:?}", whole.as_ref().err())
        );
        whole
    };
    let invalid = |r: Result<CuckooFilter, PersistError>, what: &str| match r {
        Err(PersistError::InvalidParameter { field }) if field.contains(what) => {}
        other => panic!("{what}: {other:?}"),
    };
    let mismatch = |r: Result<CuckooFilter, PersistError>, what: &str| match r {
        Err(PersistError::CountMismatch { what: w, .. }) if w.contains(what) => {}
        other => panic!("{what}: {other:?}"),
    };
    // Rates: NaN, ±inf, 0, 1, negative, above 1, a subnormal.
    for rate in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -0.5,
        1.5,
    ] {
        invalid(forge(&|w| w[3] = rate.to_bits()), "rate");
    }
    assert!(forge(&|w| w[3] = 1).is_err()); // 5e-324
                                            // Another rate, where this width is not the builder's.
    invalid(forge(&|w| w[3] = 1e-6f64.to_bits()), "not the builder's");
    // A lane width one off for the rate.
    for width in [layout.width - 1, layout.width + 1, 6, 33, 0, u32::MAX] {
        assert!(
            matches!(
                forge(&|w| w[1] = w[1] & 0xffff_ffff | u64::from(width) << 32),
                Err(PersistError::InvalidParameter { .. })
            ),
            "width {width}"
        );
    }
    // Doublings past the most a table holds; planned doublings other than the builder's.
    invalid(forge(&|w| w[2] = w[2] & !0xFFFF_FFFF | 33), "doublings");
    invalid(
        forge(&|w| w[2] = u64::from(layout.doublings)),
        "max_doublings",
    );
    invalid(forge(&|w| w[2] += 1 << 32), "max_doublings");
    // Base odd, 0, 1, past 2^32 (even), u64::MAX.
    for base in [layout.base + 1, 0, 1, (1 << 32) + 2, u64::MAX, 1 << 63] {
        invalid(forge(&|w| w[4] = base), "bucket count");
    }
    // Items: more than the non-empty lanes (but not more than occupied), past occupied.
    mismatch(forge(&|w| w[5] = lanes + 1), "item count");
    mismatch(forge(&|w| w[5] = occupied), "item count");
    invalid(forge(&|w| w[5] = occupied + 1), "item or lane count");
    invalid(forge(&|w| w[5] = u64::MAX), "item or lane count");
    // Occupied off by one either way, and as the non-empty lanes (copies not counted).
    for occ in [occupied - 1, occupied + 1, lanes] {
        mismatch(forge(&|w| w[6] = occ), "occupied");
    }
    invalid(forge(&|w| w[6] = u64::MAX), "item or lane count");
    invalid(forge(&|w| w[7] = 0), "kick generator");
    // The split position: next past n_old, left past n_old − next, left 0 with next set,
    // left one off (the bitmap then disagrees), next beyond an unsplit bucket.
    let (next, left) = (words[8], words[9]);
    invalid(forge(&|w| w[8] = layout.n_old), "split position");
    invalid(forge(&|w| w[9] = layout.n_old - next + 1), "split position");
    if left > 1 {
        invalid(forge(&|w| w[9] = left - 1), "split bitmap");
    }
    invalid(forge(&|w| w[9] = left + 1), "split bitmap");
    let first_unsplit = (0..layout.n_old)
        .find(|&i| !layout.is_split(&words, i))
        .unwrap();
    invalid(forge(&|w| w[8] = first_unsplit + 1), "split bitmap");
    // A bit past the old buckets (n_old is not a multiple of 64), with one unsplit bucket's
    // bit cleared elsewhere to keep the count: still refused.
    // Marking an unsplit bucket split keeps the bitmap consistent only with left − 1: then
    // the lanes are counted differently, so `occupied` must follow (or a CountMismatch).
    let unsplit_with_exhausted = (0..layout.n_old)
        .find(|&i| {
            !layout.is_split(&words, i) && (0..4).any(|l| layout.lane(&words, i, l) >> 5 == 1)
        })
        .unwrap();
    mismatch(
        forge(&|w| {
            let i = unsplit_with_exhausted;
            w[layout.bitmap_at + (i / 64) as usize] |= 1 << (i % 64);
            w[9] -= 1;
        }),
        "occupied",
    );
    // The new half of an unsplit bucket non-empty (counts made right).
    invalid(
        forge(&|w| {
            let entry = layout.lane(w, unsplit_with_exhausted, 0).max(1 << 5 | 3);
            layout.set_lane(w, unsplit_with_exhausted + layout.n_old, 0, entry);
            layout.recount(w);
        }),
        "half",
    );
    // A lane with an anchor but no marker, in the last segment.
    let writable = (layout.n_old..layout.buckets())
        .rev()
        .find(|&i| !layout.is_unsplit_new_half(&words, i))
        .unwrap();
    invalid(
        forge(&|w| {
            layout.set_lane(w, writable, 3, 0b10110);
            layout.recount(w);
        }),
        "marker",
    );
    // Bits past the last bucket of every segment: in the bucket bits' last word, and in each
    // spare word.
    for (s, &start) in layout.segments.iter().enumerate() {
        let buckets = Layout::segment_buckets(layout.base, s as u32);
        let end_bit = 4 * u64::from(layout.width) * buckets;
        let words_n = Layout::segment_words(buckets, layout.width);
        let mut bits = vec![(words_n - 1) as u64 * 64 + 63, (words_n - 2) as u64 * 64];
        if !end_bit.is_multiple_of(64) {
            bits.push(end_bit);
        }
        for bit in bits {
            invalid(
                forge(&|w| w[start + (bit / 64) as usize] |= 1 << (bit % 64)),
                "past its last bucket",
            );
        }
    }
    // Truncated inside the bitmap and inside each segment; the hasher check.
    let bytes = filter.to_bytes();
    for at in [
        layout.bitmap_at * 8 + 1,
        (layout.bitmap_at + layout.bitmap_words) * 8 - 3,
        layout.segments[layout.doublings as usize] * 8 + 8,
        layout.checksum_at * 8,
    ] {
        assert!(matches!(
            CuckooFilter::read_from(&bytes[..at]),
            Err(PersistError::Truncated)
        ));
        assert!(matches!(
            CuckooFilter::from_bytes(&bytes[..at]),
            Err(PersistError::Truncated)
        ));
    }
    assert!(matches!(
        forge(&|w| w[10] ^= 1),
        Err(PersistError::HasherMismatch)
    ));
}

/// Random spec-valid forgeries (lanes anywhere a filter may hold them, splits marked, counts
/// and position made consistent), resealed: each must be accepted, and the filter must then
/// take any operation without a panic and save and restore exactly.
#[test]
fn attack_forged_but_valid_snapshots_are_accepted_and_usable() {
    let seed = common::seed("attack forged valid");
    let mut rng = common::Rng::new(seed);
    let (_, words, layout) = exhausted_mid_doubling(seed);
    let small_words = words_of(&small().0.to_bytes());
    let small_layout = Layout::of(&small_words);
    let plain = {
        let f = small().0;
        f.finish_doubling();
        f
    };
    let plain_words = words_of(&plain.to_bytes());
    let plain_layout = Layout::of(&plain_words);
    let bases = [
        (&words, &layout),
        (&small_words, &small_layout),
        (&plain_words, &plain_layout),
    ];
    let mut accepted = 0;
    for round in 0..60 {
        let (base_words, layout) = bases[round % bases.len()];
        let mut w = base_words.clone();
        // Mark some unsplit buckets at or past `next` split.
        if layout.n_old != 0 {
            for _ in 0..rng.below(4) {
                let i = w[8] + rng.below(layout.n_old - w[8]);
                if !layout.is_split(&w, i) && w[9] > 1 {
                    w[layout.bitmap_at + (i / 64) as usize] |= 1 << (i % 64);
                    w[9] -= 1;
                }
            }
        }
        // Random lanes: full-width entries, entries with no tail bit, empties.
        let tail_bits = layout.width - 6;
        for _ in 0..rng.below(4 * layout.buckets()) {
            let index = rng.below(layout.buckets());
            if layout.is_unsplit_new_half(&w, index) {
                continue;
            }
            let anchor = rng.below(32);
            let tail = rng.below(u64::from(tail_bits) + 1);
            let value = match rng.below(4) {
                0 => 0,
                1 => 1 << 5 | anchor,
                _ => ((1 << tail) | rng.below(1 << tail)) << 5 | anchor,
            };
            layout.set_lane(&mut w, index, rng.below(4), value);
        }
        layout.recount(&mut w);
        w[5] = rng.below(w[5] + 1);
        w[7] = rng.next_u64() | 1;
        let bytes = resealed(w);
        let f = match CuckooFilter::from_bytes(&bytes) {
            Ok(f) => f,
            Err(e) => panic!("round {round}: a spec-valid forgery refused: {e:?}"),
        };
        accepted += 1;
        let streamed = CuckooFilter::read_from(&bytes[..]).unwrap();
        let clone = f.clone();
        assert_eq!(f.to_bytes(), bytes, "round {round}: saved differently");
        // Everything at once, the same on all three.
        let what = format!("round {round}");
        let probes: Vec<u64> = (0..200).map(|_| rng.next_u64()).collect();
        for (i, k) in probes.iter().enumerate() {
            let r = f.insert(k).is_ok();
            assert_eq!(r, streamed.insert(k).is_ok(), "{what}");
            assert_eq!(r, clone.insert(k).is_ok(), "{what}");
            let stray = k.rotate_left(17);
            let r = f.remove(&stray);
            assert_eq!(r, streamed.remove(&stray), "{what}");
            assert_eq!(r, clone.remove(&stray), "{what}");
            if i % 50 == 0 {
                let _ = (
                    f.capacity(),
                    f.load_factor(),
                    f.false_positive_rate(),
                    f.len(),
                );
                restored(&f, &probes, &what);
            }
        }
        f.finish_doubling();
        streamed.finish_doubling();
        let _ = f.clone();
        assert_agree(&f, &streamed, &probes, &what);
        restored(&f, &probes, &what);
        f.clear();
        restored(&f, &probes, &what);
    }
    println!("{accepted} forged snapshots accepted and used");
}

/// A reader that hands out one byte per `read`: `read_from` must still stop right after the
/// snapshot, and a second one (another shape) must follow.
#[test]
fn attack_read_from_stops_at_the_end_of_each_snapshot_of_a_byte_stream() {
    struct Trickle<'a>(&'a [u8]);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let (first, _) = small();
    let second = CuckooFilter::builder()
        .growable(true)
        .capacity(3)
        .build()
        .unwrap();
    let stream = [first.to_bytes(), second.to_bytes(), b"after".to_vec()].concat();
    let mut reader = Trickle(&stream);
    let a = CuckooFilter::read_from(&mut reader).unwrap();
    let b = CuckooFilter::read_from(&mut reader).unwrap();
    assert_eq!(reader.0, b"after");
    assert_agree(&first, &a, &[1, 2, 3], "first");
    assert_agree(&second, &b, &[1, 2, 3], "second");
    // The rest is not a snapshot, and a stream that stops inside the header is truncated.
    assert!(matches!(
        CuckooFilter::read_from(&mut reader),
        Err(PersistError::Truncated)
    ));
    let mut concatenated = [second.to_bytes(), second.to_bytes()].concat();
    assert!(matches!(
        CuckooFilter::from_bytes(&concatenated),
        Err(PersistError::TrailingBytes { extra }) if extra == second.snapshot_size()
    ));
    concatenated.truncate(second.snapshot_size() + 5);
    assert!(matches!(
        CuckooFilter::from_bytes(&concatenated),
        Err(PersistError::TrailingBytes { extra: 5 })
    ));
}

/// A split bitmap with a bit set past the old buckets (their count not a multiple of 64),
/// alone or with the count kept by clearing a split bit: refused.
#[test]
fn attack_split_bits_past_the_old_buckets_are_refused() {
    let (filter, _) = small();
    let words = words_of(&filter.to_bytes());
    let layout = Layout::of(&words);
    assert_ne!(layout.n_old % 64, 0, "n_old {}", layout.n_old);
    let next = words[8];
    let forge = |f: &dyn Fn(&mut Vec<u64>)| {
        let mut w = words.clone();
        f(&mut w);
        let bytes = resealed(w);
        assert!(CuckooFilter::read_from(&bytes[..]).is_err());
        CuckooFilter::from_bytes(&bytes)
    };
    let invalid = |r: Result<CuckooFilter, PersistError>, what: &str| match r {
        Err(PersistError::InvalidParameter { field }) if field.contains(what) => {}
        other => panic!("{what}: {other:?}"),
    };
    let last = layout.bitmap_at + layout.bitmap_words - 1;
    invalid(forge(&|w| w[last] |= 1 << 63), "split bitmap");
    let some_split = (next..layout.n_old)
        .find(|&i| layout.is_split(&words, i))
        .unwrap_or(next.saturating_sub(1));
    assert!(layout.is_split(&words, some_split));
    invalid(
        forge(&|w| {
            w[last] |= 1 << 63;
            w[layout.bitmap_at + (some_split / 64) as usize] &= !(1 << (some_split % 64));
        }),
        "split bitmap",
    );
}

/// A `Write` that saves, clones or clears the filter it is saving (on the saving thread, which
/// holds the filter's grow lock): a nested save is refused with `Deadlock`, a clone or a clear
/// panics, and neither hangs; the filter stays usable afterwards.
#[test]
fn a_save_clone_or_clear_from_inside_a_save_of_the_same_filter_is_refused_not_a_deadlock() {
    use std::io::{self, Write};
    use std::sync::Arc;
    use std::time::Duration;

    type Nested = fn(&CuckooFilter) -> io::Result<()>;
    let nested: [(&str, Nested); 3] = [
        ("save", |f| f.write_to(&mut Vec::new())),
        ("clone", |f| {
            drop(f.clone());
            Ok(())
        }),
        ("clear", |f| {
            f.clear();
            Ok(())
        }),
    ];
    for (what, op) in nested {
        struct W {
            filter: Arc<CuckooFilter>,
            op: Nested,
            done: bool,
        }
        impl Write for W {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if !self.done {
                    self.done = true;
                    (self.op)(&self.filter)?;
                }
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (filter, kept) = filled(100, 0.01, 2_000, 7);
        let filter = Arc::new(filter);
        let f = Arc::clone(&filter);
        let finished = crate::watchdog::finishes_within(Duration::from_secs(3), move || {
            let mut w = W {
                filter: Arc::clone(&f),
                op,
                done: false,
            };
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                f.write_to(&mut w).map_err(|e| e.kind())
            }))
            .map_err(|_| "panicked")
        });
        match (what, finished) {
            ("save", Some(Ok(Err(io::ErrorKind::Deadlock)))) => {}
            ("clone" | "clear", Some(Err("panicked"))) => {}
            (_, other) => panic!("a {what} inside a save of the same filter: {other:?}"),
        }
        // Usable afterwards: nothing was cleared, writes go through, saves work.
        assert!(kept.iter().all(|k| filter.contains(k)), "{what}");
        filter.insert(&u64::MAX).unwrap();
        let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
        assert!(restored.contains(&u64::MAX), "{what}");
    }
}

/// `to_bytes` has no error to return: inside a save of the same filter (on the saving thread)
/// it panics with the one message of the policy, not return an empty Vec (which loads as no
/// filter at all); the outer save is whole.
#[test]
fn to_bytes_inside_its_own_save_panics_instead_of_returning_no_bytes() {
    let (filter, _) = filled(100, 0.01, 2_000, 7);
    let filter = std::sync::Arc::new(filter);
    let before = filter.to_bytes();
    let (inside, saved) = inside_own_save(
        &filter,
        |f, w| f.write_to(w),
        |f: &CuckooFilter| format!("{} bytes", f.to_bytes().len()),
    )
    .expect("DEADLOCK: to_bytes inside a save of the same filter");
    Refused::NestedPanic.assert("to_bytes", &inside);
    assert!(saved.unwrap() == before, "the outer save is whole");
}

/// `finish_doubling` splits buckets under their stripes, which a save of the same filter holds
/// frozen: inside that save's destination it panics with the one message instead of waiting
/// for itself forever, and splits nothing; afterwards it finishes the doubling.
#[test]
fn finish_doubling_inside_its_own_save_panics_instead_of_hanging() {
    let (filter, kept) = mid_doubling(100, 0.01, 2, 3);
    let filter = std::sync::Arc::new(filter);
    let before = filter.to_bytes();
    let (inside, saved) = inside_own_save(
        &filter,
        |f, w| f.write_to(w),
        |f: &CuckooFilter| {
            f.finish_doubling();
            "finished".to_string()
        },
    )
    .expect("DEADLOCK: finish_doubling inside a save of the same filter");
    Refused::NestedPanic.assert("finish_doubling", &inside);
    assert!(saved.unwrap() == before, "the outer save is whole");
    assert!(
        filter.is_doubling() && filter.to_bytes() == before,
        "nothing split"
    );
    filter.finish_doubling();
    assert!(!filter.is_doubling());
    assert!(kept.iter().all(|k| filter.contains(k)));
}

/// Whatever single bit of the header is flipped, `from_bytes` of a snapshot of the right
/// length never blames bytes after the snapshot: a shorter length read from a corrupt header
/// (a smaller first table, fewer doublings) is checked against the checksum first.
#[test]
fn no_single_header_bit_flip_is_reported_as_trailing_bytes() {
    // A lightly filled table, so that a smaller bucket count still holds its items, and one
    // in the middle of a doubling.
    for bytes in [
        filled(2_000, 0.01, 200, 5).0.to_bytes(),
        small().0.to_bytes(),
    ] {
        let mut checksum_errors = 0;
        for byte in 0..HEADER_WORDS * 8 {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[byte] ^= 1 << bit;
                let error = CuckooFilter::from_bytes(&bad).expect_err("a corrupt header");
                assert!(
                    !matches!(error, PersistError::TrailingBytes { .. }),
                    "byte {byte} bit {bit}: {error}"
                );
                checksum_errors +=
                    usize::from(matches!(error, PersistError::ChecksumMismatch { .. }));
            }
        }
        println!(
            "{} bytes: {checksum_errors} header flips reported as checksum mismatches",
            bytes.len()
        );
    }
}

/// `write_to` promises that lookups and counts are not held up by a save. A growable filter's
/// `count` reads like a lookup; were it to take its item's bucket locks (or split its buckets
/// of a doubling in progress, as writers do), a held save would keep it waiting, and from
/// inside the save's own writer it would never return.
#[test]
fn count_on_a_growable_filter_answers_while_a_save_is_held() {
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(100)
            .growable(true)
            .build()
            .unwrap(),
    );
    filter.insert_many(0..1_000u64).unwrap();
    let (mut w, reached, release) = common::HeldWriter::new();
    let saver = {
        let f = Arc::clone(&filter);
        std::thread::spawn(move || f.write_to(&mut w).unwrap())
    };
    reached.recv_timeout(Duration::from_secs(10)).unwrap();
    let (tx, rx) = mpsc::channel();
    {
        let f = Arc::clone(&filter);
        std::thread::spawn(move || tx.send(f.count(&7u64)).unwrap());
    }
    let counted = rx.recv_timeout(Duration::from_secs(5));
    release.send(()).unwrap();
    saver.join().unwrap();
    assert!(
        matches!(counted, Ok(n) if n >= 1),
        "count during a held save: {counted:?}"
    );
}

/// A filter mid-doubling whose old table's bucket count is not a multiple of 64 (a partial
/// last bitmap word) and spans several words, at a fine rate (no exhausted entries).
fn several_words_mid_doubling() -> CuckooFilter {
    for capacity in [700, 900, 1_100, 1_500] {
        let (filter, _) = mid_doubling(capacity, 1e-4, 1, 41);
        let old = filter.buckets() / 2;
        if !old.is_multiple_of(64) && old > 192 {
            return filter;
        }
    }
    panic!("no capacity gives a partial last bitmap word");
}

/// Forged snapshots whose split bitmap has whole words split, others partly, and the
/// (partial) last word down to one bucket or none, with `split_left` consistent, one off, or
/// 0: each consistent one is accepted, says it is doubling, saves the same bytes, and is
/// finished by `finish_doubling` or by inserts, `is_doubling` agreeing with the saved split
/// count at every insert; each inconsistent one is a typed error, never a panic.
#[test]
fn attack_forged_bitmaps_with_whole_words_split_restore_and_finish() {
    let seed = common::seed("attack forged bitmap words");
    let mut rng = common::Rng::new(seed);
    let words = words_of(&several_words_mid_doubling().to_bytes());
    let layout = Layout::of(&words);
    let n_old = layout.n_old;
    assert!(n_old > 0 && !n_old.is_multiple_of(64), "n_old {n_old}");
    let bitmap_words = layout.bitmap_words;
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..80 {
        let mut w = words.clone();
        let next = w[8];
        // Which buckets to leave unsplit: per word, none, all, or some.
        let mut unsplit = 0u64;
        for word in 0..bitmap_words {
            let first = word as u64 * 64;
            let end = (first + 64).min(n_old);
            let mode = rng.below(4);
            for i in first..end {
                let keep_unsplit = i >= next
                    && !layout.is_split(&words, i)
                    && match mode {
                        0 => false,
                        1 => true,
                        2 => rng.below(2) == 0,
                        // Only the word's last bucket.
                        _ => i + 1 == end,
                    };
                let bit = 1u64 << (i % 64);
                if keep_unsplit {
                    unsplit += 1;
                } else {
                    w[layout.bitmap_at + word] |= bit;
                }
            }
        }
        let what = format!("round {round}, {unsplit} unsplit");
        // Marking buckets split keeps the format valid if the counts agree.
        layout.recount(&mut w);
        let forged_left = match rng.below(4) {
            0 => unsplit + 1,
            1 => unsplit.saturating_sub(1),
            _ => unsplit,
        };
        w[9] = forged_left;
        if forged_left == 0 {
            w[8] = 0;
        }
        let consistent = forged_left == unsplit && unsplit > 0;
        let bytes = resealed(w);
        let result = CuckooFilter::from_bytes(&bytes);
        if !consistent {
            match result {
                Err(PersistError::InvalidParameter { .. }) | Err(PersistError::Truncated) => {
                    refused += 1
                }
                // Without a bitmap the rest of the snapshot is read at other offsets: any
                // typed error.
                Err(_) if forged_left == 0 => refused += 1,
                other => panic!("{what}: left {forged_left} accepted or mistyped: {other:?}"),
            }
            continue;
        }
        let f = result.unwrap_or_else(|e| panic!("{what}: a consistent forgery refused: {e:?}"));
        accepted += 1;
        assert!(f.is_doubling(), "{what}");
        assert!(f.to_bytes() == bytes, "{what}: saved differently");
        let finished = CuckooFilter::from_bytes(&bytes).unwrap();
        finished.finish_doubling();
        assert!(!finished.is_doubling(), "{what}: finish_doubling");
        assert_eq!(
            words_of(&finished.to_bytes())[9],
            0,
            "{what}: finished, saved"
        );
        let keys = common::distinct_keys(seed ^ round, 2 * n_old as usize + 2);
        let mut inserts = 0;
        for k in &keys {
            if !f.is_doubling() {
                break;
            }
            let _ = f.insert(k);
            inserts += 1;
            let saved = words_of(&f.to_bytes());
            assert_eq!(saved[9] != 0, f.is_doubling(), "{what}, insert {inserts}");
        }
        assert!(
            !f.is_doubling(),
            "{what}: {inserts} inserts left it doubling"
        );
    }
    println!("{accepted} accepted, {refused} refused");
    assert!(
        accepted >= 20 && refused >= 10,
        "{accepted} accepted, {refused} refused"
    );
}

/// Snapshots of growable filters in format version 1 (`tests/data/growable-v1`):
/// `capacity(1_000)` at 50 %, 1 % and 0.1 %, the keys `0..5_000` inserted (three doublings,
/// finished). Each loads with every item, keeps its lane width (which its header's planned
/// doublings must agree with), saves the very same bytes, and grows on: a later build must
/// keep reading the snapshots users have stored.
#[test]
fn growable_snapshots_of_format_version_1_load_save_the_same_bytes_and_grow_on() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/growable-v1");
    for (name, rate, bits) in [
        ("50pct", 0.5, 14),
        ("1pct", 0.01, 14),
        ("0.1pct", 0.001, 17),
    ] {
        let path = format!("{data}/grown-rate-{name}-1k-to-5k.snapshot");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let filter = CuckooFilter::from_bytes(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(filter.is_growable(), "{path}");
        assert_eq!(filter.fingerprint_bits(), bits, "{path}");
        assert_eq!(filter.target_false_positive_rate(), Some(rate), "{path}");
        assert_eq!((filter.len(), filter.doublings()), (5_000, 3), "{path}");
        assert!((0..5_000u64).all(|k| filter.contains(&k)), "{path}");
        assert_eq!(filter.to_bytes(), bytes, "{path}: saved again differently");
        filter.insert_many(5_000..40_000u64).unwrap();
        assert!(filter.doublings() >= 6, "{path}: {filter:?}");
        assert!((0..40_000u64).all(|k| filter.contains(&k)), "{path}");
        assert_eq!(filter.fingerprint_bits(), bits, "{path}");
    }
}
