//! Saving and restoring a filter: `CuckooFilter`'s save and load methods, which tell the two
//! formats apart by their magic, and the fixed table's format (a growable table's is
//! `crate::growth`'s); both are words read and written by `crate::snapshot_words`.
//!
//! The layouts are documented byte by byte in `FORMAT.md`. Restoring checks every field before
//! using it, never makes room for more than twice what the input provides (plus 1 MiB), and
//! rejects a snapshot made with another hasher (or other seeds), which would otherwise restore
//! into a filter full of false negatives.

pub(crate) mod format;
#[cfg(feature = "serde")]
pub(crate) mod serde_impl;

use std::hash::BuildHasher;
use std::io::{self, Read, Write};

use crate::filter::{Body, CuckooFilter};
use crate::fixed::{Fixed, TablePlan};
use crate::freeze::Nested;
use crate::growth::{self, Doubling};
use crate::hasher::DefaultHashBuilder;
use crate::snapshot_words::{Allocation, Checksum, WordReader, WordWriter, FIRST_WORDS};
use crate::sync::{AtomicU64, Ordering};
use crate::table::{Limits, Table, TableShape};
use format::{Header, LevelHeader, HASHER_PROBE, HEADER_WORDS, LEVEL_HEADER_WORDS};

pub(crate) use crate::error::PersistError;

// The dispatcher reads a fixed header's words before it knows the format.
const _: () = assert!(HEADER_WORDS == FIRST_WORDS);

/// Which format a snapshot whose first word is `first` is in.
enum Magic {
    Fixed,
    Growable,
}

fn magic_of(first: u64) -> Result<Magic, PersistError> {
    match first.to_le_bytes() {
        format::MAGIC => Ok(Magic::Fixed),
        growth::MAGIC => Ok(Magic::Growable),
        _ => Err(PersistError::BadMagic),
    }
}

/// The error for `bytes` longer than the snapshot its headers describe (`expected` bytes):
/// bytes after the snapshot when the snapshot's own checksum (its last 8 bytes) is right,
/// else a corrupt header that gave the wrong length. Only called on that error path, so the
/// extra pass over the bytes costs nothing on a good restore.
pub(crate) fn longer_than_expected(bytes: &[u8], expected: usize) -> PersistError {
    debug_assert!(expected >= 8 && expected.is_multiple_of(8) && bytes.len() > expected);
    let (content, trailer) = bytes[..expected].split_at(expected - 8);
    let mut checksum = Checksum::new();
    checksum.add_bytes(content);
    let computed = checksum.value();
    let stored = u64::from_le_bytes(trailer.try_into().expect("8 bytes"));
    if stored == computed {
        PersistError::TrailingBytes {
            extra: bytes.len() - expected,
        }
    } else {
        PersistError::ChecksumMismatch { stored, computed }
    }
}

/// The hasher check value: how `hasher` hashes a fixed probe.
pub(crate) fn hasher_check<S: BuildHasher>(hasher: &S) -> u64 {
    hasher.hash_one(HASHER_PROBE)
}

