//! Lookups in a grown filter against a static filter holding the same items, as a plain timed
//! loop: every contender once per round, rounds interleaved (a noisy stretch of a shared
//! machine hits all alike), median of the rounds. Prints M lookups/s and the ratio of each
//! grown filter to the static filter of its size.
//!
//! ```sh
//! cargo bench -p peer-benches --bench grown_quick -- --rounds 5
//! ATOMIC_CUCKOO_BENCH_SIZES=1m,50m cargo bench -p peer-benches --bench grown_quick
//! ```
//!
//! `--only static` (or `grown`, `finished`) times one contender alone, for a profiler.
//!
//! Contenders, for `n` items: `capacity(n)` (static), and `capacity(1_000).growable(true)`
//! filled with the same `n` keys (10 doublings at 1M, 16 at 50M), both with the 1 % default
//! rate: `grown` as the inserts left it, and, where its last doubling is still splitting
//! buckets (a lookup then reads one bit more per bucket), `finished`, a copy after
//! `finish_doubling()`. Present keys are spread evenly over the insertion order; absent keys
//! are fresh. Keys are u64s from a seeded generator, hashed by the filter.

use std::hint::black_box;
use std::time::Instant;

use atomic_cuckoo::CuckooFilter;
use peer_benches::{quick_args, quick_sizes, splitmix};

/// Keys probed per lookup measurement.
const PROBES: usize = 2_000_000;

/// The contenders, in the order of the table's columns.
const CONTENDERS: [&str; 3] = ["static", "grown", "finished"];

/// `--rounds N`, and `--only static|grown|finished` (times one contender only, for a
/// profiler).
fn options() -> (usize, Option<usize>) {
    let (rounds, values) = quick_args(&["--only"]);
    let only = values.first().map(|(_, v)| {
        CONTENDERS
            .iter()
            .position(|c| c == v)
            .unwrap_or_else(|| panic!("--only static|grown|finished"))
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
        let fixed = CuckooFilter::builder().capacity(n).build().unwrap();
        let grown = CuckooFilter::builder()
            .capacity(1_000)
            .growable(true)
            .build()
            .unwrap();
        for f in [&fixed, &grown] {
            f.insert_many(&keys).unwrap();
        }
        // Only where a doubling is unfinished does finishing it change what a lookup reads.
        let finished = grown.is_doubling().then(|| {
            let copy = grown.clone();
            copy.finish_doubling();
            copy
        });
        let contenders: Vec<&CuckooFilter> = [Some(&fixed), Some(&grown), finished.as_ref()]
            .into_iter()
            .flatten()
            .collect();
        println!(
            "{label}: static ({} MiB) against grown, {} doublings{} ({} MiB), {rounds} rounds",
            fixed.memory_usage() >> 20,
            grown.doublings(),
            if finished.is_some() {
                ", the last one unfinished"
            } else {
                ""
            },
            grown.memory_usage() >> 20
        );
        // times[contender][op] = seconds per key, one per round
        let mut times = vec![vec![Vec::new(); OPS.len()]; contenders.len()];
        for _ in 0..rounds {
            for (op, _) in OPS.iter().enumerate() {
                for (c, f) in contenders.iter().enumerate() {
                    if only.is_some_and(|o| o != c) {
                        times[c][op].push(f64::NAN);
                        continue;
                    }
                    times[c][op].push(time_op(f, op, &present, &absent));
                }
            }
        }
        let names = &CONTENDERS[..contenders.len()];
        let ratios: Vec<String> = names[1..].iter().map(|c| format!("{c} / static")).collect();
        println!(
            "| operation, {label} | {} | {} |",
            names.join(" | "),
            ratios.join(" | ")
        );
        println!("|---{}|", "|---:".repeat(2 * names.len() - 1));
        for (op, name) in OPS.iter().enumerate() {
            let rates: Vec<f64> = (0..contenders.len())
                .map(|c| 1e-6 / median(times[c][op].clone()))
                .collect();
            let cells: Vec<String> = rates.iter().map(|r| format!("{r:.1}")).collect();
            let ratios: Vec<String> = rates[1..]
                .iter()
                .map(|r| format!("{:.0} %", 100.0 * r / rates[0]))
                .collect();
            println!(
                "| {name} | {} | {} |",
                cells.join(" | "),
                ratios.join(" | ")
            );
        }
    }
}
