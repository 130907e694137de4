//! The key mapping of nested levels, through the public API.
//!
//! A pass-through hasher puts any 64-bit hash into the filter; crafted snapshots (FORMAT.md,
//! checksum recomputed) give empty filters with the real level shapes a plan produces, or a
//! single fingerprint in a chosen bucket. From `contains` alone we recover, for every bucket
//! `i` and fingerprint, the set of primaries that find it: it must be `{i, alt(i)}` with
//! `alt(i) != i` and `alt(alt(i)) = i`. Then nesting: for hashes that collide in level `j`
//! (found with an independent model of FORMAT.md's mapping, checked against the filter), a
//! filter whose only copy sits in an older level `i` must find the collider too.

use crate::format_model::{geos, seed, Geo, Id, Rng, Snapshot};
use atomic_cuckoo::{Builder, CuckooFilter, Layout};

#[derive(Clone, Copy, Debug)]
enum W {
    Bits(u32),
    Rate(f64),
}

fn build(capacity: usize, w: W, expansion: u32, max_levels: u32) -> CuckooFilter<Id> {
    let b = Builder::default()
        .capacity(capacity)
        .expansion(expansion)
        .max_levels(max_levels)
        // The snapshot model here reads buckets as one word each.
        .layout(Layout::OneWord)
        .huge_pages(false)
        .hasher(Id);
    let b = match w {
        W::Bits(bits) => b.fingerprint_bits(bits),
        W::Rate(r) => b.false_positive_rate(r),
    };
    b.build().unwrap()
}

/// Grows a filter with random items until it has `levels` levels or its newest level would
/// pass `max_buckets` buckets; returns the snapshot (all levels' shapes).
fn grown_shapes(
    capacity: usize,
    w: W,
    expansion: u32,
    max_levels: u32,
    levels: usize,
    max_slots: usize,
    rng: &mut Rng,
) -> Snapshot {
    let f = build(capacity, w, expansion, max_levels);
    while f.levels() < levels && f.slots() < max_slots {
        f.insert(&rng.next_u64()).unwrap();
    }
    Snapshot::parse(&f.to_bytes())
}

fn restore(s: &Snapshot) -> CuckooFilter<Id> {
    CuckooFilter::from_bytes_with_hasher(&s.encode(false), Id).expect("crafted snapshot")
}

/// The fingerprints to try for width `f`: all of them up to 8 bits, else a sample.
fn fingerprints(f: u32, rng: &mut Rng, sample: usize) -> Vec<u64> {
    let max = (1u64 << f) - 1;
    if f <= 6 {
        return (1..=max).collect();
    }
    let mut v = vec![1, 2, 3, max, max - 1, max / 2, max / 2 + 1];
    v.extend((0..sample).map(|_| 1 + rng.below(max)));
    v
}

