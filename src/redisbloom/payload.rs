//! The `DUMP` / `RESTORE` payload of a RedisBloom cuckoo filter (module type `MBbloomCF`,
//! encoding version 4).
//!
//! ```text
//! 07                                      RDB_TYPE_MODULE_2
//! 81 30 16 e5 a2 89 82 14 04              module type id (a 64-bit RDB length)
//! 02 L(numFilters) 02 L(numBuckets) 02 L(numItems) 02 L(numDeletes)
//! 02 L(bucketSize) 02 L(maxIterations) 02 L(expansion)
//! { 02 L(numBuckets_i) 05 <string: sub-filter i> } per sub-filter
//! 00                                      end of the module value
//! <u16 LE RDB version> <u64 LE CRC-64/Jones of everything before it>
//! ```

use super::crc64::crc64;
use super::error::LoadError;
use super::header::Header;
use super::params::Geometry;
use super::raw::RawFilter;
use super::rdb::{self, Reader, OPCODE_EOF, TYPE_MODULE_2};

/// The module type id: `MBbloomCF` in 54 bits, then encoding version 4 in the low 10 bits.
pub(crate) const MODULE_ID: u64 = 0x3016_e5a2_8982_1404;
/// Bits of the module type id that hold the encoding version.
const ENCVER_BITS: u32 = 10;
/// The encoding version of every compatible RedisBloom (2.2.15 and later).
const ENCVER: u64 = 4;

/// Oldest RDB version accepted: 9 (Redis 5.0) introduced `RDB_TYPE_MODULE_2`, so no Redis
/// writes this value with an older version.
pub(crate) const MIN_RDB_VERSION: u16 = 9;
/// Newest RDB version accepted: 12 (Redis 7.4 and 8.x). `RESTORE` refuses versions above the
/// server's own: 10 for Redis 7.0, 11 for 7.2.
pub(crate) const MAX_RDB_VERSION: u16 = 12;
/// The RDB version with which a payload restores on the most servers (Redis 5.0 and later).
pub const PORTABLE_RDB_VERSION: u16 = 9;

/// RDB version (2 bytes) and CRC (8 bytes).
const FOOTER_LEN: usize = 10;

/// The `DUMP` payload for a filter: `header`'s counters and geometry, then `filters` (sub-filter
/// `i` is `geometry.sub_bytes(i)` bytes, and there are `header.filters` of them), written
/// uncompressed with RDB version `rdb_version` (see [`PORTABLE_RDB_VERSION`]).
///
/// Redis's own `DUMP` LZF-compresses strings longer than 20 bytes when `rdbcompression` is on,
/// so for larger sub-filters the bytes differ from it; `RESTORE` accepts both.
pub(crate) fn encode(header: &Header, filters: &[&[u8]], rdb_version: u16) -> Vec<u8> {
    let lens: Vec<usize> = filters.iter().map(|f| f.len()).collect();
    let mut out = Vec::with_capacity(encoded_len(header, &lens));
    encode_into(&mut out, header, filters, rdb_version);
    out
}

/// The length of [`encode`]'s payload for sub-filters of these lengths.
pub(crate) fn encoded_len(header: &Header, lens: &[usize]) -> usize {
    let fields = [
        header.filters,
        header.buckets,
        header.items,
        header.deletes,
        u64::from(header.bucket_size),
        u64::from(header.max_iterations),
        u64::from(header.expansion),
    ];
    let bucket_size = header.bucket_size.max(1) as usize;
    1 + len_size(MODULE_ID)
        + fields.iter().map(|&f| 1 + len_size(f)).sum::<usize>()
        + lens
            .iter()
            .map(|&len| 2 + len_size((len / bucket_size) as u64) + len_size(len as u64) + len)
            .sum::<usize>()
        + 1
        + FOOTER_LEN
}

/// Bytes [`rdb::put_len`] writes for `n`.
fn len_size(n: u64) -> usize {
    match n {
        0..0x40 => 1,
        0x40..0x4000 => 2,
        _ if n <= u64::from(u32::MAX) => 5,
        _ => 9,
    }
}

