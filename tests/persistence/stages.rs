//! Snapshots of both bodies at every stage of their life (empty, in the middle of a doubling,
//! finished, cleared, after removes), through every way in and out (`to_bytes`/`from_bytes`,
//! `write_to`/`read_from` with other data after the snapshot, serde); and hostile inputs made
//! from the smallest growable snapshots: every single-bit flip, every truncation, forged
//! headers (resealed with a right checksum) claiming huge tables, too many doublings or an
//! inconsistent split state, and another hasher.

use atomic_cuckoo::{AHashBuilder, CuckooFilter, PersistError};

use crate::common::growable;
use crate::common::{distinct_keys, seed};
use crate::format_model::{resealed, words_of};

/// Words of a growable snapshot's header (FORMAT.md, "Growable filter snapshots").
const GROWABLE_HEADER_WORDS: usize = 11;

/// A filter at one stage of its life, the items it holds (once each), and probes never
/// inserted.
struct Stage {
    name: String,
    filter: CuckooFilter,
    kept: Vec<u64>,
}

/// Every stage of both bodies: empty, filled (a growable one in the middle of a doubling and
/// finished), cleared (a growable one in the middle of a doubling), and after removes.
fn stages(seed: u64) -> Vec<Stage> {
    let keys = distinct_keys(seed, 3_000);
    let mut out = Vec::new();
    let fixed = || CuckooFilter::with_capacity(1_000);
    out.push(Stage {
        name: "fixed, empty".into(),
        filter: fixed(),
        kept: vec![],
    });
    let filled = fixed();
    filled.insert_many(&keys[..900]).unwrap();
    out.push(Stage {
        name: "fixed, filled".into(),
        filter: filled.clone(),
        kept: keys[..900].to_vec(),
    });
    for key in keys[..900].iter().step_by(2) {
        assert!(filled.remove(key));
    }
    out.push(Stage {
        name: "fixed, after removes".into(),
        filter: filled.clone(),
        kept: keys[1..900].iter().step_by(2).copied().collect(),
    });
    filled.clear();
    out.push(Stage {
        name: "fixed, cleared".into(),
        filter: filled,
        kept: vec![],
    });
    for rate in [0.5, 1e-7] {
        out.push(Stage {
            name: format!("growable {rate}, empty"),
            filter: growable(1, rate),
            kept: vec![],
        });
        let filter = growable(1, rate);
        let mut n = 0;
        while n < 100 || !filter.is_doubling() {
            filter.insert(&keys[n]).unwrap();
            n += 1;
        }
        out.push(Stage {
            name: format!("growable {rate}, mid-doubling"),
            filter: filter.clone(),
            kept: keys[..n].to_vec(),
        });
        // A few removes (each splits the buckets it touches, so many would finish the
        // doubling).
        for key in keys[..15].iter().step_by(3) {
            assert!(filter.remove(key));
        }
        let kept: Vec<u64> = (0..n)
            .filter(|&i| i >= 15 || i % 3 != 0)
            .map(|i| keys[i])
            .collect();
        out.push(Stage {
            name: format!(
                "growable {rate}, after removes (doubling in progress: {})",
                filter.is_doubling()
            ),
            filter: filter.clone(),
            kept: kept.clone(),
        });
        let cleared = filter.clone();
        let was_doubling = cleared.is_doubling();
        cleared.clear();
        assert!(!cleared.is_doubling() && cleared.doublings() == filter.doublings());
        out.push(Stage {
            name: format!("growable {rate}, cleared (doubling in progress: {was_doubling})"),
            filter: cleared,
            kept: vec![],
        });
        filter.finish_doubling();
        out.push(Stage {
            name: format!("growable {rate}, finished"),
            filter,
            kept,
        });
    }
    out
}

