//! Saving and restoring a filter: a versioned, checksummed, validated byte format.
//!
//! The layout is documented byte by byte in `FORMAT.md`. Restoring checks every field before
//! using it, never makes room for more than twice what the input provides (plus 1 MiB), and
//! rejects a snapshot made with another hasher (or other seeds), which would otherwise restore
//! into a filter full of false negatives.

mod checksum;
pub(crate) mod format;
#[cfg(feature = "serde")]
pub(crate) mod serde_impl;

use std::fmt;
use std::hash::BuildHasher;
use std::io::{self, Read, Write};

use crate::filter::{Body, CuckooFilter};
use crate::fixed::{Fixed, TablePlan};
use crate::freeze::Nested;
use crate::growth::{self, Doubling};
use crate::hasher::DefaultHashBuilder;
use crate::sync::{AtomicU64, Ordering};
use crate::table::{BucketWords, Limits, Table, TableShape};
use checksum::Checksum;
pub(crate) use format::HEADER_WORDS;
use format::{Header, LevelHeader, HASHER_PROBE, LEVEL_HEADER_WORDS};

/// Bytes read or written per I/O call: small enough to stay in cache between the copy and the
/// checksum.
const IO_CHUNK_BYTES: usize = 64 << 10;
/// Words a table restored from a stream is first given room for (1 MiB); the room then
/// doubles as words arrive.
const GROW_STEP_WORDS: usize = (1 << 20) / 8;

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

/// First 8 bytes of every growable filter's snapshot (its format is in
/// `crate::growth::snapshot`); a fixed filter's start with `format::MAGIC`.
pub(crate) const EXPANDING_MAGIC: [u8; 8] = *b"ATCUXPND";

/// Which format a snapshot whose first word is `first` is in.
enum Magic {
    Fixed,
    Growable,
}

fn magic_of(first: u64) -> Result<Magic, PersistError> {
    match first.to_le_bytes() {
        format::MAGIC => Ok(Magic::Fixed),
        EXPANDING_MAGIC => Ok(Magic::Growable),
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
        let table = input.table(level, shape)?;
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

/// Writes words little-endian in chunks, checksumming them.
pub(crate) struct WordWriter<'w, W: Write + ?Sized> {
    out: &'w mut W,
    buffer: Vec<u8>,
    checksum: Checksum,
}

impl<'w, W: Write + ?Sized> WordWriter<'w, W> {
    pub(crate) fn new(out: &'w mut W) -> Self {
        WordWriter {
            out,
            buffer: Vec::with_capacity(IO_CHUNK_BYTES),
            checksum: Checksum::new(),
        }
    }

    pub(crate) fn words(&mut self, words: impl IntoIterator<Item = u64>) -> io::Result<()> {
        let mut words = words.into_iter();
        loop {
            let start = self.buffer.len();
            self.buffer.resize(IO_CHUNK_BYTES, 0);
            let mut filled = start;
            for (dst, w) in self.buffer[start..].chunks_exact_mut(8).zip(&mut words) {
                dst.copy_from_slice(&w.to_le_bytes());
                filled += 8;
            }
            self.buffer.truncate(filled);
            self.checksum.add_bytes(&self.buffer[start..]);
            if filled < IO_CHUNK_BYTES {
                return Ok(());
            }
            self.out.write_all(&self.buffer)?;
            self.buffer.clear();
        }
    }

    /// Writes the checksum trailer and flushes.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        let sum = self.checksum.value();
        self.buffer.extend_from_slice(&sum.to_le_bytes());
        self.out.write_all(&self.buffer)?;
        self.out.flush()
    }
}

/// How a restored table's memory is obtained.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allocation {
    /// In one piece: the input's length was checked against the headers already.
    Upfront,
    /// Step by step as words arrive, so that a header cannot make the reader make room for
    /// more than twice what the input provided (plus 1 MiB). The table must end up contiguous,
    /// so the block is reallocated as it grows; each step doubles it, because an allocator may
    /// copy on reallocation (glibc remaps large blocks, `GlobalAlloc::realloc`'s default
    /// copies), and steps of a fixed size would then copy the table once per step, quadratic in
    /// its size.
    AsDataArrives,
}

