//! `RedisCuckooFilter`: the spec's worked examples byte for byte, round trips through both
//! export formats, and the concurrency guarantees on tiny tables.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use atomic_cuckoo::redisbloom::{
    LoadError, RedisCuckooFilter, RedisInsertError, ReserveError, PORTABLE_RDB_VERSION,
};

use crate::common;

/// The data chunks' bytes, concatenated (the header chunk left out).
fn data(f: &RedisCuckooFilter) -> Vec<u8> {
    f.scandump()
        .into_iter()
        .skip(1)
        .flat_map(|(_, c)| c)
        .collect()
}

#[test]
fn the_worked_example_gives_redis_bytes() {
    // CF.RESERVE w 4 BUCKETSIZE 1, then CF.ADD a b c d e f g h (REDISBLOOM.md §5).
    let f = RedisCuckooFilter::builder()
        .capacity(4)
        .bucket_size(1)
        .build()
        .unwrap();
    for item in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        f.insert(item).unwrap();
    }
    assert_eq!(
        data(&f),
        [0x00, 0xc4, 0xcb, 0x10, 0x00, 0xbc, 0xa9, 0x06, 0x4b, 0x00, 0x00, 0x1c]
    );
    let chunks = f.scandump();
    let iterators: Vec<u64> = chunks.iter().map(|(i, _)| *i).collect();
    assert_eq!(iterators, [1, 5, 9, 13]);
    // Header: 8 items, 4 buckets, 0 deletes, 3 filters, bs 1, maxIter 20, exp 1 (§7.1).
    let mut header = vec![8, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0];
    header.extend([0; 8]);
    header.extend([3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 20, 0, 1, 0]);
    assert_eq!(chunks[0].1, header);
    let info = f.info();
    assert_eq!((info.size, info.filters, info.items), (100, 3, 8));
    for item in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        assert!(f.contains(item), "{item}");
    }
}

#[test]
fn count_counts_a_shared_bucket_twice_like_redis() {
    // CF.RESERVE cnt 4 BUCKETSIZE 2 (2 buckets); "b" has an even fingerprint (§6).
    let f = RedisCuckooFilter::builder()
        .capacity(4)
        .bucket_size(2)
        .build()
        .unwrap();
    f.insert("b").unwrap();
    assert_eq!(f.count("b"), 2);
    f.insert("b").unwrap();
    assert_eq!(f.count("b"), 4);
    assert!(f.remove("b"));
    assert_eq!(f.count("b"), 2);
    assert_eq!(data(&f), [0x00, 0x00, 0x00, 0x10]);
}

#[test]
fn parameters_get_redis_ranges_and_rounding() {
    let b = RedisCuckooFilter::builder;
    assert_eq!(
        b().bucket_size(0).build().unwrap_err(),
        ReserveError::BucketSize { bucket_size: 0 }
    );
    assert!(b().bucket_size(256).build().is_err());
    assert!(b().max_iterations(0).build().is_err());
    assert!(b().max_iterations(65_536).build().is_err());
    assert!(b().expansion(32_769).build().is_err());
    assert!(b().capacity(3).bucket_size(2).build().is_err());
    assert!(b().capacity((1 << 30) + 1).build().is_err());
    assert!(b().max_expansions(0).build().is_err());
    // Rounding as in REDISBLOOM.md §4.
    let f = b()
        .capacity(1025)
        .bucket_size(4)
        .expansion(3)
        .build()
        .unwrap();
    assert_eq!((f.info().buckets, f.info().expansion), (256, 4));
    let f = b().capacity(7).bucket_size(2).expansion(5).build().unwrap();
    assert_eq!((f.info().buckets, f.info().expansion), (4, 8));
    assert_eq!(RedisCuckooFilter::reserve(100).unwrap().info().buckets, 64);
}

