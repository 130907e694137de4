//! A growable `CuckooFilter` shared by threads (`&self` writes through an `Arc` or a scope),
//! on tiny tables that double, split and kick all the time.
//!
//! The oracle is a "published" state per item: a writer marks an item inserted only after its
//! `insert` returned `Ok` (Release), and marks it "removing" before it calls `remove`; a reader
//! that saw the mark (Acquire) before its lookup, and still sees it after a miss, has found a
//! false negative. Randomized tests print their seed (replay with `ATOMIC_CUCKOO_SEED=...`).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use atomic_cuckoo::{CuckooFilter, InsertError};

use crate::common::growable as tiny;
use crate::common::{distinct_keys, seed, HeldWriter, Rng};

/// Runs this file's tests one at a time: each starts more threads than there are cores, and
/// the races some of them reproduce need those threads to get the cores (not another test's).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    // A failed test poisons the lock; the next one runs all the same.
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sets a flag when dropped (when a thread ends, also by a panic).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Counts a registered thread out when dropped, then waits until `others` more threads and
/// the staller have counted out (see `remove_what_another_thread_inserts`).
struct Outlive<'a> {
    exited: &'a AtomicUsize,
    others: usize,
}

impl Drop for Outlive<'_> {
    fn drop(&mut self) {
        self.exited.fetch_add(1, Ordering::Release);
        while self.exited.load(Ordering::Acquire) <= self.others {
            std::thread::yield_now();
        }
    }
}

/// Runs `round` with 0, 1, 2, ... until `millis` have passed (at least once); returns the
/// rounds run.
fn rounds_for(millis: u64, mut round: impl FnMut(u64)) -> u64 {
    let start = Instant::now();
    let mut n = 0;
    while n == 0 || start.elapsed() < Duration::from_millis(millis) {
        round(n);
        n += 1;
    }
    n
}

/// Inserts a fresh item: `true` if stored, `false` if refused with `ItemBucketsFull` (which
/// the docs allow for any item: a tiny table below half its doubling load whose kick walk
/// found no room refuses rather than grows). Any other error panics.
fn insert_fresh(filter: &CuckooFilter, item: u64) -> bool {
    match filter.insert(&item) {
        Ok(()) => true,
        Err(InsertError::ItemBucketsFull) => false,
        Err(e) => panic!("insert of {item}: {e}"),
    }
}

/// Item states in the published-set oracle.
const ABSENT: u8 = 0;
const INSERTED: u8 = 1;
const REMOVING: u8 = 2;
const REMOVED: u8 = 3;

/// Checks what a filter's counters say against its lanes, after every writer joined: a
/// snapshot must restore (the restore recounts every lane and checks the counts), and the
/// restored filter and a clone must report the same length, load and rate, and find `present`.
fn assert_counts_match_lanes(at: &str, filter: &CuckooFilter, present: &[u64]) {
    let restored = CuckooFilter::from_bytes(&filter.to_bytes())
        .unwrap_or_else(|e| panic!("{at}: a snapshot taken after the threads joined: {e}"));
    let clone = filter.clone();
    for (what, copy) in [("restored", &restored), ("clone", &clone)] {
        assert_eq!(copy.len(), filter.len(), "{at}: len of the {what} copy");
        assert_eq!(copy.doublings(), filter.doublings(), "{at}: {what}");
        assert_eq!(
            copy.load_factor(),
            filter.load_factor(),
            "{at}: load_factor of the {what} copy"
        );
        assert_eq!(
            copy.false_positive_rate(),
            filter.false_positive_rate(),
            "{at}: false_positive_rate of the {what} copy (its counters come from the lanes)"
        );
        let missing = present.iter().filter(|k| !copy.contains(*k)).count();
        assert_eq!(missing, 0, "{at}: items missing from the {what} copy");
    }
    let missing = present.iter().filter(|k| !filter.contains(*k)).count();
    assert_eq!(missing, 0, "{at}: items missing after the threads joined");
}

/// One churn run: what its threads saw.
struct Churn<'a> {
    filter: &'a CuckooFilter,
    keys: Vec<u64>,
    state: Vec<AtomicU8>,
    /// Items inserted before the threads start, never removed.
    stable: Vec<u64>,
    failures: Mutex<Vec<String>>,
    inserts: AtomicUsize,
    removes: AtomicUsize,
    refused: AtomicUsize,
    /// Inserts of the hot key that returned `Ok`, and that were refused.
    hot: AtomicUsize,
    hot_refused: AtomicUsize,
    checks: AtomicUsize,
    /// Writers still running.
    writing: AtomicUsize,
    /// Per writer, its latest published item plus one (0: none yet).
    latest: Vec<AtomicUsize>,
    /// Inserts that `insert_unique` answered `Ok(false)` (a lane matched already).
    matched: AtomicUsize,
}

/// What the writers of a churn run do besides inserting their own keys.
#[derive(Clone, Copy)]
struct Mix {
    /// Percent of steps that remove one of the writer's own live items.
    remove: u64,
    /// Percent of steps that call `finish_doubling`.
    finish: u64,
    /// Percent of steps that insert the hot key (shared by every writer) again.
    hot: u64,
    /// Whether writers add their keys with `insert_unique` (`Ok(false)`: not published).
    unique: bool,
}

const HOT_KEY: u64 = 0xdead_beef_cafe_f00d;

impl<'a> Churn<'a> {
    fn new(filter: &'a CuckooFilter, seed: u64, items: usize, stable: usize) -> Self {
        let mut keys = distinct_keys(seed, items + stable);
        keys.retain(|&k| k != HOT_KEY);
        let mut stable = keys.split_off(items.min(keys.len()));
        stable.retain(|&k| insert_fresh(filter, k));
        Self::with_stable(filter, keys, stable)
    }

    /// A run over `keys` on a filter that holds exactly `stable` already.
    fn with_stable(filter: &'a CuckooFilter, keys: Vec<u64>, stable: Vec<u64>) -> Self {
        let state = keys.iter().map(|_| AtomicU8::new(ABSENT)).collect();
        Churn {
            filter,
            keys,
            state,
            stable,
            failures: Mutex::new(Vec::new()),
            inserts: AtomicUsize::new(0),
            removes: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            hot: AtomicUsize::new(0),
            hot_refused: AtomicUsize::new(0),
            checks: AtomicUsize::new(0),
            writing: AtomicUsize::new(0),
            latest: (0..16).map(|_| AtomicUsize::new(0)).collect(),
            matched: AtomicUsize::new(0),
        }
    }

