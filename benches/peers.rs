//! The peers, behind one interface: `Solo` for a filter one thread uses, `Shared` for one that
//! threads share, and a constructor per peer for `items` items at the 1 % target rate. The
//! criterion run (`benches/filters.rs`) and the many-core run (`benches/scaling_quick.rs`) both
//! measure through them.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use atomic_cuckoo::{CuckooFilter, Layout};
use parking_lot::{Mutex, RwLock};

/// The false-positive rate every peer is built for, where the peer lets us choose.
pub const TARGET_RATE: f64 = 0.01;

/// A filter used by one thread (`&mut` where the crate needs it).
pub trait Solo {
    /// Inserts `key`; whether it went in.
    fn insert(&mut self, key: &u64) -> bool;
    /// Whether `key` may be in the filter.
    fn contains(&self, key: &u64) -> bool;
    /// Removes `key`; whether it was there.
    fn remove(&mut self, key: &u64) -> bool;
}

/// A filter shared by threads.
pub trait Shared: Sync {
    /// Inserts `key`; whether it went in.
    fn insert(&self, key: &u64) -> bool;
    /// Whether `key` may be in the filter.
    fn contains(&self, key: &u64) -> bool;
    /// Removes `key`; whether it was there.
    fn remove(&self, key: &u64) -> bool;
}

/// A filter threads can share is used alone through the same calls.
impl<T: Shared> Solo for T {
    fn insert(&mut self, key: &u64) -> bool {
        Shared::insert(self, key)
    }
    fn contains(&self, key: &u64) -> bool {
        Shared::contains(self, key)
    }
    fn remove(&mut self, key: &u64) -> bool {
        Shared::remove(self, key)
    }
}

/// Ours, for `items` items at the target rate.
pub fn ours(items: usize) -> CuckooFilter {
    ours_in(items, Layout::Packed)
}

/// Ours in the compact layout.
pub fn ours_compact(items: usize) -> CuckooFilter {
    ours_in(items, Layout::Compact)
}

/// Ours in the one-word layout (the fastest).
pub fn ours_one_word(items: usize) -> CuckooFilter {
    ours_in(items, Layout::OneWord)
}

fn ours_in(items: usize, layout: Layout) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(items)
        .false_positive_rate(TARGET_RATE)
        .layout(layout)
        .build()
        .unwrap()
}

impl Shared for CuckooFilter {
    fn insert(&self, key: &u64) -> bool {
        CuckooFilter::insert(self, key).is_ok()
    }
    fn contains(&self, key: &u64) -> bool {
        CuckooFilter::contains(self, key)
    }
    fn remove(&self, key: &u64) -> bool {
        CuckooFilter::remove(self, key)
    }
}

/// `cuckoofilter` 0.5 with its default hasher.
pub type Classic = cuckoofilter::CuckooFilter<std::collections::hash_map::DefaultHasher>;

/// `cuckoofilter` for `items` items (its rate is fixed by its 8-bit fingerprints).
pub fn classic(items: usize) -> Classic {
    cuckoofilter::CuckooFilter::with_capacity(items)
}

impl Solo for Classic {
    fn insert(&mut self, key: &u64) -> bool {
        self.add(key).is_ok()
    }
    fn contains(&self, key: &u64) -> bool {
        cuckoofilter::CuckooFilter::contains(self, key)
    }
    fn remove(&mut self, key: &u64) -> bool {
        self.delete(key)
    }
}

/// `cuckoofilter` shared for writing: every call takes the one lock.
impl Shared for Mutex<Classic> {
    fn insert(&self, key: &u64) -> bool {
        self.lock().add(key).is_ok()
    }
    fn contains(&self, key: &u64) -> bool {
        self.lock().contains(key)
    }
    fn remove(&self, key: &u64) -> bool {
        self.lock().delete(key)
    }
}

/// `cuckoofilter` shared for reading: lookups take the lock shared, writes exclusive.
impl Shared for RwLock<Classic> {
    fn insert(&self, key: &u64) -> bool {
        self.write().add(key).is_ok()
    }
    fn contains(&self, key: &u64) -> bool {
        self.read().contains(key)
    }
    fn remove(&self, key: &u64) -> bool {
        self.write().delete(key)
    }
}