/// Both filters give the same answers for `kept` (all found) and `probes`, and the same
/// accessors.
fn assert_same(at: &str, a: &CuckooFilter, b: &CuckooFilter, kept: &[u64], probes: &[u64]) {
    assert_eq!(a.len(), b.len(), "{at}");
    assert_eq!(a.is_growable(), b.is_growable(), "{at}");
    assert_eq!(a.is_doubling(), b.is_doubling(), "{at}");
    assert_eq!(a.doublings(), b.doublings(), "{at}");
    assert_eq!(a.slots(), b.slots(), "{at}");
    assert_eq!(a.capacity(), b.capacity(), "{at}");
    assert_eq!(
        a.target_false_positive_rate(),
        b.target_false_positive_rate(),
        "{at}"
    );
    assert!(kept.iter().all(|k| b.contains(k)), "{at}: an item lost");
    for p in probes {
        assert_eq!(a.contains(p), b.contains(p), "{at}: probe {p}");
        assert_eq!(a.count(p), b.count(p), "{at}: count of {p}");
    }
}

/// Every stage round trips through `to_bytes`/`from_bytes`, through `write_to`/`read_from`
/// (with the rest of a stream left in the reader) and through serde: the restored filter
/// answers alike, saves the same bytes, and goes on (inserts, a doubling) exactly as the
/// original does.
#[test]
fn every_stage_of_both_bodies_round_trips_every_way_and_goes_on_alike() {
    let seed = seed("snapshots at every stage");
    let probes = distinct_keys(seed ^ 0xbad, 2_000);
    let more = distinct_keys(seed ^ 0x3030, 300);
    for stage in stages(seed) {
        let at = format!("{} (seed {seed})", stage.name);
        let f = &stage.filter;
        let bytes = f.to_bytes();
        assert_eq!(bytes.len(), f.snapshot_size(), "{at}");
        let magic: &[u8] = if f.is_growable() {
            b"ATCUXPND"
        } else {
            b"ATCUCKOO"
        };
        assert_eq!(&bytes[..8], magic, "{at}");
        let mut written = Vec::new();
        f.write_to(&mut written).unwrap();
        assert_eq!(written, bytes, "{at}: write_to and to_bytes differ");

        let mut restored = vec![("from_bytes", CuckooFilter::from_bytes(&bytes).unwrap())];
        // A stream: this snapshot, some other data, the snapshot again.
        let tail = b"not a snapshot";
        let stream = [&bytes[..], &tail[..], &bytes[..]].concat();
        let mut reader = &stream[..];
        restored.push(("read_from", CuckooFilter::read_from(&mut reader).unwrap()));
        assert_eq!(
            reader.len(),
            tail.len() + bytes.len(),
            "{at}: read past its end"
        );
        assert_eq!(&reader[..tail.len()], tail, "{at}");
        reader = &reader[tail.len()..];
        restored.push((
            "read_from, 2nd",
            CuckooFilter::read_from(&mut reader).unwrap(),
        ));
        assert!(reader.is_empty(), "{at}");
        #[cfg(feature = "serde")]
        {
            let serialized = crate::serde_format::serialize_to_bytes(f).unwrap();
            assert_eq!(serialized, bytes, "{at}: serde writes the snapshot bytes");
            let back = crate::serde_format::deserialize_from_numbers(&serialized).unwrap();
            restored.push(("serde", back));
        }
        for (how, r) in &restored {
            let at = format!("{at}, {how}");
            assert_same(&at, f, r, &stage.kept, &probes);
            assert_eq!(r.to_bytes(), bytes, "{at}: saves other bytes");
        }
        // Goes on alike: the same inserts (across a doubling) give the same bytes.
        let original = f.clone();
        let (_, r) = &restored[0];
        for key in &more {
            assert_eq!(original.insert(key), r.insert(key), "{at}: insert {key}");
        }
        assert_eq!(
            original.to_bytes(),
            r.to_bytes(),
            "{at}: diverged after inserts"
        );
        original.finish_doubling();
        r.finish_doubling();
        assert_eq!(
            original.to_bytes(),
            r.to_bytes(),
            "{at}: diverged after finishing"
        );
    }
}

