//! `serde` support (feature `serde`): a filter serializes as its snapshot bytes, and
//! deserializing goes through the same validation as [`CuckooFilter::from_bytes`].

use std::fmt;
use std::hash::BuildHasher;
use std::marker::PhantomData;

use serde::de::{self, SeqAccess, Visitor};
use serde::ser;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::PersistError;
use crate::filter::CuckooFilter;

/// A filter that is serialized as its snapshot bytes.
pub(crate) trait SnapshotBytes: Sized {
    /// What the deserializer expects, for its error messages.
    const EXPECTING: &'static str;
    /// The hasher a deserialized filter gets.
    type Hasher: Default;
    /// Restores a snapshot, validated, with `hasher`.
    fn from_snapshot(bytes: &[u8], hasher: Self::Hasher) -> Result<Self, PersistError>;
}

/// Deserializes a filter from its snapshot bytes, with its hasher's default.
pub(crate) fn deserialize_snapshot<'de, F: SnapshotBytes, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<F, D::Error> {
    deserializer.deserialize_bytes(SnapshotVisitor(PhantomData))
}

impl<S: BuildHasher + Default> SnapshotBytes for CuckooFilter<S> {
    const EXPECTING: &'static str = "the bytes of an atomic-cuckoo snapshot";
    type Hasher = S;

    fn from_snapshot(bytes: &[u8], hasher: S) -> Result<Self, PersistError> {
        CuckooFilter::from_bytes_with_hasher(bytes, hasher)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<S: BuildHasher> Serialize for CuckooFilter<S> {
    /// As the snapshot's bytes (see [`CuckooFilter::write_to`]); the serializer's error, with
    /// the message of `write_to`'s [`Deadlock`](std::io::ErrorKind::Deadlock), when called by
    /// the writer of a save of the same filter on the saving thread.
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        let bytes = self.snapshot_bytes().map_err(ser::Error::custom)?;
        serializer.serialize_bytes(&bytes)
    }
}

/// Deserializes with `S::default()` as the hasher; a snapshot made with another hasher (or
/// other seeds) is refused, as in [`CuckooFilter::from_bytes_with_hasher`].
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de, S: BuildHasher + Default> Deserialize<'de> for CuckooFilter<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_snapshot(deserializer)
    }
}

struct SnapshotVisitor<F>(PhantomData<F>);

impl<'de, F: SnapshotBytes> Visitor<'de> for SnapshotVisitor<F> {
    type Value = F;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(F::EXPECTING)
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Self::Value, E> {
        F::from_snapshot(bytes, F::Hasher::default()).map_err(E::custom)
    }

    fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Self::Value, E> {
        self.visit_bytes(&bytes)
    }

    /// Formats without a bytes type (JSON, for one) give a sequence of numbers. The buffer
    /// grows with the elements actually present, not with a size hint from the input.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut bytes = Vec::new();
        while let Some(b) = seq.next_element::<u8>()? {
            bytes.push(b);
        }
        self.visit_bytes(&bytes)
    }
}
