//! A local, wait-free replica of a cuckoo filter that lives in Redis (RedisBloom `CF.*`): it
//! imports the filter, answers lookups in process, and refreshes itself on an interval, printing
//! what each refresh cost. It also times the same lookups sent to Redis as pipelined
//! `CF.MEXISTS`, for comparison. Its connection has read and write timeouts (30 s), as every
//! connection the bridge uses should: without them a stalled server hangs it.
//!
//! `cargo run --release --features redis --example redis_replica -- [OPTIONS]`

mod common;

use std::sync::{Arc, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::redisbloom::{BridgeError, ExportMode, RedisCuckooFilter};
use common::{Long, Short, ValueExt};

const USAGE: &str = "\
Usage: redis_replica [--url URL] [--key KEY] [--interval SECONDS] [--refreshes N]
                     [--probes N] [--populate N]

Imports the cuckoo filter at KEY from a Redis server with the RedisBloom module, answers
lookups locally, and re-imports it every SECONDS, printing each refresh's cost; times the
same lookups as pipelined CF.MEXISTS (1,000 items per command) for comparison.

Options:
  --url URL            the server (default redis://127.0.0.1:6379/)
  --key KEY            the filter's key (default users)
  --interval SECONDS   time between refreshes, fractions allowed (default 5)
  --refreshes N        refreshes before exiting; 0 runs until killed (default 3)
  --probes N           lookups per round, half of them inserted items (default 1000000)
  --populate N         first build a filter of N items (user:0, user:1, ...) here and
                       export it to KEY with RESTORE REPLACE (default: use KEY as it is)
  -h, --help           print this help

Run it with `cargo run --release --features redis --example redis_replica -- [OPTIONS]`.";

struct Args {
    url: String,
    key: String,
    interval: Duration,
    refreshes: u64,
    probes: u64,
    populate: Option<u64>,
}

fn main() {
    let args = common::parse(USAGE, |p| {
        let mut args = Args {
            url: "redis://127.0.0.1:6379/".to_owned(),
            key: "users".to_owned(),
            interval: Duration::from_secs(5),
            refreshes: 3,
            probes: 1_000_000,
            populate: None,
        };
        while let Some(arg) = p.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("url") => args.url = p.value()?.string()?,
                Long("key") => args.key = p.value()?.string()?,
                Long("interval") => {
                    let secs: f64 = common::number(p.value()?, "--interval")?;
                    args.interval = Duration::try_from_secs_f64(secs)
                        .map_err(|e| format!("bad value {secs} for --interval: {e}"))?;
                }
                Long("refreshes") => args.refreshes = common::number(p.value()?, "--refreshes")?,
                Long("probes") => args.probes = common::number(p.value()?, "--probes")?,
                Long("populate") => args.populate = Some(common::number(p.value()?, "--populate")?),
                _ => return Err(arg.unexpected()),
            }
        }
        Ok(Some(args))
    });

    // Read and write timeouts: without them a server that stalls hangs the bridge for good.
    // Generous ones, since RESTORE and SCANDUMP of a large filter take the server a while.
    let timeout = Some(Duration::from_secs(30));
    let mut conn = redis::Client::open(args.url.as_str())
        .and_then(|c| c.get_connection())
        .and_then(|c| {
            c.set_read_timeout(timeout)?;
            c.set_write_timeout(timeout)?;
            Ok(c)
        })
        .unwrap_or_else(|e| common::fail(format_args!("cannot connect to {}: {e}", args.url)));

    if let Some(n) = args.populate {
        populate(&mut conn, &args.key, n);
    }

    // The replica: readers share it through an Arc, and a refresh swaps in a new one.
    let replica = Arc::new(RwLock::new(Arc::new(refresh(&mut conn, &args.key, 0))));
    let probes: Vec<String> = (0..args.probes)
        .map(|i| {
            if i % 2 == 0 {
                format!("user:{}", i / 2)
            } else {
                format!("absent:{i}")
            }
        })
        .collect();

    let mut round = 0u64;
    loop {
        let current = Arc::clone(&replica.read().expect("not poisoned"));
        lookups(&current, &probes);
        if round == 0 {
            remote_lookups(&mut conn, &args.key, &probes);
        }
        round += 1;
        if args.refreshes != 0 && round > args.refreshes {
            break;
        }
        thread::sleep(args.interval);
        let fresh = Arc::new(refresh(&mut conn, &args.key, round));
        *replica.write().expect("not poisoned") = fresh;
    }
}