/// Appends [`encode`]'s payload to `out`, [`encoded_len`] bytes, without another copy of the
/// sub-filters (a caller that sends it can write it straight into its command buffer).
pub(crate) fn encode_into(out: &mut Vec<u8>, header: &Header, filters: &[&[u8]], rdb_version: u16) {
    debug_assert_eq!(header.filters, filters.len() as u64);
    let start = out.len();
    out.push(TYPE_MODULE_2);
    rdb::put_len(out, MODULE_ID);
    for field in [
        header.filters,
        header.buckets,
        header.items,
        header.deletes,
        u64::from(header.bucket_size),
        u64::from(header.max_iterations),
        u64::from(header.expansion),
    ] {
        rdb::put_uint(out, field);
    }
    let bucket_size = header.bucket_size.max(1) as usize;
    for filter in filters {
        rdb::put_uint(out, (filter.len() / bucket_size) as u64);
        rdb::put_string(out, filter);
    }
    rdb::put_len(out, OPCODE_EOF);
    out.extend_from_slice(&[0; FOOTER_LEN]);
    set_version(&mut out[start..], rdb_version);
}

/// Rewrites the footer of a payload from [`encode`]: RDB version `rdb_version`, and the CRC
/// over everything before the CRC.
pub(crate) fn set_version(payload: &mut [u8], rdb_version: u16) {
    let body = payload.len() - FOOTER_LEN;
    payload[body..body + 2].copy_from_slice(&rdb_version.to_le_bytes());
    let crc = crc64(0, &payload[..body + 2]);
    payload[body + 2..].copy_from_slice(&crc.to_le_bytes());
}

/// Reads a `DUMP` payload of a cuckoo filter.
///
/// Checks, in order: the footer (RDB version in `9..=12`, then the CRC; a footer cut short is
/// [`LoadError::PayloadTruncated`]), the value type and
/// module type id, the encoding version, the header fields (each 16-bit field must fit, then
/// everything [`Header::validate`] checks), each sub-filter's bucket count against the
/// geometry and its length against its bucket count (before decompressing it), the end
/// marker, no trailing bytes, and the item count against the occupied slots. Every length is
/// checked against the bytes left before anything is allocated for it.
pub(crate) fn decode(payload: &[u8]) -> Result<RawFilter, LoadError> {
    let mut r = Reader::new(check_footer(payload)?);
    let found = r.byte()?;
    if found != TYPE_MODULE_2 {
        return Err(LoadError::ValueType { found });
    }
    let id = r.len()?;
    if id >> ENCVER_BITS != MODULE_ID >> ENCVER_BITS {
        return Err(LoadError::ModuleType { id });
    }
    let encver = id & ((1 << ENCVER_BITS) - 1);
    if encver != ENCVER {
        return Err(LoadError::EncodingVersion { encver });
    }
    let header = read_header(&mut r)?;
    let (geometry, count) = header.validate()?;
    let mut filters = Vec::new();
    for index in 0..count {
        filters.push(read_sub_filter(&mut r, &geometry, index)?);
    }
    r.opcode(OPCODE_EOF)?;
    if r.remaining() > 0 {
        return Err(LoadError::TrailingBytes {
            offset: r.offset(),
            len: r.remaining(),
        });
    }
    RawFilter::with_counted_items(header, geometry, filters)
}

