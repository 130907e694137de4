//! A growable filter over a sliding window of live ids, then a burst and `shrink_to_fit`, as a
//! plain loop: does memory follow the live items?
//!
//! ```sh
//! cargo bench -p peer-benches --bench grown_window_quick
//! cargo bench -p peer-benches --bench grown_window_quick -- --window 500000 --ids 8000000 --burst 3500000
//! ```
//!
//! `capacity(1_000).false_positive_rate(--rate).growable(true)` (default 1 %) takes ids from
//! one SplitMix64 stream: each id is inserted and, once `--window` (default 500,000) ids are
//! live, the oldest live one is removed, until `--ids` (default 8,000,000) ids have passed. A
//! row every `--ids / 8` ids: doublings, `memory_usage()` per live id in bits, and the
//! measured rate over `--probes` (default 1,000,000) absent keys. Then a burst: `--burst`
//! (default 3,500,000) more ids live at once, removed again, and `shrink_to_fit()` (timed).
//! Last, a static filter built for `--window` items at the same target, holding the same
//! live ids, for comparison.

use std::time::Instant;

use atomic_cuckoo::CuckooFilter;
use peer_benches::{positive_count, quick_args, splitmix};

/// The stream's seed.
const SEED: u64 = 0x51_1D3;

fn main() {
    let (_, values) = quick_args(&["--window", "--ids", "--burst", "--probes", "--rate"]);
    let (mut window, mut ids, mut burst, mut probes, mut rate) =
        (500_000, 8_000_000, 3_500_000, 1_000_000, 0.01);
    for (flag, value) in &values {
        match flag.as_str() {
            "--window" => window = positive_count(flag, value),
            "--ids" => ids = positive_count(flag, value),
            "--burst" => burst = positive_count(flag, value),
            "--probes" => probes = positive_count(flag, value),
            "--rate" => rate = value.parse().expect("--rate P"),
            _ => unreachable!(),
        }
    }
    // One stream: the probes first, then the ids, then the burst (all distinct).
    let keys = splitmix(SEED, probes + ids + burst);
    let (absent, rest) = keys.split_at(probes);
    let (stream, extra) = rest.split_at(ids);
    let measured = |filter: &CuckooFilter| {
        absent.iter().filter(|k| filter.contains(*k)).count() as f64 / absent.len() as f64
    };
    let bits = |filter: &CuckooFilter| filter.memory_usage() as f64 * 8.0 / filter.len() as f64;
    let mut filter = CuckooFilter::builder()
        .capacity(1_000)
        .false_positive_rate(rate)
        .growable(true)
        .build()
        .unwrap();
    println!(
        "window of {window} live ids over {ids}, target {}, grown from 1,000 (M = 10^6)",
        rate * 100.0
    );
    println!("| ids passed | doublings | bits per live id | measured rate |");
    println!("|---:|---:|---:|---:|");
    let (mut most, mut most_at_full) = (0, None);
    for (i, id) in stream.iter().enumerate() {
        filter.insert(id).unwrap();
        if i >= window {
            assert!(filter.remove(&stream[i - window]));
        }
        most = most.max(filter.memory_usage());
        if i + 1 == window {
            most_at_full = Some(most);
        }
        if (i + 1) % (ids / 8).max(1) == 0 {
            println!(
                "| {:.1}M | {} | {:.2} | {:.3} % |",
                (i + 1) as f64 / 1e6,
                filter.doublings(),
                bits(&filter),
                measured(&filter) * 100.0
            );
        }
    }
    let full = most_at_full.unwrap_or(most);
    println!(
        "most memory once the window was full: {:.2} MiB (when it filled: {:.2} MiB)",
        most as f64 / (1 << 20) as f64,
        full as f64 / (1 << 20) as f64
    );
    for id in extra {
        filter.insert(id).unwrap();
    }
    println!(
        "burst: {} live ids, {} doublings, {:.2} MiB",
        filter.len(),
        filter.doublings(),
        filter.memory_usage() as f64 / (1 << 20) as f64
    );
    for id in extra {
        assert!(filter.remove(id));
    }
    let before = filter.memory_usage();
    let start = Instant::now();
    filter.shrink_to_fit();
    let took = start.elapsed();
    let live = &stream[ids.saturating_sub(window)..];
    assert!(live.iter().all(|id| filter.contains(id)));
    println!(
        "after shrink_to_fit ({:.3} s): {} doublings, {:.2} MiB (was {:.2}), {:.2} bits per live \
         id, measured {:.3} %",
        took.as_secs_f64(),
        filter.doublings(),
        filter.memory_usage() as f64 / (1 << 20) as f64,
        before as f64 / (1 << 20) as f64,
        bits(&filter),
        measured(&filter) * 100.0
    );
    let fixed = CuckooFilter::builder()
        .capacity(window)
        .false_positive_rate(rate)
        .build()
        .unwrap();
    for id in live {
        fixed.insert(id).unwrap();
    }
    println!(
        "static filter for {window}: {:.2} bits per live id, measured {:.3} %",
        bits(&fixed),
        measured(&fixed) * 100.0
    );
}
