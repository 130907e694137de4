//! RedisBloom cuckoo filters (`CF.*`), byte for byte: the hashing, the `CF.RESERVE`
//! parameters, and the two export formats, `CF.SCANDUMP` chunks and the `DUMP` payload, for
//! RedisBloom 2.2.15 and later (Redis 8 included).
//!
//! [`RedisCuckooFilter`] takes items as bytes and hashes them as Redis does, so that it holds
//! the same bytes as a Redis filter after the same commands. Use it when a filter must reach
//! Redis or come from it; otherwise [`CuckooFilter`](crate::CuckooFilter) is smaller and faster
//! (see the [crate docs](crate) for the comparison). The two hash items differently: neither
//! converts into the other.
//!
//! ```
//! use atomic_cuckoo::redisbloom::RedisCuckooFilter;
//!
//! let filter = RedisCuckooFilter::reserve(1_000)?;           // CF.RESERVE key 1000
//! filter.insert("user:42").unwrap();                         // CF.ADD key user:42
//! let payload = filter.dump_payload(atomic_cuckoo::redisbloom::PORTABLE_RDB_VERSION); // DUMP
//! let copy = RedisCuckooFilter::from_dump_payload(&payload)?; // RESTORE
//! assert!(copy.contains("user:42"));                         // CF.EXISTS key user:42
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Concurrency
//!
//! A [`RedisCuckooFilter`] is `Send` and `Sync`, and every operation takes `&self`: share it as
//! `Arc<RedisCuckooFilter>`. Redis runs one command at a time; here threads run at once, under
//! these rules.
//!
//! - **Lookups never wait.** [`contains`](RedisCuckooFilter::contains) and
//!   [`contains_many`](RedisCuckooFilter::contains_many) finish in a bounded number of steps
//!   whatever writers do. They answer `false` only after seeing the item's buckets in one
//!   consistent state in every sub-filter; a lookup that keeps colliding with writers answers
//!   `true` ("maybe present").
//! - **No false negatives.** Once `insert(x)` has returned `Ok` (or `insert_unique(x)`
//!   `Ok(true)`), every lookup of `x` that starts afterwards answers `true` until a
//!   `remove(x)` starts, also while other threads insert, move fingerprints in kick walks, add
//!   sub-filters, compact or dump the filter.
//! - **Writers lock only what they change.** An insert or a remove holds the lock stripes of
//!   the item's two buckets; a kick walk is first worked out on a copy, then written with the
//!   stripes of every bucket on its path held together. Writers of other buckets run in
//!   parallel. Adding a sub-filter takes a filter-wide lock: one thread adds it, and the
//!   others that need it wait.
//! - **A failed insert changes nothing**: a kick walk that finds no room writes nothing, as
//!   Redis's rollback leaves the filter.
//! - **`insert_unique` is atomic per item**: two threads adding the same item with
//!   [`insert_unique`](RedisCuckooFilter::insert_unique) or
//!   [`insert_many_unique`](RedisCuckooFilter::insert_many_unique) cannot both store it.
//! - **Whole-filter operations see one moment.** [`compact`](RedisCuckooFilter::compact),
//!   [`scandump`](RedisCuckooFilter::scandump),
//!   [`dump_payload`](RedisCuckooFilter::dump_payload) and `export_to` freeze the filter
//!   (the dumps and the export while they copy its bytes): inserts and removes wait meanwhile,
//!   lookups do not. A dump is the filter at one moment. A [`remove`](RedisCuckooFilter::remove) can start the automatic compaction that
//!   Redis runs after many deletes; it then runs on the removing thread, and other writers
//!   wait for it.
//! - **[`count`](RedisCuckooFilter::count) is exact for one moment.** It does not wait while
//!   nothing compacts, but it retries when it overlaps a compaction and, after a few tries,
//!   waits for the compaction, a growth or a dump in progress to end.
//! - **[`info`](RedisCuckooFilter::info) is a statistic.** Its counters are read without locks:
//!   under concurrent writes they need not all come from one moment. The header of
//!   [`scandump`](RedisCuckooFilter::scandump) does.
//! - **A panic leaves the filter usable.** A panic in an item's `AsRef<[u8]>` or a batch
//!   call's iterator comes before any lock is taken, and locks are released on unwinding: the
//!   filter is `UnwindSafe` and `RefUnwindSafe`.
//! - **Same bytes as Redis for the same commands in the same order.** A filter written by one
//!   thread, or by threads whose writes are otherwise ordered, holds exactly the bytes Redis
//!   would. When writers race, each of their operations still takes effect whole, but which
//!   slots racing items end up in depends on the timing.
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
//! | `sharded` | [`ShardedFilter`]: one filter over several shards, and the rule that picks an item's shard |
//! | `cluster_slot` | (feature `redis`) Redis Cluster's key slots and hash tags |
//! | `manifest` | (feature `redis`) a sharded filter's names in Redis: shard keys, the manifest |
//! | `cluster` | (feature `redis`) [`ShardedFilter`] in Redis: export, import, `ClusterFilter` |
//! | `bridge` | (feature `redis`) `export_to` / `import_from` a live Redis, `BridgeError` |

#[cfg(feature = "redis")]
mod bridge;
mod chunks;
#[cfg(feature = "redis")]
mod cluster;
#[cfg(feature = "redis")]
mod cluster_slot;
mod compact;
mod crc64;
mod error;
mod filter;
mod hash;
mod header;
mod kick;
mod lzf;
#[cfg(feature = "redis")]
mod manifest;
mod params;
mod payload;
mod raw;
mod rdb;
mod sharded;
mod sub_filter;
#[cfg(test)]
mod testkit;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use bridge::{BridgeError, ExportMode, ExportSummary};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use cluster::{ClusterError, ClusterExport, ClusterExportSummary, ClusterFilter};
pub use error::{LoadError, LzfError, RedisInsertError, ReserveError};
pub use filter::{RedisBuilder, RedisCuckooFilter, RedisInfo};
pub use payload::PORTABLE_RDB_VERSION;
pub use sharded::{ShardError, ShardedFilter, MAX_SHARDS};
