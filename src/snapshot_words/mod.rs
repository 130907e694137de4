//! The words of a snapshot: read and written little-endian in chunks, checksummed, and
//! restored into table memory without trusting a length (every filter's format is made of
//! them: `crate::persist` for a fixed table, `crate::growth`'s snapshot for a growable one).

mod checksum;

use std::io::{self, Read, Write};

use crate::error::PersistError;
use crate::sync::{AtomicU64, Ordering};
use crate::table::BucketWords;

pub(crate) use checksum::Checksum;

/// Words a reader takes before it knows which format it reads: a fixed table's header, which
/// starts with the magic that tells the formats apart.
pub(crate) const FIRST_WORDS: usize = 8;

/// Bytes read or written per I/O call: small enough to stay in cache between the copy and the
/// checksum.
const IO_CHUNK_BYTES: usize = 64 << 10;
/// Words a table restored from a stream is first given room for (1 MiB); the room then
/// doubles as words arrive.
const GROW_STEP_WORDS: usize = (1 << 20) / 8;

/// Writes words little-endian in chunks, checksumming them.
pub(crate) struct WordWriter<'w, W: Write + ?Sized> {
    out: &'w mut W,
    buffer: Vec<u8>,
    checksum: Checksum,
}

impl<'w, W: Write + ?Sized> WordWriter<'w, W> {
    pub(crate) fn new(out: &'w mut W) -> Self {
        WordWriter {
            out,
            buffer: Vec::with_capacity(IO_CHUNK_BYTES),
            checksum: Checksum::new(),
        }
    }

    pub(crate) fn words(&mut self, words: impl IntoIterator<Item = u64>) -> io::Result<()> {
        let mut words = words.into_iter();
        loop {
            let start = self.buffer.len();
            self.buffer.resize(IO_CHUNK_BYTES, 0);
            let mut filled = start;
            for (dst, w) in self.buffer[start..].chunks_exact_mut(8).zip(&mut words) {
                dst.copy_from_slice(&w.to_le_bytes());
                filled += 8;
            }
            self.buffer.truncate(filled);
            self.checksum.add_bytes(&self.buffer[start..]);
            if filled < IO_CHUNK_BYTES {
                return Ok(());
            }
            self.out.write_all(&self.buffer)?;
            self.buffer.clear();
        }
    }

    /// Writes the checksum trailer and flushes.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        let sum = self.checksum.value();
        self.buffer.extend_from_slice(&sum.to_le_bytes());
        self.out.write_all(&self.buffer)?;
        self.out.flush()
    }
}

/// How a restored table's memory is obtained.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allocation {
    /// In one piece: the input's length was checked against the headers already.
    Upfront,
    /// Step by step as words arrive, so that a header cannot make the reader make room for
    /// more than twice what the input provided (plus 1 MiB). The table must end up contiguous,
    /// so the block is reallocated as it grows; each step doubles it, because an allocator may
    /// copy on reallocation (glibc remaps large blocks, `GlobalAlloc::realloc`'s default
    /// copies), and steps of a fixed size would then copy the table once per step, quadratic in
    /// its size.
    AsDataArrives,
}

/// Reads little-endian words in chunks, checksumming them.
pub(crate) struct WordReader<R: Read> {
    input: R,
    buffer: Vec<u8>,
    checksum: Checksum,
    allocation: Allocation,
}

impl<R: Read> WordReader<R> {
    pub(crate) fn new(input: R, allocation: Allocation) -> Self {
        WordReader {
            input,
            buffer: Vec::new(),
            checksum: Checksum::new(),
            allocation,
        }
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u64; N], PersistError> {
        let mut words = [0u64; N];
        let mut i = 0;
        self.words(N, |w| {
            words[i] = w;
            i += 1;
        })?;
        Ok(words)
    }

    /// Reads `n` words, in chunks, giving each to `each`.
    fn words(&mut self, n: usize, mut each: impl FnMut(u64)) -> Result<(), PersistError> {
        let mut left = n;
        while left > 0 {
            let take = left.min(IO_CHUNK_BYTES / 8);
            self.buffer.resize(take * 8, 0);
            self.input.read_exact(&mut self.buffer)?;
            self.checksum.add_bytes(&self.buffer);
            for chunk in self.buffer.chunks_exact(8) {
                each(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
            }
            left -= take;
        }
        Ok(())
    }

    /// Reads a block of `len` (> 0) words into table memory, allocated as `self.allocation`
    /// says (so a hostile length costs at most twice the words actually read, plus 1 MiB).
    pub(crate) fn block(
        &mut self,
        len: usize,
        huge_pages: bool,
    ) -> Result<BucketWords, PersistError> {
        match self.allocation {
            Allocation::Upfront => {
                let words = BucketWords::zeroed(len, huge_pages)
                    .map_err(|e| PersistError::AllocationFailed { bytes: e.bytes })?;
                let mut next = words.iter();
                self.words(len, |w| {
                    let word = next.next().expect("as many words as the block");
                    // Zeros are there already: a page of them is never touched, so an empty
                    // stretch (an empty table) takes no memory.
                    if w != 0 {
                        // Relaxed: the table is not shared yet.
                        word.store(w, Ordering::Relaxed);
                    }
                })?;
                Ok(words)
            }
            Allocation::AsDataArrives => {
                let mut words: Vec<AtomicU64> = Vec::new();
                while words.len() < len {
                    // Room for as many words again as were read (1 MiB at first), never more
                    // than the block has left: the reallocations copy fewer than twice the
                    // block's words in all, and the last one leaves no spare room to shrink.
                    let room = words.len().max(GROW_STEP_WORDS);
                    let take = (len - words.len()).min(room);
                    words
                        .try_reserve_exact(take)
                        .map_err(|_| PersistError::AllocationFailed {
                            bytes: len.saturating_mul(8),
                        })?;
                    self.words(take, |w| words.push(AtomicU64::new(w)))?;
                }
                Ok(BucketWords::from_boxed(
                    words.into_boxed_slice(),
                    huge_pages,
                ))
            }
        }
    }

    /// Reads the trailer and compares it with the checksum of everything before it.
    pub(crate) fn check_trailer(&mut self) -> Result<(), PersistError> {
        let computed = self.checksum.value();
        let mut trailer = [0u8; 8];
        self.input.read_exact(&mut trailer)?;
        let stored = u64::from_le_bytes(trailer);
        if stored == computed {
            Ok(())
        } else {
            Err(PersistError::ChecksumMismatch { stored, computed })
        }
    }
}
