//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::{self, Write};
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

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
