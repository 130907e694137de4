//! The hot-key rule (`InsertError::ItemBucketsFull`: a growable filter does not double for a
//! key whose two buckets are full of its own copies): hot keys, alone, in pairs, among distinct
//! keys or with a concurrent remover, cannot make a growable filter double without bound; only a
//! key that collides completely with a hot key (same entry, same bucket pair) is refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common;

/// Two hot keys (each inserted over and over) whose hashes share their upper 32 bits and
/// their lowest 5 (with the identity hasher, items are their hashes): a growable filter gives
/// them the same home bucket on both sides, so their two buckets fill with a mix of both keys'
/// copies. Both keys are then refused with `ItemBucketsFull`: the filter does not double for a
/// pair of buckets held by a few repeated items, so its memory does not run away.
#[test]
fn two_hot_keys_sharing_their_buckets_do_not_double_a_growable_filter() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .growable(true)
        .hasher(common::Identity)
        .build()
        .unwrap();
    let (a, b) = (0x1234_5678_0000_0000u64, 0x1234_5678_0000_0020u64);
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
        "keys {a} and {b}: outcomes {outcomes:?}; {} doublings, {} items, memory {} -> {} bytes",
        filter.doublings(),
        filter.len(),
        memory_before,
        filter.memory_usage()
    );
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert_eq!(outcomes["ItemBucketsFull"], 4_000 - 8, "{outcomes:?}");
    assert_eq!(filter.doublings(), 0, "two hot keys doubled the filter");
    assert_eq!(filter.memory_usage(), memory_before);
    assert_eq!(filter.count(&a) + filter.count(&b), 8);
}

/// One hot key on tiny growable tables, at every lane width: the filter may double while the
/// table is so small that the key's copies fill most of it, but not without bound.
#[test]
fn one_hot_key_on_tiny_growable_tables_stops_doubling() {
    for rate in [0.3, 0.01, 1e-4, 1e-6, 4e-8] {
        for capacity in [1usize, 2, 5] {
            let filter = CuckooFilter::builder()
                .capacity(capacity)
                .false_positive_rate(rate)
                .growable(true)
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
                "rate {rate} capacity {capacity}: {stored} stored, {} doublings, last error \
                 {last:?}, memory {} bytes",
                filter.doublings(),
                filter.memory_usage()
            );
            assert_eq!(last, Some(InsertError::ItemBucketsFull), "rate {rate}");
            assert_eq!(stored, 8, "rate {rate}: two buckets of four lanes");
            assert!(
                filter.doublings() <= 2,
                "rate {rate} capacity {capacity}: {} doublings",
                filter.doublings()
            );
            assert_eq!(filter.count("hot"), stored);
        }
    }
}

/// A hot key interleaved with distinct keys: the filter must not end up with more than one
/// doubling beyond what the distinct keys alone need.
#[test]
fn a_hot_key_interleaved_with_distinct_keys_costs_at_most_one_doubling() {
    let seed = common::seed("hot key interleaved");
    let keys = common::distinct_keys(seed, 300_000);
    for rate in [0.3, 0.001] {
        let build = || {
            CuckooFilter::builder()
                .capacity(1_000)
                .false_positive_rate(rate)
                .growable(true)
                .build()
                .unwrap()
        };
        let plain = build();
        plain.insert_many(&keys).unwrap();
        let hot = build();
        let mut hot_errors: HashMap<String, usize> = HashMap::new();
        let (mut twins, mut blocked) = (0, 0);
        for (i, k) in keys.iter().enumerate() {
            let looked_present = hot.contains(k);
            match hot.insert(k) {
                Ok(()) => {}
                // Documented: a key that collides completely with the hot key counts as a copy
                // of it (rare: the same bucket pair and entry); it is found.
                Err(InsertError::ItemBucketsFull) if looked_present => twins += 1,
                // Documented: a key whose two buckets hold only the hot key's copies finds no
                // room, and a growable filter below half its doubling load refuses it; a
                // removed hot copy makes room for it.
                Err(InsertError::ItemBucketsFull) => {
                    assert!(
                        hot.remove("hot"),
                        "rate {rate}: key #{i} refused, no hot copy"
                    );
                    hot.insert(k).unwrap_or_else(|e| {
                        panic!("rate {rate}: distinct key #{i} {k}: {e:?} with room made")
                    });
                    blocked += 1;
                }
                Err(e) => panic!("rate {rate}: distinct key #{i} {k}: {e:?}"),
            }
            if let Err(e) = hot.insert("hot") {
                *hot_errors.entry(format!("{e:?}")).or_default() += 1;
            }
        }
        println!(
            "rate {rate}: distinct only {} doublings / {} bytes; with hot key {} doublings / {} \
             bytes (hot copies {}, hot errors {hot_errors:?}, {twins} twins of the hot key, \
             {blocked} keys let in by removing a hot copy)",
            plain.doublings(),
            plain.memory_usage(),
            hot.doublings(),
            hot.memory_usage(),
            hot.count("hot")
        );
        assert!(hot.doublings() <= plain.doublings() + 1);
        assert!(keys.iter().all(|k| hot.contains(k)));
    }
}