/// `atomic-cuckoo-filter` 0.3.
pub type Acf = atomic_cuckoo_filter::CuckooFilter;

/// `atomic-cuckoo-filter` takes fingerprints of 4, 8, 16 or 32 bits in buckets of 4: 16 is the
/// narrowest within the 1 % target (8 bits give about 3 %).
pub fn acf(items: usize) -> Acf {
    atomic_cuckoo_filter::CuckooFilter::builder()
        .capacity(items)
        .fingerprint_size(16)
        .build()
        .unwrap()
}

impl Shared for Acf {
    fn insert(&self, key: &u64) -> bool {
        Acf::insert(self, key).is_ok()
    }
    fn contains(&self, key: &u64) -> bool {
        Acf::contains(self, key)
    }
    fn remove(&self, key: &u64) -> bool {
        Acf::remove(self, key)
    }
}

/// `scalable_cuckoo_filter` 0.5.
pub type Scalable = scalable_cuckoo_filter::ScalableCuckooFilter<u64>;

/// `scalable_cuckoo_filter` for `items` items at the target rate.
pub fn scalable(items: usize) -> Scalable {
    scalable_cuckoo_filter::ScalableCuckooFilter::new(items, TARGET_RATE)
}

impl Solo for Scalable {
    fn insert(&mut self, key: &u64) -> bool {
        Scalable::insert(self, key);
        true
    }
    fn contains(&self, key: &u64) -> bool {
        Scalable::contains(self, key)
    }
    fn remove(&mut self, key: &u64) -> bool {
        Scalable::remove(self, key)
    }
}

/// `fastbloom` 0.17's lock-free Bloom filter.
pub type Bloom = fastbloom::AtomicBloomFilter;

/// `fastbloom` for `items` items at the target rate.
pub fn bloom(items: usize) -> Bloom {
    fastbloom::AtomicBloomFilter::with_false_pos(TARGET_RATE).expected_items(items)
}

impl Shared for Bloom {
    fn insert(&self, key: &u64) -> bool {
        Bloom::insert(self, key);
        true
    }
    fn contains(&self, key: &u64) -> bool {
        Bloom::contains(self, key)
    }
    fn remove(&self, _: &u64) -> bool {
        unreachable!("a Bloom filter cannot delete")
    }
}

/// Runs `work(t)` for `t` in `0..threads` on threads released together; returns the wall time
/// from the first start to the last finish, as the workers measured it (a coordinating thread
/// may not even be scheduled while they keep every core busy, so it cannot hold the clock).
pub fn timed_threads(threads: usize, work: impl Fn(usize) + Sync) -> Duration {
    on_threads(threads, work).0
}

/// Runs `work(t)` for `t` in `0..threads` on threads released together; returns the wall time
/// as `timed_threads` measures it, and each thread's result.
pub fn on_threads<R: Send>(threads: usize, work: impl Fn(usize) -> R + Sync) -> (Duration, Vec<R>) {
    let barrier = Barrier::new(threads);
    let runs: Vec<(Instant, Instant, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let result = work(t);
                    (start, Instant::now(), result)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = runs.iter().map(|r| r.0).min().expect("at least one thread");
    let last = runs.iter().map(|r| r.1).max().expect("at least one thread");
    (last - first, runs.into_iter().map(|r| r.2).collect())
}

/// Operations between two looks at the clock in `timed_rate`.
const CHUNK: usize = 4096;

/// `threads` threads each run `op` over their own endless walk of indices until `seconds` have
/// passed (each checks its own clock every `CHUNK` operations); M operations per second over
/// the wall time from the first start to the last end.
pub fn timed_rate(threads: usize, seconds: f64, op: impl Fn(usize, usize) + Sync) -> f64 {
    let budget = Duration::from_secs_f64(seconds);
    let (spent, done) = on_threads(threads, |t| {
        let start = Instant::now();
        let mut done = 0;
        while start.elapsed() < budget {
            for i in done..done + CHUNK {
                op(t, i);
            }
            done += CHUNK;
        }
        done
    });
    done.iter().sum::<usize>() as f64 / spent.as_secs_f64() / 1e6
}
