//! `read_from` under an allocator whose `realloc` copies (as `GlobalAlloc::realloc`'s default
//! does: allocate anew, copy, free): a snapshot of `N` bytes is copied a bounded number of times,
//! not once per growth step (which would be quadratic), and a header that claims a huge table
//! is refused without that table being asked for.
//!
//! The allocator counts what it is asked for and what its reallocations copy; it is global to
//! this binary, so its tests run one at a time.

use atomic_cuckoo::{CuckooFilter, PersistError};

use crate::counting_alloc::{measure, one_at_a_time};

const MIB: usize = 1 << 20;

#[test]
fn read_from_copies_a_snapshot_a_bounded_number_of_times() {
    let _one = one_at_a_time();
    // About 26 MiB of snapshot, in one level; the table's content does not matter here.
    let filter = CuckooFilter::builder()
        .capacity(16_000_000)
        .huge_pages(false)
        .build()
        .unwrap();
    filter.insert_many(0..100_000u32).unwrap();
    let bytes = filter.to_bytes();
    drop(filter);
    let n = bytes.len();

    let (restored, copied, peak, _) = measure(|| CuckooFilter::read_from(&bytes[..]).unwrap());
    println!(
        "read_from of {} MiB: {} MiB copied by reallocations ({:.2} N), peak {} MiB live",
        n / MIB,
        copied / MIB,
        copied as f64 / n as f64,
        peak / MIB
    );
    assert_eq!(restored.len(), 100_000);
    assert!(
        copied <= 3 * n,
        "read_from copied {copied} bytes in reallocations for a {n}-byte snapshot"
    );
    // The table, plus the block it grew from while both were live, plus buffers.
    assert!(
        peak <= 2 * n + 2 * MIB,
        "peak {peak} bytes for a {n}-byte snapshot"
    );
}

/// Words of a growable filter's snapshot header (FORMAT.md).
const HEADER_WORDS: usize = 11;

/// The bucket count a forged header claims: 2^32 buckets of 4 lanes, 16 GiB of lanes or more.
const CLAIMED_BUCKETS: u64 = 1 << 32;

/// A growable filter's snapshot header claiming a first table of `buckets` buckets, with
/// nothing after it (no table, no checksum).
fn claim_a_table(buckets: u64) -> Vec<u8> {
    let filter = CuckooFilter::builder()
        .capacity(10)
        .growable(true)
        .build()
        .unwrap();
    let mut words: Vec<u64> = filter
        .to_bytes()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    words.truncate(HEADER_WORDS);
    // The first table's buckets (word 4).
    words[4] = buckets;
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn a_claimed_table_is_allocated_only_as_its_bytes_arrive() {
    let _one = one_at_a_time();
    let buckets = CLAIMED_BUCKETS;
    println!("the header claims {buckets} buckets");

    // Nothing after the header.
    let forged = claim_a_table(buckets);
    let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
    println!("no data: {result:?}, peak {peak} bytes, largest request {largest}");
    assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
    assert!(largest <= 2 * MIB, "asked for {largest} bytes at once");

    // 16 MiB of empty buckets, then the end: memory follows what was read.
    let mut forged = claim_a_table(buckets);
    let data = 16 * MIB;
    forged.resize(forged.len() + data, 0);
    let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
    println!("{data} bytes of data: {result:?}, peak {peak} bytes, largest request {largest}");
    assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
    assert!(
        largest <= 2 * data + 2 * MIB,
        "asked for {largest} bytes at once after {data} bytes"
    );
    assert!(peak <= 3 * data + 4 * MIB, "peak {peak} after {data} bytes");

    // A bucket count beyond any table is refused from the header alone.
    let forged = claim_a_table(1 << 60);
    let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
    assert!(
        matches!(result, Err(PersistError::InvalidParameter { .. })),
        "{result:?}"
    );
    assert!(largest <= 2 * MIB && peak <= 2 * MIB, "{largest} {peak}");
}

/// A claimed table fed data just around each doubling of its room (1 MiB, 2 MiB, 4 MiB, a
/// word either side): the room asked for stays within twice what was supplied plus the first
/// 1 MiB step; the peak within three times (old and new block side by side while this test's
/// copying allocator reallocates) plus 2 MiB.
#[test]
fn a_claimed_table_gets_room_for_at_most_twice_its_bytes_around_each_doubling() {
    let _one = one_at_a_time();
    for step in [MIB, 2 * MIB, 4 * MIB] {
        for data in [step - 8, step, step + 8] {
            let mut forged = claim_a_table(CLAIMED_BUCKETS);
            forged.resize(forged.len() + data, 0);
            let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
            println!("{data} bytes of data: peak {peak}, largest request {largest}");
            assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
            assert!(
                largest <= 2 * data + MIB,
                "asked for {largest} bytes at once after {data} bytes"
            );
            assert!(peak <= 3 * data + 2 * MIB, "peak {peak} after {data} bytes");
        }
    }
}
