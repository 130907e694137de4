//! Memory per item against the false-positive rate, for us and the peers, in one run: each
//! filter is built for `--items` items (default 1,000,000) at each target rate, filled with them,
//! and probed with `--probes` absent keys (default 4,000,000). Prints a Markdown table per target
//! and, with `--csv PATH`, the figures that `plot_memory` draws.
//!
//! ```sh
//! cargo bench -p peer-benches --bench memory_quick -- --csv results/memory-1m.csv
//! cargo run -p peer-benches --release --bin plot_memory -- \
//!     benches/results/memory-1m.png benches/results/memory-1m.csv
//! ```
//!
//! (cargo runs a bench in its package's directory, so `--csv` is relative to `benches/`.)
//!
//! Each round (`--rounds`, default 3) uses its own keys: one SplitMix64 stream from seed
//! `SEED + round`, whose first `items` values are inserted and the next `probes` probed. The
//! stream's values are all distinct (its state steps through 2^64 values and its output function
//! is a bijection), so the probed keys are absent by construction. A row sums its false
//! positives over the rounds; loads are the rounds' mean.
//!
//! Columns:
//! - bits/item: the filter's memory (see `Memory` below for what each peer counts) × 8 / items.
//! - measured rate: false positives / probes.
//! - ours only: `load at n` = items / slots with the `items` items stored, and `load at first
//!   failure` = items stored / slots when an insert first fails, in a second filter built the
//!   same way (a fixed table: growth explicitly off) and filled from the same stream until then.
//!
//! Peers: `cuckoofilter` (8-bit fingerprints), `xorf` `BinaryFuse8` and `BinaryFuse16` have a
//! fixed rate and are measured once, in their own table. `fastbloom::BloomFilter` and
//! `scalable_cuckoo_filter` take the target rate; `atomic-cuckoo-filter` takes a fingerprint
//! width of 4, 8, 16 or 32 bits, and is given the narrowest whose expected rate at `items` items
//! meets the target (targets that pick the same width share one measurement). A peer that fails
//! to build or to insert is reported in the table's status column, not panicked on.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Instant;

use atomic_cuckoo::{Builder, CuckooFilter, Layout};

use peer_benches::{positive_count, quick_args, splitmix};

/// Round `r`'s keys come from SplitMix64 seeded with `SEED + r`.
const SEED: u64 = 0x3E3_0A7E;

/// The target rates, loosest first: the four of the README's table (3 %, 1 %, 0.1 %, 0.01 %)
/// and points between and beyond them, so that each curve has a shape.
const TARGETS: [f64; 8] = [0.05, 0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001, 0.00001];

/// Our filter's modes: a name and what it changes on the builder that already has the capacity
/// and the target rate. Each mode is one series of the plot.
type Mode = (&'static str, fn(Builder) -> Builder);
const MODES: &[Mode] = &[
    ("default", |b| b),
    ("compact", |b| b.layout(Layout::Compact)),
    ("one-word", |b| b.layout(atomic_cuckoo::Layout::OneWord)),
];

/// The run's settings.
struct Run {
    rounds: usize,
    items: usize,
    probes: usize,
    csv: Option<String>,
}

fn options() -> Run {
    let (rounds, values) = quick_args(&["--items", "--probes", "--csv"]);
    assert!(rounds > 0, "--rounds N (N > 0)");
    let mut run = Run {
        rounds,
        items: 1_000_000,
        probes: 4_000_000,
        csv: None,
    };
    for (flag, value) in values {
        match flag.as_str() {
            "--items" => run.items = positive_count(&flag, &value),
            "--probes" => run.probes = positive_count(&flag, &value),
            _ => run.csv = Some(value),
        }
    }
    run
}

/// One round's keys: `inserted` then `absent`, one stream (so disjoint, see the module docs).
struct Keys {
    seed: u64,
    all: Vec<u64>,
    items: usize,
}

impl Keys {
    fn new(seed: u64, run: &Run) -> Keys {
        Keys {
            seed,
            all: splitmix(seed, run.items + run.probes),
            items: run.items,
        }
    }
    fn inserted(&self) -> &[u64] {
        &self.all[..self.items]
    }
    fn absent(&self) -> &[u64] {
        &self.all[self.items..]
    }
    /// The same stream, on past its stored part: keys for filling a filter until it fails,
    /// however many slots it has.
    fn endless(&self) -> impl Iterator<Item = u64> + '_ {
        let stored = self.all.iter().copied();
        let mut state = self
            .seed
            .wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(self.all.len() as u64));
        stored.chain(std::iter::from_fn(move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            Some(z ^ (z >> 31))
        }))
    }
}