/// Every stage saved by one hasher is refused by another, by every way in.
#[test]
fn every_stage_read_with_another_hasher_is_a_hasher_mismatch() {
    let seed = seed("snapshots with another hasher");
    for stage in stages(seed) {
        let bytes = stage.filter.to_bytes();
        let at = &stage.name;
        assert!(
            matches!(
                CuckooFilter::from_bytes_with_hasher(&bytes, AHashBuilder::default()),
                Err(PersistError::HasherMismatch)
            ),
            "{at}: from_bytes"
        );
        assert!(
            matches!(
                CuckooFilter::read_from_with_hasher(&bytes[..], AHashBuilder::default()),
                Err(PersistError::HasherMismatch)
            ),
            "{at}: read_from"
        );
    }
}

/// The smallest growable snapshots (empty, mid-doubling, cleared mid-doubling), every single
/// bit flipped and every length cut: each a typed error, never a panic or a filter. The
/// checksum changes with any one bit, so no field is a don't-care: a flip of the magic is
/// `BadMagic`, of the checksum `ChecksumMismatch`, elsewhere an error of the header's checks
/// or the checksum's, and never `TrailingBytes`.
#[test]
fn every_bit_flip_and_cut_of_the_smallest_growable_snapshots_is_a_typed_error() {
    let seed = seed("tiny growable snapshot flips");
    let mut snapshots = Vec::new();
    for stage in stages(seed) {
        if stage.filter.is_growable() && stage.filter.snapshot_size() <= 4_096 {
            snapshots.push((stage.name, stage.filter.to_bytes()));
        }
    }
    assert!(snapshots.len() >= 4, "{}", snapshots.len());
    for (name, bytes) in &snapshots {
        let trailer = bytes.len() - 8;
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut corrupt = bytes.clone();
                corrupt[i] ^= 1 << bit;
                let at = format!("{name}: byte {i} bit {bit} of {}", bytes.len());
                for (how, result) in [
                    ("from_bytes", CuckooFilter::from_bytes(&corrupt)),
                    ("read_from", CuckooFilter::read_from(&corrupt[..])),
                ] {
                    let e = match result {
                        Ok(f) => panic!("{at}: {how} restored {f:?}"),
                        Err(e) => e,
                    };
                    let ok = match e {
                        PersistError::BadMagic => i < 8,
                        PersistError::ChecksumMismatch { .. } => true,
                        PersistError::TrailingBytes { .. } => false,
                        PersistError::Truncated => (8..GROWABLE_HEADER_WORDS * 8).contains(&i),
                        PersistError::UnsupportedVersion { .. } => (8..10).contains(&i),
                        PersistError::InvalidParameter { .. } => i < GROWABLE_HEADER_WORDS * 8,
                        PersistError::HasherMismatch => (80..88).contains(&i),
                        _ => false,
                    };
                    assert!(ok, "{at}: {how} gave {e:?}");
                    if i >= trailer {
                        assert!(
                            matches!(e, PersistError::ChecksumMismatch { .. }),
                            "{at}: {how}: {e:?}"
                        );
                    }
                }
            }
        }
        for len in 0..bytes.len() {
            assert!(
                matches!(
                    CuckooFilter::from_bytes(&bytes[..len]),
                    Err(PersistError::Truncated)
                ),
                "{name}: from_bytes of {len} bytes"
            );
            assert!(
                matches!(
                    CuckooFilter::read_from(&bytes[..len]),
                    Err(PersistError::Truncated)
                ),
                "{name}: read_from of {len} bytes"
            );
        }
    }
}

/// Whether an error is the one a forged header must give.
type Expected = fn(&PersistError) -> bool;

/// A growable snapshot in the middle of a doubling, for forging.
fn mid_doubling_words() -> Vec<u64> {
    let filter = growable(1, 0.01);
    let mut key = 0u64;
    while key < 40 || !filter.is_doubling() {
        filter.insert(&key).unwrap();
        key += 1;
    }
    words_of(&filter.to_bytes())
}