#[test]
fn a_filter_without_expansion_reports_full_and_keeps_everything() {
    let f = RedisCuckooFilter::builder()
        .capacity(16)
        .bucket_size(2)
        .expansion(0)
        .build()
        .unwrap();
    let mut stored = Vec::new();
    for i in 0..1_000u32 {
        let item = i.to_string();
        match f.insert(&item) {
            Ok(()) => stored.push(item),
            Err(e) => {
                assert_eq!(e, RedisInsertError::Full);
                break;
            }
        }
    }
    // A failed insert leaves the bytes as they were (Redis rolls its kicks back).
    let mut failures = 0;
    for i in 1_000..1_200u32 {
        let before = data(&f);
        match f.insert(i.to_string()) {
            Ok(()) => stored.push(i.to_string()),
            Err(_) => {
                failures += 1;
                assert_eq!(data(&f), before, "a failed insert changed the bytes");
            }
        }
    }
    assert!(failures > 100);
    assert!(stored.iter().all(|s| f.contains(s)));
    assert_eq!(f.info().items, stored.len() as u64);
}

/// A filter of two sub-filters at most, filled until an insert is refused for the limit.
fn filled_to_its_max_expansions() -> RedisCuckooFilter {
    let f = RedisCuckooFilter::builder()
        .capacity(4)
        .bucket_size(1)
        .max_expansions(2)
        .build()
        .unwrap();
    let err = (0..100u32)
        .map(|i| f.insert(i.to_string()))
        .find_map(Result::err)
        .unwrap();
    assert_eq!(err, RedisInsertError::MaxExpansionsReached);
    f
}

#[test]
fn max_expansions_is_checked_before_the_item() {
    let f = filled_to_its_max_expansions();
    assert_eq!(f.info().filters, 2);
    assert_eq!(
        f.insert_unique("anything"),
        Err(RedisInsertError::MaxExpansionsReached)
    );
}

#[test]
fn both_export_formats_round_trip() {
    let seed = common::seed("redisbloom_round_trip");
    let mut rng = common::Rng::new(seed);
    for bucket_size in [1u64, 2, 3, 4, 8, 255] {
        let f = RedisCuckooFilter::builder()
            .capacity(2 * bucket_size.max(8))
            .bucket_size(bucket_size)
            .expansion(2)
            .build()
            .unwrap();
        let items: Vec<String> = (0..300).map(|_| rng.next_u64().to_string()).collect();
        for item in &items {
            f.insert(item).unwrap();
        }
        for item in items.iter().step_by(3) {
            assert!(f.remove(item), "seed={seed} bs={bucket_size}");
        }
        let chunks = f.scandump();
        let g = RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, c)| (*i, &c[..]))).unwrap();
        assert_eq!(g.scandump(), chunks, "seed={seed} bs={bucket_size}");
        assert_eq!(g.info(), f.info());
        let payload = f.dump_payload(PORTABLE_RDB_VERSION);
        let h = RedisCuckooFilter::from_dump_payload(&payload).unwrap();
        assert_eq!(h.scandump(), chunks, "seed={seed} bs={bucket_size}");
        for (n, item) in items.iter().enumerate() {
            if n % 3 != 0 {
                assert!(h.contains(item) && g.contains(item), "seed={seed}");
            }
        }
    }
}

/// A `DUMP` payload cut short inside its 10-byte footer (the RDB version and CRC-64) is
/// reported as truncated, with the bytes missing, for every RDB version: not as an RDB
/// version read from the shifted bytes.
#[test]
fn a_dump_payload_cut_short_in_its_footer_is_reported_as_truncated() {
    let f = RedisCuckooFilter::reserve(100).unwrap();
    for i in 0..40u32 {
        f.insert(i.to_string()).unwrap();
    }
    for version in 9..=12 {
        let payload = f.dump_payload(version);
        for missing in 1..=8 {
            let short = &payload[..payload.len() - missing];
            let error = RedisCuckooFilter::from_dump_payload(short).unwrap_err();
            let message = error.to_string();
            if missing == 1 {
                println!("version {version}, 1 byte short: {message}");
            }
            assert!(
                message.contains("truncated") && !message.contains("is outside"),
                "version {version}, {missing} short: {message:?}"
            );
            assert_eq!(
                error,
                LoadError::PayloadTruncated {
                    len: short.len(),
                    missing
                },
                "version {version}"
            );
        }
        assert!(RedisCuckooFilter::from_dump_payload(&payload).is_ok());
    }
}

