//! Saving and restoring a growable table: a format of its own (magic `ATCUXPND`), read and
//! written with the same word reader, writer and checksum as a fixed table's snapshots
//! (`crate::snapshot_words`; `crate::persist` tells the two apart by their magic), and
//! failing with the same [`PersistError`].
//!
//! The layout is documented byte by byte in `FORMAT.md` ("Growable filter snapshots"). A
//! doubling in progress is saved as it is, split bitmap included, so a restored filter is the
//! saved one: same answers, same splits and kicks on the inserts that follow. Restoring checks
//! the header before anything is allocated, sizes every allocation by the words actually read
//! (`WordReader::block`), checks the checksum, and then every lane and count before the filter
//! is returned.

use std::io::{self, Read, Write};

use super::counts::Totals;
use super::keys::Pos;
use super::keys::{field_tail_bits, KeyMap, ANCHOR_BITS};
use super::table::{words_for, Table, LANES};
use super::width::is_builder_choice;
use super::MAX_DOUBLINGS;
use super::{largest_table_stripes, Doubling, Parts};
use crate::error::PersistError;
use crate::snapshot_words::{WordReader, WordWriter, FIRST_WORDS};
use crate::sync::Ordering;
use crate::table::BucketWords;

/// First 8 bytes of every growable filter's snapshot (a fixed one's start `ATCUCKOO`).
pub(crate) const MAGIC: [u8; 8] = *b"ATCUXPND";
/// Format version written and read by this build.
const VERSION: u16 = 1;
/// Words in the header.
const HEADER_WORDS: usize = 11;
/// Largest first table (as the builder): `KeyMap` maps the hash's upper 32 bits onto it.
const MAX_BASE: u64 = 1 << 32;

/// The header: every field of the filter that its lanes do not give.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Header {
    width: u32,
    doublings: u32,
    /// The doublings the lane width keeps the rate for (`Doubling::planned`).
    max_doublings: u32,
    rate: f64,
    base: u64,
    items: u64,
    occupied: u64,
    rng: u64,
    /// `Splitting::next` and `Splitting::left`; both 0 when no doubling is in progress.
    split_next: u64,
    split_left: u64,
    hasher_check: u64,
}

impl Header {
    fn encode(&self) -> [u64; HEADER_WORDS] {
        [
            u64::from_le_bytes(MAGIC),
            u64::from(VERSION) | u64::from(self.width) << 32,
            u64::from(self.doublings) | u64::from(self.max_doublings) << 32,
            self.rate.to_bits(),
            self.base,
            self.items,
            self.occupied,
            self.rng,
            self.split_next,
            self.split_left,
            self.hasher_check,
        ]
    }

    /// Decodes and validates a header: every field in range, the lane width and doublings
    /// ones the builder could have chosen, and a table whose size fits in memory arithmetic.
    fn decode(w: &[u64; HEADER_WORDS]) -> Result<Self, PersistError> {
        debug_assert_eq!(
            w[0].to_le_bytes(),
            MAGIC,
            "the caller dispatched on the magic"
        );
        let version = w[1] as u16;
        if version != VERSION {
            return Err(PersistError::UnsupportedVersion { version });
        }
        let invalid = |field| Err(PersistError::InvalidParameter { field });
        if (w[1] >> 16) as u16 != 0 {
            return invalid("reserved field");
        }
        let header = Header {
            width: (w[1] >> 32) as u32,
            doublings: w[2] as u32,
            max_doublings: (w[2] >> 32) as u32,
            rate: f64::from_bits(w[3]),
            base: w[4],
            items: w[5],
            occupied: w[6],
            rng: w[7],
            split_next: w[8],
            split_left: w[9],
            hasher_check: w[10],
        };
        if !(header.rate > 0.0 && header.rate < 1.0) {
            return invalid("false-positive rate");
        }
        if !(ANCHOR_BITS + 2..=32).contains(&header.width) {
            return invalid("lane width");
        }
        if header.max_doublings > MAX_DOUBLINGS {
            return invalid("max_doublings");
        }
        if header.doublings > MAX_DOUBLINGS {
            return invalid("doublings");
        }
        if !is_builder_choice(header.rate, header.width - 1, header.max_doublings) {
            return invalid("lane width and max_doublings (not the builder's for the rate)");
        }
        if !(2..=MAX_BASE).contains(&header.base) || !header.base.is_multiple_of(2) {
            return invalid("first table's bucket count");
        }
        // `buckets()` and every segment's words must be computable: base · 2^doublings below
        // 2^64, and the words of all segments below usize::MAX.
        let sized =
            header.doublings < header.base.leading_zeros() && { header.data_words().is_some() };
        if !sized {
            return invalid("table size");
        }
        let lanes = header.buckets() * LANES;
        if header.occupied > lanes || header.items > header.occupied {
            return invalid("item or lane count");
        }
        if usize::try_from(header.items).is_err() {
            return invalid("item count");
        }
        if header.rng == 0 {
            return invalid("kick generator state");
        }
        if header.split_left == 0 {
            if header.split_next != 0 {
                return invalid("split position");
            }
        } else {
            // Every old bucket below `next` is split, so those left lie at `next` or above.
            let old = header.old_buckets();
            if header.doublings == 0
                || header.split_next >= old
                || header.split_left > old - header.split_next
            {
                return invalid("split position");
            }
        }
        Ok(header)
    }