/// Forged headers, resealed with a right checksum: too many doublings, tables too large to
/// exist or larger than the input, and split states that contradict the table, each a typed
/// error from both ways in; a claimed huge table is refused without allocating it (a stream
/// that ends early is `Truncated`).
#[test]
fn forged_growable_headers_are_typed_errors_and_allocate_nothing_huge() {
    let words = mid_doubling_words();
    let doublings = words[2] as u32;
    let max_doublings = words[2] >> 32;
    assert!(doublings >= 2);
    let forge = |edit: &dyn Fn(&mut Vec<u64>)| {
        let mut w = words.clone();
        edit(&mut w);
        resealed(w)
    };
    let cases: Vec<(&str, Vec<u8>, Expected)> = vec![
        (
            "33 doublings",
            forge(&|w| w[2] = 33 | max_doublings << 32),
            |e| matches!(e, PersistError::InvalidParameter { .. }),
        ),
        (
            "u32::MAX doublings",
            forge(&|w| w[2] = u64::from(u32::MAX) | max_doublings << 32),
            |e| matches!(e, PersistError::InvalidParameter { .. }),
        ),
        (
            "32 doublings of the first table (terabytes)",
            forge(&|w| w[2] = 32 | max_doublings << 32),
            |e| matches!(e, PersistError::Truncated),
        ),
        (
            "a first table of 2^32 buckets",
            forge(&|w| w[4] = 1 << 32),
            |e| matches!(e, PersistError::Truncated),
        ),
        (
            "a first table of 2^33 buckets",
            forge(&|w| w[4] = 1 << 33),
            |e| matches!(e, PersistError::InvalidParameter { .. }),
        ),
        ("an odd first table", forge(&|w| w[4] = 3), |e| {
            matches!(e, PersistError::InvalidParameter { .. })
        }),
        (
            // The header then has no bitmap: its words are read as the table's, so the length
            // no longer matches (from_bytes: a header giving the wrong length fails the
            // checksum) or the lanes do not.
            "a split in progress with nothing left",
            forge(&|w| w[9] = 0),
            |e| {
                matches!(
                    e,
                    PersistError::InvalidParameter { .. }
                        | PersistError::ChecksumMismatch { .. }
                        | PersistError::CountMismatch { .. }
                )
            },
        ),
        (
            "more left than old buckets",
            forge(&|w| w[9] = u64::MAX),
            |e| matches!(e, PersistError::InvalidParameter { .. }),
        ),
        (
            "the next split past the old buckets",
            forge(&|w| w[8] = 1 << 40),
            |e| matches!(e, PersistError::InvalidParameter { .. }),
        ),
        (
            "one bucket fewer left than the bitmap shows",
            forge(&|w| w[9] -= 1),
            |e| matches!(e, PersistError::InvalidParameter { .. }),
        ),
        ("more items than lanes", forge(&|w| w[5] = w[6] + 1), |e| {
            matches!(e, PersistError::InvalidParameter { .. })
        }),
    ];
    for (what, bytes, expected) in cases {
        for (how, result) in [
            ("from_bytes", CuckooFilter::from_bytes(&bytes)),
            ("read_from", CuckooFilter::read_from(&bytes[..])),
        ] {
            match result {
                Err(e) => assert!(expected(&e), "{what}: {how} gave {e:?}"),
                Ok(f) => panic!("{what}: {how} restored {f:?}"),
            }
        }
    }
    // The in-progress doubling's state dropped from a header that still has its bitmap: the
    // bitmap is then read as table words, and the lanes or the length give it away.
    let no_split = forge(&|w| {
        w[8] = 0;
        w[9] = 0;
    });
    assert!(CuckooFilter::from_bytes(&no_split).is_err());
    assert!(CuckooFilter::read_from(&no_split[..]).is_err());
    let _ = doublings;
}