    fn fail(&self, what: String) {
        let mut failures = self.failures.lock().unwrap();
        if failures.len() < 20 {
            failures.push(what);
        }
    }

    /// Writer `t` of `writers`: inserts its keys (every `writers`-th) in order.
    fn writer(&self, seed: u64, t: usize, writers: usize, mix: Mix) {
        let mut rng = Rng::new(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut live: Vec<usize> = Vec::new();
        for i in (t..self.keys.len()).step_by(writers) {
            let inserted = if mix.unique {
                self.filter.insert_unique(&self.keys[i])
            } else {
                self.filter.insert(&self.keys[i]).map(|()| true)
            };
            match inserted {
                Ok(true) => {
                    self.state[i].store(INSERTED, Ordering::Release);
                    self.latest[t].store(i + 1, Ordering::Release);
                    self.inserts.fetch_add(1, Ordering::Relaxed);
                    live.push(i);
                }
                Ok(false) => {
                    self.matched.fetch_add(1, Ordering::Relaxed);
                }
                Err(InsertError::ItemBucketsFull) => {
                    // Distinct keys whose entries equal others' (narrow lanes) look like copies.
                    self.refused.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => self.fail(format!("insert of item {i}: {e}")),
            }
            if rng.below(100) < mix.hot {
                match self.filter.insert(&HOT_KEY) {
                    Ok(()) => {
                        self.hot.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(InsertError::ItemBucketsFull) => {
                        self.hot_refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => self.fail(format!("insert of the hot key: {e}")),
                }
            }
            if !live.is_empty() && rng.below(100) < mix.remove {
                let j = live.swap_remove(rng.below(live.len() as u64) as usize);
                self.state[j].store(REMOVING, Ordering::SeqCst);
                if self.filter.remove(&self.keys[j]) {
                    self.removes.fetch_add(1, Ordering::Relaxed);
                    self.state[j].store(REMOVED, Ordering::Release);
                } else {
                    self.fail(format!("remove of inserted item {j} found nothing"));
                }
            }
            if rng.below(100) < mix.finish {
                self.filter.finish_doubling();
            }
            // The writer's own latest items, and a random older one.
            for &j in live.iter().rev().take(2) {
                if !self.filter.contains(&self.keys[j]) {
                    self.fail(format!("writer {t} lost its own item {j}"));
                }
            }
            if !live.is_empty() {
                let j = live[rng.below(live.len() as u64) as usize];
                if !self.filter.contains(&self.keys[j]) {
                    self.fail(format!("writer {t} lost its own item {j}"));
                }
            }
        }
        self.writing.fetch_sub(1, Ordering::Release);
    }

    /// A reader: looks up published items (and stable ones) until the writers are done.
    fn reader(&self, seed: u64, r: usize) {
        let mut rng = Rng::new(seed ^ (r as u64 + 101).wrapping_mul(0xD1B5_4A32_D192_ED03));
        let n = self.keys.len() as u64;
        let mut checks = 0;
        while self.writing.load(Ordering::Acquire) > 0 {
            // Each writer's latest item (the likeliest to be in a kick walk or a split), then
            // random ones.
            let latest = self
                .latest
                .iter()
                .filter_map(|l| l.load(Ordering::Acquire).checked_sub(1));
            let random: Vec<usize> = (0..32).map(|_| rng.below(n) as usize).collect();
            for i in latest.chain(random) {
                if self.state[i].load(Ordering::Acquire) != INSERTED {
                    continue;
                }
                checks += 1;
                if !self.filter.contains(&self.keys[i])
                    && self.state[i].load(Ordering::SeqCst) == INSERTED
                {
                    self.fail(format!(
                        "reader {r}: published item {i} not found (doublings {}, doubling {})",
                        self.filter.doublings(),
                        self.filter.is_doubling()
                    ));
                }
            }
            if !self.stable.is_empty() {
                let k = &self.stable[rng.below(self.stable.len() as u64) as usize];
                checks += 1;
                if !self.filter.contains(k) {
                    self.fail(format!("reader {r}: stable item {k} not found"));
                }
            }
        }
        self.checks.fetch_add(checks, Ordering::Relaxed);
    }

    /// Runs `writers` writers and `readers` readers to the end, then checks the filter.
    fn run(&self, at: &str, seed: u64, writers: usize, readers: usize, mix: Mix) {
        self.writing.store(writers, Ordering::Relaxed);
        let barrier = Barrier::new(writers + readers);
        std::thread::scope(|s| {
            for t in 0..writers {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    self.writer(seed, t, writers, mix);
                });
            }
            for r in 0..readers {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    self.reader(seed, r);
                });
            }
        });
        let failures = self.failures.lock().unwrap();
        assert!(
            failures.is_empty(),
            "{at} (seed {seed}): {} failures, first: {:#?}",
            failures.len(),
            &failures[..]
        );
        let present = self.present();
        let (inserts, removes) = (
            self.inserts.load(Ordering::Relaxed),
            self.removes.load(Ordering::Relaxed),
        );
        println!(
            "{at}: {inserts} inserts, {removes} removes, {} refused, {} matched already, \
             {} reader checks, {} doublings, len {}",
            self.refused.load(Ordering::Relaxed),
            self.matched.load(Ordering::Relaxed),
            self.checks.load(Ordering::Relaxed),
            self.filter.doublings(),
            self.filter.len(),
        );
        assert_eq!(
            self.filter.len(),
            self.stable.len() + inserts - removes + self.hot.load(Ordering::Relaxed),
            "{at} (seed {seed}): len against the inserts less the removes"
        );
        assert_counts_match_lanes(at, self.filter, &present);
    }

    /// The items inserted and not removed, stable ones included.
    fn present(&self) -> Vec<u64> {
        self.keys
            .iter()
            .zip(&self.state)
            .filter(|(_, s)| s.load(Ordering::Relaxed) == INSERTED)
            .map(|(&k, _)| k)
            .chain(self.stable.iter().copied())
            .collect()
    }
}

