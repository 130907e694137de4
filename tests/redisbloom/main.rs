//! `RedisCuckooFilter`, RedisBloom's cuckoo filter, without a server: the spec's examples, an
//! independent serial model, edge cases, batches, one-word bucket reads and concurrency. (The
//! reference vectors recorded from a server, and the tests against a live one: `redis-tests/`.)

#[path = "../common/mod.rs"]
mod common;
mod serial_model;

mod batches;
mod bucket_words;
mod concurrency;
mod edge_cases;
mod error_types;
mod filter;
mod lookup_stress;
mod model_equivalence;
mod sharded;
mod sharded_attack;
