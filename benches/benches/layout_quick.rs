//! The packed default against one word per bucket, on one thread, in one process: each round
//! fills a fresh filter of each layout to 95 % and times its inserts, present and absent
//! lookups and removes, the two layouts alternating which goes first; the table prints the
//! median rates and the median of the rounds' ratios packed / one-word.
//!
//! Beside them, the reads alone, without the filter: per operation, two random buckets of a
//! packed table (40-bit buckets at a 40-bit stride: two words loaded and joined per bucket, as
//! the filter reads them) against two random words of a one-word table, each array as large as
//! that layout's filter and each read tested for a 10- or 12-bit value so that it cannot be
//! skipped. That ratio is what the packing's reads allow before any of the filter's work.
//!
//! ```sh
//! ATOMIC_CUCKOO_BENCH_SIZES=1m,50m cargo bench -p peer-benches --bench layout_quick -- --rounds 9
//! ```

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use atomic_cuckoo::{CuckooFilter, Layout};
use peer_benches::{quick_args, quick_sizes, splitmix};

/// The rows: four filter operations, then the reads alone.
const ROWS: [&str; 5] = [
    "insert to 95 %",
    "lookup, present",
    "lookup, absent",
    "remove",
    "two bucket reads alone",
];

/// A filter of `layout` for `n` items at the default 1 % target.
fn build(n: usize, layout: Layout) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(n)
        .layout(layout)
        .build()
        .expect("the benchmark's sizes build")
}

/// M operations per second of `ops` operations that took `start` until now.
fn rate(ops: usize, start: Instant) -> f64 {
    ops as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// One round of one layout: the rates of `ROWS[..4]`.
fn filter_round(n: usize, layout: Layout, keys: &[u64], absent: &[u64]) -> [f64; 4] {
    let filter = build(n, layout);
    let start = Instant::now();
    for key in keys {
        let _ = filter.insert(key);
    }
    let insert = rate(keys.len(), start);
    let mut lookups = [0.0; 2];
    for (slot, set) in lookups.iter_mut().zip([keys, absent]) {
        let start = Instant::now();
        let found = set.iter().filter(|key| filter.contains(*key)).count();
        *slot = rate(set.len(), start);
        black_box(found);
    }
    let start = Instant::now();
    for key in keys {
        filter.remove(key);
    }
    [insert, lookups[0], lookups[1], rate(keys.len(), start)]
}

/// SplitMix64's finaliser: a key's hash, and the second bucket's from the first's.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `x` scaled onto `0..n` (multiply-shift, as the filter maps hashes to buckets).
fn onto(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

/// Reads of a packed table: the 40-bit bucket at `bucket`, joined from the two words it may
/// span (both always loaded, as the filter loads them, without a branch).
#[inline(always)]
fn packed_bucket(words: &[AtomicU64], bucket: u64) -> u64 {
    let bit = bucket * 40;
    let (first, shift) = ((bit >> 6) as usize, (bit & 63) as u32);
    let low = words[first].load(Ordering::Acquire);
    let high = words[first + 1].load(Ordering::Acquire);
    (low >> shift) | ((high << 1) << (63 - shift))
}

/// The reads alone, `ops` operations: packed buckets (`packed`) or one word per bucket.
#[inline(never)]
fn reads(words: &[AtomicU64], buckets: u64, ops: u64, round: u64, packed: bool) -> f64 {
    let start = Instant::now();
    let mut hits = 0u64;
    for op in 0..ops {
        let hash = mix(op.wrapping_add(round.wrapping_mul(ops)));
        let (a, b) = (onto(hash, buckets), onto(mix(hash), buckets));
        let hit = if packed {
            let (x, y) = (packed_bucket(words, a), packed_bucket(words, b));
            ((x ^ hash) & 0x3FF == 0) | ((y ^ hash) & 0x3FF == 0)
        } else {
            let x = words[a as usize].load(Ordering::Acquire);
            let y = words[b as usize].load(Ordering::Acquire);
            ((x ^ hash) & 0xFFF == 0) | ((y ^ hash) & 0xFFF == 0)
        };
        hits += u64::from(hit);
    }
    black_box(hits);
    rate(ops as usize, start)
}

/// Words filled with arbitrary non-zero bits (every page backed, as in a full filter).
fn arbitrary_words(len: usize) -> Vec<AtomicU64> {
    (0..len as u64)
        .map(|i| AtomicU64::new(mix(i) | 1))
        .collect()
}

/// The median of `values` (not empty).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn main() {
    let (rounds, _) = quick_args(&[]);
    for (n, label) in quick_sizes() {
        let (packed, one_word) = (build(n, Layout::Packed), build(n, Layout::OneWord));
        // Both layouts get the same keys: as many as the smaller capacity holds at 95 %.
        let count = packed.capacity().min(one_word.capacity()) * 95 / 100;
        let (packed_words, one_word_words) = (
            (packed.memory_usage() / 8) as u64,
            (one_word.memory_usage() / 8) as u64,
        );
        drop((packed, one_word));
        // rates[layout][row][round]: 0 packed, 1 one-word.
        let mut rates = vec![vec![Vec::new(); ROWS.len()]; 2];
        for round in 0..rounds {
            let keys = splitmix(0x1A70_0000 + round as u64, count);
            let absent = splitmix(0xAB5E_0000 + round as u64, count);
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for layout in order {
                let kind = [Layout::Packed, Layout::OneWord][layout];
                for (row, r) in filter_round(n, kind, &keys, &absent)
                    .into_iter()
                    .enumerate()
                {
                    rates[layout][row].push(r);
                }
            }
            for layout in order {
                // Buckets of 40 bits packed (a spare word at the end for the last one's
                // second load), or one per word.
                let (words, buckets) = if layout == 0 {
                    (packed_words, (packed_words - 1) * 64 / 40)
                } else {
                    (one_word_words, one_word_words)
                };
                let table = arbitrary_words(words as usize);
                let r = reads(&table, buckets, count as u64, round as u64, layout == 0);
                rates[layout][4].push(r);
            }
        }
        println!("| {label} items, one thread | packed M/s | one-word M/s | packed / one-word (median of rounds, range) |");
        println!("|---|---:|---:|---:|");
        for (row, name) in ROWS.iter().enumerate() {
            let ratios: Vec<f64> = rates[0][row]
                .iter()
                .zip(&rates[1][row])
                .map(|(p, o)| p / o)
                .collect();
            let (low, high) = ratios
                .iter()
                .fold((f64::MAX, 0.0f64), |(l, h), &r| (l.min(r), h.max(r)));
            println!(
                "| {name} | {:.1} | {:.1} | {:.2} ({low:.2}–{high:.2}) |",
                median(&rates[0][row]),
                median(&rates[1][row]),
                median(&ratios),
            );
        }
    }
}