/// Tiny first tables (1 to 10 items) grown about a thousandfold by three writers while two
/// readers look up every item whose insert has returned; round after round for 2 s.
#[test]
fn inserts_through_doublings_are_never_missed_by_readers() {
    let _serial = one_at_a_time();
    let seed = seed("inserts_through_doublings_are_never_missed_by_readers");
    let mix = Mix {
        remove: 0,
        finish: 1,
        hot: 0,
        unique: false,
    };
    let configs = [(1, 0.01, 3_000), (4, 0.3, 4_000), (10, 0.01, 10_000)];
    let rounds = rounds_for(2_000, |round| {
        let (capacity, rate, items) = configs[round as usize % configs.len()];
        let seed = seed.wrapping_add(round);
        let filter = tiny(capacity, rate);
        let churn = Churn::new(&filter, seed, items, 16);
        let at = format!("round {round}, capacity {capacity}, rate {rate}");
        churn.run(&at, seed, 3, 2, mix);
        assert!(filter.doublings() >= 8, "{at}: the table barely grew");
    });
    println!("{rounds} rounds");
}

/// Writers remove some of their own items as they go (narrow lanes, so that removes often
/// match other items' entries), while the table doubles under them: no remove may take an
/// entry that leaves another inserted item unfindable, and `len` counts exactly. Round after
/// round for 2 s.
#[test]
fn removes_of_own_items_never_hide_other_items_while_the_table_doubles() {
    let _serial = one_at_a_time();
    let seed = seed("removes_of_own_items_never_hide_other_items_while_the_table_doubles");
    let mix = Mix {
        remove: 40,
        finish: 1,
        hot: 0,
        unique: false,
    };
    let configs = [(2, 0.3, 6_000), (8, 0.05, 6_000), (1, 0.01, 4_000)];
    let rounds = rounds_for(2_000, |round| {
        let (capacity, rate, items) = configs[round as usize % configs.len()];
        let seed = seed.wrapping_add(round);
        let filter = tiny(capacity, rate);
        let churn = Churn::new(&filter, seed, items, 64);
        // Two to six writers (more threads than cores: preemption anywhere), half of the
        // rounds adding with `insert_unique`.
        let writers = 2 + round as usize % 5;
        let mix = Mix {
            unique: round % 2 == 1,
            ..mix
        };
        let at = format!(
            "round {round}, capacity {capacity}, rate {rate}, {writers} writers, unique {}",
            mix.unique
        );
        churn.run(&at, seed, writers, 2, mix);
    });
    println!("{rounds} rounds");
}

/// A hot key inserted by every writer until its buckets hold only its copies
/// (`ItemBucketsFull`), among distinct keys: a refused insert changes nothing, so no other
/// item is lost, and the hot key's copies are bounded by its two buckets. Then each copy is
/// removed: no other item may go with them. Round after round for 1.5 s.
#[test]
fn a_refused_hot_key_loses_no_other_item() {
    let _serial = one_at_a_time();
    let seed = seed("a_refused_hot_key_loses_no_other_item");
    let mix = Mix {
        remove: 10,
        finish: 1,
        hot: 30,
        unique: false,
    };
    let configs = [(2, 0.3), (16, 0.01)];
    let mut refused = 0;
    let rounds = rounds_for(1_500, |round| {
        let (capacity, rate) = configs[round as usize % configs.len()];
        let seed = seed.wrapping_add(round);
        let filter = tiny(capacity, rate);
        let churn = Churn::new(&filter, seed, 4_000, 16);
        let at = format!("round {round}, capacity {capacity}, rate {rate}");
        churn.run(&at, seed, 3, 2, mix);
        let hot = churn.hot.load(Ordering::Relaxed);
        refused += churn.hot_refused.load(Ordering::Relaxed);
        assert!(hot > 0 && filter.contains(&HOT_KEY), "{at}: the hot key");
        // Its copies fill its two buckets: eight at most.
        assert!(
            hot <= 8,
            "{at} (seed {seed}): the hot key stored {hot} times"
        );
        // Removing each copy takes the longest entry that matches it: no other item is lost.
        for n in 0..hot {
            assert!(
                filter.remove(&HOT_KEY),
                "{at}: copy {n} of {hot} of the hot key"
            );
        }
        let present = churn.present();
        assert_eq!(filter.len(), present.len(), "{at} (seed {seed})");
        assert_counts_match_lanes(&format!("{at}, hot key removed"), &filter, &present);
    });
    println!("{rounds} rounds, {refused} inserts of the hot key refused");
    assert!(refused > 0, "the hot key was never refused");
}

