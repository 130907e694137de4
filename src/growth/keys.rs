//! An item's place in a growable table at any size: its home
//! bucket in the first table, its anchor, and a stream of bits that doublings turn from
//! fingerprint bits into bucket bits.
//!
//! The table has `base · 2^k` buckets after `k` doublings. An item's bucket on one side is its
//! home (one of the first table's `base` buckets) with the high part `stream mod 2^k`, and its
//! stored entry keeps the next `L` bits of the stream (its *tail*) plus the anchor. A doubling
//! moves the lowest tail bit into the high part, which only ever adds `2^k` to it: a bucket
//! splits into itself and one of the new buckets, so the table grows at its end and no entry
//! needs its item.
//!
//! The other side is the same item seen through a map that depends on the anchor alone: the
//! home is reflected (`r − 1 − home mod base`) and the stream is XORed with a mask. Both are
//! involutions, and the XOR acts bit by bit, so taking the alternate and doubling commute: an
//! entry's alternate bucket is found from its bucket, anchor and tail at every size, without
//! the item (partial-key cuckoo hashing).

/// Bits of the anchor: stored in every entry, never turned into bucket bits.
pub(super) const ANCHOR_BITS: u32 = 5;
const ANCHORS: usize = 1 << ANCHOR_BITS;
const ANCHOR_MASK: u64 = ANCHORS as u64 - 1;

/// The low `bits` bits set (`bits < 64`).
#[inline(always)]
pub(super) fn low_mask(bits: u32) -> u64 {
    debug_assert!(bits < 64);
    (1u64 << bits) - 1
}

/// SplitMix64's finaliser: a bijection of `u64` whose output bits each depend on every input
/// bit.
#[inline(always)]
pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A bucket's position: its home bucket in the first table and the bits doublings added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pos {
    pub home: u64,
    pub high: u64,
}

/// One item, hashed: everything its two entries are made of.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Key {
    pub anchor: u64,
    /// The home bucket in the first table, per side.
    pub home: [u64; 2],
    /// The bit stream, per side.
    pub stream: [u64; 2],
}

impl Key {
    /// The item's bucket on `side` after `doublings` doublings.
    #[inline(always)]
    pub(crate) fn pos(&self, side: usize, doublings: u32) -> Pos {
        Pos {
            home: self.home[side],
            high: self.stream[side] & low_mask(doublings),
        }
    }

    /// Whether this item's insert is one of the one in `one_in` (a power of two) that claim
    /// a run of old buckets to split: from the stream's top bits, which lanes use only once
    /// nearly every bit of the stream is, so the choice is independent of the item's buckets
    /// and entries. A function of the item alone, so that a restored copy splits as the
    /// original does.
    #[inline(always)]
    pub(crate) fn claims_run(&self, one_in: u64) -> bool {
        debug_assert!(one_in.is_power_of_two() && one_in > 1);
        self.stream[0] >> (64 - one_in.trailing_zeros()) == 0
    }

    /// The entry field (marker bit above `tail_bits` tail bits) this item has on `side`.
    #[inline(always)]
    pub(crate) fn field(&self, side: usize, doublings: u32, tail_bits: u32) -> u64 {
        (1u64 << tail_bits) | ((self.stream[side] >> doublings) & low_mask(tail_bits))
    }
}

/// The per-anchor maps, fixed by the first table's bucket count.
#[derive(Clone, Debug)]
pub(super) struct KeyMap {
    base: u64,
    /// Even numbers below `base`: the home reflection `r − 1 − home (mod base)` then has no
    /// fixed point (`2 · home ≡ r − 1` has no solution with `base` even and `r − 1` odd), so
    /// an item's two buckets always differ.
    reflect: [u64; ANCHORS],
    stream_mask: [u64; ANCHORS],
}