#[test]
fn an_empty_filter_dumps_nothing_and_cannot_be_imported_from_nothing() {
    let f = RedisCuckooFilter::reserve(100).unwrap();
    assert!(f.scandump().is_empty());
    let none: [(u64, &[u8]); 0] = [];
    assert_eq!(
        RedisCuckooFilter::from_chunks(none).unwrap_err(),
        LoadError::NoChunks
    );
}

#[test]
fn compaction_moves_back_and_drops_emptied_sub_filters() {
    let f = RedisCuckooFilter::builder()
        .capacity(8)
        .bucket_size(2)
        .build()
        .unwrap();
    let items: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
    for item in &items {
        f.insert(item).unwrap();
    }
    let grown = f.info().filters;
    assert!(grown > 3);
    // Deletes trigger the automatic compaction; every remaining item stays findable.
    for item in &items[..150] {
        assert!(f.remove(item));
        assert!(items[150..].iter().all(|i| f.contains(i)));
    }
    assert!(f.info().filters < grown, "{:?}", f.info());
    f.compact();
    assert_eq!(f.info().deletes, 0);
    assert!(items[150..].iter().all(|i| f.contains(i)));
    assert_eq!(f.info().items, 50);
    // Growing again reuses the dropped sub-filters' shapes.
    for item in &items[..150] {
        f.insert(item).unwrap();
    }
    assert!(items.iter().all(|i| f.contains(i)));
}

/// Two writers churn their own items while a reader checks `stable` items, which must never
/// be missed. Returns the items left in the filter.
fn churn_and_check(
    f: &Arc<RedisCuckooFilter>,
    stable: Vec<String>,
    limit: usize,
    seed: u64,
    compact_every: u64,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let stable = Arc::new(stable);
    let churn: Vec<_> = (0..2u64)
        .map(|t| {
            let (f, stop) = (Arc::clone(f), Arc::clone(&stop));
            thread::spawn(move || {
                let mut rng = common::Rng::new(seed ^ t);
                let mut mine: Vec<String> = Vec::new();
                let mut rounds = 0;
                while !stop.load(Ordering::Relaxed) || rounds < 2_000 {
                    rounds += 1;
                    if mine.len() < limit && rng.below(3) != 0 {
                        let item = format!("t{t}-{}", rng.next_u64());
                        if f.insert(&item).is_ok() {
                            mine.push(item);
                        }
                    } else if !mine.is_empty() {
                        let at = rng.below(mine.len() as u64) as usize;
                        let item = mine.swap_remove(at);
                        assert!(f.remove(&item), "seed={seed}: {item} not removable");
                    }
                    if compact_every > 0 && rng.below(compact_every) == 0 {
                        f.compact();
                    }
                }
                mine
            })
        })
        .collect();
    let reader = {
        let (f, stable, stop) = (Arc::clone(f), Arc::clone(&stable), Arc::clone(&stop));
        thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for s in stable.iter() {
                    assert!(f.contains(s), "seed={seed}: false negative for {s}");
                    checks += 1;
                }
            }
            checks
        })
    };
    thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let left: Vec<String> = churn.into_iter().flat_map(|c| c.join().unwrap()).collect();
    assert!(reader.join().unwrap() > 0);
    assert!(
        stable.iter().chain(&left).all(|s| f.contains(s)),
        "seed={seed}"
    );
    assert_eq!(
        f.info().items,
        (stable.len() + left.len()) as u64,
        "seed={seed}"
    );
    // The bytes are a filter Redis would load: the counters agree with the slots.
    let chunks = f.scandump();
    RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, c)| (*i, &c[..]))).unwrap();
}

