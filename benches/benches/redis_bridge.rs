//! The Redis bridge against Redis's own way in and out, against a real server that this
//! program starts (Debian's `redis-server` with `.redis-stack/redisbloom.so`, as
//! `scripts/install-redis.sh` installs them; `REDIS_SERVER` and `REDISBLOOM_MODULE` override).
//!
//! For each size N (1M and 10M by default; `ATOMIC_CUCKOO_BENCH_SIZES=1m,10m`), one run:
//! - **fill**: (a) `CF.INSERT key ITEMS …` of 1,000 items per command, pipelined from the
//!   `redis` crate, against (b) building the filter here with two threads (`insert_many`) and
//!   exporting it, by `RESTORE` and by `CF.LOADCHUNK`; wall time, and the server's time
//!   (`INFO commandstats`, every command's `usec` summed, reset before each);
//! - **lookups**: a local replica (`import_from`) answering `contains` on one thread, against
//!   `CF.MEXISTS` of 1,000 items per command, pipelined; half of the probes inserted, half not.
//!
//! ```sh
//! cargo bench -p peer-benches --bench redis_bridge
//! ATOMIC_CUCKOO_BENCH_SIZES=1m cargo bench -p peer-benches --bench redis_bridge
//! ```
//!
//! Client and server share the machine, as they do on a 2-core CI runner.

use std::hint::black_box;
use std::time::{Duration, Instant};

use atomic_cuckoo::redisbloom::{ExportMode, RedisCuckooFilter};
use peer_benches::splitmix;
use redis::Connection;

/// Items per `CF.INSERT` and `CF.MEXISTS`.
const PER_COMMAND: usize = 1_000;
/// Commands per pipeline flush: 100k items, a few MB of requests in flight.
const PER_FLUSH: usize = 100;
/// Lookups measured (half present, half absent).
const PROBES: usize = 2_000_000;

/// The item bytes of a key (what a client sends for it, and what the local filter hashes).
fn item(key: u64) -> [u8; 8] {
    key.to_le_bytes()
}

