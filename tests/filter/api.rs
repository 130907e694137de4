//! `CuckooFilter`: semantics of each method, size, and traits.

use std::sync::Arc;

use atomic_cuckoo::{CuckooFilter, InsertError};

#[test]
fn filter_is_send_sync_and_shareable_in_an_arc() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CuckooFilter>();
    let f = Arc::new(CuckooFilter::with_capacity(10));
    let g = Arc::clone(&f);
    std::thread::spawn(move || g.insert("from a thread").unwrap())
        .join()
        .unwrap();
    assert!(f.contains("from a thread"));
}

#[test]
fn insert_is_a_multiset_and_remove_takes_one_copy() {
    let f = CuckooFilter::with_capacity(100);
    for _ in 0..3 {
        f.insert("m").unwrap();
    }
    assert_eq!(f.count("m"), 3);
    assert_eq!(f.len(), 3);
    assert!(f.remove("m"));
    assert_eq!(f.count("m"), 2);
    assert!(f.contains("m"));
    assert!(f.remove("m") && f.remove("m"));
    assert!(!f.contains("m"));
    assert!(!f.remove("m"));
    assert_eq!(f.len(), 0);
}

#[test]
fn insert_unique_adds_once() {
    let f = CuckooFilter::with_capacity(100);
    assert_eq!(f.insert_unique(&7u32), Ok(true));
    assert_eq!(f.insert_unique(&7u32), Ok(false));
    assert_eq!(f.count(&7u32), 1);
    f.insert(&7u32).unwrap();
    assert_eq!(f.insert_unique(&7u32), Ok(false));
    assert_eq!(f.count(&7u32), 2);
}

#[test]
fn unsized_items_work() {
    let f = CuckooFilter::with_capacity(100);
    f.insert("str slice").unwrap();
    f.insert(&[1u8, 2, 3][..]).unwrap();
    assert!(f.contains("str slice"));
    assert!(f.contains(&[1u8, 2, 3][..]));
    assert!(f.contains(&String::from("str slice")));
}

#[test]
fn clear_empties_and_the_filter_is_reusable() {
    let f = CuckooFilter::with_capacity(1000);
    for i in 0..1000u32 {
        f.insert(&i).unwrap();
    }
    f.clear();
    assert!(f.is_empty());
    assert_eq!(f.load_factor(), 0.0);
    assert!((0..1000u32).all(|i| !f.contains(&i)));
    for i in 0..1000u32 {
        f.insert(&i).unwrap();
    }
    assert_eq!(f.len(), 1000);
}

#[test]
fn with_capacity_zero_gives_a_small_working_filter() {
    let f = CuckooFilter::with_capacity(0);
    assert!(f.capacity() >= 1);
    f.insert("one").unwrap();
    assert!(f.contains("one"));
}

#[test]
#[should_panic(expected = "exceeds the largest supported table")]
fn with_capacity_panics_like_vec_on_overflow() {
    let _ = CuckooFilter::with_capacity(usize::MAX);
}

/// 3,000,000 items at 16-bit fingerprints in at most 16 / 0.90 bits per item, everything counted
/// (table, stripes, the struct).
#[test]
fn sixteen_bit_filter_for_3m_items_stays_under_16_over_0_9_bits_per_item() {
    let f = CuckooFilter::builder()
        .capacity(3_000_000)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    let bits_per_item = f.memory_usage() as f64 * 8.0 / 3_000_000.0;
    println!(
        "{bits_per_item:.3} bits per item ({} bytes)",
        f.memory_usage()
    );
    assert!(bits_per_item <= 16.0 / 0.90, "{bits_per_item}");
    // And it does hold them all.
    for i in 0..3_000_000u64 {
        f.insert(&i).unwrap();
    }
    assert_eq!(f.len(), 3_000_000);
}

#[test]
fn no_power_of_two_rounding() {
    // 4-slot buckets for 1.5M items: a power-of-two table would have 2^19 or 2^20 buckets.
    let f = CuckooFilter::builder()
        .capacity(1_500_000)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    let buckets = f.slots() / 4;
    assert!(!buckets.is_power_of_two());
    assert!((f.slots() as f64) < 1_500_000.0 / 0.90);
}

#[test]
fn load_factor_and_rate_follow_len() {
    let f = CuckooFilter::builder()
        .capacity(10_000)
        .fingerprint_bits(8)
        .build()
        .unwrap();
    assert_eq!(f.false_positive_rate(), 0.0);
    for i in 0..5_000u32 {
        f.insert(&i).unwrap();
    }
    let half = f.false_positive_rate();
    assert!((f.load_factor() - 5_000.0 / f.slots() as f64).abs() < 1e-12);
    for i in 5_000..10_000u32 {
        f.insert(&i).unwrap();
    }
    assert!(f.false_positive_rate() > half * 1.9 && f.false_positive_rate() < half * 2.1);
}

#[test]
fn debug_shows_shape_and_fill() {
    let f = CuckooFilter::builder()
        .capacity(1000)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    f.insert("a").unwrap();
    let s = format!("{f:?}");
    for field in [
        "len: 1",
        "fingerprint_bits: 16",
        "slots_per_bucket: 4",
        "buckets",
        "memory_usage",
    ] {
        assert!(s.contains(field), "{field} missing from {s}");
    }
}

#[test]
fn full_is_reported_and_removing_makes_room() {
    let f = CuckooFilter::builder()
        .capacity(100)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    let mut stored = Vec::new();
    let mut i = 0u64;
    loop {
        match f.insert(&i) {
            Ok(()) => stored.push(i),
            Err(e) => {
                assert_eq!(e, InsertError::Full);
                break;
            }
        }
        i += 1;
    }
    assert!(f.remove(&stored[0]));
    assert!(f.insert(&stored[0]).is_ok());
}

/// An error chain prints each cause once: `Display` leaves the cause to `source()`.
#[test]
fn error_chains_do_not_repeat_their_cause() {
    use std::error::Error;

    let full = CuckooFilter::with_capacity(10);
    let keys: Vec<u64> = (0..1_000).collect();
    let error = full.insert_many(&keys).unwrap_err();
    let cause = error.source().expect("the insert error").to_string();
    assert!(!error.to_string().contains(&cause), "{error}");

    let broken = std::io::Error::other("disk on fire");
    let error = atomic_cuckoo::PersistError::Io(broken);
    let cause = error.source().expect("the I/O error").to_string();
    assert!(!error.to_string().contains(&cause), "{error}");

    let one = atomic_cuckoo::PersistError::TrailingBytes { extra: 1 };
    assert_eq!(one.to_string(), "1 unexpected byte after the snapshot");
}

#[test]
fn the_target_rate_is_kept_and_survives_a_snapshot() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .false_positive_rate(0.002)
        .build()
        .unwrap();
    assert_eq!(filter.target_false_positive_rate(), Some(0.002));
    let restored = CuckooFilter::from_bytes(&filter.to_bytes()).unwrap();
    assert_eq!(restored.target_false_positive_rate(), Some(0.002));
    let grown = CuckooFilter::builder()
        .capacity(100)
        .false_positive_rate(0.05)
        .growable(true)
        .build()
        .unwrap();
    grown.insert_many(0..1_000u32).unwrap();
    assert!(grown.doublings() > 0);
    assert_eq!(grown.target_false_positive_rate(), Some(0.05));
    let restored = CuckooFilter::from_bytes(&grown.to_bytes()).unwrap();
    assert_eq!(restored.target_false_positive_rate(), Some(0.05));
    let by_width = CuckooFilter::builder().fingerprint_bits(9).build().unwrap();
    assert_eq!(by_width.target_false_positive_rate(), None);
}
