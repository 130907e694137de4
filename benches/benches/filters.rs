//! atomic-cuckoo against the filters its users would otherwise pick, measured in one run so that
//! ratios can be read off one report (`python3 benches/benches/report.py` prints them from
//! criterion's output).
//!
//! `cargo bench --bench filters` runs everything: sizes of 1M items (fits in cache) and 50M
//! (DRAM), about 40 minutes on a 2-core machine and under 4 GiB of memory. Narrow it with
//! `ATOMIC_CUCKOO_BENCH_SIZES=1m` (or `50m`) and criterion's name filter, a regular expression
//! searched in the ids `group/size/filter`
//! (`ATOMIC_CUCKOO_BENCH_SIZES=1m cargo bench --bench filters -- lookup_negative/1M`; the size
//! may be spelled `1m`). A filter that matches no id stops the run and lists the ids.
//!
//! Peers: `cuckoofilter` 0.5 alone and behind a `parking_lot::Mutex`, `atomic-cuckoo-filter`,
//! `scalable_cuckoo_filter`, `fastbloom::AtomicBloomFilter` (no deletes), `xorf::BinaryFuse8`
//! (static: lookups only, the ceiling). Same u64 keys from a seeded generator, generated before
//! timing; a 1 % target false-positive rate where the peer lets us choose.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use parking_lot::Mutex;

use atomic_cuckoo::CuckooFilter;
use peer_benches::peers::{
    acf, bloom, classic, ours, ours_compact, ours_one_word, scalable, timed_threads, Shared, Solo,
};
use peer_benches::selection::criterion_main;
use peer_benches::{bench_sizes, bench_threads, splitmix};
/// Keys probed per lookup measurement (positive: the first inserted keys; negative: fresh keys).
const MAX_PROBES: usize = 10_000_000;
/// Keys removed (and re-inserted, untimed) per delete measurement.
const MAX_REMOVES: usize = 10_000_000;

// The filters' names in the benchmark ids (`group/size/name`).
const OURS: &str = "atomic-cuckoo";
const OURS_COMPACT: &str = "atomic-cuckoo compact";
const OURS_ONE_WORD: &str = "atomic-cuckoo one-word";
const OURS_MANY: &str = "atomic-cuckoo contains_many";
const BASELINE: &str = "baseline: 2 random reads";
const CLASSIC: &str = "cuckoofilter";
const CLASSIC_LOCKED: &str = "Mutex<cuckoofilter>";
const ACF: &str = "atomic-cuckoo-filter";
const SCALABLE: &str = "scalable_cuckoo_filter";
const BLOOM: &str = "fastbloom AtomicBloomFilter";
const XORF: &str = "xorf BinaryFuse8 (static)";

/// One benchmark size: the keys every filter gets.
struct Size {
    label: &'static str,
    /// Items each filter is built for.
    items: usize,
    /// Keys inserted: 95 % of our filter's capacity (the same keys for every filter).
    insert: Vec<u64>,
    /// Keys never inserted.
    absent: Vec<u64>,
}

impl Size {
    fn new(label: &'static str, items: usize) -> Self {
        let fill = (ours(items).slots() as f64 * 0.95) as usize;
        Size {
            label,
            items,
            insert: splitmix(1, fill),
            absent: splitmix(2, fill.min(MAX_PROBES)),
        }
    }

    fn present(&self) -> &[u64] {
        &self.insert[..self.insert.len().min(MAX_PROBES)]
    }

    fn is_large(&self) -> bool {
        self.items > 10_000_000
    }
}

fn configure(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    size: &Size,
) {
    group.sampling_mode(SamplingMode::Flat);
    if size.is_large() {
        group.sample_size(10);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(10));
    } else {
        group.sample_size(20);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(4));
    }
}

fn fill<F: Solo>(filter: &mut F, keys: &[u64]) -> usize {
    keys.iter().filter(|k| filter.insert(k)).count()
}

/// Insert to 95 % of capacity into a fresh filter, one sample per full fill.
fn bench_insert<F: Solo>(c: &mut Criterion, size: &Size, name: &str, build: fn(usize) -> F) {
    let mut group = c.benchmark_group(format!("insert/{}", size.label));
    configure(&mut group, size);
    group.throughput(Throughput::Elements(size.insert.len() as u64));
    group.bench_function(name, |b| {
        b.iter_batched_ref(
            || build(size.items),
            |f| black_box(fill(f, &size.insert)),
            BatchSize::PerIteration,
        )
    });
    group.finish();
    let mut f = build(size.items);
    let stored = fill(&mut f, &size.insert);
    println!(
        "{name} {}: {stored} of {} inserts succeeded",
        size.label,
        size.insert.len()
    );
}

