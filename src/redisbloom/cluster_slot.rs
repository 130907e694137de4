//! Redis Cluster's key slots: the hash tag, CRC-16/XMODEM, and a tag for a chosen slot.

use std::sync::OnceLock;

/// Redis Cluster's hash tag of `key`: the bytes between its first `{` and the first `}` after
/// that, if there are any; `None` when the whole key is hashed (no `{`, no `}` after it, or
/// nothing between them).
pub(crate) fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let len = key[open + 1..].iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's key hash.
pub(crate) fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |mut crc, &b| {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
        crc
    })
}

/// The cluster hash slot of `key`.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) & 0x3fff
}

/// The shortest lower-case hex number whose slot is `slot` (the smallest number: every slot
/// has one below 0x100000, the unit tests check them all).
pub(crate) fn tag_for_slot(slot: u16) -> Vec<u8> {
    format!("{:x}", smallest_tags()[usize::from(slot & 0x3fff)]).into_bytes()
}

/// For each slot, the smallest number whose lower-case hex has that slot: found once, by one
/// pass over the numbers from 0 (a few hundred thousand CRCs), for every slot at once.
fn smallest_tags() -> &'static [u32] {
    static TAGS: OnceLock<Box<[u32]>> = OnceLock::new();
    TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; 1 << 14];
        let mut left = tags.len();
        for n in 0u32.. {
            let tag = &mut tags[usize::from(crc16(format!("{n:x}").as_bytes()) & 0x3fff)];
            if *tag == u32::MAX {
                *tag = n;
                left -= 1;
                if left == 0 {
                    break;
                }
            }
        }
        tags.into_boxed_slice()
    })
}

/// The cluster specification's slot, written plainly as an oracle for `key_slot`: the hash
/// tag is what lies between the first `{` and the first `}` after it, if that is not
/// empty; CRC16-CCITT (XMODEM) computed bit by bit, not by table. (The bridge tests also
/// check temporary keys against a server's `CLUSTER KEYSLOT`.)
#[cfg(test)]
pub(crate) fn reference_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let len = rest.iter().position(|&b| b == b'}')?;
            (len > 0).then(|| &rest[..len])
        })
        .unwrap_or(key);
    let mut crc = 0u16;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc & 0x3fff
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle itself, on the specification's check value and slots that Redis documents.
    #[test]
    fn the_reference_slot_matches_known_values() {
        // CRC16-XMODEM's check value: 0x31C3 for "123456789", whose slot is its low 14 bits.
        assert_eq!(reference_slot(b"123456789"), 0x31c3 & 0x3fff);
        assert_eq!(reference_slot(b"foo"), 12_182);
        assert_eq!(reference_slot(b"{foo}.bar"), 12_182);
    }

    /// This crate's slot function agrees with the specification's, written plainly, on many
    /// random keys made of few distinct bytes (braces often), and the slot search behind `{n}`
    /// tags ends for every slot.
    #[test]
    fn slots_agree_with_the_specification_and_every_slot_has_a_tag() {
        let mut rng = crate::redisbloom::testkit::Rng::seeded("slots_agree_with_the_specification");
        for _ in 0..20_000 {
            let len = rng.below(8) as usize;
            let key: Vec<u8> = (0..len)
                .map(|_| b"{}a\xff"[rng.below(4) as usize])
                .collect();
            assert_eq!(key_slot(&key), reference_slot(&key), "{key:?}");
        }
        let mut found = vec![false; 1 << 14];
        let mut left = found.len();
        for n in 0u32..0x10_0000 {
            let slot = crc16(format!("{n:x}").as_bytes()) & 0x3fff;
            if !std::mem::replace(&mut found[usize::from(slot)], true) {
                left -= 1;
                if left == 0 {
                    println!("every slot has a tag below {n:#x}");
                    break;
                }
            }
        }
        assert_eq!(left, 0);
        assert_eq!(key_slot(&tag_for_slot(12_182)), 12_182);
        for slot in 0..1u16 << 14 {
            assert_eq!(reference_slot(&tag_for_slot(slot)), slot);
        }
        // The table holds the smallest number of each slot, as a search from 0 finds it.
        for slot in (0..1u16 << 14).step_by(331) {
            let smallest = (0u32..)
                .map(|n| format!("{n:x}").into_bytes())
                .find(|tag| reference_slot(tag) == slot);
            assert_eq!(Some(tag_for_slot(slot)), smallest, "slot {slot}");
        }
    }
}
