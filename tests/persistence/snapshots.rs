//! Snapshots: exact round trips, and every malformed input a typed error (never a panic).

use std::collections::hash_map::RandomState;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use atomic_cuckoo::{CuckooFilter, PersistError};

/// A filter with some duplicates and removals, so every lane state appears.
fn filled(
    capacity: usize,
    bits: u32,
    growable: bool,
    items: usize,
    seed: u64,
) -> (CuckooFilter, Vec<u64>) {
    // A growable filter chooses its own lane width: `bits` is for the fixed one.
    let builder = CuckooFilter::builder().capacity(capacity);
    let filter = if growable {
        builder.growable(true).build()
    } else {
        builder.fingerprint_bits(bits).build()
    }
    .unwrap();
    let keys = common::distinct_keys(seed, items);
    let mut kept = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if filter.insert(k).is_err() {
            break;
        }
        if i % 7 == 0 {
            filter.insert(k).unwrap_or(()); // a second copy where it fits
        }
        if i % 5 == 0 {
            assert!(filter.remove(k));
        } else {
            kept.push(*k);
        }
    }
    (filter, kept)
}

fn assert_same(a: &CuckooFilter, b: &CuckooFilter, kept: &[u64]) {
    assert_eq!(a.len(), b.len());
    assert_eq!(a.capacity(), b.capacity());
    assert_eq!(a.is_growable(), b.is_growable());
    assert_eq!(a.doublings(), b.doublings());
    assert_eq!(a.fingerprint_bits(), b.fingerprint_bits());
    if a.is_growable() {
        // What finished doublings' bitmaps keep is not copied.
        common::assert_memory_agrees("round trip", a, b);
    } else {
        assert_eq!(a.memory_usage(), b.memory_usage());
    }
    assert!(
        kept.iter().all(|k| b.contains(k)),
        "an item was lost in the round trip"
    );
    assert!(kept.iter().take(500).all(|k| a.count(k) == b.count(k)));
    assert_eq!(
        a.to_bytes(),
        b.to_bytes(),
        "restored filter serializes differently"
    );
}

#[test]
fn round_trip_for_every_width_with_and_without_growth() {
    let seed = common::seed("round trip");
    for bits in 4..=32 {
        for growable in [false, true] {
            let (filter, kept) = filled(300, bits, growable, 2_000, seed ^ u64::from(bits));
            if growable {
                assert!(filter.doublings() > 0, "bits={bits}: did not grow");
            }
            let bytes = filter.to_bytes();
            assert_eq!(bytes.len(), filter.snapshot_size());
            let from_bytes = CuckooFilter::from_bytes(&bytes).unwrap();
            assert_same(&filter, &from_bytes, &kept);
            let mut stream = &bytes[..];
            let from_stream = CuckooFilter::read_from(&mut stream).unwrap();
            assert!(
                stream.is_empty(),
                "read_from must consume the whole snapshot"
            );
            assert_same(&filter, &from_stream, &kept);
        }
    }
}

#[test]
fn a_rate_driven_growing_filter_round_trips_and_keeps_growing() {
    let filter = CuckooFilter::builder()
        .capacity(100)
        .false_positive_rate(0.001)
        .growable(true)
        .build()
        .unwrap();
    for k in 0..5_000u32 {
        filter.insert(&k).unwrap();
    }
    let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert!(restored.is_growable());
    assert_eq!(restored.doublings(), filter.doublings());
    assert_eq!(restored.fingerprint_bits(), filter.fingerprint_bits());
    assert_eq!(
        restored.target_false_positive_rate(),
        filter.target_false_positive_rate()
    );
    assert!((restored.false_positive_rate() - filter.false_positive_rate()).abs() < 1e-12);
    for k in 5_000..50_000u32 {
        restored.insert(&k).unwrap();
    }
    assert!(
        restored.doublings() > filter.doublings(),
        "the restored filter grows with the same plan"
    );
    assert!((0..50_000u32).all(|k| restored.contains(&k)));
    assert!(restored.false_positive_rate() <= 0.001);
}

#[test]
fn a_snapshot_can_be_followed_by_other_data_in_a_stream() {
    let (filter, kept) = filled(500, 16, false, 400, 3);
    let mut stream = filter.to_bytes();
    stream.extend_from_slice(b"next record");
    let mut reader = &stream[..];
    let restored = CuckooFilter::read_from(&mut reader).unwrap();
    assert_eq!(reader, b"next record");
    assert!(kept.iter().all(|k| restored.contains(k)));
    assert!(matches!(
        CuckooFilter::from_bytes(&stream),
        Err(PersistError::TrailingBytes { extra: 11 })
    ));
}

fn small_snapshot() -> Vec<u8> {
    // A fixed filter: the header offsets below are those of its format (FORMAT.md); the
    // growable format's corruptions are tested in tests/persistence/expanding.rs.
    let (filter, kept) = filled(100, 12, false, 60, 11);
    assert!(kept.len() >= 40, "the small snapshot should hold items");
    filter.to_bytes()
}

#[test]
fn truncation_at_every_length_is_reported() {
    let bytes = small_snapshot();
    println!("truncating a {}-byte snapshot at every length", bytes.len());
    for len in 0..bytes.len() {
        let prefix = &bytes[..len];
        assert!(
            matches!(
                CuckooFilter::from_bytes(prefix),
                Err(PersistError::Truncated)
            ),
            "from_bytes of {len} bytes"
        );
        assert!(
            matches!(
                CuckooFilter::read_from(prefix),
                Err(PersistError::Truncated)
            ),
            "read_from of {len} bytes"
        );
    }
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let bytes = small_snapshot();
    let mut tried = 0;
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut corrupt = bytes.clone();
            corrupt[i] ^= 1 << bit;
            tried += 1;
            assert!(
                CuckooFilter::from_bytes(&corrupt).is_err(),
                "byte {i} bit {bit} (from_bytes)"
            );
            assert!(
                CuckooFilter::read_from(&corrupt[..]).is_err(),
                "byte {i} bit {bit} (read_from)"
            );
        }
    }
    println!(
        "{tried} single-bit corruptions of a {}-byte snapshot, all rejected",
        bytes.len()
    );
}

