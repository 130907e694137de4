//! A nightly job and the services that use its output: it builds a sharded RedisBloom filter of
//! many ids on every core, publishes it to a Redis Cluster as one logical filter (one key per
//! shard, spread over the masters, and a manifest that switches readers to the new generation
//! at once), and then services query it in place, each with its own cluster connection.
//!
//! `cargo run --release --features redis-cluster --example sharded_ids -- [OPTIONS]`
//! (`scripts/redis-cluster.sh start DIR` starts a local cluster to try it on).

mod common;

use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::redisbloom::{
    ClusterError, ClusterExport, ClusterFilter, RedisCuckooFilter, ShardedFilter,
};
use common::{Long, Short, ValueExt};

const USAGE: &str = "\
Usage: sharded_ids [--nodes URL[,URL...]] [--name NAME] [--ids N] [--shards N]
                   [--threads N] [--services N] [--probes N]

Builds a sharded cuckoo filter of the ids id:0 .. id:N-1 here, on THREADS threads; publishes
it to the Redis Cluster at NODES as the filter NAME (each shard one RESTORE, then the
manifest); then SERVICES threads, each with its own cluster connection, look up PROBES ids
(half of them inserted) through the cluster, and report what they found.

Options:
  --nodes URL[,URL...]  cluster nodes to start from (default redis://127.0.0.1:7000/)
  --name NAME           the filter's name, its manifest key (default ids)
  --ids N               ids to insert (default 200_000_000)
  --shards N            shards, 1 to 16384 (default 16)
  --threads N           threads that build the filter (default: every core)
  --services N          threads that query it (default 2)
  --probes N            lookups per service (default 200_000)
  -h, --help            print this help

Start a local cluster with `scripts/redis-cluster.sh start DIR`, which prints its node URLs.";

struct Args {
    nodes: Vec<String>,
    name: String,
    ids: u64,
    shards: usize,
    threads: usize,
    services: usize,
    probes: u64,
}

fn main() {
    let args = common::parse(USAGE, |p| {
        let mut args = Args {
            nodes: vec!["redis://127.0.0.1:7000/".to_owned()],
            name: "ids".to_owned(),
            ids: 200_000_000,
            shards: 16,
            threads: thread::available_parallelism().map_or(2, |t| t.get()),
            services: 2,
            probes: 200_000,
        };
        while let Some(arg) = p.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("nodes") => {
                    args.nodes = p.value()?.string()?.split(',').map(str::to_owned).collect()
                }
                Long("name") => args.name = p.value()?.string()?,
                Long("ids") => args.ids = common::number(p.value()?, "--ids")?,
                Long("shards") => args.shards = common::number(p.value()?, "--shards")?,
                Long("threads") => args.threads = common::number(p.value()?, "--threads")?,
                Long("services") => args.services = common::number(p.value()?, "--services")?,
                Long("probes") => args.probes = common::number(p.value()?, "--probes")?,
                _ => return Err(arg.unexpected()),
            }
        }
        for (value, name) in [
            (args.ids, "--ids"),
            (args.threads as u64, "--threads"),
            (args.services as u64, "--services"),
        ] {
            if value == 0 {
                return Err(format!("{name} must be at least 1").into());
            }
        }
        Ok(Some(args))
    });

    // The URLs are checked before the build, which takes a while.
    let client = redis::cluster::ClusterClient::builder(args.nodes.clone())
        .connection_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(60))
        .build()
        .unwrap_or_else(|e| common::fail(format_args!("bad --nodes {:?}: {e}", args.nodes)));
    let filter = build(&args);
    let connect = || {
        client
            .get_connection()
            .unwrap_or_else(|e| common::fail(format_args!("cannot reach the cluster: {e}")))
    };
    publish(&filter, &mut connect(), &args.name);
    drop(filter);
    thread::scope(|s| {
        for service in 0..args.services {
            let (args, mut conn) = (&args, connect());
            s.spawn(move || query(&mut conn, args, service));
        }
    });
}

