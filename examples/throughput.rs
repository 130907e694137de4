//! Throughput harness: size a deployment by measuring this machine.
//!
//! ```text
//! cargo run --release --example throughput -- [--items N] [--threads T] [--reads PERCENT]
//!     [--bits B | --rate R] [--layout packed|compact|one-word] [--seconds S] [--fill FRACTION]
//! ```
//!
//! Fills a filter built for `--items` items from `--threads` threads (with a progress bar),
//! then runs each phase for `--seconds`: lookups of present items, of absent items, batched
//! lookups, a mix of `--reads` percent lookups and the rest writes (inserting and removing fresh
//! items, so the load stays put), and removes. Prints a table of million operations per second,
//! load factor, bits per item and the measured false-positive rate.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::{CuckooFilter, Layout};
use common::{Long, Short};

struct Args {
    items: usize,
    threads: usize,
    reads: u32,
    bits: Option<u32>,
    layout: Layout,
    rate: f64,
    seconds: f64,
    fill: f64,
}

const USAGE: &str = "\
Usage: throughput [--items N] [--threads T] [--reads PERCENT] [--bits B | --rate R]
                  [--layout packed|compact|one-word]
                  [--seconds S] [--fill FRACTION]

Fills a filter and measures each operation's throughput on this machine.

Options:
  --items N          items the filter is built for (default 10000000; `_` may separate digits)
  --threads T        threads (default: the number of CPUs)
  --reads PERCENT    share of lookups in the mixed phase, 0 to 100 (default 90)
  --bits B           fingerprint bits (default: as many as --rate needs)
  --layout L         bucket layout: packed (default), compact or one-word
  --rate R           target false-positive rate (default 0.01)
  --seconds S        seconds each timed phase runs (default 2)
  --fill FRACTION    how full to fill the filter, 0 to 1 (default 0.95)
  -h, --help         print this help

Run it with `cargo run --release --example throughput -- [OPTIONS]`.";

fn parse_args() -> Args {
    common::parse(USAGE, |p| {
        let mut args = Args {
            items: 10_000_000,
            threads: thread::available_parallelism().map_or(2, |n| n.get()),
            reads: 90,
            bits: None,
            layout: Layout::Packed,
            rate: 0.01,
            seconds: 2.0,
            fill: 0.95,
        };
        while let Some(arg) = p.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("items") => args.items = common::number(p.value()?, "--items")?,
                Long("threads") => args.threads = common::number(p.value()?, "--threads")?,
                Long("reads") => args.reads = common::number(p.value()?, "--reads")?,
                Long("bits") => args.bits = Some(common::number(p.value()?, "--bits")?),
                Long("layout") => {
                    args.layout = match p.value()?.to_str() {
                        Some("packed") => Layout::Packed,
                        Some("compact") => Layout::Compact,
                        Some("one-word") => Layout::OneWord,
                        _ => return Err("--layout is packed, compact or one-word".into()),
                    }
                }
                Long("rate") => args.rate = common::number(p.value()?, "--rate")?,
                Long("seconds") => args.seconds = common::number(p.value()?, "--seconds")?,
                Long("fill") => args.fill = common::number(p.value()?, "--fill")?,
                _ => return Err(arg.unexpected()),
            }
        }
        if args.threads == 0 {
            return Err("--threads must be at least 1".into());
        }
        if args.reads > 100 {
            return Err("--reads is a percentage, 0 to 100".into());
        }
        if !(0.0..=1.0).contains(&args.fill) {
            return Err("--fill is a fraction, 0 to 1".into());
        }
        // Each timed phase runs until told to stop: it needs a time that a Duration can hold.
        if !(args.seconds > 0.0 && Duration::try_from_secs_f64(args.seconds).is_ok()) {
            return Err("--seconds must be a positive number".into());
        }
        Ok(Some(args))
    })
}

/// Distinct keys: an odd multiplier and an xor make `i -> key(i)` a bijection on u64.
fn key(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED_5EED_5EED_5EED
}

