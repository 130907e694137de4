//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::{self, Write};
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Every item of the multiset `model` (item → copies stored) is found by `contains` and by
/// `contains_many`, and counted at least as often as it was stored.
pub fn assert_multiset_found<S: std::hash::BuildHasher>(
    at: &str,
    filter: &atomic_cuckoo::CuckooFilter<S>,
    model: &std::collections::BTreeMap<u64, usize>,
) {
    for (&key, &copies) in model {
        assert!(
            filter.contains(&key),
            "{at}: {key:#x} ({copies} copies) missed"
        );
        let count = filter.count(&key);
        assert!(
            count >= copies,
            "{at}: count {count} of {key:#x}, {copies} stored"
        );
    }
    let keys: Vec<u64> = model.keys().copied().collect();
    let mut found = Vec::new();
    filter.contains_many(&keys, &mut found);
    if let Some(i) = found.iter().position(|&f| !f) {
        panic!("{at}: contains_many missed {:#x}", keys[i]);
    }
}

/// Every item of `batch` (each checked by `contains` already) is found by `contains_many`
/// (`found` is its reusable answer buffer), and one drawn by `rng` is counted at least once;
/// `at` names the checker in a failure.
pub fn assert_batch_found_by_contains_many_and_count(
    at: &str,
    filter: &atomic_cuckoo::CuckooFilter,
    batch: &[u64],
    found: &mut Vec<bool>,
    rng: &mut Rng,
) {
    filter.contains_many(batch, found);
    if let Some(i) = found.iter().position(|&b| !b) {
        panic!("{at}: {:#x} missed by contains_many", batch[i]);
    }
    let x = batch[rng.below(batch.len() as u64) as usize];
    assert!(filter.count(&x) >= 1, "{at}: count of {x:#x}");
}

/// A growable filter of `capacity` at `rate`, its lanes planned for `expected` items if given
/// (`Builder::expected_items`), else for the default growth.
pub fn growable_planned(
    capacity: usize,
    rate: f64,
    expected: Option<usize>,
) -> atomic_cuckoo::CuckooFilter {
    try_growable_planned(capacity, rate, expected)
        .unwrap_or_else(|e| panic!("capacity {capacity} rate {rate} expected {expected:?}: {e}"))
}

/// [`growable_planned`], or the builder's error (a plan no lane width can keep).
pub fn try_growable_planned(
    capacity: usize,
    rate: f64,
    expected: Option<usize>,
) -> Result<atomic_cuckoo::CuckooFilter, atomic_cuckoo::BuildError> {
    try_growable_planned_with(capacity, rate, expected, atomic_cuckoo::DefaultHashBuilder)
}

/// [`try_growable_planned`] with the hasher `hasher`.
pub fn try_growable_planned_with<S: std::hash::BuildHasher>(
    capacity: usize,
    rate: f64,
    expected: Option<usize>,
    hasher: S,
) -> Result<atomic_cuckoo::CuckooFilter<S>, atomic_cuckoo::BuildError> {
    let builder = atomic_cuckoo::CuckooFilter::builder()
        .capacity(capacity)
        .false_positive_rate(rate)
        .growable(true)
        .hasher(hasher);
    match expected {
        Some(items) => builder.expected_items(items),
        None => builder,
    }
    .build()
}

/// A growable filter (`Builder::growable`) for `capacity` items before its first doubling at a
/// target `rate`: coarse rates give narrow lanes, fine ones wide.
pub fn growable(capacity: usize, rate: f64) -> atomic_cuckoo::CuckooFilter {
    atomic_cuckoo::CuckooFilter::builder()
        .capacity(capacity)
        .false_positive_rate(rate)
        .growable(true)
        .build()
        .unwrap_or_else(|e| panic!("capacity {capacity} rate {rate}: {e}"))
}

/// SplitMix64: a tiny, fast, seedable generator (good enough to pick test keys and operations).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// The seed for a randomized test: `ATOMIC_CUCKOO_SEED` if set, else fresh from the clock.
/// Printed either way, so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = match std::env::var("ATOMIC_CUCKOO_SEED") {
        Ok(v) => v.parse().expect("ATOMIC_CUCKOO_SEED must be a u64"),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5eed),
    };
    println!("{test}: seed = {seed} (replay with ATOMIC_CUCKOO_SEED={seed})");
    seed
}

/// The seed for a randomized test: `ATOMIC_CUCKOO_SEED` if set, else `default` (for stress
/// tests that must fail the same way on every run). Printed either way.
pub fn seed_or(test: &str, default: u64) -> u64 {
    let seed = match std::env::var("ATOMIC_CUCKOO_SEED") {
        Ok(v) => v.parse().expect("ATOMIC_CUCKOO_SEED must be a u64"),
        Err(_) => default,
    };
    println!("{test}: seed = {seed} (replay with ATOMIC_CUCKOO_SEED={seed})");
    seed
}

/// A fixed seed, printed like a random one (for statistical tests whose outcome must not vary
/// from run to run).
pub fn fixed_seed(test: &str, seed: u64) -> u64 {
    println!("{test}: fixed seed = {seed}");
    seed
}