    /// Buckets of the table (`base · 2^doublings`, checked by `decode`).
    fn buckets(&self) -> u64 {
        self.base << self.doublings
    }

    /// Buckets before the latest doubling.
    fn old_buckets(&self) -> u64 {
        self.buckets() >> 1
    }

    /// Buckets of segment `s`.
    fn segment_buckets(&self, s: u32) -> u64 {
        if s == 0 {
            self.base
        } else {
            self.base << (s - 1)
        }
    }

    /// Words of the split bitmap: one bit per old bucket while a doubling is in progress.
    fn bitmap_words(&self) -> Option<usize> {
        if self.split_left == 0 {
            Some(0)
        } else {
            usize::try_from(self.old_buckets().div_ceil(64)).ok()
        }
    }

    /// Words after the header and before the checksum, `None` when not a `usize`.
    fn data_words(&self) -> Option<usize> {
        (0..=self.doublings).try_fold(self.bitmap_words()?, |sum, s| {
            sum.checked_add(words_for(self.segment_buckets(s), self.width)?)
        })
    }
}

/// A doubling in progress as a snapshot holds it: a bit per old bucket, set once split.
pub(super) struct SavedSplit {
    split: Vec<u64>,
    next: u64,
}

impl SavedSplit {
    fn is_split(&self, old: u64) -> bool {
        self.split[(old / 64) as usize] >> (old % 64) & 1 == 1
    }
}

/// What the lanes of a restored table add up to.
#[derive(Debug, Default)]
pub(super) struct LaneCounts {
    /// Non-empty lanes.
    pub lanes: u64,
    /// Lanes once every old bucket of a doubling in progress is split (exhausted entries
    /// count twice there): the filter's `occupied`.
    pub occupied: u64,
    /// Entries by tail length, counted as `Doubling::double` counts them.
    pub by_tail: [u64; 32],
}

/// Counts the lanes of `table`, checking every one: a non-empty
/// lane has a field (marker) and at most `tail_bits` tail bits, the new half of an old bucket
/// not split yet is empty, and every bit past a segment's last bucket is zero.
pub(super) fn count_lanes(
    table: &Table,
    doublings: u32,
    splitting: Option<&SavedSplit>,
    tail_bits: u32,
) -> Result<LaneCounts, PersistError> {
    let invalid = |field| Err(PersistError::InvalidParameter { field });
    let (base, width) = (table.base(), table.width());
    let old = table.buckets(doublings) >> 1;
    let bucket_mask = u128::MAX >> (128 - LANES as u32 * width);
    let is_unsplit = |index: u64| splitting.is_some_and(|s| !s.is_split(index));
    let mut counts = LaneCounts::default();
    for index in 0..table.buckets(doublings) {
        let pos = Pos {
            home: index % base,
            high: index / base,
        };
        // `Table::bucket` gives 128 bits: the next bucket's lanes may follow this one's.
        let bucket = table.bucket(pos) & bucket_mask;
        let (unsplit, new_half_of_unsplit) = match splitting {
            Some(_) if index < old => (is_unsplit(index), false),
            Some(_) => (false, is_unsplit(index - old)),
            None => (false, false),
        };
        if new_half_of_unsplit && bucket != 0 {
            return invalid("bucket (a half its doubling has not split into yet)");
        }
        for lane in 0..LANES {
            let entry = (bucket >> (lane * u64::from(width))) as u64 & ((1u64 << width) - 1);
            if entry == 0 {
                continue;
            }
            let field = entry >> ANCHOR_BITS;
            if field == 0 {
                return invalid("lane (no marker bit)");
            }
            let tail = field_tail_bits(field);
            // A lane's field has `tail_bits + 1` bits, so its marker leaves at most `tail_bits`.
            debug_assert!(tail <= tail_bits);
            counts.lanes += 1;
            // An unsplit old bucket is counted as its split will leave it (see `double`).
            match (unsplit, tail) {
                (false, _) => {
                    counts.occupied += 1;
                    counts.by_tail[tail as usize] += 1;
                }
                (true, 0) => {
                    counts.occupied += 2;
                    counts.by_tail[0] += 2;
                }
                (true, _) => {
                    counts.occupied += 1;
                    counts.by_tail[tail as usize - 1] += 1;
                }
            }
        }
    }
    for (s, words) in table.segments().enumerate() {
        let buckets = if s == 0 { base } else { base << (s - 1) };
        if !is_zero_past(words, buckets * LANES * u64::from(width)) {
            return invalid("segment (bits past its last bucket)");
        }
    }
    Ok(counts)
}

