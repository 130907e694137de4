//! The hot-key rule (`InsertError::ItemBucketsFull`: a growing filter does not grow for a key
//! whose two buckets are full of its own copies): hot keys, alone, in pairs, among distinct keys
//! or with a concurrent remover, cannot make a growing filter add levels without bound; only a
//! key that collides completely with a hot key (same fingerprint, same bucket pair) is refused.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common;

/// Two u64 keys whose hashes share the upper 32 bits (so the same primary bucket in *every*
/// level: `primary = (h >> 32) * n >> 32`) but whose fingerprints differ (top 16 bits of the low
/// word differ). With the default, fixed-seed hasher this is a birthday search over ~2^17 keys.
fn keys_sharing_every_primary_bucket<S: BuildHasher>(hasher: &S) -> (u64, u64) {
    let mut seen: HashMap<u32, (u64, u64)> = HashMap::new();
    for k in 0u64.. {
        let h = hasher.hash_one(k);
        let upper = (h >> 32) as u32;
        if let Some(&(other, oh)) = seen.get(&upper) {
            let fp = |h: u64| (h as u32) >> 16;
            if fp(oh) != fp(h) {
                return (other, k);
            }
        } else {
            seen.insert(upper, (k, h));
        }
    }
    unreachable!()
}

/// Two hot keys (each inserted over and over) that share a primary bucket: their three buckets
/// fill with a mix of the two fingerprints, so neither key's pair is "full of its own copies",
/// the insert reports `Full`, and the filter grows: in every new level the two keys share a
/// bucket again (the primary bucket is derived from the same 32 hash bits in every level), so it
/// grows again after a few dozen copies, doubling its memory each time, up to `max_levels`.
#[test]
fn two_hot_keys_sharing_a_bucket_do_not_grow_a_filter_without_bound() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .expansion(2)
        .max_levels(14)
        .build()
        .unwrap();
    let (a, b) = keys_sharing_every_primary_bucket(filter.hasher());
    let memory_before = filter.memory_usage();
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for _ in 0..2_000 {
        for k in [a, b] {
            let r = match filter.insert(&k) {
                Ok(()) => "Ok".to_string(),
                Err(e) => format!("{e:?}"),
            };
            *outcomes.entry(r).or_default() += 1;
        }
    }
    println!(
        "keys {a} and {b}: outcomes {outcomes:?}; {} levels, {} items, memory {} -> {} bytes",
        filter.levels(),
        filter.len(),
        memory_before,
        filter.memory_usage()
    );
    assert!(
        filter.levels() <= 2,
        "two hot keys grew the filter to {} levels ({} items stored, memory {} -> {} bytes)",
        filter.levels(),
        filter.len(),
        memory_before,
        filter.memory_usage()
    );
}

/// One hot key on tiny levels, every width and several expansion factors: the filter may grow
/// while a level is so small that the key's copies fill most of it, but not without bound.
#[test]
fn one_hot_key_on_tiny_levels_stops_growing() {
    for bits in [4u32, 5, 8, 12, 16, 21, 32] {
        for factor in [2u32, 3, 4] {
            let filter = CuckooFilter::builder()
                .capacity(1)
                .fingerprint_bits(bits)
                .expansion(factor)
                .max_levels(20)
                .build()
                .unwrap();
            let mut stored = 0;
            let mut last = None;
            for _ in 0..20_000 {
                match filter.insert("hot") {
                    Ok(()) => stored += 1,
                    Err(e) => last = Some(e),
                }
            }
            println!(
                "bits {bits} factor {factor}: {stored} stored, {} levels, last error {last:?}, \
                 memory {} bytes",
                filter.levels(),
                filter.memory_usage()
            );
            assert_eq!(last, Some(InsertError::ItemBucketsFull), "bits {bits}");
            assert!(
                filter.levels() <= 5,
                "bits {bits} factor {factor}: {} levels",
                filter.levels()
            );
            assert_eq!(filter.count("hot"), stored);
        }
    }
}