#[test]
fn alternate_is_a_fixed_point_free_involution_seen_through_contains() {
    let seed = seed("alternate black box");
    let mut rng = Rng::new(seed);
    let mut checked = 0u64;
    let mut shapes = Vec::new();
    for (cap, w, exp) in [
        (1usize, W::Bits(4), 2u32),
        (1, W::Bits(32), 2),
        (3, W::Bits(8), 3),
        (5, W::Bits(12), 2),
        (1, W::Rate(0.01), 2),
        (2, W::Rate(0.2), 4),
        (7, W::Bits(5), 1),
    ] {
        let snap = grown_shapes(cap, w, exp, 8, 8, 600, &mut rng);
        let g = geos(&snap);
        for (j, &geo) in g.iter().enumerate().take(snap.levels.len()) {
            if geo.n > 64 {
                continue;
            }
            shapes.push((cap, format!("{w:?}"), exp, j, geo));
            // The primary: an item inserted into an empty level lands in its primary bucket
            // (both buckets empty: the primary is tried first) with the spec's fingerprint.
            for _ in 0..20 {
                let h = rng.next_u64();
                let f = restore(&snap.emptied(j + 1));
                f.insert(&h).unwrap();
                let after = Snapshot::parse(&f.to_bytes());
                let holders: Vec<(usize, u64)> = after.levels[j]
                    .words
                    .iter()
                    .enumerate()
                    .filter(|(_, &w)| w != 0)
                    .map(|(b, &w)| (b, w & ((1u64 << geo.f) - 1)))
                    .collect();
                assert_eq!(
                    holders,
                    vec![(geo.primary(h) as usize, geo.fp(h))],
                    "seed={seed} {geo:?} level {j} h={h:#x}: not stored where FORMAT.md says"
                );
            }
            let base = snap.emptied(j + 1);
            for fp in fingerprints(geo.f, &mut rng, 24) {
                let mut partner = vec![u64::MAX; geo.n as usize];
                for i in 0..geo.n {
                    let mut s = base.clone();
                    s.levels[j].words[i as usize] = fp;
                    let f = restore(&s);
                    let finders: Vec<u64> = (0..geo.n)
                        .filter(|&p| f.contains(&geo.hash_for(p, fp, rng.next_u64())))
                        .collect();
                    checked += 1;
                    assert!(
                        finders.contains(&i),
                        "seed={seed} {geo:?} level {j} fp={fp}: item with primary {i} does not \
                         find its fingerprint in bucket {i}"
                    );
                    let others: Vec<u64> = finders.iter().copied().filter(|&p| p != i).collect();
                    assert_eq!(
                        others.len(),
                        1,
                        "seed={seed} {geo:?} level {j} fp={fp} bucket {i}: primaries finding it \
                         {finders:?} (want exactly {{i, alt(i)}} with alt(i) != i)"
                    );
                    partner[i as usize] = others[0];
                    assert_eq!(
                        others[0],
                        geo.alt(i, fp),
                        "seed={seed} {geo:?} level {j} fp={fp} bucket {i}: alternate differs \
                         from FORMAT.md"
                    );
                }
                for i in 0..geo.n as usize {
                    let m = partner[i] as usize;
                    assert!(
                        m != i && partner[m] == i as u64,
                        "seed={seed} {geo:?} level {j} fp={fp}: not an involution at {i}"
                    );
                }
            }
        }
    }
    println!(
        "{} shapes, {checked} (bucket, fingerprint) pairs",
        shapes.len()
    );
    for s in &shapes {
        println!("  {s:?}");
    }
    assert!(shapes.len() >= 12, "too few small shapes");
}

