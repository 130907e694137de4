//! Snapshots: exact round trips, and every malformed input a typed error (never a panic).

mod common;

use std::collections::hash_map::RandomState;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use atomic_cuckoo::{CuckooFilter, PersistError};

/// A filter with some duplicates and removals, so every lane state appears.
fn filled(
    capacity: usize,
    bits: u32,
    expansion: u32,
    items: usize,
    seed: u64,
) -> (CuckooFilter, Vec<u64>) {
    let filter = CuckooFilter::builder()
        .capacity(capacity)
        .fingerprint_bits(bits)
        .expansion(expansion)
        .build()
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
    assert_eq!(a.levels(), b.levels());
    assert_eq!(a.fingerprint_bits(), b.fingerprint_bits());
    assert_eq!(a.memory_usage(), b.memory_usage());
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
        for expansion in [0, 2] {
            let (filter, kept) = filled(300, bits, expansion, 2_000, seed ^ u64::from(bits));
            if expansion > 0 {
                assert!(filter.levels() > 1, "bits={bits}: did not grow");
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
        .expansion(2)
        .max_levels(20)
        .build()
        .unwrap();
    for k in 0..5_000u32 {
        filter.insert(&k).unwrap();
    }
    let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_eq!(restored.levels(), filter.levels());
    let widths = |f: &CuckooFilter| {
        f.level_stats()
            .iter()
            .map(|l| l.fingerprint_bits)
            .collect::<Vec<_>>()
    };
    assert_eq!(widths(&restored), widths(&filter));
    assert!((restored.false_positive_rate() - filter.false_positive_rate()).abs() < 1e-12);
    for k in 5_000..50_000u32 {
        restored.insert(&k).unwrap();
    }
    assert!(
        restored.levels() > filter.levels(),
        "the restored filter grows with the same plan"
    );
    assert!((0..50_000u32).all(|k| restored.contains(&k)));
    assert!(restored.false_positive_rate() <= 0.001);
}

#[test]
fn a_snapshot_can_be_followed_by_other_data_in_a_stream() {
    let (filter, kept) = filled(500, 16, 0, 400, 3);
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
    let (filter, _) = filled(24, 12, 2, 80, 11);
    assert!(
        filter.levels() >= 2,
        "the small snapshot should have several levels"
    );
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

/// A header claiming a table of 2^32 buckets (32 GiB) behind a few bytes of data: rejected as
/// truncated by from_bytes (it checks the length first), and by read_from because that is not
/// the shape the plan gives the level (levels nest; the allocation bound of a stream whose
/// shapes agree is tested in persistence_memory.rs).
#[test]
fn a_header_claiming_a_huge_table_is_rejected() {
    let mut bytes = small_snapshot();
    // First level header: bits at 64..68, buckets at 72..80.
    bytes[72..80].copy_from_slice(&(1u64 << 32).to_le_bytes());
    assert!(matches!(
        CuckooFilter::from_bytes(&bytes),
        Err(PersistError::Truncated)
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
/// every bucket one word), kept as files: they load with every item, as one-word filters that
/// go on growing in that layout, and save again (as version 3) to the same filter.
#[test]
fn version_2_snapshots_load_with_every_item() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/snapshots-v2");
    // 1,000 items a level, doubling, 6,000 items in 3 levels (keys 0..6000).
    let bytes = std::fs::read(format!("{data}/grown-1k-to-6k.snapshot")).unwrap();
    assert_eq!(
        u16::from_le_bytes([bytes[8], bytes[9]]),
        2,
        "a version 2 file"
    );
    let grown = CuckooFilter::from_bytes(&bytes).unwrap();
    assert_eq!(grown.layout(), atomic_cuckoo::Layout::OneWord);
    assert_eq!((grown.levels(), grown.len()), (3, 6_000));
    assert!((0..6_000u64).all(|i| grown.contains(&i)));
    let streamed = CuckooFilter::read_from(&bytes[..]).unwrap();
    assert!((0..6_000u64).all(|i| streamed.contains(&i)));
    // It grows on, and a save of it reloads to the same filter.
    grown.insert_many(6_000..20_000u64).unwrap();
    assert!(grown.levels() > 3);
    let again = CuckooFilter::from_bytes(&grown.to_bytes()).unwrap();
    assert_eq!(again.layout(), atomic_cuckoo::Layout::OneWord);
    assert!((0..20_000u64).all(|i| again.contains(&i)));
    assert_eq!(again.len(), 20_000);

    // A fixed filter of 8-bit fingerprints (eight a word) holding 7i + 1 for i < 2000.
    let bytes = std::fs::read(format!("{data}/fixed-8bit-2k.snapshot")).unwrap();
    let fixed = CuckooFilter::from_bytes(&bytes).unwrap();
    assert_eq!((fixed.fingerprint_bits(), fixed.len()), (8, 2_000));
    assert!((0..2_000u64).all(|i| fixed.contains(&(i * 7 + 1))));
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
