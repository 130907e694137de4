//! The `serde` feature: a filter serializes through the same validated snapshot format.
//! Run with `cargo test --features serde`.
#![cfg(feature = "serde")]

use atomic_cuckoo::CuckooFilter;

#[test]
fn serde_round_trip_through_json() {
    let filter = CuckooFilter::builder()
        .capacity(500)
        .expansion(2)
        .build()
        .unwrap();
    for i in 0..2_000u32 {
        filter.insert(&i).unwrap();
    }
    let json = serde_json::to_string(&filter).unwrap();
    let back: CuckooFilter = serde_json::from_str(&json).unwrap();
    assert_eq!(back.len(), 2_000);
    assert_eq!(back.levels(), filter.levels());
    assert!((0..2_000u32).all(|i| back.contains(&i)));
    assert_eq!(back.to_bytes(), filter.to_bytes());
}

#[test]
fn serde_rejects_corrupt_snapshots() {
    let filter = CuckooFilter::with_capacity(100);
    filter.insert("x").unwrap();
    let mut bytes = filter.to_bytes();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let json = serde_json::to_string(&bytes).unwrap();
    let err = serde_json::from_str::<CuckooFilter>(&json).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
    assert!(serde_json::from_str::<CuckooFilter>("[1,2,3]").is_err());
    assert!(serde_json::from_str::<CuckooFilter>("\"text\"").is_err());
}