/// The payload without its footer, once the footer's version and CRC are right (checked in
/// that order, as Redis does).
fn check_footer(payload: &[u8]) -> Result<&[u8], LoadError> {
    let body_len = payload
        .len()
        .checked_sub(FOOTER_LEN)
        .ok_or(LoadError::PayloadTooShort { len: payload.len() })?;
    let (body, footer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if !(MIN_RDB_VERSION..=MAX_RDB_VERSION).contains(&version) {
        return Err(match footer_cut_short(payload) {
            Some(missing) => LoadError::PayloadTruncated {
                len: payload.len(),
                missing,
            },
            None => LoadError::RdbVersion { version },
        });
    }
    let stored = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    let computed = crc64(0, &payload[..payload.len() - 8]);
    if stored != computed {
        return Err(LoadError::Checksum { stored, computed });
    }
    Ok(body)
}

/// How many bytes (1 to 8) are missing from the end of a payload whose footer is cut short,
/// if it is: the end-of-value opcode and a valid RDB version sit that many bytes earlier than
/// in a whole payload, followed by the CRC-64's first bytes (all that is left of it).
///
/// A payload one byte short shifts its footer: the RDB version is then read from the body's
/// last byte and the version's low byte (9 reads as 2304), and the CRC from the rest.
fn footer_cut_short(payload: &[u8]) -> Option<usize> {
    (1..=8).find(|&missing| {
        let Some(version_at) = (payload.len() + missing).checked_sub(FOOTER_LEN) else {
            return false;
        };
        let crc_at = version_at + 2;
        let version = u16::from_le_bytes([payload[version_at], payload[version_at + 1]]);
        let crc = crc64(0, &payload[..crc_at]).to_le_bytes();
        version_at > 0
            && u64::from(payload[version_at - 1]) == OPCODE_EOF
            && (MIN_RDB_VERSION..=MAX_RDB_VERSION).contains(&version)
            && payload[crc_at..] == crc[..payload.len() - crc_at]
    })
}

fn read_header(r: &mut Reader<'_>) -> Result<Header, LoadError> {
    let filters = r.uint()?;
    let buckets = r.uint()?;
    let items = r.uint()?;
    let deletes = r.uint()?;
    let mut narrow = |field: &'static str| {
        let value = r.uint()?;
        u16::try_from(value).map_err(|_| LoadError::FieldTooWide { field, value })
    };
    Ok(Header {
        items,
        buckets,
        deletes,
        filters,
        bucket_size: narrow("bucket size")?,
        max_iterations: narrow("max iterations")?,
        expansion: narrow("expansion")?,
    })
}

