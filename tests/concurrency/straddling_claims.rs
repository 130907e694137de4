//! Inserts whose only empty lane straddles two words (written under the bucket's stripe alone)
//! and packed lookups that read a bucket with its neighbour's bits, attacked with threads on
//! tiny tables.
//!
//! Every filter here hashes a `u64` to itself (`format_model::Id`), so a test knows each key's
//! bucket pair and fingerprint (`format_model::Geo`) and can read every lane of a snapshot
//! (`FORMAT.md`): the audits below compare the table lane by lane with a model, so a lost, a
//! duplicated or a torn (half-written, mixed) fingerprint shows. Keys are chosen with distinct
//! (fingerprint, pair), so no two collide and `contains` / `count` are exact.
//!
//! Randomized tests print their seed (replay with `ATOMIC_CUCKOO_SEED=<seed>`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{self, Rng};
use crate::format_model::{Geo, Id, Snapshot};
use atomic_cuckoo::{CuckooFilter, InsertError, Layout};

type F = CuckooFilter<Id>;

/// Packed widths whose buckets (4f bits) straddle words: the only tables with straddling lanes.
const STRADDLING_BITS: [u32; 10] = [5, 6, 7, 9, 10, 11, 12, 13, 14, 15];

/// Scales iteration counts (`ATTACK_SCALE`, default 1).
fn scale() -> usize {
    std::env::var("ATTACK_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn build(layout: Layout, bits: u32, capacity: usize) -> Option<F> {
    CuckooFilter::builder()
        .capacity(capacity)
        .fingerprint_bits(bits)
        .layout(layout)
        .growable(false)
        .hasher(Id)
        .build()
        .ok()
}

/// Aborts the process if the returned guard is not dropped within `secs`: a hang is a deadlock.
struct Watchdog(Option<mpsc::Sender<()>>);

fn watchdog(name: &str, secs: u64) -> Watchdog {
    let (tx, rx) = mpsc::channel::<()>();
    let name = name.to_string();
    thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(secs)) {
            eprintln!("WATCHDOG: {name} made no progress for {secs} s: deadlock? aborting");
            std::process::abort();
        }
    });
    Watchdog(Some(tx))
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// Sets its flag when dropped (also while unwinding), so that a failing thread stops the others.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Adds one to its counter when dropped (also while unwinding).
struct CountOnDrop<'a>(&'a AtomicUsize);

impl Drop for CountOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// A barrier whose threads spin (yielding now and then), so that they leave it within
/// nanoseconds of each other rather than as the scheduler wakes them.
struct SpinBarrier {
    arrived: AtomicUsize,
    n: usize,
}

impl SpinBarrier {
    fn new(n: usize) -> Self {
        SpinBarrier {
            arrived: AtomicUsize::new(0),
            n,
        }
    }
    fn wait(&self) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        let mut spins = 0u32;
        while self.arrived.load(Ordering::Acquire) < self.n {
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(4096) {
                thread::yield_now();
            }
        }
    }
}

// ------------------------------------------------------------------ geometry and lane audits

/// The geometry of one filter, as FORMAT.md describes it.
#[derive(Clone, Copy, Debug)]
struct Geom {
    layout: Layout,
    f: u32,
    n: usize,
    geo: Geo,
}

impl Geom {
    fn of(filter: &F) -> Geom {
        let s = Snapshot::parse(&filter.to_bytes());
        let level = &s.levels[0];
        let layout = match s.layout() {
            0 => Layout::OneWord,
            1 => Layout::Packed,
            _ => Layout::Compact,
        };
        Geom {
            layout,
            f: level.bits,
            n: level.buckets,
            geo: Geo {
                n: level.buckets as u64,
                f: level.bits,
                n0: level.buckets as u64,
                f0: level.bits,
            },
        }
    }

    /// Bit positions of the lanes of `bucket` in the block's bit string.
    fn lanes_of(&self, bucket: usize) -> Vec<u64> {
        let f = u64::from(self.f);
        match self.layout {
            Layout::OneWord => (0..64 / f).map(|k| 64 * bucket as u64 + k * f).collect(),
            Layout::Packed => (0..4).map(|k| 4 * f * bucket as u64 + k * f).collect(),
            _ => panic!("no lane audit for the compact layout"),
        }
    }

    fn straddles(&self, pos: u64) -> bool {
        pos % 64 + u64::from(self.f) > 64
    }

    fn straddling_lane(&self, bucket: usize) -> Option<u64> {
        self.lanes_of(bucket)
            .into_iter()
            .find(|&p| self.straddles(p))
    }

    fn lane(&self, words: &[u64], pos: u64) -> u64 {
        let mask = (1u64 << self.f) - 1;
        let (w, b) = ((pos / 64) as usize, pos % 64);
        let mut v = words[w] >> b;
        if b + u64::from(self.f) > 64 {
            v |= words[w + 1] << (64 - b);
        }
        v & mask
    }

    fn set_lane(&self, words: &mut [u64], pos: u64, fp: u64) {
        let (w, b) = ((pos / 64) as usize, pos % 64);
        words[w] |= fp << b;
        if b + u64::from(self.f) > 64 {
            words[w + 1] |= fp >> (64 - b);
        }
    }

    /// (fingerprint, lower bucket, higher bucket) of a key: equal triples collide.
    fn key(&self, k: u64) -> (u64, u64, u64) {
        self.geo.key(k)
    }

    /// Every occupied lane of a snapshot's words as (fp, pair), a multiset.
    fn lane_multiset(&self, words: &[u64]) -> BTreeMap<(u64, u64, u64), usize> {
        let mut m = BTreeMap::new();
        for bucket in 0..self.n {
            for pos in self.lanes_of(bucket) {
                let fp = self.lane(words, pos);
                if fp != 0 {
                    let alt = self.geo.alt(bucket as u64, fp);
                    let b = bucket as u64;
                    *m.entry((fp, b.min(alt), b.max(alt))).or_default() += 1;
                }
            }
        }
        m
    }

    /// `n` keys of random hashes, no two colliding.
    fn random_keys(&self, rng: &mut Rng, n: usize) -> Vec<u64> {
        let mut seen = BTreeSet::new();
        let mut keys = Vec::new();
        let mut misses = 0;
        // Few (fingerprint, pair) exist in tiny narrow tables: stop when they run out.
        while keys.len() < n && misses < 100_000 {
            let k = rng.next_u64();
            if seen.insert(self.key(k)) {
                keys.push(k);
            } else {
                misses += 1;
            }
        }
        keys
    }

    /// A key of pair {p, q} with fingerprint `fp` (whose alternate from p must be q).
    fn key_in(&self, rng: &mut Rng, p: usize, q: usize, fp: u64) -> u64 {
        debug_assert_eq!(self.geo.alt(p as u64, fp), q as u64);
        let primary = if rng.below(2) == 0 { p } else { q };
        self.geo.hash_for(primary as u64, fp, rng.next_u64())
    }
}

/// The multiset of (fp, pair) that `model` (key -> copies) says the table holds.
fn expected_lanes(geom: &Geom, model: &BTreeMap<u64, usize>) -> BTreeMap<(u64, u64, u64), usize> {
    let mut m = BTreeMap::new();
    for (&k, &c) in model {
        if c > 0 {
            *m.entry(geom.key(k)).or_default() += c;
        }
    }
    m
}

