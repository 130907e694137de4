// Until the filter uses them.
#![allow(dead_code)]
//! RedisBloom cuckoo filters (`CF.*`), byte for byte: the hashing, the `CF.RESERVE`
//! parameters, and the two export formats, `CF.SCANDUMP` chunks and the `DUMP` payload, for
//! RedisBloom 2.2.15 and later (Redis 8 included).
//!
//! | module | what it holds |
//! |---|---|
//! | `hash` | MurmurHash64A, the fingerprint, the two buckets |
//! | `params` | `CF.RESERVE`'s ranges and arithmetic, the sub-filter geometry |
//! | `error` | [`LoadError`], [`LzfError`], [`ReserveError`] |

mod error;
mod hash;
mod params;

pub use error::{LoadError, LzfError, ReserveError};