/// Threads race `insert_unique` over the same keys while the table doubles: each key is added
/// by at most one of them (exactly one unless a lane already matched it: a false positive,
/// rare at this rate, or the insert was refused), and `len` counts the adds.
///
/// A refusal (`ItemBucketsFull`) is what `insert` documents for a walk that fails below half
/// the doubling load: in these tables of 2 to 16 first buckets, nine distinct items sometimes
/// share one pair of buckets (seed 1795756871582253696, round 216: eight entries whose other
/// bucket is each other's, in a table of 16 buckets, and a ninth item). Refused keys are not
/// stored, so they are not looked for; they must stay few.
#[test]
fn racing_insert_unique_adds_each_key_at_most_once_through_doublings() {
    let _serial = one_at_a_time();
    let seed = seed("racing_insert_unique_adds_each_key_at_most_once_through_doublings");
    let threads = 4;
    let mut zero_winners = 0;
    let mut refused_keys = 0;
    let rounds = rounds_for(1_500, |round| {
        let capacity = [1, 6][round as usize % 2];
        let seed = seed.wrapping_add(round);
        let filter = tiny(capacity, 0.0001);
        let keys = distinct_keys(seed, 3_000);
        let barrier = Barrier::new(threads);
        let results: Vec<Vec<Option<bool>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (barrier, keys, filter) = (&barrier, &keys, &filter);
                    s.spawn(move || {
                        barrier.wait();
                        keys.iter()
                            .enumerate()
                            .map(|(i, k)| {
                                if (i + t) % 97 == 0 {
                                    filter.finish_doubling();
                                }
                                match filter.insert_unique(k) {
                                    Ok(added) => Some(added),
                                    Err(InsertError::ItemBucketsFull) => None,
                                    Err(e) => panic!("key {k}: {e:?}"),
                                }
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut added = 0;
        let mut unadded = Vec::new();
        let mut stored = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let winners = results.iter().filter(|r| r[i] == Some(true)).count();
            assert!(
                winners <= 1,
                "capacity {capacity} (seed {seed}): key {k} added by {winners} threads"
            );
            let refused = results.iter().all(|r| r[i].is_none());
            if refused {
                refused_keys += 1;
                continue;
            }
            assert!(filter.contains(k), "capacity {capacity}: key {k} lost");
            stored.push(*k);
            if winners == 0 {
                unadded.push(*k);
            }
            added += winners;
        }
        assert!(
            refused_keys <= 30 * (round + 1) as usize,
            "round {round} (seed {seed}): {refused_keys} keys refused by every thread so far"
        );
        zero_winners += unadded.len();
        assert!(
            unadded.len() <= 3,
            "round {round} (seed {seed}): {} keys added by no thread at a 0.01 % rate: \
             {unadded:?}",
            unadded.len()
        );
        assert_eq!(filter.len(), added, "round {round} (seed {seed})");
        assert_counts_match_lanes(&format!("round {round}"), &filter, &stored);
    });
    println!(
        "{rounds} rounds, {zero_winners} keys matched before their add, {refused_keys} refused"
    );
}

/// Racing `insert_unique` of one key by many threads at once, again and again on fresh tiny
/// filters (each key's first insert may double the table): exactly one thread wins.
#[test]
fn insert_unique_of_one_key_by_racing_threads_has_exactly_one_winner() {
    let _serial = one_at_a_time();
    let seed = seed("insert_unique_of_one_key_by_racing_threads_has_exactly_one_winner");
    let threads = 4;
    let mut rng = Rng::new(seed);
    let barrier = Barrier::new(threads);
    let rounds = rounds_for(1_000, |round| {
        let filter = tiny(1 + round as usize % 3, 0.0001);
        // Fill it to just below (or at) its doubling load, so that the racing insert doubles.
        let fill = filter.capacity() - (round as usize % 2);
        for _ in 0..fill {
            filter.insert(&rng.next_u64()).unwrap();
        }
        let key = rng.next_u64();
        let present = filter.contains(&key);
        let wins: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (barrier, filter) = (&barrier, &filter);
                    s.spawn(move || {
                        barrier.wait();
                        usize::from(filter.insert_unique(&key).unwrap())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let expected = usize::from(!present);
        assert_eq!(
            wins, expected,
            "round {round} (seed {seed}): {wins} threads added key {key}"
        );
        assert_eq!(filter.len(), fill + expected, "round {round}");
    });
    println!("{rounds} rounds");
}

/// A saver thread takes snapshots (`to_bytes`, `write_to`) and clones while writers insert,
/// remove and double: each copy restores, passes its own validation, and holds every item
/// whose insert returned before the save began (and was not being removed).
#[test]
fn snapshots_and_clones_taken_under_load_hold_every_finished_insert() {
    let _serial = one_at_a_time();
    let seed = seed("snapshots_and_clones_taken_under_load_hold_every_finished_insert");
    let mix = Mix {
        remove: 20,
        finish: 1,
        hot: 0,
        unique: false,
    };
    let saves = AtomicUsize::new(0);
    let rounds = rounds_for(2_000, |round| {
        let seed = seed.wrapping_add(round);
        let filter = tiny(1 + round as usize % 4, [0.05, 0.3][round as usize % 2]);
        let churn = Churn::new(&filter, seed, 20_000, 16);
        let writers = 3;
        churn.writing.store(writers, Ordering::Relaxed);
        std::thread::scope(|s| {
            for t in 0..writers {
                let churn = &churn;
                s.spawn(move || churn.writer(seed, t, writers, mix));
            }
            s.spawn(|| save_while_writing(&filter, &churn, seed, &saves));
        });
        let failures = churn.failures.lock().unwrap();
        assert!(
            failures.is_empty(),
            "round {round} (seed {seed}): {} failures, first: {:#?}",
            failures.len(),
            &failures[..]
        );
        assert_counts_match_lanes(&format!("round {round}"), &filter, &churn.present());
    });
    let saves = saves.into_inner();
    println!("{rounds} rounds, {saves} saves and clones");
    assert!(saves > 5 * rounds as usize, "the saver barely ran");
}

/// Saves and clones `filter` until `churn`'s writers are done, checking each copy.
fn save_while_writing(filter: &CuckooFilter, churn: &Churn, seed: u64, saves: &AtomicUsize) {
    let mut round = 0u64;
    while churn.writing.load(Ordering::Acquire) > 0 {
        round += 1;
        // Every item inserted (and not being removed) before the save begins.
        let before: Vec<usize> = (0..churn.keys.len())
            .filter(|&i| churn.state[i].load(Ordering::Acquire) == INSERTED)
            .collect();
        let (what, copy) = match round % 3 {
            0 => ("clone", filter.clone()),
            1 => (
                "to_bytes",
                CuckooFilter::from_bytes(&filter.to_bytes())
                    .unwrap_or_else(|e| panic!("seed {seed}: a snapshot under load: {e}")),
            ),
            _ => {
                let mut bytes = Vec::new();
                filter.write_to(&mut bytes).unwrap();
                let copy = CuckooFilter::read_from(&bytes[..])
                    .unwrap_or_else(|e| panic!("seed {seed}: a snapshot under load: {e}"));
                ("write_to", copy)
            }
        };
        for &i in &before {
            // Being removed since? Then the copy may or may not hold it.
            if !copy.contains(&churn.keys[i]) && churn.state[i].load(Ordering::SeqCst) == INSERTED {
                churn.fail(format!("{what} {round}: item {i} missing"));
            }
        }
        for k in &churn.stable {
            if !copy.contains(k) {
                churn.fail(format!("{what} {round}: stable item {k} missing"));
            }
        }
        // The copy is a filter of its own: it takes inserts and doubles.
        for j in 0..50u64 {
            match copy.insert(&(j | 1 << 63)) {
                Ok(()) | Err(InsertError::ItemBucketsFull) => {}
                Err(e) => churn.fail(format!("{what} {round}: insert into the copy: {e}")),
            }
        }
        saves.fetch_add(1, Ordering::Relaxed);
    }
}

/// Copies (clones and restored snapshots) of a filter in the middle of a doubling (some old
/// buckets split, some not, the bitmap and the split position copied) are then shared by
/// threads that insert, remove and look up: the copy must finish the doubling, keep every
/// item, and count exactly. Round after round for 1.5 s.
#[test]
fn copies_made_mid_doubling_keep_every_item_under_threads() {
    let _serial = one_at_a_time();
    let seed = seed("copies_made_mid_doubling_keep_every_item_under_threads");
    let mix = Mix {
        remove: 25,
        finish: 0,
        hot: 0,
        unique: false,
    };
    let rounds = rounds_for(1_500, |round| {
        let seed = seed.wrapping_add(round);
        let mut rng = Rng::new(seed);
        let source = tiny(1 + round as usize % 5, [0.01, 0.3][round as usize % 2]);
        // Grow it until a doubling is in progress with some buckets split.
        let mut stored = Vec::new();
        while source.doublings() < 4 + round as u32 % 3 || !source.is_doubling() {
            let k = rng.next_u64();
            if insert_fresh(&source, k) {
                stored.push(k);
            }
        }
        let copy = if round % 2 == 0 {
            source.clone()
        } else {
            CuckooFilter::from_bytes(&source.to_bytes()).unwrap()
        };
        assert!(
            copy.is_doubling(),
            "round {round}: the copy is mid-doubling"
        );
        let keys = distinct_keys(seed ^ 0x5eed, 3_000);
        let churn = Churn::with_stable(&copy, keys, stored);
        let at = format!("round {round}, copy of a filter mid-doubling");
        churn.run(&at, seed, 3, 2, mix);
    });
    println!("{rounds} rounds");
}

/// `clear` (which takes `&self`) on one thread while others insert and double: an item whose
/// insert began after the last clear ended, and before which no clear began since, is found.
/// (An item inserted during a clear may or may not survive it.) Round after round for 1 s.
#[test]
fn items_inserted_after_a_clear_are_never_missed() {
    let _serial = one_at_a_time();
    let seed = seed("items_inserted_after_a_clear_are_never_missed");
    let rounds = rounds_for(1_000, |round| {
        let seed = seed.wrapping_add(round);
        let filter = tiny(1 + round as usize % 4, [0.01, 0.3][round as usize % 2]);
        let keys = distinct_keys(seed, 20_000);
        // Per item: 0 until inserted, then the clears completed when its insert began, plus 1.
        let epoch: Vec<AtomicUsize> = keys.iter().map(|_| AtomicUsize::new(0)).collect();
        let (started, ended) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let writers = 3;
        let writing = AtomicUsize::new(writers);
        let failures = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..writers {
                let (filter, keys, epoch, ended, writing) =
                    (&filter, &keys, &epoch, &ended, &writing);
                s.spawn(move || {
                    for i in (t..keys.len()).step_by(writers) {
                        let e = ended.load(Ordering::SeqCst);
                        if insert_fresh(filter, keys[i]) {
                            epoch[i].store(e + 1, Ordering::SeqCst);
                        }
                    }
                    writing.fetch_sub(1, Ordering::SeqCst);
                });
            }
            s.spawn(|| {
                let mut rng = Rng::new(seed);
                while writing.load(Ordering::SeqCst) > 0 {
                    std::thread::sleep(Duration::from_micros(rng.below(2_000)));
                    started.fetch_add(1, Ordering::SeqCst);
                    filter.clear();
                    ended.fetch_add(1, Ordering::SeqCst);
                }
            });
            s.spawn(|| {
                let mut rng = Rng::new(seed ^ 1);
                while writing.load(Ordering::SeqCst) > 0 {
                    let i = rng.below(keys.len() as u64) as usize;
                    let e = epoch[i].load(Ordering::SeqCst);
                    if e == 0 || started.load(Ordering::SeqCst) != e - 1 {
                        continue;
                    }
                    if !filter.contains(&keys[i]) && started.load(Ordering::SeqCst) == e - 1 {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("item {i} inserted after clear {} not found", e - 1));
                    }
                }
            });
        });
        let failures = failures.into_inner().unwrap();
        assert!(
            failures.is_empty(),
            "round {round} (seed {seed}): {failures:?}"
        );
        // Those inserted after the last clear are all there, and counted.
        let last = ended.load(Ordering::SeqCst);
        let after: Vec<u64> = keys
            .iter()
            .zip(&epoch)
            .filter(|(_, e)| e.load(Ordering::SeqCst) == last + 1)
            .map(|(&k, _)| k)
            .collect();
        assert!(
            filter.len() >= after.len(),
            "round {round} (seed {seed}): len {} below the {} items inserted after the last clear",
            filter.len(),
            after.len()
        );
        assert_counts_match_lanes(&format!("round {round}"), &filter, &after);
    });
    println!("{rounds} rounds");
}

/// While a save holds the filter frozen (its destination blocks), writers wait, but lookups
/// on other threads neither wait nor give up: they find every stored item and prove absent
/// items absent.
#[test]
fn lookups_do_not_wait_for_a_save_in_progress() {
    let _serial = one_at_a_time();
    let seed = seed("lookups_do_not_wait_for_a_save_in_progress");
    let filter = tiny(4, 0.0001);
    let keys = distinct_keys(seed, 2_000);
    let (stored, absent) = keys.split_at(1_000);
    for k in stored {
        filter.insert(k).unwrap();
    }
    assert!(filter.is_doubling() || filter.doublings() > 0);
    let (mut writer, reached, release) = HeldWriter::new();
    let inserted = AtomicBool::new(false);
    std::thread::scope(|s| {
        let saver = s.spawn(|| {
            filter.write_to(&mut writer).unwrap();
            writer.bytes
        });
        reached.recv().unwrap();
        // The save is frozen in its first write: a writer waits...
        let blocked = s.spawn(|| {
            filter.insert(&absent[0]).unwrap();
            inserted.store(true, Ordering::Release);
        });
        // ...and lookups go on.
        let start = Instant::now();
        let reader = s.spawn(|| {
            let mut false_positives = 0;
            for _ in 0..20 {
                assert!(stored.iter().all(|k| filter.contains(k)));
                false_positives += absent[1..].iter().filter(|k| filter.contains(*k)).count();
            }
            false_positives
        });
        let false_positives = reader.join().unwrap();
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(3),
            "lookups took {took:?} during a save"
        );
        // 20 rounds of 999 absent items at a 0.01 % rate: a lookup that gave up would answer
        // "maybe" and show up here.
        assert!(
            false_positives <= 20 * 3,
            "{false_positives} absent items reported present during a save"
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !inserted.load(Ordering::Acquire),
            "an insert went through a frozen filter"
        );
        release.send(()).unwrap();
        let bytes = saver.join().unwrap();
        blocked.join().unwrap();
        let restored = CuckooFilter::from_bytes(&bytes).unwrap();
        assert!(stored.iter().all(|k| restored.contains(k)));
    });
    assert!(filter.contains(&absent[0]));
    assert_eq!(filter.len(), stored.len() + 1);
}

/// Stops threads for a moment at random points, to widen race windows that preemption
/// alone opens too rarely on two cores: a signal whose handler sleeps, sent to each
/// registered thread in turn (Linux only; elsewhere it does nothing).
mod stall {
    #[cfg(target_os = "linux")]
    pub struct Staller {
        threads: std::sync::Mutex<Vec<libc::pthread_t>>,
    }

    #[cfg(target_os = "linux")]
    extern "C" fn pause(_: libc::c_int) {
        let nap = libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000,
        };
        // SAFETY: nanosleep is async-signal-safe; `nap` outlives the call.
        unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
    }

    #[cfg(target_os = "linux")]
    impl Staller {
        pub fn new() -> Self {
            // SAFETY: installs a handler (async-signal-safe, see `pause`) for SIGURG, which
            // no other test uses and whose default action is to ignore it.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = pause as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                assert_eq!(
                    libc::sigaction(libc::SIGURG, &action, std::ptr::null_mut()),
                    0
                );
            }
            Staller {
                threads: std::sync::Mutex::new(Vec::new()),
            }
        }

        /// Registers the calling thread (it must not exit before the last `stall_one`).
        pub fn register(&self) {
            // SAFETY: pthread_self has no preconditions.
            self.threads
                .lock()
                .unwrap()
                .push(unsafe { libc::pthread_self() });
        }

        /// Forgets every registered thread.
        pub fn forget(&self) {
            self.threads.lock().unwrap().clear();
        }

        /// Stops registered thread `n % count` for a moment (asynchronously).
        pub fn stall_one(&self, n: usize) {
            let threads = self.threads.lock().unwrap();
            if !threads.is_empty() {
                // SAFETY: the thread is registered and still running (see `register`).
                unsafe { libc::pthread_kill(threads[n % threads.len()], libc::SIGURG) };
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub struct Staller;

    #[cfg(not(target_os = "linux"))]
    impl Staller {
        pub fn new() -> Self {
            Staller
        }
        pub fn register(&self) {}
        pub fn forget(&self) {}
        pub fn stall_one(&self, _: usize) {}
    }
}

/// One thread inserts items, two others remove them as soon as they are published (so `len`
/// stays near zero while the counters run), and the removers are stopped for a moment now and
/// then; rounds of 0.5 s for 2.5 s. After the threads join, `len` must be the inserts less the
/// removes, and a snapshot must restore.
///
/// An earlier version failed it: `len` ended at 1 or more (up to 100) with every item
/// removed and 0 lanes in use. `remove` (`let items = if self.is_empty() { 0 } else { -1 };`)
/// decided whether to count the remove by summing the
/// per-thread counter shards (`Counts::items`, src/growth/counts.rs) with Relaxed loads,
/// one shard after the other: not a snapshot. A remover stopped after it read the inserting
/// thread's shard and before it read the other remover's shard missed the inserts made
/// meanwhile but saw their removes, summed to <= 0 although its own item was still counted,
/// and skipped its decrement. `len` then stayed too high forever and above the lanes in use,
/// and a snapshot of the filter no longer restored ("item or lane count").
#[test]
fn len_counts_every_remove_of_items_inserted_by_other_threads() {
    let _serial = one_at_a_time();
    let seed = seed("len_counts_every_remove_of_items_inserted_by_other_threads");
    let staller = stall::Staller::new();
    // Fresh threads each round: every thread counts into a shard of its own, taken in turn
    // as threads first write, and the race needs the inserter's shard read before a
    // remover's.
    let rounds = rounds_for(2_500, |round| {
        let seed = seed.wrapping_add(round);
        let filter = tiny(64, 0.01);
        let (inserts, removes) = remove_what_another_thread_inserts(&filter, seed, &staller);
        println!(
            "round {round}: {inserts} inserts, {removes} removes, len {}, load {}",
            filter.len(),
            filter.load_factor()
        );
        assert_eq!(inserts, removes);
        assert_eq!(
            filter.len(),
            0,
            "round {round} (seed {seed}): len after {inserts} inserts and as many removes \
             (load factor {})",
            filter.load_factor()
        );
        assert_counts_match_lanes(&format!("round {round}"), &filter, &[]);
    });
    println!("{rounds} rounds");
}

/// One thread inserts fresh items for a while; two others remove each as soon as it is
/// published, and are stopped for a few microseconds every 50 (see `stall`). Returns the
/// inserts and the removes.
fn remove_what_another_thread_inserts(
    filter: &CuckooFilter,
    seed: u64,
    staller: &stall::Staller,
) -> (usize, usize) {
    let removers = 2;
    let deadline = Instant::now() + Duration::from_millis(500);
    // The published items, by index modulo the ring's size; a slot's `full` is its index plus
    // one while it holds an item not taken yet, 0 once taken.
    const RING: usize = 1 << 14;
    let ring: Vec<AtomicU64> = (0..RING).map(|_| AtomicU64::new(0)).collect();
    let full: Vec<AtomicUsize> = (0..RING).map(|_| AtomicUsize::new(0)).collect();
    let head = AtomicUsize::new(0);
    let tail = AtomicUsize::new(0);
    let removed = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let exited = AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            // The others stop when this is done, also if an insert fails.
            let _done = SetOnDrop(&done);
            let mut rng = Rng::new(seed);
            let mut i = 0;
            while Instant::now() < deadline {
                if full[i % RING].load(Ordering::Acquire) != 0 {
                    // The remover of the item a ring ago has not taken it yet.
                    std::thread::yield_now();
                    continue;
                }
                let key = rng.next_u64();
                if insert_fresh(filter, key) {
                    ring[i % RING].store(key, Ordering::Relaxed);
                    full[i % RING].store(i + 1, Ordering::Release);
                    i += 1;
                    head.store(i, Ordering::Release);
                }
            }
        });
        for _ in 0..removers {
            s.spawn(|| {
                staller.register();
                // However this thread ends (a failed assertion included), it waits for the
                // staller to stop before it exits: no stall is sent to a thread that is gone.
                let _exit = Outlive {
                    exited: &exited,
                    others: removers,
                };
                loop {
                    let t = tail.load(Ordering::Relaxed);
                    if t < head.load(Ordering::Acquire) {
                        if tail
                            .compare_exchange(t, t + 1, Ordering::Relaxed, Ordering::Relaxed)
                            .is_ok()
                        {
                            assert_eq!(full[t % RING].load(Ordering::Acquire), t + 1);
                            let key = ring[t % RING].load(Ordering::Relaxed);
                            full[t % RING].store(0, Ordering::Release);
                            assert!(filter.remove(&key), "inserted item {key} not removed");
                            removed.fetch_add(1, Ordering::Release);
                        }
                    } else if done.load(Ordering::Acquire) {
                        if t >= head.load(Ordering::Acquire) {
                            break;
                        }
                    } else {
                        std::thread::yield_now();
                    }
                }
            });
        }
        s.spawn(|| {
            let mut n = 0;
            while !done.load(Ordering::Acquire) || exited.load(Ordering::Acquire) < removers {
                staller.stall_one(n);
                n += 1;
                std::thread::sleep(Duration::from_micros(50));
            }
            staller.forget();
            exited.fetch_add(1, Ordering::Release);
        });
    });
    (head.into_inner(), removed.into_inner())
}