#[test]
fn random_bytes_are_rejected_without_panicking() {
    let seed = common::seed("random bytes");
    let mut rng = common::Rng::new(seed);
    let valid = small_snapshot();
    let mut tried = 0;
    for round in 0..30_000 {
        let len = rng.below(400) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        // Also garbage behind a real header prefix, where the parser gets further.
        if round % 3 == 1 {
            let keep = (rng.below(valid.len() as u64) as usize).min(bytes.len());
            bytes[..keep].copy_from_slice(&valid[..keep]);
            // A random byte may complete the snapshot (its last byte kept but one): that is a
            // valid snapshot followed by other bytes, which `read_from` rightly accepts.
            if bytes.starts_with(&valid) {
                continue;
            }
        }
        // And a valid snapshot with a few random bytes overwritten.
        if round % 3 == 2 {
            bytes = valid.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len() as u64) as usize;
                let new = rng.next_u64() as u8;
                if bytes[at] == new {
                    continue;
                }
                bytes[at] = new;
            }
            if bytes == valid {
                continue;
            }
        }
        tried += 1;
        assert!(CuckooFilter::from_bytes(&bytes).is_err(), "round {round}");
        assert!(
            CuckooFilter::read_from(&bytes[..]).is_err(),
            "round {round}"
        );
    }
    println!("{tried} random inputs rejected");
}

#[test]
fn specific_corruptions_get_specific_errors() {
    let bytes = small_snapshot();
    let mut bad = bytes.clone();
    bad[0] = b'X';
    assert!(matches!(
        CuckooFilter::from_bytes(&bad),
        Err(PersistError::BadMagic)
    ));
    let mut bad = bytes.clone();
    bad[8] = 99;
    assert!(matches!(
        CuckooFilter::from_bytes(&bad),
        Err(PersistError::UnsupportedVersion { version: 99 })
    ));
    // The last byte is part of the checksum itself.
    let mut bad = bytes.clone();
    *bad.last_mut().unwrap() ^= 0x80;
    assert!(matches!(
        CuckooFilter::from_bytes(&bad),
        Err(PersistError::ChecksumMismatch { .. })
    ));
    // The header's item count (bytes 48..56).
    let mut bad = bytes.clone();
    bad[48] ^= 1;
    assert!(matches!(
        CuckooFilter::from_bytes(&bad),
        Err(PersistError::CountMismatch { what: "header", .. })
    ));
    // max_levels of 0 (bytes 24..28).
    let mut bad = bytes.clone();
    bad[24..28].copy_from_slice(&0u32.to_le_bytes());
    assert!(matches!(
        CuckooFilter::from_bytes(&bad),
        Err(PersistError::InvalidParameter { .. })
    ));
    for e in [
        PersistError::Truncated,
        PersistError::HasherMismatch,
        PersistError::BadMagic,
    ] {
        assert!(!e.to_string().is_empty());
    }
}

/// A header claiming a table of 2^32 buckets (32 GiB) behind a few bytes of data: rejected by
/// from_bytes and read_from alike, before anything is allocated, because that is not the shape
/// the plan gives the level (levels nest; the allocation bound of a stream whose shapes agree
/// is tested in `tests/memory/restore_heap.rs`).
#[test]
fn a_header_claiming_a_huge_table_is_rejected() {
    let mut bytes = small_snapshot();
    // First level header: bits at 64..68, buckets at 72..80.
    bytes[72..80].copy_from_slice(&(1u64 << 32).to_le_bytes());
    assert!(matches!(
        CuckooFilter::from_bytes(&bytes),
        Err(PersistError::InvalidParameter { field }) if field.contains("shape")
    ));
    assert!(matches!(
        CuckooFilter::read_from(&bytes[..]),
        Err(PersistError::InvalidParameter { field }) if field.contains("shape")
    ));
    // A bucket count past the largest table is a parameter error.
    bytes[72..80].copy_from_slice(&(1u64 << 33).to_le_bytes());
    assert!(matches!(
        CuckooFilter::from_bytes(&bytes),
        Err(PersistError::InvalidParameter { .. })
    ));
}

#[test]
fn restoring_with_another_hasher_seed_is_refused() {
    let filter = CuckooFilter::builder()
        .capacity(100)
        .hasher(RandomState::new())
        .build()
        .unwrap();
    filter.insert("k").unwrap();
    let bytes = filter.to_bytes();
    // Same type, other (random) seeds.
    assert!(matches!(
        CuckooFilter::from_bytes_with_hasher(&bytes, RandomState::new()),
        Err(PersistError::HasherMismatch)
    ));
    // The default hasher is another hasher again.
    assert!(matches!(
        CuckooFilter::from_bytes(&bytes),
        Err(PersistError::HasherMismatch)
    ));
    // The filter's own hasher restores it.
    let same = CuckooFilter::from_bytes_with_hasher(&bytes, filter.hasher().clone()).unwrap();
    assert!(same.contains("k"));
}

