//! Memory, false-positive rate and insert time of a growable filter, as a plain loop:
//! `capacity(1_000).false_positive_rate(p).growable(true)` filled with seeded keys, beside a
//! static `capacity(n)` filter at the same target holding the same `n` keys.
//!
//! ```sh
//! cargo bench -p peer-benches --bench grown_memory_quick
//! cargo bench -p peer-benches --bench grown_memory_quick -- --probes 4000000 --to 8000000
//! ATOMIC_CUCKOO_BENCH_GROW_TO=100m cargo bench -p peer-benches --bench grown_memory_quick
//! cargo bench -p peer-benches --bench grown_memory_quick -- --expected 1000000 --to 2000000
//! ```
//!
//! Two parts, for each target in `--rates` (default `0.01,0.001`), both grown from
//! `--capacity` (default 1,000) items, with `--expected N` as `Builder::expected_items(N)` (by
//! default none: lanes for 17 doublings):
//!
//! **Checkpoints**: `--from` (default 250,000) to `--to` (4,000,000) in steps of `--step`
//! (250,000). Keys are one SplitMix64 stream per target (seed `SEED`): its first `--to` values
//! are inserted in order, one `insert` at a time and each timed, the next `--probes` (default
//! 1,000,000) are probed. The stream's values are all distinct, so the probes are absent by
//! construction, and every checkpoint probes the same keys. Columns: `doublings` (`*`: the last
//! one still splitting buckets); `bits/item` = `memory_usage() × 8 / len()`; `measured` = false
//! positives / probes; `expected` = `false_positive_rate()`; then the static filter's bits/item
//! and measured rate. After the table: the worst checkpoint from `--worst-from` (default
//! 1,000,000) on, by bits/item and by measured rate, each beside the static filter's at that
//! point; the most bits/item at any insert from `--worst-from` on (memory grows only when an
//! insert begins a doubling, so that peak is read right after each such insert); and the
//! slowest insert that doubled the table, apart from the slowest of the others.
//!
//! **Growth to a large size**: `ATOMIC_CUCKOO_BENCH_GROW_TO` items (`100m`, `1g` or a number,
//! `_` allowed; default `8m`, small enough for any machine), inserted with `insert_many` in
//! batches of a million from a stream whose first `--probes` values are the probes (so the
//! keys are generated as they go, not held). A row at every doubling of the item count from
//! 1M, and at the top: seconds since the start, M inserts/s over the stretch since the row
//! before, `memory_usage()` in MiB, bits/item, measured and expected rates. Then a static
//! filter of the top size, filled with the same keys: its fill time, memory and measured rate.

use std::time::Instant;

use atomic_cuckoo::CuckooFilter;
use peer_benches::{positive_count, quick_args, splitmix};

/// Each target's keys come from SplitMix64 seeded with `SEED`.
const SEED: u64 = 0x6_0A11;

/// Keys per `insert_many` in the growth to a large size.
const BATCH: usize = 1_000_000;

struct Run {
    from: usize,
    to: usize,
    step: usize,
    worst_from: usize,
    probes: usize,
    rates: Vec<f64>,
    capacity: usize,
    /// `Builder::expected_items`, when given.
    expected: Option<usize>,
    grow_to: usize,
}