/// `n` distinct keys from a seeded generator (distinct: a permutation of a counter).
pub fn distinct_keys(seed: u64, n: usize) -> Vec<u64> {
    // An odd multiplier and an xor are a bijection on u64, so distinct inputs stay distinct.
    let mult = Rng::new(seed).next_u64() | 1;
    (0..n as u64).map(|i| i.wrapping_mul(mult) ^ seed).collect()
}

/// The 32-bit fingerprint of `key` in a filter with the default hasher and 32-bit fingerprints
/// (every level of a growing filter built with `fingerprint_bits(32)`): the low 32 bits of
/// its hash, 0 read as 1 (see `src/hashing.rs`).
pub fn fingerprint32(key: u64) -> u32 {
    use std::hash::BuildHasher;
    let low = atomic_cuckoo::DefaultHashBuilder.hash_one(key) as u32;
    low.max(1)
}

/// `n` distinct keys per seed (as [`distinct_keys`]), less every key whose 32-bit fingerprint
/// (see [`fingerprint32`]) is shared with any other key of any of the lists: both keys of such
/// a pair are dropped, so the lists are a little shorter than `n`.
///
/// With 32-bit fingerprints no key of these lists can then ever be a false positive of
/// another, in any level: tests whose oracle must be exact can use them. Among the millions of
/// keys of a stress test, pairs sharing a fingerprint are otherwise certain (about
/// `keys² / 2^33` of them: thousands for 8 M keys), and a lookup of an absent key finds its twin
/// when the two also share a bucket pair in the twin's level.
pub fn keys_with_distinct_fingerprints(seeds: &[u64], n: usize) -> Vec<Vec<u64>> {
    let lists: Vec<Vec<u64>> = seeds.iter().map(|&s| distinct_keys(s, n)).collect();
    let mut fps: Vec<u32> = lists.iter().flatten().map(|&k| fingerprint32(k)).collect();
    fps.sort_unstable();
    let shared: std::collections::HashSet<u32> = fps
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    lists
        .into_iter()
        .map(|keys| {
            keys.into_iter()
                .filter(|&k| !shared.contains(&fingerprint32(k)))
                .collect()
        })
        .collect()
}

/// `threads` threads race `insert_unique` over the same keys, started together; then checks
/// that each key was added by exactly one of them and is stored exactly once. (Use 32-bit
/// fingerprints, so that two of the keys colliding is negligible.)
pub fn assert_racing_insert_unique_adds_each_key_once(
    filter: &atomic_cuckoo::CuckooFilter,
    keys: &[u64],
    threads: usize,
) {
    let barrier = std::sync::Barrier::new(threads);
    let results: Vec<Vec<bool>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    keys.iter()
                        .map(|k| filter.insert_unique(k).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, k) in keys.iter().enumerate() {
        let winners = results.iter().filter(|r| r[i]).count();
        assert_eq!(winners, 1, "key {k} added by {winners} threads");
        assert_eq!(filter.count(k), 1);
    }
    assert_eq!(filter.len(), keys.len());
}

/// A destination whose first `write` reports that the save reached it, then blocks until it is
/// released (or the release side is dropped).
pub struct HeldWriter {
    pub reached: Option<mpsc::Sender<()>>,
    pub release: mpsc::Receiver<()>,
    pub bytes: Vec<u8>,
}

impl HeldWriter {
    /// The writer, a receiver told when the save reached its first write, and the release.
    pub fn new() -> (Self, mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (reached_tx, reached_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel();
        (
            HeldWriter {
                reached: Some(reached_tx),
                release: release_rx,
                bytes: Vec::new(),
            },
            reached_rx,
            release_tx,
        )
    }
}

impl Write for HeldWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(reached) = self.reached.take() {
            let _ = reached.send(());
            let _ = self.release.recv();
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A hasher that passes a `u64` item through as its hash, so a test chooses buckets and
/// fingerprints directly (bytes are shifted in, for items that are not `u64`s).
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

/// The hasher built by [`Identity`].
pub struct IdentityHasher(u64);

impl std::hash::Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl std::hash::BuildHasher for Identity {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

/// Resident set size of this process, in bytes (Linux: `VmRSS` of `/proc/self/status`).
#[cfg(target_os = "linux")]
pub fn resident() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .expect("a VmRSS line");
    kib * 1024
}

/// What finished doublings' bitmaps may keep: those under 16 KiB stay allocated (lookups on
/// other threads may still read them), 32 KiB at most in all, and a clone does not copy them.
pub const FINISHED_BITMAPS: usize = 32 << 10;

/// Asserts that `filter` (perhaps mid-doubling) and `other` (a copy, perhaps finished) report
/// the same memory but for the bitmap of a doubling in progress and what finished doublings'
/// bitmaps keep: a segment counted twice or not at all is far more.
pub fn assert_memory_agrees(
    at: &str,
    filter: &atomic_cuckoo::CuckooFilter,
    other: &atomic_cuckoo::CuckooFilter,
) {
    // A growable filter's slots are its buckets times four.
    let buckets = filter.slots() / 4;
    let bitmap = if filter.is_doubling() {
        (buckets / 2).div_ceil(64) * 8
    } else {
        0
    };
    let (a, b) = (filter.memory_usage(), other.memory_usage());
    assert!(
        a.abs_diff(b) <= bitmap + FINISHED_BITMAPS,
        "{at}: memory_usage {a} against {b} (a bitmap of {bitmap} bytes in progress)"
    );
}