/// Publishes a fresh filter to looping threads again and again, and grows it on this thread:
/// each round is a new chance for the threads to meet the filter's next doubling.
fn race_against_doublings(
    seed: u64,
    millis: u64,
    threads: usize,
    make: impl Fn(&mut Rng) -> CuckooFilter,
    grow_to: u32,
    visit: impl Fn(&CuckooFilter, &mut Rng) + Sync,
) -> u64 {
    let slot: Mutex<Option<Arc<CuckooFilter>>> = Mutex::new(None);
    let generation = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_millis(millis);
    let mut rounds = 0;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (slot, generation, stop, visit) = (&slot, &generation, &stop, &visit);
            s.spawn(move || {
                let mut rng = Rng::new(seed ^ (t as u64 + 7));
                let (mut seen, mut filter) = (0, None);
                while !stop.load(Ordering::Relaxed) {
                    let g = generation.load(Ordering::Acquire);
                    if g != seen {
                        seen = g;
                        filter = slot.lock().unwrap().clone();
                    }
                    if let Some(f) = &filter {
                        for _ in 0..32 {
                            visit(f, &mut rng);
                        }
                    }
                }
            });
        }
        // (Not `seed` itself: `doubled_copy_source` takes its items from that.)
        let mut rng = Rng::new(seed ^ 0xa076_1d64_78bd_642f);
        // Stop the threads however this ends (a failed insert included).
        let _stop = SetOnDrop(&stop);
        while Instant::now() < deadline {
            let f = Arc::new(make(&mut rng));
            *slot.lock().unwrap() = Some(Arc::clone(&f));
            generation.fetch_add(1, Ordering::Release);
            // Give the threads a moment to pick it up.
            for _ in 0..500 {
                std::hint::spin_loop();
            }
            while f.doublings() < grow_to {
                insert_fresh(&f, rng.next_u64());
            }
            rounds += 1;
        }
    });
    rounds
}