/// Whether every bit of `words` from bit `end` on is zero.
fn is_zero_past(words: &BucketWords, end: u64) -> bool {
    // Relaxed: the table is not shared yet.
    let word = |i: usize| words.get(i).map_or(0, |w| w.load(Ordering::Relaxed));
    let (last, shift) = ((end / 64) as usize, (end % 64) as u32);
    word(last).checked_shr(shift).unwrap_or(0) == 0 && (last + 1..words.len()).all(|i| word(i) == 0)
}

/// Checks a restored split bitmap against the header: no bit past the old buckets, every old
/// bucket below `next` split, and `left` of them not.
fn check_split_bitmap(split: &[u64], old: u64, next: u64, left: u64) -> Result<(), PersistError> {
    let invalid = Err(PersistError::InvalidParameter {
        field: "split bitmap",
    });
    let past = old % 64;
    if past != 0 && split.last().is_some_and(|&w| w >> past != 0) {
        return invalid;
    }
    let split_count: u64 = split.iter().map(|w| u64::from(w.count_ones())).sum();
    if split_count != old - left {
        return invalid;
    }
    let (full, rest) = ((next / 64) as usize, next % 64);
    let prefix_split = split[..full].iter().all(|&w| w == u64::MAX)
        && (rest == 0 || split[full] & ((1 << rest) - 1) == (1 << rest) - 1);
    if prefix_split {
        Ok(())
    } else {
        invalid
    }
}

