//! The std-like API: `capacity()` counts items and is kept, `slots()`, `Clone`, `Default`,
//! `Extend`, `FromIterator`, `with_capacity_and_hasher`, `clear(&self)`, and the batch calls
//! over any `IntoIterator`, and the auto traits (`Send`, `Sync`, `UnwindSafe`, `RefUnwindSafe`)
//! with what a panic inside an operation leaves.

use std::hash::{Hash, Hasher};
use std::io;
use std::panic::{self, RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use atomic_cuckoo::redisbloom::RedisCuckooFilter;
use atomic_cuckoo::{AHashBuilder, CuckooFilter, DefaultHashBuilder, InsertError};

use crate::common;

#[test]
fn capacity_counts_items_at_least_the_ones_asked_for_and_holds_them() {
    let seed = common::seed("capacity_counts_items");
    for bits in [4, 6, 8, 12, 16, 21, 32] {
        for asked in [1, 2, 3, 10, 100, 1_000, 12_345] {
            let f = CuckooFilter::builder()
                .capacity(asked)
                .fingerprint_bits(bits)
                .build()
                .unwrap();
            let ctx = format!("seed={seed} bits={bits} asked={asked}");
            assert!(f.capacity() >= asked, "{ctx}: capacity {}", f.capacity());
            assert!(f.capacity() < f.slots(), "{ctx}");
            for key in common::distinct_keys(seed ^ asked as u64, f.capacity()) {
                f.insert(&key)
                    .unwrap_or_else(|e| panic!("{ctx}: {e} after {} items", f.len()));
            }
        }
    }
}

#[test]
fn a_growable_filter_holds_its_capacity_before_it_doubles() {
    let seed = common::seed("growable_capacity");
    let f = CuckooFilter::builder()
        .capacity(5_000)
        .growable(true)
        .build()
        .unwrap();
    assert!(f.capacity() >= 5_000);
    assert!(f.capacity() < f.slots());
    for key in common::distinct_keys(seed, f.capacity()) {
        f.insert(&key).unwrap();
    }
    assert_eq!(
        f.doublings(),
        0,
        "seed={seed}: doubled before reaching its capacity"
    );
    let (capacity, slots) = (f.capacity(), f.slots());
    for key in common::distinct_keys(seed ^ 1, capacity / 2) {
        f.insert(&key).unwrap();
    }
    assert_eq!(f.doublings(), 1, "seed={seed}");
    assert_eq!(f.slots(), 2 * slots);
    assert!(f.capacity() >= 2 * capacity - 1, "{}", f.capacity());
    // `capacity() - len()` more items fit without another doubling.
    let room = f.capacity() - f.len();
    for key in common::distinct_keys(seed ^ 2, room) {
        f.insert(&key).unwrap();
    }
    assert_eq!(
        f.doublings(),
        1,
        "seed={seed}: doubled before reaching its capacity"
    );
}

#[test]
fn with_capacity_and_hasher_uses_the_hasher() {
    let f = CuckooFilter::with_capacity_and_hasher(1_000, AHashBuilder::default());
    assert!(f.capacity() >= 1_000);
    f.insert("x").unwrap();
    assert!(f.contains("x"));
    // A snapshot records its hasher: the default-hasher reader refuses it.
    assert!(CuckooFilter::from_bytes(&f.to_bytes()).is_err());
}

#[test]
fn default_is_the_builders_default() {
    let f: CuckooFilter = CuckooFilter::default();
    let b = CuckooFilter::builder().build().unwrap();
    assert_eq!(
        (f.capacity(), f.slots(), f.fingerprint_bits()),
        (b.capacity(), b.slots(), b.fingerprint_bits())
    );
    let g: CuckooFilter<AHashBuilder> = Default::default();
    assert_eq!(g.slots(), b.slots());
}

#[test]
fn clone_is_deep_and_equal() {
    let f = CuckooFilter::builder()
        .capacity(200)
        .growable(true)
        .build()
        .unwrap();
    f.insert_many(0..1_000u32).unwrap();
    let c = f.clone();
    assert_eq!(c.to_bytes(), f.to_bytes());
    assert_eq!((c.len(), c.doublings()), (f.len(), f.doublings()));
    assert!(f.remove(&7u32));
    assert!(c.contains(&7u32) && !f.contains(&7u32));
    c.insert("only in the copy").unwrap();
    assert!(!f.contains("only in the copy"));
    // The copy grows on its own.
    c.insert_many(1_000..5_000u32).unwrap();
    assert!(c.doublings() > f.doublings());
}

#[test]
fn clone_under_writers_is_one_consistent_state() {
    let seed = common::seed("clone_under_writers");
    let f = Arc::new(CuckooFilter::builder().capacity(50_000).build().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let (f, stop) = (Arc::clone(&f), Arc::clone(&stop));
            thread::spawn(move || {
                let keys = common::distinct_keys(seed ^ t, 20_000);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let key = keys[i % keys.len()];
                    // Keep the load steady: remove what the previous round added.
                    if i >= keys.len() {
                        assert!(f.remove(&key), "seed={seed}");
                    }
                    f.insert(&key).unwrap();
                    i += 1;
                }
            })
        })
        .collect();
    for round in 0..20 {
        let copy = CuckooFilter::clone(&f); // the filter, not the Arc
        let len = copy.len();
        // A restore checks the item count against the stored fingerprints: a copy taken while a
        // writer was half-way would fail it.
        let restored = CuckooFilter::from_bytes(&copy.to_bytes())
            .unwrap_or_else(|e| panic!("seed={seed} round={round}: {e}"));
        assert_eq!(restored.len(), len, "seed={seed} round={round}");
        assert_eq!(
            copy.len(),
            len,
            "seed={seed} round={round}: the copy is not shared"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
}

#[test]
fn clear_through_an_arc_keeps_inserts_that_start_after_it() {
    let seed = common::seed("clear_through_an_arc");
    let f = Arc::new(CuckooFilter::builder().capacity(100_000).build().unwrap());
    let cleared = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(3));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let (f, cleared, start) = (Arc::clone(&f), Arc::clone(&cleared), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                let mut after = Vec::new();
                for key in common::distinct_keys(seed ^ t, 30_000) {
                    // Acquire: pairs with the Release below, so "after" means after clear returned.
                    let post = cleared.load(Ordering::Acquire);
                    f.insert(&key).unwrap();
                    if post {
                        after.push(key);
                    }
                }
                after
            })
        })
        .collect();
    start.wait();
    while f.len() < 5_000 {
        thread::yield_now();
    }
    f.clear();
    cleared.store(true, Ordering::Release);
    let after: Vec<u64> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let missing = after.iter().filter(|k| !f.contains(*k)).count();
    assert_eq!(
        missing, 0,
        "seed={seed}: inserted after the clear, then lost"
    );
    assert!(f.len() >= after.len() && f.len() < 60_000, "seed={seed}");
    // The counters agree with the stored fingerprints (a restore checks that).
    let restored = CuckooFilter::from_bytes(&f.to_bytes()).unwrap();
    assert_eq!(restored.len(), f.len());
}

