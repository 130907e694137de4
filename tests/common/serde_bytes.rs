//! A filter's serde form without a format crate: a serializer that keeps what
//! `serialize_bytes` receives (and refuses everything else), and the deserializers of
//! `serde::de::value`, from bytes and from a sequence of numbers (as JSON gives them).
#![cfg(feature = "serde")]
#![allow(dead_code)]

use atomic_cuckoo::CuckooFilter;
use serde::de::value::{BytesDeserializer, Error, SeqDeserializer};
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

/// Deserializes a filter from `bytes` handed over as a byte string.
pub fn deserialize_from_bytes(bytes: &[u8]) -> Result<CuckooFilter, Error> {
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
