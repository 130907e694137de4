//! `RedisCuckooFilter` (RedisBloom's `CF.*` filter, byte for byte) against our `CuckooFilter`,
//! in one criterion run, on the same u64 keys and the same item count (the speed
//! targets: contains within 1.5× of `CuckooFilter`'s time, inserts within 2×).
//! `python3 benches/benches/report.py` prints the time ratios from criterion's output.
//!
//! Contenders (`peer_benches::redisbloom`): `CuckooFilter` for `n` items at a 1 % target rate
//! (default hasher, and `AHashBuilder`); `RedisCuckooFilter` reserved for `n` items
//! (`CF.RESERVE key n BUCKETSIZE 2` and `4`, expansion 1: a full filter grows another
//! sub-filter, so no insert fails) and for `2n`. Each filter gets all `n` keys.
//!
//! `cargo bench -p peer-benches --bench redisbloom` measures 1M and 50M items; narrow it with
//! `ATOMIC_CUCKOO_BENCH_SIZES=1m` (or `50m`) and criterion's name filter
//! (`… -- rb_contains`; a filter that matches no id stops the run and lists the ids). A fill
//! of 50M items takes seconds, so at 50M the inserts are left to `benches/redisbloom_quick.rs`
//! (best of a few rounds of a timed loop) unless `ATOMIC_CUCKOO_BENCH_50M_INSERTS=1`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    measurement::WallTime, BatchSize, BenchmarkGroup, Criterion, SamplingMode, Throughput,
};

use peer_benches::bench_sizes;
use peer_benches::redisbloom::{
    describe, each_contender, fill, fill_many, hits, hits_many, Contender, Size, Visit,
};
use peer_benches::selection::criterion_main;

/// The lookup groups (`rb_{op}/size`), each with its batched twin (`contains_many`).
const LOOKUPS: [&str; 2] = ["contains_present", "contains_absent"];
/// The insert groups: one key at a time, and batched.
const INSERTS: [&str; 2] = ["insert", "insert_many"];

fn group<'c>(
    c: &'c mut Criterion,
    op: &str,
    size: &Size,
    ops: usize,
) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(format!("rb_{op}/{}", size.label));
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    if size.is_large() {
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(10));
    } else {
        group.sample_size(20);
        group.measurement_time(Duration::from_secs(4));
    }
    group.throughput(Throughput::Elements(ops as u64));
    group
}

/// A fill of a filter with keys: one at a time or batched.
type Fill<F> = fn(&F, &[u64]) -> usize;

struct Bench<'a> {
    c: &'a mut Criterion,
    size: &'a Size,
    inserts: bool,
}

impl Visit for Bench<'_> {
    fn visit<F: Contender>(&mut self, name: &'static str) {
        let size = self.size;
        let filter = F::build(size.items);
        let stored = fill(&filter, &size.insert);
        println!("{}", describe(name, size, &filter, stored));
        for (op, keys) in LOOKUPS.into_iter().zip([size.present(), &size.absent[..]]) {
            let mut g = group(self.c, op, size, keys.len());
            g.bench_function(name, |b| b.iter(|| hits(&filter, keys)));
            g.finish();
            let mut results = Vec::with_capacity(keys.len());
            let mut g = group(
                self.c,
                &op.replace("contains", "contains_many"),
                size,
                keys.len(),
            );
            g.bench_function(name, |b| b.iter(|| hits_many(&filter, keys, &mut results)));
            g.finish();
        }
        drop(filter);
        if !self.inserts {
            return;
        }
        let fills: [Fill<F>; 2] = [fill, fill_many];
        for (op, fill) in INSERTS.into_iter().zip(fills) {
            let mut g = group(self.c, op, size, size.insert.len());
            g.bench_function(name, |b| {
                b.iter_batched_ref(
                    || F::build(size.items),
                    |f| black_box(fill(f, &size.insert)),
                    BatchSize::PerIteration,
                )
            });
            g.finish();
        }
    }
}

/// The contenders' names, in the order they run.
struct Names(Vec<&'static str>);

impl Visit for Names {
    fn visit<F: Contender>(&mut self, name: &'static str) {
        self.0.push(name);
    }
}

/// Whether the inserts are measured at a size of `items` items.
fn measures_inserts(items: usize) -> bool {
    !Size::is_large_count(items) || std::env::var_os("ATOMIC_CUCKOO_BENCH_50M_INSERTS").is_some()
}

/// The benchmark ids at the size labelled `label` (`rb_{op}/size/contender`): what a name
/// filter is checked against before anything is set up (`.ci/run` compares them with
/// criterion's own `--list`).
fn ids(items: usize, label: &str) -> Vec<String> {
    let mut names = Names(Vec::new());
    each_contender(&mut names);
    let mut ops: Vec<String> = LOOKUPS
        .iter()
        .flat_map(|op| [op.to_string(), op.replace("contains", "contains_many")])
        .collect();
    if measures_inserts(items) {
        ops.extend(INSERTS.map(String::from));
    }
    names
        .0
        .iter()
        .flat_map(|name| ops.iter().map(move |op| format!("rb_{op}/{label}/{name}")))
        .collect()
}

fn main() {
    let sizes = bench_sizes("1m,50m");
    let every_id: Vec<String> = sizes
        .iter()
        .flat_map(|&(items, label)| ids(items, label))
        .collect();
    criterion_main("redisbloom", &every_id, |c, selection| {
        for (items, label) in sizes {
            // A size none of whose benchmarks runs is not even generated.
            if ids(items, label).iter().any(|id| selection.wants(id)) {
                each_contender(&mut Bench {
                    c,
                    size: &Size::new(label, items),
                    inserts: measures_inserts(items),
                });
            }
        }
    });
}