fn read_sub_filter(
    r: &mut Reader<'_>,
    geometry: &Geometry,
    index: u16,
) -> Result<Vec<u8>, LoadError> {
    // Both exist: the header validated with more than `index` sub-filters.
    let expected = geometry.sub_buckets(index).unwrap_or(0);
    let buckets = r.uint()?;
    if buckets != expected {
        return Err(LoadError::SubFilterBuckets {
            index,
            buckets,
            expected,
        });
    }
    let expected = geometry.sub_bytes(index).unwrap_or(0);
    let string = r.string()?;
    if string.len() != expected {
        return Err(LoadError::SubFilterLength {
            index,
            len: string.len(),
            expected,
        });
    }
    Ok(string.into_bytes()?.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redisbloom::rdb::put_len;
    use crate::redisbloom::testkit::{random_filter, worked_example, Rng};

    fn encode_raw(filter: &RawFilter, version: u16) -> Vec<u8> {
        encode(&filter.header, &filter.filter_slices(), version)
    }

    /// A payload from a body, with a correct footer.
    fn seal(mut body: Vec<u8>, version: u16) -> Vec<u8> {
        body.extend_from_slice(&version.to_le_bytes());
        let crc = crc64(0, &body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    /// The body of a payload (without its footer).
    fn body(payload: &[u8]) -> Vec<u8> {
        payload[..payload.len() - FOOTER_LEN].to_vec()
    }

    /// The layout of spec §8, written out byte by byte for the worked example.
    #[test]
    fn worked_example_payload_bytes() {
        let mut want = vec![0x07, 0x81, 0x30, 0x16, 0xe5, 0xa2, 0x89, 0x82, 0x14, 0x04];
        want.extend_from_slice(&[
            0x02, 3, 0x02, 4, 0x02, 8, 0x02, 0, 0x02, 1, 0x02, 20, 0x02, 1,
        ]);
        for sub in [
            [0x00, 0xc4, 0xcb, 0x10],
            [0x00, 0xbc, 0xa9, 0x06],
            [0x4b, 0x00, 0x00, 0x1c],
        ] {
            want.extend_from_slice(&[0x02, 4, 0x05, 4]);
            want.extend_from_slice(&sub);
        }
        want.push(0x00);
        want.extend_from_slice(&[10, 0]);
        let crc = crc64(0, &want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(encode_raw(&worked_example(), 10), want);
        assert_eq!(decode(&want), Ok(worked_example()));
    }

    #[test]
    fn random_filters_round_trip_at_every_accepted_version() {
        let mut rng = Rng::seeded("random_filters_round_trip_at_every_accepted_version");
        for version in MIN_RDB_VERSION..=MAX_RDB_VERSION {
            for _ in 0..100 {
                let filter = random_filter(&mut rng);
                let payload = encode_raw(&filter, version);
                let lens: Vec<usize> = filter.filters.iter().map(Vec::len).collect();
                assert_eq!(encoded_len(&filter.header, &lens), payload.len());
                let mut other = encode_raw(&filter, MIN_RDB_VERSION + MAX_RDB_VERSION - version);
                set_version(&mut other, version);
                assert_eq!(other, payload);
                assert_eq!(decode(&payload), Ok(filter));
            }
        }
    }

    /// Lengths of 64 and more take two bytes, 16384 and more five: a large sub-filter and
    /// large counters round-trip.
    #[test]
    fn multi_byte_lengths_round_trip() {
        let mut rng = Rng::seeded("multi_byte_lengths_round_trip");
        let geometry = Geometry {
            buckets: 1 << 14,
            bucket_size: 3,
            expansion: 2,
            max_iterations: 1000,
        };
        let mut filter = crate::redisbloom::testkit::filter_with(geometry, 2, &mut rng);
        filter.header.deletes = u64::MAX;
        let payload = encode_raw(&filter, 9);
        let lens: Vec<usize> = filter.filters.iter().map(Vec::len).collect();
        assert_eq!(encoded_len(&filter.header, &lens), payload.len());
        assert_eq!(decode(&payload), Ok(filter));
    }

    /// Redis's DUMP compresses sub-filters: a 64-byte "abab…" sub-filter as LZF (literal "ab",
    /// then 62 bytes from 2 back: ctrl 0xe0, extra length 53, offset byte 1).
    #[test]
    fn decodes_an_lzf_compressed_sub_filter() {
        let mut payload = vec![0x07];
        put_len(&mut payload, MODULE_ID);
        for field in [1u64, 32, 64, 0, 2, 20, 1] {
            payload.extend_from_slice(&[0x02]);
            put_len(&mut payload, field);
        }
        payload.extend_from_slice(&[0x02, 32, 0x05, 0xc3, 6, 0x40, 64]);
        payload.extend_from_slice(&[0x01, b'a', b'b', 0xe0, 53, 0x01]);
        payload.push(0x00);
        let filter = decode(&seal(payload, 10)).unwrap();
        assert_eq!(filter.filters, [b"ab".repeat(32)]);
        assert_eq!(filter.header.items, 64);
        assert_eq!(filter.geometry.buckets, 32);
    }

    /// The worked example's body with its sub-filter 0 string replaced.
    fn with_first_string(string: &[u8]) -> Vec<u8> {
        let mut b = body(&encode_raw(&worked_example(), 10));
        // Type 1 + id 9 + seven fields of 2 + "02 04" = 26: sub-filter 0's string starts there.
        b.splice(26..32, string.iter().copied());
        seal(b, 10)
    }

    #[test]
    fn rejects_a_damaged_footer() {
        let good = encode_raw(&worked_example(), 10);
        assert_eq!(
            decode(&good[..9]),
            Err(LoadError::PayloadTooShort { len: 9 })
        );
        for version in [0, 8, 13, 80] {
            assert_eq!(
                decode(&seal(body(&good), version)),
                Err(LoadError::RdbVersion { version })
            );
        }
        let mut flipped = good.clone();
        flipped[20] ^= 0x10;
        assert!(matches!(decode(&flipped), Err(LoadError::Checksum { .. })));
        let mut crc = good.clone();
        let last = crc.len() - 1;
        crc[last] ^= 1;
        assert!(matches!(decode(&crc), Err(LoadError::Checksum { .. })));
    }

    /// Every single flipped bit of a payload is refused (the CRC-64 catches it), where the same
    /// flip in a `SCANDUMP` data chunk, which has no checksum, often loads as another filter.
    #[test]
    fn every_single_bit_flip_of_a_payload_is_refused() {
        let mut rng = Rng::seeded("every_single_bit_flip_of_a_payload_is_refused");
        let (mut payload_flips, mut chunk_flips, mut chunks_loaded) = (0, 0, 0);
        for _ in 0..20 {
            // Every flip decodes the whole payload, so the work grows with the square of its
            // size: filters of at most 2 KiB (`random_filter` reaches about 170 KiB, which took
            // minutes).
            let (filter, payload) = loop {
                let filter = random_filter(&mut rng);
                let payload = encode_raw(&filter, 12);
                if payload.len() <= 2048 {
                    break (filter, payload);
                }
            };
            for bit in 0..payload.len() * 8 {
                let mut flipped = payload.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                assert!(decode(&flipped).is_err(), "bit {bit} of {}", payload.len());
                payload_flips += 1;
            }
            let slices = filter.filter_slices();
            let dump = crate::redisbloom::chunks::scandump(&filter.header, &slices);
            for (index, (_, chunk)) in dump.iter().enumerate().skip(1) {
                for bit in 0..chunk.len() * 8 {
                    let mut flipped = dump.clone();
                    flipped[index].1[bit / 8] ^= 1 << (bit % 8);
                    let chunks = flipped.iter().map(|(it, c)| (*it, c.as_slice()));
                    chunks_loaded +=
                        usize::from(crate::redisbloom::chunks::assemble(chunks).is_ok());
                    chunk_flips += 1;
                }
            }
        }
        println!(
            "payloads: 0 of {payload_flips} single-bit flips accepted; SCANDUMP data chunks: \
             {chunks_loaded} of {chunk_flips} loaded as another filter"
        );
        assert!(payload_flips > 0);
    }

    #[test]
    fn rejects_other_values_and_versions() {
        let good = body(&encode_raw(&worked_example(), 10));
        let mut b = good.clone();
        b[0] = 0x06;
        assert_eq!(decode(&seal(b, 10)), Err(LoadError::ValueType { found: 6 }));
        // The same module name with encoding version 3.
        let mut b = good.clone();
        b[9] = 0x03;
        assert_eq!(
            decode(&seal(b, 10)),
            Err(LoadError::EncodingVersion { encver: 3 })
        );
        let mut b = good.clone();
        b[2] ^= 0x01;
        assert_eq!(
            decode(&seal(b, 10)),
            Err(LoadError::ModuleType {
                id: MODULE_ID ^ 1 << 56
            })
        );
    }

    #[test]
    fn rejects_inconsistent_fields() {
        let good = body(&encode_raw(&worked_example(), 10));
        let field = |index: usize, value: u8| {
            let mut b = good.clone();
            b[11 + 2 * index] = value;
            decode(&seal(b, 10))
        };
        assert_eq!(
            field(1, 6),
            Err(LoadError::BucketsNotPowerOfTwo { buckets: 6 })
        );
        assert_eq!(field(0, 0), Err(LoadError::FilterCount { filters: 0 }));
        assert_eq!(field(5, 0), Err(LoadError::ZeroMaxIterations));
        assert_eq!(
            field(6, 3),
            Err(LoadError::ExpansionNotPowerOfTwo { expansion: 3 })
        );
        assert_eq!(
            field(2, 9),
            Err(LoadError::ItemCount {
                header: 9,
                stored: 8
            })
        );
        // Sub-filter 1's bucket count (after sub-filter 0's 8 bytes).
        let mut b = good.clone();
        b[33] = 8;
        assert_eq!(
            decode(&seal(b, 10)),
            Err(LoadError::SubFilterBuckets {
                index: 1,
                buckets: 8,
                expected: 4
            })
        );
        // A bucket size wider than 16 bits: 0x80 and four bytes in place of "01".
        let mut b = good.clone();
        b.splice(19..20, [0x80, 0x00, 0x01, 0x00, 0x01]);
        assert_eq!(
            decode(&seal(b, 10)),
            Err(LoadError::FieldTooWide {
                field: "bucket size",
                value: 0x1_0001
            })
        );
    }

    #[test]
    fn rejects_bad_strings() {
        assert_eq!(
            decode(&with_first_string(&[0x05, 3, 0, 0xc4, 0xcb])),
            Err(LoadError::SubFilterLength {
                index: 0,
                len: 3,
                expected: 4
            })
        );
        // An integer-encoded string is a decimal text: "7" is not a 4-byte sub-filter.
        assert!(matches!(
            decode(&with_first_string(&[0x05, 0xc0, 7])),
            Err(LoadError::SubFilterLength { len: 1, .. })
        ));
        assert_eq!(
            decode(&with_first_string(&[0x05, 0xc5])),
            Err(LoadError::StringEncoding {
                offset: 27,
                byte: 0xc5
            })
        );
        assert_eq!(
            decode(&with_first_string(&[0x02, 4])),
            Err(LoadError::Opcode {
                offset: 26,
                expected: 5,
                found: 2
            })
        );
        // LZF that declares 4 bytes and produces 3.
        assert_eq!(
            decode(&with_first_string(&[0x05, 0xc3, 4, 4, 0x02, 0, 0xc4, 0xcb])),
            Err(LoadError::Lzf {
                offset: 30,
                error: crate::redisbloom::LzfError::OutputTooShort {
                    produced: 3,
                    declared: 4
                }
            })
        );
        // The same sub-filter bytes as LZF are fine.
        assert_eq!(
            decode(&with_first_string(&[
                0x05, 0xc3, 5, 4, 0x03, 0, 0xc4, 0xcb, 0x10
            ])),
            Ok(worked_example())
        );
    }

    #[test]
    fn rejects_truncation_and_trailing_bytes() {
        let good = body(&encode_raw(&worked_example(), 10));
        let mut b = good.clone();
        b.push(0);
        assert_eq!(
            decode(&seal(b, 10)),
            Err(LoadError::TrailingBytes {
                offset: good.len(),
                len: 1
            })
        );
        let mut b = good.clone();
        *b.last_mut().unwrap() = 0x05;
        assert!(matches!(
            decode(&seal(b, 10)),
            Err(LoadError::Opcode {
                expected: 0,
                found: 5,
                ..
            })
        ));
        for cut in 0..good.len() {
            let result = decode(&seal(good[..cut].to_vec(), 10));
            assert!(
                matches!(result, Err(LoadError::Truncated { .. })),
                "cut {cut}: {result:?}"
            );
        }
    }

    /// A payload that claims a terabyte, or LZF expansion beyond what LZF can do, allocates
    /// nothing large: the lengths are checked against the input first.
    #[test]
    fn huge_claims_fail_before_allocating() {
        let mut payload = vec![0x07];
        put_len(&mut payload, MODULE_ID);
        for field in [1u64, 1 << 31, 0, 0, 1, 20, 1] {
            payload.push(0x02);
            put_len(&mut payload, field);
        }
        payload.extend_from_slice(&[0x02]);
        put_len(&mut payload, 1 << 31);
        payload.extend_from_slice(&[0x05, 0xc3, 3]);
        put_len(&mut payload, 1 << 31);
        payload.extend_from_slice(&[0x00, 0x00, 0x20, 0x00]);
        let result = decode(&seal(payload, 10));
        assert_eq!(
            result,
            Err(LoadError::Lzf {
                offset: 42,
                error: crate::redisbloom::LzfError::ImpossibleLength {
                    declared: 1 << 31,
                    input: 3
                }
            })
        );
    }

    /// Random damage to valid payloads (truncations, bit flips, with the CRC fixed up half the
    /// time so the parser sees the damage): never a panic, and anything accepted re-encodes
    /// to a payload that decodes the same.
    #[test]
    fn damaged_payloads_never_panic() {
        let mut rng = Rng::seeded("damaged_payloads_never_panic");
        let mut accepted = 0;
        for _ in 0..5000 {
            let filter = random_filter(&mut rng);
            let mut b = body(&encode_raw(&filter, 9));
            for _ in 0..=rng.below(3) {
                match rng.below(4) {
                    0 => b.truncate(rng.below(b.len() as u64 + 1) as usize),
                    1 => {
                        let at = rng.below(b.len() as u64 + 1) as usize;
                        b.insert(at, rng.next_u64() as u8);
                    }
                    _ if !b.is_empty() => {
                        let at = rng.below(b.len() as u64) as usize;
                        b[at] ^= 1 << rng.below(8);
                    }
                    _ => {}
                }
            }
            let mut payload = seal(b, 9);
            if rng.below(2) == 0 {
                let at = rng.below(payload.len() as u64) as usize;
                payload[at] ^= 1 << rng.below(8);
            }
            if let Ok(raw) = decode(&payload) {
                accepted += 1;
                assert_eq!(decode(&encode_raw(&raw, 12)), Ok(raw.clone()));
            }
            // Any prefix too.
            let cut = rng.below(payload.len() as u64) as usize;
            let _ = decode(&payload[..cut]);
        }
        println!("{accepted} damaged payloads were still valid");
    }
}