impl<S: BuildHasher> CuckooFilter<S> {
    /// Writes a snapshot of the filter (the format is described byte by byte in
    /// [`FORMAT.md`](https://github.com/atomic-cuckoo/atomic-cuckoo/blob/main/FORMAT.md)).
    ///
    /// The snapshot is consistent: it is the filter's content at one moment. To get that, the
    /// save freezes the filter while it copies and writes: inserts and removes from other
    /// threads wait, asleep, until the save is done and then apply to the live filter (they are
    /// not in the snapshot), and the filter does not grow meanwhile. Lookups and counts are not
    /// held up and stay exact: the save holds no lock stripe while it works (it passes through
    /// each one once, to wait for writes in flight).
    ///
    /// Writers wait as long as `writer` takes, so write to a buffer or a buffered writer if the
    /// destination is slow. `writer` must not insert into or remove from this filter: on the
    /// saving thread, that write would wait for the save forever. A save of this same filter
    /// from inside `writer` (on the saving thread) is refused with an error of kind
    /// [`io::ErrorKind::Deadlock`] instead of waiting forever, and its
    /// [`to_bytes`](CuckooFilter::to_bytes), `clone` and [`clear`](CuckooFilter::clear) panic;
    /// other filters, and this one on other threads, are not affected.
    ///
    /// # Errors
    ///
    /// Any error `writer` returns (the snapshot is then incomplete), and
    /// [`io::ErrorKind::Deadlock`] for a save of this filter from inside its own save.
    ///
    /// ```
    /// use atomic_cuckoo::CuckooFilter;
    ///
    /// let filter = CuckooFilter::with_capacity(1_000);
    /// filter.insert("saved").unwrap();
    /// let mut file = Vec::new();
    /// filter.write_to(&mut file)?;
    /// let restored = CuckooFilter::read_from(&file[..]).unwrap();
    /// assert!(restored.contains("saved"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_to<W: Write + ?Sized>(&self, writer: &mut W) -> io::Result<()> {
        let check = hasher_check(self.hasher());
        let fixed = match self.body() {
            Body::Fixed(fixed) => fixed,
            Body::Growable(table) => return table.write_to(writer, check),
        };
        let frozen = fixed.frozen()?;
        let (table, held) = &frozen.parts()[0];
        let header = Header {
            plan: *fixed.plan(),
            items: table.len() as u64,
            hasher_check: check,
        };
        let mut out = WordWriter::new(writer);
        out.words(header.encode())?;
        let shape = table.shape();
        let level = LevelHeader {
            bits: shape.bits,
            buckets: shape.buckets,
            items: table.len() as u64,
            words: table.word_count(),
        };
        out.words(level.encode())?;
        out.words(table.frozen_words(held))?;
        out.finish()
    }

    /// The snapshot as bytes (see [`write_to`](CuckooFilter::write_to)).
    ///
    /// # Panics
    ///
    /// If called by the writer of a save of this same filter, on the saving thread (it has no
    /// error to return; see [`write_to`](CuckooFilter::write_to), which returns one).
    ///
    /// ```
    /// let filter = atomic_cuckoo::CuckooFilter::with_capacity(100);
    /// let bytes = filter.to_bytes();
    /// assert_eq!(&bytes[..8], b"ATCUCKOO");
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        // Writing to a Vec never fails: the one error is a save inside this filter's own.
        self.snapshot_bytes().unwrap_or_else(|_| Nested.panic())
    }

    /// The snapshot as bytes, or the `Deadlock` error of a save inside a save of the same
    /// filter (for `Serialize`, which has an error to return).
    pub(crate) fn snapshot_bytes(&self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(self.snapshot_size());
        self.write_to(&mut bytes)?;
        Ok(bytes)
    }

    /// Bytes a snapshot of the filter takes now (it changes when the filter grows).
    pub fn snapshot_size(&self) -> usize {
        match self.body() {
            Body::Fixed(fixed) => {
                8 * (HEADER_WORDS + LEVEL_HEADER_WORDS + fixed.table().word_count() + 1)
            }
            Body::Growable(table) => table.snapshot_size(),
        }
    }

    /// Restores a snapshot written by [`write_to`](CuckooFilter::write_to) with a filter that
    /// used `hasher` (the same type and seeds: otherwise [`PersistError::HasherMismatch`]).
    ///
    /// Reads exactly the snapshot's bytes, so a snapshot can be followed by other data in the
    /// same stream: bytes after it are not an error (unlike
    /// [`from_bytes_with_hasher`](CuckooFilter::from_bytes_with_hasher)) and stay in `reader`. Memory grows with the data actually read, so a header that claims a huge
    /// table costs nothing unless the data is there.
    ///
    /// # Errors
    ///
    /// A [`PersistError`] saying what is wrong: [`Io`](PersistError::Io) from `reader`,
    /// [`Truncated`](PersistError::Truncated),
    /// [`BadMagic`](PersistError::BadMagic) (no snapshot at all),
    /// [`RetiredFormat`](PersistError::RetiredFormat) (a format this version no longer loads),
    /// [`UnsupportedVersion`](PersistError::UnsupportedVersion), an invalid parameter or count,
    /// [`ChecksumMismatch`](PersistError::ChecksumMismatch),
    /// [`HasherMismatch`](PersistError::HasherMismatch) when `hasher` is not the one the
    /// snapshot was made with, or [`AllocationFailed`](PersistError::AllocationFailed).
    pub fn read_from_with_hasher<R: Read>(reader: R, hasher: S) -> Result<Self, PersistError> {
        Self::read_snapshot(WordReader::new(reader, Allocation::AsDataArrives), hasher)
    }

    fn read_snapshot<R: Read>(mut input: WordReader<R>, hasher: S) -> Result<Self, PersistError> {
        let first = input.array::<HEADER_WORDS>()?;
        let check = hasher_check(&hasher);
        if let Magic::Growable = magic_of(first[0])? {
            let table = Doubling::read(first, input, check, true)?;
            return Ok(CuckooFilter::from_parts(Body::Growable(table), hasher));
        }
        let header = Header::decode(&first)?;
        if header.hasher_check != check {
            return Err(PersistError::HasherMismatch);
        }
        let level = LevelHeader::decode(&input.array::<LEVEL_HEADER_WORDS>()?, header.plan.layout)?;
        let shape = planned_shape(&header.plan, &level)?;
        let table = read_table(&mut input, level, shape)?;
        if level.items != header.items {
            return Err(PersistError::CountMismatch {
                what: "header",
                claimed: header.items,
                found: level.items,
            });
        }
        input.check_trailer()?;
        let fixed = Fixed::new(table, header.plan, Limits::DEFAULT, true);
        Ok(CuckooFilter::from_parts(Body::Fixed(fixed), hasher))
    }

    /// Restores a snapshot from bytes that hold exactly one snapshot (see
    /// [`read_from_with_hasher`](CuckooFilter::read_from_with_hasher), which, unlike this,
    /// accepts bytes after the snapshot and leaves them unread). The length is checked against
    /// the headers before any table memory is allocated.
    ///
    /// # Errors
    ///
    /// As [`read_from_with_hasher`](CuckooFilter::read_from_with_hasher), and
    /// [`TrailingBytes`](PersistError::TrailingBytes) when `bytes` goes on after the snapshot
    /// (a header that gives a shorter length than the bytes hold fails the checksum instead:
    /// [`ChecksumMismatch`](PersistError::ChecksumMismatch)).
    pub fn from_bytes_with_hasher(bytes: &[u8], hasher: S) -> Result<Self, PersistError> {
        let expected = expected_len(bytes)?;
        match bytes.len().cmp(&expected) {
            std::cmp::Ordering::Less => Err(PersistError::Truncated),
            std::cmp::Ordering::Greater => Err(longer_than_expected(bytes, expected)),
            // Every level's words are known to be there: allocate each table once.
            std::cmp::Ordering::Equal => {
                Self::read_snapshot(WordReader::new(bytes, Allocation::Upfront), hasher)
            }
        }
    }
}