/// A hot key interleaved with distinct keys: the filter must not end up with more than one
/// level beyond what the distinct keys alone need.
#[test]
fn a_hot_key_interleaved_with_distinct_keys_costs_at_most_one_level() {
    let seed = common::seed("hot key interleaved");
    let keys = common::distinct_keys(seed, 300_000);
    for bits in [8u32, 12] {
        let build = || {
            CuckooFilter::builder()
                .capacity(1_000)
                .fingerprint_bits(bits)
                .expansion(2)
                .build()
                .unwrap()
        };
        let plain = build();
        plain.insert_many(&keys).unwrap();
        let hot = build();
        let mut hot_errors: HashMap<String, usize> = HashMap::new();
        let mut twins = 0;
        for (i, k) in keys.iter().enumerate() {
            let looked_present = hot.contains(k);
            match hot.insert(k) {
                Ok(()) => {}
                // Documented: a key that collides completely with the hot key counts as a copy
                // of it (rare at 8 bits, about 2 / (buckets * 255) per key); it is found.
                Err(InsertError::ItemBucketsFull) if looked_present => twins += 1,
                Err(e) => panic!("bits {bits}: distinct key #{i} {k}: {e:?}"),
            }
            if let Err(e) = hot.insert("hot") {
                *hot_errors.entry(format!("{e:?}")).or_default() += 1;
            }
        }
        println!(
            "bits {bits}: distinct only {} levels / {} bytes; with hot key {} levels / {} bytes \
             (hot copies {}, hot errors {hot_errors:?}, {twins} twins of the hot key)",
            plain.levels(),
            plain.memory_usage(),
            hot.levels(),
            hot.memory_usage(),
            hot.count("hot")
        );
        assert!(hot.levels() <= plain.levels() + 1);
        assert!(keys.iter().all(|k| hot.contains(k)));
    }
}

