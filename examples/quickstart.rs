//! A short concurrent workload: several threads fill one shared filter, then look up items that
//! are in it and items that are not. Prints throughput, load, and the measured false-positive
//! rate next to the predicted one.
//!
//! `cargo run --release --example quickstart -- [--items N] [--threads T]`

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Instant;

use atomic_cuckoo::CuckooFilter;
use common::{Long, Short, Value};

const USAGE: &str = "\
Usage: quickstart [--items N] [--threads T]

Fills one shared filter built for N items from T threads, then looks up items that are in it
and items that are not; prints throughput, load and the false-positive rate.

Options:
  --items N     items to insert (default 2000000; `_` may separate digits)
  --threads T   threads (default: the number of CPUs)
  -h, --help    print this help

N and T may also be given in that order without their flags: quickstart [N [T]].
Run it with `cargo run --release --example quickstart -- [OPTIONS]`.";

fn main() {
    let (items, threads) = common::parse(USAGE, |p| {
        let mut items = 2_000_000;
        let mut threads = thread::available_parallelism().map_or(2, |n| n.get());
        let mut positional = 0;
        while let Some(arg) = p.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("items") => items = common::number(p.value()?, "--items")?,
                Long("threads") => threads = common::number(p.value()?, "--threads")?,
                Value(v) if positional == 0 => (items, positional) = (common::number(v, "N")?, 1),
                Value(v) if positional == 1 => (threads, positional) = (common::number(v, "T")?, 2),
                _ => return Err(arg.unexpected()),
            }
        }
        if threads == 0 {
            return Err("--threads must be at least 1".into());
        }
        Ok(Some((items, threads)))
    });

    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(items)
            .false_positive_rate(0.01)
            .build()
            .unwrap_or_else(|e| common::fail(format_args!("cannot build the filter: {e}"))),
    );
    println!("{filter:?}\n");

    // Items are u64s; thread t owns items t, t + threads, t + 2 * threads, ...
    let inserts = run(&filter, threads, items, |f, i| {
        f.insert(&i)
            .expect("the filter was built for this many items");
        true
    });
    let present = run(&filter, threads, items, |f, i| f.contains(&i));
    let absent = run(&filter, threads, items, |f, i| f.contains(&(i + (1 << 48))));

    assert_eq!(present.hits, items, "no false negatives");
    let measured = absent.hits as f64 / items as f64;
    println!("{threads} threads, {items} items");
    println!("  insert            {:>8.1} M ops/s", inserts.mops);
    println!("  lookup (present)  {:>8.1} M ops/s", present.mops);
    println!("  lookup (absent)   {:>8.1} M ops/s", absent.mops);
    println!("  load factor       {:>8.3}", filter.load_factor());
    println!(
        "  bits per item     {:>8.2}",
        filter.memory_usage() as f64 * 8.0 / filter.len() as f64
    );
    println!(
        "  false positives   {:>8.3} % measured, {:.3} % predicted",
        measured * 100.0,
        filter.false_positive_rate() * 100.0
    );
}

struct Phase {
    mops: f64,
    hits: usize,
}

/// Runs `op` over all items, split across threads; returns throughput and how often `op` said
/// true.
fn run(
    filter: &Arc<CuckooFilter>,
    threads: usize,
    items: usize,
    op: fn(&CuckooFilter, u64) -> bool,
) -> Phase {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let filter = Arc::clone(filter);
            thread::spawn(move || {
                (t..items)
                    .step_by(threads)
                    .filter(|&i| op(&filter, i as u64))
                    .count()
            })
        })
        .collect();
    let hits = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let secs = start.elapsed().as_secs_f64();
    Phase {
        mops: items as f64 / secs / 1e6,
        hits,
    }
}