#[test]
fn readers_never_miss_while_kicks_walk_a_full_table() {
    let seed = common::seed("redisbloom_kicks");
    // One sub-filter of 32 two-slot buckets, kept nearly full: most inserts kick.
    let f = Arc::new(
        RedisCuckooFilter::builder()
            .capacity(64)
            .bucket_size(2)
            .expansion(0)
            .build()
            .unwrap(),
    );
    let stable: Vec<String> = (0..40).map(|i| format!("stable{i}")).collect();
    for s in &stable {
        f.insert(s).unwrap();
    }
    churn_and_check(&f, stable, 12, seed, 0);
}

#[test]
fn readers_never_miss_while_compaction_moves_fingerprints_back() {
    let seed = common::seed("redisbloom_compaction");
    let f = Arc::new(
        RedisCuckooFilter::builder()
            .capacity(8)
            .bucket_size(2)
            .expansion(1)
            .max_expansions(1_000)
            .build()
            .unwrap(),
    );
    // Fill the first sub-filters, then add the stable items, which land in newer ones:
    // deletes and compactions then move them back while the reader checks them.
    let filler: Vec<String> = (0..40).map(|i| format!("filler{i}")).collect();
    for s in &filler {
        f.insert(s).unwrap();
    }
    let stable: Vec<String> = (0..24).map(|i| format!("stable{i}")).collect();
    for s in &stable {
        f.insert(s).unwrap();
    }
    for s in &filler {
        assert!(f.remove(s));
    }
    churn_and_check(&f, stable, 30, seed, 50);
}

#[test]
fn racing_insert_unique_stores_an_item_once() {
    let f = Arc::new(RedisCuckooFilter::reserve(1_000).unwrap());
    for round in 0..200u32 {
        let item = format!("item{round}");
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (f, item) = (Arc::clone(&f), item.clone());
                thread::spawn(move || f.insert_unique(&item).unwrap())
            })
            .collect();
        let added: usize = threads
            .into_iter()
            .map(|t| t.join().unwrap() as usize)
            .sum();
        assert_eq!(added, 1, "round {round}");
    }
}

#[test]
fn a_clone_is_the_same_filter_byte_for_byte_and_independent() {
    let f = RedisCuckooFilter::builder()
        .capacity(64)
        .bucket_size(2)
        .expansion(2)
        .build()
        .unwrap();
    for i in 0..500u32 {
        f.insert(i.to_le_bytes()).unwrap();
    }
    for i in 0..50u32 {
        assert!(f.remove(i.to_le_bytes()));
    }
    assert!(f.info().filters > 1, "grown: several sub-filters to copy");
    let copy = f.clone();
    assert_eq!(copy.scandump(), f.scandump());
    assert_eq!(copy.info(), f.info());
    assert_eq!(
        copy.dump_payload(PORTABLE_RDB_VERSION),
        f.dump_payload(PORTABLE_RDB_VERSION)
    );
    assert_eq!((copy.len(), f.len()), (450, 450));
    for i in 50..500u32 {
        assert!(f.remove(i.to_le_bytes()));
    }
    assert!(f.is_empty());
    assert_eq!(copy.len(), 450);
    assert!((50..500u32).all(|i| copy.contains(i.to_le_bytes())));
}

#[test]
fn len_and_is_empty_follow_inserts_and_removes() {
    let f = RedisCuckooFilter::reserve(100).unwrap();
    assert!(f.is_empty());
    assert_eq!(f.len(), 0);
    f.insert("a").unwrap();
    f.insert("a").unwrap();
    assert_eq!(f.len(), 2);
    assert!(f.remove("a") && f.remove("a"));
    assert!(f.is_empty());
}