/// One round's measurement of one filter.
#[derive(Clone)]
struct Sample {
    /// Bytes, as the filter's `Memory` comment says.
    memory: usize,
    /// The settings the filter chose or was given (fingerprint bits, hash count).
    config: String,
    /// Items stored after inserting the `items` keys (fewer when inserts failed).
    stored: usize,
    /// Inserts that failed, and the first one's error.
    failed: usize,
    first_error: Option<String>,
    false_positives: usize,
    probes: usize,
    /// Ours: slots, and the load at which a second filter's first insert failed.
    slots: Option<usize>,
    first_failure_load: Option<f64>,
}

impl Sample {
    fn new(memory: usize, config: String, keys: &Keys, contains: impl Fn(&u64) -> bool) -> Self {
        let absent = keys.absent();
        Sample {
            memory,
            config,
            stored: keys.items,
            failed: 0,
            first_error: None,
            false_positives: absent.iter().filter(|k| contains(k)).count(),
            probes: absent.len(),
            slots: None,
            first_failure_load: None,
        }
    }
}

/// Inserts every key with `insert`; how many failed, and the first error.
fn fill<E: std::fmt::Display>(
    keys: &[u64],
    mut insert: impl FnMut(&u64) -> Result<(), E>,
) -> (usize, Option<String>) {
    let mut failed = 0;
    let mut first = None;
    for (i, k) in keys.iter().enumerate() {
        if let Err(e) = insert(k) {
            failed += 1;
            first.get_or_insert_with(|| format!("insert {} of {}: {e}", i + 1, keys.len()));
        }
    }
    (failed, first)
}

/// Ours in `mode` for `items` items at `rate`: a fixed table (growth is off unless asked for),
/// so both filters are the table `items` and `rate` size, whatever the mode does.
fn ours(mode: fn(Builder) -> Builder, rate: f64, keys: &Keys) -> Result<Sample, String> {
    let build = || {
        mode(
            CuckooFilter::builder()
                .capacity(keys.items)
                .false_positive_rate(rate),
        )
        .growable(false)
        .build()
        .map_err(|e| format!("build: {e}"))
    };
    let filter = build()?;
    let (failed, first_error) = fill(keys.inserted(), |k| filter.insert(k));
    // Memory: `memory_usage()`, the table, its lock stripes and the filter struct.
    let mut sample = Sample::new(
        filter.memory_usage(),
        format!("{}-bit", filter.fingerprint_bits()),
        keys,
        |k| filter.contains(k),
    );
    sample.stored = filter.len();
    sample.failed = failed;
    sample.first_error = first_error;
    sample.slots = Some(filter.slots());
    drop(filter);

    let full = build()?;
    for k in keys.endless() {
        if full.insert(&k).is_err() {
            break;
        }
    }
    if full.is_growable() {
        return Err("built growable with growth off".into());
    }
    sample.first_failure_load = Some(full.load_factor());
    Ok(sample)
}

/// `fastbloom::BloomFilter` for `items` items at `rate`.
/// Memory: its bit vector (`num_bits() / 8`) and the struct (hash count, hasher, vector's
/// pointer and length).
fn bloom(rate: f64, keys: &Keys) -> Result<Sample, String> {
    let mut filter = fastbloom::BloomFilter::with_false_pos(rate).expected_items(keys.items);
    for k in keys.inserted() {
        filter.insert(k);
    }
    let memory = filter.num_bits() / 8 + std::mem::size_of_val(&filter);
    let config = format!("{} hashes", filter.num_hashes());
    Ok(Sample::new(memory, config, keys, |k| filter.contains(k)))
}

/// `scalable_cuckoo_filter` for `items` items at `rate`; it grows (adds a sub-filter) instead
/// of failing, so every insert succeeds.
/// Memory: `bits() / 8`, the bucket bit vectors of all its sub-filters and the capacity of their
/// kicked-out-item lists, and the outer struct (not the per-sub-filter headers).
fn scalable(rate: f64, keys: &Keys) -> Result<Sample, String> {
    let mut filter = scalable_cuckoo_filter::ScalableCuckooFilter::<u64>::new(keys.items, rate);
    for k in keys.inserted() {
        filter.insert(k);
    }
    let memory = (filter.bits() / 8) as usize + std::mem::size_of_val(&filter);
    let config = format!("{} slots", filter.capacity());
    Ok(Sample::new(memory, config, keys, |k| filter.contains(k)))
}

