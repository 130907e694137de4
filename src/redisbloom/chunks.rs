//! The `CF.SCANDUMP` reply stream, and reassembling a filter from such chunks (what
//! `CF.LOADCHUNK` does, with stricter checks).
//!
//! The data stream is the sub-filters' bytes end to end. A chunk's iterator is 1 plus the
//! stream offset of its end, so a chunk of `len` bytes with iterator `it` starts at stream
//! offset `it - len - 1`; the header is the chunk with iterator 1.

use std::ops::Range;

use super::error::LoadError;
use super::header::Header;
use super::params::Geometry;
use super::raw::RawFilter;

/// Largest chunk `CF.SCANDUMP` returns: larger sub-filters come in pieces of this size.
pub(crate) const MAX_CHUNK: usize = 16 << 20;

/// One data chunk of a `CF.SCANDUMP` sequence: bytes `range` of sub-filter `filter`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DataChunk {
    /// The iterator Redis returns with it (and `CF.LOADCHUNK` takes back).
    pub(crate) iterator: u64,
    /// The sub-filter it comes from.
    pub(crate) filter: usize,
    /// Its bytes within that sub-filter.
    pub(crate) range: Range<usize>,
}

/// The data chunks `CF.SCANDUMP` returns for sub-filters of these lengths, after the header:
/// each sub-filter whole if it is at most 16 MiB, else in 16 MiB pieces (the last one shorter).
/// A filter that copies its slots out of shared memory can fill each chunk straight from its
/// table with this plan.
pub(crate) fn data_chunks(
    sub_filter_lens: impl IntoIterator<Item = usize>,
) -> impl Iterator<Item = DataChunk> {
    data_chunks_of(sub_filter_lens, MAX_CHUNK)
}

/// As [`data_chunks`], in pieces of at most `max` bytes (at least 1): `CF.LOADCHUNK` takes
/// chunks of any size, each within one sub-filter, with the iterator of its end.
pub(crate) fn data_chunks_of(
    sub_filter_lens: impl IntoIterator<Item = usize>,
    max: usize,
) -> impl Iterator<Item = DataChunk> {
    let max = max.max(1);
    let mut stream_end = 0u64;
    sub_filter_lens
        .into_iter()
        .enumerate()
        .flat_map(move |(filter, len)| {
            (0..len)
                .step_by(max)
                .map(move |start| (filter, start..len.min(start + max)))
        })
        .map(move |(filter, range)| {
            stream_end += range.len() as u64;
            DataChunk {
                iterator: stream_end + 1,
                filter,
                range,
            }
        })
}

/// The replies of `CF.SCANDUMP key 0`, `CF.SCANDUMP key it₁`, …, up to but not including the
/// final `[0, nil]`: `(1, header)`, then the [`data_chunks`] of `filters` (a consistent
/// snapshot, oldest sub-filter first).
///
/// Redis answers `[0, nil]` at once for a filter whose header counts 0 items, whatever its
/// bytes, so such a filter gives no replies at all.
pub(crate) fn scandump(header: &Header, filters: &[&[u8]]) -> Vec<(u64, Vec<u8>)> {
    if header.items == 0 {
        return Vec::new();
    }
    let data = data_chunks(filters.iter().map(|f| f.len()))
        .map(|c| (c.iterator, filters[c.filter][c.range].to_vec()));
    std::iter::once((1, header.encode().to_vec()))
        .chain(data)
        .collect()
}

/// A data chunk's place in the stream.
#[derive(Clone, Copy, Debug)]
struct Span<'a> {
    iterator: u64,
    start: u64,
    end: u64,
    data: &'a [u8],
}

