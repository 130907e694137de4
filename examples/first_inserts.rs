//! What building a large filter costs, and what its first inserts cost, with the table's pages
//! left to the inserts (the default) or faulted in by `build()` (`--prefault`).
//!
//! ```text
//! cargo run --release --example first_inserts -- [--capacity N] [--items N] [--prefault]
//!     [--no-huge-pages] [--latency]
//! ```
//!
//! Builds `capacity(--capacity)` and times `build()`, then inserts `--items` distinct u64 keys
//! on one thread and reports the time and the process's resident set after the first million,
//! ten million, … inserts, and the total for the build and the inserts. With `--latency` it
//! also times every insert (two clock reads each, about 20 ns apiece, counted in the times) and
//! reports the slowest and how many took over 100 µs. Run each setting in a process of its own:
//! the resident set is the whole process's.

mod common;

use std::time::{Duration, Instant};

use atomic_cuckoo::CuckooFilter;
use common::{Long, Short};

struct Args {
    capacity: usize,
    items: u64,
    prefault: bool,
    huge_pages: bool,
    latency: bool,
}

const USAGE: &str = "\
Usage: first_inserts [--capacity N] [--items N] [--prefault] [--no-huge-pages] [--latency]

Times build() of a large filter and its first inserts, and reports the resident set.

Options:
  --capacity N       items the filter is built for (default 268435456, 1 << 28)
  --items N          distinct u64 keys to insert (default 10000000; `_` may separate digits)
  --prefault         build with prefault(true): every page of the table faulted in by build()
  --no-huge-pages    build with huge_pages(false)
  --latency          time every insert; report the slowest and how many took over 100 µs
  -h, --help         print this help

Run it with `cargo run --release --example first_inserts -- [OPTIONS]`.";

fn parse_args() -> Args {
    common::parse(USAGE, |p| {
        let mut args = Args {
            capacity: 1 << 28,
            items: 10_000_000,
            prefault: false,
            huge_pages: true,
            latency: false,
        };
        while let Some(arg) = p.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("capacity") => args.capacity = common::number(p.value()?, "--capacity")?,
                Long("items") => args.items = common::number(p.value()?, "--items")?,
                Long("prefault") => args.prefault = true,
                Long("no-huge-pages") => args.huge_pages = false,
                Long("latency") => args.latency = true,
                _ => return Err(arg.unexpected()),
            }
        }
        Ok(Some(args))
    })
}

/// Resident set of this process in bytes (Linux `VmRSS`); `None` elsewhere.
fn resident() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<usize>()
        .ok()?;
    Some(kib * 1024)
}

/// The resident set's growth since `base`, in MiB, or "n/a".
fn grown(base: Option<usize>) -> String {
    match (base, resident()) {
        (Some(base), Some(now)) => format!("{:+} MiB", (now as i64 - base as i64) >> 20),
        _ => "n/a".into(),
    }
}

/// The system's transparent huge page setting, as the kernel shows it.
fn thp_mode() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map_or_else(|_| "n/a".into(), |s| s.trim().to_string())
}

/// Slowest insert and inserts over 100 µs, with `--latency`.
#[derive(Default)]
struct Latency {
    slowest: Duration,
    over_100us: u64,
}

/// Inserts `keys`, timing each insert into `latency` if given.
fn insert(filter: &CuckooFilter, keys: std::ops::Range<u64>, latency: Option<&mut Latency>) {
    match latency {
        None => {
            for key in keys {
                filter.insert(&key).expect("the filter has room");
            }
        }
        Some(latency) => {
            for key in keys {
                let start = Instant::now();
                filter.insert(&key).expect("the filter has room");
                let took = start.elapsed();
                latency.slowest = latency.slowest.max(took);
                latency.over_100us += u64::from(took > Duration::from_micros(100));
            }
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let args = parse_args();
    let base = resident();
    let start = Instant::now();
    let filter = CuckooFilter::builder()
        .capacity(args.capacity)
        .huge_pages(args.huge_pages)
        .prefault(args.prefault)
        .build()
        .unwrap_or_else(|e| common::fail(e));
    let build = start.elapsed();
    println!(
        "capacity {} ({} MiB), huge pages {}, prefault {}, THP {}",
        args.capacity,
        filter.memory_usage() >> 20,
        args.huge_pages,
        args.prefault,
        thp_mode()
    );
    println!("build(): {}, resident set {}", ms(build), grown(base));

    let mut checkpoints: Vec<u64> =
        std::iter::successors(Some(1_000_000u64), |n| n.checked_mul(10))
            .take_while(|&n| n < args.items)
            .collect();
    checkpoints.push(args.items);
    let mut latency = args.latency.then(Latency::default);
    let mut inserting = Duration::ZERO;
    let mut done = 0;
    for end in checkpoints {
        let start = Instant::now();
        insert(&filter, done..end, latency.as_mut());
        inserting += start.elapsed();
        done = end;
        let slow = latency.as_ref().map_or(String::new(), |l| {
            format!(
                "; slowest insert {:.1} µs, {} over 100 µs",
                l.slowest.as_secs_f64() * 1e6,
                l.over_100us
            )
        });
        println!(
            "first {end} inserts: {}, resident set {}{slow}",
            ms(inserting),
            grown(base)
        );
    }
    println!("build() + {done} inserts: {}", ms(build + inserting));
    assert_eq!(filter.len(), done as usize);
}