/// A copy of a filter (a clone, or a restored snapshot) made after it doubled and finished
/// splitting, with its stable items.
fn doubled_copy_source(seed: u64, capacity: usize) -> (CuckooFilter, Vec<u64>) {
    let mut rng = Rng::new(seed);
    let source = tiny(capacity, 0.01);
    let mut stable = Vec::new();
    while source.doublings() < 1 {
        let k = rng.next_u64();
        source.insert(&k).unwrap();
        stable.push(k);
    }
    source.finish_doubling();
    assert!(!source.is_doubling());
    (source, stable)
}

/// Lookups on other threads while a copy (a clone, or a restored snapshot) of a filter that
/// has doubled and finished splitting begins its next doubling: they must answer (true for
/// the copied items), not panic.
///
/// An earlier version failed it with a panic on the looking-up thread, "a doubling's
/// bitmap is set before it is published" (src/growth/mod.rs `is_unsplit`).
/// `from_parts` (src/growth/mod.rs) set `bitmaps[d]` only when the copy
/// was mid-doubling, so a copy made at `d >= 1` doublings with no split left had no bitmap
/// `d`. `double` (src/growth/doubling.rs) stores `splitting = true` (Relaxed) and then
/// `doublings = d + 1` (Release). `lookup` reads `doublings` (Acquire) and then `splitting`
/// (Acquire): nothing stops it from reading the old count `d` with the new flag, and it then
/// called `lookup_splitting(key, d)` → `is_unsplit(d, ..)` → `bitmaps[d]` empty → panic. (On
/// the builder's filters `bitmaps[d]` is set at every doubling `d`, and the stale count is
/// caught later by `same_size`.)
#[test]
fn lookups_racing_a_copys_next_doubling_do_not_panic() {
    let _serial = one_at_a_time();
    let seed = seed("lookups_racing_a_copys_next_doubling_do_not_panic");
    let (source, stable) = doubled_copy_source(seed, 1);
    let bytes = source.to_bytes();
    let rounds = race_against_doublings(
        seed,
        1_500,
        1,
        |rng| {
            if rng.below(2) == 0 {
                source.clone()
            } else {
                CuckooFilter::from_bytes(&bytes).unwrap()
            }
        },
        2,
        |f, rng| {
            let k = &stable[rng.below(stable.len() as u64) as usize];
            assert!(f.contains(k), "seed {seed}: stable item {k} missing");
        },
    );
    println!("{rounds} rounds");
}

