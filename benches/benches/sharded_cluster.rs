//! A sharded RedisBloom filter in a Redis Cluster of three masters that this program starts
//! (the bridge tests' `redis_tests::Cluster`: Debian's `redis-server` with
//! `.redis-stack/redisbloom.so`, as `scripts/install-redis.sh` installs them).
//!
//! For each size N (10M and 100M by default; `ATOMIC_CUCKOO_BENCH_SIZES=10m,100m`) and shard
//! count S (`ATOMIC_CUCKOO_BENCH_SHARDS`, default 4), one run:
//! - **fill**: (a) the client sends every item with `CF.INSERT key ITEMS …`, 1,000 items per
//!   command, pipelined per node (`redis::cluster::cluster_pipe`, 100 commands per flush),
//!   into the S shard keys reserved empty; against (b) building the filter here on two threads
//!   (`insert_many`) and publishing it with `ShardedFilter::export_to`; every filter has buckets
//!   of 4, up to 500 kicks, and 5 % more capacity than items;
//! - **lookups through the cluster**: `ClusterFilter::contains_many` (one `CF.MEXISTS` of up
//!   to 10,000 items per shard per round trip) against one key holding an unsharded filter of
//!   the same capacity on one of the masters (`CF.MEXISTS`, 1,000 per command, pipelined);
//! - **memory on the servers**: `MEMORY USAGE` of every shard key, against the one key;
//! - **false positives**: of the sharded filter and the unsharded one, on 2M absent items.
//!
//! ```sh
//! cargo bench -p peer-benches --bench sharded_cluster
//! ATOMIC_CUCKOO_BENCH_SIZES=10m ATOMIC_CUCKOO_BENCH_SHARDS=3 cargo bench -p peer-benches --bench sharded_cluster
//! ```
//!
//! Client and the three servers share the machine.

use std::time::{Duration, Instant};

use atomic_cuckoo::redisbloom::{
    ClusterExport, ClusterFilter, ExportMode, RedisBuilder, RedisCuckooFilter, ShardedFilter,
};
use peer_benches::splitmix;
use redis::cluster::ClusterConnection;
use redis_tests::Cluster;

/// Items per `CF.INSERT` and `CF.MEXISTS` of the client baselines.
const PER_COMMAND: usize = 1_000;
/// Commands per pipeline flush.
const PER_FLUSH: usize = 100;
/// Lookups measured (half present, half absent).
const PROBES: usize = 2_000_000;

fn item(key: u64) -> [u8; 8] {
    key.to_le_bytes()
}

fn sizes() -> Vec<(String, usize)> {
    let spec = std::env::var("ATOMIC_CUCKOO_BENCH_SIZES").unwrap_or_else(|_| "10m,100m".into());
    spec.split(',')
        .map(|s| {
            let s = s.trim().to_lowercase();
            let n = match s.strip_suffix('m') {
                Some(m) => m.parse::<usize>().expect("a size like 10m") * 1_000_000,
                None => s.parse().expect("a size like 10m or 500000"),
            };
            (s.to_uppercase(), n)
        })
        .collect()
}

/// (a): the shard keys reserved empty (an empty filter of the same shape, exported), then
/// every item by `CF.INSERT`, pipelined per node.
fn fill_by_insert(conn: &mut ClusterConnection, shape: &ShardedFilter, keys: &[u64]) -> String {
    let each = (keys.len() as u64).div_ceil(shape.shards().len() as u64);
    let empty = ShardedFilter::with_builder(shape.shards().len(), &shaped(each)).expect("shards");
    empty
        .export_to(conn, "by-insert", &ClusterExport::default())
        .expect("reserve the shards");
    let remote = ClusterFilter::open(conn, "by-insert").expect("open");
    for flush in keys.chunks(PER_COMMAND * PER_FLUSH) {
        let mut groups: Vec<Vec<u64>> = vec![Vec::new(); remote.keys().len()];
        for &k in flush {
            groups[remote.shard_of(item(k))].push(k);
        }
        let mut pipe = redis::cluster::cluster_pipe();
        for (shard, group) in groups.iter().enumerate() {
            for command in group.chunks(PER_COMMAND) {
                let cmd = pipe
                    .cmd("CF.INSERT")
                    .arg(&remote.keys()[shard])
                    .arg("NOCREATE")
                    .arg("ITEMS");
                for &k in command {
                    cmd.arg(&item(k)[..]);
                }
                cmd.ignore();
            }
        }
        pipe.query::<()>(conn).expect("CF.INSERT");
    }
    "by-insert".to_owned()
}

/// The shape of every filter here: buckets of 4 and up to 500 kicks, so that a filter fills
/// to its capacity (RedisBloom's defaults, buckets of 2 and 20 kicks, start a second
/// sub-filter at about half load), with 5 % headroom over the items.
fn shaped(capacity: u64) -> RedisBuilder {
    RedisCuckooFilter::builder()
        .capacity(capacity + capacity / 20)
        .bucket_size(4)
        .max_iterations(500)
}

/// (b): built here on two threads.
fn build_here(keys: &[u64], shards: usize) -> ShardedFilter {
    let each = (keys.len() as u64).div_ceil(shards as u64);
    let filter = ShardedFilter::with_builder(shards, &shaped(each)).expect("a valid capacity");
    std::thread::scope(|s| {
        for half in keys.chunks(keys.len().div_ceil(2)) {
            let filter = &filter;
            s.spawn(move || {
                for chunk in half.chunks(PER_COMMAND) {
                    filter
                        .insert_many(chunk.iter().map(|&k| item(k)))
                        .expect("growth suffices");
                }
            });
        }
    });
    filter
}