/// `atomic-cuckoo-filter`'s widths, narrowest first.
const ACF_WIDTHS: [u32; 4] = [4, 8, 16, 32];
/// Its slots per bucket (its default, which `acf` keeps).
const ACF_BUCKET: usize = 4;

/// The narrowest `atomic-cuckoo-filter` width whose expected rate with `items` items meets
/// `rate`: a lookup compares against the `2 × 4` fingerprints of its two buckets, each matching
/// with probability `1 / (2^f - 1)` (a fingerprint is never 0), at the load `items / slots`.
fn acf_width(rate: f64, items: usize) -> Option<u32> {
    let slots = items.div_ceil(ACF_BUCKET).next_power_of_two() * ACF_BUCKET;
    let compared = 2.0 * ACF_BUCKET as f64 * items as f64 / slots as f64;
    ACF_WIDTHS.into_iter().find(|&f| {
        let miss = 1.0 - 1.0 / ((1u64 << f) - 1) as f64;
        1.0 - miss.powf(compared) <= rate
    })
}

/// `atomic-cuckoo-filter` with `bits`-bit fingerprints, sized for `items` items.
/// Memory: it has no size method. Its `build()` rounds the buckets up to a power of two, sets
/// `capacity()` to the slots (buckets × 4) and allocates `capacity() × bits` bits in `usize`
/// words: those words, and the struct.
fn acf(bits: u32, keys: &Keys) -> Result<Sample, String> {
    let filter = atomic_cuckoo_filter::CuckooFilter::builder()
        .capacity(keys.items)
        .fingerprint_size(bits as usize)
        .build()
        .map_err(|e| format!("build: {e}"))?;
    let (failed, first_error) = fill(keys.inserted(), |k| filter.insert(k));
    let words = (filter.capacity() * bits as usize).div_ceil(usize::BITS as usize);
    let memory = words * std::mem::size_of::<usize>() + std::mem::size_of_val(&filter);
    let mut sample = Sample::new(memory, format!("{bits}-bit"), keys, |k| filter.contains(k));
    sample.stored = filter.len();
    sample.failed = failed;
    sample.first_error = first_error;
    Ok(sample)
}

/// `cuckoofilter` 0.5 (8-bit fingerprints, 4 per bucket) for `items` items: `with_capacity`
/// rounds the items up to a power of two and gives them as many slots. A failed `add` still
/// stores the key but drops another (its docs), so `stored` stays `len()`.
/// Memory: `memory_usage()`, its buckets (4 bytes each) and the struct.
fn classic(keys: &Keys) -> Result<Sample, String> {
    let mut filter = peer_benches::peers::classic(keys.items);
    let (failed, first_error) = fill(keys.inserted(), |k| filter.add(k));
    let mut sample = Sample::new(filter.memory_usage(), "8-bit".into(), keys, |k| {
        filter.contains(k)
    });
    sample.stored = filter.len();
    sample.failed = failed;
    sample.first_error = first_error;
    Ok(sample)
}

/// `xorf`'s binary fuse filters, built from all the keys at once (static).
/// Memory: `fingerprints.len()` × the fingerprint's bytes, and the struct (its descriptor, seed
/// and three `u32` segment fields, is inline).
fn fuse8(keys: &Keys) -> Result<Sample, String> {
    let filter = xorf::BinaryFuse8::try_from(keys.inserted()).map_err(|e| format!("build: {e}"))?;
    let memory = filter.fingerprints.len() + std::mem::size_of_val(&filter);
    Ok(Sample::new(memory, "8-bit".into(), keys, |k| {
        xorf::Filter::contains(&filter, k)
    }))
}

/// See `fuse8`.
fn fuse16(keys: &Keys) -> Result<Sample, String> {
    let filter =
        xorf::BinaryFuse16::try_from(keys.inserted()).map_err(|e| format!("build: {e}"))?;
    let memory = filter.fingerprints.len() * 2 + std::mem::size_of_val(&filter);
    Ok(Sample::new(memory, "16-bit".into(), keys, |k| {
        xorf::Filter::contains(&filter, k)
    }))
}