fn diff_lanes(
    want: &BTreeMap<(u64, u64, u64), usize>,
    got: &BTreeMap<(u64, u64, u64), usize>,
) -> String {
    let mut out = Vec::new();
    for (k, &w) in want {
        let g = got.get(k).copied().unwrap_or(0);
        if g != w {
            out.push(format!("{k:?}: want {w} got {g}"));
        }
    }
    for (k, &g) in got {
        if !want.contains_key(k) {
            out.push(format!("{k:?}: want 0 got {g} (unknown: torn/mixed?)"));
        }
    }
    out.truncate(8);
    out.join("; ")
}

/// The filter, saved, holds exactly `model`'s fingerprints lane by lane, its snapshot loads
/// back, its `len` is the model's, and `contains`/`count` are exact for every key of `pool`.
fn audit(at: &str, filter: &F, geom: &Geom, model: &BTreeMap<u64, usize>, pool: &[u64]) {
    let bytes = filter.to_bytes();
    let loaded = F::from_bytes_with_hasher(&bytes, Id)
        .unwrap_or_else(|e| panic!("{at}: snapshot does not load back: {e:?}"));
    let s = Snapshot::parse(&bytes);
    let got = geom.lane_multiset(&s.levels[0].words);
    let want = expected_lanes(geom, model);
    assert!(
        got == want,
        "{at}: lanes differ from the model: {}",
        diff_lanes(&want, &got)
    );
    let total: usize = model.values().sum();
    assert_eq!(filter.len(), total, "{at}: len");
    assert_eq!(loaded.len(), total, "{at}: loaded len");
    let mut found = Vec::new();
    filter.contains_many(pool, &mut found);
    for (i, &k) in pool.iter().enumerate() {
        let c = model.get(&k).copied().unwrap_or(0);
        assert_eq!(filter.count(&k), c, "{at}: count of {k:#x}");
        assert_eq!(
            filter.contains(&k),
            c > 0,
            "{at}: contains of {k:#x} ({c} copies)"
        );
        assert_eq!(
            found[i],
            c > 0,
            "{at}: contains_many of {k:#x} ({c} copies)"
        );
    }
}

// ------------------------------------------------------------------ single-threaded corners

/// One thread, Packed and OneWord at every width 4..=32, tiny capacities: fill to `Full` with
/// non-colliding keys (every failed insert stores nothing), churn, batches, hot keys, empty;
/// lane-exact audits throughout.
#[test]
fn serial_every_width_lane_exact_fill_churn_empty() {
    let seed = common::seed("serial_every_width_lane_exact_fill_churn_empty");
    let mut rng = Rng::new(seed);
    for layout in [Layout::Packed, Layout::OneWord] {
        for bits in 4..=32u32 {
            for capacity in [1usize, 2, 3, 5, 8, 13, 21, 40] {
                let Some(filter) = build(layout, bits, capacity) else {
                    continue;
                };
                let geom = Geom::of(&filter);
                let at = format!("{layout:?} bits {bits} capacity {capacity} n {}", geom.n);
                let slots = filter.slots();
                let pool = geom.random_keys(&mut rng, 2 * slots + 8);
                let mut model: BTreeMap<u64, usize> = BTreeMap::new();
                let mut failed = 0;
                for (i, &k) in pool.iter().enumerate() {
                    match filter.insert(&k) {
                        Ok(()) => *model.entry(k).or_default() += 1,
                        Err(_) => {
                            failed += 1;
                            assert_eq!(filter.count(&k), 0, "{at}: failed insert {i} stored");
                        }
                    }
                    assert_eq!(
                        filter.len(),
                        model.values().sum::<usize>(),
                        "{at}: len at {i}"
                    );
                    if i % 4 == 3 {
                        audit(&format!("{at} fill {i}"), &filter, &geom, &model, &pool);
                    }
                }
                assert!(failed > 0 || pool.len() <= slots, "{at}: never full");
                audit(&format!("{at} full"), &filter, &geom, &model, &pool);
                for op in 0..300 {
                    let stored: Vec<u64> = model
                        .iter()
                        .filter(|(_, &c)| c > 0)
                        .map(|(&k, _)| k)
                        .collect();
                    match rng.below(5) {
                        0 | 1 if !stored.is_empty() => {
                            let k = stored[rng.below(stored.len() as u64) as usize];
                            assert!(filter.remove(&k), "{at} op {op}: remove {k:#x}");
                            *model.get_mut(&k).unwrap() -= 1;
                        }
                        2 => {
                            let n = 1 + rng.below(6) as usize;
                            let batch: Vec<u64> = (0..n)
                                .map(|_| pool[rng.below(pool.len() as u64) as usize])
                                .collect();
                            let upto = match filter.insert_many(&batch) {
                                Ok(()) => n,
                                Err(e) => e.index,
                            };
                            for &x in &batch[..upto] {
                                *model.entry(x).or_default() += 1;
                            }
                        }
                        _ => {
                            let k = pool[rng.below(pool.len() as u64) as usize];
                            if filter.insert(&k).is_ok() {
                                *model.entry(k).or_default() += 1;
                            }
                        }
                    }
                    if op % 10 == 9 {
                        audit(&format!("{at} churn {op}"), &filter, &geom, &model, &pool);
                    }
                }
                // Hot key: copies of one key to its first failure.
                let hot = pool[0];
                for _ in 0..10 {
                    match filter.insert(&hot) {
                        Ok(()) => *model.entry(hot).or_default() += 1,
                        Err(_) => break,
                    }
                }
                audit(&format!("{at} hot"), &filter, &geom, &model, &pool);
                for (&k, c) in model.iter_mut() {
                    while *c > 0 {
                        assert!(filter.remove(&k), "{at}: emptying {k:#x}");
                        *c -= 1;
                    }
                }
                audit(&format!("{at} emptied"), &filter, &geom, &model, &pool);
            }
        }
    }
}

/// A filter restored from crafted words (lanes placed exactly), with `Id` hashing.
fn crafted(empty: &F, geom: &Geom, placed: &[(u64, u64)]) -> F {
    let mut s = Snapshot::parse(&empty.to_bytes());
    for w in s.levels[0].words.iter_mut() {
        *w = 0;
    }
    for &(pos, fp) in placed {
        assert_eq!(
            geom.lane(&s.levels[0].words, pos),
            0,
            "lane {pos} placed twice"
        );
        geom.set_lane(&mut s.levels[0].words, pos, fp);
    }
    s.levels[0].items = placed.len() as u64;
    s.header[6] = placed.len() as u64;
    let bytes = s.encode(true);
    F::from_bytes_with_hasher(&bytes, Id).expect("crafted snapshot loads")
}

/// A pair {p, q} around bucket `p` and `count` distinct fingerprints of that pair, avoiding
/// `avoid`; `None` when the pair has too few.
fn fps_of_pair(
    geom: &Geom,
    rng: &mut Rng,
    p: usize,
    q: Option<usize>,
    count: usize,
    avoid: &BTreeSet<u64>,
) -> Option<(usize, Vec<u64>)> {
    let max = (1u64 << geom.f) - 1;
    let mut q = q;
    let mut fps = Vec::new();
    let mut seen = avoid.clone();
    for _ in 0..200_000 {
        let fp = 1 + rng.below(max);
        let alt = geom.geo.alt(p as u64, fp) as usize;
        if *q.get_or_insert(alt) != alt || !seen.insert(fp) {
            continue;
        }
        fps.push(fp);
        if fps.len() == count {
            return Some((q.unwrap(), fps));
        }
    }
    None
}