impl Doubling {
    /// The header and the split bitmap (a bit set per old bucket once split) of the filter,
    /// while no writer runs (the caller froze it).
    fn header(&self, hasher_check: u64) -> (Header, Option<Vec<u64>>) {
        // Relaxed: no writer runs (the freeze, which orders us after every writer).
        let doublings = self.doublings.load(Ordering::Relaxed) as u32;
        let split = (self.left.load(Ordering::Relaxed) > 0).then(|| {
            let old = self.table.buckets(doublings - 1);
            let bitmap = self.bitmaps[doublings as usize]
                .get()
                .expect("a doubling's bitmap is set before it is published");
            // In memory a bit is set until its bucket is split; saved, once it is.
            bitmap
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let first = i as u64 * 64;
                    let valid = if old - first >= 64 {
                        u64::MAX
                    } else {
                        (1u64 << (old - first)) - 1
                    };
                    !w.load(Ordering::Relaxed) & valid
                })
                .collect::<Vec<u64>>()
        });
        // The next bucket to split, and the number left. Writers split out of order, and an
        // insert that claimed the next bucket may not have split it yet: saved, "next" is no
        // further than the first bucket not split (every bucket below it must be split).
        let (split_next, split_left) = split.as_ref().map_or((0, 0), |split| {
            let old = self.table.buckets(doublings - 1);
            let prefix = split
                .iter()
                .position(|&w| w != u64::MAX)
                .map_or(old, |i| i as u64 * 64 + u64::from(split[i].trailing_ones()))
                .min(old);
            let done: u64 = split.iter().map(|w| u64::from(w.count_ones())).sum();
            (self.next.load(Ordering::Relaxed).min(prefix), old - done)
        });
        let totals = self.totals();
        let header = Header {
            width: self.table.width(),
            doublings,
            max_doublings: self.planned,
            rate: self.target,
            base: self.table.base(),
            items: (totals.items as i64).max(0) as u64,
            occupied: totals.occupied,
            rng: self.rng,
            split_next,
            split_left,
            hasher_check,
        };
        (header, split)
    }

    /// Writes a snapshot of the table, one consistent state (see `CuckooFilter::write_to`),
    /// with `hasher_check` (the filter's hasher's) in its header. A doubling in progress is
    /// saved as it is: the restored table answers, splits and grows exactly as this one would.
    ///
    /// # Errors
    ///
    /// Any error `writer` returns, and [`io::ErrorKind::Deadlock`] for a save of this filter
    /// from inside its own save.
    pub(crate) fn write_to<W: Write + ?Sized>(
        &self,
        writer: &mut W,
        hasher_check: u64,
    ) -> io::Result<()> {
        let _frozen = self.frozen()?;
        let mut out = WordWriter::new(writer);
        let (header, split) = self.header(hasher_check);
        out.words(header.encode())?;
        if let Some(split) = split {
            out.words(split)?;
        }
        for segment in self.table.segments().take(header.doublings as usize + 1) {
            // Relaxed: no writer runs (the freeze).
            out.words(segment.iter().map(|w| w.load(Ordering::Relaxed)))?;
        }
        out.finish()
    }

    /// Bytes a snapshot of the filter takes now (it grows when the filter doubles).
    pub(crate) fn snapshot_size(&self) -> usize {
        let doublings = self.doublings_now();
        // (The flag may already be the next doubling's: read it only past the first.)
        let bitmap = if doublings > 0 && self.is_doubling() {
            self.table.buckets(doublings - 1).div_ceil(64) as usize
        } else {
            0
        };
        let segments: usize = self
            .table
            .segments()
            .take(doublings as usize + 1)
            .map(|s| s.len())
            .sum();
        8 * (HEADER_WORDS + bitmap + segments + 1)
    }

    /// Reads a snapshot: the header (checked before anything is allocated), the hasher check,
    /// the bitmap and segments, the checksum, and then every lane and count.
    ///
    /// `first` are the snapshot's first words, read by the caller to find its magic.
    pub(crate) fn read<R: Read>(
        first: [u64; FIRST_WORDS],
        mut input: WordReader<R>,
        hasher_check: u64,
        huge_pages: bool,
    ) -> Result<Self, PersistError> {
        let header = Header::decode(&header_words(first, &input.array()?))?;
        if header.hasher_check != hasher_check {
            return Err(PersistError::HasherMismatch);
        }
        let split = match header.bitmap_words() {
            Some(0) => None,
            Some(words) => {
                let block = input.block(words, false)?;
                // Relaxed: the words are not shared.
                Some(
                    block
                        .iter()
                        .map(|w| w.load(Ordering::Relaxed))
                        .collect::<Vec<u64>>(),
                )
            }
            None => unreachable!("`Header::decode` checked the bitmap's size"),
        };
        let segments = (0..=header.doublings)
            .map(|s| {
                let words = words_for(header.segment_buckets(s), header.width)
                    .expect("`Header::decode` checked every segment's size");
                input.block(words, false)
            })
            .collect::<Result<Vec<_>, _>>()?;
        input.check_trailer()?;

        let splitting = match split {
            Some(split) => {
                check_split_bitmap(
                    &split,
                    header.old_buckets(),
                    header.split_next,
                    header.split_left,
                )?;
                Some(SavedSplit {
                    split,
                    next: header.split_next,
                })
            }
            None => None,
        };
        let table = Table::from_segments(header.base, header.width, huge_pages, segments);
        let tail_bits = header.width - 1 - ANCHOR_BITS;
        let counts = count_lanes(&table, header.doublings, splitting.as_ref(), tail_bits)?;
        if counts.occupied != header.occupied {
            return Err(PersistError::CountMismatch {
                what: "occupied lane count",
                claimed: header.occupied,
                found: counts.occupied,
            });
        }
        // Copies make more lanes than items, never fewer.
        if header.items > counts.lanes {
            return Err(PersistError::CountMismatch {
                what: "item count",
                claimed: header.items,
                found: counts.lanes,
            });
        }
        let splitting = match splitting {
            Some(saved) => Some((unsplit_bitmap(&saved, header.old_buckets())?, saved.next)),
            None => None,
        };
        Ok(Doubling::from_parts(Parts {
            keys: KeyMap::new(header.base),
            stripes: largest_table_stripes(header.base),
            table,
            planned: header.max_doublings,
            tail_bits,
            target: header.rate,
            doublings: header.doublings,
            splitting,
            totals: Totals {
                items: header.items,
                occupied: counts.occupied,
                by_tail: counts.by_tail,
            },
            rng: header.rng,
        }))
    }
}