impl<'a> Span<'a> {
    /// Places a chunk in a stream of `total` bytes: it must be non-empty and lie inside.
    fn new(iterator: u64, data: &'a [u8], total: u64) -> Result<Span<'a>, LoadError> {
        let len = data.len();
        if len == 0 {
            return Err(LoadError::EmptyChunk { iterator });
        }
        // The chunk ends at stream offset `iterator - 1` and must start at or after 0.
        let end = iterator
            .checked_sub(1)
            .filter(|&end| end >= len as u64)
            .ok_or(LoadError::ChunkBeforeStart { iterator, len })?;
        // Redis writes a chunk that starts in [total, total + last size) at the start of the
        // last sub-filter; that is never what a dump meant, so it is rejected with the rest.
        if end > total {
            return Err(LoadError::ChunkPastEnd { iterator, len });
        }
        Ok(Span {
            iterator,
            start: end - len as u64,
            end,
            data,
        })
    }

    fn overlap_error(&self) -> LoadError {
        LoadError::ChunksOverlap {
            iterator: self.iterator,
            len: self.data.len(),
        }
    }

    fn straddle_error(&self) -> LoadError {
        LoadError::ChunkStraddles {
            iterator: self.iterator,
            len: self.data.len(),
        }
    }
}

/// Rebuilds a filter from `CF.SCANDUMP` chunks `(iterator, bytes)`: the header chunk
/// (iterator 1) first, then the data chunks in any order, of any sizes.
///
/// Besides what [`Header::validate`] rejects, it rejects a chunk list in which a data chunk is
/// empty, starts before the stream, ends past it, spans two sub-filters, or overlaps another,
/// and one that leaves any byte of any sub-filter uncovered; and a filter whose header's item
/// count is not its number of occupied slots. An empty list is an error: an empty Redis filter
/// dumps nothing, and must be recreated from the geometry `CF.INFO` reports.
///
/// The sub-filters are allocated only once the chunks are known to cover them exactly, so no
/// header can make this allocate more than the chunks supplied (the chunks' places, 32 bytes
/// each, are collected first).
pub(crate) fn assemble<'a>(
    chunks: impl IntoIterator<Item = (u64, &'a [u8])>,
) -> Result<RawFilter, LoadError> {
    let mut chunks = chunks.into_iter();
    let (iterator, header_bytes) = chunks.next().ok_or(LoadError::NoChunks)?;
    if iterator != 1 {
        return Err(LoadError::FirstChunkNotHeader { iterator });
    }
    let header = Header::decode(header_bytes)?;
    let (geometry, filters) = header.validate()?;
    let total = geometry
        .total_bytes(filters)
        .ok_or(LoadError::TooLarge { bytes: u64::MAX })?;
    let mut spans = chunks
        .map(|(iterator, data)| Span::new(iterator, data, total))
        .collect::<Result<Vec<_>, _>>()?;
    spans.sort_unstable_by_key(|span| span.start);
    check_exact_cover(&spans, &geometry, total)?;
    let filters = concatenate(&spans, &geometry, filters);
    RawFilter::with_counted_items(header, geometry, filters)
}

/// Checks that spans sorted by start cover `0..total` exactly once, each inside one sub-filter.
fn check_exact_cover(spans: &[Span<'_>], geometry: &Geometry, total: u64) -> Result<(), LoadError> {
    let mut covered = 0u64;
    let mut sub_filter = 0u16;
    // Every sub-filter that a span starts in exists (spans end by `total`), so its size does.
    let mut sub_filter_end = geometry.sub_bytes(0).unwrap_or(0);
    for span in spans {
        if span.start < covered {
            return Err(span.overlap_error());
        }
        if span.start > covered {
            return Err(LoadError::MissingData {
                offset: covered,
                len: span.start - covered,
            });
        }
        while span.start >= sub_filter_end {
            sub_filter += 1;
            let size = geometry.sub_bytes(sub_filter).unwrap_or(u64::MAX);
            sub_filter_end = sub_filter_end.saturating_add(size);
        }
        if span.end > sub_filter_end {
            return Err(span.straddle_error());
        }
        covered = span.end;
    }
    if covered < total {
        return Err(LoadError::MissingData {
            offset: covered,
            len: total - covered,
        });
    }
    Ok(())
}

/// Sub-filter bytes from spans that cover them exactly (see [`check_exact_cover`]).
fn concatenate(spans: &[Span<'_>], geometry: &Geometry, filters: u16) -> Vec<Vec<u8>> {
    let mut spans = spans.iter();
    (0..filters)
        .map(|i| {
            // Fits: the total was checked against `MAX_TOTAL_BYTES`, itself at most isize::MAX.
            let size = geometry.sub_bytes(i).unwrap_or(0) as usize;
            let mut bytes = Vec::with_capacity(size);
            while bytes.len() < size {
                match spans.next() {
                    Some(span) => bytes.extend_from_slice(span.data),
                    None => break,
                }
            }
            bytes
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redisbloom::testkit::{random_filter, worked_example, Rng};

    fn geometry(buckets: u64, bucket_size: u16, expansion: u16) -> Geometry {
        Geometry {
            buckets,
            bucket_size,
            expansion,
            max_iterations: 20,
        }
    }

    fn dump(filter: &RawFilter) -> Vec<(u64, Vec<u8>)> {
        scandump(&filter.header, &filter.filter_slices())
    }

    fn assemble_owned(chunks: &[(u64, Vec<u8>)]) -> Result<RawFilter, LoadError> {
        assemble(chunks.iter().map(|(it, data)| (*it, data.as_slice())))
    }

    #[test]
    fn worked_example_dumps_header_then_one_chunk_per_sub_filter() {
        let filter = worked_example();
        let chunks = dump(&filter);
        let iterators: Vec<u64> = chunks.iter().map(|c| c.0).collect();
        assert_eq!(iterators, [1, 5, 9, 13]);
        assert_eq!(chunks[0].1, filter.header.encode());
        assert_eq!(chunks[1].1, [0x00, 0xc4, 0xcb, 0x10]);
        assert_eq!(chunks[3].1, [0x4b, 0x00, 0x00, 0x1c]);
        assert_eq!(assemble_owned(&chunks), Ok(filter));
    }

    #[test]
    fn iterator_is_one_past_the_stream_end_of_each_chunk() {
        let its: Vec<u64> = data_chunks([4, 8, 16]).map(|c| c.iterator).collect();
        assert_eq!(its, [5, 13, 29]);
        // A 24 MiB sub-filter comes in a 16 MiB and an 8 MiB piece; the next starts whole.
        let chunks: Vec<DataChunk> = data_chunks([24 << 20, 5]).collect();
        assert_eq!(
            chunks,
            [
                DataChunk {
                    iterator: (16 << 20) + 1,
                    filter: 0,
                    range: 0..16 << 20
                },
                DataChunk {
                    iterator: (24 << 20) + 1,
                    filter: 0,
                    range: 16 << 20..24 << 20
                },
                DataChunk {
                    iterator: (24 << 20) + 6,
                    filter: 1,
                    range: 0..5
                },
            ]
        );
    }

    /// Spec §7.2, seen live: a 33554432-byte sub-filter gives iterators 1, 16777217, 33554433.
    #[test]
    fn a_32_mib_sub_filter_comes_in_two_pieces() {
        let mut data = vec![0u8; 32 << 20];
        data[0] = 7;
        data[(16 << 20) + 3] = 9;
        let header = Header {
            items: 2,
            buckets: 32 << 20,
            deletes: 0,
            filters: 1,
            bucket_size: 1,
            max_iterations: 20,
            expansion: 1,
        };
        let chunks = scandump(&header, &[&data]);
        let shape: Vec<(u64, usize)> = chunks.iter().map(|(it, d)| (*it, d.len())).collect();
        assert_eq!(
            shape,
            [(1, 38), (16_777_217, 16 << 20), (33_554_433, 16 << 20)]
        );
        let filter = assemble_owned(&chunks).unwrap();
        assert_eq!(filter.filters, [data]);
    }

    #[test]
    fn an_empty_filter_dumps_nothing_even_with_bytes() {
        let mut filter = worked_example();
        filter.header.items = 0;
        assert!(dump(&filter).is_empty());
        assert_eq!(assemble_owned(&[]), Err(LoadError::NoChunks));
    }

    #[test]
    fn random_filters_round_trip() {
        let mut rng = Rng::seeded("random_filters_round_trip");
        for _ in 0..500 {
            let filter = random_filter(&mut rng);
            assert_eq!(assemble_owned(&dump(&filter)), Ok(filter));
        }
    }

    /// Spec §7.3: chunks of any size, at any offset inside one sub-filter, in any order.
    #[test]
    fn chunks_of_any_size_in_any_order_assemble() {
        let mut rng = Rng::seeded("chunks_of_any_size_in_any_order_assemble");
        for _ in 0..300 {
            let filter = random_filter(&mut rng);
            let chunks = rechunk(&filter, &mut rng);
            assert_eq!(assemble_owned(&chunks), Ok(filter));
        }
    }

    /// The header, then every sub-filter cut at random points, shuffled.
    fn rechunk(filter: &RawFilter, rng: &mut Rng) -> Vec<(u64, Vec<u8>)> {
        let mut data = Vec::new();
        let mut stream = 0u64;
        for bytes in &filter.filters {
            let mut at = 0;
            while at < bytes.len() {
                let len = (rng.below(bytes.len() as u64) as usize + 1).min(bytes.len() - at);
                stream += len as u64;
                data.push((stream + 1, bytes[at..at + len].to_vec()));
                at += len;
            }
        }
        for i in (1..data.len()).rev() {
            data.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut chunks = vec![(1, filter.header.encode().to_vec())];
        chunks.extend(data);
        chunks
    }

    /// Sub-filters of 4, 8 and 16 bytes (total 28), as in spec §7.3's wrap-around example.
    fn four_eight_sixteen() -> Vec<(u64, Vec<u8>)> {
        let filters: Vec<Vec<u8>> = [4u8, 8, 16]
            .iter()
            .map(|&len| (0..len).map(|i| i % 3 * len).collect())
            .collect();
        let header = Header {
            items: 17,
            buckets: 4,
            deletes: 0,
            filters: 3,
            bucket_size: 1,
            max_iterations: 20,
            expansion: 2,
        };
        let filter = RawFilter::with_counted_items(header, geometry(4, 1, 2), filters).unwrap();
        dump(&filter)
    }

    #[test]
    fn rejects_malformed_chunk_lists() {
        let good = four_eight_sixteen();
        assert_eq!(good.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 5, 13, 29]);
        assert!(assemble_owned(&good).is_ok());
        let with = |extra: (u64, &[u8])| {
            let mut chunks = good.clone();
            chunks.push((extra.0, extra.1.to_vec()));
            assemble_owned(&chunks)
        };
        // What Redis would write at sub2[0] (iterator 30), and what it rejects (46).
        assert_eq!(
            with((30, b"B")),
            Err(LoadError::ChunkPastEnd {
                iterator: 30,
                len: 1
            })
        );
        assert_eq!(
            with((46, b"F")),
            Err(LoadError::ChunkPastEnd {
                iterator: 46,
                len: 1
            })
        );
        assert_eq!(with((7, b"")), Err(LoadError::EmptyChunk { iterator: 7 }));
        assert_eq!(
            with((3, b"abc")),
            Err(LoadError::ChunkBeforeStart {
                iterator: 3,
                len: 3
            })
        );
        assert_eq!(
            with((0, b"a")),
            Err(LoadError::ChunkBeforeStart {
                iterator: 0,
                len: 1
            })
        );
        let header = good[0].1.clone();
        assert_eq!(
            with((1, &header)),
            Err(LoadError::ChunkBeforeStart {
                iterator: 1,
                len: 38
            })
        );
        assert_eq!(
            with((8, b"xy")),
            Err(LoadError::ChunksOverlap {
                iterator: 8,
                len: 2
            })
        );

        // Straddling: bytes 3..5 span sub-filters 0 and 1.
        let mut chunks = vec![good[0].clone(), (4, good[1].1[..3].to_vec())];
        chunks.push((6, vec![good[1].1[3], good[2].1[0]]));
        chunks.push((13, good[2].1[1..].to_vec()));
        chunks.push(good[3].clone());
        assert_eq!(
            assemble_owned(&chunks),
            Err(LoadError::ChunkStraddles {
                iterator: 6,
                len: 2
            })
        );

        let mut missing = good.clone();
        missing.remove(2);
        assert_eq!(
            assemble_owned(&missing),
            Err(LoadError::MissingData { offset: 4, len: 8 })
        );
        missing = good.clone();
        missing.pop();
        assert_eq!(
            assemble_owned(&missing),
            Err(LoadError::MissingData {
                offset: 12,
                len: 16
            })
        );
        assert_eq!(
            assemble_owned(&good[..1]),
            Err(LoadError::MissingData { offset: 0, len: 28 })
        );

        let mut not_first = good.clone();
        not_first.swap(0, 1);
        assert_eq!(
            assemble_owned(&not_first),
            Err(LoadError::FirstChunkNotHeader { iterator: 5 })
        );
        let mut short = good.clone();
        short[0].1.pop();
        assert_eq!(
            assemble_owned(&short),
            Err(LoadError::HeaderLength { len: 37 })
        );
    }

    #[test]
    fn rejects_a_header_redis_would_not_create() {
        let mut chunks = four_eight_sixteen();
        let mut header = Header::decode(&chunks[0].1).unwrap();
        header.buckets = 6;
        chunks[0].1 = header.encode().to_vec();
        assert_eq!(
            assemble_owned(&chunks),
            Err(LoadError::BucketsNotPowerOfTwo { buckets: 6 })
        );
    }

    #[test]
    fn item_count_must_match_the_occupied_slots() {
        let mut chunks = dump(&worked_example());
        for items in [0, 7, 9] {
            let mut header = Header::decode(&chunks[0].1).unwrap();
            header.items = items;
            chunks[0].1 = header.encode().to_vec();
            assert_eq!(
                assemble_owned(&chunks),
                Err(LoadError::ItemCount {
                    header: items,
                    stored: 8
                })
            );
        }
    }

    /// A header that claims a terabyte is refused before anything is allocated for it.
    #[test]
    fn a_huge_header_with_little_data_allocates_nothing() {
        let header = Header {
            items: 1,
            buckets: 1 << 31,
            deletes: 0,
            filters: 512,
            bucket_size: 1,
            max_iterations: 20,
            expansion: 1,
        };
        let chunks = [(1, header.encode().to_vec()), (2, vec![1u8])];
        assert_eq!(
            assemble_owned(&chunks),
            Err(LoadError::MissingData {
                offset: 1,
                len: (1 << 40) - 1
            })
        );
    }

    /// Random damage to valid chunk lists: never a panic, and anything accepted is a
    /// consistent filter.
    #[test]
    fn damaged_chunk_lists_never_panic() {
        let mut rng = Rng::seeded("damaged_chunk_lists_never_panic");
        let mut accepted = 0;
        for _ in 0..5000 {
            let filter = random_filter(&mut rng);
            let mut chunks = rechunk(&filter, &mut rng);
            for _ in 0..=rng.below(3) {
                damage(&mut chunks, &mut rng);
            }
            if let Ok(raw) = assemble_owned(&chunks) {
                accepted += 1;
                assert_eq!(assemble_owned(&dump(&raw)), Ok(raw.clone()));
            }
        }
        println!("{accepted} damaged lists were still valid");
    }

    fn damage(chunks: &mut Vec<(u64, Vec<u8>)>, rng: &mut Rng) {
        if chunks.is_empty() {
            return;
        }
        let i = rng.below(chunks.len() as u64) as usize;
        match rng.below(7) {
            0 => {
                chunks.remove(i);
            }
            1 => chunks.push(chunks[i].clone()),
            2 => chunks[i].0 = chunks[i].0.wrapping_add(rng.below(5)).wrapping_sub(2),
            3 => {
                let len = rng.below(chunks[i].1.len() as u64 + 1) as usize;
                chunks[i].1.truncate(len);
            }
            4 if !chunks[i].1.is_empty() => {
                let at = rng.below(chunks[i].1.len() as u64) as usize;
                chunks[i].1[at] ^= 1 << rng.below(8);
            }
            5 => chunks[i].0 = rng.next_u64(),
            _ => chunks.swap(0, i),
        }
    }
}