/// Every damage to a `DUMP` payload is a typed error, never a panic or a filter: cut short by
/// 1 to 20 bytes (inside the footer: `PayloadTruncated`) or to any prefix, bytes appended,
/// every single flipped bit (the CRC-64 covers them all), for empty, small and grown filters
/// and every RDB version.
#[test]
fn every_cut_append_and_flip_of_a_dump_payload_is_a_typed_error() {
    let empty = RedisCuckooFilter::reserve(8).unwrap();
    let small = RedisCuckooFilter::reserve(16).unwrap();
    for i in 0..20u32 {
        small.insert(i.to_le_bytes()).unwrap();
    }
    let grown = RedisCuckooFilter::builder()
        .capacity(8)
        .bucket_size(1)
        .expansion(2)
        .build()
        .unwrap();
    for i in 0..60u32 {
        grown.insert(i.to_le_bytes()).unwrap();
    }
    assert!(grown.info().filters > 2);
    let mut flips = 0;
    for (name, f) in [("empty", &empty), ("small", &small), ("grown", &grown)] {
        for version in 9..=12 {
            let payload = f.dump_payload(version);
            let back = RedisCuckooFilter::from_dump_payload(&payload).unwrap();
            assert_eq!(back.info(), f.info(), "{name}");
            for cut in 1..=20.min(payload.len()) {
                let short = &payload[..payload.len() - cut];
                let error = RedisCuckooFilter::from_dump_payload(short)
                    .err()
                    .unwrap_or_else(|| panic!("{name} v{version}: cut by {cut} loaded"));
                if cut <= 8 {
                    assert_eq!(
                        error,
                        LoadError::PayloadTruncated {
                            len: short.len(),
                            missing: cut
                        },
                        "{name} v{version}"
                    );
                }
            }
            for len in 0..payload.len() {
                assert!(
                    RedisCuckooFilter::from_dump_payload(&payload[..len]).is_err(),
                    "{name} v{version}: a {len}-byte prefix loaded"
                );
            }
            for extra in 1..=20usize {
                let mut long = payload.clone();
                long.extend((0..extra).map(|i| i as u8));
                assert!(
                    RedisCuckooFilter::from_dump_payload(&long).is_err(),
                    "{name} v{version}: {extra} bytes appended loaded"
                );
                // Its own footer appended again: still refused.
                let mut twice = payload.clone();
                twice.extend_from_slice(&payload[payload.len() - extra.min(10)..]);
                assert!(RedisCuckooFilter::from_dump_payload(&twice).is_err());
            }
            for i in 0..payload.len() {
                for bit in 0..8 {
                    let mut bad = payload.clone();
                    bad[i] ^= 1 << bit;
                    flips += 1;
                    assert!(
                        RedisCuckooFilter::from_dump_payload(&bad).is_err(),
                        "{name} v{version}: byte {i} bit {bit} loaded"
                    );
                }
            }
        }
    }
    println!("{flips} single-bit flips, all refused");
}

/// Clones of an empty, a grown and a compacted filter are the same filter byte for byte.
#[test]
fn clones_of_empty_grown_and_compacted_filters_are_byte_for_byte_the_same() {
    let f = RedisCuckooFilter::builder()
        .capacity(8)
        .bucket_size(2)
        .expansion(1)
        .build()
        .unwrap();
    let same = |f: &RedisCuckooFilter, copy: &RedisCuckooFilter| {
        assert_eq!(copy.info(), f.info());
        assert_eq!(copy.scandump(), f.scandump());
        assert_eq!(copy.dump_payload(9), f.dump_payload(9));
        assert_eq!((copy.len(), copy.is_empty()), (f.len(), f.is_empty()));
    };
    same(&f, &f.clone());
    assert!(f.clone().is_empty());
    for i in 0..200u32 {
        f.insert(i.to_le_bytes()).unwrap();
    }
    same(&f, &f.clone());
    for i in 0..180u32 {
        assert!(f.remove(i.to_le_bytes()));
    }
    f.compact();
    let copy = f.clone();
    same(&f, &copy);
    // The copy goes on like the original: the same inserts give the same bytes.
    for i in 1_000..1_300u32 {
        assert_eq!(
            copy.insert(i.to_le_bytes()).is_ok(),
            f.insert(i.to_le_bytes()).is_ok()
        );
    }
    same(&f, &copy);
    for i in 0..200u32 {
        let _ = f.remove(i.to_le_bytes());
    }
    f.compact();
    same(&f, &f.clone());
}

