//! Growth and lookups against thread count: a growable `CuckooFilter` grown from
//! `capacity(1_000)` at a 1 % target by threads that share it, beside a static `CuckooFilter`
//! of `capacity(n)` that the same threads fill with the same keys, in one run. A plain timed
//! harness that prints one Markdown table per size.
//!
//! ```sh
//! ATOMIC_CUCKOO_BENCH_THREADS=1,2,4,8,16 ATOMIC_CUCKOO_BENCH_SIZES=1m,50m \
//!     cargo bench -p peer-benches --bench grown_scaling_quick -- --rounds 3
//! ```
//!
//! Workloads, each point the median of `--rounds` (default 3):
//! - `grow`: `threads` threads insert the size's keys (SplitMix64) into a fresh filter, each
//!   its own share; keys over the wall time from the first thread's start to the last end (for
//!   the static filter, a fill without growth; for the growable filter built for the size,
//!   `growable, sized`, a fill of the same table kind without doublings).
//! - `absent` and `present`: on the filter the last round grew, each thread looks up keys from
//!   its own offset (absent ones from another stream) for `--seconds` (default 0.3).

use std::hint::black_box;

use atomic_cuckoo::CuckooFilter;
use peer_benches::peers::{on_threads, timed_rate};
use peer_benches::{bench_threads, quick_args, quick_sizes, splitmix};

fn grown(_items: usize) -> CuckooFilter {
    let builder = CuckooFilter::builder().capacity(1_000).growable(true);
    builder.false_positive_rate(0.01).build().unwrap()
}

/// A growable filter built for `items`: it fills without doubling, so the growth's own cost is
/// the gap between `grown` and this.
fn sized(items: usize) -> CuckooFilter {
    let builder = CuckooFilter::builder().capacity(items).growable(true);
    builder.false_positive_rate(0.01).build().unwrap()
}

fn fixed(items: usize) -> CuckooFilter {
    let builder = CuckooFilter::builder().capacity(items);
    builder.false_positive_rate(0.01).build().unwrap()
}

/// M lookups per second of `keys` by `threads` threads, each from its own offset.
fn lookup_rate(filter: &CuckooFilter, keys: &[u64], threads: usize, seconds: f64) -> f64 {
    let stride = keys.len() / threads;
    timed_rate(threads, seconds, |t, i| {
        black_box(filter.contains(&keys[(t * stride + i) % keys.len()]));
    })
}

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// One filter kind's rows at one size: grow, then absent and present lookups, per thread count.
fn measure(
    name: &str,
    build: fn(usize) -> CuckooFilter,
    keys: &[u64],
    absent: &[u64],
    threads: &[usize],
    rounds: usize,
    seconds: f64,
) -> Vec<String> {
    let mut rows = Vec::new();
    for &t in threads {
        let mut grow = Vec::new();
        let mut kept = None;
        for _ in 0..rounds {
            let filter = build(keys.len());
            let shares: Vec<&[u64]> = keys.chunks(keys.len().div_ceil(t)).collect();
            let (spent, stored) = on_threads(t, |i| {
                let share = shares.get(i).copied().unwrap_or(&[]);
                share.iter().filter(|k| filter.insert(k).is_ok()).count()
            });
            assert_eq!(
                stored.iter().sum::<usize>(),
                keys.len(),
                "{name}: inserts refused"
            );
            grow.push(keys.len() as f64 / spent.as_secs_f64() / 1e6);
            kept = Some(filter);
        }
        let filter = kept.expect("at least one round");
        let found = absent.iter().filter(|k| filter.contains(k)).count();
        let reads = |probes: &[u64]| {
            median(
                (0..rounds)
                    .map(|_| lookup_rate(&filter, probes, t, seconds))
                    .collect(),
            )
        };
        let (absent_rate, present_rate) = (reads(absent), reads(keys));
        let row = format!(
            "| {name} | {t} | {:.2} | {absent_rate:.2} | {present_rate:.2} | {:.2} | {:.3} % |",
            median(grow),
            filter.memory_usage() as f64 * 8.0 / filter.len() as f64,
            100.0 * found as f64 / absent.len() as f64,
        );
        println!("{row}");
        rows.push(row);
    }
    rows
}

fn main() {
    let (rounds, values) = quick_args(&["--seconds"]);
    let seconds = values.first().map_or(0.3, |(_, s)| {
        s.parse()
            .ok()
            .filter(|s: &f64| *s > 0.0)
            .expect("--seconds S (S > 0)")
    });
    let threads = bench_threads("1,2");
    for (items, label) in quick_sizes() {
        let keys = splitmix(0x5CA1E, items);
        let absent = splitmix(0xAB5E47, items.min(4_000_000));
        let mut rows = measure("growable", grown, &keys, &absent, &threads, rounds, seconds);
        rows.extend(measure(
            "growable, sized",
            sized,
            &keys,
            &absent,
            &threads,
            rounds,
            seconds,
        ));
        rows.extend(measure(
            "static", fixed, &keys, &absent, &threads, rounds, seconds,
        ));
        println!("\n{label} items, growable from 1,000 and static, at 1 %; M operations per second, median of {rounds}:\n");
        println!("| filter | threads | grow | absent lookups | present lookups | bits/item | measured rate |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for row in rows {
            println!("{row}");
        }
    }
}