/// While a writer slides a window of `W` items (insert the newest, remove the oldest), a save
/// must capture the window at one moment: exactly `W` or `W + 1` consecutive items (between the
/// insert and the remove), all present.
#[test]
fn a_save_under_concurrent_writes_is_a_consistent_snapshot() {
    let seed = common::seed("consistent snapshot");
    const W: usize = 5_000;
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(20_000)
            .fingerprint_bits(32)
            .build()
            .unwrap(),
    );
    let keys = Arc::new(common::distinct_keys(seed, 2_000_000));
    for k in &keys[..W] {
        filter.insert(k).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let head = Arc::new(AtomicUsize::new(W));
    let start = Arc::new(std::sync::Barrier::new(2));
    let writer = {
        let (filter, keys, stop, head, start) = (
            Arc::clone(&filter),
            Arc::clone(&keys),
            Arc::clone(&stop),
            Arc::clone(&head),
            Arc::clone(&start),
        );
        thread::spawn(move || {
            start.wait();
            let mut i = W;
            while !stop.load(Ordering::Relaxed) && i < keys.len() {
                filter.insert(&keys[i]).unwrap();
                assert!(filter.remove(&keys[i - W]));
                i += 1;
                head.store(i, Ordering::Release);
            }
        })
    };
    start.wait();
    // A save blocks writers while it copies; between saves the writer moves the window on, so
    // successive snapshots must catch it at different positions (each one whole).
    let (mut moved, mut previous) = (0, None);
    for _ in 0..20 {
        let bytes = filter.to_bytes();
        let upto = head.load(Ordering::Acquire);
        let restored = CuckooFilter::from_bytes(&bytes).unwrap();
        let len = restored.len();
        assert!(len == W || len == W + 1, "snapshot holds {len} items");
        // Where the window was: the newest key the snapshot holds.
        let newest = (0..=upto.min(keys.len() - 1))
            .rev()
            .find(|&i| restored.contains(&keys[i]))
            .unwrap();
        let window = newest + 1 - len..=newest;
        assert!(
            window.clone().all(|i| restored.contains(&keys[i])),
            "a hole in the snapshot"
        );
        if previous.is_some_and(|p| p != newest) {
            moved += 1;
        }
        previous = Some(newest);
        // Let the writer move the window on before the next save (bounded wait).
        let waited = std::time::Instant::now();
        while head.load(Ordering::Acquire) < upto + 100
            && waited.elapsed() < std::time::Duration::from_secs(5)
        {
            thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    println!("the window moved between {moved} of 19 pairs of successive snapshots");
    assert!(
        moved >= 15,
        "the writer hardly ran while snapshots were taken"
    );
}

/// Snapshots written by the build before bucket layouts were selectable (format version 2,
/// every bucket one word), kept as files: a fixed filter's loads with every item; a filter
/// that grew by levels is a format this build no longer reads, refused by name.
#[test]
fn version_2_snapshots_load_with_every_item_and_grown_ones_are_a_retired_format() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/snapshots-v2");
    // A fixed filter of 8-bit fingerprints (eight a word) holding 7i + 1 for i < 2000.
    let bytes = std::fs::read(format!("{data}/fixed-8bit-2k.snapshot")).unwrap();
    assert_eq!(
        u16::from_le_bytes([bytes[8], bytes[9]]),
        2,
        "a version 2 file"
    );
    for fixed in [
        CuckooFilter::from_bytes(&bytes).unwrap(),
        CuckooFilter::read_from(&bytes[..]).unwrap(),
    ] {
        assert_eq!(fixed.layout(), Layout::OneWord);
        assert!(!fixed.is_growable());
        assert_eq!((fixed.fingerprint_bits(), fixed.len()), (8, 2_000));
        assert!((0..2_000u64).all(|i| fixed.contains(&(i * 7 + 1))));
        // It saves again (as version 3) to the same filter.
        let again = CuckooFilter::from_bytes(&fixed.to_bytes()).unwrap();
        assert_eq!(again.len(), 2_000);
        assert!((0..2_000u64).all(|i| again.contains(&(i * 7 + 1))));
    }

    // 1,000 items a level, doubling, 6,000 items in 3 levels: a filter that grew by levels.
    let bytes = std::fs::read(format!("{data}/grown-1k-to-6k.snapshot")).unwrap();
    assert_retired(&bytes);
}

/// Asserts that `bytes` (a snapshot of a filter that grew by levels) is refused as a retired
/// format, whole and streamed, and not as a corrupt snapshot.
fn assert_retired(bytes: &[u8]) {
    for (how, result) in [
        ("from_bytes", CuckooFilter::from_bytes(bytes)),
        ("read_from", CuckooFilter::read_from(bytes)),
    ] {
        match result {
            Err(PersistError::RetiredFormat { written_by }) => {
                assert!(written_by.contains("level"), "{how}: {written_by}")
            }
            other => panic!("{how}: {:?}", other.map(|f| f.len())),
        }
    }
}

/// A packed, rate-driven filter that grew by levels, saved in format version 3
/// (`capacity(1000).false_positive_rate(0.01).expansion(2)`, keys 0..12000, 4 levels): a
/// retired format, refused by name; so is the same header with every factor and level count
/// that means growth by levels.
#[test]
fn a_version_3_snapshot_of_a_filter_grown_by_levels_is_a_retired_format() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/snapshots-v3");
    let bytes = std::fs::read(format!("{data}/grown-packed-1k-to-12k.snapshot")).unwrap();
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 3);
    assert_retired(&bytes);
    let words = words_of(&bytes);
    for factor in [1u64, 2, 16] {
        let mut w = words.clone();
        // Word 2: fingerprint bits (low half) and expansion factor (high half).
        w[2] = w[2] & 0xFFFF_FFFF | factor << 32;
        assert_retired(&resealed(w));
    }
}

/// Version 2 builds knew width rules 1 and 2 only: a version 2 header naming rule 3 (the
/// harmonic rate budget) is refused.
#[test]
fn a_version_2_snapshot_with_the_harmonic_rule_is_refused() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/snapshots-v2");
    let bytes = std::fs::read(format!("{data}/grown-1k-to-6k.snapshot")).unwrap();
    let mut words = words_of(&bytes);
    assert_eq!(words[1] >> 32, 2, "width rule 2");
    words[1] = words[1] & 0xFFFF_FFFF | 3 << 32;
    assert!(matches!(
        CuckooFilter::from_bytes(&resealed(words)),
        Err(PersistError::InvalidParameter {
            field: "width rule"
        })
    ));
}

/// The version 2 header's flags were reserved: a version 2 snapshot that names a layout there
/// is refused, not read as a packed one.
#[test]
fn a_version_2_snapshot_with_flags_is_refused() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/snapshots-v2");
    let mut bytes = std::fs::read(format!("{data}/fixed-8bit-2k.snapshot")).unwrap();
    bytes[10] = 1; // the flags' low byte: "packed" in version 3
    assert!(matches!(
        CuckooFilter::from_bytes(&bytes),
        Err(PersistError::InvalidParameter { .. })
    ));
}