/// A clone taken while writers insert, remove and compact is a state that existed: every item
/// whose insert returned before the clone began is in it, its counters agree with its own
/// slots (its scandump restores to the same `info`), and it is independent of the original.
/// Tiny tables, so that inserts kick, grow and compaction moves fingerprints back.
#[test]
fn a_clone_under_writers_and_compaction_holds_every_item_inserted_before_it() {
    let seed = common::seed("redis clone under writers");
    for (round, capacity) in [8u64, 16, 32, 64].into_iter().enumerate() {
        let f = Arc::new(
            RedisCuckooFilter::builder()
                .capacity(capacity)
                .bucket_size(2)
                .expansion(2)
                .build()
                .unwrap(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        const WRITERS: usize = 2;
        let progress: Arc<Vec<std::sync::atomic::AtomicUsize>> =
            Arc::new((0..WRITERS).map(|_| Default::default()).collect());
        let item = |w: usize, i: usize| format!("w{w}-{i}");
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (f, stop, progress) = (f.clone(), stop.clone(), progress.clone());
                thread::spawn(move || {
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) && i < 1_500 {
                        f.insert(item(w, i)).unwrap();
                        i += 1;
                        progress[w].store(i, Ordering::Release);
                    }
                })
            })
            .collect();
        let churn = {
            let (f, stop) = (f.clone(), stop.clone());
            thread::spawn(move || {
                let mut rng = common::Rng::new(seed ^ round as u64);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let k = format!("churn-{}", rng.below(64));
                    if f.insert(&k).is_ok() {
                        assert!(f.remove(&k));
                    }
                    n += 1;
                    if n.is_multiple_of(32) {
                        f.compact();
                    }
                }
            })
        };
        let (mut clones, mut mid_way) = (0, 0);
        loop {
            let before: Vec<usize> = progress.iter().map(|p| p.load(Ordering::Acquire)).collect();
            let done = before.iter().all(|&n| n == 1_500);
            if done && clones >= 30 {
                break;
            }
            clones += 1;
            mid_way += usize::from(!done && before.iter().any(|&n| n > 0));
            // The filter's own clone, not the `Arc`'s.
            let copy = RedisCuckooFilter::clone(&f);
            for (w, &n) in before.iter().enumerate() {
                for i in 0..n {
                    assert!(
                        copy.contains(item(w, i)),
                        "capacity {capacity}: {} inserted before the clone is missing",
                        item(w, i)
                    );
                }
            }
            let info = copy.info();
            assert_eq!(info.items, copy.len() as u64);
            assert_eq!(copy.clone().info(), info);
            let payload = copy.dump_payload(PORTABLE_RDB_VERSION);
            let back = RedisCuckooFilter::from_dump_payload(&payload).expect("a clone's dump");
            assert_eq!(
                back.info(),
                info,
                "the copy's counters agree with its slots"
            );
            assert_eq!(back.dump_payload(PORTABLE_RDB_VERSION), payload);
            let chunks = copy.scandump();
            if !copy.is_empty() {
                let back = RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, c)| (*i, &c[..])))
                    .expect("a clone's scandump restores");
                assert_eq!(back.info(), info);
            }
        }
        stop.store(true, Ordering::Relaxed);
        writers.into_iter().for_each(|t| t.join().unwrap());
        churn.join().unwrap();
        println!("capacity {capacity}: {clones} clones, {mid_way} while the writers ran");
    }
}