/// A save's destination that clears or clones the filter being saved.
struct Meddler<F: FnMut()>(F);

impl<F: FnMut()> io::Write for Meddler<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (self.0)();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
#[should_panic(expected = "cannot be cleared or cloned by the writer of its own save")]
fn clear_inside_its_own_save_panics_instead_of_storing_half_cleared_data() {
    let f = CuckooFilter::with_capacity(100);
    f.insert("x").unwrap();
    let _ = f.write_to(&mut Meddler(|| f.clear()));
}

#[test]
#[should_panic(expected = "cannot be cleared or cloned by the writer of its own save")]
fn clone_inside_its_own_save_panics_instead_of_deadlocking() {
    let f = CuckooFilter::with_capacity(100);
    let _ = f.write_to(&mut Meddler(|| drop(f.clone())));
}

#[test]
fn extend_takes_items_and_references() {
    let mut f = CuckooFilter::with_capacity(100);
    f.extend(vec![1u32, 2, 3]);
    f.extend(&[4u32, 5]);
    f.extend(["a", "b"].iter());
    assert_eq!(f.len(), 7);
    assert!([1u32, 2, 3, 4, 5].iter().all(|i| f.contains(i)));
    assert!(f.contains("a") && f.contains(&"b"));
}

#[test]
fn collect_keeps_one_copy_of_repeated_items() {
    let ids: CuckooFilter = [7u64, 7, 7, 8].iter().collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&7u64) && ids.contains(&8u64));
    // More copies than an item's two buckets hold: stored once, no panic.
    let hot: CuckooFilter = std::iter::repeat_n(5u64, 20).collect();
    assert_eq!((hot.len(), hot.count(&5u64)), (1, 1));
    let mixed: CuckooFilter = (0..5_000u64).chain(0..5_000).chain(4_000..6_000).collect();
    assert_eq!(mixed.len(), 6_000);
    assert!((0..6_000u64).all(|i| mixed.count(&i) >= 1));
}

