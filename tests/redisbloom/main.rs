//! `RedisCuckooFilter`, RedisBloom's cuckoo filter, without a server: the spec's examples,
//! recorded reference vectors, an independent serial model, edge cases, batches, one-word bucket
//! reads and concurrency. (Against a live server: `redis-tests/`.)

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
mod vectors;