/// A whole payload written for an RDB version outside 9..=12 is `RdbVersion` with that
/// version, never `PayloadTruncated` (the truncation check must not fire on a whole footer).
#[test]
fn a_whole_payload_of_another_rdb_version_is_not_reported_as_truncated() {
    let f = RedisCuckooFilter::reserve(32).unwrap();
    for i in 0..30u32 {
        f.insert(i.to_le_bytes()).unwrap();
    }
    for version in [0u16, 1, 8, 13, 255, 256, 2304, 0xFFFF] {
        let payload = f.dump_payload(version);
        assert_eq!(
            RedisCuckooFilter::from_dump_payload(&payload).unwrap_err(),
            LoadError::RdbVersion { version },
            "version {version}"
        );
    }
}

/// A clone keeps the settings that no export carries: a filter at its `max_expansions` limit
/// clones into one that refuses the same inserts, and a copy that has room grows on alike.
#[test]
fn a_clone_keeps_max_expansions() {
    let f = filled_to_its_max_expansions();
    let copy = f.clone();
    assert_eq!(copy.info(), f.info());
    for item in ["anything", "else", "at", "all"] {
        assert_eq!(copy.insert(item), f.insert(item), "{item}");
    }
    assert_eq!(copy.scandump(), f.scandump());
}

/// The one place a `RedisCuckooFilter` dump runs the caller's code is `export_to`'s
/// connection, and the dump's freeze is over by then (the sub-filters' bytes are copied
/// first): a connection that dumps, clones, compacts, exports and writes the same filter, from
/// inside an export of it on the same thread, finishes; nothing is refused.
#[cfg(feature = "redis")]
#[test]
fn an_export_whose_connection_uses_the_same_filter_finishes() {
    use atomic_cuckoo::redis::{self, ConnectionLike, RedisResult, Value};
    use atomic_cuckoo::redisbloom::ExportMode;

    /// A connection that, at its first request, uses the filter being exported; then it fails
    /// every request (no server).
    struct CallsBack {
        filter: Arc<RedisCuckooFilter>,
        nested: bool,
        called: bool,
    }
    impl CallsBack {
        fn request(&mut self) -> RedisResult<Value> {
            if !self.nested && !self.called {
                self.called = true;
                let f = &self.filter;
                assert!(!f.scandump().is_empty());
                assert!(!f.dump_payload(PORTABLE_RDB_VERSION).is_empty());
                assert_eq!(f.clone().scandump(), f.scandump());
                f.compact();
                f.insert("nested").unwrap();
                assert!(f.remove("nested"));
                let mut inner = CallsBack {
                    filter: Arc::clone(f),
                    nested: true,
                    called: false,
                };
                assert!(f.export_to(&mut inner, "k", ExportMode::LoadChunk).is_err());
            }
            Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "no server here",
            )))
        }
    }
    impl ConnectionLike for CallsBack {
        fn req_packed_command(&mut self, _: &[u8]) -> RedisResult<Value> {
            self.request()
        }
        fn req_packed_commands(&mut self, _: &[u8], _: usize, _: usize) -> RedisResult<Vec<Value>> {
            self.request().map(|v| vec![v])
        }
        fn get_db(&self) -> i64 {
            0
        }
        fn check_connection(&mut self) -> bool {
            true
        }
        fn is_open(&self) -> bool {
            true
        }
    }

    let filter = Arc::new(RedisCuckooFilter::reserve(64).unwrap());
    for i in 0..500u32 {
        filter.insert(i.to_le_bytes()).unwrap();
    }
    let f = Arc::clone(&filter);
    let called = crate::serial_model::with_timeout("export calling back", 10, move || {
        let mut conn = CallsBack {
            filter: Arc::clone(&f),
            nested: false,
            called: false,
        };
        assert!(f.export_to(&mut conn, "k", ExportMode::LoadChunk).is_err());
        conn.called
    });
    assert!(called, "the connection was asked something");
    assert_eq!(filter.len(), 500);
}
