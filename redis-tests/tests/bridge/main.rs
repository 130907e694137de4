//! The Redis bridge (`RedisCuckooFilter::export_to` / `import_from`) and
//! `examples/penetration_guard.rs` against real Redis + RedisBloom servers, one per test (see
//! `src/lib.rs`). Every test needs a server, so every test is `#[ignore]`d: run them with
//! `cargo test -p redis-tests -- --include-ignored` after `scripts/install-redis.sh`.

#[path = "../../../tests/common/mod.rs"]
mod common;

mod export_import;
mod penetration_guard;
