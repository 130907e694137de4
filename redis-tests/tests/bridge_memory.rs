//! Heap used by the Redis bridge: the peak bytes allocated during an export, beyond what was
//! live before it, over the filter's [`memory_usage`](RedisCuckooFilter::memory_usage), against
//! a real server (see `src/lib.rs`). The measurement uses a counting global allocator
//! (`tests/memory/counting_alloc.rs`, the library's), so this binary holds one test only.

#[path = "../../tests/memory/counting_alloc.rs"]
mod counting_alloc;

use crate::counting_alloc::peak_during;
use atomic_cuckoo::redisbloom::{ExportMode, RedisCuckooFilter};
use redis_tests::Server;

/// The bound `export_to`'s docs give for `LoadChunk`: the snapshot (the filter's size) plus
/// one pipeline of at most 16 MiB of chunks.
fn loadchunk_bound(filter: &RedisCuckooFilter) -> f64 {
    let size = filter.memory_usage() as f64;
    1.0 + (16u64 << 20).min(filter.info().size) as f64 / size
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn exports_stay_within_their_documented_heap_bounds() {
    let server = Server::start("exports_stay_within_their_documented_heap_bounds");
    let mut conn = server.conn();
    // Before any measurement: the connection's buffers are allocated by its first replies.
    let _: String = redis::cmd("PING").query(&mut conn).unwrap();
    for (capacity, bucket_size) in [(1u64 << 22, 4u64), (1 << 25, 1), (1 << 26, 2)] {
        let filter = RedisCuckooFilter::builder()
            .capacity(capacity)
            .bucket_size(bucket_size)
            .build()
            .unwrap();
        for i in 0..200_000 {
            filter.insert(format!("m{i}")).unwrap();
        }
        let size = filter.memory_usage();
        let mib = filter.info().size as f64 / f64::from(1 << 20);
        for (key, mode) in [
            ("r", ExportMode::Restore { replace: true }),
            ("l", ExportMode::LoadChunkReplace),
        ] {
            let (sent, peak) = peak_during(|| filter.export_to(&mut conn, key, mode).unwrap());
            let ratio = peak as f64 / size as f64;
            println!(
                "{mib:.0} MiB filter ({size} bytes held), {mode:?}: peak {peak} bytes above the \
                 baseline = {ratio:.3}x memory_usage ({sent:?})"
            );
            let bound = match mode {
                ExportMode::Restore { .. } => 2.0,
                _ => loadchunk_bound(&filter),
            };
            assert!(ratio <= bound, "{mode:?}: {ratio:.3}x > {bound:.3}x");
        }
        let (back, peak) = peak_during(|| RedisCuckooFilter::import_from(&mut conn, "r").unwrap());
        assert_eq!(back.info(), filter.info());
        println!(
            "{mib:.0} MiB filter, import (the new filter included): {:.3}x memory_usage",
            peak as f64 / size as f64
        );
    }
}
