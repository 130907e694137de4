//! Why a RedisBloom filter image or its parameters were rejected.

use std::fmt;

/// Why a RedisBloom cuckoo filter could not be created: a parameter is outside the range Redis
/// 8 accepts for `CF.RESERVE` (or for the `cf-max-expansions` configuration).
///
/// The `Display` texts are Redis 8's error replies where Redis has one.
///
/// # Example
///
/// ```
/// use atomic_cuckoo::redisbloom::ReserveError;
///
/// let error = ReserveError::BucketSize { bucket_size: 300 };
/// assert_eq!(error.to_string(), "BUCKETSIZE: value must be in the range [1, 255]");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReserveError {
    /// The capacity is below twice the bucket size.
    CapacityTooSmall {
        /// The capacity that was given.
        capacity: u64,
        /// The smallest capacity for this bucket size (`2 * bucket_size`).
        min: u64,
    },
    /// The capacity is above 2^30 (1073741824).
    CapacityTooLarge {
        /// The capacity that was given.
        capacity: u64,
    },
    /// The bucket size is outside `1..=255`.
    BucketSize {
        /// The bucket size that was given.
        bucket_size: u64,
    },
    /// The maximum number of kicks is outside `1..=65535`.
    MaxIterations {
        /// The value that was given.
        max_iterations: u64,
    },
    /// The expansion factor is above 32768.
    Expansion {
        /// The value that was given.
        expansion: u64,
    },
    /// The maximum number of sub-filters (`cf-max-expansions`) is outside `1..=65536`.
    MaxExpansions {
        /// The value that was given.
        max_expansions: u64,
    },
    /// The first sub-filter's memory could not be allocated.
    AllocationFailed {
        /// Bytes asked for.
        bytes: usize,
    },
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReserveError::CapacityTooSmall { .. } | ReserveError::CapacityTooLarge { .. } => {
                f.write_str("Capacity must be in the range [2 * BUCKETSIZE, 1073741824]")
            }
            ReserveError::BucketSize { .. } => {
                f.write_str("BUCKETSIZE: value must be in the range [1, 255]")
            }
            ReserveError::MaxIterations { .. } => {
                f.write_str("MAXITERATIONS: value must be in the range [1, 65535]")
            }
            ReserveError::Expansion { .. } => {
                f.write_str("EXPANSION: value must be in the range [0, 32768]")
            }
            // Redis has no command reply for this: it is a configuration value.
            ReserveError::MaxExpansions { max_expansions } => write!(
                f,
                "cf-max-expansions must be in the range [1, 65536], not {max_expansions}"
            ),
            ReserveError::AllocationFailed { bytes } => {
                write!(f, "Insufficient memory to create filter ({bytes} bytes)")
            }
        }
    }
}

impl std::error::Error for ReserveError {}

/// Why an LZF-compressed string in a `DUMP` payload could not be decompressed.
///
/// Positions are byte offsets in the compressed data.
///
/// # Example
///
/// ```
/// use atomic_cuckoo::redisbloom::LzfError;
///
/// let error = LzfError::OutputTooShort { produced: 3, declared: 4 };
/// assert_eq!(error.to_string(), "LZF data decompresses to 3 bytes, not the declared 4");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LzfError {
    /// The declared length is more than LZF can produce from this much input (at most 88
    /// bytes per input byte: a 3-byte back-reference copies at most 264).
    ImpossibleLength {
        /// The declared uncompressed length.
        declared: usize,
        /// The compressed length.
        input: usize,
    },
    /// A literal run or back-reference starting at `at` needs more input than there is.
    Truncated {
        /// Offset of its control byte.
        at: usize,
    },
    /// A back-reference starting at `at` points before the start of the output.
    BackReferenceBeforeStart {
        /// Offset of its control byte.
        at: usize,
        /// How far back it points.
        distance: usize,
        /// Bytes produced before it.
        produced: usize,
    },
    /// The instruction starting at `at` would produce more than the declared length.
    OutputTooLong {
        /// Offset of its control byte.
        at: usize,
        /// The declared uncompressed length.
        declared: usize,
    },
    /// The input ended before the declared length was produced.
    OutputTooShort {
        /// Bytes produced.
        produced: usize,
        /// The declared uncompressed length.
        declared: usize,
    },
}