fn bench_lookups<F: Solo>(c: &mut Criterion, size: &Size, name: &str, filter: &F) {
    for (op, keys) in [
        ("lookup_positive", size.present()),
        ("lookup_negative", &size.absent[..]),
    ] {
        let mut group = c.benchmark_group(format!("{op}/{}", size.label));
        configure(&mut group, size);
        group.throughput(Throughput::Elements(keys.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| keys.iter().filter(|k| filter.contains(k)).count())
        });
        group.finish();
    }
    let hits = size.absent.iter().filter(|k| filter.contains(k)).count();
    println!(
        "{name} {}: measured false-positive rate {:.4} %",
        size.label,
        hits as f64 * 100.0 / size.absent.len() as f64
    );
}

/// Removes up to `MAX_REMOVES` keys per iteration (timed), then puts them back (untimed).
fn bench_remove<F: Solo>(c: &mut Criterion, size: &Size, name: &str, filter: &mut F) {
    let keys = &size.insert[..size.insert.len().min(MAX_REMOVES)];
    let mut group = c.benchmark_group(format!("remove/{}", size.label));
    configure(&mut group, size);
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let removed = keys.iter().filter(|k| filter.remove(k)).count();
                spent += start.elapsed();
                black_box(removed);
                fill(filter, keys);
            }
            spent
        })
    });
    group.finish();
}

/// Lookups from `threads` threads, each over its own share of the keys.
fn bench_threaded_lookups<F: Shared>(
    c: &mut Criterion,
    size: &Size,
    name: &str,
    filter: &F,
    threads: usize,
) {
    let keys = size.present();
    let mut group = c.benchmark_group(format!("lookup_{threads}_threads/{}", size.label));
    configure(&mut group, size);
    group.throughput(Throughput::Elements(keys.len() as u64));
    let shares: Vec<&[u64]> = keys.chunks(keys.len().div_ceil(threads)).collect();
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            timed_threads(threads, |t| {
                for _ in 0..iters {
                    black_box(shares[t].iter().filter(|k| filter.contains(k)).count());
                }
            })
        })
    });
    group.finish();
}

/// 90 % lookups, 10 % writes (alternately inserting a fresh key and removing it again, so the
/// load stays where it is), on a filter filled to 90 % of its capacity, from `threads` threads.
fn bench_mixed<F: Shared>(c: &mut Criterion, size: &Size, name: &str, filter: &F, threads: usize) {
    let ops = size.present().len().min(2_000_000);
    let fresh: Vec<Vec<u64>> = (0..threads)
        .map(|t| splitmix(100 + t as u64, ops / 10 + 1))
        .collect();
    let mut group = c.benchmark_group(format!("mixed_90_10_{threads}_threads/{}", size.label));
    configure(&mut group, size);
    group.throughput(Throughput::Elements(ops as u64));
    let per_thread = ops / threads;
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            timed_threads(threads, |t| {
                let probes = &size.present()[t * per_thread..(t + 1) * per_thread];
                let fresh = &fresh[t];
                for _ in 0..iters {
                    for (i, k) in probes.iter().enumerate() {
                        if i % 10 == 9 {
                            let fresh_key = &fresh[i / 20];
                            if (i / 10) % 2 == 0 {
                                black_box(filter.insert(fresh_key));
                            } else {
                                black_box(filter.remove(fresh_key));
                            }
                        } else {
                            black_box(filter.contains(k));
                        }
                    }
                }
            })
        })
    });
    group.finish();
}

/// Everything that needs a filled filter, for one peer.
fn bench_filled_solo<F: Solo>(
    c: &mut Criterion,
    size: &Size,
    name: &str,
    build: fn(usize) -> F,
    removes: bool,
) {
    let mut filter = build(size.items);
    fill(&mut filter, &size.insert);
    bench_lookups(c, size, name, &filter);
    if removes {
        bench_remove(c, size, name, &mut filter);
    }
}

/// Thread counts of the threaded groups (default `2`; the 90/10 mix also runs on one thread,
/// for the ratio). `benches/scaling_quick.rs` measures scaling on a many-core machine.
fn thread_counts() -> Vec<usize> {
    bench_threads("2")
}

/// Fills a fresh filter from `threads` threads, each inserting its own share of the keys
/// (`insert_many` per share when `many` is given: ours only).
fn bench_threaded_insert<F: Shared>(
    c: &mut Criterion,
    size: &Size,
    name: &str,
    build: fn(usize) -> F,
    many: Option<fn(&F, &[u64])>,
) {
    for threads in thread_counts() {
        let shares: Vec<&[u64]> = size
            .insert
            .chunks(size.insert.len().div_ceil(threads))
            .collect();
        let op = if many.is_some() {
            "insert_many"
        } else {
            "insert"
        };
        let mut group = c.benchmark_group(format!("{op}_{threads}_threads/{}", size.label));
        configure(&mut group, size);
        group.throughput(Throughput::Elements(size.insert.len() as u64));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let filter = build(size.items);
                    spent += timed_threads(threads, |t| match many {
                        Some(insert_many) => insert_many(&filter, shares[t]),
                        None => {
                            for k in shares[t] {
                                black_box(filter.insert(k));
                            }
                        }
                    });
                }
                spent
            })
        });
        group.finish();
    }
}