// ---------------------------------------------------------------- bucket layouts (format 3)

use crate::common;
use crate::format_model::{resealed, words_of, Snapshot};
use atomic_cuckoo::Layout;

const LAYOUTS: [Layout; 3] = [Layout::Packed, Layout::Compact, Layout::OneWord];

/// Layout codes of the header's flags (FORMAT.md).
fn layout_code(layout: Layout) -> u16 {
    match layout {
        Layout::OneWord => 0,
        Layout::Packed => 1,
        _ => 2,
    }
}

/// A filter with copies and removals: fixed, of `layout` and `bits`, or growable (which packs
/// its lanes and chooses their width itself, so `layout` and `bits` are not given to it).
fn filled_in(
    layout: Layout,
    bits: Option<u32>,
    capacity: usize,
    growable: bool,
    items: usize,
    seed: u64,
) -> (CuckooFilter, Vec<u64>) {
    let filter = if growable {
        CuckooFilter::builder()
            .capacity(capacity)
            .growable(true)
            .build()
            .unwrap()
    } else {
        let mut b = CuckooFilter::builder().capacity(capacity).layout(layout);
        if let Some(bits) = bits {
            b = b.fingerprint_bits(bits);
        }
        b.build().unwrap()
    };
    let mut kept = Vec::new();
    for (i, k) in common::distinct_keys(seed, items).iter().enumerate() {
        if filter.insert(k).is_err() {
            break;
        }
        if i % 7 == 0 {
            filter.insert(k).unwrap_or(());
        }
        if i % 5 == 0 {
            assert!(filter.remove(k));
        } else {
            kept.push(*k);
        }
    }
    (filter, kept)
}

/// Restores `bytes` both ways; when a restore succeeds, uses the filter (lookups, counts,
/// inserts, removes, a save): none of it may panic. Returns the `from_bytes` result.
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
    for f in streamed.iter().chain(whole.iter()) {
        for k in probes {
            let _ = f.contains(k);
            let _ = f.count(k);
        }
        for k in probes.iter().take(50) {
            let _ = f.insert(k);
            let _ = f.remove(k);
        }
        let again = f.to_bytes();
        CuckooFilter::from_bytes(&again).expect("a used restored filter saves and restores");
    }
    whole
}

#[test]
fn every_layout_round_trips_at_every_width_with_and_without_growth() {
    let seed = common::seed("layout round trips");
    for layout in LAYOUTS {
        for bits in (4..=32).map(Some).chain([None]) {
            for growable in [false, true] {
                // A growable filter takes neither a layout nor a width: one case of it.
                if growable && (layout != Layout::Packed || bits.is_some()) {
                    continue;
                }
                let (f, kept) = filled_in(layout, bits, 40, growable, 300, seed);
                let bytes = f.to_bytes();
                if !growable {
                    assert_eq!(Snapshot::parse(&bytes).layout(), layout_code(layout));
                }
                for g in [
                    CuckooFilter::from_bytes(&bytes).unwrap(),
                    CuckooFilter::read_from(&bytes[..]).unwrap(),
                ] {
                    assert_eq!(g.layout(), layout);
                    assert_same(&f, &g, &kept);
                    // And it goes on working: grows, or fills to Full, without losing items.
                    for k in common::distinct_keys(seed ^ 1, 200) {
                        let _ = g.insert(&k);
                    }
                    assert!(kept.iter().all(|k| g.contains(k)));
                }
            }
        }
    }
}

/// Single bit flips anywhere in a snapshot of every layout, with the checksum made right again
/// (so that the validation behind it is what is tested): a typed error, or a filter that works.
#[test]
fn resealed_bit_flips_in_every_layout_give_errors_or_working_filters() {
    let seed = common::seed("resealed flips");
    let mut rng = common::Rng::new(seed);
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    for layout in LAYOUTS {
        for bits in [5, 8, 10, 12, 13, 17, 21, 32] {
            let (f, kept) = filled_in(layout, Some(bits), 100, false, 120, seed);
            let words = words_of(&f.to_bytes());
            let n = words.len() - 1;
            for _ in 0..150 {
                let mut bad = words.clone();
                let at = rng.below(n as u64) as usize;
                bad[at] ^= 1 << rng.below(64);
                match restore_and_use(&resealed(bad), &kept) {
                    Err(e) => {
                        let name = format!("{e:?}");
                        let name = name.split([' ', '(', '{']).next().unwrap().to_string();
                        *outcomes.entry(name).or_default() += 1;
                    }
                    Ok(_) => *outcomes.entry("restored".into()).or_default() += 1,
                }
            }
        }
    }
    println!("outcomes: {outcomes:?}");
}

/// The layout code in the header's flags changed to every other value: refused (the block
/// lengths or the buckets do not fit the other layout) or, where they happen to fit, a filter
/// that works; never a panic.
#[test]
fn a_changed_layout_code_is_refused_or_harmless() {
    let seed = common::seed("layout code");
    for layout in LAYOUTS {
        for bits in [4, 5, 8, 9, 12, 16, 17, 32] {
            for capacity in [1, 10, 100] {
                let (f, kept) = filled_in(layout, Some(bits), capacity, false, 60, seed);
                let words = words_of(&f.to_bytes());
                for code in [0u64, 1, 2, 3, 0x7FFF, 0xFFFF] {
                    if code == u64::from(layout_code(layout)) {
                        continue;
                    }
                    let mut bad = words.clone();
                    bad[1] = (bad[1] & !(0xFFFF << 16)) | code << 16;
                    let result = restore_and_use(&resealed(bad), &kept);
                    if code > 2 {
                        assert!(
                            matches!(result, Err(PersistError::InvalidParameter { .. })),
                            "{layout:?} f={bits}: code {code}: {:?}",
                            result.err()
                        );
                    }
                }
            }
        }
    }
}

