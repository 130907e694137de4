//! Snapshots of grown filters.
//!
//! Round trips (to_bytes / from_bytes / read_from through a stingy reader) of filters grown to
//! many levels, for every width rule and several expansions: the restored filter must answer
//! exactly like the original, and keep doing so through further inserts (more growth) and
//! removes. Then corrupted level shapes and plan fields, with the checksum recomputed so only
//! the semantic checks stand between them and a wrong filter: a typed error, never a panic, and
//! never an accepted snapshot that loses a live item.

use crate::format_model;

use std::collections::HashMap;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::format_model::{seed, Rng, Snapshot};
use atomic_cuckoo::{Builder, CuckooFilter, Layout, PersistError};

#[derive(Clone, Copy, Debug)]
enum W {
    Bits(u32),
    Rate(f64),
}

fn build(capacity: usize, w: W, expansion: u32, max_levels: u32) -> CuckooFilter {
    let b = Builder::default()
        .capacity(capacity)
        .expansion(expansion)
        .max_levels(max_levels)
        // The snapshot model here reads buckets as one word each.
        .layout(Layout::OneWord)
        .huge_pages(false);
    match w {
        W::Bits(bits) => b.fingerprint_bits(bits),
        W::Rate(r) => b.false_positive_rate(r),
    }
    .build()
    .unwrap()
}

/// Reads at most 3 bytes per call (exercises the stream path's chunking).
struct Stingy<'a>(&'a [u8]);
impl Read for Stingy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(3).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

struct Live {
    copies: HashMap<u64, usize>,
    list: Vec<u64>,
}

impl Live {
    fn add(&mut self, k: u64) {
        *self.copies.entry(k).or_default() += 1;
        self.list.push(k);
    }
    fn take(&mut self, rng: &mut Rng) -> u64 {
        let k = self
            .list
            .swap_remove(rng.below(self.list.len() as u64) as usize);
        let c = self.copies.get_mut(&k).unwrap();
        *c -= 1;
        if *c == 0 {
            self.copies.remove(&k);
        }
        k
    }
}

fn assert_same(a: &CuckooFilter, b: &CuckooFilter, live: &Live, rng: &mut Rng, ctx: &str) {
    assert_eq!(a.len(), b.len(), "{ctx}: len");
    assert_eq!(a.levels(), b.levels(), "{ctx}: levels");
    assert_eq!(a.capacity(), b.capacity(), "{ctx}: capacity");
    assert_eq!(a.fingerprint_bits(), b.fingerprint_bits(), "{ctx}: bits");
    assert_eq!(a.level_stats(), b.level_stats(), "{ctx}: level stats");
    assert_eq!(
        a.false_positive_rate(),
        b.false_positive_rate(),
        "{ctx}: rate"
    );
    for (k, &c) in &live.copies {
        assert!(
            b.contains(k) && b.count(k) >= c,
            "{ctx}: live {k} ({c} copies) lost: contains={} count={}",
            b.contains(k),
            b.count(k)
        );
        assert_eq!(a.count(k), b.count(k), "{ctx}: count({k})");
    }
    for _ in 0..20_000 {
        let k = rng.next_u64();
        assert_eq!(a.contains(&k), b.contains(&k), "{ctx}: contains({k})");
        assert_eq!(a.count(&k), b.count(&k), "{ctx}: count({k})");
    }
}

