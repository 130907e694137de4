//! Helpers shared by the benchmarks in `benches/` (`cargo bench -p peer-benches --bench filters`,
//! then `python3 peer-benches/benches/report.py`); nothing to use outside them.

pub mod redisbloom;

/// `n` keys from SplitMix64 seeded with `seed`: the same keys for every filter and every run.
pub fn splitmix(seed: u64, n: usize) -> Vec<u64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .collect()
}