/// Sets `len` bits at bit `at` of the level block starting at word `start`.
fn set_bits(words: &mut [u64], start: usize, at: u64, len: u32, value: u64) {
    for k in 0..u64::from(len) {
        let bit = at + k;
        let w = &mut words[start + (bit / 64) as usize];
        let mask = 1u64 << (bit % 64);
        if (value >> k) & 1 == 1 {
            *w |= mask;
        } else {
            *w &= !mask;
        }
    }
}

/// Offset (in words) of the first level's block.
const FIRST_BLOCK: usize = 8 + 3;

/// A semi-sorted bucket whose 12-bit nibble index is past the last of the 3876 multisets, at the
/// first, a straddling and the last bucket: refused as an invalid bucket.
#[test]
fn a_semi_sorted_bucket_with_an_invalid_index_is_refused() {
    for bits in [5, 6, 8, 9, 10, 12, 13, 16, 17, 21, 31, 32] {
        let f = CuckooFilter::builder()
            .capacity(50)
            .fingerprint_bits(bits)
            .layout(Layout::Compact)
            .build()
            .unwrap();
        let snap = Snapshot::parse(&f.to_bytes());
        let buckets = snap.levels[0].buckets as u64;
        let stride = u64::from(4 * bits - 4);
        let straddling = (0..buckets)
            .find(|b| (b * stride) % 64 + 12 > 64)
            .unwrap_or(1);
        for bucket in [0, straddling, buckets - 1] {
            for index in [3876u64, 4000, 4095] {
                let mut words = words_of(&f.to_bytes());
                set_bits(&mut words, FIRST_BLOCK, bucket * stride, 12, index);
                let result = restore_and_use(&resealed(words), &[]);
                assert!(
                    matches!(result, Err(PersistError::InvalidParameter { .. })),
                    "f={bits} bucket {bucket} index {index}: {:?}",
                    result.err()
                );
            }
        }
    }
}

/// A bit set after the last bucket, in its last word or in the padding words loads may read:
/// refused, in every layout and width.
#[test]
fn nonzero_bits_past_the_last_bucket_are_refused() {
    for layout in LAYOUTS {
        for bits in 4..=32 {
            let f = CuckooFilter::builder()
                .capacity(30)
                .fingerprint_bits(bits)
                .layout(layout)
                .build()
                .unwrap();
            let words = words_of(&f.to_bytes());
            let snap = Snapshot::parse(&f.to_bytes());
            let level = &snap.levels[0];
            let stride = match layout {
                Layout::OneWord => 64,
                Layout::Packed => 4 * u64::from(bits),
                _ => 4 * u64::from(bits) - 4,
            };
            let end = level.buckets as u64 * stride;
            let block_bits = level.words.len() as u64 * 64;
            let mut tried = 0;
            for bit in (end..block_bits).step_by(7).chain([block_bits - 1]) {
                if bit < end {
                    continue;
                }
                let mut bad = words.clone();
                set_bits(&mut bad, FIRST_BLOCK, bit, 1, 1);
                let result = restore_and_use(&resealed(bad), &[]);
                assert!(
                    matches!(result, Err(PersistError::InvalidParameter { .. })),
                    "{layout:?} f={bits} bit {bit} of {block_bits} (end {end}): {:?}",
                    result.err()
                );
                tried += 1;
            }
            // One-word widths that fill their words have no bits past the last bucket.
            if end < block_bits {
                assert!(tried > 0);
            }
            // Bits above the last lane of a one-word bucket are no lane either.
            if layout == Layout::OneWord && 64 % bits != 0 {
                let mut bad = words.clone();
                bad[FIRST_BLOCK] |= 1 << 63;
                let result = restore_and_use(&resealed(bad), &[]);
                assert!(
                    matches!(result, Err(PersistError::InvalidParameter { .. })),
                    "one-word f={bits}: {:?}",
                    result.err()
                );
            }
        }
    }
}

/// Truncated or padded snapshots of every layout: `Truncated` or `TrailingBytes`.
#[test]
fn truncated_or_padded_snapshots_of_every_layout_are_refused() {
    for layout in LAYOUTS {
        for bits in [5, 10, 13, 21, 32] {
            let (f, _) = filled_in(layout, Some(bits), 100, false, 100, 7);
            let bytes = f.to_bytes();
            for cut in [1, 7, 8, 9, 16, bytes.len() / 2, bytes.len() - 1] {
                let short = &bytes[..bytes.len() - cut];
                assert!(matches!(
                    CuckooFilter::from_bytes(short),
                    Err(PersistError::Truncated)
                ));
                assert!(matches!(
                    CuckooFilter::read_from(short),
                    Err(PersistError::Truncated)
                ));
            }
            for pad in [1, 8, 24] {
                let mut long = bytes.clone();
                long.extend(std::iter::repeat_n(0, pad));
                assert!(matches!(
                    CuckooFilter::from_bytes(&long),
                    Err(PersistError::TrailingBytes { extra }) if extra == pad
                ));
                // A stream reads exactly the snapshot and leaves the rest.
                assert!(CuckooFilter::read_from(&long[..]).is_ok());
            }
        }
    }
}

/// Version 2 has no layouts: its flags are reserved, so a version-2 header with any nonzero
/// flags is refused; with zero flags a one-word snapshot loads as version 2.
#[test]
fn a_version_2_header_with_nonzero_flags_is_refused() {
    let (f, kept) = filled_in(Layout::OneWord, Some(12), 200, false, 200, 3);
    let words = words_of(&f.to_bytes());
    let mut v2 = words.clone();
    v2[1] = (v2[1] & !0xFFFF) | 2;
    let g = restore_and_use(&resealed(v2.clone()), &kept).expect("a version 2 one-word snapshot");
    assert!(kept.iter().all(|k| g.contains(k)));
    assert_eq!(g.layout(), Layout::OneWord);
    for flags in [1u64, 2, 3, 0x8000, 0xFFFF] {
        let mut bad = v2.clone();
        bad[1] |= flags << 16;
        let result = restore_and_use(&resealed(bad), &kept);
        assert!(
            matches!(result, Err(PersistError::InvalidParameter { .. })),
            "flags {flags}: {:?}",
            result.err()
        );
    }
}

