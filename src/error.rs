//! Error types.

use std::fmt;
use std::io;

/// Why an insert failed. The filter is unchanged when an insert fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InsertError {
    /// No free lane could be reached for the item's fingerprint within the search limits. Every
    /// item stored before is still stored; removing items makes room again.
    ///
    /// Near capacity and under heavy write contention this can also mean that other writers
    /// kept changing the cuckoo paths this insert found (it retries 16 times), even though a
    /// slot might have been found later; retrying the insert is then worth it.
    ///
    /// **4-bit fingerprints in four-lane buckets** ([`Layout::Packed`](crate::Layout::Packed),
    /// [`Layout::Compact`](crate::Layout::Compact)) can fail before
    /// [`capacity`](crate::CuckooFilter::capacity), with this error or
    /// [`ItemBucketsFull`](InsertError::ItemBucketsFull): a fingerprint has only 15 values, so
    /// an item can move to only 15 other buckets, and distinct items with the same fingerprint
    /// and buckets cannot be told apart; now and then a few buckets fill with items that have
    /// nowhere else to go, at loads as low as 57 %. It happens more often in larger tables
    /// (measured: in 5 of 20,000 item sets of 20,000 items, 4 of 100 of a million), and a
    /// lower load hardly prevents it: for these filters `capacity()` is the typical number of
    /// items, not a guaranteed one. **Two or three lanes a bucket**
    /// ([`Layout::OneWord`](crate::Layout::OneWord) with 17 to 32 bits) in a table of a
    /// hundred items or fewer: a few buckets can draw more items than their lanes by chance,
    /// whatever the load (measured with 1 to 100 items: 13 to 19 in 200,000 item sets at 22, 27
    /// and 32 bits, as early as 55 % of the capacity; 1 in 100,000 at 21 bits; none in 20,000
    /// sets of 100 to 2,000 items at 27 bits). Every other width and layout, 4-bit
    /// [`Layout::OneWord`](crate::Layout::OneWord) (16 lanes a bucket) included, took its
    /// capacity in every item set measured.
    Full,
    /// No room could be made in the item's buckets while the filter holds less than 90 % of
    /// the items it is sized for (a growable filter: of its doubling load), because both buckets hold only repeated
    /// items, copies of this item among them: it was inserted many times (a hot key), alone
    /// or with a few others that share its buckets. Doubling would not help (it separates
    /// entries of different items by their next bit, never copies of one), so a growable
    /// filter does not double for it: a hot key cannot take all memory. A growable filter
    /// below 90 % of its doubling load also refuses an item whose two buckets are full of the
    /// copies of one or two other items (it shares both of a hot key's buckets, one time in 32
    /// of the items that share one of them): a doubling would part them only by chance. And,
    /// from 4,096 buckets on, it refuses so any item for which no room can be made while it is
    /// below half its doubling load: only buckets jammed by repeated items fail a search there,
    /// and doubling for them would cost memory every time. (A smaller table doubles instead:
    /// a few distinct items can jam its buckets, and the next bit parts them.) (An item whose
    /// fingerprint and buckets match a hot key's counts as a copy of it;
    /// [`contains`](crate::CuckooFilter::contains) already answers `true` for it.) Every item
    /// stored before is still stored. Use
    /// [`insert_unique`](crate::CuckooFilter::insert_unique) for keys that repeat. With 4-bit
    /// fingerprints in four-lane buckets, distinct items that share a fingerprint and buckets
    /// are such copies, and this can come before capacity (see [`Full`](InsertError::Full)).
    ItemBucketsFull,
    /// A growable filter needed to double its table, and the memory for the new buckets
    /// could not be allocated (or the table would exceed the largest one). Every item stored
    /// before is still stored, and a later insert doubles once the memory is there.
    GrowthFailed {
        /// Bytes that were asked for (`usize::MAX` when the size itself overflows).
        bytes: usize,
    },
}