/// A distinct key that collides completely (same fingerprint, same bucket pair) with a hot key
/// in the newest level of a *growing* filter gets `ItemBucketsFull`, though it was never
/// inserted and the filter could add a level where the two differ. The README's growth example
/// (`filter.insert(&i)?` over distinct keys, "never Full while levels can be added") then stops
/// with an error.
#[test]
fn only_a_key_that_collides_completely_with_a_hot_key_is_refused() {
    let build = || {
        CuckooFilter::builder()
            .capacity(1_000)
            .fingerprint_bits(8)
            .expansion(2)
            .build()
            .unwrap()
    };
    // Oracle: fill the hot key's pair, then every other key whose insert is refused as "stuck"
    // collides with it completely (the filter is nearly empty: nothing else can refuse it).
    let oracle = build();
    let hot = u64::MAX;
    while oracle.insert(&hot).is_ok() {}
    let mut twin = None;
    for k in 0u64..10_000_000 {
        // Only keys that (maybe) match the hot key's fingerprint in one of their buckets; others
        // would change the table (one whose pair is the hot key's, with another fingerprint,
        // finds no room and grows the filter: correctly).
        if !oracle.contains(&k) {
            continue;
        }
        match oracle.insert(&k) {
            Ok(()) => assert!(oracle.remove(&k)),
            Err(InsertError::ItemBucketsFull) => {
                twin = Some(k);
                break;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    let twin = twin.expect("a key colliding with the hot key");
    assert_eq!(oracle.levels(), 1);
    println!("key {twin} collides completely with the hot key {hot} in level 0");

    // The workload: the hot key, repeated; then a stream of distinct keys that includes `twin`.
    let filter = build();
    let mut hot_copies = 0;
    while filter.insert(&hot).is_ok() {
        hot_copies += 1;
    }
    let mut failures = Vec::new();
    for k in (0..200u64).chain([twin]) {
        if k == hot {
            continue;
        }
        if let Err(e) = filter.insert(&k) {
            failures.push((k, e));
        }
    }
    println!(
        "{hot_copies} hot copies; distinct-key failures {failures:?}; {} levels",
        filter.levels()
    );
    // Documented: an item that collides completely with a hot key (same fingerprint, same
    // buckets) counts as a copy of it, and `contains` already answers true for it. Every other
    // distinct key goes in.
    assert_eq!(
        failures,
        vec![(twin, InsertError::ItemBucketsFull)],
        "distinct keys refused by a growing filter with room"
    );
    assert!(filter.contains(&twin));
}

/// With an identity hasher, distinct small integers are all one item to the filter (one
/// bucket pair, one fingerprint): a growing filter stores eight of them, its two buckets full,
/// and refuses the ninth with `ItemBucketsFull` instead of growing for them.
#[test]
fn distinct_keys_with_an_identity_hasher_are_one_hot_key() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .expansion(2)
        // A hasher that returns the key itself, as `nohash`-style hashers do for integer keys:
        // the filter takes the bucket from the upper 32 bits and the fingerprint from the top
        // of the lower 32 bits without mixing, so small integers all get the same key.
        .hasher(common::Identity)
        .build()
        .unwrap();
    let first_error = (0..1_000u64).find_map(|k| filter.insert(&k).err().map(|e| (k, e)));
    assert_eq!(first_error, Some((8, InsertError::ItemBucketsFull)));
    assert_eq!(filter.levels(), 1, "no level added for one hot key");
    assert_eq!(filter.len(), 8);
    assert_eq!(
        filter.count(&999u64),
        8,
        "every small integer is a copy of the others"
    );
}

/// A hot key that one thread inserts and another removes: an insert that found the pair full
/// (NoRoom) and then, before its "stuck?" check, sees a free lane (the remover took a copy)
/// reports `Full` and grows the filter. Repeated, the filter grows level after level for one key.
#[test]
fn a_hot_key_inserted_and_removed_concurrently_does_not_grow_the_filter() {
    // Remove a copy every `every` spins of the remover: often, and rarely.
    let levels: Vec<(u64, usize)> = [2_000u64, 4]
        .into_iter()
        .map(|every| (every, hot_key_with_a_remover(every)))
        .collect();
    assert!(
        levels.iter().all(|&(_, l)| l <= 2),
        "one hot key (inserted by one thread, removed by another every N spins) grew the \
         filter: (N, levels) = {levels:?}"
    );
}

fn hot_key_with_a_remover(every: u64) -> usize {
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(1_000)
            .expansion(2)
            .max_levels(12)
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let inserts = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(parking_free::Errors::default());
    let inserter = {
        let (filter, stop, inserts, errors) = (
            Arc::clone(&filter),
            Arc::clone(&stop),
            Arc::clone(&inserts),
            Arc::clone(&errors),
        );
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match filter.insert("hot") {
                    Ok(()) => {}
                    Err(InsertError::ItemBucketsFull) => {}
                    Err(e) => errors.record(format!("{e:?}")),
                }
                inserts.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let removes = Arc::new(AtomicUsize::new(0));
    let remover = {
        let (filter, stop, removes) =
            (Arc::clone(&filter), Arc::clone(&stop), Arc::clone(&removes));
        thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Keep the pair nearly full: take a copy now and then.
                n += 1;
                if n.is_multiple_of(every) {
                    filter.remove("hot");
                    removes.fetch_add(1, Ordering::Relaxed);
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) && filter.levels() < 6 {
        thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    inserter.join().unwrap();
    remover.join().unwrap();
    println!(
        "remove every {every} spins: {} inserts, {} removes in {:?}: {} levels, {} copies, \
         errors {:?}, memory {} bytes",
        inserts.load(Ordering::Relaxed),
        removes.load(Ordering::Relaxed),
        start.elapsed(),
        filter.levels(),
        filter.count("hot"),
        errors.get(),
        filter.memory_usage()
    );
    filter.levels()
}

/// The same through `insert_many`: a batch of one key repeated.
#[test]
fn insert_many_of_a_hot_key_stops_with_item_buckets_full_and_no_growth() {
    let filter = CuckooFilter::builder()
        .capacity(10_000)
        .expansion(2)
        .build()
        .unwrap();
    let batch = vec![42u64; 10_000];
    let e = filter.insert_many(&batch).unwrap_err();
    println!("{e:?}, {} levels", filter.levels());
    assert_eq!(e.error, InsertError::ItemBucketsFull);
    assert_eq!(filter.levels(), 1);
    assert_eq!(filter.count(&42u64), e.index);
}

mod parking_free {
    use std::sync::Mutex;

    #[derive(Default)]
    pub struct Errors(Mutex<Vec<String>>);

    impl Errors {
        pub fn record(&self, e: String) {
            let mut v = self.0.lock().unwrap();
            if v.len() < 10 {
                v.push(e);
            }
        }
        pub fn get(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }
}
