#![doc = include_str!("crate_docs.md")]
// Inside the crate (docs/DESIGN.md has the design):
//
// | module | what it holds |
// |---|---|
// | `bucket_layout` | how a table's buckets lie in its words: one word each, packed, semi-sorted |
// | `bucket_word` | branch-free SWAR operations on one bucket packed in a `u64` |
// | `semi_sorted` | the semi-sorted encoding: a bucket of four `f`-bit lanes in `4f - 4` bits |
// | `hasher` | [`DefaultHashBuilder`] (portable: rapidhash V3) and [`AHashBuilder`] (opt-in) |
// | `hashing` | item hash → primary bucket, fingerprint, alternate bucket, in nested levels |
// | `stripe` | versioned lock stripes: writer pair locks, reader validation, a save's freeze |
// | `shards` | per-thread shards of a stripe set: item counts, and the busy counts that keep lock-free inserts out of a freeze |
// | `cuckoo_path` | the breadth-first search for a cuckoo path, and executing it one move at a time |
// | `optimistic_read` | the retrying seqlock read of every filter's lookups and counts: `Lookup`, the one attempt limit, `retry_read` |
// | `table` | one table: lookups (`read`), inserts and removes (`write`), its moves (`path`) |
// | `filter` | [`CuckooFilter`], the public type: a fixed or a growable body |
// | `set` | [`CuckooSet`]: a `CuckooFilter` of one item type, with set semantics |
// | `growth` | a growable filter's body: one table that doubles in place, lookups of two buckets at any size |
// | `fixed` | a fixed filter's body: one table, its plan (width, layout, capacity) and its error rules |
// | `builder`, `params` | [`Builder`] and the arithmetic behind its choices; every filter type's stripe count |
// | `persist` | snapshots: [`CuckooFilter::write_to`], [`CuckooFilter::read_from`], the fixed table's format |
// | `snapshot_words` | a snapshot's words: the checksummed reader and writer every format uses |
// | `error` | [`InsertError`], [`BuildError`], [`PersistError`] |
// | `storage` | memory for bucket words: own mappings, huge pages, prefetch (the only `unsafe`) |
// | `sync` | the std/loom switch for atomics and the cold-path locks |
// | `freeze` | the whole-filter freeze every filter uses (save, clone, clear, compaction), and the one policy for such an operation nested in a save of the same filter |
// | `redisbloom` | [`redisbloom::RedisCuckooFilter`]: RedisBloom's `CF.*` filter, byte for byte, on the same stripes |
#![warn(missing_docs, clippy::missing_errors_doc, clippy::missing_panics_doc)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]

mod bucket_layout;
mod bucket_word;
mod builder;
mod cuckoo_path;
mod error;
mod filter;
mod fixed;
mod freeze;
mod growth;
mod hasher;
mod hashing;
mod optimistic_read;
mod params;
mod persist;
pub mod redisbloom;
mod semi_sorted;
mod set;
mod shards;
mod snapshot_words;
mod storage;
mod stripe;
mod sync;
mod table;
#[cfg(test)]
mod test_rng;

pub use builder::{Builder, Layout, DEFAULT_CAPACITY};
pub use error::{BuildError, InsertError, InsertManyError, PersistError};
pub use filter::CuckooFilter;
pub use hasher::{AHashBuilder, DefaultHashBuilder, PortableHasher};
pub use set::CuckooSet;

/// The [`redis`](https://docs.rs/redis) crate that the `redis` feature's bridge is built on
/// (version 1): connections made with it are the ones
/// [`RedisCuckooFilter::export_to`](redisbloom::RedisCuckooFilter::export_to) and
/// [`import_from`](redisbloom::RedisCuckooFilter::import_from) take, whatever version of
/// `redis` the rest of a program uses.
///
/// ```no_run
/// use atomic_cuckoo::redis;
///
/// let mut conn = redis::Client::open("redis://127.0.0.1:6379/")?.get_connection()?;
/// # Ok::<(), redis::RedisError>(())
/// ```
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis;

#[cfg(loom)]
#[doc(hidden)]
pub mod loom_hook;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