/// The values a straddling lane at `pos` shows while `fp` is half written or half erased.
fn torn_values(_geom: &Geom, pos: u64, fp: u64) -> [u64; 2] {
    let b = pos % 64;
    let low = fp & ((1u64 << (64 - b)) - 1);
    [low, fp & !low]
}

/// A pair whose only free lane straddles: `p`'s, with `q` full and `p`'s other lanes full.
struct LastLane {
    p: usize,
    q: usize,
    free: u64,
    /// Keys stored, each with its lane.
    fixed: Vec<(u64, u64)>,
    /// Keys of the pair not stored, distinct fingerprints, none equal to a torn value of another.
    contenders: Vec<u64>,
    /// Keys of the pair never inserted, whose fingerprint is no torn value of any contender.
    absent: Vec<u64>,
}

fn last_lane_setup(geom: &Geom, rng: &mut Rng, p: usize, contenders: usize) -> Option<LastLane> {
    let free = geom.straddling_lane(p)?;
    for _ in 0..50 {
        let total = 8 + contenders + 4;
        let (q, fps) = fps_of_pair(geom, rng, p, None, total, &BTreeSet::new())?;
        let (stored, rest) = fps.split_at(7);
        let (cont, abs) = rest.split_at(contenders);
        // No fingerprint of the pair may be a torn value (half written or half erased) of
        // another at a straddling lane of p or q.
        let positions: Vec<u64> = [Some(free), geom.straddling_lane(q)]
            .into_iter()
            .flatten()
            .collect();
        let torn: BTreeSet<u64> = fps
            .iter()
            .flat_map(|&fp| {
                positions
                    .iter()
                    .flat_map(move |&pos| torn_values(geom, pos, fp))
            })
            .collect();
        if fps.iter().any(|fp| torn.contains(fp)) {
            continue;
        }
        let mut lanes: Vec<u64> = geom
            .lanes_of(p)
            .into_iter()
            .filter(|&x| x != free)
            .collect();
        lanes.extend(geom.lanes_of(q));
        let fixed = lanes
            .iter()
            .zip(stored)
            .map(|(&pos, &fp)| (geom.key_in(rng, p, q, fp), pos))
            .collect();
        return Some(LastLane {
            p,
            q,
            free,
            fixed,
            contenders: cont.iter().map(|&fp| geom.key_in(rng, p, q, fp)).collect(),
            absent: abs.iter().map(|&fp| geom.key_in(rng, p, q, fp)).collect(),
        });
    }
    None
}

/// Packed tables: a pair whose one free lane straddles two words; every thread inserts a key of
/// that pair at once (single inserts and one-item batches), a reader watches the stored keys and
/// keys never inserted, and sometimes a remover frees one more lane. The table afterwards holds
/// exactly the winners, whole.
#[test]
fn threads_race_for_the_last_straddling_lane() {
    let seed = common::seed("threads_race_for_the_last_straddling_lane");
    let _dog = watchdog("threads_race_for_the_last_straddling_lane", 300);
    let mut rng = Rng::new(seed);
    let mut straddle_wins = 0usize;
    for bits in STRADDLING_BITS {
        for capacity in [1usize, 6, 14, 40] {
            let empty = build(Layout::Packed, bits, capacity).unwrap();
            let geom = Geom::of(&empty);
            let buckets: Vec<usize> = (0..geom.n)
                .filter(|&b| geom.straddling_lane(b).is_some())
                .take(3)
                .collect();
            for &p in &buckets {
                let Some(setup) = last_lane_setup(&geom, &mut rng, p, 3) else {
                    continue;
                };
                let placed: Vec<(u64, u64)> = setup
                    .fixed
                    .iter()
                    .map(|&(k, pos)| (pos, geom.key(k).0))
                    .collect();
                for iter in 0..40 * scale() {
                    let at = format!(
                        "bits {bits} capacity {capacity} n {} p {} q {} lane {} iter {iter}",
                        geom.n, setup.p, setup.q, setup.free
                    );
                    let filter = crafted(&empty, &geom, &placed);
                    let remove = iter % 3 == 2;
                    let removed = setup.fixed[iter % setup.fixed.len()].0;
                    let barrier =
                        SpinBarrier::new(setup.contenders.len() + 1 + usize::from(remove));
                    let done = AtomicUsize::new(0);
                    let results: Vec<Result<(), InsertError>> = thread::scope(|s| {
                        let handles: Vec<_> = setup
                            .contenders
                            .iter()
                            .enumerate()
                            .map(|(t, &k)| {
                                let (filter, barrier, done, at) = (&filter, &barrier, &done, &at);
                                s.spawn(move || {
                                    let _done = CountOnDrop(done);
                                    barrier.wait();
                                    let r = if (t + iter) % 2 == 0 {
                                        filter.insert(&k)
                                    } else {
                                        filter.insert_many([k]).map_err(|e| e.error)
                                    };
                                    if r.is_ok() {
                                        assert!(filter.contains(&k), "{at}: winner {k:#x} missed");
                                    }
                                    r
                                })
                            })
                            .collect();
                        if remove {
                            let (filter, barrier, at) = (&filter, &barrier, &at);
                            s.spawn(move || {
                                barrier.wait();
                                assert!(filter.remove(&removed), "{at}: remove of stored");
                            });
                        }
                        // This thread reads while they race.
                        barrier.wait();
                        let mut rounds = 0;
                        while done.load(Ordering::Acquire) < setup.contenders.len() || rounds < 2 {
                            for &(k, _) in &setup.fixed {
                                if remove && k == removed {
                                    continue;
                                }
                                assert!(filter.contains(&k), "{at}: stored {k:#x} missed");
                                assert_eq!(filter.count(&k), 1, "{at}: count of stored {k:#x}");
                            }
                            for &k in &setup.absent {
                                // `contains` may say "maybe" under contention; `count` is exact.
                                assert_eq!(
                                    filter.count(&k),
                                    0,
                                    "{at}: never-inserted {k:#x} counted"
                                );
                            }
                            rounds += 1;
                        }
                        handles.into_iter().map(|h| h.join().unwrap()).collect()
                    });
                    let mut model: BTreeMap<u64, usize> = setup
                        .fixed
                        .iter()
                        .filter(|&&(k, _)| !(remove && k == removed))
                        .map(|&(k, _)| (k, 1))
                        .collect();
                    let mut wins = 0;
                    for (&k, r) in setup.contenders.iter().zip(&results) {
                        match r {
                            Ok(()) => {
                                model.insert(k, 1);
                                wins += 1;
                            }
                            Err(InsertError::Full | InsertError::ItemBucketsFull) => {}
                            Err(e) => panic!("{at}: unexpected error {e:?}"),
                        }
                    }
                    let free_lanes = 1 + usize::from(remove);
                    assert!(
                        wins >= 1,
                        "{at}: the free straddling lane was not taken ({results:?})"
                    );
                    assert!(
                        wins <= free_lanes,
                        "{at}: {wins} winners for {free_lanes} lanes"
                    );
                    if !remove {
                        assert_eq!(wins, 1, "{at}: one lane, {results:?}");
                        straddle_wins += 1;
                    }
                    let pool: Vec<u64> = setup
                        .fixed
                        .iter()
                        .map(|&(k, _)| k)
                        .chain(setup.contenders.iter().copied())
                        .chain(setup.absent.iter().copied())
                        .collect();
                    audit(&at, &filter, &geom, &model, &pool);
                    if !remove {
                        let words = Snapshot::parse(&filter.to_bytes()).levels[0].words.clone();
                        assert_ne!(geom.lane(&words, setup.free), 0, "{at}: lane not written");
                    }
                }
            }
        }
    }
    println!("straddling lanes won: {straddle_wins}");
    assert!(straddle_wins > 0);
}