fn bench_shared<F: Shared>(c: &mut Criterion, size: &Size, name: &str, filter: &F, mixed: bool) {
    for threads in thread_counts() {
        bench_threaded_lookups(c, size, name, filter, threads);
    }
    if mixed {
        // Down to 90 % of capacity first, then the 90/10 mix from one thread and from each
        // thread count.
        let keep = size.insert.len() * 90 / 95;
        for k in &size.insert[keep..] {
            filter.remove(k);
        }
        bench_mixed(c, size, name, filter, 1);
        for threads in thread_counts().into_iter().filter(|&t| t > 1) {
            bench_mixed(c, size, name, filter, threads);
        }
        for k in &size.insert[keep..] {
            filter.insert(k);
        }
    }
}

/// `contains_many` and the machine's limit: two independent random 8-byte reads per operation
/// over an array as large as our filter (what any two-bucket lookup must at least pay).
fn bench_batch_and_baseline(c: &mut Criterion, size: &Size, filter: &CuckooFilter) {
    let mut results = Vec::with_capacity(MAX_PROBES);
    for (op, keys) in [
        ("lookup_positive", size.present()),
        ("lookup_negative", &size.absent[..]),
    ] {
        let mut group = c.benchmark_group(format!("{op}/{}", size.label));
        configure(&mut group, size);
        group.throughput(Throughput::Elements(keys.len() as u64));
        group.bench_function(OURS_MANY, |b| {
            b.iter(|| {
                filter.contains_many(keys, &mut results);
                results.iter().filter(|&&r| r).count()
            })
        });
        group.finish();
    }
    let words: Vec<u64> = (0..(filter.memory_usage() / 8) as u64).collect();
    let n = words.len() as u64;
    let ops = size.present().len();
    let mut group = c.benchmark_group(format!("lookup_positive/{}", size.label));
    configure(&mut group, size);
    group.throughput(Throughput::Elements(ops as u64));
    group.bench_function(BASELINE, |b| {
        b.iter(|| {
            let (mut x, mut acc) = (0x1234_5678_9ABC_DEF1u64, 0u64);
            for _ in 0..ops {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (((x >> 32) * n) >> 32) as usize;
                let j = (((x & 0xFFFF_FFFF) * n) >> 32) as usize;
                acc = acc.wrapping_add(words[i] ^ words[j]);
            }
            acc
        })
    });
    group.finish();
}

/// Every benchmark of one size, peer by peer.
fn all(c: &mut Criterion, size: &Size) {
    println!(
        "== {} items: {} inserted keys",
        size.label,
        size.insert.len()
    );
    {
        let mut filter = ours(size.items);
        fill(&mut filter, &size.insert);
        bench_lookups(c, size, OURS, &filter);
        bench_batch_and_baseline(c, size, &filter);
        bench_shared(c, size, OURS, &filter, true);
        bench_remove(c, size, OURS, &mut filter);
    }
    bench_insert(c, size, OURS, ours);
    // The other layouts: smaller (compact) and faster (one word per bucket).
    for (name, build) in [
        (OURS_COMPACT, ours_compact as fn(usize) -> CuckooFilter),
        (OURS_ONE_WORD, ours_one_word),
    ] {
        let mut filter = build(size.items);
        fill(&mut filter, &size.insert);
        bench_lookups(c, size, name, &filter);
        drop(filter);
        bench_insert(c, size, name, build);
    }
    bench_threaded_insert(c, size, OURS, ours, None);
    bench_threaded_insert(
        c,
        size,
        OURS,
        ours,
        Some(|f: &CuckooFilter, keys: &[u64]| {
            black_box(f.insert_many(keys).is_ok());
        }),
    );

    bench_filled_solo(c, size, CLASSIC, classic, true);
    bench_insert(c, size, CLASSIC, classic);
    {
        let shared = Mutex::new(classic(size.items));
        for k in &size.insert {
            Shared::insert(&shared, k);
        }
        bench_shared(c, size, CLASSIC_LOCKED, &shared, true);
    }

    {
        let filter = acf(size.items);
        for k in &size.insert {
            Shared::insert(&filter, k);
        }
        bench_lookups(c, size, ACF, &filter);
        bench_shared(c, size, ACF, &filter, true);
    }
    bench_insert(c, size, ACF, acf);
    bench_threaded_insert(c, size, ACF, acf, None);
    bench_threaded_insert(c, size, CLASSIC_LOCKED, |n| Mutex::new(classic(n)), None);

    bench_filled_solo(c, size, SCALABLE, scalable, true);
    bench_insert(c, size, SCALABLE, scalable);

    {
        let mut filter = bloom(size.items);
        fill(&mut filter, &size.insert);
        bench_lookups(c, size, BLOOM, &filter);
        bench_shared(c, size, BLOOM, &filter, false);
    }
    bench_insert(c, size, BLOOM, bloom);
    bench_threaded_insert(c, size, BLOOM, bloom, None);

    {
        let fuse = xorf::BinaryFuse8::try_from(&size.insert[..]).unwrap();
        let mut group = c.benchmark_group(format!("lookup_positive/{}", size.label));
        configure(&mut group, size);
        group.throughput(Throughput::Elements(size.present().len() as u64));
        group.bench_function(XORF, |b| {
            b.iter(|| {
                size.present()
                    .iter()
                    .filter(|k| xorf::Filter::contains(&fuse, *k))
                    .count()
            })
        });
        group.finish();
        let mut group = c.benchmark_group(format!("lookup_negative/{}", size.label));
        configure(&mut group, size);
        group.throughput(Throughput::Elements(size.absent.len() as u64));
        group.bench_function(XORF, |b| {
            b.iter(|| {
                size.absent
                    .iter()
                    .filter(|k| xorf::Filter::contains(&fuse, *k))
                    .count()
            })
        });
        group.finish();
    }
}