impl fmt::Display for InsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            InsertError::Full => f.write_str("cuckoo filter is full: no free slot reachable"),
            InsertError::ItemBucketsFull => f.write_str(
                "the item's buckets are full of repeated items (copies of it or of keys that \
                 share its buckets); the filter itself has room",
            ),
            InsertError::GrowthFailed { bytes: usize::MAX } => f.write_str(
                "cuckoo filter could not grow: its doubled table would exceed the largest table",
            ),
            InsertError::GrowthFailed { bytes } => {
                write!(f, "cuckoo filter could not grow: {bytes} bytes unavailable")
            }
        }
    }
}

impl std::error::Error for InsertError {}

/// Why a [`Builder`](crate::Builder) could not build a filter.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum BuildError {
    /// A capacity of zero items was asked for.
    ZeroCapacity,
    /// The table for this many items would need more than 2^32 buckets, or its size does not fit
    /// in `usize`.
    CapacityTooLarge {
        /// The requested capacity in items.
        items: usize,
    },
    /// The memory for the table could not be allocated.
    AllocationFailed {
        /// Bytes that were asked for.
        bytes: usize,
    },
    /// The false-positive rate is not a number strictly between 0 and 1.
    InvalidFalsePositiveRate {
        /// The rate that was given.
        rate: f64,
    },
    /// The false-positive rate is below what the widest (32-bit) fingerprints reach.
    UnreachableFalsePositiveRate {
        /// The rate that was given.
        rate: f64,
    },
    /// The fingerprint width is outside `4..=32` bits.
    InvalidFingerprintBits {
        /// The width that was given.
        bits: u32,
    },
    /// A setting that a growable filter ([`Builder::growable`](crate::Builder::growable))
    /// does not take: it chooses its own lane width from the target rate (so no
    /// [`fingerprint_bits`](crate::Builder::fingerprint_bits)), and its lanes are always
    /// packed (so no [`layout`](crate::Builder::layout) other than
    /// [`Packed`](crate::Layout::Packed)).
    NotForGrowable {
        /// The builder method whose setting was refused.
        setting: &'static str,
    },
    /// A setting that only a growable filter takes
    /// ([`expected_items`](crate::Builder::expected_items)), given without
    /// [`growable(true)`](crate::Builder::growable).
    GrowableOnly {
        /// The builder method whose setting was refused.
        setting: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BuildError::ZeroCapacity => f.write_str("capacity must be at least one item"),
            BuildError::CapacityTooLarge { items } => {
                write!(
                    f,
                    "a filter for {items} items exceeds the largest supported table"
                )
            }
            BuildError::AllocationFailed { bytes } => {
                write!(f, "could not allocate {bytes} bytes for the filter")
            }
            BuildError::InvalidFalsePositiveRate { rate } => {
                write!(
                    f,
                    "false-positive rate {} is not strictly between 0 and 1",
                    ShortRate(rate)
                )
            }
            BuildError::UnreachableFalsePositiveRate { rate } => write!(
                f,
                "false-positive rate {} is below what 32-bit fingerprints can reach",
                ShortRate(rate)
            ),
            BuildError::InvalidFingerprintBits { bits } => {
                write!(f, "fingerprint width {bits} is outside 4..=32 bits")
            }
            BuildError::NotForGrowable { setting } => {
                write!(f, "a growable filter does not take the setting `{setting}`")
            }
            BuildError::GrowableOnly { setting } => {
                write!(
                    f,
                    "the setting `{setting}` is for a growable filter: add `growable(true)`"
                )
            }
        }
    }
}

impl std::error::Error for BuildError {}

/// A rate as a message shows it: as written from 0.0001 up to a million (`0.01`, `1.5`), in
/// scientific notation further out (`1e-300`, `1e300`), where `{}` would print hundreds of
/// digits.
pub(crate) struct ShortRate(pub(crate) f64);

impl fmt::Display for ShortRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let magnitude = self.0.abs();
        if magnitude == 0.0 || !magnitude.is_finite() || (1e-4..1e6).contains(&magnitude) {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:e}", self.0)
        }
    }
}

/// Why [`CuckooFilter::insert_many`](crate::CuckooFilter::insert_many) stopped: the item at
/// `index` could not be inserted. The items before it are in the filter; it and the ones after
/// it are not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InsertManyError {
    /// Index of the first item that could not be inserted.
    pub index: usize,
    /// Why it could not be inserted.
    pub error: InsertError,
}