/// Per key: copies (low 8 bits), an op in flight (bit 8), a generation (above bit 16).
const FLUX: u64 = 1 << 8;
const GEN: u64 = 1 << 16;

struct KeyStates(Vec<AtomicU64>);

impl KeyStates {
    fn new(n: usize) -> Self {
        KeyStates((0..n).map(|_| AtomicU64::new(0)).collect())
    }
    fn begin(&self, i: usize) -> u64 {
        let s = self.0[i].load(Ordering::SeqCst);
        self.0[i].store((s + GEN) | FLUX, Ordering::SeqCst);
        s & 0xFF
    }
    fn end(&self, i: usize, copies: u64) {
        let s = self.0[i].load(Ordering::SeqCst);
        self.0[i].store(((s & !0xFFFF) + GEN) | copies, Ordering::SeqCst);
    }
    fn read(&self) -> Vec<u64> {
        self.0.iter().map(|s| s.load(Ordering::SeqCst)).collect()
    }
}

/// The key states a save started and ended with: keys stable across it must be in the snapshot
/// with exactly their copies; every lane of the snapshot is a whole fingerprint of the pool.
fn check_snapshot_moment(
    at: &str,
    geom: &Geom,
    bytes: &[u8],
    loaded: &F,
    keys: &[u64],
    before: &[u64],
    after: &[u64],
) {
    let s = Snapshot::parse(bytes);
    let lanes = geom.lane_multiset(&s.levels[0].words);
    let known: BTreeSet<(u64, u64, u64)> = keys.iter().map(|&k| geom.key(k)).collect();
    for (triple, c) in &lanes {
        assert!(
            known.contains(triple),
            "{at}: snapshot lane {triple:?} (x{c}) is no key's fingerprint: torn or mixed"
        );
    }
    let lanes_total: usize = lanes.values().sum();
    assert_eq!(loaded.len(), lanes_total, "{at}: snapshot len vs its lanes");
    for (i, &k) in keys.iter().enumerate() {
        if before[i] == after[i] && before[i] & FLUX == 0 {
            let want = (before[i] & 0xFF) as usize;
            let got = lanes.get(&geom.key(k)).copied().unwrap_or(0);
            assert_eq!(
                got, want,
                "{at}: key {k:#x} stable across the save ({:#x}) has {got} copies in it, not {want}",
                before[i]
            );
        }
    }
}

/// Crafted pair with one free straddling lane: two churners insert and remove their own key of
/// that pair over and over (each successful insert is a straddling claim), a third churns a
/// neighbouring bucket that shares the lane's words (compare-and-swap claims into the same
/// words), a reader checks stored keys, the churners' stable keys and keys never inserted, and a
/// saver saves and clones: snapshots hold whole fingerprints only and keys stable across a save
/// with their exact copies.
#[test]
fn straddling_lane_churn_against_readers_neighbours_and_saves() {
    let seed = common::seed("straddling_lane_churn_against_readers_neighbours_and_saves");
    let _dog = watchdog(
        "straddling_lane_churn_against_readers_neighbours_and_saves",
        300,
    );
    let mut rng = Rng::new(seed);
    let per_config = Duration::from_millis(350 * scale() as u64);
    let mut claims_total = 0u64;
    let mut maybes_total = 0u64;
    for bits in STRADDLING_BITS {
        for capacity in [6usize, 30] {
            let empty = build(Layout::Packed, bits, capacity).unwrap();
            let geom = Geom::of(&empty);
            let Some(p) =
                (0..geom.n).find(|&b| geom.straddling_lane(b).is_some() && b + 1 < geom.n)
            else {
                continue;
            };
            let Some(setup) = last_lane_setup(&geom, &mut rng, p, 2) else {
                continue;
            };
            // The neighbour sharing the lane's second word: bucket p + 1, two keys of its pair,
            // a free lane or two left in it (if its pair is p's, skip the neighbour).
            let nb = p + 1;
            let nb_keys: Vec<u64> = if nb == setup.q {
                Vec::new()
            } else {
                let used: BTreeSet<u64> = BTreeSet::new();
                match fps_of_pair(&geom, &mut rng, nb, None, 2, &used) {
                    Some((nq, fps)) if nq != p && nq != setup.q => fps
                        .iter()
                        .map(|&fp| geom.geo.hash_for(nb as u64, fp, rng.next_u64()))
                        .collect(),
                    _ => Vec::new(),
                }
            };
            let placed: Vec<(u64, u64)> = setup
                .fixed
                .iter()
                .map(|&(k, pos)| (pos, geom.key(k).0))
                .collect();
            let filter = crafted(&empty, &geom, &placed);
            let at = format!(
                "bits {bits} capacity {capacity} n {} p {p} q {} lane {} nb keys {}",
                geom.n,
                setup.q,
                setup.free,
                nb_keys.len()
            );
            // Keys with states: the two contenders, then the neighbour's.
            let churned: Vec<u64> = setup.contenders.iter().chain(&nb_keys).copied().collect();
            let states = KeyStates::new(churned.len());
            let stop = AtomicBool::new(false);
            let claims = AtomicU64::new(0);
            let maybes = AtomicU64::new(0);
            let fixed: Vec<u64> = setup.fixed.iter().map(|&(k, _)| k).collect();
            let mut all: Vec<u64> = fixed.clone();
            all.extend(&churned);
            thread::scope(|s| {
                for (i, &k) in churned.iter().enumerate() {
                    let (filter, states, stop, claims, at) =
                        (&filter, &states, &stop, &claims, &at);
                    let seed = rng.next_u64();
                    s.spawn(move || {
                        let _stop = StopOnDrop(stop);
                        let mut rng = Rng::new(seed);
                        let mut copies = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            states.begin(i);
                            if copies == 0 || (copies < 2 && rng.below(3) == 0) {
                                let r = if rng.below(2) == 0 {
                                    filter.insert(&k)
                                } else {
                                    filter.insert_many([k]).map_err(|e| e.error)
                                };
                                if r.is_ok() {
                                    copies += 1;
                                    if i < 2 {
                                        claims.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            } else {
                                assert!(filter.remove(&k), "{at}: remove of own {k:#x}");
                                copies -= 1;
                            }
                            states.end(i, copies);
                            if copies > 0 {
                                assert!(filter.contains(&k), "{at}: own {k:#x} missed");
                            }
                        }
                        while copies > 0 {
                            assert!(filter.remove(&k));
                            copies -= 1;
                        }
                        states.end(i, 0);
                    });
                }
                // Reader.
                {
                    let (filter, states, stop, at, fixed, churned, absent, maybes) = (
                        &filter,
                        &states,
                        &stop,
                        &at,
                        &fixed,
                        &churned,
                        &setup.absent,
                        &maybes,
                    );
                    s.spawn(move || {
                        let _stop = StopOnDrop(stop);
                        let mut found = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            for &k in fixed {
                                assert!(filter.contains(&k), "{at}: fixed {k:#x} missed");
                                assert_eq!(filter.count(&k), 1, "{at}: count of fixed {k:#x}");
                            }
                            filter.contains_many(fixed, &mut found);
                            assert!(
                                found.iter().all(|&f| f),
                                "{at}: contains_many missed a fixed key"
                            );
                            for &k in absent {
                                // `contains` may answer "maybe" (Unproven) when every attempt
                                // met a writer: only the count, which then takes the stripes,
                                // is exact. No torn value of the churned lane equals k's.
                                if filter.contains(&k) {
                                    maybes.fetch_add(1, Ordering::Relaxed);
                                }
                                assert_eq!(
                                    filter.count(&k),
                                    0,
                                    "{at}: never-inserted {k:#x} counted"
                                );
                            }
                            let before = states.read();
                            let look: Vec<bool> =
                                churned.iter().map(|k| filter.contains(k)).collect();
                            let after = states.read();
                            for i in 0..churned.len() {
                                if before[i] == after[i]
                                    && before[i] & FLUX == 0
                                    && before[i] & 0xFF > 0
                                {
                                    assert!(
                                        look[i],
                                        "{at}: churned {:#x} present throughout, missed",
                                        churned[i]
                                    );
                                }
                            }
                        }
                    });
                }
                // Saver (this thread). Fixed keys: one copy each, never touched.
                let _stop = StopOnDrop(&stop);
                let t0 = Instant::now();
                let mut round = 0;
                let states_of_all =
                    || -> Vec<u64> { fixed.iter().map(|_| 1).chain(states.read()).collect() };
                while t0.elapsed() < per_config && !stop.load(Ordering::Relaxed) {
                    let before = states_of_all();
                    let (bytes, kind) = match round % 3 {
                        0 => (filter.to_bytes(), "to_bytes"),
                        1 => {
                            let mut v = Vec::new();
                            filter.write_to(&mut v).unwrap();
                            (v, "write_to")
                        }
                        _ => (filter.clone().to_bytes(), "clone"),
                    };
                    let after = states_of_all();
                    let loaded = F::from_bytes_with_hasher(&bytes, Id)
                        .unwrap_or_else(|e| panic!("{at} {kind} {round}: does not load: {e:?}"));
                    check_snapshot_moment(
                        &format!("{at} {kind} {round}"),
                        &geom,
                        &bytes,
                        &loaded,
                        &all,
                        &before,
                        &after,
                    );
                    for &k in &fixed {
                        assert!(
                            loaded.contains(&k),
                            "{at} {kind} {round}: fixed {k:#x} not saved"
                        );
                    }
                    round += 1;
                }
                stop.store(true, Ordering::Relaxed);
            });
            let model: BTreeMap<u64, usize> = fixed.iter().map(|&k| (k, 1)).collect();
            let mut pool = all.clone();
            pool.extend(&setup.absent);
            audit(&format!("{at} quiet"), &filter, &geom, &model, &pool);
            claims_total += claims.load(Ordering::Relaxed);
            maybes_total += maybes.load(Ordering::Relaxed);
        }
    }
    println!("straddling-lane inserts that succeeded: {claims_total}; maybe answers for never-inserted keys: {maybes_total}");
    assert!(claims_total > 100);
}