/// The server's time in microseconds since the last `CONFIG RESETSTAT`: every command's
/// `usec` from `INFO commandstats`, but the `INFO` and `CONFIG` that measure it.
fn server_usec(conn: &mut Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO commandstats");
    info.lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .filter(|l| !l.starts_with("cmdstat_config"))
        .filter_map(|l| {
            l.split(',')
                .find_map(|f| f.strip_prefix("usec="))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

fn reset_stats(conn: &mut Connection) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(conn)
        .expect("CONFIG RESETSTAT");
}

/// Wall time and server time of `f`.
fn measured(conn: &mut Connection, f: impl FnOnce(&mut Connection)) -> (Duration, Duration) {
    reset_stats(conn);
    let start = Instant::now();
    f(conn);
    let wall = start.elapsed();
    (wall, Duration::from_micros(server_usec(conn)))
}

fn drop_key(conn: &mut Connection, key: &str) {
    redis::cmd("DEL").arg(key).query::<i64>(conn).expect("DEL");
}

/// (a): `CF.RESERVE`, then the keys by pipelined `CF.INSERT`.
fn fill_by_insert(conn: &mut Connection, key: &str, keys: &[u64]) {
    redis::cmd("CF.RESERVE")
        .arg(key)
        .arg(keys.len())
        .query::<()>(conn)
        .expect("CF.RESERVE");
    for flush in keys.chunks(PER_COMMAND * PER_FLUSH) {
        let mut pipe = redis::pipe();
        for command in flush.chunks(PER_COMMAND) {
            let cmd = pipe.cmd("CF.INSERT").arg(key).arg("ITEMS");
            for &k in command {
                cmd.arg(&item(k)[..]);
            }
            cmd.ignore();
        }
        pipe.query::<()>(conn).expect("CF.INSERT");
    }
}

/// (b): the same filter (`CF.RESERVE key N`) built here by `threads` threads.
fn build_here(keys: &[u64], threads: usize) -> RedisCuckooFilter {
    let filter = RedisCuckooFilter::reserve(keys.len() as u64).expect("a valid capacity");
    std::thread::scope(|s| {
        for half in keys.chunks(keys.len().div_ceil(threads)) {
            let filter = &filter;
            s.spawn(move || {
                for chunk in half.chunks(PER_COMMAND) {
                    filter
                        .insert_many(chunk.iter().map(|&k| item(k)))
                        .expect("growth up to 32 sub-filters suffices");
                }
            });
        }
    });
    filter
}

/// `CF.MEXISTS` of every probe, pipelined; how many answered true.
fn server_lookups(conn: &mut Connection, key: &str, probes: &[u64]) -> usize {
    let mut found = 0;
    for flush in probes.chunks(PER_COMMAND * PER_FLUSH) {
        let mut pipe = redis::pipe();
        for command in flush.chunks(PER_COMMAND) {
            let cmd = pipe.cmd("CF.MEXISTS").arg(key);
            for &k in command {
                cmd.arg(&item(k)[..]);
            }
        }
        let replies: Vec<Vec<i64>> = pipe.query(conn).expect("CF.MEXISTS");
        found += replies.iter().flatten().filter(|&&v| v != 0).count();
    }
    found
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn ratio(slow: Duration, fast: Duration) -> f64 {
    secs(slow) / secs(fast).max(1e-9)
}

fn run(conn: &mut Connection, label: &str, n: usize) {
    let inserted = splitmix(0x5eed, n);
    let absent = splitmix(0xab5e, PROBES / 2);
    let probes: Vec<u64> = inserted
        .iter()
        .step_by((n / (PROBES / 2)).max(1))
        .take(PROBES / 2)
        .chain(&absent)
        .copied()
        .collect();

    // (a) CF.INSERT.
    let (insert_wall, insert_server) =
        measured(conn, |c| fill_by_insert(c, "by-insert", &inserted));
    // (b) build here, then export each way.
    // Two threads first: this build pays for faulting in fresh memory, as a real one does;
    // the one-thread build after it, for comparison, may reuse that memory.
    let start = Instant::now();
    let local = build_here(&inserted, 2);
    let build = start.elapsed();
    let start = Instant::now();
    black_box(build_here(&inserted, 1));
    let build_alone = start.elapsed();
    let (restore_wall, restore_server) = measured(conn, |c| {
        local
            .export_to(c, "by-restore", ExportMode::Restore { replace: false })
            .expect("RESTORE export");
    });
    let (chunk_wall, chunk_server) = measured(conn, |c| {
        local
            .export_to(c, "by-loadchunk", ExportMode::LoadChunk)
            .expect("CF.LOADCHUNK export");
    });
    let info = local.info();
    println!(
        "\n## {label} items: {} sub-filter(s), {:.1} MiB (one thread builds it again in {:.3} s); \
         Redis's own: {} bytes in memory",
        info.filters,
        info.size as f64 / (1 << 20) as f64,
        secs(build_alone),
        redis::cmd("MEMORY")
            .arg("USAGE")
            .arg("by-insert")
            .query::<i64>(conn)
            .unwrap_or(-1),
    );
    println!();
    println!("| fill | wall s | server s | wall ratio | server ratio |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| (a) `CF.INSERT`, 1,000 per command, pipelined | {:.3} | {:.3} | 1.00x | 1.00x |",
        secs(insert_wall),
        secs(insert_server)
    );
    for (how, wall, server) in [
        ("`RESTORE`", restore_wall, restore_server),
        ("`CF.LOADCHUNK`", chunk_wall, chunk_server),
    ] {
        let total = build + wall;
        println!(
            "| (b) build here, 2 threads ({:.3} s), export by {how} ({:.3} s) | {:.3} | {:.4} | {:.1}x | {:.0}x |",
            secs(build),
            secs(wall),
            secs(total),
            secs(server),
            ratio(insert_wall, total),
            ratio(insert_server, server)
        );
    }

    // Lookups: a replica imported from Redis against CF.MEXISTS.
    let start = Instant::now();
    let replica = RedisCuckooFilter::import_from(conn, "by-insert").expect("import");
    let import = start.elapsed();
    let start = Instant::now();
    let remote_found = server_lookups(conn, "by-insert", &probes);
    let remote = start.elapsed();
    let start = Instant::now();
    let local_found = probes
        .iter()
        .filter(|&&k| replica.contains(item(k)))
        .count();
    let here = start.elapsed();
    assert_eq!(
        local_found, remote_found,
        "the replica answers as the server does"
    );
    // `contains_many` of 1,000 items at a time (as `CF.MEXISTS` gets them), on one thread
    // and on two.
    let many = |part: &[u64]| {
        let mut found = Vec::with_capacity(PER_COMMAND);
        let mut n = 0;
        for command in part.chunks(PER_COMMAND) {
            replica.contains_many(command.iter().map(|&k| item(k)), &mut found);
            n += found.iter().filter(|&&f| f).count();
        }
        n
    };
    let start = Instant::now();
    assert_eq!(
        many(&probes),
        remote_found,
        "contains_many answers as contains"
    );
    let here_many = start.elapsed();
    let start = Instant::now();
    let found: usize = std::thread::scope(|s| {
        let parts: Vec<_> = probes
            .chunks(probes.len().div_ceil(2))
            .map(|part| s.spawn(move || many(part)))
            .collect();
        parts
            .into_iter()
            .map(|p| p.join().expect("lookup thread"))
            .sum()
    });
    let here_two = start.elapsed();
    assert_eq!(found, remote_found);
    let rate = |d: Duration| probes.len() as f64 / secs(d) / 1e6;
    println!();
    println!(
        "| lookups ({} probes, half present) | M/s | ratio |",
        probes.len()
    );
    println!("|---|---:|---:|");
    println!(
        "| `CF.MEXISTS`, 1,000 per command, pipelined | {:.2} | 1.00x |",
        rate(remote)
    );
    for (how, d) in [
        (
            format!(
                "replica `contains`, one thread (imported in {:.3} s)",
                secs(import)
            ),
            here,
        ),
        (
            "replica `contains_many`, 1,000 a call, one thread".to_owned(),
            here_many,
        ),
        (
            "replica `contains_many`, 1,000 a call, two threads".to_owned(),
            here_two,
        ),
    ] {
        println!("| {how} | {:.2} | {:.1}x |", rate(d), ratio(remote, d));
    }
    for key in ["by-insert", "by-restore", "by-loadchunk"] {
        drop_key(conn, key);
    }
}

fn main() {
    if std::env::var_os("REDISBLOOM_MODULE").is_none() {
        // The module sits in the workspace root, not in this package's directory.
        let module = concat!(env!("CARGO_MANIFEST_DIR"), "/../.redis-stack/redisbloom.so");
        std::env::set_var("REDISBLOOM_MODULE", module);
    }
    let server = redis_tests::Server::start("redis_bridge bench");
    let mut conn = server.conn();
    let sizes = std::env::var("ATOMIC_CUCKOO_BENCH_SIZES").unwrap_or_else(|_| "1m,10m".into());
    for size in sizes.split(',') {
        let n = match size.trim().to_ascii_lowercase().as_str() {
            "1m" => 1_000_000,
            "10m" => 10_000_000,
            "100k" => 100_000,
            other => other.parse().expect("a size: 100k, 1m, 10m or a number"),
        };
        run(&mut conn, size.trim(), n);
    }
}