/// Reads little-endian words in chunks, checksumming them.
pub(crate) struct WordReader<R: Read> {
    input: R,
    buffer: Vec<u8>,
    checksum: Checksum,
    allocation: Allocation,
}

impl<R: Read> WordReader<R> {
    pub(crate) fn new(input: R, allocation: Allocation) -> Self {
        WordReader {
            input,
            buffer: Vec::new(),
            checksum: Checksum::new(),
            allocation,
        }
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u64; N], PersistError> {
        let mut words = [0u64; N];
        let mut i = 0;
        self.words(N, |w| {
            words[i] = w;
            i += 1;
        })?;
        Ok(words)
    }

    /// Reads `n` words, in chunks, giving each to `each`.
    fn words(&mut self, n: usize, mut each: impl FnMut(u64)) -> Result<(), PersistError> {
        let mut left = n;
        while left > 0 {
            let take = left.min(IO_CHUNK_BYTES / 8);
            self.buffer.resize(take * 8, 0);
            self.input.read_exact(&mut self.buffer)?;
            self.checksum.add_bytes(&self.buffer);
            for chunk in self.buffer.chunks_exact(8) {
                each(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
            }
            left -= take;
        }
        Ok(())
    }

    /// Reads a block of `len` (> 0) words into table memory, allocated as `self.allocation`
    /// says (so a hostile length costs at most twice the words actually read, plus 1 MiB).
    pub(crate) fn block(
        &mut self,
        len: usize,
        huge_pages: bool,
    ) -> Result<BucketWords, PersistError> {
        match self.allocation {
            Allocation::Upfront => {
                let words = BucketWords::zeroed(len, huge_pages)
                    .map_err(|e| PersistError::AllocationFailed { bytes: e.bytes })?;
                let mut next = words.iter();
                self.words(len, |w| {
                    let word = next.next().expect("as many words as the block");
                    // Zeros are there already: a page of them is never touched, so an empty
                    // stretch (an empty table) takes no memory.
                    if w != 0 {
                        // Relaxed: the table is not shared yet.
                        word.store(w, Ordering::Relaxed);
                    }
                })?;
                Ok(words)
            }
            Allocation::AsDataArrives => {
                let mut words: Vec<AtomicU64> = Vec::new();
                while words.len() < len {
                    // Room for as many words again as were read (1 MiB at first), never more
                    // than the block has left: the reallocations copy fewer than twice the
                    // block's words in all, and the last one leaves no spare room to shrink.
                    let room = words.len().max(GROW_STEP_WORDS);
                    let take = (len - words.len()).min(room);
                    words
                        .try_reserve_exact(take)
                        .map_err(|_| PersistError::AllocationFailed {
                            bytes: len.saturating_mul(8),
                        })?;
                    self.words(take, |w| words.push(AtomicU64::new(w)))?;
                }
                Ok(BucketWords::from_boxed(
                    words.into_boxed_slice(),
                    huge_pages,
                ))
            }
        }
    }

    /// Reads one level's bucket words into a table, checking every bucket and the item count.
    fn table(&mut self, level: LevelHeader, shape: TableShape) -> Result<Table, PersistError> {
        debug_assert_eq!((shape.buckets, shape.bits), (level.buckets, level.bits));
        debug_assert_eq!(shape.words(), Some(level.words));
        let words = self.block(level.words, true)?;
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

    /// Reads the trailer and compares it with the checksum of everything before it.
    pub(crate) fn check_trailer(&mut self) -> Result<(), PersistError> {
        let computed = self.checksum.value();
        let mut trailer = [0u8; 8];
        self.input.read_exact(&mut trailer)?;
        let stored = u64::from_le_bytes(trailer);
        if stored == computed {
            Ok(())
        } else {
            Err(PersistError::ChecksumMismatch { stored, computed })
        }
    }
}
