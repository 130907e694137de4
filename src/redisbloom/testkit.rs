//! Test helpers: a seeded generator and consistent random filters.

use super::header::Header;
use super::params::Geometry;
use super::raw::{occupied_slots, RawFilter};

/// SplitMix64, seeded; good enough to pick test shapes and bytes.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator seeded from `ATOMIC_CUCKOO_SEED`, or else from the clock; prints the seed.
    pub(crate) fn seeded(test: &str) -> Rng {
        let seed = std::env::var("ATOMIC_CUCKOO_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0x5eed, |d| d.as_nanos() as u64)
            });
        println!("{test}: seed = {seed} (replay with ATOMIC_CUCKOO_SEED={seed})");
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// A filter with the given geometry whose slots hold random fingerprints, with an item count
/// that matches them.
pub(crate) fn filter_with(geometry: Geometry, filters: u16, rng: &mut Rng) -> RawFilter {
    let fill = rng.below(101);
    let bytes: Vec<Vec<u8>> = (0..filters)
        .map(|i| {
            let len = geometry.sub_bytes(i).expect("a small geometry") as usize;
            (0..len)
                .map(|_| {
                    if rng.below(100) < fill {
                        rng.below(255) as u8 + 1
                    } else {
                        0
                    }
                })
                .collect()
        })
        .collect();
    let header = Header {
        items: occupied_slots(&bytes),
        buckets: geometry.buckets,
        deletes: rng.below(5),
        filters: u64::from(filters),
        bucket_size: geometry.bucket_size,
        max_iterations: geometry.max_iterations,
        expansion: geometry.expansion,
    };
    RawFilter {
        header,
        geometry,
        filters: bytes,
    }
}

/// A small random filter with at least one item: up to 64 buckets, bucket sizes 1..=8, up to
/// 5 sub-filters (expansion 0 gets one).
pub(crate) fn random_filter(rng: &mut Rng) -> RawFilter {
    loop {
        let expansion = [0, 1, 2, 4][rng.below(4) as usize];
        let geometry = Geometry {
            buckets: 1 << rng.below(7),
            bucket_size: rng.below(8) as u16 + 1,
            expansion,
            max_iterations: rng.below(100) as u16 + 1,
        };
        let filters = if expansion == 0 {
            1
        } else {
            rng.below(5) as u16 + 1
        };
        let filter = filter_with(geometry, filters, rng);
        if filter.header.items > 0 {
            return filter;
        }
    }
}

/// Spec §5's worked example after `CF.RESERVE w 4 BUCKETSIZE 1` and CF.ADD a..h: 4 buckets of
/// 1 slot, three sub-filters, 8 items; its header is spec §7.1's example.
pub(crate) fn worked_example() -> RawFilter {
    let header = Header {
        items: 8,
        buckets: 4,
        deletes: 0,
        filters: 3,
        bucket_size: 1,
        max_iterations: 20,
        expansion: 1,
    };
    let geometry = Geometry {
        buckets: 4,
        bucket_size: 1,
        expansion: 1,
        max_iterations: 20,
    };
    let filters = vec![
        vec![0x00, 0xc4, 0xcb, 0x10],
        vec![0x00, 0xbc, 0xa9, 0x06],
        vec![0x4b, 0x00, 0x00, 0x1c],
    ];
    RawFilter::with_counted_items(header, geometry, filters).expect("8 occupied slots")
}