/// Inserts and removes on other threads while a copy of a filter that has doubled and
/// finished splitting begins its next doubling.
///
/// An earlier version failed it as `lookups_racing_a_copys_next_doubling_do_not_panic`
/// (the same missing `bitmaps[d]`), through the writers' split hints, and with a wide window:
/// a kick walk (src/growth/kicks.rs) planned at `d` doublings calls `split_at(pos,
/// d)` for each bucket it visits (up to 500); once another thread's doubling `d + 1` is
/// published, `is_doubling()` is true and `split_at` called `split_old(.., d)` →
/// `is_unsplit(d, ..)` → panic. `split_next` and `split_buckets_of`
/// (src/growth/doubling.rs) could do the same when they read `is_doubling()` and
/// `doublings_now()` across the publication.
#[test]
fn writers_racing_a_copys_next_doubling_do_not_panic() {
    let _serial = one_at_a_time();
    let seed = seed("writers_racing_a_copys_next_doubling_do_not_panic");
    let (source, _) = doubled_copy_source(seed, 1);
    let rounds = race_against_doublings(
        seed,
        2_500,
        1,
        |_| source.clone(),
        2,
        |f, rng| {
            let k = rng.next_u64() | 1 << 63;
            if insert_fresh(f, k) {
                assert!(f.remove(&k), "seed {seed}: an item just inserted");
            }
        },
    );
    println!("{rounds} rounds");
}