#[test]
fn grown_filters_round_trip_and_keep_working() {
    let seed = seed("grown round trip");
    let mut rng = Rng::new(seed);
    let configs = [
        (10usize, W::Bits(4), 2u32, 16u32, 3_000usize),
        (7, W::Bits(5), 3, 12, 3_000),
        (20, W::Bits(8), 4, 8, 5_000),
        (3, W::Bits(13), 1, 30, 500),
        (50, W::Bits(16), 2, 10, 10_000),
        (5, W::Bits(21), 16, 6, 5_000),
        (1, W::Bits(32), 2, 20, 5_000),
        (10, W::Rate(0.01), 2, 32, 5_000),
        (10, W::Rate(0.2), 3, 64, 5_000),
        (2, W::Rate(1e-4), 2, 40, 3_000),
        (1, W::Rate(0.05), 1, 64, 300),
        (1, W::Bits(12), 1000, 3, 3_000),
    ];
    for (cap, w, exp, max_levels, n) in configs {
        let ctx = format!("seed={seed} cap={cap} {w:?} expansion={exp} max_levels={max_levels}");
        let a = build(cap, w, exp, max_levels);
        let mut live = Live {
            copies: HashMap::new(),
            list: Vec::new(),
        };
        let key_space = 2 * n as u64;
        for _ in 0..n {
            if rng.below(4) == 0 && !live.list.is_empty() {
                let k = live.take(&mut rng);
                assert!(a.remove(&k), "{ctx}: remove");
            } else {
                let k = rng.below(key_space);
                if a.insert(&k).is_ok() {
                    live.add(k);
                }
            }
        }
        let bytes = a.to_bytes();
        assert_eq!(bytes.len(), a.snapshot_size(), "{ctx}: snapshot_size");
        let b = CuckooFilter::from_bytes(&bytes).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let c = CuckooFilter::read_from(Stingy(&bytes)).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        println!(
            "{ctx}: {} levels, {} items, {} bytes",
            a.levels(),
            a.len(),
            bytes.len()
        );
        assert!(
            a.levels() >= 2 || max_levels < 2,
            "{ctx}: grew to only {} levels",
            a.levels()
        );
        assert_same(&a, &b, &live, &mut rng, &format!("{ctx} from_bytes"));
        assert_same(&a, &c, &live, &mut rng, &format!("{ctx} read_from"));
        assert_eq!(b.to_bytes(), bytes, "{ctx}: re-save differs");
        // Keep going in lockstep: the same operations give the same results and bytes.
        for _ in 0..n {
            if rng.below(3) == 0 && !live.list.is_empty() {
                let k = live.take(&mut rng);
                assert!(
                    a.remove(&k) && b.remove(&k) && c.remove(&k),
                    "{ctx}: remove after restore"
                );
            } else {
                let k = rng.below(4 * key_space);
                let (ra, rb, rc) = (a.insert(&k), b.insert(&k), c.insert(&k));
                assert!(
                    ra == rb && rb == rc,
                    "{ctx}: insert {k}: {ra:?} {rb:?} {rc:?}"
                );
                if ra.is_ok() {
                    live.add(k);
                }
            }
            let k = rng.below(4 * key_space);
            let (ua, ub) = (a.insert_unique(&k), b.insert_unique(&k));
            assert_eq!(ua, ub, "{ctx}: insert_unique {k}");
            assert_eq!(c.insert_unique(&k), ua);
            if ua == Ok(true) {
                live.add(k);
            }
        }
        assert_same(
            &a,
            &b,
            &live,
            &mut rng,
            &format!("{ctx} after more ops (b)"),
        );
        assert_same(
            &a,
            &c,
            &live,
            &mut rng,
            &format!("{ctx} after more ops (c)"),
        );
        assert_eq!(a.to_bytes(), b.to_bytes(), "{ctx}: diverged");
        assert_eq!(a.to_bytes(), c.to_bytes(), "{ctx}: diverged (stream)");
    }
}

