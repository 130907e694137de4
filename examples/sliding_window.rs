//! A growable filter used as a sliding window: the memory it holds for the window's live ids
//! after a longer stream has passed through it, beside a static filter holding the same ids.
//!
//! ```text
//! cargo run --release --example sliding_window -- [--live N] [--ids N] [--rate P]
//! ```
//!
//! Builds `capacity(1_000).growable(true)` (`--rate`, default 0.01) and slides a window of
//! `--live` (default 500,000) ids over `--ids` (default 8,000,000): each new id is inserted and
//! the one leaving the window removed. The filter doubles only while the live ids fill it, so
//! it ends sized for the window, not for the stream. Then prints its doublings, bits per live
//! id (`memory_usage() * 8 / len()`), the measured false-positive rate over 1,000,000 ids
//! never inserted, and the rate of those absent lookups on one thread (best of three timed
//! passes): as the stream left it, after `finish_doubling()` where a doubling was unfinished,
//! and after `shrink_to_fit()`, which does not halve a growable filter's table (its memory is
//! the same before and after, and the report says so); and the same for a static
//! `capacity(live)` filter holding the window's last ids. Plain timed loops, fixed keys: every
//! run does the same work.

mod common;

use std::time::Instant;

use atomic_cuckoo::CuckooFilter;
use common::{Long, Short};

const ABSENT: u64 = 1_000_000;
/// Absent ids start here, far above every inserted one.
const ABSENT_BASE: u64 = 1 << 40;

const USAGE: &str = "\
Usage: sliding_window [--live N] [--ids N] [--rate P]

Slides a window of live ids over a growable filter, then reports its memory, measured
false-positive rate and absent lookups, beside a static filter holding the same ids.

Options:
  --live N     ids in the window (default 500000; `_` may separate digits)
  --ids N      ids slid through it, at least --live (default 8000000)
  --rate P     target false-positive rate, between 0 and 1 (default 0.01)
  -h, --help   print this and exit";

fn parse_args() -> (u64, u64, f64) {
    let (live, ids, rate) = common::parse(USAGE, |p| {
        let (mut live, mut ids, mut rate) = (500_000u64, 8_000_000u64, 0.01f64);
        while let Some(arg) = p.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("live") => live = common::number(p.value()?, "--live")?,
                Long("ids") => ids = common::number(p.value()?, "--ids")?,
                Long("rate") => rate = common::number(p.value()?, "--rate")?,
                _ => return Err(arg.unexpected()),
            }
        }
        Ok(Some((live, ids, rate)))
    });
    if live == 0 || ids < live {
        common::fail("need 0 < --live <= --ids");
    }
    if !(rate > 0.0 && rate < 1.0) {
        common::fail("need 0 < --rate < 1");
    }
    (live, ids, rate)
}

/// The share of absent ids found, and absent lookups per second (best of three passes).
fn absent_lookups(filter: &CuckooFilter) -> (f64, f64) {
    let mut best = f64::INFINITY;
    let mut hits = 0;
    for _ in 0..3 {
        let start = Instant::now();
        hits = (ABSENT_BASE..ABSENT_BASE + ABSENT)
            .filter(|id| filter.contains(id))
            .count();
        best = best.min(start.elapsed().as_secs_f64());
    }
    (hits as f64 / ABSENT as f64, ABSENT as f64 / best)
}

fn report(what: &str, filter: &CuckooFilter) {
    let bits = filter.memory_usage() as f64 * 8.0 / filter.len() as f64;
    let (rate, per_second) = absent_lookups(filter);
    let doubling = if filter.is_doubling() {
        ", unfinished"
    } else {
        ""
    };
    println!(
        "{what:<30} doublings {:>2}{doubling:<12}  {bits:6.2} bits/live id  \
         measured FPR {:.3} % (expected {:.3} %)  absent lookups {:6.2} M/s  memory {:.2} MiB",
        filter.doublings(),
        rate * 100.0,
        filter.false_positive_rate() * 100.0,
        per_second / 1e6,
        filter.memory_usage() as f64 / (1 << 20) as f64,
    );
}

fn main() {
    let (live, ids, rate) = parse_args();
    let mut filter = CuckooFilter::builder()
        .capacity(1_000)
        .growable(true)
        .false_positive_rate(rate)
        .build()
        .expect("a valid configuration");
    let start = Instant::now();
    for id in 0..ids {
        filter.insert(&id).expect("the window fits");
        if id >= live {
            assert!(filter.remove(&(id - live)), "a live id was not found");
        }
    }
    println!(
        "window of {live} ids slid over {ids} in {:.2} s; {} live",
        start.elapsed().as_secs_f64(),
        filter.len()
    );
    report("growable, as the stream left it", &filter);
    if filter.is_doubling() {
        let start = Instant::now();
        filter.finish_doubling();
        println!(
            "finish_doubling: {:.2} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
        report("growable, doubling finished", &filter);
    }
    assert!((ids - live..ids).all(|id| filter.contains(&id)));
    let before = filter.memory_usage();
    let start = Instant::now();
    filter.shrink_to_fit();
    let after = filter.memory_usage();
    // A growable table never halves yet: say so rather than print a second, identical row.
    println!(
        "shrink_to_fit: {:.2} ms, memory {:.2} MiB before and {:.2} MiB after{}",
        start.elapsed().as_secs_f64() * 1e3,
        before as f64 / (1 << 20) as f64,
        after as f64 / (1 << 20) as f64,
        if after == before {
            " (a growable filter keeps its table)"
        } else {
            ""
        }
    );
    if after != before {
        report("growable, after shrink_to_fit", &filter);
    }
    assert!((ids - live..ids).all(|id| filter.contains(&id)));

    let fixed = CuckooFilter::builder()
        .capacity(live as usize)
        .false_positive_rate(rate)
        .build()
        .expect("a valid configuration");
    fixed.insert_many(ids - live..ids).expect("the window fits");
    report(&format!("static capacity({live})"), &fixed);
}