impl fmt::Display for InsertManyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The cause is `source()`: error reporters print the chain, so it is not repeated here.
        write!(f, "item {} of the batch could not be inserted", self.index)
    }
}

impl std::error::Error for InsertManyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Why a snapshot could not be restored.
#[derive(Debug)]
#[non_exhaustive]
pub enum PersistError {
    /// Reading failed (other than by running out of input).
    Io(io::Error),
    /// The input ended before the snapshot did.
    Truncated,
    /// `from_bytes` was given more bytes than the snapshot they start with.
    TrailingBytes {
        /// Bytes after the end of the snapshot.
        extra: usize,
    },
    /// The input does not start with a snapshot's magic bytes: it is not a snapshot.
    BadMagic,
    /// The snapshot is in a format that earlier versions wrote for a kind of filter this
    /// version no longer has: a filter that grew by adding levels (`Builder::expansion`), whose
    /// levels each had a width and bucket mapping of their own that one table cannot hold.
    /// Rebuild the filter from its items.
    RetiredFormat {
        /// What wrote the snapshot.
        written_by: &'static str,
    },
    /// The snapshot has a format version this build does not read.
    UnsupportedVersion {
        /// The version in the snapshot.
        version: u16,
    },
    /// A header field is out of range or inconsistent with the others.
    InvalidParameter {
        /// Which field.
        field: &'static str,
    },
    /// The number of stored fingerprints disagrees with a count in a header.
    CountMismatch {
        /// What was checked: a level's count or the total.
        what: &'static str,
        /// The count in the header.
        claimed: u64,
        /// Fingerprints actually in the payload.
        found: u64,
    },
    /// The checksum does not match the content: the snapshot is corrupt.
    ChecksumMismatch {
        /// The checksum stored in the snapshot.
        stored: u64,
        /// The checksum of the content read.
        computed: u64,
    },
    /// The snapshot was made with a different hasher (or different seeds): every lookup would
    /// miss, so it is refused.
    HasherMismatch,
    /// Memory for a table could not be allocated.
    AllocationFailed {
        /// Bytes that were asked for.
        bytes: usize,
    },
}

impl fmt::Display for PersistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The I/O error is `source()`; reporters print the chain, so it is not repeated.
            PersistError::Io(_) => f.write_str("reading the snapshot failed"),
            PersistError::Truncated => f.write_str("the snapshot is truncated"),
            PersistError::TrailingBytes { extra: 1 } => {
                f.write_str("1 unexpected byte after the snapshot")
            }
            PersistError::TrailingBytes { extra } => {
                write!(f, "{extra} unexpected bytes after the snapshot")
            }
            PersistError::BadMagic => f.write_str(
                "not an atomic-cuckoo snapshot: it does not start with a snapshot's magic bytes",
            ),
            PersistError::RetiredFormat { written_by } => write!(
                f,
                "the snapshot was written by {written_by}, a format this version cannot load: \
                 rebuild the filter from its items"
            ),
            PersistError::UnsupportedVersion { version } => {
                write!(f, "unsupported snapshot format version {version}")
            }
            PersistError::InvalidParameter { field } => {
                write!(f, "corrupt snapshot: invalid {field}")
            }
            PersistError::CountMismatch {
                what,
                claimed,
                found,
            } => write!(
                f,
                "snapshot {what} claims {claimed} items but holds {found} fingerprints"
            ),
            PersistError::ChecksumMismatch { stored, computed } => write!(
                f,
                "corrupt snapshot: checksum mismatch (stored {stored:#018x}, computed \
                 {computed:#018x})"
            ),
            PersistError::HasherMismatch => {
                f.write_str("the snapshot was made with a different hasher or seed")
            }
            PersistError::AllocationFailed { bytes } => {
                write!(
                    f,
                    "could not allocate {bytes} bytes for the restored filter"
                )
            }
        }
    }
}

impl std::error::Error for PersistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PersistError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for PersistError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            PersistError::Truncated
        } else {
            PersistError::Io(e)
        }
    }
}