/// A distinct key that collides completely (same entry, same bucket pair) with a hot key in a
/// *growable* filter gets `ItemBucketsFull`, though it was never inserted and a doubling might
/// separate the two. Every other distinct key goes in, but for a key whose two buckets hold
/// only the hot key's copies (documented: below half its doubling load the filter refuses an
/// item for which no room can be made): one removed hot copy lets such a key in.
#[test]
fn only_a_key_that_collides_completely_with_a_hot_key_is_refused() {
    // A small first table and the narrowest entries, so that a twin is found among a few
    // hundred thousand keys.
    let build = || {
        CuckooFilter::builder()
            .capacity(100)
            .false_positive_rate(0.3)
            .growable(true)
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
        // would change the table.
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
    assert_eq!(oracle.doublings(), 0);
    println!("key {twin} collides completely with the hot key {hot} before any doubling");

    // The workload: the hot key, repeated; then a stream of distinct keys that includes `twin`
    // before the table first doubles (a doubling turns an entry's next bit into a bucket bit,
    // where the twin may differ).
    let filter = build();
    let mut hot_copies = 0;
    while filter.insert(&hot).is_ok() {
        hot_copies += 1;
    }
    let mut failures = Vec::new();
    for k in (0..50u64).chain([twin]).chain(50..200) {
        if k == hot {
            continue;
        }
        if let Err(e) = filter.insert(&k) {
            failures.push((k, e));
        }
    }
    println!(
        "{hot_copies} hot copies; distinct-key failures {failures:?}; {} doublings",
        filter.doublings()
    );
    assert!(filter.doublings() > 0);
    // Documented: an item that collides completely with a hot key (same entry, same buckets)
    // counts as a copy of it, and `contains` already answers true for it.
    assert!(
        failures.contains(&(twin, InsertError::ItemBucketsFull)),
        "{failures:?}"
    );
    assert!(filter.contains(&twin));
    assert!(failures.len() <= 4, "{failures:?}");
    for &(k, e) in &failures {
        assert_eq!(e, InsertError::ItemBucketsFull, "key {k}");
        if k != twin {
            assert!(filter.remove(&hot));
            assert_eq!(
                filter.insert(&k),
                Ok(()),
                "key {k}: refused by a growable filter with room"
            );
        }
    }
}

/// With an identity hasher, distinct small integers are all one item to a fixed filter (one
/// bucket pair, one fingerprint): it stores eight of them, its two buckets full, and refuses
/// the ninth with `ItemBucketsFull`, not `Full`.
#[test]
fn distinct_keys_with_an_identity_hasher_are_one_hot_key() {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        // A hasher that returns the key itself, as `nohash`-style hashers do for integer keys:
        // the filter takes the bucket from the upper 32 bits and the fingerprint from the top
        // of the lower 32 bits without mixing, so small integers all get the same key.
        .hasher(common::Identity)
        .build()
        .unwrap();
    let first_error = (0..1_000u64).find_map(|k| filter.insert(&k).err().map(|e| (k, e)));
    assert_eq!(first_error, Some((8, InsertError::ItemBucketsFull)));
    assert_eq!(filter.len(), 8);
    assert_eq!(
        filter.count(&999u64),
        8,
        "every small integer is a copy of the others"
    );
}

/// A hot key that one thread inserts and another removes: an insert that found the pair full
/// and then, before its "stuck?" check, sees a free lane (the remover took a copy) must not
/// take that for a full table and double it. Repeated, the filter would double again and again
/// for one key.
#[test]
fn a_hot_key_inserted_and_removed_concurrently_does_not_double_the_filter() {
    // Remove a copy every `every` spins of the remover: often, and rarely.
    let doublings: Vec<(u64, u32)> = [2_000u64, 4]
        .into_iter()
        .map(|every| (every, hot_key_with_a_remover(every)))
        .collect();
    assert!(
        doublings.iter().all(|&(_, d)| d <= 1),
        "one hot key (inserted by one thread, removed by another every N spins) doubled the \
         filter: (N, doublings) = {doublings:?}"
    );
}

fn hot_key_with_a_remover(every: u64) -> u32 {
    let filter = Arc::new(
        CuckooFilter::builder()
            .capacity(1_000)
            .growable(true)
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
    while start.elapsed() < Duration::from_secs(2) && filter.doublings() < 5 {
        thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    inserter.join().unwrap();
    remover.join().unwrap();
    println!(
        "remove every {every} spins: {} inserts, {} removes in {:?}: {} doublings, {} copies, \
         errors {:?}, memory {} bytes",
        inserts.load(Ordering::Relaxed),
        removes.load(Ordering::Relaxed),
        start.elapsed(),
        filter.doublings(),
        filter.count("hot"),
        errors.get(),
        filter.memory_usage()
    );
    assert!(errors.get().is_empty(), "{:?}", errors.get());
    filter.doublings()
}

/// The same through `insert_many`: a batch of one key repeated.
#[test]
fn insert_many_of_a_hot_key_stops_with_item_buckets_full_and_no_doubling() {
    let filter = CuckooFilter::builder()
        .capacity(10_000)
        .growable(true)
        .build()
        .unwrap();
    let batch = vec![42u64; 10_000];
    let e = filter.insert_many(&batch).unwrap_err();
    println!("{e:?}, {} doublings", filter.doublings());
    assert_eq!(e.error, InsertError::ItemBucketsFull);
    assert_eq!(filter.doublings(), 0);
    assert_eq!(e.index, 8);
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
