//! The hashers: [`DefaultHashBuilder`], portable by specification, and [`AHashBuilder`], fast
//! but tied to one build.
//!
//! A saved filter is only as portable as its hasher: a snapshot written on one machine must load
//! on every other, so the default hasher's output is fixed by a published algorithm,
//! rapidhash V3 (the `rapidhash` crate's `v3` functions, which match the reference C++
//! implementation and are promised stable across platforms and crate versions), over a byte
//! stream that this module defines for every `Hasher` method: integers little-endian at their
//! own width, `usize`/`isize` as 8 bytes; streams longer than 48 bytes are chained in 48-byte
//! pieces, so no hash needs the heap. `tests/filter/hasher_vectors.rs` pins the output.

use std::hash::{BuildHasher, Hasher};

use rapidhash::v3::{rapidhash_v3_inline, rapidhash_v3_seeded, RapidSecrets};

/// The default hasher's seed (fixed: the same item hashes the same way everywhere).
const SEED: u64 = 0x243F_6A88_85A3_08D3;

/// The secrets rapidhash derives from [`SEED`].
static SECRETS: RapidSecrets = RapidSecrets::seed(SEED);

/// Bytes hashed without the streaming state: covers every integer key and short strings.
const INLINE: usize = 48;

/// The default [`BuildHasher`] of a [`CuckooFilter`](crate::CuckooFilter): portable, so a
/// snapshot made anywhere loads everywhere.
///
/// An item's hash is rapidhash V3, seeded with `0x243F6A8885A308D3`, of the bytes its `Hash`
/// impl writes (inputs longer than 48 bytes: of the last piece of at most 48 bytes followed by
/// the 8 little-endian bytes of the hash of everything before it, which is defined the same
/// way over whole 48-byte pieces, the first of them hashed alone), where every [`Hasher`]
/// method writes a defined byte sequence: `u8`..`u128` and `i8`..`i128`
/// little-endian at their width, `usize` and `isize` as 8 bytes little-endian, and `write` its
/// bytes as they are. So the hash is the same on every target, CPU, build flag and version of
/// this crate; what a type's `Hash` impl writes is up to that impl (std's impls for integers,
/// `str`, slices and tuples are pinned by this crate's test vectors).
///
/// ```
/// use std::hash::BuildHasher;
/// use atomic_cuckoo::DefaultHashBuilder;
///
/// let a = DefaultHashBuilder::default().hash_one(42u64);
/// let b = DefaultHashBuilder::default().hash_one(42u64);
/// assert_eq!(a, b);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefaultHashBuilder;

impl BuildHasher for DefaultHashBuilder {
    type Hasher = PortableHasher;

    #[inline]
    fn build_hasher(&self) -> PortableHasher {
        PortableHasher {
            len: 0,
            inline: [0; INLINE],
            chained: None,
        }
    }
}

/// The [`Hasher`] of [`DefaultHashBuilder`]: collects the written bytes and hashes them with
/// rapidhash V3. Inputs of up to 48 bytes are hashed in one call; longer ones in 48-byte
/// pieces, each hashed together with the hash of the pieces before it (see
/// [`DefaultHashBuilder`]), so no input needs the heap.
#[derive(Clone, Debug)]
pub struct PortableHasher {
    len: usize,
    inline: [u8; INLINE],
    /// The hash of the full pieces written so far, once there is one.
    chained: Option<u64>,
}

impl PortableHasher {
    /// Hashes the full buffer into the chain and empties it.
    #[cold]
    fn fold_piece(&mut self) {
        debug_assert_eq!(self.len, INLINE);
        self.chained = Some(match self.chained {
            None => rapidhash_v3_seeded(&self.inline, &SECRETS),
            Some(before) => chain(&self.inline, before),
        });
        self.len = 0;
    }
}

/// A piece hashed together with the hash of the pieces before it: rapidhash V3 of the piece
/// followed by that hash's 8 bytes, little-endian.
fn chain(piece: &[u8], before: u64) -> u64 {
    let mut bytes = [0u8; INLINE + 8];
    bytes[..piece.len()].copy_from_slice(piece);
    bytes[piece.len()..piece.len() + 8].copy_from_slice(&before.to_le_bytes());
    rapidhash_v3_seeded(&bytes[..piece.len() + 8], &SECRETS)
}

