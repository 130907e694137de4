//! RedisBloom cuckoo filters (`CF.*`), byte for byte: the hashing, the `CF.RESERVE`
//! parameters, and the two export formats, `CF.SCANDUMP` chunks and the `DUMP` payload, for
//! RedisBloom 2.2.15 and later (Redis 8 included).
//!
//! | module | what it holds |
//! |---|---|
//! | `hash` | MurmurHash64A, the fingerprint, the two buckets |
//! | `params` | `CF.RESERVE`'s ranges and arithmetic, the sub-filter geometry |
//! | `header` | the 38-byte SCANDUMP header and its validation |
//! | `chunks` | the SCANDUMP chunk sequence, and reassembling it |
//! | `raw` | a checked filter image: header, geometry, sub-filter bytes |
//! | `payload` | the `DUMP`/`RESTORE` payload, built on `rdb` (RDB encodings), `crc64`, `lzf` |
//! | `error` | [`LoadError`], [`LzfError`], [`ReserveError`] |
//! | `bridge` | (feature `redis`) `export_to` / `import_from` a live Redis, `BridgeError` |

#[cfg(feature = "redis")]
mod bridge;
mod chunks;
mod compact;
mod crc64;
mod error;
mod filter;
mod hash;
mod header;
mod kick;
mod lzf;
mod params;
mod payload;
mod raw;
mod rdb;
mod sub_filter;
#[cfg(test)]
mod testkit;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use bridge::{BridgeError, ExportMode, ExportSummary};
pub use error::{LoadError, LzfError, RedisInsertError, ReserveError};
pub use filter::{RedisBuilder, RedisCuckooFilter, RedisInfo};
pub use payload::PORTABLE_RDB_VERSION;