/// Runs `work(thread, stop)` on every thread for `seconds` (or until all return); returns the
/// total of what they return (operations done) and the wall time the workers measured.
fn timed(
    threads: usize,
    seconds: f64,
    work: impl Fn(usize, &AtomicBool) -> usize + Sync,
) -> (usize, f64) {
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let (ops, spans): (Vec<usize>, Vec<(Instant, Instant)>) = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, barrier, work) = (&stop, &barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let done = work(t, stop);
                    (done, (start, Instant::now()))
                })
            })
            .collect();
        barrier.wait();
        if seconds > 0.0 {
            thread::sleep(Duration::from_secs_f64(seconds));
            stop.store(true, Ordering::Relaxed);
        }
        handles.into_iter().map(|h| h.join().unwrap()).unzip()
    });
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let last = spans.iter().map(|s| s.1).max().unwrap();
    (ops.iter().sum(), (last - first).as_secs_f64())
}

fn progress(done: usize, total: usize, seconds: f64) {
    let width = 30;
    let filled = done * width / total.max(1);
    let rate = done as f64 / seconds.max(1e-9) / 1e6;
    eprint!(
        "\r  fill [{}{}] {:5.1}% {:.1}M/{:.1}M items, {rate:.1} M/s ",
        "#".repeat(filled),
        "-".repeat(width - filled),
        done as f64 * 100.0 / total.max(1) as f64,
        done as f64 / 1e6,
        total as f64 / 1e6,
    );
    let _ = std::io::stderr().flush();
}