impl PortableHasher {
    /// `finish` for every input but one `u64`: kept out of line, so that the `u64` case is
    /// small enough to inline into every lookup (a call per hash measured about 8 % of an
    /// in-cache lookup's time).
    #[inline(never)]
    fn finish_general(&self) -> u64 {
        match self.chained {
            None => rapidhash_v3_seeded(&self.inline[..self.len], &SECRETS),
            Some(before) => chain(&self.inline[..self.len], before),
        }
    }
}

impl Hasher for PortableHasher {
    #[inline]
    fn finish(&self) -> u64 {
        // One `u64` (the commonest key): a fixed length lets the hash's length branches fold
        // away. Same function, same result as the general call.
        if self.chained.is_none() && self.len == 8 {
            let mut word = [0; 8];
            word.copy_from_slice(&self.inline[..8]);
            return rapidhash_v3_inline::<true, false, false>(&word, &SECRETS);
        }
        self.finish_general()
    }

    #[inline]
    fn write(&mut self, mut bytes: &[u8]) {
        if self.len + bytes.len() <= INLINE {
            self.inline[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
            return;
        }
        // Fill and fold pieces; a piece is folded only once more bytes follow it, so that the
        // last piece (full or not) is the one `finish` hashes.
        while !bytes.is_empty() {
            if self.len == INLINE {
                self.fold_piece();
            }
            let take = (INLINE - self.len).min(bytes.len());
            self.inline[self.len..self.len + take].copy_from_slice(&bytes[..take]);
            self.len += take;
            bytes = &bytes[take..];
        }
    }

    // Every integer write is defined little-endian at its own width (std's defaults use the
    // machine's byte order, and `usize`'s width varies).
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write(&[i]);
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write(&i.to_le_bytes());
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write(&i.to_le_bytes());
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.write(&i.to_le_bytes());
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.write(&i.to_le_bytes());
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_i8(&mut self, i: i8) {
        self.write_u8(i as u8);
    }
    #[inline]
    fn write_i16(&mut self, i: i16) {
        self.write_u16(i as u16);
    }
    #[inline]
    fn write_i32(&mut self, i: i32) {
        self.write_u32(i as u32);
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_i128(&mut self, i: i128) {
        self.write_u128(i as u128);
    }
    #[inline]
    fn write_isize(&mut self, i: isize) {
        self.write_u64(i as i64 as u64);
    }
}

/// Fixed seeds of [`AHashBuilder`].
const AHASH_SEEDS: [u64; 4] = [
    0x243F_6A88_85A3_08D3,
    0x1319_8A2E_0370_7344,
    0xA409_3822_299F_31D0,
    0x082E_FA98_EC4E_6C89,
];

/// `ahash` with fixed seeds: an opt-in hasher for filters that never leave the process.
///
/// **Not portable:** ahash's output differs between CPU feature sets (with and without AES
/// instructions, e.g. a `-C target-cpu=native` build against a default one) and between ahash
/// versions. A snapshot written with it loads only into a build that hashes the same way, and
/// any other build refuses it with [`PersistError::HasherMismatch`](crate::PersistError). Use
/// [`DefaultHashBuilder`] for filters that are saved and loaded elsewhere.
///
/// ```
/// use atomic_cuckoo::{AHashBuilder, CuckooFilter};
///
/// let filter = CuckooFilter::builder().capacity(1_000).hasher(AHashBuilder::default()).build()?;
/// filter.insert(&7u64)?;
/// assert!(filter.contains(&7u64));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct AHashBuilder(ahash::RandomState);

impl Default for AHashBuilder {
    fn default() -> Self {
        let [a, b, c, d] = AHASH_SEEDS;
        AHashBuilder(ahash::RandomState::with_seeds(a, b, c, d))
    }
}

impl BuildHasher for AHashBuilder {
    type Hasher = ahash::AHasher;

    #[inline]
    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}
