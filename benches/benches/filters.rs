//! atomic-cuckoo against the filters its users would otherwise pick, measured in one run so that
//! ratios can be read off one report (`python3 benches/report.py` prints them from criterion's
//! output).
//!
//! `cargo bench --bench filters` runs everything: sizes of 1M items (fits in cache) and 50M
//! (DRAM), about 40 minutes on a 2-core machine and under 4 GiB of memory. Narrow it with
//! `ATOMIC_CUCKOO_BENCH_SIZES=1m` (or `50m`) and criterion's name filter
//! (`cargo bench --bench filters -- lookup`).
//!
//! Peers: `cuckoofilter` 0.5 alone and behind a `parking_lot::Mutex`, `atomic-cuckoo-filter`,
//! `scalable_cuckoo_filter`, `fastbloom::AtomicBloomFilter` (no deletes), `xorf::BinaryFuse8`
//! (static: lookups only, the ceiling). Same u64 keys from a seeded generator, generated before
//! timing; a 1 % target false-positive rate where the peer lets us choose.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode, Throughput};
use parking_lot::Mutex;

use atomic_cuckoo::CuckooFilter;
use peer_benches::peers::{
    acf, bloom, classic, ours, ours_compact, ours_one_word, scalable, timed_threads, Shared, Solo,
};
use peer_benches::{bench_threads, splitmix};
/// Keys probed per lookup measurement (positive: the first inserted keys; negative: fresh keys).
const MAX_PROBES: usize = 10_000_000;
/// Keys removed (and re-inserted, untimed) per delete measurement.
const MAX_REMOVES: usize = 10_000_000;

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

fn sizes() -> Vec<Size> {
    let wanted = std::env::var("ATOMIC_CUCKOO_BENCH_SIZES").unwrap_or_else(|_| "1m,50m".into());
    let mut sizes = Vec::new();
    for w in wanted.split(',') {
        match w.trim() {
            "1m" => sizes.push(Size::new("1M", 1_000_000)),
            "50m" => sizes.push(Size::new("50M", 50_000_000)),
            other => panic!("unknown size {other:?} (use 1m, 50m)"),
        }
    }
    sizes
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
        group.bench_function("atomic-cuckoo contains_many", |b| {
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
    group.bench_function("baseline: 2 random reads", |b| {
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

fn all(c: &mut Criterion) {
    for size in sizes() {
        println!(
            "== {} items: {} inserted keys",
            size.label,
            size.insert.len()
        );
        {
            let mut filter = ours(size.items);
            fill(&mut filter, &size.insert);
            bench_lookups(c, &size, "atomic-cuckoo", &filter);
            bench_batch_and_baseline(c, &size, &filter);
            bench_shared(c, &size, "atomic-cuckoo", &filter, true);
            bench_remove(c, &size, "atomic-cuckoo", &mut filter);
        }
        bench_insert(c, &size, "atomic-cuckoo", ours);
        // The other layouts: smaller (compact) and faster (one word per bucket).
        for (name, build) in [
            (
                "atomic-cuckoo compact",
                ours_compact as fn(usize) -> CuckooFilter,
            ),
            ("atomic-cuckoo one-word", ours_one_word),
        ] {
            let mut filter = build(size.items);
            fill(&mut filter, &size.insert);
            bench_lookups(c, &size, name, &filter);
            drop(filter);
            bench_insert(c, &size, name, build);
        }
        bench_threaded_insert(c, &size, "atomic-cuckoo", ours, None);
        bench_threaded_insert(
            c,
            &size,
            "atomic-cuckoo",
            ours,
            Some(|f: &CuckooFilter, keys: &[u64]| {
                black_box(f.insert_many(keys).is_ok());
            }),
        );

        bench_filled_solo(c, &size, "cuckoofilter", classic, true);
        bench_insert(c, &size, "cuckoofilter", classic);
        {
            let shared = Mutex::new(classic(size.items));
            for k in &size.insert {
                Shared::insert(&shared, k);
            }
            bench_shared(c, &size, "Mutex<cuckoofilter>", &shared, true);
        }

        {
            let filter = acf(size.items);
            for k in &size.insert {
                Shared::insert(&filter, k);
            }
            bench_lookups(c, &size, "atomic-cuckoo-filter", &filter);
            bench_shared(c, &size, "atomic-cuckoo-filter", &filter, true);
        }
        bench_insert(c, &size, "atomic-cuckoo-filter", acf);
        bench_threaded_insert(c, &size, "atomic-cuckoo-filter", acf, None);
        bench_threaded_insert(
            c,
            &size,
            "Mutex<cuckoofilter>",
            |n| Mutex::new(classic(n)),
            None,
        );

        bench_filled_solo(c, &size, "scalable_cuckoo_filter", scalable, true);
        bench_insert(c, &size, "scalable_cuckoo_filter", scalable);

        {
            let mut filter = bloom(size.items);
            fill(&mut filter, &size.insert);
            bench_lookups(c, &size, "fastbloom AtomicBloomFilter", &filter);
            bench_shared(c, &size, "fastbloom AtomicBloomFilter", &filter, false);
        }
        bench_insert(c, &size, "fastbloom AtomicBloomFilter", bloom);
        bench_threaded_insert(c, &size, "fastbloom AtomicBloomFilter", bloom, None);

        {
            let fuse = xorf::BinaryFuse8::try_from(&size.insert[..]).unwrap();
            let mut group = c.benchmark_group(format!("lookup_positive/{}", size.label));
            configure(&mut group, &size);
            group.throughput(Throughput::Elements(size.present().len() as u64));
            group.bench_function("xorf BinaryFuse8 (static)", |b| {
                b.iter(|| {
                    size.present()
                        .iter()
                        .filter(|k| xorf::Filter::contains(&fuse, *k))
                        .count()
                })
            });
            group.finish();
            let mut group = c.benchmark_group(format!("lookup_negative/{}", size.label));
            configure(&mut group, &size);
            group.throughput(Throughput::Elements(size.absent.len() as u64));
            group.bench_function("xorf BinaryFuse8 (static)", |b| {
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
}

criterion_group!(benches, all);
criterion_main!(benches);