/// Byte offsets of every level header's bucket count in `bytes` (a genuine snapshot).
fn level_bucket_count_offsets(bytes: &[u8]) -> Vec<usize> {
    let snapshot = Snapshot::parse(bytes);
    let mut at = 8; // header words
    let mut offsets = Vec::new();
    for level in &snapshot.levels {
        offsets.push(8 * (at + 1));
        at += 3 + level.words.len();
    }
    offsets
}

/// A flipped bit in a level header's bucket count changes the length the headers give: it is
/// reported as a header that disagrees with the plan (the snapshot is corrupt), by
/// `from_bytes` as by `read_from`, never as bytes after the snapshot or a truncated input.
#[test]
fn a_flipped_bit_in_a_level_bucket_count_is_reported_as_corruption() {
    let bytes = small_snapshot();
    let offsets = level_bucket_count_offsets(&bytes);
    let mut shown = std::collections::BTreeSet::new();
    for (level, &at) in offsets.iter().enumerate() {
        for bit in 0..64 {
            let mut bad = bytes.clone();
            bad[at + bit / 8] ^= 1 << (bit % 8);
            for (how, result) in [
                ("from_bytes", CuckooFilter::from_bytes(&bad)),
                ("read_from", CuckooFilter::read_from(&bad[..])),
            ] {
                let error = result.expect_err("a corrupt bucket count");
                let message = error.to_string();
                shown.insert(message.clone());
                assert!(
                    !message.contains("unexpected byte") && !message.contains("truncated"),
                    "level {level} bit {bit} ({how}): {message:?}"
                );
                assert!(
                    matches!(error, PersistError::InvalidParameter { .. }),
                    "level {level} bit {bit} ({how}): {error:?}"
                );
            }
        }
    }
    println!("{} levels, 64 bits each: {shown:#?}", offsets.len());
}

/// Whatever single bit of a header is flipped, `from_bytes` of a snapshot of the right length
/// never blames bytes after the snapshot: a shorter length read from a corrupt header is
/// checked against the checksum first.
#[test]
fn no_single_header_bit_flip_is_reported_as_trailing_bytes() {
    let bytes = small_snapshot();
    let mut header_bytes: Vec<usize> = (0..64).collect();
    for at in level_bucket_count_offsets(&bytes) {
        header_bytes.extend(at - 8..at + 16);
    }
    for &byte in &header_bytes {
        for bit in 0..8 {
            let mut bad = bytes.clone();
            bad[byte] ^= 1 << bit;
            let error = CuckooFilter::from_bytes(&bad).expect_err("a corrupt header");
            assert!(
                !matches!(error, PersistError::TrailingBytes { .. }),
                "byte {byte} bit {bit}: {error}"
            );
        }
    }
}

// ------------------------------------------------- attacks on the length and trailer checks

/// Small snapshots of every shape the length check must get right: each layout at the widths
/// at the edges, empty or not, and growable filters empty, doubled and mid-doubling.
fn edge_snapshots() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for layout in LAYOUTS {
        for bits in [4, 5, 31, 32] {
            let (f, _) = filled_in(layout, Some(bits), 12, false, 60, 5);
            out.push((format!("{layout:?} {bits} bits"), f.to_bytes()));
        }
        let empty = CuckooFilter::builder()
            .capacity(1)
            .layout(layout)
            .build()
            .unwrap();
        out.push((format!("{layout:?} empty"), empty.to_bytes()));
    }
    let growable = || {
        CuckooFilter::builder()
            .capacity(10)
            .growable(true)
            .build()
            .unwrap()
    };
    out.push(("growable empty".into(), growable().to_bytes()));
    let doubled = growable();
    doubled.insert_many(0..120u64).unwrap();
    doubled.finish_doubling();
    assert!(doubled.doublings() > 0);
    out.push(("growable doubled".into(), doubled.to_bytes()));
    let mid = growable();
    let mut i = 0u64;
    while !mid.is_doubling() {
        mid.insert(&i).unwrap();
        i += 1;
    }
    out.push(("growable mid-doubling".into(), mid.to_bytes()));
    out
}

/// Every truncation is `Truncated` both ways, every single flipped bit an error both ways (the
/// checksum is over every byte), and never `TrailingBytes` even with other bytes after the
/// snapshot, and bytes appended to a valid snapshot are `TrailingBytes`
/// from `from_bytes`, while `read_from` loads it and leaves them unread: in every layout, at
/// the widths at the edges, fixed, growable, empty and mid-doubling.
#[test]
fn every_cut_flip_and_padding_of_edge_snapshots_gets_its_typed_error() {
    let mut flips = 0;
    for (name, bytes) in edge_snapshots() {
        let whole = CuckooFilter::from_bytes(&bytes).expect("a genuine snapshot");
        assert_eq!(whole.to_bytes(), bytes, "{name}: round trip");
        for len in 0..bytes.len() {
            let short = &bytes[..len];
            assert!(
                matches!(
                    CuckooFilter::from_bytes(short),
                    Err(PersistError::Truncated)
                ),
                "{name}: from_bytes of {len} bytes"
            );
            assert!(
                matches!(CuckooFilter::read_from(short), Err(PersistError::Truncated)),
                "{name}: read_from of {len} bytes"
            );
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[i] ^= 1 << bit;
                flips += 1;
                let whole = CuckooFilter::from_bytes(&bad);
                assert!(
                    whole.is_err(),
                    "{name}: byte {i} bit {bit} loaded (from_bytes)"
                );
                assert!(
                    !matches!(whole, Err(PersistError::TrailingBytes { .. })),
                    "{name}: byte {i} bit {bit}: {:?}",
                    whole.err()
                );
                let streamed = CuckooFilter::read_from(&bad[..]);
                assert!(
                    streamed.is_err(),
                    "{name}: byte {i} bit {bit} loaded (read_from)"
                );
                // Followed by other bytes, a corrupt snapshot is still corrupt, never a
                // snapshot with trailing bytes.
                bad.extend_from_slice(&[0x5A; 8]);
                let padded = CuckooFilter::from_bytes(&bad);
                assert!(
                    matches!(&padded, Err(e) if !matches!(e, PersistError::TrailingBytes { .. })),
                    "{name}: byte {i} bit {bit}, padded: {:?}",
                    padded.map(|_| ())
                );
            }
        }
        for extra in [1usize, 7, 8, 9, 64] {
            let mut long = bytes.clone();
            long.extend((0..extra).map(|i| i as u8 ^ 0xA5));
            assert!(
                matches!(
                    CuckooFilter::from_bytes(&long),
                    Err(PersistError::TrailingBytes { extra: e }) if e == extra
                ),
                "{name}: {extra} bytes appended"
            );
            let mut reader = &long[..];
            let f = CuckooFilter::read_from(&mut reader).expect("a snapshot then other bytes");
            assert_eq!(
                reader,
                &long[bytes.len()..],
                "{name}: read past the snapshot"
            );
            assert_eq!(f.to_bytes(), bytes);
        }
    }
    println!("{flips} single-bit flips, all refused");
}

