//! The `serde` feature: a filter serializes as its snapshot bytes and deserializes through the
//! same validation as `from_bytes`, from a format with a bytes type and from one without (such
//! as JSON, which gives a sequence of numbers). Run with `cargo test --features serde`.
//!
//! The format is serde's own: a serializer that keeps what `serialize_bytes` receives, and the
//! deserializers of `serde::de::value`, so the tests need no format crate.
#![cfg(feature = "serde")]

use atomic_cuckoo::CuckooFilter;
use serde::de::value::{BytesDeserializer, Error, SeqDeserializer, StrDeserializer};
use serde::ser::{Error as _, Impossible, Serialize, Serializer};
use serde::Deserialize;

/// What a value serializes to: the bytes it gives `serialize_bytes`, or an error for anything
/// else.
pub fn serialize_to_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    value.serialize(BytesOnly)
}

/// Deserializes a filter from `bytes` handed over as a sequence of numbers, as a format
/// without a bytes type (JSON) does.
pub fn deserialize_from_numbers(bytes: &[u8]) -> Result<CuckooFilter, Error> {
    CuckooFilter::deserialize(SeqDeserializer::<_, Error>::new(bytes.iter().copied()))
}

fn deserialize_from_bytes(bytes: &[u8]) -> Result<CuckooFilter, Error> {
    CuckooFilter::deserialize(BytesDeserializer::<Error>::new(bytes))
}

/// A serializer that accepts one byte string and nothing else.
struct BytesOnly;

/// Methods for everything but bytes, all returning `$ok`: each refuses its kind of value.
macro_rules! refuse {
    ($ok:ty: $($method:ident($($arg:ty),*)),* $(,)?) => {$(
        fn $method(self, $(_: $arg),*) -> Result<$ok, Error> {
            Err(Error::custom(concat!("expected bytes, got ", stringify!($method))))
        }
    )*};
}

impl Serializer for BytesOnly {
    type Ok = Vec<u8>;
    type Error = Error;
    type SerializeSeq = Impossible<Vec<u8>, Error>;
    type SerializeTuple = Impossible<Vec<u8>, Error>;
    type SerializeTupleStruct = Impossible<Vec<u8>, Error>;
    type SerializeTupleVariant = Impossible<Vec<u8>, Error>;
    type SerializeMap = Impossible<Vec<u8>, Error>;
    type SerializeStruct = Impossible<Vec<u8>, Error>;
    type SerializeStructVariant = Impossible<Vec<u8>, Error>;

    fn serialize_bytes(self, bytes: &[u8]) -> Result<Vec<u8>, Error> {
        Ok(bytes.to_vec())
    }

    refuse! { Vec<u8>:
        serialize_bool(bool), serialize_char(char), serialize_str(&str),
        serialize_i8(i8), serialize_i16(i16), serialize_i32(i32), serialize_i64(i64),
        serialize_u8(u8), serialize_u16(u16), serialize_u32(u32), serialize_u64(u64),
        serialize_f32(f32), serialize_f64(f64), serialize_none(), serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str),
    }
    refuse! { Impossible<Vec<u8>, Error>:
        serialize_seq(Option<usize>), serialize_tuple(usize),
        serialize_tuple_struct(&'static str, usize),
        serialize_tuple_variant(&'static str, u32, &'static str, usize),
        serialize_map(Option<usize>), serialize_struct(&'static str, usize),
        serialize_struct_variant(&'static str, u32, &'static str, usize),
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<Vec<u8>, Error> {
        Err(Error::custom("expected bytes, got serialize_some"))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<Vec<u8>, Error> {
        Err(Error::custom(
            "expected bytes, got serialize_newtype_struct",
        ))
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Vec<u8>, Error> {
        Err(Error::custom(
            "expected bytes, got serialize_newtype_variant",
        ))
    }
}

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