impl CuckooFilter {
    /// Restores a snapshot made with the default hasher (see
    /// [`read_from_with_hasher`](CuckooFilter::read_from_with_hasher)).
    ///
    /// Reads the snapshot's bytes and no more: bytes after it are not an error, and stay in
    /// `reader` (pass `&mut reader` to read on). [`from_bytes`](CuckooFilter::from_bytes), given
    /// exactly one snapshot, refuses them.
    ///
    /// # Errors
    ///
    /// As [`read_from_with_hasher`](CuckooFilter::read_from_with_hasher).
    ///
    /// ```
    /// use atomic_cuckoo::{CuckooFilter, PersistError};
    ///
    /// let filter = CuckooFilter::with_capacity(100);
    /// filter.insert(&7u8).unwrap();
    /// let bytes = filter.to_bytes();
    /// assert!(CuckooFilter::read_from(&bytes[..]).unwrap().contains(&7u8));
    /// assert!(matches!(
    ///     CuckooFilter::read_from(&bytes[..bytes.len() - 1]),
    ///     Err(PersistError::Truncated)
    /// ));
    ///
    /// // Two snapshots in one stream: each call reads one, and leaves the rest.
    /// let stream = [bytes.as_slice(), bytes.as_slice()].concat();
    /// let mut reader = &stream[..];
    /// CuckooFilter::read_from(&mut reader).unwrap();
    /// assert_eq!(reader.len(), bytes.len());
    /// CuckooFilter::read_from(&mut reader).unwrap();
    /// assert!(reader.is_empty());
    /// ```
    pub fn read_from<R: Read>(reader: R) -> Result<Self, PersistError> {
        Self::read_from_with_hasher(reader, DefaultHashBuilder)
    }

    /// Restores a snapshot made with the default hasher from exactly its bytes.
    ///
    /// `bytes` must hold one snapshot and nothing else: bytes after it are
    /// [`PersistError::TrailingBytes`]. [`read_from`](CuckooFilter::read_from) accepts them,
    /// and leaves them unread, for a snapshot followed by other data in a stream.
    ///
    /// # Errors
    ///
    /// As [`from_bytes_with_hasher`](CuckooFilter::from_bytes_with_hasher).
    ///
    /// ```
    /// use atomic_cuckoo::{CuckooFilter, PersistError};
    ///
    /// let filter = CuckooFilter::with_capacity(100);
    /// let mut bytes = filter.to_bytes();
    /// let restored = CuckooFilter::from_bytes(&bytes).unwrap();
    /// assert_eq!(restored.capacity(), filter.capacity());
    ///
    /// bytes.push(0);
    /// assert!(matches!(
    ///     CuckooFilter::from_bytes(&bytes),
    ///     Err(PersistError::TrailingBytes { extra: 1 })
    /// ));
    /// assert!(CuckooFilter::read_from(&bytes[..]).is_ok());
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, PersistError> {
        Self::from_bytes_with_hasher(bytes, DefaultHashBuilder)
    }
}

