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

/// A one-level snapshot of a filter that may grow 65,536-fold in one step, with 16-bit
/// fingerprints in every level: level 1 then has exactly 2^16 times level 0's buckets.
fn snapshot_and_level_1_buckets() -> (Vec<u8>, u64) {
    let filter = CuckooFilter::builder()
        .capacity(50_000)
        .fingerprint_bits(16)
        .expansion(1 << 16)
        .max_levels(2)
        .build()
        .unwrap();
    let level_0_buckets = filter.slots() as u64 / 4;
    (filter.to_bytes(), level_0_buckets << 16)
}

/// `snapshot` with its checksum cut off and a second level announced: the level count (bytes
/// 28..32) set to 2, and a level header of `buckets` 16-bit buckets appended.
fn claim_a_second_level(mut snapshot: Vec<u8>, buckets: u64) -> Vec<u8> {
    snapshot.truncate(snapshot.len() - 8);
    snapshot[28..32].copy_from_slice(&2u32.to_le_bytes());
    snapshot.extend_from_slice(&16u64.to_le_bytes());
    snapshot.extend_from_slice(&buckets.to_le_bytes());
    snapshot.extend_from_slice(&0u64.to_le_bytes());
    snapshot
}

#[test]
fn a_claimed_table_is_allocated_only_as_its_bytes_arrive() {
    let _one = one_at_a_time();
    let (snapshot, buckets) = snapshot_and_level_1_buckets();
    println!(
        "level 1 claims {buckets} buckets ({} GiB)",
        (buckets * 8) >> 30
    );
    assert!(
        buckets * 8 >= 4 << 30,
        "a claim far beyond this test's memory"
    );

    // Nothing after the level header.
    let forged = claim_a_second_level(snapshot.clone(), buckets);
    let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
    println!("no data: {result:?}, peak {peak} bytes, largest request {largest}");
    assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
    assert!(largest <= 2 * MIB, "asked for {largest} bytes at once");

    // 16 MiB of empty buckets, then the end: memory follows what was read.
    let mut forged = claim_a_second_level(snapshot.clone(), buckets);
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

    // A bucket count beyond any table is refused from the level header alone.
    let forged = claim_a_second_level(snapshot, 1 << 60);
    let (result, _, peak, largest) = measure(|| CuckooFilter::read_from(&forged[..]));
    assert!(
        matches!(result, Err(PersistError::InvalidParameter { .. })),
        "{result:?}"
    );
    assert!(largest <= 2 * MIB && peak <= 2 * MIB, "{largest} {peak}");
}

/// A claimed level fed data just around each doubling of its room (1 MiB, 2 MiB, 4 MiB, a
/// word either side): the room asked for stays within twice what was supplied plus the first
/// 1 MiB step; the peak within three times (old and new block side by side while this test's
/// copying allocator reallocates) plus 2 MiB.
#[test]
fn a_claimed_table_gets_room_for_at_most_twice_its_bytes_around_each_doubling() {
    let _one = one_at_a_time();
    let (snapshot, buckets) = snapshot_and_level_1_buckets();
    for step in [MIB, 2 * MIB, 4 * MIB] {
        for data in [step - 8, step, step + 8] {
            let mut forged = claim_a_second_level(snapshot.clone(), buckets);
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