impl KeyMap {
    /// Maps for a first table of `base` buckets (`base` even, below 2^32).
    pub(crate) fn new(base: u64) -> Self {
        debug_assert!(base >= 2 && base.is_multiple_of(2) && base <= 1 << 32);
        let mut reflect = [0; ANCHORS];
        let mut stream_mask = [0; ANCHORS];
        for a in 0..ANCHORS as u64 {
            let r = mix(a ^ 0xa076_1d64_78bd_642f);
            reflect[a as usize] = (((r >> 32) * (base / 2)) >> 32) * 2;
            stream_mask[a as usize] =
                mix(a.wrapping_mul(0xe703_7ed1_a0b4_28db) ^ 0x8ebc_6af0_9c88_c6e3);
        }
        KeyMap {
            base,
            reflect,
            stream_mask,
        }
    }

    #[inline(always)]
    fn reflect_home(&self, anchor: u64, home: u64) -> u64 {
        // reflect + base - 1 - home lies in [0, 2 base - 1): one conditional subtraction.
        let h = self.reflect[anchor as usize] + self.base - 1 - home;
        if h >= self.base {
            h - self.base
        } else {
            h
        }
    }

    /// Splits a 64-bit item hash. The home comes from the upper 32 bits (multiply-shift, any
    /// bucket count), the anchor from the lowest 5, and the stream from a bijective mix of all
    /// 64, so that bucket bits and fingerprint bits are independent.
    #[inline(always)]
    pub(crate) fn key(&self, hash: u64) -> Key {
        let anchor = hash & ANCHOR_MASK;
        let home = ((hash >> 32) * self.base) >> 32;
        let stream = mix(hash ^ 0x5851_f42d_4c95_7f2d);
        Key {
            anchor,
            home: [home, self.reflect_home(anchor, home)],
            stream: [stream, stream ^ self.stream_mask[anchor as usize]],
        }
    }

    /// The other bucket and field of an entry with `anchor` and `field` in `bucket`, after
    /// `doublings` doublings.
    #[inline(always)]
    pub(crate) fn alternate(
        &self,
        pos: Pos,
        anchor: u64,
        field: u64,
        doublings: u32,
    ) -> (Pos, u64) {
        let tail_bits = field_tail_bits(field);
        let mask = self.stream_mask[anchor as usize];
        let other = Pos {
            home: self.reflect_home(anchor, pos.home),
            high: pos.high ^ (mask & low_mask(doublings)),
        };
        (other, field ^ ((mask >> doublings) & low_mask(tail_bits)))
    }
}

/// The number of tail bits of a field: the marker is its highest set bit.
#[inline(always)]
pub(super) fn field_tail_bits(field: u64) -> u32 {
    debug_assert!(field != 0);
    63 - field.leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alternate_of_either_side_is_the_other_side_at_every_size() {
        let mut h = 0x1234_5678_9abc_def0u64;
        for base in [2u64, 4, 6, 10, 262, 1000] {
            let map = KeyMap::new(base);
            for _ in 0..2000 {
                h = mix(h);
                let key = map.key(h);
                for doublings in 0..12 {
                    for tail_bits in 0..10 {
                        let b = [key.pos(0, doublings), key.pos(1, doublings)];
                        assert_ne!(b[0].home, b[1].home, "an item's two buckets differ");
                        let f = [
                            key.field(0, doublings, tail_bits),
                            key.field(1, doublings, tail_bits),
                        ];
                        assert_eq!(
                            map.alternate(b[0], key.anchor, f[0], doublings),
                            (b[1], f[1])
                        );
                        assert_eq!(
                            map.alternate(b[1], key.anchor, f[1], doublings),
                            (b[0], f[0])
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_doubling_moves_the_lowest_tail_bit_into_the_bucket() {
        let map = KeyMap::new(262);
        let mut h = 7u64;
        for _ in 0..2000 {
            h = mix(h);
            let key = map.key(h);
            for side in 0..2 {
                for k in 0..12 {
                    for tail_bits in 1..10 {
                        let field = key.field(side, k, tail_bits);
                        let pos = key.pos(side, k);
                        let bit = field & 1;
                        let next = key.pos(side, k + 1);
                        assert_eq!((next.home, next.high), (pos.home, pos.high + (bit << k)));
                        assert_eq!(key.field(side, k + 1, tail_bits - 1), field >> 1);
                    }
                }
            }
        }
    }
}