/// Restores `bytes` both ways; panics are caught and reported as failures.
fn restore_both(bytes: &[u8]) -> (Result<CuckooFilter, String>, Result<CuckooFilter, String>) {
    let a = catch_unwind(AssertUnwindSafe(|| CuckooFilter::from_bytes(bytes)));
    let b = catch_unwind(AssertUnwindSafe(|| CuckooFilter::read_from(Stingy(bytes))));
    let f = |r: std::thread::Result<Result<CuckooFilter, PersistError>>| match r {
        Ok(Ok(f)) => Ok(f),
        Ok(Err(e)) => Err(format!("typed: {e:?}")),
        Err(p) => Err(format!(
            "PANIC: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or(p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    };
    (f(a), f(b))
}

#[test]
fn corrupted_level_shapes_and_plans_are_refused_or_harmless() {
    let seed = seed("corrupt shapes");
    let mut rng = Rng::new(seed);
    let mut panics = Vec::new();
    let (mut refused, mut accepted) = (0, 0);
    for (cap, w, exp) in [
        (10usize, W::Bits(8), 2u32),
        (10, W::Rate(0.01), 2),
        (5, W::Bits(4), 3),
        (3, W::Rate(0.2), 4),
        (1, W::Bits(32), 1),
    ] {
        let a = build(cap, w, exp, 20);
        let mut live = Live {
            copies: HashMap::new(),
            list: Vec::new(),
        };
        while a.levels() < 6 {
            let k = rng.next_u64();
            a.insert(&k).unwrap();
            live.add(k);
        }
        let snap = Snapshot::parse(&a.to_bytes());
        let mut variants: Vec<(String, Snapshot, bool)> = Vec::new();
        for j in 0..snap.levels.len() {
            let l = &snap.levels[j];
            for (what, buckets) in [
                ("buckets*2", l.buckets * 2),
                ("buckets/2", (l.buckets / 2) & !1),
                ("buckets+2", l.buckets + 2),
                ("buckets-2", l.buckets.saturating_sub(2)),
                ("buckets=2", 2),
            ] {
                if buckets == l.buckets || buckets < 2 {
                    continue;
                }
                let mut s = snap.clone();
                // Keep the words consistent with the claimed count: pad with empty buckets or
                // cut (possibly losing items: then the counts are recomputed).
                s.levels[j].words.resize(buckets, 0);
                s.levels[j].buckets = buckets;
                variants.push((format!("level {j} {what}"), s, false));
            }
            for bits in [l.bits.saturating_sub(1), l.bits + 1, 4, 8, 12, 16, 32] {
                if bits == l.bits || !(4..=32).contains(&bits) {
                    continue;
                }
                let mut s = snap.clone();
                s.levels[j].bits = bits;
                // Re-pack the fingerprints into the new width where they fit, so the item counts
                // and stray bits stay consistent and only the shape check can refuse it.
                let slots_new = (64 / bits) as usize;
                for word in s.levels[j].words.iter_mut() {
                    let fps: Vec<u64> = format_model::lanes(*word, l.bits)
                        .into_iter()
                        .filter(|&f| f != 0)
                        .map(|f| (f & ((1u64 << bits) - 1)).max(1))
                        .take(slots_new)
                        .collect();
                    *word = fps
                        .iter()
                        .enumerate()
                        .fold(0, |w, (k, &f)| w | (f << (k as u32 * bits)));
                }
                variants.push((format!("level {j} bits {}->{bits}", l.bits), s, false));
            }
        }
        // Levels swapped / dropped / duplicated.
        let mut s = snap.clone();
        s.levels.swap(1, 2);
        variants.push(("levels 1 and 2 swapped".into(), s, false));
        let mut s = snap.clone();
        let dup = s.levels[2].clone();
        s.levels.insert(2, dup);
        variants.push(("level 2 duplicated".into(), s, false));
        let mut s = snap.clone();
        s.levels.remove(0);
        // (With expansion 1 every level has the same shape: dropping one is a valid snapshot of
        // a filter without those items, so only "no panic" is asked of it.)
        variants.push(("level 0 dropped".into(), s, true));
        // Plan fields: expansion, capacity, max_levels, rate / bits (header words 2..=5).
        for (what, word, value) in [
            ("expansion+1", 2usize, snap.header[2] + (1 << 32)),
            ("expansion-1", 2, snap.header[2] - (1 << 32)),
            (
                "expansion*2",
                2,
                (snap.header[2] & 0xFFFF_FFFF) | ((snap.header[2] >> 32) * 2) << 32,
            ),
            (
                "expansion u32::MAX",
                2,
                (snap.header[2] & 0xFFFF_FFFF) | (0xFFFF_FFFFu64 << 32),
            ),
            ("capacity+1", 5, snap.header[5] + 1),
            ("capacity-1", 5, snap.header[5].saturating_sub(1)),
            ("capacity*2", 5, snap.header[5] * 2),
            ("capacity huge", 5, 1 << 40),
            ("max_levels 64", 3, (snap.header[3] & !0xFFFF_FFFF) | 64),
            ("max_levels 7", 3, (snap.header[3] & !0xFFFF_FFFF) | 7),
            (
                "rate*0.9",
                4,
                f64::to_bits(f64::from_bits(snap.header[4]) * 0.9),
            ),
            (
                "rate*0.5",
                4,
                f64::to_bits(f64::from_bits(snap.header[4]) * 0.5),
            ),
            (
                "rate*2",
                4,
                f64::to_bits(f64::from_bits(snap.header[4]) * 2.0),
            ),
        ] {
            let mut s = snap.clone();
            s.header[word] = value;
            variants.push((format!("header {what}"), s, false));
        }
        for (what, s, drops_items) in variants {
            let ctx = format!("seed={seed} cap={cap} {w:?} expansion={exp}: {what}");
            for keep_counts in [false, true] {
                let bytes = s.encode(keep_counts);
                let (x, y) = restore_both(&bytes);
                for r in [&x, &y] {
                    match r {
                        Err(e) if e.starts_with("PANIC") => panics.push(format!("{ctx}: {e}")),
                        Err(_) => refused += 1,
                        Ok(f) => {
                            accepted += 1;
                            // Accepted: it must be the same filter as far as the live items go
                            // and its shapes must still nest (it keeps taking inserts/removes).
                            let lost = live.copies.keys().filter(|k| !f.contains(*k)).count();
                            println!("{ctx}: accepted (lost {lost})");
                            assert!(
                                drops_items || lost == 0,
                                "{ctx}: accepted, and {lost} live items are lost"
                            );
                            for _ in 0..200 {
                                let k = rng.next_u64();
                                let _ = f.insert(&k);
                                assert!(
                                    f.contains(&k) && f.remove(&k),
                                    "{ctx}: accepted filter misbehaves"
                                );
                            }
                        }
                    }
                }
                assert_eq!(
                    x.is_ok(),
                    y.is_ok(),
                    "{ctx}: from_bytes and read_from disagree: {:?} / {:?}",
                    x.as_ref().err(),
                    y.as_ref().err()
                );
            }
        }
    }
    println!("{refused} refused, {accepted} accepted");
    assert!(
        panics.is_empty(),
        "{} panics:\n{}",
        panics.len(),
        panics.join("\n")
    );
}

/// Random words of the header and level headers replaced (checksum recomputed): never a panic.
#[test]
fn random_header_corruption_never_panics() {
    let seed = seed("header fuzz");
    let mut rng = Rng::new(seed);
    let a = build(5, W::Rate(0.05), 2, 12);
    for k in 0..500u64 {
        a.insert(&k).unwrap();
    }
    let snap = Snapshot::parse(&a.to_bytes());
    let mut panics = Vec::new();
    let mut ok = 0;
    for _ in 0..3_000 {
        let mut s = snap.clone();
        let value = match rng.below(4) {
            0 => rng.next_u64(),
            1 => rng.below(64),
            2 => 1u64 << rng.below(64),
            _ => u64::MAX - rng.below(4),
        };
        let target = rng.below(2 + s.levels.len() as u64);
        let what;
        if target < 2 {
            let w = 1 + rng.below(6) as usize;
            let v = if rng.below(2) == 0 {
                s.header[w] ^ value
            } else {
                value
            };
            what = format!("header word {w} = {v:#x}");
            s.header[w] = v;
        } else {
            let j = (target - 2) as usize;
            match rng.below(2) {
                0 => {
                    s.levels[j].bits = (value % 40) as u32;
                    what = format!("level {j} bits = {}", s.levels[j].bits);
                }
                _ => {
                    let b = (value % 4096) as usize & !1;
                    s.levels[j].words.resize(b, 0);
                    s.levels[j].buckets = b;
                    what = format!("level {j} buckets = {b}");
                }
            }
        }
        let bytes = std::panic::catch_unwind(|| s.encode(false));
        let Ok(bytes) = bytes else { continue };
        let (x, y) = restore_both(&bytes);
        for r in [&x, &y] {
            match r {
                Err(e) if e.starts_with("PANIC") => panics.push(format!("seed={seed} {what}: {e}")),
                Ok(f) => {
                    ok += 1;
                    let lost = (0..500u64).filter(|k| !f.contains(k)).count();
                    assert_eq!(lost, 0, "seed={seed} {what}: accepted and lost {lost}");
                }
                _ => {}
            }
        }
    }
    println!("{ok} accepted");
    assert!(
        panics.is_empty(),
        "{} panics, first: {:?}",
        panics.len(),
        &panics[..panics.len().min(5)]
    );
}
