//! The Redis bridge (`RedisCuckooFilter::export_to` / `import_from`) and
//! `examples/penetration_guard.rs` against real Redis + RedisBloom servers, one per test (see
//! `src/lib.rs`). The tests that need a server are `#[ignore]`d: run them with
//! `cargo test -p redis-tests -- --include-ignored` after `scripts/install-redis.sh`. One more
//! checks that they fail, rather than pass, where the server is missing.

#[path = "../../../tests/common/mod.rs"]
mod common;

mod export_import;
mod penetration_guard;
mod sharded_attack;
mod sharded_cluster;
mod sharded_faults;
mod sharded_ledger_attack;
mod without_a_server;