/// The in-memory bitmap of a saved doubling in progress over `old` buckets: a bit set per old
/// bucket not split yet (the saved bits inverted, none past the old buckets).
fn unsplit_bitmap(saved: &SavedSplit, old: u64) -> Result<BucketWords, PersistError> {
    let bitmap = BucketWords::zeroed(saved.split.len(), false).map_err(|failed| {
        PersistError::AllocationFailed {
            bytes: failed.bytes,
        }
    })?;
    for (index, (word, &split)) in bitmap.iter().zip(&saved.split).enumerate() {
        let first = index as u64 * 64;
        let valid = if old - first >= 64 {
            u64::MAX
        } else {
            (1u64 << (old - first)) - 1
        };
        // Relaxed: the bitmap is not shared yet.
        word.store(!split & valid, Ordering::Relaxed);
    }
    Ok(bitmap)
}

/// The header's words: the `first` the caller read, then the `rest`.
fn header_words(
    first: [u64; FIRST_WORDS],
    rest: &[u64; HEADER_WORDS - FIRST_WORDS],
) -> [u64; HEADER_WORDS] {
    let mut words = [0; HEADER_WORDS];
    words[..FIRST_WORDS].copy_from_slice(&first);
    words[FIRST_WORDS..].copy_from_slice(rest);
    words
}

/// The length of the snapshot that `bytes` starts with (its magic checked by the caller), from
/// its header alone.
pub(crate) fn expected_len(bytes: &[u8]) -> Result<usize, PersistError> {
    let head = bytes
        .get(..HEADER_WORDS * 8)
        .ok_or(PersistError::Truncated)?;
    let mut words = [0u64; HEADER_WORDS];
    for (w, chunk) in words.iter_mut().zip(head.chunks_exact(8)) {
        *w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
    }
    let header = Header::decode(&words)?;
    header
        .data_words()
        .and_then(|data| data.checked_add(HEADER_WORDS + 1))
        .and_then(|words| words.checked_mul(8))
        .ok_or(PersistError::InvalidParameter {
            field: "table size",
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::growth::width::PLANNED_DOUBLINGS;

    fn header() -> Header {
        Header {
            width: 13,
            doublings: 3,
            max_doublings: 12,
            rate: 0.01,
            base: 264,
            items: 10,
            occupied: 12,
            rng: 1,
            split_next: 5,
            split_left: 100,
            hasher_check: 0xfeed,
        }
    }

    #[test]
    fn a_header_decodes_to_what_was_encoded() {
        let filter = super::super::build(1000, 0.01, PLANNED_DOUBLINGS, false).unwrap();
        let mut h = header();
        h.width = filter.lane_bits();
        h.max_doublings = filter.planned_doublings();
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn a_header_whose_table_size_overflows_is_refused() {
        let filter = super::super::build(1000, 0.01, MAX_DOUBLINGS, false).unwrap();
        let mut h = header();
        (h.width, h.max_doublings) = (filter.lane_bits(), filter.planned_doublings());
        (h.base, h.doublings) = (MAX_BASE, MAX_DOUBLINGS);
        assert!(matches!(
            Header::decode(&h.encode()),
            Err(PersistError::InvalidParameter { .. })
        ));
    }

    #[test]
    fn a_bitmap_must_have_every_bucket_below_next_split() {
        assert!(check_split_bitmap(&[0b0111], 70, 3, 67).is_ok());
        assert!(check_split_bitmap(&[0b1011], 70, 3, 67).is_err());
        // A bit past the old buckets.
        assert!(check_split_bitmap(&[0b0111, 1 << 6], 70, 3, 66).is_err());
        assert!(check_split_bitmap(&[0b0111, 0], 70, 3, 66).is_err());
    }
}