#[test]
fn extend_keeps_one_copy_of_repeated_items() {
    let mut f = CuckooFilter::with_capacity(100);
    f.extend(std::iter::repeat_n(5u64, 1_000));
    f.extend([7u64, 7, 8]);
    f.extend(&[8u64, 9]);
    assert_eq!(f.len(), 4);
    assert_eq!(f.count(&5u64), 1);
}

#[test]
fn insert_many_unique_counts_the_items_it_added() {
    let f = CuckooFilter::with_capacity(1_000);
    f.insert(&3u64).unwrap();
    assert_eq!(
        f.insert_many_unique((0..200u64).chain(0..100)).unwrap(),
        199
    );
    assert_eq!(f.len(), 200);
    assert!((0..200u64).all(|i| f.count(&i) == 1));
}

#[test]
fn insert_many_unique_reports_a_full_filter_with_the_items_before_it_kept() {
    let f = CuckooFilter::builder()
        .capacity(100)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    let err = f.insert_many_unique(0..100_000u64).unwrap_err();
    assert_eq!(err.error, InsertError::Full);
    assert_eq!(err.index, f.len(), "every item before it is in the filter");
    assert!((0..err.index as u64).all(|i| f.contains(&i)));
}

#[test]
#[should_panic(expected = "CuckooFilter::extend")]
fn extend_panics_when_the_filter_is_full() {
    let mut f = CuckooFilter::with_capacity(10);
    f.extend(0..10_000u32);
}

#[test]
fn from_iterator_sizes_for_the_items() {
    let f: CuckooFilter = (0..10_000u64).collect();
    assert_eq!(f.len(), 10_000);
    assert!(f.capacity() >= 10_000 && f.capacity() < 12_000);
    assert!((0..10_000u64).all(|i| f.contains(&i)));
    let g: CuckooFilter<AHashBuilder> = ["x", "y", "x"].into_iter().collect();
    assert_eq!((g.len(), g.count("x")), (2, 1), "set semantics");
    let empty: CuckooFilter<DefaultHashBuilder> = std::iter::empty::<u8>().collect();
    assert!(empty.is_empty() && empty.capacity() >= 1);
}

#[test]
fn batch_calls_take_any_into_iterator() {
    let f = CuckooFilter::with_capacity(10_000);
    f.insert_many((0..1_000u32).map(|i| i * 2)).unwrap();
    f.insert_many(vec!["a".to_string(), "b".to_string()])
        .unwrap();
    f.insert_many(&["c", "d"]).unwrap();
    let mut found = Vec::new();
    f.contains_many((0..2_000u32).filter(|i| i % 2 == 0), &mut found);
    assert_eq!(found.len(), 1_000);
    assert!(found.iter().all(|&b| b));
    f.contains_many(["a", "c", "zz"].iter(), &mut found);
    assert_eq!(&found[..2], &[true, true]);
}

#[test]
fn insert_many_reports_the_index_of_the_first_failure_across_batches() {
    let f = CuckooFilter::builder()
        .capacity(100)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    let err = f.insert_many(0..100_000u64).unwrap_err();
    assert!(err.index > 64, "the failure comes after the first batch");
    assert_eq!(err.index, f.len(), "every item before it is in the filter");
    assert_eq!(err.error, InsertError::Full);
    assert!((0..err.index as u64).all(|i| f.contains(&i)));
}

/// Compiles only if `T` has every trait a filter shared across threads and across
/// `catch_unwind` needs.
fn assert_shareable_across_unwinding<T: Send + Sync + UnwindSafe + RefUnwindSafe>() {}

