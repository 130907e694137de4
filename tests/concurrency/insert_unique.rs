//! `insert_unique` under contention on a doubled filter: `Ok(false)` must mean "(maybe) present",
//! never "a lookup gave up".
//!
//! A lookup that keeps colliding with writers answers "maybe present" after a bounded number of
//! attempts. That is fine for `contains`, but `insert_unique` must not turn it into `Ok(false)`
//! for an item that is nowhere: the caller is told the item is in the set while it is not, and
//! two racing callers of the same item can then both be refused.
//!
//! The churn below makes such collisions likely: more threads than cores (so writers are
//! descheduled while holding a stripe), the widest lanes a growable filter takes (31-bit
//! entries, so a real collision between two of the items is a ~1e-4 event per run, and `count`
//! tells a real copy from a refusal), and removes of the items stored before the table's
//! doublings, next to the `insert_unique` lookups. Two more threads only sleep and wake up,
//! which preempts the workers at random points, often while one holds a stripe.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use atomic_cuckoo::CuckooFilter;

use crate::common;

/// Churning threads per round (the CI machine has 2 cores: oversubscribed on purpose).
const CHURNERS: usize = 6;
/// Items inserted before the churn: enough for a filter built for 1,000 to double four times.
const PREFILL: u64 = 16_000;
/// Rounds, each on a fresh filter.
const ROUNDS: u64 = 100;

/// Threads that only sleep for a few microseconds in a loop. Each wake-up may preempt a running
/// thread at a random point, often one that holds a stripe: on 2 cores that made refusals 20 to
/// 40 times more frequent than plain time-slice preemption.
const PREEMPTERS: usize = 2;

/// Runs `f` (which spawns the workers in `s`) while `PREEMPTERS` sleeping threads keep waking up.
fn with_preemption<'scope, 'env, R>(
    s: &'scope thread::Scope<'scope, 'env>,
    f: impl FnOnce() -> R,
) -> R {
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let preempters: Vec<_> = (0..PREEMPTERS)
        .map(|_| {
            let stop = std::sync::Arc::clone(&stop);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_micros(5));
                }
            })
        })
        .collect();
    let result = f();
    stop.store(true, Ordering::Relaxed);
    for p in preempters {
        p.join().unwrap();
    }
    result
}

/// Distinct keys: `key(seed, i)` is a bijection of `i` for a fixed seed.
fn key(seed: u64, i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1) ^ seed
}

/// Index ranges of the keys: the prefill, then each thread's fresh items far apart.
fn fresh_index(thread: usize, n: u64) -> u64 {
    PREFILL + ((thread as u64 + 1) << 40) + n
}

/// A doubled growable filter with the widest lanes, holding the prefill keys; they were
/// inserted in index order, so low indices have seen the most doublings.
fn grown_filter(seed: u64) -> CuckooFilter {
    let filter = CuckooFilter::builder()
        .capacity(1_000)
        .false_positive_rate(4e-8)
        .growable(true)
        .build()
        .unwrap();
    assert_eq!(filter.fingerprint_bits(), 31, "the widest lanes");
    for i in 0..PREFILL {
        filter.insert(&key(seed, i)).unwrap();
    }
    assert!(filter.doublings() >= 4, "{} doublings", filter.doublings());
    filter
}

#[derive(Default, Debug)]
struct Tally {
    calls: usize,
    refused: usize,
    /// `Ok(false)` for a fresh item that `count` then finds nowhere.
    refused_absent: usize,
    failed_removes: usize,
}

/// One churning thread: removes its share of the prefill in index order (so every thread works
/// on the oldest entries at the same time) and `insert_unique`s one fresh item per remove; the
/// fresh items it added join the back of its queue.
fn churn(filter: &CuckooFilter, seed: u64, thread: usize, threads: usize) -> Tally {
    let mut queue: std::collections::VecDeque<u64> = (0..PREFILL)
        .filter(|i| *i as usize % threads == thread)
        .map(|i| key(seed, i))
        .collect();
    let steps = queue.len() as u64;
    let mut tally = Tally::default();
    for n in 0..steps {
        let fresh = key(seed, fresh_index(thread, n));
        tally.calls += 1;
        match filter.insert_unique(&fresh).unwrap() {
            true => queue.push_back(fresh),
            false => {
                tally.refused += 1;
                if filter.count(&fresh) == 0 {
                    tally.refused_absent += 1;
                }
            }
        }
        let old = queue.pop_front().unwrap();
        if !filter.remove(&old) {
            tally.failed_removes += 1;
        }
    }
    tally
}

