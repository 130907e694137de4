//! Memory, false-positive rate and absent-lookup speed of an `ExpandingFilter` grown from
//! `--capacity` (default 1,000) items, beside a growing `CuckooFilter` (levels, `expansion(2)`) grown the same way and a
//! static `CuckooFilter` built for each checkpoint's item count, as a plain loop.
//!
//! ```sh
//! cargo bench -p peer-benches --bench expanding_quick
//! cargo bench -p peer-benches --bench expanding_quick -- --rates 0.01 --to 2000000
//! ```
//!
//! Checkpoints: `--from` (default 1,000,000) to `--to` (4,000,000) in steps of `--step`
//! (250,000), for each target in `--rates` (default `0.01,0.001`). Keys are one SplitMix64
//! stream per target (seed `SEED`): its first `--to` values are inserted in order, the next
//! `--probes` (default 1,000,000) are probed (all absent by construction). Every insert into
//! the expanding filter is timed: the slowest that doubled the table is printed apart from the
//! slowest of the others. `bits/item` =
//! `memory_usage() × 8 / len()`; `measured` = false positives / probes; `expected` =
//! `false_positive_rate()`. At `--from` and `--to`, absent lookups per second (best of three
//! passes over the probes, one thread) of the three filters.

use std::time::Instant;

use atomic_cuckoo::{CuckooFilter, ExpandingFilter};
use peer_benches::{positive_count, quick_args, splitmix};

/// Each target's keys come from SplitMix64 seeded with `SEED`.
const SEED: u64 = 0x6_0A11;

struct Run {
    from: usize,
    to: usize,
    step: usize,
    probes: usize,
    rates: Vec<f64>,
    doublings: Option<u32>,
    capacity: usize,
}

fn options() -> Run {
    let (_, values) = quick_args(&[
        "--from",
        "--to",
        "--step",
        "--probes",
        "--rates",
        "--doublings",
        "--capacity",
    ]);
    let mut run = Run {
        from: 1_000_000,
        to: 4_000_000,
        step: 250_000,
        probes: 1_000_000,
        rates: vec![0.01, 0.001],
        doublings: None,
        capacity: 1_000,
    };
    for (flag, value) in values {
        match flag.as_str() {
            "--from" => run.from = positive_count(&flag, &value),
            "--to" => run.to = positive_count(&flag, &value),
            "--step" => run.step = positive_count(&flag, &value),
            "--probes" => run.probes = positive_count(&flag, &value),
            "--capacity" => run.capacity = positive_count(&flag, &value),
            "--doublings" => run.doublings = Some(positive_count(&flag, &value) as u32),
            "--rates" => {
                run.rates = value
                    .split(',')
                    .map(|r| r.trim().parse().expect("--rates 0.01,0.001"))
                    .collect()
            }
            _ => unreachable!("quick_args returns only the flags asked for"),
        }
    }
    assert!(run.from <= run.to, "--from N --to M with N <= M");
    run
}

/// Absent lookups per second (millions), best of three passes, and the false positives.
fn lookups(contains: impl Fn(&u64) -> bool, probes: &[u64]) -> (f64, usize) {
    let mut best = 0.0f64;
    let mut positives = 0;
    for _ in 0..3 {
        let start = Instant::now();
        positives = probes
            .iter()
            .filter(|k| contains(std::hint::black_box(k)))
            .count();
        best = best.max(probes.len() as f64 / start.elapsed().as_secs_f64() / 1e6);
    }
    (best, positives)
}

fn main() {
    let run = options();
    for &rate in &run.rates {
        let keys = splitmix(SEED, run.to + run.probes);
        let (keys, probes) = keys.split_at(run.to);
        let mut builder = ExpandingFilter::builder()
            .capacity(run.capacity)
            .false_positive_rate(rate);
        if let Some(d) = run.doublings {
            builder = builder.max_doublings(d);
        }
        let expanding = builder.build().unwrap();
        let levels = CuckooFilter::builder()
            .capacity(run.capacity)
            .false_positive_rate(rate)
            .expansion(2)
            .build()
            .unwrap();
        println!(
            "target {rate}: {:?}\n| items | doublings | bits/item | measured | expected | levels: bits/item | measured |",
            expanding
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        let mut inserted = 0;
        let mut worst = (0.0, 0);
        // The slowest insert that doubled the table, and the slowest of the others.
        let (mut slowest_doubling, mut slowest_other) = ((0.0f64, 0), 0.0f64);
        for n in (run.from..=run.to).step_by(run.step) {
            for key in &keys[inserted..n] {
                let doublings = expanding.doublings();
                let start = Instant::now();
                expanding.insert(key).unwrap();
                let took = start.elapsed().as_secs_f64() * 1e3;
                if expanding.doublings() != doublings {
                    if took > slowest_doubling.0 {
                        slowest_doubling = (took, expanding.buckets());
                    }
                } else {
                    slowest_other = slowest_other.max(took);
                }
            }
            levels.insert_many(&keys[inserted..n]).unwrap();
            inserted = n;
            let bits = expanding.memory_usage() as f64 * 8.0 / n as f64;
            let measured = probes.iter().filter(|k| expanding.contains(*k)).count();
            let level_measured = probes.iter().filter(|k| levels.contains(*k)).count();
            println!(
                "| {n} | {} | {bits:.2} | {:.4} % | {:.4} % | {:.2} | {:.4} % |",
                expanding.doublings(),
                100.0 * measured as f64 / probes.len() as f64,
                100.0 * expanding.false_positive_rate(),
                levels.memory_usage() as f64 * 8.0 / n as f64,
                100.0 * level_measured as f64 / probes.len() as f64,
            );
            if bits > worst.0 {
                worst = (bits, n);
            }
            if n == run.from || n == run.to {
                let fixed = CuckooFilter::builder()
                    .capacity(n)
                    .false_positive_rate(rate)
                    .build()
                    .unwrap();
                fixed.insert_many(&keys[..n]).unwrap();
                let (e, _) = lookups(|k| expanding.contains(k), probes);
                let (l, _) = lookups(|k| levels.contains(k), probes);
                let (s, s_pos) = lookups(|k| fixed.contains(k), probes);
                println!(
                    "at {n}: absent lookups M/s: expanding {e:.1}, levels ({} levels) {l:.1}, static {s:.1} ({:.2} bits/item, measured {:.4} %); expanding / static {:.2}",
                    levels.levels(),
                    fixed.memory_usage() as f64 * 8.0 / n as f64,
                    100.0 * s_pos as f64 / probes.len() as f64,
                    e / s
                );
            }
        }
        println!(
            "most bits/item: {:.2} at {}; slowest insert that doubled: {:.2} ms (to {} buckets), slowest other: {:.3} ms\n",
            worst.0, worst.1, slowest_doubling.0, slowest_doubling.1, slowest_other
        );
    }
}
