//! Filling a filter, in one run: `insert_many` and one `insert` at a time
//! against `cuckoofilter` 0.5's inserts, each filling a fresh filter with the same keys to 95 %
//! of our capacity. A plain timed loop: contenders interleaved per round, median of the rounds
//! (criterion would refill 50M items per sample).
//!
//! ```sh
//! ATOMIC_CUCKOO_BENCH_SIZES=50m cargo bench -p peer-benches --bench fill_quick -- --rounds 3
//! ```
//!
//! `--only many` (or `insert`, `cuckoofilter`) times one contender alone, for a profiler.

use std::hint::black_box;
use std::time::Instant;

use atomic_cuckoo::CuckooFilter;
use peer_benches::{quick_args, quick_sizes, splitmix};

type Classic = cuckoofilter::CuckooFilter<std::collections::hash_map::DefaultHasher>;

const CONTENDERS: [&str; 3] = [
    "atomic-cuckoo insert_many",
    "atomic-cuckoo insert",
    "cuckoofilter insert",
];

/// Seconds to fill a fresh filter of contender `c` for `n` items with `keys`; the count of
/// keys that went in.
fn fill(c: usize, n: usize, keys: &[u64]) -> (f64, usize) {
    let ours = || {
        CuckooFilter::builder()
            .capacity(n)
            .false_positive_rate(0.01)
            .build()
            .unwrap()
    };
    match c {
        0 => {
            let f = ours();
            let start = Instant::now();
            f.insert_many(keys).unwrap();
            let spent = start.elapsed().as_secs_f64();
            (spent, black_box(f).len())
        }
        1 => {
            let f = ours();
            let start = Instant::now();
            let ok = keys.iter().filter(|k| f.insert(*k).is_ok()).count();
            (start.elapsed().as_secs_f64(), black_box(ok))
        }
        _ => {
            let mut f = Classic::with_capacity(n);
            let start = Instant::now();
            let ok = keys.iter().filter(|k| f.add(*k).is_ok()).count();
            (start.elapsed().as_secs_f64(), black_box(ok))
        }
    }
}

fn main() {
    let (rounds, values) = quick_args(&["--only"]);
    let only = values.first().map(|(_, v)| match v.as_str() {
        "many" => 0,
        "insert" => 1,
        "cuckoofilter" => 2,
        _ => panic!("--only many|insert|cuckoofilter"),
    });
    for (n, label) in quick_sizes() {
        let keys = splitmix(0xF111_0013, n * 95 / 100);
        let mut times = vec![Vec::new(); CONTENDERS.len()];
        let mut stored = [0usize; CONTENDERS.len()];
        for _ in 0..rounds {
            for (c, t) in times.iter_mut().enumerate() {
                if only.is_some_and(|o| o != c) {
                    continue;
                }
                let (spent, ok) = fill(c, n, &keys);
                t.push(spent);
                stored[c] = ok;
            }
        }
        println!(
            "| fill to 95 %, {label} ({} keys) | M inserts/s | stored | ratio to cuckoofilter |",
            keys.len()
        );
        println!("|---|---:|---:|---:|");
        // The median rate of a contender that ran.
        let rate = |t: &Vec<f64>| {
            let mut t = t.clone();
            t.sort_by(|a, b| a.total_cmp(b));
            t.get(t.len() / 2).map(|s| keys.len() as f64 / s / 1e6)
        };
        let classic = rate(&times[2]);
        for (c, name) in CONTENDERS.iter().enumerate() {
            if let Some(r) = rate(&times[c]) {
                let ratio = classic.map_or("-".into(), |k| format!("{:.2}×", r / k));
                println!("| {name} | {r:.1} | {} | {ratio} |", stored[c]);
            }
        }
    }
}