fn options() -> Run {
    let (_, values) = quick_args(&[
        "--from",
        "--to",
        "--step",
        "--worst-from",
        "--probes",
        "--rates",
        "--capacity",
        "--expected",
    ]);
    let mut run = Run {
        from: 250_000,
        to: 4_000_000,
        step: 250_000,
        worst_from: 1_000_000,
        probes: 1_000_000,
        rates: vec![0.01, 0.001],
        capacity: 1_000,
        expected: None,
        grow_to: grow_to(),
    };
    for (flag, value) in values {
        match flag.as_str() {
            "--from" => run.from = positive_count(&flag, &value),
            "--to" => run.to = positive_count(&flag, &value),
            "--step" => run.step = positive_count(&flag, &value),
            "--worst-from" => run.worst_from = positive_count(&flag, &value),
            "--probes" => run.probes = positive_count(&flag, &value),
            "--capacity" => run.capacity = positive_count(&flag, &value),
            "--expected" => run.expected = Some(positive_count(&flag, &value)),
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

/// `ATOMIC_CUCKOO_BENCH_GROW_TO`: the item count the growth part reaches (default 8M).
fn grow_to() -> usize {
    const VAR: &str = "ATOMIC_CUCKOO_BENCH_GROW_TO";
    let Ok(text) = std::env::var(VAR) else {
        return 8_000_000;
    };
    let lower = text.trim().to_ascii_lowercase().replace('_', "");
    let (digits, scale) = match lower.as_bytes().last() {
        Some(b'k') => (&lower[..lower.len() - 1], 1_000),
        Some(b'm') => (&lower[..lower.len() - 1], 1_000_000),
        Some(b'g') => (&lower[..lower.len() - 1], 1_000_000_000),
        _ => (&lower[..], 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n > 0)
        .unwrap_or_else(|| panic!("{VAR}={text:?}: an item count such as 100m, 1g or 4_000_000"))
}

/// The share of `probes` (all absent) that `filter` finds.
fn measured(filter: &CuckooFilter, probes: &[u64]) -> f64 {
    probes.iter().filter(|k| filter.contains(*k)).count() as f64 / probes.len() as f64
}

fn bits_per_item(filter: &CuckooFilter) -> f64 {
    filter.memory_usage() as f64 * 8.0 / filter.len() as f64
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// A static filter for `items` items at `rate`.
fn fixed(items: usize, rate: f64) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(items)
        .false_positive_rate(rate)
        .build()
        .unwrap()
}

fn growable(run: &Run, rate: f64) -> CuckooFilter {
    let builder = CuckooFilter::builder()
        .capacity(run.capacity)
        .false_positive_rate(rate)
        .growable(true);
    match run.expected {
        Some(items) => builder.expected_items(items),
        None => builder,
    }
    .build()
    .unwrap()
}

/// One checkpoint of the first part: the grown filter's bits/item and measured rate, then the
/// static filter's.
struct Point {
    items: usize,
    grown: (f64, f64),
    fixed: (f64, f64),
}

fn checkpoints(run: &Run, rate: f64) {
    let keys = splitmix(SEED, run.to + run.probes);
    let (keys, probes) = keys.split_at(run.to);
    let grown = growable(run, rate);
    println!(
        "target {rate}, grown from {}: {grown:?}\n\
         | items | doublings | bits/item | measured | expected | static: bits/item | measured |",
        run.capacity
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut inserted = 0;
    let mut points = Vec::new();
    // The slowest insert that doubled the table (and the slots after it), and the slowest of
    // the others.
    let (mut slowest_doubling, mut slowest_other) = ((0.0f64, 0), 0.0f64);
    // The most bits/item right after an insert that began a doubling, and where.
    let mut peak = (0.0f64, 0);
    for n in (run.from..=run.to).step_by(run.step) {
        for key in &keys[inserted..n] {
            let doublings = grown.doublings();
            let start = Instant::now();
            grown.insert(key).unwrap();
            let took = start.elapsed().as_secs_f64() * 1e3;
            if grown.doublings() != doublings {
                if took > slowest_doubling.0 {
                    slowest_doubling = (took, grown.slots());
                }
                let items = grown.len();
                if items >= run.worst_from && bits_per_item(&grown) > peak.0 {
                    peak = (bits_per_item(&grown), items);
                }
            } else {
                slowest_other = slowest_other.max(took);
            }
        }
        inserted = n;
        let still = fixed(n, rate);
        still.insert_many(&keys[..n]).unwrap();
        let point = Point {
            items: n,
            grown: (bits_per_item(&grown), measured(&grown, probes)),
            fixed: (bits_per_item(&still), measured(&still, probes)),
        };
        println!(
            "| {n} | {}{} | {:.2} | {:.4} % | {:.4} % | {:.2} | {:.4} % |",
            grown.doublings(),
            if grown.is_doubling() { "*" } else { "" },
            point.grown.0,
            100.0 * point.grown.1,
            100.0 * grown.false_positive_rate(),
            point.fixed.0,
            100.0 * point.fixed.1,
        );
        points.push(point);
    }
    let worst = |key: fn(&Point) -> f64| {
        points
            .iter()
            .filter(|p| p.items >= run.worst_from)
            .max_by(|a, b| key(a).total_cmp(&key(b)))
    };
    if let Some(p) = worst(|p| p.grown.0) {
        println!(
            "from {}: most bits/item {:.2} at {} (static {:.2})",
            run.worst_from, p.grown.0, p.items, p.fixed.0
        );
    }
    if peak.1 > 0 {
        println!(
            "from {}: most bits/item at any insert {:.2}, at {} items (just after a doubling began)",
            run.worst_from, peak.0, peak.1
        );
    }
    if let Some(p) = worst(|p| p.grown.1) {
        println!(
            "from {}: highest measured rate {:.4} % at {} (static {:.4} %)",
            run.worst_from,
            100.0 * p.grown.1,
            p.items,
            100.0 * p.fixed.1
        );
    }
    println!(
        "slowest insert that doubled: {:.2} ms (to {} slots), slowest other: {:.3} ms\n",
        slowest_doubling.0, slowest_doubling.1, slowest_other
    );
}

/// SplitMix64 as `splitmix` generates it, a batch at a time.
struct Stream(u64);

impl Stream {
    fn fill(&mut self, out: &mut Vec<u64>, n: usize) {
        out.clear();
        out.extend((0..n).map(|_| {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }));
    }
}

/// Inserts the stream's next `n` keys into `filter`, a batch at a time.
fn insert_stream(filter: &CuckooFilter, stream: &mut Stream, n: usize, batch: &mut Vec<u64>) {
    let mut left = n;
    while left > 0 {
        let take = left.min(BATCH);
        stream.fill(batch, take);
        filter.insert_many(batch.iter()).unwrap();
        left -= take;
    }
}

fn growth(run: &Run, rate: f64) {
    let mut stream = Stream(SEED ^ 0xB16);
    let mut probes = Vec::new();
    stream.fill(&mut probes, run.probes);
    let after_probes = stream.0;
    let grown = growable(run, rate);
    println!(
        "target {rate}, grown from {} to {}:\n\
         | items | doublings | seconds | M inserts/s | MiB | bits/item | measured | expected |",
        run.capacity, run.grow_to
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut stops: Vec<usize> = std::iter::successors(Some(1_000_000usize), |n| n.checked_mul(2))
        .take_while(|&n| n < run.grow_to)
        .collect();
    stops.push(run.grow_to);
    let mut batch = Vec::with_capacity(BATCH);
    let (start, mut inserted, mut last) = (Instant::now(), 0, 0.0);
    for n in stops {
        insert_stream(&grown, &mut stream, n - inserted, &mut batch);
        let now = start.elapsed().as_secs_f64();
        println!(
            "| {n} | {}{} | {now:.2} | {:.2} | {:.1} | {:.2} | {:.4} % | {:.4} % |",
            grown.doublings(),
            if grown.is_doubling() { "*" } else { "" },
            (n - inserted) as f64 / (now - last) / 1e6,
            mib(grown.memory_usage()),
            bits_per_item(&grown),
            100.0 * measured(&grown, &probes),
            100.0 * grown.false_positive_rate(),
        );
        (inserted, last) = (n, now);
    }
    let grown_memory = grown.memory_usage();
    drop(grown);
    let still = fixed(run.grow_to, rate);
    let mut stream = Stream(after_probes);
    let start = Instant::now();
    insert_stream(&still, &mut stream, run.grow_to, &mut batch);
    let took = start.elapsed().as_secs_f64();
    println!(
        "static capacity({}): filled in {took:.2} s ({:.2} M inserts/s), {:.1} MiB \
         (grown / static {:.2}), {:.2} bits/item, measured {:.4} %\n",
        run.grow_to,
        run.grow_to as f64 / took / 1e6,
        mib(still.memory_usage()),
        grown_memory as f64 / still.memory_usage() as f64,
        bits_per_item(&still),
        100.0 * measured(&still, &probes),
    );
}

fn main() {
    let run = options();
    for &rate in &run.rates {
        checkpoints(&run, rate);
    }
    for &rate in &run.rates {
        growth(&run, rate);
    }
}
