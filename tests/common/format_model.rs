//! A pass-through hasher, the seeded generator, a snapshot parser/writer (FORMAT.md, version 3;
//! level counts recomputed for one-word layouts only) and an independent model of FORMAT.md's
//! key mapping: for the tests that craft snapshots or choose buckets.
#![allow(dead_code)]

use std::hash::{BuildHasher, Hasher};

/// Hashes a `u64` to itself (`Hash for u64` calls `write_u64` once).
#[derive(Clone, Copy, Debug, Default)]
pub struct Id;

#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only for the hasher-check probe string: any deterministic mix.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b))
                .wrapping_mul(0x100_0000_01B3)
                .rotate_left(5);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

impl BuildHasher for Id {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

/// The shared test helpers: a seeded generator, and seeds that are printed (replay with
/// `ATOMIC_CUCKOO_SEED`).
#[allow(unused_imports)] // filter/builder_edges.rs uses neither.
pub use crate::common::{seed, Rng};

// ---------------------------------------------------------------- snapshot format

pub const HEADER_WORDS: usize = 8;

#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    pub bits: u32,
    pub buckets: usize,
    pub items: u64,
    pub words: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub header: [u64; HEADER_WORDS],
    pub levels: Vec<Level>,
}

/// The little-endian words of a snapshot's bytes.
pub fn words_of(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Snapshot words as bytes, their last word (the checksum) made right again: for forged
/// snapshots that must get past the checksum.
pub fn resealed(mut words: Vec<u64>) -> Vec<u8> {
    let n = words.len() - 1;
    words[n] = checksum(&words[..n]);
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

impl Snapshot {
    /// The bucket layout code of the header's flags (FORMAT.md).
    pub fn layout(&self) -> u16 {
        (self.header[1] >> 16) as u16
    }

    pub fn parse(bytes: &[u8]) -> Snapshot {
        let w = words_of(bytes);
        let mut header = [0u64; HEADER_WORDS];
        header.copy_from_slice(&w[..HEADER_WORDS]);
        let count = (header[3] >> 32) as usize;
        let layout = (header[1] >> 16) as u16;
        let mut at = HEADER_WORDS;
        let mut levels = Vec::new();
        for _ in 0..count {
            let bits = w[at] as u32;
            let buckets = w[at + 1] as usize;
            let items = w[at + 2];
            at += 3;
            let n = block_words(layout, bits, buckets);
            levels.push(Level {
                bits,
                buckets,
                items,
                words: w[at..at + n].to_vec(),
            });
            at += n;
        }
        assert_eq!(at + 1, w.len(), "snapshot length");
        assert_eq!(checksum(&w[..at]), w[at], "checksum of a genuine snapshot");
        Snapshot { header, levels }
    }

    /// Bytes with the level count, item totals and checksum made consistent with `levels`
    /// (level item counts are recomputed from the words unless `keep_counts`).
    pub fn encode(&self, keep_counts: bool) -> Vec<u8> {
        let mut header = self.header;
        header[3] = (header[3] & 0xFFFF_FFFF) | ((self.levels.len() as u64) << 32);
        let mut w: Vec<u64> = Vec::new();
        let mut total = 0;
        let mut body = Vec::new();
        for l in &self.levels {
            let items = if keep_counts {
                l.items
            } else {
                assert_eq!(
                    self.layout(),
                    0,
                    "counts are recomputed for one-word layouts only"
                );
                l.words.iter().map(|&x| occupied(x, l.bits)).sum()
            };
            total += items;
            body.push(u64::from(l.bits));
            body.push(l.buckets as u64);
            body.push(items);
            body.extend_from_slice(&l.words);
        }
        if !keep_counts {
            header[6] = total;
        }
        w.extend_from_slice(&header);
        w.extend_from_slice(&body);
        w.push(checksum(&w));
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// The same filter with every bucket emptied and only the first `levels` levels.
    pub fn emptied(&self, levels: usize) -> Snapshot {
        Snapshot {
            header: self.header,
            levels: self.levels[..levels]
                .iter()
                .map(|l| Level {
                    bits: l.bits,
                    buckets: l.buckets,
                    items: 0,
                    words: vec![0; l.words.len()],
                })
                .collect(),
        }
    }
}

/// Words of a level's block (FORMAT.md): one per bucket in the one-word layout (code 0); the
/// buckets' bits rounded up to words, plus the words a bucket's loads may read past the last
/// one, in the packed (1, `4f` bits a bucket) and semi-sorted (2, `4f - 4`) layouts.
pub fn block_words(layout: u16, bits: u32, buckets: usize) -> usize {
    let stride = match layout {
        0 => return buckets,
        1 => 4 * bits as usize,
        _ => 4 * bits as usize - 4,
    };
    let padding = if stride > 64 {
        2
    } else if 64 % stride == 0 {
        0
    } else {
        1
    };
    (buckets * stride).div_ceil(64) + padding
}

pub fn occupied(word: u64, bits: u32) -> u64 {
    if !(1..=64).contains(&bits) {
        return 0;
    }
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    (0..64 / bits)
        .filter(|k| (word >> (k * bits)) & mask != 0)
        .count() as u64
}

pub fn lanes(word: u64, bits: u32) -> Vec<u64> {
    let mask = (1u64 << bits) - 1;
    (0..64 / bits)
        .map(|k| (word >> (k * bits)) & mask)
        .collect()
}

/// FORMAT.md's checksum, written from the spec.
pub fn checksum(words: &[u64]) -> u64 {
    const K: u64 = 0x9FB2_1C65_1E98_DF25;
    let step = |s: u64, w: u64| (s ^ w).wrapping_mul(K).rotate_left(29);
    let mut s = [
        0x6A09_E667_F3BC_C908u64,
        0xBB67_AE85_84CA_A73B,
        0x3C6E_F372_FE94_F82B,
        0xA54F_F53A_5F1D_36F1,
    ];
    for (i, &w) in words.iter().enumerate() {
        s[i % 4] = step(s[i % 4], w);
    }
    let mut z = words.len() as u64;
    for lane in s {
        z = step(z, lane);
    }
    z ^= z >> 33;
    z = z.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    z ^= z >> 33;
    z = z.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    z ^ (z >> 33)
}

// ---------------------------------------------------------------- FORMAT.md's key mapping

/// One level's geometry, as FORMAT.md describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geo {
    pub n: u64,
    pub f: u32,
    pub n0: u64,
    pub f0: u32,
}

impl Geo {
    pub fn d(&self) -> u32 {
        assert!(
            self.n.is_multiple_of(self.n0) && (self.n / self.n0).is_power_of_two(),
            "{self:?}"
        );
        (self.n / self.n0).trailing_zeros()
    }
    pub fn primary(&self, h: u64) -> u64 {
        ((h >> 32) * self.n) >> 32
    }
    pub fn fp(&self, h: u64) -> u64 {
        ((h & 0xFFFF_FFFF) >> (32 - self.f)).max(1)
    }
    pub fn alt(&self, i: u64, fp: u64) -> u64 {
        let d = self.d();
        let g = (fp >> (self.f - self.f0)).max(1);
        let m = g.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let hh = 2 * (((m >> 32) * (self.n0 / 2)) >> 32) + 1;
        let t = if d == 0 {
            0
        } else {
            (m & 0xFFFF_FFFF) >> (32 - d)
        };
        let (q, r) = (i >> d, i & ((1u64 << d) - 1));
        let aq = (hh as i128 - q as i128).rem_euclid(self.n0 as i128) as u64;
        (aq << d) | (r ^ t)
    }
    /// (fingerprint, smaller bucket, larger bucket): equal keys collide.
    pub fn key(&self, h: u64) -> (u64, u64, u64) {
        let (p, fp) = (self.primary(h), self.fp(h));
        let a = self.alt(p, fp);
        (fp, p.min(a), p.max(a))
    }
    /// A hash whose primary is `p` and fingerprint `fp` here, with `noise` in the bits below
    /// the fingerprint.
    pub fn hash_for(&self, p: u64, fp: u64, noise: u64) -> u64 {
        let high = (p << 32).div_ceil(self.n);
        let low = (fp << (32 - self.f)) | (noise & ((1u64 << (32 - self.f)) - 1));
        let h = (high << 32) | low;
        assert_eq!((self.primary(h), self.fp(h)), (p, fp), "{self:?}");
        h
    }
}

/// The geometries of a snapshot's levels.
pub fn geos(s: &Snapshot) -> Vec<Geo> {
    let (n0, f0) = (s.levels[0].buckets as u64, s.levels[0].bits);
    s.levels
        .iter()
        .map(|l| Geo {
            n: l.buckets as u64,
            f: l.bits,
            n0,
            f0,
        })
        .collect()
}