/// Builds a filter of `n` items here (all threads) and exports it to `key`.
fn populate(conn: &mut redis::Connection, key: &str, n: u64) {
    let start = Instant::now();
    let filter = RedisCuckooFilter::builder()
        .capacity(n.clamp(4, 1 << 30))
        .bucket_size(4)
        .expansion(2)
        .build()
        .unwrap_or_else(|e| common::fail(format_args!("cannot build the filter: {e}")));
    let threads = thread::available_parallelism().map_or(2, |t| t.get()) as u64;
    thread::scope(|s| {
        for t in 0..threads {
            let filter = &filter;
            s.spawn(move || {
                for i in (t..n).step_by(threads as usize) {
                    if let Err(e) = filter.insert(format!("user:{i}")) {
                        common::fail(format_args!("insert user:{i}: {e}"));
                    }
                }
            });
        }
    });
    let built = start.elapsed();
    let summary = filter
        .export_to(conn, key, ExportMode::Restore { replace: true })
        .unwrap_or_else(|e| match e {
            // Written or not: the reply was lost (a timeout, a dropped connection). Exiting
            // drops the connection, which may still have replies in flight; a rerun replaces
            // the key either way.
            BridgeError::Connection(_) => common::fail(format_args!(
                "export to {key}: {e}; {key} may or may not have been written, or be written \
                 still by a request on its way (run again: REPLACE overwrites it)"
            )),
            e => common::fail(format_args!("export to {key}: {e}")),
        });
    println!(
        "populate: {n} items built here in {:.1} ms ({threads} threads), exported with RESTORE \
         in {:.1} ms ({} bytes, RDB version {:?})",
        built.as_secs_f64() * 1e3,
        (start.elapsed() - built).as_secs_f64() * 1e3,
        summary.bytes,
        summary.rdb_version.unwrap_or_default()
    );
}

/// Imports the filter, printing what it cost.
fn refresh(conn: &mut redis::Connection, key: &str, round: u64) -> RedisCuckooFilter {
    let start = Instant::now();
    let filter = RedisCuckooFilter::import_from(conn, key)
        .unwrap_or_else(|e| common::fail(format_args!("import {key}: {e}")));
    let took = start.elapsed();
    let info = filter.info();
    println!(
        "refresh {round}: imported {key} in {:.2} ms: {} items, {} sub-filters, {:.1} MB \
         ({:.0} MB/s)",
        took.as_secs_f64() * 1e3,
        info.items,
        info.filters,
        info.size as f64 / 1e6,
        info.size as f64 / 1e6 / took.as_secs_f64().max(1e-9)
    );
    filter
}

/// Looks the probes up locally, printing the rate.
fn lookups(filter: &RedisCuckooFilter, probes: &[String]) {
    let start = Instant::now();
    let found = probes.iter().filter(|p| filter.contains(p)).count();
    let took = start.elapsed().as_secs_f64().max(1e-9);
    println!(
        "  local contains: {} lookups in {:.2} ms ({:.1} M/s), {found} found",
        probes.len(),
        took * 1e3,
        probes.len() as f64 / took / 1e6
    );
}

/// The same lookups sent to Redis as pipelined CF.MEXISTS, 1,000 items per command.
fn remote_lookups(conn: &mut redis::Connection, key: &str, probes: &[String]) {
    let start = Instant::now();
    let mut found = 0usize;
    for group in probes.chunks(100_000) {
        let mut pipe = redis::pipe();
        for batch in group.chunks(1000) {
            pipe.cmd("CF.MEXISTS").arg(key).arg(batch);
        }
        let replies: Vec<Vec<i64>> = pipe
            .query(conn)
            .unwrap_or_else(|e| common::fail(format_args!("CF.MEXISTS: {e}")));
        found += replies.iter().flatten().filter(|&&b| b != 0).count();
    }
    let took = start.elapsed().as_secs_f64().max(1e-9);
    println!(
        "  Redis CF.MEXISTS (pipelined, 1,000 per command): {} lookups in {:.2} ms ({:.2} M/s), \
         {found} found",
        probes.len(),
        took * 1e3,
        probes.len() as f64 / took / 1e6
    );
}