#[test]
fn filters_are_send_sync_and_unwind_safe() {
    assert_shareable_across_unwinding::<CuckooFilter>();
    assert_shareable_across_unwinding::<CuckooFilter<AHashBuilder>>();
    assert_shareable_across_unwinding::<Arc<CuckooFilter>>();
    assert_shareable_across_unwinding::<&CuckooFilter>();
    assert_shareable_across_unwinding::<RedisCuckooFilter>();
    assert_shareable_across_unwinding::<Arc<RedisCuckooFilter>>();
}

/// An item whose `Hash` panics: the panic leaves the filter as it was.
struct PanicsWhenHashed;

impl Hash for PanicsWhenHashed {
    fn hash<H: Hasher>(&self, _: &mut H) {
        panic!("this item cannot be hashed");
    }
}

/// A destination that panics on its first write.
struct PanicsOnWrite;

impl io::Write for PanicsOnWrite {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        panic!("the destination failed");
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_panic_inside_an_operation_leaves_the_filter_usable() {
    let f = Arc::new(
        CuckooFilter::builder()
            .capacity(1_000)
            .growable(true)
            .build()
            .unwrap(),
    );
    f.insert_many(0..500u64).unwrap();
    let before = f.to_bytes();

    assert!(panic::catch_unwind(|| f.insert(&PanicsWhenHashed)).is_err());
    assert!(panic::catch_unwind(|| f.insert_many([PanicsWhenHashed])).is_err());
    assert!(panic::catch_unwind(|| f.write_to(&mut PanicsOnWrite)).is_err());
    assert_eq!(f.to_bytes(), before, "a panic changed the filter");

    // The save's freeze and its mark on this thread were released: writers, saves, clones
    // and clears all go on, here and on other threads.
    let writer = {
        let f = Arc::clone(&f);
        thread::spawn(move || f.insert_many(500..5_000u64).unwrap())
    };
    writer.join().unwrap();
    assert!((0..5_000u64).all(|i| f.contains(&i)));
    assert_eq!(f.clone().len(), f.len());
    f.clear();
    assert!(f.is_empty());
}

#[test]
fn a_panic_inside_a_redis_filter_operation_leaves_it_usable() {
    /// Bytes whose `as_ref` panics.
    struct PanicsAsBytes;

    impl AsRef<[u8]> for PanicsAsBytes {
        fn as_ref(&self) -> &[u8] {
            panic!("these bytes cannot be read");
        }
    }

    let f = RedisCuckooFilter::reserve(1_000).unwrap();
    f.insert("kept").unwrap();
    let before = f.scandump();
    assert!(panic::catch_unwind(|| f.insert(PanicsAsBytes)).is_err());
    assert!(panic::catch_unwind(|| f.insert_many([PanicsAsBytes])).is_err());
    assert_eq!(f.scandump(), before, "a panic changed the filter");
    f.insert("more").unwrap();
    assert!(f.contains("kept") && f.contains("more"));
}

/// Distinct items whose hashes differ only in bits that choose neither bucket nor fingerprint
/// (the identity hasher: small integers have a zero high word, so one primary bucket, and a
/// zero top of the low word, so fingerprint 1) are more than their two buckets hold. They are
/// not repeats by hash, so `from_iter` stores them as separate copies until the buckets are
/// full; the rest must then be found already (set semantics), not panic: `collect` into a
/// `CuckooFilter` and a `CuckooSet` holds them all, as `extend` and `insert_many_unique` do.
/// (A growable filter derives its entries from a mix of the whole hash, so distinct small
/// integers are not one item to it.)
#[test]
fn collect_of_distinct_items_sharing_one_entry_finds_them_without_panicking() {
    use atomic_cuckoo::CuckooSet;
    use common::Identity;

    for n in [1u64, 8, 9, 17, 100, 1_000] {
        let collected: CuckooFilter<Identity> = (0..n).collect();
        assert!((0..n).all(|i| collected.contains(&i)), "{n} items");
        assert!((1..=n as usize).contains(&collected.len()), "{n} items");

        let set: CuckooSet<u64, Identity> = (0..n).collect();
        assert!((0..n).all(|i| set.contains(&i)), "{n} items");
        assert_eq!(set.insert(&0), Ok(false));

        let mut extended = CuckooFilter::with_capacity_and_hasher(n as usize, Identity);
        extended.extend(0..n);
        assert!((0..n).all(|i| extended.contains(&i)), "{n} items");
        let unique = CuckooFilter::with_capacity_and_hasher(n as usize, Identity);
        assert!(unique.insert_many_unique(0..n).unwrap() >= 1);
        assert!((0..n).all(|i| unique.contains(&i)), "{n} items");
    }
}

/// Many groups of distinct items, each group sharing one entry, mixed with ordinary items and
/// repeats: every item is found and the ordinary ones are stored once each.
#[test]
fn collect_of_many_shared_entry_groups_and_repeats_keeps_every_item() {
    use common::Identity;
    // Group g: hashes g << 32 | j for j < 40 (one primary bucket, fingerprint 1, forty items);
    // then ordinary items spread by a multiplier, each given three times.
    let groups = (0..50u64).flat_map(|g| (0..40u64).map(move |j| (g << 32) | j));
    let spread: Vec<u64> = (1..=2_000u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    let items: Vec<u64> = groups
        .chain(spread.iter().copied())
        .chain(spread.iter().copied())
        .chain(spread.iter().copied())
        .collect();
    let f: CuckooFilter<Identity> = items.iter().collect();
    assert!(items.iter().all(|i| f.contains(i)));
    assert!(spread.iter().take(500).all(|i| f.count(i) >= 1));
    assert!(f.len() <= 50 * 40 + 2_000);
}

/// `collect` sizes the filter for the distinct items: any number of distinct items (every
/// count up to 300, and some larger, random keys) is collected without a panic, each stored
/// once, also when every item is given several times, and into a `CuckooSet`.
#[test]
fn collect_of_exactly_capacity_many_distinct_items_never_panics() {
    use atomic_cuckoo::CuckooSet;
    let seed = common::seed("collect of distinct items");
    for n in (0..=300usize).chain([1_000, 4_097, 20_000]) {
        let keys = common::distinct_keys(seed ^ n as u64, n);
        let f: CuckooFilter = keys.iter().collect();
        assert_eq!(f.len(), n, "{n} keys");
        assert!(f.capacity() >= n);
        assert!(keys.iter().all(|k| f.contains(k)), "{n} keys");
        if n <= 300 {
            let thrice: CuckooFilter = keys.iter().chain(&keys).chain(keys.iter().rev()).collect();
            assert_eq!(thrice.len(), n, "{n} keys, each three times");
            assert_eq!(
                thrice.capacity(),
                f.capacity(),
                "sized for the distinct ones"
            );
            let set: CuckooSet<u64> = keys.iter().chain(&keys).collect();
            assert_eq!(set.len(), n);
        }
    }
}

/// `extend` on a full or nearly full filter: items already there never fill it (they are
/// found), so extending a full filter with its own items does not panic; a new item that does
/// not fit does, and everything before it stays.
#[test]
fn extend_with_present_items_never_panics_on_a_full_filter() {
    let seed = common::seed("extend on a full filter");
    for bits in [8, 12, 16, 32] {
        let mut f = CuckooFilter::builder()
            .capacity(100)
            .fingerprint_bits(bits)
            .build()
            .unwrap();
        let keys = common::distinct_keys(seed ^ u64::from(bits), 10_000);
        let err = f.insert_many_unique(keys.iter()).unwrap_err();
        let stored = &keys[..err.index];
        assert!(stored.len() >= 100, "{bits} bits: full before capacity");
        let len = f.len();
        f.extend(stored.iter().chain(stored.iter().rev()));
        f.extend(stored.iter().copied());
        assert_eq!(f.len(), len, "{bits} bits: present items stored again");
        assert_eq!(f.insert_many_unique(stored.iter()), Ok(0));
        let extend_new = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.extend(stored.iter().chain(&keys[err.index..]))
        }));
        assert!(extend_new.is_err(), "{bits} bits: a new item did not fit");
        assert!(stored.iter().all(|k| f.contains(k)), "{bits} bits");
    }
}