/// For real plans (widths that change, fixed widths, expansions 1, 2, 3, 4, 16, 1000), every
/// pair of hashes that collides in level `j` collides in each older level `i`, as the filter
/// itself answers: a filter holding only the first hash, in level `i`, finds the second.
#[test]
fn a_collision_in_a_newer_level_is_one_in_every_older_level_on_real_shapes() {
    let seed = seed("nesting black box");
    let mut rng = Rng::new(seed);
    let configs: Vec<(usize, W, u32, u32, usize)> = vec![
        (1, W::Rate(0.01), 2, 32, 12),
        (100, W::Rate(0.01), 2, 32, 8),
        (10, W::Rate(0.001), 3, 32, 8),
        (3, W::Rate(0.3), 2, 64, 14),
        (1, W::Rate(0.05), 1, 64, 10),
        (1, W::Rate(0.5), 4, 64, 8),
        (5, W::Bits(4), 2, 20, 14),
        (5, W::Bits(7), 3, 20, 10),
        (9, W::Bits(16), 4, 20, 7),
        (2, W::Bits(32), 16, 20, 5),
        (1, W::Bits(12), 1000, 4, 3),
        (11, W::Bits(21), 1, 10, 6),
        (1, W::Rate(1e-6), 2, 40, 12),
    ];
    let mut pairs = 0u64;
    let mut width_changes = 0;
    for (cap, w, exp, max_levels, levels) in configs {
        let snap = grown_shapes(cap, w, exp, max_levels, levels, 1 << 21, &mut rng);
        let g = geos(&snap);
        let desc = format!(
            "cap={cap} {w:?} expansion={exp} max_levels={max_levels}: levels (buckets, bits) {:?}",
            g.iter().map(|x| (x.n, x.f)).collect::<Vec<_>>()
        );
        println!("{desc}");
        width_changes += g.windows(2).filter(|p| p[0].f != p[1].f).count();
        for pair in g.windows(2) {
            assert!(
                pair[1].n % pair[0].n == 0 && pair[1].f >= pair[0].f,
                "seed={seed} {desc}: levels do not nest"
            );
        }
        // Level j alone: filters[j] has levels 0..=j, all empty.
        let filters: Vec<CuckooFilter<Id>> = (0..g.len())
            .map(|j| restore(&snap.emptied(j + 1)))
            .collect();
        for (j, gj) in g.iter().enumerate() {
            let trials = if gj.n > 1 << 16 { 30 } else { 150 };
            for _ in 0..trials {
                let x = rng.next_u64();
                let (p, fp) = (gj.primary(x), gj.fp(x));
                // Colliders of x in level j: the same fingerprint in x's primary or alternate,
                // with any bits below the fingerprint.
                let ys: Vec<u64> = (0..6)
                    .map(|k| {
                        let bucket = if k % 2 == 0 { p } else { gj.alt(p, fp) };
                        gj.hash_for(bucket, fp, rng.next_u64())
                    })
                    .collect();
                filters[j].insert(&x).unwrap();
                for &y in &ys {
                    assert!(
                        filters[j].contains(&y),
                        "seed={seed} {desc}: x={x:#x} y={y:#x} should collide in level {j} \
                         (FORMAT.md) but the filter does not find y"
                    );
                }
                // Random hashes: found exactly when FORMAT.md says they collide.
                for _ in 0..4 {
                    let z = rng.next_u64();
                    assert_eq!(
                        filters[j].contains(&z),
                        gj.key(z) == gj.key(x),
                        "seed={seed} {desc}: level {j} x={x:#x} z={z:#x}"
                    );
                }
                assert!(filters[j].remove(&x));
                for (i, gi) in g.iter().enumerate().take(j) {
                    filters[i].insert(&x).unwrap();
                    for &y in &ys {
                        pairs += 1;
                        assert_eq!(gi.key(x), gi.key(y), "model: {gi:?}");
                        assert!(
                            filters[i].contains(&y),
                            "seed={seed} {desc}: x={x:#x} and y={y:#x} collide in level {j} \
                             but not in older level {i}: NOT NESTED"
                        );
                    }
                    assert!(filters[i].remove(&x));
                }
            }
        }
        for f in &filters {
            assert!(f.is_empty());
        }
    }
    println!("{pairs} (collision, older level) pairs checked; {width_changes} width changes");
    assert!(width_changes >= 3);
}

/// The same properties on FORMAT.md's mapping for shapes too large to allocate: bases of 2
/// and more buckets, up to 2^31 doublings, widths 4..=32 with every base width below.
#[test]
fn format_md_mapping_nests_for_every_digit_count_up_to_31() {
    let seed = seed("spec nesting");
    let mut rng = Rng::new(seed);
    let mut checks = 0u64;
    for n0 in [
        2u64,
        4,
        6,
        10,
        1000,
        12_346,
        1 << 20,
        (1 << 31) + 2,
        1 << 32,
    ] {
        for d in 0..=31u32 {
            let Some(n) = n0.checked_shl(d).filter(|&n| n <= 1 << 32 && n >> d == n0) else {
                continue;
            };
            for f in [4u32, 5, 8, 12, 16, 21, 32] {
                for f0 in [4u32, 8, 12, 16, 32].into_iter().filter(|&b| b <= f) {
                    let g = Geo { n, f, n0, f0 };
                    for _ in 0..40 {
                        let i = rng.below(n);
                        let fp = 1 + rng.below((1 << f) - 1);
                        let a = g.alt(i, fp);
                        assert!(a < n && a != i && g.alt(a, fp) == i, "{g:?} i={i} fp={fp}");
                        // Every older level e digits down, with any older width.
                        let x = g.hash_for(i, fp, rng.next_u64());
                        let y =
                            g.hash_for(if rng.below(2) == 0 { i } else { a }, fp, rng.next_u64());
                        for e in 0..=d {
                            for fi in [f0, (f0 + f) / 2, f] {
                                let older = Geo {
                                    n: n >> e,
                                    f: fi,
                                    n0,
                                    f0,
                                };
                                assert_eq!(older.key(x), older.key(y), "{g:?} -> {older:?}");
                                checks += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    println!("{checks} checks");
}