/// `MEMORY USAGE key`, asked of the node that holds the key (the others answer `MOVED`). A
/// cluster connection sends `MEMORY` to every node and adds up the answers.
fn memory_usage(cluster: &Cluster, key: &str) -> u64 {
    (0..cluster.nodes.len())
        .find_map(|i| {
            redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .query::<u64>(&mut cluster.node_conn(i))
                .ok()
        })
        .expect("MEMORY USAGE on the key's node")
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn run(cluster: &Cluster, label: &str, n: usize, shards: usize) {
    let mut conn = cluster.conn();
    let inserted = splitmix(0x5eed, n);
    let absent = splitmix(0xab5e, PROBES / 2);
    let probes: Vec<[u8; 8]> = inserted
        .iter()
        .step_by((n / (PROBES / 2)).max(1))
        .take(PROBES / 2)
        .chain(&absent)
        .map(|&k| item(k))
        .collect();

    let start = Instant::now();
    let local = build_here(&inserted, shards);
    let build = start.elapsed();
    let start = Instant::now();
    let summary = local
        .export_to(&mut conn, "by-export", &ClusterExport::default())
        .expect("export");
    let export = start.elapsed();
    let start = Instant::now();
    fill_by_insert(&mut conn, &local, &inserted);
    let by_insert = start.elapsed();

    // The unsharded filter of the same capacity, as one key.
    let one = shaped(n as u64).build().expect("one filter");
    std::thread::scope(|s| {
        for half in inserted.chunks(n.div_ceil(2)) {
            let one = &one;
            s.spawn(move || {
                for chunk in half.chunks(PER_COMMAND) {
                    one.insert_many(chunk.iter().map(|&k| item(k)))
                        .expect("growth suffices");
                }
            });
        }
    });
    one.export_to(&mut conn, "one", ExportMode::Restore { replace: true })
        .expect("one key");

    let remote = ClusterFilter::open(&mut conn, "by-export").expect("open");
    let mut found = Vec::new();
    let start = Instant::now();
    remote
        .contains_many(&mut conn, &probes, &mut found)
        .expect("lookups");
    let sharded_lookups = start.elapsed();
    let sharded_found = found.iter().filter(|&&f| f).count();
    let start = Instant::now();
    let mut one_found = 0;
    for flush in probes.chunks(PER_COMMAND * PER_FLUSH) {
        let mut pipe = redis::cluster::cluster_pipe();
        for command in flush.chunks(PER_COMMAND) {
            let cmd = pipe.cmd("CF.MEXISTS").arg("one");
            for p in command {
                cmd.arg(&p[..]);
            }
        }
        let replies: Vec<Vec<i64>> = pipe.query(&mut conn).expect("CF.MEXISTS");
        one_found += replies.iter().flatten().filter(|&&v| v != 0).count();
    }
    let one_lookups = start.elapsed();

    let shard_bytes: u64 = summary.keys.iter().map(|k| memory_usage(cluster, k)).sum();
    let one_bytes = memory_usage(cluster, "one");
    let absent_probes = PROBES / 2;
    let fp = |found: usize| 100.0 * (found - PROBES / 2) as f64 / absent_probes as f64;

    println!(
        "\n## {label} items, {shards} shards on 3 masters (generation {}, {:.1} MB sent)",
        summary.generation,
        summary.bytes as f64 / 1e6
    );
    println!();
    println!("| fill | wall s | ratio |");
    println!("|---|---:|---:|");
    println!(
        "| (a) client `CF.INSERT`, 1,000 per command, pipelined per node | {:.2} | 1.00x |",
        secs(by_insert)
    );
    println!(
        "| (b) build here, 2 threads ({:.2} s), `export_to` ({:.2} s) | {:.2} | {:.1}x faster |",
        secs(build),
        secs(export),
        secs(build + export),
        secs(by_insert) / secs(build + export)
    );
    println!();
    println!("| lookups through the cluster ({PROBES}, half present) | M/s | false positives |");
    println!("|---|---:|---:|");
    println!(
        "| sharded, `ClusterFilter::contains_many` | {:.2} | {:.3} % |",
        PROBES as f64 / secs(sharded_lookups) / 1e6,
        fp(sharded_found)
    );
    println!(
        "| one key, `CF.MEXISTS` 1,000 per command, pipelined | {:.2} | {:.3} % |",
        PROBES as f64 / secs(one_lookups) / 1e6,
        fp(one_found)
    );
    println!();
    println!(
        "memory on the servers (`MEMORY USAGE`): shards {:.2} bits per item ({shard_bytes} \
         bytes), one key {:.2} bits per item ({one_bytes} bytes)",
        shard_bytes as f64 * 8.0 / n as f64,
        one_bytes as f64 * 8.0 / n as f64
    );
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut cluster.node_conn(0))
        .unwrap();
    for i in 1..3 {
        let _: () = redis::cmd("FLUSHALL")
            .query(&mut cluster.node_conn(i))
            .unwrap();
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument would name a size, but this program
    // measures every size it is given by the environment.
    let shards: usize = std::env::var("ATOMIC_CUCKOO_BENCH_SHARDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let cluster = Cluster::start("sharded_cluster bench", 3);
    for (label, n) in sizes() {
        run(&cluster, &label, n, shards);
    }
}
