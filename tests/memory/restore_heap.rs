//! Restoring never allocates more than the data it has read justifies: a header that claims a
//! huge table costs nothing, and a real restore needs the filter's size plus a small constant.
//! Measured by the binary's counting allocator (`counting_alloc`).

use crate::counting_alloc::{one_at_a_time, peak_during};
use crate::format_model::checksum;
use atomic_cuckoo::{CuckooFilter, PersistError};

#[test]
fn restoring_allocates_only_what_the_data_justifies() {
    let _one = one_at_a_time();
    const MIB: usize = 1 << 20;

    // 1. A real restore of a million-item filter: its size plus a small constant.
    let filter = CuckooFilter::with_capacity(1_000_000);
    for i in 0..1_000_000u64 {
        filter.insert(&i).unwrap();
    }
    let bytes = filter.to_bytes();
    let (restored, peak) = peak_during(|| CuckooFilter::from_bytes(&bytes).unwrap());
    println!(
        "restore of {} bytes: peak {peak} bytes allocated, filter holds {}",
        bytes.len(),
        restored.memory_usage()
    );
    // from_bytes: the table, allocated once, plus the 1 MiB read buffer.
    assert!(
        peak <= restored.memory_usage() + MIB + 64 * 1024,
        "peak {peak}"
    );
    // read_from grows the table as data arrives; reallocations are counted here as if they
    // copied (old and new block both live), an upper bound.
    let (restored_stream, peak) = peak_during(|| CuckooFilter::read_from(&bytes[..]).unwrap());
    println!("stream restore: peak {peak} bytes allocated (reallocations counted as copies)");
    assert!(
        peak <= 2 * restored_stream.memory_usage() + MIB + 64 * 1024,
        "stream peak {peak}"
    );
    drop((restored, restored_stream));

    // 2. A header whose plan and first level claim a table of 10^9 items (1.7 GB) behind a few
    // bytes of data. Level shapes follow from the plan, so take the bucket count from a filter
    // built for that capacity (its memory is reserved, never touched) and patch a small
    // snapshot's capacity (bytes 40..48) and first level's buckets (72..80).
    const HUGE_ITEMS: usize = 1_000_000_000;
    let huge_buckets = {
        let big = CuckooFilter::with_capacity(HUGE_ITEMS);
        // Four fingerprints a bucket.
        big.slots() / 4
    };
    let small = CuckooFilter::with_capacity(10);
    let mut huge = small.to_bytes();
    huge[40..48].copy_from_slice(&(HUGE_ITEMS as u64).to_le_bytes());
    huge[72..80].copy_from_slice(&(huge_buckets as u64).to_le_bytes());
    let (result, peak) = peak_during(|| CuckooFilter::from_bytes(&huge));
    assert!(matches!(result, Err(PersistError::Truncated)));
    assert!(
        peak < 64 * 1024,
        "from_bytes allocated {peak} bytes before refusing"
    );
    let (result, peak) = peak_during(|| CuckooFilter::read_from(&huge[..]));
    assert!(matches!(result, Err(PersistError::Truncated)));
    assert!(
        peak <= 3 * MIB,
        "read_from allocated {peak} bytes for a {}-byte input",
        huge.len()
    );
    println!("huge-table header: refused after at most {peak} bytes allocated");
}

/// A growable `CuckooFilter` snapshot whose header claims a table of 2^40 buckets (and a split
/// bitmap for half of them) behind a few hundred bytes: refused as truncated, by `from_bytes`
/// before allocating anything, by `read_from` after at most the first 1 MiB step per block.
#[test]
fn a_growable_filter_header_claiming_a_huge_table_allocates_little() {
    let _one = one_at_a_time();
    const MIB: usize = 1 << 20;
    let small = CuckooFilter::builder()
        .capacity(10)
        .growable(true)
        .build()
        .unwrap();
    let mut words: Vec<u64> = small
        .to_bytes()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // Doublings (word 2, low half), first table's buckets (word 4), splits left (word 9).
    // (The planned doublings, the high half, stay the builder's: the table may double past.)
    words[2] = words[2] & !0xFFFF_FFFF | 8;
    words[4] = 1 << 32;
    words[9] = 1;
    let n = words.len() - 1;
    words[n] = checksum(&words[..n]);
    let huge: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let (result, peak) = peak_during(|| CuckooFilter::from_bytes(&huge));
    assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
    assert!(peak < 64 * 1024, "from_bytes allocated {peak} bytes");
    let (result, peak) = peak_during(|| CuckooFilter::read_from(&huge[..]));
    assert!(matches!(result, Err(PersistError::Truncated)), "{result:?}");
    assert!(peak <= 3 * MIB, "read_from allocated {peak} bytes");
    println!("huge growable header: refused after at most {peak} bytes allocated");

    // A real restore: the filter's size plus the read buffer (twice that for a stream).
    let filter = CuckooFilter::builder()
        .growable(true)
        .capacity(100_000)
        .build()
        .unwrap();
    for i in 0..300_000u64 {
        filter.insert(&i).unwrap();
    }
    let bytes = filter.to_bytes();
    let (restored, peak) = peak_during(|| CuckooFilter::from_bytes(&bytes).unwrap());
    assert!(
        peak <= restored.memory_usage() + MIB + 64 * 1024,
        "peak {peak}"
    );
    let (restored, peak) = peak_during(|| CuckooFilter::read_from(&bytes[..]).unwrap());
    assert!(
        peak <= 2 * restored.memory_usage() + MIB + 64 * 1024,
        "stream peak {peak}"
    );
}
