//! Insert latency while a filter grows: how long the inserts that double its table take, and
//! the inserts that finish a doubling's splits.
//!
//! ```text
//! cargo run --release --example growth_latency -- [--items N] [--no-huge-pages] [--attribute]
//! ```
//!
//! Builds `capacity(1_000).growable(true)`, inserts `--items` (default 10,000,000) distinct u64
//! keys on one thread, times every insert, and prints the distribution, then the inserts that
//! started a doubling on their own, and the worst insert while a doubling was still splitting
//! buckets (each such insert splits two old buckets). Timing one insert costs two clock reads
//! (about 20 ns each), which the figures include. On a shared machine the overall maximum also
//! catches the scheduler preempting this thread; the growth inserts are reported apart so a
//! stall is not confused with that. `--attribute` (Linux) also reads the thread's page faults
//! and involuntary context switches around every insert (outside the timed span, but slowing
//! the run) and lists each insert over 100 µs with them: a slow insert with a context switch
//! was preempted.

mod common;

use std::time::{Duration, Instant};

use atomic_cuckoo::CuckooFilter;
use common::{Long, Short};

struct Args {
    items: u64,
    huge_pages: bool,
    attribute: bool,
}

const USAGE: &str = "\
Usage: growth_latency [--items N] [--no-huge-pages] [--attribute]

Times every insert while a growable filter grows from 1,000 items, and prints the
distribution, the inserts that doubled the filter, and the worst insert while a doubling
was being finished.

Options:
  --items N          distinct u64 keys to insert (default 10000000; `_` may separate digits)
  --no-huge-pages    build with huge_pages(false)
  --attribute        read page faults and context switches around each insert (Linux)
  -h, --help         print this and exit";

fn parse_args() -> Args {
    common::parse(USAGE, |p| {
        let mut args = Args {
            items: 10_000_000,
            huge_pages: true,
            attribute: false,
        };
        while let Some(arg) = p.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("items") => args.items = common::number(p.value()?, "--items")?,
                Long("no-huge-pages") => args.huge_pages = false,
                Long("attribute") => args.attribute = true,
                _ => return Err(arg.unexpected()),
            }
        }
        Ok(Some(args))
    })
}

/// One insert that started a doubling.
struct Growth {
    index: u64,
    doublings_after: u32,
    nanos: u32,
}

/// The inserts made while a doubling was unfinished (each splits old buckets as it goes).
#[derive(Default)]
struct Splitting {
    count: u64,
    worst_nanos: u32,
    worst_index: u64,
}

/// One insert over `SLOW`, with what happened to its thread meanwhile (`--attribute`).
struct Slow {
    index: u64,
    nanos: u32,
    faults: i64,
    switches: i64,
}

const SLOW: Duration = Duration::from_micros(100);

fn main() {
    let args = parse_args();
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .growable(true)
        .huge_pages(args.huge_pages)
        .build()
        .expect("a 1,000-item growable filter builds");
    // Written once before timing, so the buffer's own page faults stay out of the loop.
    let mut nanos = vec![u32::MAX; args.items as usize];
    let mut growths = Vec::new();
    let mut splitting = Splitting::default();
    let mut slow = Vec::new();
    let start = Instant::now();
    for (key, slot) in (0..args.items).zip(nanos.iter_mut()) {
        let doublings = filter.doublings();
        let was_doubling = filter.is_doubling();
        let events = if args.attribute {
            thread_events()
        } else {
            [0; 2]
        };
        let t = Instant::now();
        filter
            .insert(&key)
            .expect("a growable filter accepts every distinct key");
        let took = t.elapsed();
        *slot = u32::try_from(took.as_nanos()).unwrap_or(u32::MAX);
        if filter.doublings() != doublings {
            growths.push(Growth {
                index: key,
                doublings_after: filter.doublings(),
                nanos: *slot,
            });
        } else if was_doubling {
            splitting.count += 1;
            if *slot > splitting.worst_nanos {
                splitting.worst_nanos = *slot;
                splitting.worst_index = key;
            }
        }
        if args.attribute && took > SLOW {
            let [faults, switches] = thread_events();
            slow.push(Slow {
                index: key,
                nanos: *slot,
                faults: faults - events[0],
                switches: switches - events[1],
            });
        }
    }
    let total = start.elapsed();
    report(&filter, &mut nanos, &growths, &splitting, total);
    if args.attribute {
        report_slow(&slow);
    }
}

/// Page faults and involuntary context switches of this thread so far.
#[cfg(target_os = "linux")]
fn thread_events() -> [i64; 2] {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes at most one `rusage` into the buffer, which holds one; all-zero
    // bytes are a valid `rusage` (integers only), so it is initialised even if the call fails.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr());
        usage.assume_init()
    };
    [usage.ru_minflt + usage.ru_majflt, usage.ru_nivcsw]
}

#[cfg(not(target_os = "linux"))]
fn thread_events() -> [i64; 2] {
    [0; 2]
}

fn report_slow(slow: &[Slow]) {
    let preempted = slow.iter().filter(|s| s.switches > 0).count();
    println!(
        "{} inserts over {} µs, {preempted} of them preempted (involuntary context switch):",
        slow.len(),
        SLOW.as_micros()
    );
    for s in slow {
        println!(
            "  insert {:>9}: {}, {} page faults, {} switches",
            s.index,
            micros(s.nanos),
            s.faults,
            s.switches
        );
    }
}

fn report(
    filter: &CuckooFilter,
    nanos: &mut [u32],
    growths: &[Growth],
    splitting: &Splitting,
    total: Duration,
) {
    let count = nanos.len();
    if count == 0 {
        println!("no inserts");
        return;
    }
    let sum: u64 = nanos.iter().map(|&n| u64::from(n)).sum();
    nanos.sort_unstable();
    let quantile = |q: f64| nanos[((count as f64 * q) as usize).min(count - 1)];
    println!(
        "{count} inserts in {:.2} s, {} doublings{}, {:.1} MiB",
        total.as_secs_f64(),
        filter.doublings(),
        if filter.is_doubling() {
            " (the last one unfinished)"
        } else {
            ""
        },
        filter.memory_usage() as f64 / (1 << 20) as f64
    );
    println!(
        "mean {:.0} ns, p99 {} ns, p99.9 {} ns, p99.99 {} ns, max {}",
        sum as f64 / count as f64,
        quantile(0.99),
        quantile(0.999),
        quantile(0.9999),
        micros(nanos[count - 1])
    );
    let worst = growths.iter().map(|g| g.nanos).max().unwrap_or(0);
    println!(
        "{} growth inserts, worst {}; slowest inserts: {}",
        growths.len(),
        micros(worst),
        nanos[count.saturating_sub(5)..]
            .iter()
            .rev()
            .map(|&n| micros(n))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "{} inserts while a doubling was unfinished, worst {} (insert {})",
        splitting.count,
        micros(splitting.worst_nanos),
        splitting.worst_index
    );
    for g in growths {
        println!(
            "  insert {:>9} -> {:>2} doublings: {}",
            g.index,
            g.doublings_after,
            micros(g.nanos)
        );
    }
}

fn micros(nanos: u32) -> String {
    format!("{:.1} µs", f64::from(nanos) / 1000.0)
}