/// A stream of snapshots, one after another, of fixed and growable filters: each `read_from` takes
/// exactly its own snapshot and the next one reads on from there; `from_bytes` of the whole
/// stream is `TrailingBytes` with the length of what follows the first.
#[test]
fn snapshots_back_to_back_in_one_stream_are_read_one_at_a_time() {
    let (a, kept_a) = filled_in(Layout::Compact, Some(9), 30, false, 150, 21);
    let b = CuckooFilter::builder()
        .capacity(16)
        .growable(true)
        .build()
        .unwrap();
    (0..200u64).for_each(|i| b.insert(&i).unwrap());
    let (c, kept_c) = filled_in(Layout::OneWord, None, 10, false, 8, 22);
    let (sa, sb, sc) = (a.to_bytes(), b.to_bytes(), c.to_bytes());
    let stream: Vec<u8> = [&sa[..], &sb[..], &sc[..], &sa[..]].concat();
    let mut reader = &stream[..];
    let ra = CuckooFilter::read_from(&mut reader).unwrap();
    assert_eq!(reader.len(), stream.len() - sa.len());
    let rb = CuckooFilter::read_from(&mut reader).unwrap();
    assert!(rb.is_growable() && rb.doublings() == b.doublings());
    let rc = CuckooFilter::read_from(&mut reader).unwrap();
    let ra2 = CuckooFilter::read_from(&mut reader).unwrap();
    assert!(reader.is_empty());
    assert!(matches!(
        CuckooFilter::read_from(&mut reader),
        Err(PersistError::Truncated)
    ));
    assert!(kept_a.iter().all(|k| ra.contains(k) && ra2.contains(k)));
    assert!((0..200u64).all(|i| rb.contains(&i)));
    assert!(kept_c.iter().all(|k| rc.contains(k)));
    assert_eq!((ra.to_bytes(), rc.to_bytes()), (sa.clone(), sc.clone()));
    assert!(matches!(
        CuckooFilter::from_bytes(&stream),
        Err(PersistError::TrailingBytes { extra }) if extra == stream.len() - sa.len()
    ));
    // The growable filter's snapshot first: the rest is what follows it.
    assert!(matches!(
        CuckooFilter::from_bytes(&stream[sa.len()..]),
        Err(PersistError::TrailingBytes { extra }) if extra == stream.len() - sa.len() - sb.len()
    ));
}

/// Every snapshot file that earlier builds wrote (format versions 2 and 3) of a filter that
/// did not grow by levels still loads both ways after the length check against the plan;
/// followed by other bytes it is `TrailingBytes` for `from_bytes` and loads from a stream that
/// keeps them; cut short it is `Truncated`. Those of filters grown by levels are a retired
/// format.
#[test]
fn every_stored_old_snapshot_passes_the_new_length_checks() {
    let mut files = 0;
    for dir in ["snapshots-v2", "snapshots-v3"] {
        let dir = format!("{}/tests/data/{dir}", env!("CARGO_MANIFEST_DIR"));
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let name = path.display();
            files += 1;
            if path
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("grown-")
            {
                assert_retired(&bytes);
                continue;
            }
            let whole = CuckooFilter::from_bytes(&bytes)
                .unwrap_or_else(|e| panic!("{name}: from_bytes: {e}"));
            let streamed =
                CuckooFilter::read_from(&bytes[..]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(whole.len(), streamed.len());
            assert_eq!(whole.to_bytes(), streamed.to_bytes());
            let mut long = bytes.clone();
            long.extend_from_slice(&bytes[..24]);
            assert!(
                matches!(
                    CuckooFilter::from_bytes(&long),
                    Err(PersistError::TrailingBytes { extra: 24 })
                ),
                "{name}"
            );
            let mut reader = &long[..];
            CuckooFilter::read_from(&mut reader).unwrap();
            assert_eq!(reader, &bytes[..24], "{name}");
            for cut in [1, 8, 9, bytes.len() / 2] {
                assert!(
                    matches!(
                        CuckooFilter::from_bytes(&bytes[..bytes.len() - cut]),
                        Err(PersistError::Truncated)
                    ),
                    "{name}: cut {cut}"
                );
            }
        }
    }
    assert!(files >= 3, "the stored snapshots were found");
}

/// The target rate survives every way of copying a filter bit for bit (snapshots both ways,
/// `Clone`, a `CuckooSet` over the restored filter), for odd rates too, and the stored
/// snapshots of earlier versions report theirs (`None` for a fixed width).
#[test]
fn the_target_rate_survives_snapshots_bit_for_bit() {
    for (rate, growable) in [
        (0.012_345_678_9, false),
        (1e-6, true),
        (1e-8, false),
        (0.5, true),
        (0.3, false),
    ] {
        let f = CuckooFilter::builder()
            .capacity(50)
            .false_positive_rate(rate)
            .growable(growable)
            .build()
            .unwrap();
        f.insert_many(0..200u64).ok();
        let bytes = f.to_bytes();
        for g in [
            CuckooFilter::from_bytes(&bytes).unwrap(),
            CuckooFilter::read_from(&bytes[..]).unwrap(),
            f.clone(),
        ] {
            let got = g.target_false_positive_rate().unwrap();
            assert_eq!(got.to_bits(), rate.to_bits(), "{rate}");
        }
    }
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let load = |p: &str| CuckooFilter::from_bytes(&std::fs::read(format!("{data}/{p}")).unwrap());
    assert_eq!(
        load("snapshots-v2/fixed-8bit-2k.snapshot")
            .unwrap()
            .target_false_positive_rate(),
        None
    );
    assert!(load("snapshots-v3/static-packed-rate-1pct-1000.snapshot")
        .unwrap()
        .target_false_positive_rate()
        .is_some_and(|r| (r - 0.01).abs() < 1e-12));
}