/// Random tiny tables (Packed at straddling widths, and Packed 4/8 and OneWord for contrast):
/// four threads insert disjoint non-colliding keys (single and batched) until every key was
/// tried, while a fifth reads every key a thread reported inserted. Afterwards each successful
/// key is stored exactly once, each failed one not at all, and `len` is the successes.
#[test]
fn threads_fill_tiny_tables_to_full_exactly() {
    let seed = common::seed("threads_fill_tiny_tables_to_full_exactly");
    let _dog = watchdog("threads_fill_tiny_tables_to_full_exactly", 300);
    let mut rng = Rng::new(seed);
    let mut configs: Vec<(Layout, u32)> = STRADDLING_BITS
        .iter()
        .map(|&b| (Layout::Packed, b))
        .collect();
    configs.extend([
        (Layout::Packed, 4),
        (Layout::Packed, 8),
        (Layout::OneWord, 10),
        (Layout::OneWord, 13),
    ]);
    for (layout, bits) in configs {
        for capacity in [2usize, 7, 20, 60, 200] {
            for iter in 0..6 * scale() {
                let filter = build(layout, bits, capacity).unwrap();
                let geom = Geom::of(&filter);
                let at = format!(
                    "{layout:?} bits {bits} capacity {capacity} n {} iter {iter}",
                    geom.n
                );
                let slots = filter.slots();
                let keys = geom.random_keys(&mut rng, slots + slots / 2 + 8);
                let per = keys.len().div_ceil(4);
                let published: Vec<AtomicU64> = keys.iter().map(|_| AtomicU64::new(0)).collect();
                let done = AtomicUsize::new(0);
                let results: Vec<Vec<(u64, bool)>> = thread::scope(|s| {
                    let handles: Vec<_> = keys
                        .chunks(per)
                        .enumerate()
                        .map(|(t, own)| {
                            let (filter, published, done, at) = (&filter, &published, &done, &at);
                            let seed = rng.next_u64();
                            s.spawn(move || {
                                let mut rng = Rng::new(seed);
                                let mut out = Vec::new();
                                let mut i = 0;
                                while i < own.len() {
                                    let n = if rng.below(3) == 0 {
                                        1 + rng.below(5) as usize
                                    } else {
                                        1
                                    };
                                    let end = (i + n).min(own.len());
                                    if end - i == 1 {
                                        let ok = filter.insert(&own[i]).is_ok();
                                        out.push((own[i], ok));
                                    } else {
                                        // A batch stops at its first failure: the rest go singly.
                                        let upto = match filter.insert_many(&own[i..end]) {
                                            Ok(()) => end - i,
                                            Err(e) => e.index,
                                        };
                                        for (j, &k) in own[i..end].iter().enumerate() {
                                            if j < upto {
                                                out.push((k, true));
                                            } else {
                                                let ok = filter.insert(&k).is_ok();
                                                out.push((k, ok));
                                            }
                                        }
                                    }
                                    for (j, &(k, ok)) in out.iter().enumerate().skip(i) {
                                        if ok {
                                            assert!(
                                                filter.contains(&k),
                                                "{at} t{t}: {k:#x} missed after insert"
                                            );
                                            published[t * per + j].store(1, Ordering::Release);
                                        }
                                    }
                                    i = end;
                                }
                                done.fetch_add(1, Ordering::Release);
                                out
                            })
                        })
                        .collect();
                    let threads = handles.len();
                    let mut rounds = 0;
                    while done.load(Ordering::Acquire) < threads || rounds < 1 {
                        for (idx, p) in published.iter().enumerate() {
                            if p.load(Ordering::Acquire) != 0 {
                                let k = keys[idx];
                                assert!(
                                    filter.contains(&k),
                                    "{at}: published {k:#x} missed by a reader"
                                );
                            }
                        }
                        rounds += 1;
                    }
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let mut model = BTreeMap::new();
                for &(k, ok) in results.iter().flatten() {
                    model.insert(k, usize::from(ok));
                }
                assert_eq!(model.len(), keys.len());
                audit(&at, &filter, &geom, &model, &keys);
            }
        }
    }
}

/// Tiny straddling tables near full: writers churn their own keys (insert, insert_many,
/// remove; multiset copies), a saver saves, writes and clones, a clearer sometimes clears.
/// Snapshots hold whole pool fingerprints only, and every key stable across a save (no op on
/// it started or ended meanwhile) is in it with exactly its copies. A watchdog catches a
/// deadlock between batches' claims, straddling claims' stripes, locked writers and freezes.
#[test]
fn saves_see_one_moment_under_straddling_claims() {
    let seed = common::seed("saves_see_one_moment_under_straddling_claims");
    let _dog = watchdog("saves_see_one_moment_under_straddling_claims", 300);
    let mut rng = Rng::new(seed);
    let per_config = Duration::from_millis(300 * scale() as u64);
    for bits in STRADDLING_BITS {
        for capacity in [3usize, 12, 50] {
            let filter = build(Layout::Packed, bits, capacity).unwrap();
            let geom = Geom::of(&filter);
            let at = format!("bits {bits} capacity {capacity} n {}", geom.n);
            let slots = filter.slots();
            // A pool a little larger than the table: it stays near full.
            let keys = geom.random_keys(&mut rng, slots + slots / 4 + 3);
            let states = KeyStates::new(keys.len());
            let writers = 3;
            let stop = AtomicBool::new(false);
            // Clears make every state unknowable: the saver skips keys while a clear runs, so the
            // clearer marks every key in flux around it (clear is a writer of all keys).
            let clears = AtomicUsize::new(0);
            let clear_lock = std::sync::RwLock::new(());
            thread::scope(|s| {
                for t in 0..writers {
                    let (filter, states, stop, keys, at, clear_lock) =
                        (&filter, &states, &stop, &keys, &at, &clear_lock);
                    let seed = rng.next_u64();
                    s.spawn(move || {
                        let _stop = StopOnDrop(stop);
                        let mut rng = Rng::new(seed);
                        let own: Vec<usize> = (t..keys.len()).step_by(writers).collect();
                        let mut copies: Vec<u64> = vec![0; own.len()];
                        while !stop.load(Ordering::Relaxed) {
                            let _shared = clear_lock.read().unwrap();
                            // A clear empties everything: resync from the states (the clearer
                            // wrote 0 copies for every key).
                            for (j, &i) in own.iter().enumerate() {
                                copies[j] = states.0[i].load(Ordering::SeqCst) & 0xFF;
                            }
                            for _ in 0..16 {
                                let j = rng.below(own.len() as u64) as usize;
                                let i = own[j];
                                match rng.below(6) {
                                    0..=2 if copies[j] < 3 => {
                                        states.begin(i);
                                        if filter.insert(&keys[i]).is_ok() {
                                            copies[j] += 1;
                                        }
                                        states.end(i, copies[j]);
                                    }
                                    3 => {
                                        let n = 1 + rng.below(6) as usize;
                                        let picks: Vec<usize> = (0..n)
                                            .map(|_| rng.below(own.len() as u64) as usize)
                                            .filter(|&j| copies[j] < 3)
                                            .collect();
                                        let mut seen = BTreeSet::new();
                                        let picks: Vec<usize> =
                                            picks.into_iter().filter(|j| seen.insert(*j)).collect();
                                        for &j in &picks {
                                            states.begin(own[j]);
                                        }
                                        let batch: Vec<u64> =
                                            picks.iter().map(|&j| keys[own[j]]).collect();
                                        let upto = match filter.insert_many(&batch) {
                                            Ok(()) => batch.len(),
                                            Err(e) => e.index,
                                        };
                                        for (n, &j) in picks.iter().enumerate() {
                                            if n < upto {
                                                copies[j] += 1;
                                            }
                                            states.end(own[j], copies[j]);
                                        }
                                    }
                                    _ if copies[j] > 0 => {
                                        states.begin(i);
                                        assert!(
                                            filter.remove(&keys[i]),
                                            "{at}: remove of own {:#x}",
                                            keys[i]
                                        );
                                        copies[j] -= 1;
                                        states.end(i, copies[j]);
                                    }
                                    _ => {}
                                }
                            }
                        }
                    });
                }
                // Clearer: rarely.
                {
                    let (filter, states, stop, clears, clear_lock) =
                        (&filter, &states, &stop, &clears, &clear_lock);
                    s.spawn(move || {
                        let _stop = StopOnDrop(stop);
                        while !stop.load(Ordering::Relaxed) {
                            thread::sleep(Duration::from_millis(40));
                            let _excl = clear_lock.write().unwrap();
                            for i in 0..states.0.len() {
                                states.begin(i);
                            }
                            filter.clear();
                            for i in 0..states.0.len() {
                                states.end(i, 0);
                            }
                            clears.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
                let _stop = StopOnDrop(&stop);
                let t0 = Instant::now();
                let mut round = 0;
                while t0.elapsed() < per_config && !stop.load(Ordering::Relaxed) {
                    let before = states.read();
                    let (bytes, kind) = match round % 3 {
                        0 => (filter.to_bytes(), "to_bytes"),
                        1 => {
                            let mut v = Vec::new();
                            filter.write_to(&mut v).unwrap();
                            (v, "write_to")
                        }
                        _ => (filter.clone().to_bytes(), "clone"),
                    };
                    let after = states.read();
                    let loaded = F::from_bytes_with_hasher(&bytes, Id)
                        .unwrap_or_else(|e| panic!("{at} {kind} {round}: does not load: {e:?}"));
                    check_snapshot_moment(
                        &format!("{at} {kind} {round}"),
                        &geom,
                        &bytes,
                        &loaded,
                        &keys,
                        &before,
                        &after,
                    );
                    round += 1;
                }
                stop.store(true, Ordering::Relaxed);
            });
            let model: BTreeMap<u64, usize> = keys
                .iter()
                .zip(states.read())
                .map(|(&k, s)| (k, (s & 0xFF) as usize))
                .collect();
            audit(
                &format!("{at} quiet ({} clears)", clears.load(Ordering::Relaxed)),
                &filter,
                &geom,
                &model,
                &keys,
            );
        }
    }
}

/// Hot keys at straddling widths: three threads insert copies of the same key into a tiny table
/// until each fails, two others insert and remove other keys: the hot key's count is the
/// successes, and the lanes are exact.
#[test]
fn hot_key_copies_race_on_straddling_lanes() {
    let seed = common::seed("hot_key_copies_race_on_straddling_lanes");
    let _dog = watchdog("hot_key_copies_race_on_straddling_lanes", 300);
    let mut rng = Rng::new(seed);
    for bits in STRADDLING_BITS {
        for capacity in [1usize, 4, 10] {
            for iter in 0..30 * scale() {
                let filter = build(Layout::Packed, bits, capacity).unwrap();
                let geom = Geom::of(&filter);
                let at = format!("bits {bits} capacity {capacity} n {} iter {iter}", geom.n);
                let keys = geom.random_keys(&mut rng, 5);
                let hot = keys[0];
                let barrier = Barrier::new(5);
                let (hot_wins, others): (usize, Vec<(u64, usize)>) = thread::scope(|s| {
                    let hots: Vec<_> = (0..3)
                        .map(|t| {
                            let (filter, barrier) = (&filter, &barrier);
                            s.spawn(move || {
                                barrier.wait();
                                let mut wins = 0;
                                for _ in 0..12 {
                                    let r = if t == 0 {
                                        filter.insert_many([hot, hot]).map(|()| 2).or_else(|e| {
                                            if e.index == 1 {
                                                Ok(1)
                                            } else {
                                                Err(e.error)
                                            }
                                        })
                                    } else {
                                        filter.insert(&hot).map(|()| 1)
                                    };
                                    match r {
                                        Ok(n) => wins += n,
                                        Err(_) => break,
                                    }
                                }
                                wins
                            })
                        })
                        .collect();
                    let churn: Vec<_> = (0..2)
                        .map(|t| {
                            let (filter, barrier, keys) = (&filter, &barrier, &keys);
                            s.spawn(move || {
                                barrier.wait();
                                let k = keys[1 + t];
                                let mut c = 0;
                                for round in 0..40 {
                                    if round % 2 == 0 {
                                        if filter.insert(&k).is_ok() {
                                            c += 1;
                                        }
                                    } else if c > 0 {
                                        assert!(filter.remove(&k));
                                        c -= 1;
                                    }
                                }
                                (k, c)
                            })
                        })
                        .collect();
                    (
                        hots.into_iter().map(|h| h.join().unwrap()).sum(),
                        churn.into_iter().map(|h| h.join().unwrap()).collect(),
                    )
                });
                let mut model: BTreeMap<u64, usize> = BTreeMap::new();
                model.insert(hot, hot_wins);
                for (k, c) in others {
                    model.insert(k, c);
                }
                audit(&at, &filter, &geom, &model, &keys);
            }
        }
    }
}

/// A save held open (its destination blocks in its first write) keeps straddling claims out:
/// an insert whose only lane straddles waits for the save, is not in the snapshot, and lands
/// once the save ends; lookups go on meanwhile.
#[test]
fn a_held_save_keeps_straddling_claims_out() {
    let seed = common::seed("a_held_save_keeps_straddling_claims_out");
    let _dog = watchdog("a_held_save_keeps_straddling_claims_out", 120);
    let mut rng = Rng::new(seed);
    let mut checked = 0;
    for bits in STRADDLING_BITS {
        let empty = build(Layout::Packed, bits, 14).unwrap();
        let geom = Geom::of(&empty);
        let Some(p) = (0..geom.n).find(|&b| geom.straddling_lane(b).is_some()) else {
            continue;
        };
        let Some(setup) = last_lane_setup(&geom, &mut rng, p, 2) else {
            continue;
        };
        let placed: Vec<(u64, u64)> = setup
            .fixed
            .iter()
            .map(|&(k, pos)| (pos, geom.key(k).0))
            .collect();
        for round in 0..4 {
            let at = format!("bits {bits} n {} p {p} q {} round {round}", geom.n, setup.q);
            let filter = crafted(&empty, &geom, &placed);
            let x = setup.contenders[round % 2];
            let (mut held, reached, release) = common::HeldWriter::new();
            let returned = AtomicBool::new(false);
            let bytes = thread::scope(|s| {
                let saver = s.spawn(|| {
                    filter.write_to(&mut held).unwrap();
                    held.bytes
                });
                reached.recv().unwrap();
                let inserter = s.spawn(|| {
                    let r = if round % 2 == 0 {
                        filter.insert(&x)
                    } else {
                        filter.insert_many([x]).map_err(|e| e.error)
                    };
                    returned.store(true, Ordering::SeqCst);
                    r
                });
                thread::sleep(Duration::from_millis(30));
                for &(k, _) in &setup.fixed {
                    assert!(
                        filter.contains(&k),
                        "{at}: fixed {k:#x} missed during a save"
                    );
                }
                assert!(
                    !returned.load(Ordering::SeqCst),
                    "{at}: an insert returned while a save held the filter frozen"
                );
                release.send(()).unwrap();
                let bytes = saver.join().unwrap();
                assert_eq!(
                    inserter.join().unwrap(),
                    Ok(()),
                    "{at}: insert after the save"
                );
                bytes
            });
            let loaded = F::from_bytes_with_hasher(&bytes, Id).unwrap();
            assert_eq!(loaded.len(), setup.fixed.len(), "{at}: snapshot len");
            assert_eq!(
                loaded.count(&x),
                0,
                "{at}: the waiting insert is in the snapshot"
            );
            let mut model: BTreeMap<u64, usize> =
                setup.fixed.iter().map(|&(k, _)| (k, 1)).collect();
            model.insert(x, 1);
            let pool: Vec<u64> = model
                .keys()
                .copied()
                .chain(setup.absent.iter().copied())
                .collect();
            audit(&at, &filter, &geom, &model, &pool);
            checked += 1;
        }
    }
    assert!(checked > 0);
}

/// Deadlock hunt: batches of up to 64 items (one claim held across them, many of them straddling
/// claims that take a stripe) on near-full straddling tables, against removers and
/// `insert_unique` (locked writers), and a thread that saves, clones and clears in a loop. A
/// watchdog aborts on a hang; once quiet the lanes are exact for the keys' final counts.
#[test]
fn batches_straddling_claims_locked_writers_and_freezes_do_not_deadlock() {
    let seed = common::seed("batches_straddling_claims_locked_writers_and_freezes_do_not_deadlock");
    let _dog = watchdog(
        "batches_straddling_claims_locked_writers_and_freezes_do_not_deadlock",
        240,
    );
    let mut rng = Rng::new(seed);
    let per_config = Duration::from_millis(250 * scale() as u64);
    for bits in STRADDLING_BITS {
        for capacity in [20usize, 150] {
            let filter = build(Layout::Packed, bits, capacity).unwrap();
            let geom = Geom::of(&filter);
            let at = format!("bits {bits} capacity {capacity} n {}", geom.n);
            let slots = filter.slots();
            let keys = geom.random_keys(&mut rng, slots + slots / 3);
            let stop = AtomicBool::new(false);
            let progress: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
            // Each key belongs to one writer; copies are tracked only when no clear ran, so the
            // final audit recounts from the table's own counts after the last clear.
            thread::scope(|s| {
                for t in 0..3usize {
                    let (filter, keys, stop, progress, at) =
                        (&filter, &keys, &stop, &progress, &at);
                    let seed = rng.next_u64();
                    s.spawn(move || {
                        let _stop = StopOnDrop(stop);
                        let mut rng = Rng::new(seed);
                        let own: Vec<u64> = keys.iter().copied().skip(t).step_by(3).collect();
                        while !stop.load(Ordering::Relaxed) {
                            match (t, rng.below(4)) {
                                (0 | 1, 0..=2) => {
                                    let n = 1 + rng.below(64) as usize;
                                    let batch: Vec<u64> = (0..n)
                                        .map(|_| own[rng.below(own.len() as u64) as usize])
                                        .collect();
                                    let _ = filter.insert_many(&batch);
                                }
                                (2, 0) => {
                                    let k = own[rng.below(own.len() as u64) as usize];
                                    let _ = filter.insert_unique(&k);
                                }
                                _ => {
                                    for _ in 0..8 {
                                        let k = own[rng.below(own.len() as u64) as usize];
                                        let _ = filter.remove(&k);
                                    }
                                }
                            }
                            progress[t].fetch_add(1, Ordering::Relaxed);
                        }
                        let _ = at;
                    });
                }
                {
                    let (filter, stop, progress) = (&filter, &stop, &progress);
                    s.spawn(move || {
                        let _stop = StopOnDrop(stop);
                        let mut round = 0usize;
                        while !stop.load(Ordering::Relaxed) {
                            match round % 8 {
                                0 => filter.clear(),
                                1 | 4 => drop(filter.clone()),
                                _ => {
                                    let bytes = filter.to_bytes();
                                    F::from_bytes_with_hasher(&bytes, Id).expect("snapshot loads");
                                }
                            }
                            round += 1;
                            progress[3].fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
                let _stop = StopOnDrop(&stop);
                thread::sleep(per_config);
            });
            let made: Vec<usize> = progress.iter().map(|p| p.load(Ordering::Relaxed)).collect();
            assert!(
                made.iter().all(|&m| m > 0),
                "{at}: a thread made no progress: {made:?}"
            );
            // Quiet: the table's own counts are the model; the lanes must agree exactly.
            let model: BTreeMap<u64, usize> = keys.iter().map(|&k| (k, filter.count(&k))).collect();
            audit(
                &format!("{at} quiet {made:?}"),
                &filter,
                &geom,
                &model,
                &keys,
            );
        }
    }
}

/// Lookups leave a packed bucket's neighbour bits unmasked: with every lane
/// of every other bucket holding the probe's own fingerprint (or all ones, or noise), and the
/// probe's two buckets holding other fingerprints in a random subset of lanes, the probe is
/// absent (`contains`, `contains_many`, `count`); inserted, it is found once.
#[test]
fn neighbour_bits_never_make_a_lookup_hit() {
    let seed = common::seed("neighbour_bits_never_make_a_lookup_hit");
    let mut rng = Rng::new(seed);
    let mut probes = 0;
    for layout in [Layout::Packed, Layout::OneWord] {
        for bits in 4..=16u32 {
            for capacity in [1usize, 6, 20, 45] {
                let empty = build(layout, bits, capacity).unwrap();
                let geom = Geom::of(&empty);
                let max = (1u64 << bits) - 1;
                for p in 0..geom.n {
                    for fill in 0..3 {
                        let f = 1 + rng.below(max);
                        let q = geom.geo.alt(p as u64, f) as usize;
                        let mut placed = Vec::new();
                        for b in 0..geom.n {
                            for pos in geom.lanes_of(b) {
                                if b == p || b == q {
                                    if rng.below(2) == 0 {
                                        let mut v = 1 + rng.below(max);
                                        while v == f {
                                            v = 1 + rng.below(max);
                                        }
                                        placed.push((pos, v));
                                    }
                                } else {
                                    let v = match fill {
                                        0 => f,
                                        1 => max,
                                        _ => 1 + rng.below(max),
                                    };
                                    placed.push((pos, v));
                                }
                            }
                        }
                        let filter = crafted(&empty, &geom, &placed);
                        let probe = geom.geo.hash_for(p as u64, f, rng.next_u64());
                        let at = format!(
                            "{layout:?} bits {bits} n {} p {p} q {q} fp {f:#x} fill {fill}",
                            geom.n
                        );
                        assert!(!filter.contains(&probe), "{at}: absent probe found");
                        assert_eq!(filter.count(&probe), 0, "{at}: absent probe counted");
                        let mut found = Vec::new();
                        filter.contains_many([probe], &mut found);
                        assert!(!found[0], "{at}: absent probe found by contains_many");
                        if filter.insert(&probe).is_ok() {
                            assert!(filter.contains(&probe), "{at}: inserted probe missed");
                            assert_eq!(filter.count(&probe), 1, "{at}: inserted probe count");
                            assert!(filter.remove(&probe), "{at}: remove of probe");
                            assert!(!filter.contains(&probe), "{at}: removed probe found");
                        }
                        probes += 1;
                    }
                }
            }
        }
    }
    println!("{probes} probes");
}

/// A count of a never-inserted key whose fingerprint is one half of a fingerprint being claimed
/// into a straddling lane of its bucket: the claim writes the lane's two words one after the
/// other, and a validated read (a count, a miss) must never see the lane between them. Runs for
/// `ATTACK_SECS` seconds (default 2).
#[test]
fn a_count_never_counts_half_a_straddling_claim() {
    let seed = common::seed("a_count_never_counts_half_a_straddling_claim");
    let mut rng = Rng::new(seed);
    let secs = std::env::var("ATTACK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2u64);
    let bits = 10;
    let empty = build(Layout::Packed, bits, 6).unwrap();
    let geom = Geom::of(&empty);
    let p = (0..geom.n)
        .find(|&b| geom.straddling_lane(b).is_some())
        .unwrap();
    let free = geom.straddling_lane(p).unwrap();
    let setup = loop {
        let s = last_lane_setup(&geom, &mut rng, p, 1).unwrap();
        let x = geom.key(s.contenders[0]).0;
        let [lo, hi] = torn_values(&geom, free, x);
        if lo != 0 && hi != 0 {
            break s;
        }
    };
    let x = setup.contenders[0];
    let xfp = geom.key(x).0;
    let [lo, hi] = torn_values(&geom, free, xfp);
    // Keys whose fingerprint is a half of x's and whose pair includes p.
    let mut probe = |fp: u64| geom.geo.hash_for(p as u64, fp, rng.next_u64());
    let torn_keys = [probe(lo), probe(hi)];
    let placed: Vec<(u64, u64)> = setup
        .fixed
        .iter()
        .map(|&(k, pos)| (pos, geom.key(k).0))
        .collect();
    let filter = crafted(&empty, &geom, &placed);
    for &k in &torn_keys {
        assert_eq!(filter.count(&k), 0, "setup: a torn key is stored");
    }
    let stop = AtomicBool::new(false);
    let counted: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
    let hits: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
    let claims = AtomicU64::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            let _stop = StopOnDrop(&stop);
            while !stop.load(Ordering::Relaxed) {
                if filter.insert(&x).is_ok() {
                    claims.fetch_add(1, Ordering::Relaxed);
                    assert!(filter.remove(&x));
                }
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                let _stop = StopOnDrop(&stop);
                while !stop.load(Ordering::Relaxed) {
                    for (i, k) in torn_keys.iter().enumerate() {
                        if filter.count(k) != 0 {
                            counted[i].fetch_add(1, Ordering::Relaxed);
                        }
                        if filter.contains(k) {
                            hits[i].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        thread::sleep(Duration::from_secs(secs));
    });
    let counted: Vec<u64> = counted.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let hits: Vec<u64> = hits.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    println!(
        "bits {bits} p {p} lane {free} x {xfp:#x} (halves {lo:#x}, {hi:#x}): {} claims; torn keys \
         counted {counted:?} times, found by contains {hits:?} times",
        claims.load(Ordering::Relaxed)
    );
    assert_eq!(
        counted,
        [0, 0],
        "a never-inserted key was counted (a validated torn lane)"
    );
}