/// The ids of `all`'s benchmarks at the size labelled `label` (`group/size/filter`), in the
/// order it runs them: what a name filter is checked against before anything is set up. A
/// group added to `all` must be added here (`.ci/run` compares these ids with criterion's own
/// `--list`).
fn ids(label: &str) -> Vec<String> {
    let threads = thread_counts();
    let groups = |ops: &[&str]| ops.iter().map(|op| op.to_string()).collect::<Vec<_>>();
    let per_thread = |op: &str| -> Vec<String> {
        threads
            .iter()
            .map(|t| format!("{op}_{t}_threads"))
            .collect()
    };
    let lookups = groups(&["lookup_positive", "lookup_negative"]);
    // `bench_shared`: threaded lookups, then (with `mixed`) the mix on one thread and on each
    // thread count above one.
    let shared = |mixed: bool| -> Vec<String> {
        let mut groups = per_thread("lookup");
        if mixed {
            let mixed = std::iter::once(1).chain(threads.iter().copied().filter(|&t| t > 1));
            groups.extend(mixed.map(|t| format!("mixed_90_10_{t}_threads")));
        }
        groups
    };
    let runs: Vec<(Vec<String>, &str)> = vec![
        (lookups.clone(), OURS),
        (lookups.clone(), OURS_MANY),
        (groups(&["lookup_positive"]), BASELINE),
        (shared(true), OURS),
        (groups(&["remove", "insert"]), OURS),
        (lookups.clone(), OURS_COMPACT),
        (groups(&["insert"]), OURS_COMPACT),
        (lookups.clone(), OURS_ONE_WORD),
        (groups(&["insert"]), OURS_ONE_WORD),
        (per_thread("insert"), OURS),
        (per_thread("insert_many"), OURS),
        (lookups.clone(), CLASSIC),
        (groups(&["remove", "insert"]), CLASSIC),
        (shared(true), CLASSIC_LOCKED),
        (lookups.clone(), ACF),
        (shared(true), ACF),
        (groups(&["insert"]), ACF),
        (per_thread("insert"), ACF),
        (per_thread("insert"), CLASSIC_LOCKED),
        (lookups.clone(), SCALABLE),
        (groups(&["remove", "insert"]), SCALABLE),
        (lookups.clone(), BLOOM),
        (shared(false), BLOOM),
        (groups(&["insert"]), BLOOM),
        (per_thread("insert"), BLOOM),
        (lookups, XORF),
    ];
    runs.iter()
        .flat_map(|(groups, name)| groups.iter().map(move |g| format!("{g}/{label}/{name}")))
        .collect()
}

fn main() {
    let sizes = bench_sizes("1m,50m");
    let every_id: Vec<String> = sizes.iter().flat_map(|&(_, label)| ids(label)).collect();
    criterion_main("filters", &every_id, |c, selection| {
        for (items, label) in sizes {
            // A size none of whose benchmarks runs is not even filled.
            if ids(label).iter().any(|id| selection.wants(id)) {
                all(c, &Size::new(label, items));
            }
        }
    });
}