/// The shape of `plan`'s table, when the level header agrees with it: only that shape
/// interprets the fingerprints correctly.
fn planned_shape(plan: &TablePlan, level: &LevelHeader) -> Result<TableShape, PersistError> {
    plan.shape()
        .ok()
        .filter(|s| s.buckets == level.buckets && s.bits == level.bits)
        .ok_or(PersistError::InvalidParameter {
            field: "level shape (not the plan's)",
        })
}

/// The length of the snapshot that `bytes` starts with, from its headers alone (nothing is
/// allocated, nothing beyond the headers is read). The level header is checked against the
/// plan as `read_snapshot` checks it, so a corrupt bucket count or width is reported as such,
/// not as a length that the input then misses or exceeds.
fn expected_len(bytes: &[u8]) -> Result<usize, PersistError> {
    let word_at = |i: usize| -> Result<u64, PersistError> {
        let at = i.checked_mul(8).ok_or(PersistError::Truncated)?;
        let chunk = bytes.get(at..at + 8).ok_or(PersistError::Truncated)?;
        Ok(u64::from_le_bytes(chunk.try_into().expect("8 bytes")))
    };
    if let Magic::Growable = magic_of(word_at(0)?)? {
        return growth::snapshot_len(bytes);
    }
    let mut header = [0u64; HEADER_WORDS];
    for (i, w) in header.iter_mut().enumerate() {
        *w = word_at(i)?;
    }
    let header = Header::decode(&header)?;
    let mut level = [0u64; LEVEL_HEADER_WORDS];
    for (j, w) in level.iter_mut().enumerate() {
        *w = word_at(HEADER_WORDS + j)?;
    }
    let level = LevelHeader::decode(&level, header.plan.layout)?;
    planned_shape(&header.plan, &level)?;
    Ok(8 * (HEADER_WORDS + LEVEL_HEADER_WORDS + level.words + 1))
}

/// The occupied lanes of a restored level's words, after checking that every bucket holds a
/// code its layout can store and that the bits past the last bucket are zero.
fn occupied_lanes(shape: &TableShape, words: &[AtomicU64]) -> Result<u64, PersistError> {
    let layout = shape
        .bucket_layout()
        .ok_or(PersistError::InvalidParameter {
            field: "level fingerprint width",
        })?;
    // Relaxed: the table is not shared yet.
    let word = |i: usize| words.get(i).map_or(0, |w| w.load(Ordering::Relaxed));
    let mut occupied = 0u64;
    for bucket in 0..shape.buckets {
        let (first, shift) = layout.locate(bucket);
        let code = layout.code_at([word(first), word(first + 1), word(first + 2)], shift);
        if !layout.is_valid_code(code) {
            return Err(PersistError::InvalidParameter {
                field: "bucket (bits outside every lane)",
            });
        }
        occupied +=
            u64::from(layout.occupied(
                &layout.bucket_at([word(first), word(first + 1), word(first + 2)], shift),
            ));
    }
    // The bits past the last bucket, up to the end of the block.
    let end = shape.buckets as u64 * u64::from(layout.stride());
    let (last, shift) = ((end / 64) as usize, (end % 64) as u32);
    let partial = word(last).checked_shr(shift).unwrap_or(0);
    if partial != 0 || (last + 1..words.len()).any(|i| word(i) != 0) {
        return Err(PersistError::InvalidParameter {
            field: "bucket block (bits past the last bucket)",
        });
    }
    Ok(occupied)
}

/// Reads one level's bucket words from `input` into a table, checking every bucket and the item count.
fn read_table<R: Read>(
    input: &mut WordReader<R>,
    level: LevelHeader,
    shape: TableShape,
) -> Result<Table, PersistError> {
    debug_assert_eq!((shape.buckets, shape.bits), (level.buckets, level.bits));
    debug_assert_eq!(shape.words(), Some(level.words));
    let words = input.block(level.words, true)?;
    let occupied = occupied_lanes(&shape, &words)?;
    if occupied != level.items {
        return Err(PersistError::CountMismatch {
            what: "level",
            claimed: level.items,
            found: occupied,
        });
    }
    Ok(Table::from_words(
        shape,
        words,
        occupied as usize,
        Limits::DEFAULT,
    ))
}
