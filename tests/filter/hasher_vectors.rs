//! The default hasher's output is part of the snapshot format: it must be the same on every
//! target, CPU feature set, build flag and version of this crate. These vectors pin it; a change
//! here makes every saved filter unreadable, so it needs a new format version.

use std::hash::{BuildHasher, Hasher};

use atomic_cuckoo::DefaultHashBuilder;
use rapidhash::v3::{rapidhash_v3_seeded, RapidSecrets};

/// The seed `DefaultHashBuilder` documents.
const SEED: u64 = 0x243F_6A88_85A3_08D3;

fn hash<T: std::hash::Hash + ?Sized>(item: &T) -> u64 {
    DefaultHashBuilder.hash_one(item)
}

#[test]
fn default_hasher_output_is_pinned() {
    let vectors: [(&str, u64, u64); 13] = [
        ("0u64", hash(&0u64), 0x7c76_4c8b_8593_918e),
        ("1u64", hash(&1u64), 0x2eb5_12d8_78cd_df21),
        ("42u64", hash(&42u64), 0x096c_d844_e645_325f),
        ("u64::MAX", hash(&u64::MAX), 0xb456_3fe1_a3d1_af1d),
        ("7u32", hash(&7u32), 0x8f4c_357a_8026_1a5d),
        ("-1i64", hash(&-1i64), 0xb456_3fe1_a3d1_af1d),
        ("42usize", hash(&42usize), 0x096c_d844_e645_325f),
        ("\"\"", hash(""), 0x1e14_00da_bef3_068c),
        ("\"user:42\"", hash("user:42"), 0x658c_895c_2d76_f8e5),
        ("b\"bytes\"[..]", hash(&b"bytes"[..]), 0xa860_23ee_4d24_8c5b),
        (
            "(1u8, 2u16, \"x\")",
            hash(&(1u8, 2u16, "x")),
            0xc858_57df_2aba_56fc,
        ),
        (
            "\"a\" x 100",
            hash("a".repeat(100).as_str()),
            0x0f68_55c7_8b99_40c7,
        ),
        (
            "(0..1000u32) as Vec",
            hash(&(0..1000u32).collect::<Vec<_>>()),
            0xeae2_77c7_c7be_c648,
        ),
    ];
    for (what, got, want) in vectors {
        assert_eq!(
            got, want,
            "hash of {what}: {got:#018x}, pinned {want:#018x}"
        );
    }
}

/// The definition, checked against rapidhash itself: the hash is rapidhash V3 of the written
/// byte stream, integers little-endian at their width, `usize` as 8 bytes.
#[test]
fn default_hasher_is_rapidhash_v3_of_the_little_endian_byte_stream() {
    let secrets = RapidSecrets::seed(SEED);
    let v3 = |bytes: &[u8]| rapidhash_v3_seeded(bytes, &secrets);
    assert_eq!(
        hash(&0x0102_0304_0506_0708u64),
        v3(&[8, 7, 6, 5, 4, 3, 2, 1])
    );
    assert_eq!(hash(&0x0102u16), v3(&[2, 1]));
    assert_eq!(hash(&3usize), v3(&3u64.to_le_bytes()));
    assert_eq!(hash(&-2i32), v3(&(-2i32).to_le_bytes()));
    assert_eq!(hash(&(5u128 << 100)), v3(&(5u128 << 100).to_le_bytes()));
    // std's `str` impl writes the bytes and a 0xff terminator.
    assert_eq!(hash("abc"), v3(b"abc\xff"));
}

/// The documented chain for inputs longer than 48 bytes, written from the docs: 48-byte
/// pieces, the first hashed alone, each next one followed by the previous hash (LE).
fn chained_reference(bytes: &[u8], secrets: &RapidSecrets) -> u64 {
    let mut pieces = bytes.chunks(48);
    let first = pieces.next().unwrap_or(&[]);
    pieces.fold(rapidhash_v3_seeded(first, secrets), |before, piece| {
        let mut input = piece.to_vec();
        input.extend_from_slice(&before.to_le_bytes());
        rapidhash_v3_seeded(&input, secrets)
    })
}

/// Inputs of any length, however the writes are split, hash as the documented definition says
/// (rapidhash V3 of the whole input up to 48 bytes, the chain beyond).
#[test]
fn long_and_split_inputs_hash_as_documented() {
    let secrets = RapidSecrets::seed(SEED);
    let data: Vec<u8> = (0..600u32).map(|i| (i * 7 + 3) as u8).collect();
    for len in [
        0usize, 1, 47, 48, 49, 64, 95, 96, 97, 111, 112, 113, 200, 600,
    ] {
        let want = chained_reference(&data[..len], &secrets);
        if len <= 48 {
            assert_eq!(want, rapidhash_v3_seeded(&data[..len], &secrets));
        }
        for split in [1usize, 3, 16, 48, 100] {
            let mut hasher = DefaultHashBuilder.build_hasher();
            for chunk in data[..len].chunks(split) {
                hasher.write(chunk);
            }
            assert_eq!(hasher.finish(), want, "len {len} in writes of {split}");
        }
    }
}