/// The filter of `args.ids` ids, built on `args.threads` threads: each inserts its share in
/// batches of 100,000 (`insert_many` hashes and prefetches 32 at a time).
fn build(args: &Args) -> ShardedFilter {
    // Buckets of 4 and up to 500 kicks fill a shard to its capacity; RedisBloom's defaults
    // (buckets of 2, 20 kicks) start a second sub-filter at about half load. 5 % headroom.
    let per_shard = (args.ids + args.ids / 20).div_ceil(args.shards.max(1) as u64);
    let shard = RedisCuckooFilter::builder()
        .capacity(per_shard.max(8))
        .bucket_size(4)
        .max_iterations(500);
    let filter = ShardedFilter::with_builder(args.shards, &shard)
        .unwrap_or_else(|e| common::fail(format_args!("cannot build the filter: {e}")));
    let start = Instant::now();
    let threads = args.threads as u64;
    thread::scope(|s| {
        for t in 0..threads {
            let filter = &filter;
            let (from, to) = (args.ids * t / threads, args.ids * (t + 1) / threads);
            s.spawn(move || {
                let mut at = from;
                while at < to {
                    let end = (at + 100_000).min(to);
                    let stored = filter
                        .insert_many((at..end).map(|i| format!("id:{i}")))
                        .unwrap_or_else(|e| common::fail(format_args!("insert: {e}")));
                    if let Some(k) = stored.iter().position(|&s| !s) {
                        common::fail(format_args!("no room for id:{}", at + k as u64));
                    }
                    at = end;
                }
            });
        }
    });
    let took = start.elapsed().as_secs_f64();
    println!(
        "build: {} ids in {} shards on {threads} threads in {took:.2} s ({:.1} M ids/s), \
         {:.1} MB",
        args.ids,
        args.shards,
        args.ids as f64 / took / 1e6,
        filter.memory_usage() as f64 / 1e6
    );
    filter
}

/// Publishes the filter as `name`.
fn publish(filter: &ShardedFilter, conn: &mut redis::cluster::ClusterConnection, name: &str) {
    let start = Instant::now();
    let summary = filter
        .export_to(conn, name, &ClusterExport::default())
        .unwrap_or_else(|e| match e {
            ClusterError::Manifest { .. } => common::fail(format_args!(
                "publish {name}: {e} (run again to publish anew)"
            )),
            e => common::fail(format_args!("publish {name}: {e}")),
        });
    let took = start.elapsed().as_secs_f64();
    println!(
        "publish: generation {} of {name} in {took:.2} s: {} shard keys, {:.1} MB sent \
         ({:.0} MB/s), {} commands",
        summary.generation,
        summary.keys.len(),
        summary.bytes as f64 / 1e6,
        summary.bytes as f64 / 1e6 / took.max(1e-9),
        summary.commands
    );
    if !summary.unretired.is_empty() {
        println!(
            "publish: delete these keys of the old generation once their nodes are back: {:?}",
            summary.unretired
        );
    }
}

/// One service: opens the filter and looks up `args.probes` ids, half inserted, half not.
fn query(conn: &mut redis::cluster::ClusterConnection, args: &Args, service: usize) {
    let filter = ClusterFilter::open(conn, &args.name)
        .unwrap_or_else(|e| common::fail(format_args!("service {service}: {e}")));
    let mut rng = common::Rng::new(0x5E41_u64 + service as u64);
    let (present, absent): (Vec<String>, Vec<String>) = (0..args.probes / 2)
        .map(|i| {
            (
                format!("id:{}", rng.below(args.ids)),
                format!("absent:{service}:{i}"),
            )
        })
        .unzip();
    let start = Instant::now();
    let mut found = Vec::new();
    let mut ask = |items: &[String], found: &mut Vec<bool>| {
        filter
            .contains_many(conn, items, found)
            .unwrap_or_else(|e| common::fail(format_args!("service {service}: {e}")));
        found.iter().filter(|&&f| f).count()
    };
    let hits = ask(&present, &mut found);
    let false_positives = ask(&absent, &mut found);
    let took = start.elapsed().as_secs_f64();
    if hits != present.len() {
        common::fail(format_args!(
            "service {service}: {} of {} inserted ids not found",
            present.len() - hits,
            present.len()
        ));
    }
    println!(
        "service {service}: generation {}, {} lookups through the cluster in {took:.2} s \
         ({:.2} M/s): every inserted id found, {:.3} % false positives",
        filter.generation(),
        present.len() + absent.len(),
        (present.len() + absent.len()) as f64 / took / 1e6,
        100.0 * false_positives as f64 / absent.len().max(1) as f64
    );
}