/// `snapshot_size` (which every `to_bytes` calls first) on other threads while a fresh
/// filter's first doubling is published.
///
/// An earlier version failed it: `snapshot_size` (src/growth/snapshot.rs) read
/// `doublings_now()` and then `is_doubling()`; between the two loads the first doubling can
/// be published (`splitting` is stored before `doublings`), so it read 0 doublings and a
/// doubling in progress, and `doublings - 1` overflowed ("attempt to subtract with overflow"
/// with overflow checks, as in the test profile; a wrong size otherwise).
#[test]
fn snapshot_size_racing_the_first_doubling_does_not_panic() {
    let _serial = one_at_a_time();
    let seed = seed("snapshot_size_racing_the_first_doubling_does_not_panic");
    let rounds = race_against_doublings(
        seed,
        1_500,
        1,
        |_| tiny(1, 0.01),
        1,
        |f, _| {
            let size = f.snapshot_size();
            assert!(size >= 8 * 12, "a snapshot of {size} bytes");
        },
    );
    println!("{rounds} rounds");
}

/// Threads insert distinct items (no hot key, no removes) into tiny filters of coarse, middle
/// and 32-bit lanes. One thread alone never gets `ItemBucketsFull` for distinct items in such
/// tables (see `tiny_tables_of_every_width_fill_refuse_and_empty_exactly` in the growth
/// tests); the docs refuse an item only when its buckets hold repeated copies, or when "no
/// room could be made in them" below half the doubling load. So threads must not be refused
/// either just because another writer moved an entry of the path they had found: every
/// refused item is re-inserted after the threads join and must then go in without a doubling.
/// Afterwards every stored item is found and `len` is exact.
#[test]
fn distinct_items_are_not_refused_because_other_writers_changed_their_paths() {
    let _serial = one_at_a_time();
    let seed = seed("distinct_items_are_not_refused_because_other_writers_changed_their_paths");
    let threads = 4;
    let mut spurious = Vec::new();
    let mut refusals = 0;
    let mut widths = std::collections::BTreeSet::new();
    let rounds = rounds_for(3_000, |round| {
        let seed = seed.wrapping_add(round);
        let capacity = 1 + round as usize % 16;
        // The narrowest lanes (14-bit entries), middle ones, and the widest (31-bit entries).
        let rate = [0.3, 0.0001, 4e-8][round as usize % 3];
        let filter = tiny(capacity, rate);
        widths.insert(filter.fingerprint_bits());
        let keys = distinct_keys(seed, 2_000);
        let barrier = Barrier::new(threads);
        let refused: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (barrier, keys, filter) = (&barrier, &keys, &filter);
                    s.spawn(move || {
                        barrier.wait();
                        let mut refused = Vec::new();
                        for key in keys.iter().skip(t).step_by(threads) {
                            match filter.insert(key) {
                                Ok(()) => {}
                                Err(InsertError::ItemBucketsFull) => refused.push(*key),
                                Err(e) => panic!("seed={seed}: {key}: {e:?}"),
                            }
                        }
                        refused
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let at = format!(
            "seed={seed} capacity {capacity} rate {rate} ({} entry bits)",
            filter.fingerprint_bits()
        );
        assert_eq!(filter.len(), keys.len() - refused.len(), "{at}: len");
        let lost = keys
            .iter()
            .filter(|k| !refused.contains(k) && !filter.contains(*k))
            .count();
        assert_eq!(lost, 0, "{at}: stored items lost");
        refusals += refused.len();
        for key in refused {
            let (doublings, load) = (filter.doublings(), filter.load_factor());
            if filter.insert(&key).is_ok() && filter.doublings() == doublings {
                spurious.push(format!(
                    "{at}: {key} refused by a thread at load {load:.3}, then stored alone"
                ));
            }
        }
    });
    assert!(widths.contains(&31), "no 31-bit entries: {widths:?}");
    println!(
        "{rounds} rounds, entry bits {widths:?}, {refusals} refusals, {} spurious",
        spurious.len()
    );
    assert!(
        spurious.is_empty(),
        "{} distinct items refused under threads that went in alone, first {:?}",
        spurious.len(),
        &spurious[..spurious.len().min(5)]
    );
}