/// One filter at one target (`None`: a fixed-rate peer), over the rounds.
#[derive(Clone)]
struct Row {
    filter: String,
    target: Option<f64>,
    /// One per round; `Err` where it failed to build.
    samples: Vec<Result<Sample, String>>,
}

impl Row {
    fn ok(&self) -> impl Iterator<Item = &Sample> + Clone {
        self.samples.iter().filter_map(|s| s.as_ref().ok())
    }
    fn first(&self) -> Option<&Sample> {
        self.ok().next()
    }
    fn config(&self) -> String {
        self.first().map_or_else(String::new, |s| s.config.clone())
    }
    fn bits_per_item(&self, items: usize) -> Option<f64> {
        let samples: Vec<f64> = self.ok().map(|s| s.memory as f64 * 8.0).collect();
        (!samples.is_empty())
            .then(|| samples.iter().sum::<f64>() / samples.len() as f64 / items as f64)
    }
    fn false_positives(&self) -> (usize, usize) {
        self.ok()
            .fold((0, 0), |(f, p), s| (f + s.false_positives, p + s.probes))
    }
    fn measured_rate(&self) -> Option<f64> {
        let (fp, probes) = self.false_positives();
        (probes > 0).then(|| fp as f64 / probes as f64)
    }
    /// Mean and range of one per-round figure, where every round has it.
    fn spread(&self, figure: impl Fn(&Sample) -> Option<f64>) -> Option<(f64, f64, f64)> {
        let values: Option<Vec<f64>> = self.ok().map(figure).collect();
        let values = values.filter(|v| !v.is_empty())?;
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let (lo, hi) = values
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        Some((mean, lo, hi))
    }
    fn load_at_n(&self) -> Option<(f64, f64, f64)> {
        self.spread(|s| s.slots.map(|slots| s.stored as f64 / slots as f64))
    }
    fn load_first_failure(&self) -> Option<(f64, f64, f64)> {
        self.spread(|s| s.first_failure_load)
    }
    /// `ok`, or what went wrong (build errors, failed inserts), per round where they differ.
    fn status(&self) -> String {
        let mut notes: Vec<String> = Vec::new();
        for s in &self.samples {
            let note = match s {
                Err(e) => e.clone(),
                Ok(s) if s.failed > 0 => format!(
                    "{} inserts failed ({}), {} stored",
                    s.failed,
                    s.first_error.as_deref().unwrap_or("?"),
                    s.stored
                ),
                Ok(_) => continue,
            };
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        if notes.is_empty() {
            "ok".into()
        } else {
            notes.join("; ")
        }
    }
}

/// Measures one filter at one target over the rounds (each round its own keys), printing each
/// round as it ends.
fn measure(
    run: &Run,
    filter: &str,
    target: Option<f64>,
    each: impl Fn(&Keys) -> Result<Sample, String>,
) -> Row {
    let mut samples = Vec::new();
    for round in 0..run.rounds {
        let keys = Keys::new(SEED + round as u64, run);
        let started = Instant::now();
        let sample = each(&keys);
        let took = started.elapsed().as_secs_f64();
        match &sample {
            Ok(s) => println!(
                "  {filter} @ {}: {:.2} bits/item, {} false positives / {} ({:.1} s)",
                target.map_or("fixed".into(), percent),
                s.memory as f64 * 8.0 / run.items as f64,
                s.false_positives,
                s.probes,
                took
            ),
            Err(e) => println!("  {filter}: {e}"),
        }
        samples.push(sample);
    }
    Row {
        filter: filter.into(),
        target,
        samples,
    }
}

/// A rate as a percentage with enough digits: 5 %, 0.3 %, 0.001 %.
fn percent(rate: f64) -> String {
    let p = rate * 100.0;
    let digits = (-p.log10().floor()).max(0.0) as usize;
    format!("{p:.digits$} %")
}

/// A measured rate as a percentage to three significant digits: 2.37 %, 0.000300 %.
fn significant(rate: f64) -> String {
    if rate == 0.0 {
        return "0 %".into();
    }
    let p = rate * 100.0;
    let digits = (2.0 - p.log10().floor()).max(0.0) as usize;
    format!("{p:.digits$} %")
}

/// A mean, with the rounds' range when they differ.
fn with_range(v: Option<(f64, f64, f64)>) -> String {
    match v {
        None => "-".into(),
        Some((mean, lo, hi)) if hi - lo < 5e-4 => format!("{mean:.3}"),
        Some((mean, lo, hi)) => format!("{mean:.3} ({lo:.3}–{hi:.3})"),
    }
}

fn print_table(title: &str, rows: &[&Row], items: usize) {
    println!("\n| {title} | config | bits/item | measured rate (FPs / probes) | load at n | load at first failure | status |");
    println!("|---|---|---:|---:|---:|---:|---|");
    for row in rows {
        let (fp, probes) = row.false_positives();
        println!(
            "| {} | {} | {} | {} ({fp} / {probes}) | {} | {} | {} |",
            row.filter,
            row.config(),
            row.bits_per_item(items)
                .map_or("-".into(), |b| format!("{b:.2}")),
            row.measured_rate().map_or("-".into(), significant),
            with_range(row.load_at_n()),
            with_range(row.load_first_failure()),
            row.status(),
        );
    }
}

fn write_csv(path: &str, rows: &[Row], run: &Run) {
    let mut out = String::from(
        "filter,config,target_rate,items,probes,memory_bytes,bits_per_item,false_positives,\
         measured_rate,load_at_n,load_first_failure,rounds,status\n",
    );
    let opt = |v: Option<f64>, digits: usize| v.map_or(String::new(), |v| format!("{v:.digits$}"));
    for row in rows {
        let (fp, probes) = row.false_positives();
        let memory = row.first().map_or(String::new(), |s| s.memory.to_string());
        let _ = writeln!(
            out,
            "{},{},{},{},{probes},{memory},{},{fp},{},{},{},{},{}",
            row.filter,
            row.config(),
            row.target.map_or("fixed".into(), |t| t.to_string()),
            run.items,
            opt(row.bits_per_item(run.items), 4),
            opt(row.measured_rate(), 8),
            opt(row.load_at_n().map(|v| v.0), 4),
            opt(row.load_first_failure().map(|v| v.0), 4),
            row.samples.len(),
            // The status is free text: keep it one CSV cell.
            row.status().replace(',', ";"),
        );
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    println!("\nwrote {path}");
}

fn main() {
    let run = options();
    let seeds: Vec<String> = (0..run.rounds)
        .map(|r| format!("{:#x}", SEED + r as u64))
        .collect();
    println!(
        "{} items, {} absent probes, {} rounds, SplitMix64 seeds {}",
        run.items,
        run.probes,
        run.rounds,
        seeds.join(", ")
    );
    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::new();

    // The fixed-rate peers first, once each.
    rows.push(measure(&run, "cuckoofilter", None, classic));
    rows.push(measure(&run, "xorf BinaryFuse8", None, fuse8));
    rows.push(measure(&run, "xorf BinaryFuse16", None, fuse16));
    let fixed: Vec<&Row> = rows.iter().collect();
    print_table("fixed rate", &fixed, run.items);

    // atomic-cuckoo-filter: one measurement per width, shared by the targets that pick it.
    let mut acf_rows: HashMap<u32, Row> = HashMap::new();
    for target in TARGETS {
        let first = rows.len();
        for (mode, change) in MODES {
            let name = format!("atomic-cuckoo ({mode})");
            rows.push(measure(&run, &name, Some(target), |k| {
                ours(*change, target, k)
            }));
        }
        rows.push(measure(&run, "fastbloom", Some(target), |k| {
            bloom(target, k)
        }));
        rows.push(measure(&run, "scalable_cuckoo_filter", Some(target), |k| {
            scalable(target, k)
        }));
        match acf_width(target, run.items) {
            Some(bits) => {
                let row = acf_rows.entry(bits).or_insert_with(|| {
                    measure(&run, "atomic-cuckoo-filter", Some(target), |k| acf(bits, k))
                });
                rows.push(Row {
                    target: Some(target),
                    ..row.clone()
                });
            }
            None => println!("  atomic-cuckoo-filter: no width meets {}", percent(target)),
        }
        let this: Vec<&Row> = rows[first..].iter().collect();
        print_table(&format!("target {}", percent(target)), &this, run.items);
        if let Some(path) = &run.csv {
            write_csv(path, &rows, &run);
        }
    }
    println!("\nmeasured in {:.0} s", started.elapsed().as_secs_f64());
}
