//! The `serde` feature: a filter serializes as its snapshot bytes and deserializes through the
//! same validation as `from_bytes`, from a format with a bytes type and from one without (such
//! as JSON, which gives a sequence of numbers). Run with `cargo test --features serde`.
//!
//! The format is serde's own (`common/serde_bytes.rs`), so the tests need no format crate.
#![cfg(feature = "serde")]

use atomic_cuckoo::CuckooFilter;
use serde::de::value::{BytesDeserializer, Error, SeqDeserializer, StrDeserializer};
use serde::Deserialize;

pub use crate::serde_bytes::{
    deserialize_from_bytes, deserialize_from_numbers, serialize_to_bytes,
};

#[test]
fn serde_round_trips_as_bytes_and_as_a_sequence_of_numbers() {
    let filter = CuckooFilter::builder()
        .capacity(500)
        .growable(true)
        .build()
        .unwrap();
    for i in 0..2_000u32 {
        filter.insert(&i).unwrap();
    }
    let bytes = serialize_to_bytes(&filter).unwrap();
    assert_eq!(bytes, filter.to_bytes(), "serializes as its snapshot");
    for back in [
        deserialize_from_bytes(&bytes).unwrap(),
        deserialize_from_numbers(&bytes).unwrap(),
    ] {
        assert_eq!(back.len(), 2_000);
        assert_eq!(back.doublings(), filter.doublings());
        assert!((0..2_000u32).all(|i| back.contains(&i)));
        assert_eq!(back.to_bytes(), filter.to_bytes());
    }
}

#[test]
fn serde_rejects_corrupt_snapshots() {
    let filter = CuckooFilter::with_capacity(100);
    filter.insert("x").unwrap();
    let mut bytes = filter.to_bytes();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    for err in [
        deserialize_from_bytes(&bytes).unwrap_err(),
        deserialize_from_numbers(&bytes).unwrap_err(),
    ] {
        assert!(err.to_string().contains("checksum"), "{err}");
    }
    assert!(deserialize_from_numbers(&[1, 2, 3]).is_err());
    let text = StrDeserializer::<Error>::new("text");
    assert!(<CuckooFilter>::deserialize(text).is_err());
}

#[test]
fn a_growable_filter_serializes_as_its_snapshot_and_comes_back_validated() {
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(100)
        .build()
        .unwrap();
    for i in 0..1_000u32 {
        filter.insert(&i).unwrap();
    }
    let bytes = serialize_to_bytes(&filter).unwrap();
    assert_eq!(bytes, filter.to_bytes(), "serializes as its snapshot");
    let from_bytes = <CuckooFilter>::deserialize(BytesDeserializer::<Error>::new(&bytes));
    let from_numbers =
        <CuckooFilter>::deserialize(SeqDeserializer::<_, Error>::new(bytes.iter().copied()));
    for back in [from_bytes.unwrap(), from_numbers.unwrap()] {
        assert!(back.is_growable());
        assert!((0..1_000u32).all(|i| back.contains(&i)));
        assert_eq!(back.to_bytes(), bytes);
    }
    // A corrupt one is refused.
    let mut corrupt = bytes.clone();
    *corrupt.last_mut().unwrap() ^= 1;
    let err = <CuckooFilter>::deserialize(BytesDeserializer::<Error>::new(&corrupt)).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}

#[test]
fn a_set_serializes_as_its_filters_snapshot_and_back() {
    use atomic_cuckoo::CuckooSet;

    let set: CuckooSet<u64> = (0..1_000u64).collect();
    let bytes = serialize_to_bytes(&set).unwrap();
    assert_eq!(bytes, set.as_filter().to_bytes());
    let back = CuckooSet::<u64>::deserialize(BytesDeserializer::<Error>::new(&bytes)).unwrap();
    assert!((0..1_000u64).all(|i| back.contains(&i)));
    let mut damaged = bytes.clone();
    damaged[40] ^= 1;
    assert!(CuckooSet::<u64>::deserialize(BytesDeserializer::<Error>::new(&damaged)).is_err());
}

/// A filter serialized by the destination of a save of the same filter (on the saving thread)
/// gives the serializer's error, carrying the save's `Deadlock` message: not a panic, and not
/// the bytes of an empty snapshot. The outer save is whole.
#[test]
fn serializing_a_filter_inside_its_own_save_is_an_error() {
    use crate::watchdog::{inside_own_save, Inside};
    use std::sync::Arc;

    fn describe(serialized: Result<Vec<u8>, Error>) -> String {
        match serialized {
            Ok(bytes) => format!("Ok({} bytes)", bytes.len()),
            Err(e) => format!("Err({e})"),
        }
    }
    fn assert_refused(what: &str, inside: &Inside) {
        assert!(
            matches!(inside, Inside::Returned(r)
                if r.starts_with("Err(") && r.contains("already being saved")),
            "{what} serialized inside its own save: {inside:?}"
        );
    }
    let cuckoo = Arc::new(CuckooFilter::with_capacity(100));
    cuckoo.insert(&1u8).unwrap();
    let before = cuckoo.to_bytes();
    let (inside, saved) = inside_own_save(
        &cuckoo,
        |f, w| f.write_to(w),
        |f: &CuckooFilter| describe(serialize_to_bytes(f)),
    )
    .expect("DEADLOCK: a CuckooFilter serialized inside its own save");
    assert_refused("a CuckooFilter", &inside);
    assert!(saved.unwrap() == before);

    let expanding = Arc::new(
        CuckooFilter::builder()
            .growable(true)
            .capacity(100)
            .build()
            .unwrap(),
    );
    expanding.insert(&1u8).unwrap();
    let before = expanding.to_bytes();
    let (inside, saved) = inside_own_save(
        &expanding,
        |f, w| f.write_to(w),
        |f: &CuckooFilter| describe(serialize_to_bytes(f)),
    )
    .expect("DEADLOCK: a growable CuckooFilter serialized inside its own save");
    assert_refused("a growable CuckooFilter", &inside);
    assert!(saved.unwrap() == before);
}
