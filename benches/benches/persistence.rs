//! Snapshot speed: `to_bytes`, `from_bytes` and `read_from` on a filter of 50M items (80 MiB),
//! to and from memory. `ATOMIC_CUCKOO_BENCH_ITEMS` sets another size.
//! `cargo bench --bench persistence` (about two minutes); a name filter that matches none of
//! `snapshot/{items}/{to_bytes,from_bytes,read_from}` stops the run and lists them.

use std::time::Duration;

use criterion::{Criterion, Throughput};

use atomic_cuckoo::CuckooFilter;
use peer_benches::selection::criterion_main;

/// The functions of the group `snapshot/{items}`.
const FUNCTIONS: [&str; 3] = ["to_bytes", "from_bytes", "read_from"];

fn snapshots(c: &mut Criterion, items: usize) {
    let filter = CuckooFilter::with_capacity(items);
    let keys: Vec<u64> = (0..items as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    filter.insert_many(&keys).unwrap();
    drop(keys);
    let bytes = filter.to_bytes();

    let mut group = c.benchmark_group(format!("snapshot/{items}"));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    let [to_bytes, from_bytes, read_from] = FUNCTIONS;
    group.bench_function(to_bytes, |b| b.iter(|| filter.to_bytes()));
    group.bench_function(from_bytes, |b| {
        b.iter(|| CuckooFilter::from_bytes(&bytes).unwrap())
    });
    group.bench_function(read_from, |b| {
        b.iter(|| CuckooFilter::read_from(&bytes[..]).unwrap())
    });
    group.finish();
}

fn main() {
    let items: usize = std::env::var("ATOMIC_CUCKOO_BENCH_ITEMS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(50_000_000);
    let ids = FUNCTIONS.map(|f| format!("snapshot/{items}/{f}"));
    criterion_main("persistence", &ids, |c, _| snapshots(c, items));
}