#[test]
fn insert_unique_of_a_fresh_item_returns_false_only_if_the_item_is_found_under_contention() {
    let seed = common::seed_or("insert_unique contention", 0x01c0_17e5);
    let mut total = Tally::default();
    for round in 0..ROUNDS {
        let seed = seed ^ round.wrapping_mul(0x100_0000_01b3);
        let filter = grown_filter(seed);
        let barrier = Barrier::new(CHURNERS);
        let tallies: Vec<Tally> = thread::scope(|s| {
            with_preemption(s, || {
                let handles: Vec<_> = (0..CHURNERS)
                    .map(|t| {
                        let (filter, barrier) = (&filter, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            churn(filter, seed, t, CHURNERS)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            })
        });
        for t in tallies {
            total.calls += t.calls;
            total.refused += t.refused;
            total.refused_absent += t.refused_absent;
            total.failed_removes += t.failed_removes;
        }
    }
    println!(
        "{ROUNDS} rounds, {CHURNERS} threads: {} insert_unique calls of fresh items, {} returned \
         Ok(false), {} of them for an item found nowhere afterwards; {} removes of inserted \
         items failed",
        total.calls, total.refused, total.refused_absent, total.failed_removes
    );
    assert_eq!(
        total.refused_absent, 0,
        "insert_unique returned Ok(false) for {} of {} fresh items that were in no level \
         (a lookup that gave up was taken as \"present\")",
        total.refused_absent, total.calls
    );
    assert_eq!(total.failed_removes, 0, "removes of inserted items failed");
}

/// Threads in pairs call `insert_unique` on the same fresh items (each pair its own items, the
/// two callers kept within a few items of each other), each also removing its share of the
/// prefill as it goes: every item must be added by exactly one caller of its pair (never by both,
/// never by neither) and be stored once.
#[test]
fn two_racing_insert_unique_calls_of_the_same_item_add_it_exactly_once_under_contention() {
    let seed = common::seed_or("racing insert_unique contention", 0x2ace_5eed);
    const PAIRS: usize = 3;
    const RACE_ROUNDS: u64 = 100;
    let threads = 2 * PAIRS;
    let per_thread = PREFILL / threads as u64;
    let (mut raced, mut neither, mut both, mut wrong_count) = (0usize, 0usize, 0usize, 0usize);
    let mut failed_removes = 0usize;
    let mut first_bad: Option<String> = None;
    for round in 0..RACE_ROUNDS {
        let seed = seed ^ round.wrapping_mul(0x100_0000_01b3);
        let filter = grown_filter(seed);
        // Pair p races over the fresh items of "thread" p.
        let pair_keys: Vec<Vec<u64>> = (0..PAIRS)
            .map(|p| {
                (0..per_thread)
                    .map(|n| key(seed, fresh_index(p, n)))
                    .collect()
            })
            .collect();
        let progress: Vec<AtomicUsize> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
        let barrier = Barrier::new(threads);
        // Per thread: which of its pair's items it added, and how many removes failed.
        let results: Vec<(Vec<bool>, usize)> = thread::scope(|s| {
            with_preemption(s, || {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let (filter, barrier, keys, progress) =
                            (&filter, &barrier, &pair_keys[t / 2], &progress);
                        s.spawn(move || {
                            // Its share of the prefill, oldest entries first.
                            let prefill = (0..PREFILL).filter(|i| *i as usize % threads == t);
                            let partner = &progress[t ^ 1];
                            let mut added = Vec::with_capacity(keys.len());
                            let mut failed_removes = 0;
                            barrier.wait();
                            for ((i, k), old) in keys.iter().enumerate().zip(prefill) {
                                // Stay within 4 items of the partner (yield while ahead).
                                while i > partner.load(Ordering::Acquire) + 4 {
                                    thread::yield_now();
                                }
                                added.push(filter.insert_unique(k).unwrap());
                                progress[t].store(i + 1, Ordering::Release);
                                if !filter.remove(&key(seed, old)) {
                                    failed_removes += 1;
                                }
                            }
                            (added, failed_removes)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            })
        });
        for (p, keys) in pair_keys.iter().enumerate() {
            let (a, b) = (&results[2 * p].0, &results[2 * p + 1].0);
            for (i, k) in keys.iter().enumerate() {
                raced += 1;
                let winners = usize::from(a[i]) + usize::from(b[i]);
                let count = filter.count(k);
                match winners {
                    0 => neither += 1,
                    1 => {}
                    _ => both += 1,
                }
                if count != 1 {
                    wrong_count += 1;
                }
                if (winners != 1 || count != 1) && first_bad.is_none() {
                    first_bad = Some(format!(
                        "round {round}, pair {p}, item {i} ({k}): {winners} callers got \
                         Ok(true), count {count}"
                    ));
                }
            }
        }
        failed_removes += results.iter().map(|r| r.1).sum::<usize>();
    }
    println!(
        "{RACE_ROUNDS} rounds, {PAIRS} pairs of threads: {raced} items raced, added by neither \
         {neither}, by both {both}, stored count != 1 for {wrong_count}; {failed_removes} \
         removes of inserted items failed"
    );
    assert!(
        neither == 0 && both == 0 && wrong_count == 0,
        "of {raced} raced items, {neither} were added by neither caller, {both} by both, \
         {wrong_count} stored a number of times other than once; first: {}",
        first_bad.unwrap_or_default()
    );
    assert_eq!(failed_removes, 0, "removes of inserted items failed");
}

// ------------------------------------------------------------- CuckooSet on tiny tables

/// Four threads race `CuckooSet::insert` of the same items on tiny tables (capacity 8 to 64,
/// every layout fixed, and growable, filled to capacity and past it when growable): each item
/// gets at most one `Ok(true)`, exactly one unless some thread was refused (`Full` under
/// contention), and `len` is the number of winners, each stored once.
#[test]
fn racing_set_inserts_on_tiny_tables_have_one_winner_per_item_and_len_counts_winners() {
    use atomic_cuckoo::{CuckooSet, Layout};
    let seed = common::seed("racing set inserts on tiny tables");
    const THREADS: usize = 4;
    let mut refused = 0usize;
    for (round, capacity) in [8usize, 13, 16, 32, 64]
        .into_iter()
        .cycle()
        .take(40)
        .enumerate()
    {
        let growable = round % 2 == 1;
        let builder = CuckooFilter::builder().capacity(capacity);
        let set: CuckooSet<u64> = if growable {
            // The widest lanes: 31-bit entries.
            builder.false_positive_rate(4e-8).growable(true)
        } else {
            let layout = [Layout::Packed, Layout::Compact, Layout::OneWord][round / 2 % 3];
            builder.fingerprint_bits(32).layout(layout)
        }
        .build_set()
        .unwrap();
        let n = if growable { 4 * capacity } else { capacity };
        let keys = common::distinct_keys(seed ^ round as u64, n);
        let results = race_set_inserts(&set, &keys, THREADS);
        let mut winners = 0;
        for (i, k) in keys.iter().enumerate() {
            let won = results.iter().filter(|r| r[i] == Some(true)).count();
            let errs = results.iter().filter(|r| r[i].is_none()).count();
            refused += errs;
            assert!(won <= 1, "round {round}: item {k} added by {won} threads");
            if errs == 0 {
                assert_eq!(
                    won, 1,
                    "round {round}: item {k} refused as present, never added"
                );
            }
            if won == 1 {
                assert!(set.contains(k));
                assert_eq!(set.as_filter().count(k), 1, "round {round}: item {k}");
            }
            winners += won;
        }
        assert_eq!(
            set.len(),
            winners,
            "round {round}: len counts each winner once"
        );
        // Every winner removes safely, and the set ends empty.
        for (i, k) in keys.iter().enumerate() {
            if results.iter().any(|r| r[i] == Some(true)) {
                assert!(set.remove(k));
            }
        }
        assert!(set.is_empty(), "round {round}");
    }
    println!("{refused} inserts refused as Full under contention");
}

/// `insert_many_unique` of the same items from two threads while two others insert and remove
/// other items in the same tiny growable table: the two calls' counts add up to the number of
/// items, each item is stored once, and every churned item removes.
#[test]
fn racing_insert_many_unique_and_removes_add_each_item_once() {
    let seed = common::seed("insert_many_unique racing removes");
    for round in 0..100u64 {
        let filter = CuckooFilter::builder()
            .capacity(16)
            .false_positive_rate(4e-8)
            .growable(true)
            .build()
            .unwrap();
        let keys = common::keys_with_distinct_fingerprints(&[seed ^ round, !(seed ^ round)], 300);
        let (stable, churned) = (&keys[0], &keys[1]);
        let barrier = Barrier::new(4);
        let added: Vec<usize> = thread::scope(|s| {
            let filter = &filter;
            let barrier = &barrier;
            for t in 0..2 {
                s.spawn(move || {
                    barrier.wait();
                    for k in churned.iter().skip(t).step_by(2) {
                        assert_eq!(filter.insert_unique(k), Ok(true));
                        assert!(filter.remove(k));
                    }
                });
            }
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(move || {
                        barrier.wait();
                        filter.insert_many_unique(stable.iter()).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(added.iter().sum::<usize>(), stable.len(), "round {round}");
        assert_eq!(filter.len(), stable.len(), "round {round}");
        assert!(stable.iter().all(|k| filter.count(k) == 1), "round {round}");
    }
}

/// As above with narrow fingerprints (4, 8 bits, fixed tables) and a growable filter's
/// narrowest lanes (14-bit entries), where distinct items of a tiny table may share an entry:
/// an item may then be refused as present by every thread, but never added twice, and `len` is
/// still the number of `Ok(true)` answers.
#[test]
fn racing_set_inserts_with_narrow_fingerprints_never_add_an_item_twice() {
    use atomic_cuckoo::{CuckooSet, Layout};
    let seed = common::seed("racing set inserts, narrow fingerprints");
    const THREADS: usize = 4;
    for round in 0..200usize {
        // 0: a growable filter, which takes three times its first capacity.
        let bits = [4, 8, 0][round % 3];
        let layout = [Layout::Packed, Layout::Compact, Layout::OneWord][round / 3 % 3];
        let builder = CuckooFilter::builder().capacity(8 << (round % 4));
        let set: CuckooSet<u64> = if bits == 0 {
            builder.false_positive_rate(0.3).growable(true)
        } else {
            builder.fingerprint_bits(bits).layout(layout)
        }
        .build_set()
        .unwrap();
        let n = if bits == 0 {
            3 * set.capacity()
        } else {
            set.capacity()
        };
        let keys = common::distinct_keys(seed ^ round as u64, n);
        let results = race_set_inserts(&set, &keys, THREADS);
        let mut winners = 0;
        for (i, k) in keys.iter().enumerate() {
            let won = results.iter().filter(|r| r[i] == Some(true)).count();
            assert!(won <= 1, "round {round}: item {k} added by {won} threads");
            if results.iter().any(|r| r[i].is_some()) {
                assert!(
                    set.contains(k),
                    "round {round}: item {k} answered but absent"
                );
            }
            winners += won;
        }
        assert_eq!(
            set.len(),
            winners,
            "round {round} ({bits} bits, {layout:?})"
        );
    }
}

/// `threads` threads insert every key into `set` at once, each walking the keys from another
/// place, so the races are between inserts of the same item and of different ones at once.
/// Returns each thread's answers, by key: `Some(added)`, or `None` for a refused insert.
fn race_set_inserts(
    set: &atomic_cuckoo::CuckooSet<u64>,
    keys: &[u64],
    threads: usize,
) -> Vec<Vec<Option<bool>>> {
    let barrier = Barrier::new(threads);
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let mut out = vec![None; keys.len()];
                    for j in 0..keys.len() {
                        let i = (j + t * keys.len() / threads) % keys.len();
                        out[i] = set.insert(&keys[i]).ok();
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
