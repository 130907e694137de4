//! CRC-64/Jones, the checksum of Redis's `DUMP` payloads: polynomial `0xad93d23594c935a9`,
//! reflected (`0x95ac9329ac4bc9b5`), initial value 0, no final XOR.

/// The reflected polynomial.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

/// The CRC of every byte value, one byte at a time.
const TABLE: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

/// The CRC-64/Jones of `bytes`, continuing from `crc` (0 to start).
pub(crate) fn crc64(crc: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(crc, |crc, &b| {
        TABLE[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit by bit, straight from the definition.
    fn crc64_bitwise(bytes: &[u8]) -> u64 {
        let mut crc = 0u64;
        for &b in bytes {
            crc ^= u64::from(b);
            for _ in 0..8 {
                let carry = crc & 1;
                crc >>= 1;
                if carry == 1 {
                    crc ^= POLY;
                }
            }
        }
        crc
    }

    #[test]
    fn check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(0, b""), 0);
    }

    #[test]
    fn the_poly_is_jones_reflected() {
        assert_eq!(0xad93_d235_94c9_35a9u64.reverse_bits(), POLY);
    }

    #[test]
    fn table_agrees_with_bitwise_and_continues() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 37 + 11) as u8).collect();
        assert_eq!(crc64(0, &data), crc64_bitwise(&data));
        for split in [0, 1, 7, 150, 300] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc64(crc64(0, a), b), crc64(0, &data));
        }
    }
}