/// A reader that hands out at most `step` bytes a call (and fails after `fail_after` bytes, if
/// set), like a socket or a pipe.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
    given: usize,
    fail_after: Option<usize>,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.fail_after.is_some_and(|n| self.given >= n) {
            return Err(std::io::Error::other("connection reset"));
        }
        let before_failure = self.fail_after.map_or(usize::MAX, |n| n - self.given);
        let n = buf
            .len()
            .min(self.step)
            .min(self.data.len())
            .min(before_failure);
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.given += n;
        Ok(n)
    }
}

/// `read_from` over a reader that returns a few bytes a call still stops exactly at each
/// snapshot's end (fixed and growable snapshots in a row, then other data), and a reader that
/// fails partway is `Io`, never a panic or a filter.
#[test]
fn read_from_a_trickling_stream_stops_exactly_at_each_snapshot() {
    let (a, kept) = filled_in(Layout::Packed, Some(13), 40, false, 200, 31);
    let b = CuckooFilter::builder()
        .capacity(10)
        .growable(true)
        .build()
        .unwrap();
    (0..100u64).for_each(|i| b.insert(&i).unwrap());
    let (sa, sb) = (a.to_bytes(), b.to_bytes());
    let stream: Vec<u8> = [&sa[..], &sb[..], &sa[..], b"tail"].concat();
    for step in [1, 3, 7, 8, 13, 4096] {
        let mut r = Trickle {
            data: &stream,
            step,
            given: 0,
            fail_after: None,
        };
        let first = CuckooFilter::read_from(&mut r).unwrap();
        assert_eq!(r.given, sa.len(), "step {step}");
        let second = CuckooFilter::read_from(&mut r).unwrap();
        assert_eq!(r.given, sa.len() + sb.len(), "step {step}");
        let third = CuckooFilter::read_from(&mut r).unwrap();
        assert_eq!(r.data, b"tail", "step {step}");
        assert!(kept.iter().all(|k| first.contains(k) && third.contains(k)));
        assert!((0..100u64).all(|i| second.contains(&i)));
    }
    for fail_after in [0, 5, 64, 100, sa.len() / 2, sa.len() - 8, sa.len() - 1] {
        let mut r = Trickle {
            data: &stream,
            step: 5,
            given: 0,
            fail_after: Some(fail_after),
        };
        assert!(
            matches!(CuckooFilter::read_from(&mut r), Err(PersistError::Io(_))),
            "failing after {fail_after} bytes"
        );
    }
}

/// Snapshots of static filters, one per layout and width, written by the build whose format is
/// version 3 (`tests/data/snapshots-v3/static-*`): `capacity(1_000)`, then
/// `fingerprint_bits(b)` with the 700 items `7i + 1`, or `false_positive_rate(p)` with 1,000 of
/// them, or nothing. Every one loads with every item, both ways, keeps its layout, width, target
/// rate and length, and saves again to the very same bytes: a later build must keep reading the
/// snapshots users have stored.
#[test]
fn static_snapshots_of_every_layout_and_width_load_with_every_item_and_save_the_same_bytes() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/snapshots-v3");
    let layouts = [
        ("oneword", Layout::OneWord),
        ("packed", Layout::Packed),
        ("compact", Layout::Compact),
    ];
    // (file, layout, fingerprint bits, target rate, items)
    let mut cases: Vec<(String, Layout, u32, Option<f64>, u64)> = Vec::new();
    for (name, layout) in layouts {
        for bits in [4u32, 5, 8, 12, 13, 16, 32] {
            cases.push((
                format!("static-{name}-{bits}bit-700"),
                layout,
                bits,
                None,
                700,
            ));
        }
        let rated = match layout {
            Layout::OneWord => [("3pct", 0.03, 9), ("1pct", 0.01, 12), ("0.1pct", 0.001, 16)],
            _ => [("3pct", 0.03, 8), ("1pct", 0.01, 10), ("0.1pct", 0.001, 13)],
        };
        for (rate_name, rate, bits) in rated {
            let file = format!("static-{name}-rate-{rate_name}-1000");
            cases.push((file, layout, bits, Some(rate), 1_000));
        }
    }
    cases.push((
        "static-packed-rate-1pct-empty".into(),
        Layout::Packed,
        10,
        Some(0.01),
        0,
    ));
    for (file, layout, bits, rate, items) in cases {
        let bytes = std::fs::read(format!("{data}/{file}.snapshot")).unwrap();
        for (how, filter) in [
            ("from_bytes", CuckooFilter::from_bytes(&bytes)),
            ("read_from", CuckooFilter::read_from(&bytes[..])),
        ] {
            let filter = filter.unwrap_or_else(|e| panic!("{file} ({how}): {e}"));
            assert_eq!(
                (filter.layout(), filter.fingerprint_bits()),
                (layout, bits),
                "{file} ({how})"
            );
            assert_eq!(filter.target_false_positive_rate(), rate, "{file} ({how})");
            assert_eq!(filter.len() as u64, items, "{file} ({how})");
            assert!(!filter.is_growable(), "{file} ({how})");
            let missing = (0..items)
                .map(|i| i * 7 + 1)
                .filter(|i| !filter.contains(i));
            assert_eq!(missing.count(), 0, "{file} ({how}): items not found");
            assert!(
                filter.to_bytes() == bytes,
                "{file} ({how}): saved to other bytes"
            );
        }
    }
}
