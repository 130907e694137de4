//! Lookups in a grown filter against one level of the same final size (issue 13, part 1), as
//! a plain timed loop: every contender once per round, rounds interleaved (a noisy stretch of a
//! shared machine hits all alike), median of the rounds. Prints M lookups/s and the ratio of
//! each grown filter to the one-level filter of its size.
//!
//! ```sh
//! cargo bench -p peer-benches --bench grown_quick -- --rounds 5
//! ATOMIC_CUCKOO_BENCH_SIZES=1m,50m cargo bench -p peer-benches --bench grown_quick
//! ```
//!
//! `--only one` (or `grown`) times one contender alone, for a profiler.
//!
//! Contenders, for `n` items: `capacity(n)` (one level), and `capacity(1_000).expansion(2)`
//! filled with the same `n` keys (10 levels at 1M, 16 at 50M), both with the 1 % default rate.
//! Present keys are spread evenly over the insertion order (so each level gets its share, and
//! half are in the newest level); absent keys are fresh. Keys are u64s from a seeded generator, hashed by the filter.

use std::hint::black_box;
use std::time::Instant;

use atomic_cuckoo::CuckooFilter;
use peer_benches::{quick_args, quick_sizes, splitmix};

/// Keys probed per lookup measurement.
const PROBES: usize = 2_000_000;

/// `--rounds N`, and `--only one|grown` (times one contender only, for a profiler).
fn options() -> (usize, Option<usize>) {
    let (rounds, values) = quick_args(&["--only"]);
    let only = values.first().map(|(_, v)| match v.as_str() {
        "one" => 0,
        "grown" => 1,
        _ => panic!("--only one|grown"),
    });
    (rounds, only)
}

const OPS: [&str; 4] = [
    "contains, present",
    "contains, absent",
    "contains_many, present",
    "contains_many, absent",
];

/// Seconds per key of `op` on `filter`.
fn time_op(filter: &CuckooFilter, op: usize, present: &[u64], absent: &[u64]) -> f64 {
    let keys = if op.is_multiple_of(2) {
        present
    } else {
        absent
    };
    let start = Instant::now();
    let found = if op < 2 {
        keys.iter().filter(|k| filter.contains(*k)).count()
    } else {
        let mut out = Vec::with_capacity(keys.len());
        filter.contains_many(keys, &mut out);
        out.iter().filter(|&&b| b).count()
    };
    let spent = start.elapsed().as_secs_f64();
    black_box(found);
    if op.is_multiple_of(2) {
        assert_eq!(found, keys.len(), "a present key was not found");
    }
    spent / keys.len() as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let (rounds, only) = options();
    for (n, label) in quick_sizes() {
        let keys = splitmix(0x5EED_0013, n);
        let absent = splitmix(0xAB5E_0013, PROBES);
        let present: Vec<u64> = keys.iter().step_by((n / PROBES).max(1)).copied().collect();
        let one = CuckooFilter::builder().capacity(n).build().unwrap();
        let grown = CuckooFilter::builder()
            .capacity(1_000)
            .expansion(2)
            .build()
            .unwrap();
        for f in [&one, &grown] {
            f.insert_many(&keys).unwrap();
        }
        println!(
            "{label}: one level ({} MiB) against {} levels ({} MiB), {rounds} rounds",
            one.memory_usage() >> 20,
            grown.levels(),
            grown.memory_usage() >> 20
        );
        // times[contender][op] = seconds per key, one per round
        let mut times = vec![vec![Vec::new(); OPS.len()]; 2];
        for _ in 0..rounds {
            for (op, _) in OPS.iter().enumerate() {
                for (c, f) in [&one, &grown].into_iter().enumerate() {
                    if only.is_some_and(|o| o != c) {
                        times[c][op].push(f64::NAN);
                        continue;
                    }
                    times[c][op].push(time_op(f, op, &present, &absent));
                }
            }
        }
        println!("| operation, {label} | one level | grown | grown / one level |");
        println!("|---|---:|---:|---:|");
        for (op, name) in OPS.iter().enumerate() {
            let rate = |c: usize| 1e-6 / median(times[c][op].clone());
            let (a, b) = (rate(0), rate(1));
            println!("| {name} | {a:.1} | {b:.1} | {:.0} % |", 100.0 * b / a);
        }
    }
}
