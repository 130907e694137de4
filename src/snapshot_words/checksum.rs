//! The snapshot checksum: a 64-bit hash of the snapshot's little-endian `u64` words.
//!
//! Defined here, not borrowed from a hashing crate, because a saved file must be checkable by
//! any later build. Word `i` goes to lane `i mod 4` (four independent lanes keep the multiply
//! latency off the critical path); each lane step `s' = rotl((s ^ w) * K, 29)` is a bijection
//! of `s` for a fixed word and of `w` for a fixed state. The lanes and the word count are then
//! folded by steps that are bijections in each new input, and finished by murmur3's bijective
//! 64-bit finalizer. So changing any single word (in particular flipping any single bit) always
//! changes the checksum; other corruptions go undetected with probability about 2^-64.

const SEEDS: [u64; 4] = [
    0x6A09_E667_F3BC_C908,
    0xBB67_AE85_84CA_A73B,
    0x3C6E_F372_FE94_F82B,
    0xA54F_F53A_5F1D_36F1,
];
/// Odd, so multiplying by it is a bijection modulo 2^64.
const K: u64 = 0x9FB2_1C65_1E98_DF25;

#[inline(always)]
fn step(state: u64, word: u64) -> u64 {
    (state ^ word).wrapping_mul(K).rotate_left(29)
}

#[derive(Clone, Debug)]
pub(crate) struct Checksum {
    lanes: [u64; 4],
    words: u64,
}

impl Checksum {
    pub(crate) fn new() -> Self {
        Checksum {
            lanes: SEEDS,
            words: 0,
        }
    }

    #[inline]
    pub(crate) fn add(&mut self, word: u64) {
        let lane = (self.words & 3) as usize;
        self.lanes[lane] = step(self.lanes[lane], word);
        self.words += 1;
    }

    /// Adds the little-endian words of `bytes` (a multiple of 8 long).
    #[inline]
    pub(crate) fn add_bytes(&mut self, bytes: &[u8]) {
        debug_assert!(bytes.len().is_multiple_of(8));
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        // Word by word until lane 0 is next, then four at a time, then the tail.
        let lead = (((4 - (self.words & 3)) & 3) as usize * 8).min(bytes.len());
        let (head, rest) = bytes.split_at(lead);
        head.chunks_exact(8).for_each(|b| self.add(word(b)));
        let mut quads = rest.chunks_exact(32);
        let [mut a, mut b, mut c, mut d] = self.lanes;
        for q in &mut quads {
            a = step(a, word(&q[0..8]));
            b = step(b, word(&q[8..16]));
            c = step(c, word(&q[16..24]));
            d = step(d, word(&q[24..32]));
        }
        self.lanes = [a, b, c, d];
        self.words += (rest.len() / 32 * 4) as u64;
        quads
            .remainder()
            .chunks_exact(8)
            .for_each(|b| self.add(word(b)));
    }

    /// The checksum of the words added so far.
    pub(crate) fn value(&self) -> u64 {
        let mut z = self.words;
        for lane in self.lanes {
            z = step(z, lane);
        }
        z ^= z >> 33;
        z = z.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        z ^= z >> 33;
        z = z.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        z ^ (z >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(words: &[u64]) -> u64 {
        let mut c = Checksum::new();
        words.iter().for_each(|&w| c.add(w));
        c.value()
    }

    fn bytes_of(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn every_single_bit_flip_changes_the_checksum() {
        let words: Vec<u64> = (0..64u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let base = sum(&words);
        for i in 0..words.len() {
            for bit in 0..64 {
                let mut flipped = words.clone();
                flipped[i] ^= 1 << bit;
                assert_ne!(sum(&flipped), base, "word {i} bit {bit}");
            }
        }
    }

    #[test]
    fn order_and_length_matter() {
        assert_ne!(sum(&[1, 2]), sum(&[2, 1]));
        assert_ne!(sum(&[1, 0, 0, 0, 2]), sum(&[2, 0, 0, 0, 1]));
        assert_ne!(sum(&[0]), sum(&[0, 0]));
        assert_ne!(sum(&[]), sum(&[0]));
    }

    /// Feeding bytes in pieces of any size gives the same checksum as word by word.
    #[test]
    fn add_bytes_agrees_with_add_for_any_split() {
        let words: Vec<u64> = (0..37u64)
            .map(|i| i.wrapping_mul(0xA24B_AED4_963E_E407) ^ i)
            .collect();
        let want = sum(&words);
        let bytes = bytes_of(&words);
        for first in 0..=words.len() {
            for second in first..=words.len() {
                let mut c = Checksum::new();
                c.add_bytes(&bytes[..first * 8]);
                c.add_bytes(&bytes[first * 8..second * 8]);
                c.add_bytes(&bytes[second * 8..]);
                assert_eq!(c.value(), want, "split at {first}, {second}");
            }
        }
    }
}
