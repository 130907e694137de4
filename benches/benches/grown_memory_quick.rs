//! Memory and false-positive rate of a grown filter (growth issue, goal 1), as a plain loop:
//! `capacity(1_000).false_positive_rate(p).expansion(2)` filled with seeded keys, and at each
//! checkpoint its levels, bits per item and measured rate over fresh absent keys. Beside it, the
//! static filter of 1M items at the same target.
//!
//! ```sh
//! cargo bench -p peer-benches --bench grown_memory_quick
//! cargo bench -p peer-benches --bench grown_memory_quick -- --probes 4000000 --to 8000000
//! cargo bench -p peer-benches --bench grown_memory_quick -- --expansion 4 --max-levels 16
//! ```
//!
//! Checkpoints: `--from` (default 1,000,000) to `--to` (4,000,000) in steps of `--step`
//! (250,000), for each target in `--rates` (default `0.01,0.001`), with `--expansion` (2) and
//! `--max-levels` (the builder's default). Keys are one SplitMix64
//! stream per target (seed `SEED`): its first `--to` values are inserted in order, the next
//! `--probes` (default 1,000,000) are probed. The stream's values are all distinct, so the probes
//! are absent by construction, and every checkpoint probes the same keys.
//!
//! Columns: `levels`; `bits/item` = `memory_usage() × 8 / len()`; `newest load` = the newest
//! level's items / its slots (the level added last is partly empty between doublings, and its
//! memory is all counted); `measured` = false positives / probes; `expected` =
//! `false_positive_rate()` (each level's expected rate at its load, compounded). After each
//! target, the widths of the levels, and their items / capacity at the last checkpoint.

use atomic_cuckoo::CuckooFilter;
use peer_benches::{positive_count, quick_args, splitmix};

/// Each target's keys come from SplitMix64 seeded with `SEED`.
const SEED: u64 = 0x6_0A11;

struct Run {
    from: usize,
    to: usize,
    step: usize,
    probes: usize,
    rates: Vec<f64>,
    expansion: u32,
    max_levels: Option<u32>,
}

fn options() -> Run {
    let (_, values) = quick_args(&[
        "--from",
        "--to",
        "--step",
        "--probes",
        "--rates",
        "--expansion",
        "--max-levels",
    ]);
    let mut run = Run {
        from: 1_000_000,
        to: 4_000_000,
        step: 250_000,
        probes: 1_000_000,
        rates: vec![0.01, 0.001],
        expansion: 2,
        max_levels: None,
    };
    for (flag, value) in values {
        match flag.as_str() {
            "--from" => run.from = positive_count(&flag, &value),
            "--to" => run.to = positive_count(&flag, &value),
            "--step" => run.step = positive_count(&flag, &value),
            "--probes" => run.probes = positive_count(&flag, &value),
            "--expansion" => run.expansion = positive_count(&flag, &value) as u32,
            "--max-levels" => run.max_levels = Some(positive_count(&flag, &value) as u32),
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

/// False positives of `filter` among `probes`, all absent.
fn false_positives(filter: &CuckooFilter, probes: &[u64]) -> usize {
    probes.iter().filter(|k| filter.contains(*k)).count()
}

fn bits_per_item(filter: &CuckooFilter) -> f64 {
    filter.memory_usage() as f64 * 8.0 / filter.len() as f64
}

fn main() {
    let run = options();
    for &rate in &run.rates {
        let keys = splitmix(SEED, run.to + run.probes);
        let (keys, probes) = keys.split_at(run.to);

        let fixed = CuckooFilter::builder()
            .capacity(1_000_000)
            .false_positive_rate(rate)
            .build()
            .unwrap();
        fixed.insert_many(&keys[..1_000_000.min(run.to)]).unwrap();
        println!(
            "target {rate}: static filter of 1M: {} bits, {:.2} bits/item, measured {:.4} %",
            fixed.fingerprint_bits(),
            bits_per_item(&fixed),
            100.0 * false_positives(&fixed, probes) as f64 / probes.len() as f64
        );
        drop(fixed);

        let mut builder = CuckooFilter::builder()
            .capacity(1_000)
            .false_positive_rate(rate)
            .expansion(run.expansion);
        if let Some(levels) = run.max_levels {
            builder = builder.max_levels(levels);
        }
        let grown = builder.build().unwrap();
        println!(
            "| items, target {rate}, expansion {}, max levels {:?} | levels | bits/item | newest load | measured | expected |",
            run.expansion, run.max_levels
        );
        println!("|---:|---:|---:|---:|---:|---:|");
        let mut inserted = 0;
        let checkpoints = (run.from..=run.to).step_by(run.step);
        let (mut worst_bits, mut worst_rate) = ((0.0, 0), (0.0, 0));
        for n in checkpoints {
            grown.insert_many(&keys[inserted..n]).unwrap();
            inserted = n;
            let stats = grown.level_stats();
            let newest = stats.last().unwrap();
            let bits = bits_per_item(&grown);
            let measured = false_positives(&grown, probes) as f64 / probes.len() as f64;
            println!(
                "| {n} | {} | {bits:.2} | {:.3} | {:.4} % | {:.4} % |",
                grown.levels(),
                newest.len as f64 / newest.slots as f64,
                100.0 * measured,
                100.0 * grown.false_positive_rate(),
            );
            if bits > worst_bits.0 {
                worst_bits = (bits, n);
            }
            if measured > worst_rate.0 {
                worst_rate = (measured, n);
            }
        }
        println!(
            "most bits/item: {:.2} at {}; highest measured rate: {:.4} % at {}",
            worst_bits.0,
            worst_bits.1,
            100.0 * worst_rate.0,
            worst_rate.1
        );
        let levels: Vec<String> = grown
            .level_stats()
            .iter()
            .map(|l| format!("{}b {}/{}", l.fingerprint_bits, l.len, l.capacity))
            .collect();
        println!("levels at {inserted}: {}\n", levels.join(", "));
    }
}