impl fmt::Display for LzfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LzfError::ImpossibleLength { declared, input } => write!(
                f,
                "{input} bytes of LZF data cannot decompress to the declared {declared} bytes"
            ),
            LzfError::Truncated { at } => {
                write!(
                    f,
                    "LZF instruction at byte {at} runs past the end of the data"
                )
            }
            LzfError::BackReferenceBeforeStart {
                at,
                distance,
                produced,
            } => write!(
                f,
                "LZF back-reference at byte {at} points {distance} bytes back, but only \
                 {produced} bytes were produced"
            ),
            LzfError::OutputTooLong { at, declared } => write!(
                f,
                "LZF instruction at byte {at} produces more than the declared {declared} bytes"
            ),
            LzfError::OutputTooShort { produced, declared } => write!(
                f,
                "LZF data decompresses to {produced} bytes, not the declared {declared}"
            ),
        }
    }
}

impl std::error::Error for LzfError {}

/// Why a RedisBloom filter image (a `CF.SCANDUMP` chunk list or a `DUMP` payload) was
/// rejected.
///
/// Besides everything Redis itself rejects, this covers images that Redis accepts but that are
/// corrupt: they make later commands misbehave (expansion not a power of two, an item count
/// that differs from the stored fingerprints) or crash the server (a payload whose sub-filter
/// lengths disagree with its bucket counts). Offsets in a payload are byte offsets from its
/// start; offsets in the data stream count from the start of sub-filter 0.
///
/// # Example
///
/// ```
/// use atomic_cuckoo::redisbloom::LoadError;
///
/// let error = LoadError::HeaderLength { len: 37 };
/// assert!(error.to_string().starts_with("Invalid header"));
/// assert!(matches!(error, LoadError::HeaderLength { len: 37 }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadError {
    // ---- The header (SCANDUMP header chunk, or the payload's fields) ----
    /// The header chunk is not 38 bytes long (Redis: `Invalid header`).
    HeaderLength {
        /// Its length.
        len: usize,
    },
    /// The bucket size is 0 or above 255.
    BucketSize {
        /// The header's value.
        bucket_size: u16,
    },
    /// Sub-filter 0's bucket count is not a power of two (0 included).
    BucketsNotPowerOfTwo {
        /// The header's value.
        buckets: u64,
    },
    /// Sub-filter 0's bucket count is above Redis's limit of 2^56 − 1.
    TooManyBuckets {
        /// The header's value.
        buckets: u64,
    },
    /// The number of sub-filters is 0 or above 65535 (Redis keeps it in 16 bits).
    FilterCount {
        /// The header's value (all 64 bits of the field).
        filters: u64,
    },
    /// The maximum number of kicks is 0.
    ZeroMaxIterations,
    /// The expansion is 0 (growth disabled), yet there is more than one sub-filter: Redis
    /// would give the second one 0 buckets and divide by zero on the next lookup.
    ZeroExpansionWithSubFilters {
        /// The header's number of sub-filters.
        filters: u16,
    },
    /// The expansion is not a power of two (Redis accepts it, but then an item's two buckets
    /// are no longer each other's alternate in the larger sub-filters).
    ExpansionNotPowerOfTwo {
        /// The header's value.
        expansion: u16,
    },
    /// A sub-filter passes 4 GiB, where RedisBloom's 32-bit byte offsets wrap.
    SubFilterTooLarge {
        /// Bytes of the largest sub-filter.
        bytes: u64,
    },
    /// The sub-filters would take more than 2^40 bytes (or more than this machine can
    /// address).
    TooLarge {
        /// Their total size in bytes; `u64::MAX` when it overflows.
        bytes: u64,
    },
    /// A payload field does not fit the width Redis stores it in (Redis would truncate it).
    FieldTooWide {
        /// The field's name.
        field: &'static str,
        /// Its value in the payload.
        value: u64,
    },
    /// The number of non-zero slots differs from the header's item count (Redis accepts it,
    /// but then `CF.SCANDUMP`, compaction and `CF.INFO` misbehave).
    ItemCount {
        /// The header's item count.
        header: u64,
        /// Non-zero slots in the sub-filters.
        stored: u64,
    },

    // ---- The SCANDUMP chunk list ----
    /// There are no chunks at all. An empty Redis filter (0 items) dumps nothing; take its
    /// geometry from `CF.INFO` instead.
    NoChunks,
    /// The first chunk is not the header (iterator 1).
    FirstChunkNotHeader {
        /// Its iterator.
        iterator: u64,
    },
    /// A data chunk is empty (Redis: `Couldn't load chunk!`).
    EmptyChunk {
        /// Its iterator.
        iterator: u64,
    },
    /// A data chunk would start before the data stream: `iterator - 1 < len` (Redis:
    /// `Couldn't load chunk!`; a second header chunk is one).
    ChunkBeforeStart {
        /// Its iterator.
        iterator: u64,
        /// Its length.
        len: usize,
    },
    /// A data chunk ends past the end of the data stream. (Redis rejects most of these, but
    /// silently writes one that starts within the last sub-filter's size past the end at the
    /// start of the last sub-filter.)
    ChunkPastEnd {
        /// Its iterator.
        iterator: u64,
        /// Its length.
        len: usize,
    },
    /// A data chunk spans two sub-filters (Redis: `Couldn't load chunk!`).
    ChunkStraddles {
        /// Its iterator.
        iterator: u64,
        /// Its length.
        len: usize,
    },
    /// A data chunk overlaps an earlier one in the stream.
    ChunksOverlap {
        /// Its iterator.
        iterator: u64,
        /// Its length.
        len: usize,
    },
    /// No chunk covers these bytes of the data stream.
    MissingData {
        /// Stream offset of the first uncovered byte.
        offset: u64,
        /// Uncovered bytes from there.
        len: u64,
    },

    // ---- The DUMP payload ----
    /// The payload is shorter than its 10-byte footer.
    PayloadTooShort {
        /// Its length.
        len: usize,
    },
    /// The payload ends inside its 10-byte footer (RDB version, then CRC-64): its last
    /// `missing` bytes are gone. Recognised by the end-of-value marker and a valid RDB
    /// version found `missing` bytes before their place, followed by what is left of the CRC.
    PayloadTruncated {
        /// Its length.
        len: usize,
        /// Bytes missing from its end (1 to 8).
        missing: usize,
    },
    /// The payload's RDB version is outside `9..=12` (Redis 5.0 to 8.x).
    RdbVersion {
        /// The footer's version.
        version: u16,
    },
    /// The footer's CRC-64 does not match the payload.
    Checksum {
        /// The footer's value.
        stored: u64,
        /// The CRC-64/Jones of the payload.
        computed: u64,
    },
    /// The value is not a module value (RDB type 7).
    ValueType {
        /// The type byte.
        found: u8,
    },
    /// The module value is not a RedisBloom cuckoo filter (`MBbloomCF`).
    ModuleType {
        /// The module type id, encoding version included.
        id: u64,
    },
    /// The cuckoo filter's encoding version is not 4.
    EncodingVersion {
        /// The version (the low 10 bits of the module type id).
        encver: u64,
    },
    /// The payload ends inside a field.
    Truncated {
        /// Where the field starts.
        offset: usize,
    },
    /// A length byte uses an encoding that has no meaning here.
    LengthEncoding {
        /// Where it is.
        offset: usize,
        /// The byte.
        byte: u8,
    },
    /// A module opcode is not the one the format has there.
    Opcode {
        /// Where it is.
        offset: usize,
        /// The opcode the format has there (2: unsigned, 5: string, 0: end).
        expected: u64,
        /// The opcode found.
        found: u64,
    },
    /// A string uses an unknown special encoding.
    StringEncoding {
        /// Where the string starts.
        offset: usize,
        /// Its encoding byte.
        byte: u8,
    },
    /// An LZF-compressed string could not be decompressed.
    Lzf {
        /// Where the compressed data starts.
        offset: usize,
        /// Why.
        error: LzfError,
    },
    /// A sub-filter's bucket count is not `buckets * expansion^index`.
    SubFilterBuckets {
        /// The sub-filter.
        index: u16,
        /// Its bucket count in the payload.
        buckets: u64,
        /// The count the header's geometry gives it.
        expected: u64,
    },
    /// A sub-filter's length is not its bucket count times the bucket size (Redis 2.8 and
    /// later abort the server on such a payload).
    SubFilterLength {
        /// The sub-filter.
        index: u16,
        /// Its length in the payload.
        len: u64,
        /// Its bucket count times the bucket size.
        expected: u64,
    },
    /// Bytes follow the module value's end marker.
    TrailingBytes {
        /// Where they start.
        offset: usize,
        /// How many.
        len: usize,
    },
    /// The sub-filters' memory could not be allocated.
    AllocationFailed {
        /// Bytes asked for.
        bytes: u64,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LoadError::HeaderLength { len } => {
                write!(f, "Invalid header: {len} bytes, not 38")
            }
            LoadError::BucketSize { bucket_size } => {
                write!(f, "bucket size {bucket_size} is outside 1..=255")
            }
            LoadError::BucketsNotPowerOfTwo { buckets } => {
                write!(f, "bucket count {buckets} is not a power of two")
            }
            LoadError::TooManyBuckets { buckets } => {
                write!(f, "bucket count {buckets} is above 2^56 - 1")
            }
            LoadError::FilterCount { filters } => {
                write!(f, "sub-filter count {filters} is outside 1..=65535")
            }
            LoadError::ZeroMaxIterations => f.write_str("maximum iterations is 0"),
            LoadError::ZeroExpansionWithSubFilters { filters } => write!(
                f,
                "expansion 0 (no growth) with {filters} sub-filters instead of 1"
            ),
            LoadError::ExpansionNotPowerOfTwo { expansion } => {
                write!(f, "expansion {expansion} is not a power of two")
            }
            LoadError::SubFilterTooLarge { bytes } => write!(
                f,
                "a sub-filter of {bytes} bytes passes 4 GiB, where RedisBloom's offsets wrap"
            ),
            LoadError::TooLarge { bytes: u64::MAX } => {
                f.write_str("the sub-filters' total size overflows 64 bits")
            }
            LoadError::TooLarge { bytes } => write!(
                f,
                "the sub-filters take {bytes} bytes, more than the largest supported filter"
            ),
            LoadError::FieldTooWide { field, value } => {
                write!(f, "{field} {value} does not fit in 16 bits")
            }
            LoadError::ItemCount { header, stored } => write!(
                f,
                "the header counts {header} items, but {stored} slots are occupied"
            ),
            LoadError::NoChunks => f.write_str(
                "no chunks: an empty filter dumps nothing (take its geometry from CF.INFO)",
            ),
            LoadError::FirstChunkNotHeader { iterator } => write!(
                f,
                "the first chunk has iterator {iterator}, not 1 (the header)"
            ),
            LoadError::EmptyChunk { iterator } => {
                write!(f, "Couldn't load chunk! (chunk {iterator} is empty)")
            }
            LoadError::ChunkBeforeStart { iterator, len } => write!(
                f,
                "Couldn't load chunk! ({len} bytes cannot end at iterator {iterator})"
            ),
            LoadError::ChunkPastEnd { iterator, len } => write!(
                f,
                "chunk {iterator} ({len} bytes) ends past the end of the sub-filters"
            ),
            LoadError::ChunkStraddles { iterator, len } => write!(
                f,
                "Couldn't load chunk! (chunk {iterator}, {len} bytes, spans two sub-filters)"
            ),
            LoadError::ChunksOverlap { iterator, len } => {
                write!(f, "chunk {iterator} ({len} bytes) overlaps another chunk")
            }
            LoadError::MissingData { offset, len } => write!(
                f,
                "no chunk covers {len} bytes of sub-filter data from stream offset {offset}"
            ),
            LoadError::PayloadTooShort { len } => write!(
                f,
                "DUMP payload of {len} bytes is shorter than its 10-byte footer"
            ),
            LoadError::PayloadTruncated { len, missing: 1 } => write!(
                f,
                "DUMP payload of {len} bytes is truncated: the last byte of its footer \
                 (RDB version and CRC-64) is missing"
            ),
            LoadError::PayloadTruncated { len, missing } => write!(
                f,
                "DUMP payload of {len} bytes is truncated: the last {missing} bytes of its \
                 footer (RDB version and CRC-64) are missing"
            ),
            LoadError::RdbVersion { version } => {
                write!(f, "DUMP payload RDB version {version} is outside 9..=12")
            }
            LoadError::Checksum { stored, computed } => write!(
                f,
                "DUMP payload checksum is wrong: {stored:#018x} stored, {computed:#018x} computed"
            ),
            LoadError::ValueType { found } => {
                write!(f, "RDB value type {found} is not a module value (7)")
            }
            LoadError::ModuleType { id } => {
                write!(f, "module type id {id:#018x} is not MBbloomCF")
            }
            LoadError::EncodingVersion { encver } => {
                write!(f, "cuckoo filter encoding version {encver} is not 4")
            }
            LoadError::Truncated { offset } => {
                write!(f, "DUMP payload ends inside the field at byte {offset}")
            }
            LoadError::LengthEncoding { offset, byte } => {
                write!(f, "invalid RDB length byte {byte:#04x} at byte {offset}")
            }
            LoadError::Opcode {
                offset,
                expected,
                found,
            } => write!(
                f,
                "module opcode {found} at byte {offset}, expected {expected}"
            ),
            LoadError::StringEncoding { offset, byte } => {
                write!(f, "unknown string encoding {byte:#04x} at byte {offset}")
            }
            LoadError::Lzf { offset, .. } => {
                write!(f, "corrupt LZF string at byte {offset}")
            }
            LoadError::SubFilterBuckets {
                index,
                buckets,
                expected,
            } => write!(
                f,
                "sub-filter {index} has {buckets} buckets, the header's geometry gives {expected}"
            ),
            LoadError::SubFilterLength {
                index,
                len,
                expected,
            } => write!(
                f,
                "sub-filter {index} is {len} bytes, its buckets take {expected}"
            ),
            LoadError::TrailingBytes { offset, len } => write!(
                f,
                "{len} bytes follow the end of the module value at byte {offset}"
            ),
            LoadError::AllocationFailed { bytes } => {
                write!(f, "Insufficient memory ({bytes} bytes for the sub-filters)")
            }
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Lzf { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why [`RedisCuckooFilter::insert`](super::RedisCuckooFilter::insert) (`CF.ADD`) stored
/// nothing; the texts are RedisBloom's replies.
///
/// ```
/// use atomic_cuckoo::redisbloom::{RedisCuckooFilter, RedisInsertError};
///
/// let f = RedisCuckooFilter::builder().capacity(2).bucket_size(1).expansion(0).build()?;
/// let full = (0..100u32).find_map(|i| f.insert(i.to_string()).err());
/// assert_eq!(full, Some(RedisInsertError::Full));
/// assert_eq!(RedisInsertError::Full.to_string(), "Filter is full");
/// # Ok::<(), atomic_cuckoo::redisbloom::ReserveError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisInsertError {
    /// No room, and the filter does not grow (expansion 0).
    Full,
    /// The filter already has its maximum number of sub-filters (`cf-max-expansions`),
    /// checked before the item, as Redis does.
    MaxExpansionsReached,
    /// A new sub-filter could not be allocated (or would pass 4 GiB, where RedisBloom's 32-bit
    /// byte offsets wrap).
    GrowthFailed {
        /// Bytes asked for.
        bytes: usize,
    },
}

impl fmt::Display for RedisInsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisInsertError::Full => f.write_str("Filter is full"),
            RedisInsertError::MaxExpansionsReached => f.write_str("Maximum expansions reached"),
            RedisInsertError::GrowthFailed { bytes } => {
                write!(
                    f,
                    "Insufficient memory ({bytes} bytes for a new sub-filter)"
                )
            }
        }
    }
}

impl std::error::Error for RedisInsertError {}