fn main() {
    let args = parse_args();
    let mut builder = CuckooFilter::builder().capacity(args.items);
    builder = builder.layout(args.layout);
    builder = match args.bits {
        Some(bits) => builder.fingerprint_bits(bits),
        None => builder.false_positive_rate(args.rate),
    };
    let filter = builder
        .build()
        .unwrap_or_else(|e| common::fail(format_args!("cannot build the filter: {e}")));
    let threads = args.threads;
    let target = ((filter.slots() as f64 * args.fill) as usize).max(threads);
    println!(
        "filter for {} items: {}-bit fingerprints, {} slots, {:.1} MiB; {threads} threads, fill to {:.0} % ({target} items)",
        args.items,
        filter.fingerprint_bits(),
        filter.slots(),
        filter.memory_usage() as f64 / (1 << 20) as f64,
        args.fill * 100.0
    );

    // Fill: thread t inserts keys t, t + threads, ... below `target`.
    let inserted = AtomicUsize::new(0);
    let failures = AtomicUsize::new(0);
    let filled = AtomicBool::new(false);
    let fill_started = Instant::now();
    let (_, fill_secs) = thread::scope(|s| {
        s.spawn(|| {
            while !filled.load(Ordering::Relaxed) {
                progress(
                    inserted.load(Ordering::Relaxed),
                    target,
                    fill_started.elapsed().as_secs_f64(),
                );
                thread::sleep(Duration::from_millis(200));
            }
        });
        let result = timed(threads, 0.0, |t, _| {
            let mut done = 0;
            for i in (t..target).step_by(threads) {
                if filter.insert(&key(i as u64)).is_ok() {
                    done += 1;
                } else {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                if i % 4096 < threads {
                    inserted.fetch_add(done, Ordering::Relaxed);
                    done = 0;
                }
            }
            inserted.fetch_add(done, Ordering::Relaxed);
            0
        });
        filled.store(true, Ordering::Relaxed);
        result
    });
    // The final bar with the fill's own timing (the reporter may have been asleep at the end).
    progress(inserted.load(Ordering::Relaxed), target, fill_secs);
    eprintln!();
    let stored = inserted.load(Ordering::Relaxed);
    let mut rows: Vec<(String, f64)> =
        vec![("insert (fill)".into(), target as f64 / fill_secs / 1e6)];

    let present = |t: usize, stop: &AtomicBool| {
        let (mut done, mut i) = (0usize, t);
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..1024 {
                std::hint::black_box(filter.contains(&key(i as u64)));
                i = (i + threads) % target;
            }
            done += 1024;
        }
        done
    };
    let (ops, secs) = timed(threads, args.seconds, present);
    rows.push(("lookup, present items".into(), ops as f64 / secs / 1e6));

    let false_positives = AtomicUsize::new(0);
    let absent = |t: usize, stop: &AtomicBool| {
        let (mut done, mut hits, mut i) = (0usize, 0usize, t as u64);
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..1024 {
                hits += usize::from(filter.contains(&key((1 << 40) + i)));
                i += threads as u64;
            }
            done += 1024;
        }
        false_positives.fetch_add(hits, Ordering::Relaxed);
        done
    };
    let (absent_ops, secs) = timed(threads, args.seconds, absent);
    rows.push((
        "lookup, absent items".into(),
        absent_ops as f64 / secs / 1e6,
    ));

    let batched = |t: usize, stop: &AtomicBool| {
        let (mut done, mut i) = (0usize, t);
        let (mut batch, mut found) = (Vec::with_capacity(1024), Vec::with_capacity(1024));
        while !stop.load(Ordering::Relaxed) {
            batch.clear();
            for _ in 0..1024 {
                batch.push(key(i as u64));
                i = (i + threads) % target;
            }
            filter.contains_many(&batch, &mut found);
            done += found.len();
        }
        done
    };
    let (ops, secs) = timed(threads, args.seconds, batched);
    rows.push((
        "contains_many, present items".into(),
        ops as f64 / secs / 1e6,
    ));

    // Mix: `reads` % lookups of present items, the rest alternately inserting a fresh key and
    // removing it again.
    let reads = args.reads as usize;
    let mixed = |t: usize, stop: &AtomicBool| {
        let (mut done, mut i, mut fresh) = (0usize, t, (1u64 << 50) + t as u64);
        let mut pending = None;
        while !stop.load(Ordering::Relaxed) {
            for op in 0..100 {
                // Writes spread evenly through each round of 100 operations.
                let writes = 100 - reads;
                if op * writes / 100 == (op + 1) * writes / 100 {
                    std::hint::black_box(filter.contains(&key(i as u64)));
                    i = (i + threads) % target;
                } else if let Some(k) = pending.take() {
                    filter.remove(&key(k));
                } else {
                    // Only what was inserted is removed again (a remove of something never
                    // inserted could take another item's fingerprint).
                    if filter.insert(&key(fresh)).is_ok() {
                        pending = Some(fresh);
                    }
                    fresh += threads as u64;
                }
            }
            done += 100;
        }
        if let Some(k) = pending {
            filter.remove(&key(k));
        }
        done
    };
    let (ops, secs) = timed(threads, args.seconds, mixed);
    rows.push((format!("mixed, {reads} % lookups"), ops as f64 / secs / 1e6));

    // Removes: each thread removes its share of the first half of the items (then they are put
    // back, untimed).
    let removals = target / 2;
    let (ops, secs) = timed(threads, 0.0, |t, _| {
        (t..removals)
            .step_by(threads)
            .filter(|&i| filter.remove(&key(i as u64)))
            .count()
    });
    rows.push(("remove".into(), ops as f64 / secs / 1e6));
    for i in 0..removals {
        let _ = filter.insert(&key(i as u64));
    }

    let measured = false_positives.load(Ordering::Relaxed) as f64 / absent_ops as f64;
    println!("\n| operation ({threads} threads) | M ops/s |");
    println!("|---|---:|");
    for (name, rate) in &rows {
        println!("| {name} | {rate:.1} |");
    }
    println!();
    println!("| filter | value |");
    println!("|---|---:|");
    println!(
        "| items stored | {} ({} inserts failed) |",
        filter.len(),
        failures.load(Ordering::Relaxed)
    );
    println!("| load factor | {:.3} |", filter.load_factor());
    println!(
        "| bits per item | {:.2} |",
        filter.memory_usage() as f64 * 8.0 / filter.len().max(1) as f64
    );
    println!(
        "| false-positive rate | {:.4} % measured over {absent_ops} lookups, {:.4} % predicted |",
        measured * 100.0,
        filter.false_positive_rate() * 100.0
    );
    assert!(stored > 0);
}
