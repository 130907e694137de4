//! `from_chunks` and `from_dump_payload` never panic and never allocate absurd
//! amounts on random, truncated, bit-flipped or adversarial inputs; what they accept is a
//! consistent filter that works. The binary's counting allocator records the largest single
//! request (and refuses anything over 1 GiB, which aborts the test binary: a failure).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::common::{seed, Rng};
use crate::counting_alloc::{largest_during, one_at_a_time};
use crate::serial_model::{dump_items, dump_occupied};
use atomic_cuckoo::redisbloom::{LoadError, RedisCuckooFilter, PORTABLE_RDB_VERSION};

fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// Replaces the footer's checksum so that the parser gets past it.
fn reseal(p: &mut [u8]) {
    if p.len() >= 10 {
        let n = p.len();
        let c = crc64(&p[..n - 8]);
        p[n - 8..].copy_from_slice(&c.to_le_bytes());
    }
}

/// A random valid filter (small geometry, random operations).
fn random_filter(rng: &mut Rng) -> RedisCuckooFilter {
    let bs = 1 + rng.below(9);
    let f = RedisCuckooFilter::builder()
        .capacity(2 * bs + rng.below(40))
        .bucket_size(bs)
        .expansion([0u64, 1, 2, 4][rng.below(4) as usize])
        .max_iterations(1 + rng.below(30))
        .max_expansions(4)
        .build()
        .unwrap();
    let n = 1 + rng.below(120);
    for i in 0..n {
        let _ = f.insert(rng.next_u64().to_le_bytes());
        if i % 5 == 4 {
            f.remove(rng.next_u64().to_le_bytes());
        }
    }
    if f.info().items == 0 {
        f.insert("x").unwrap();
    }
    f
}

/// Loaded filters must be consistent and usable.
fn exercise(g: &RedisCuckooFilter, rng: &mut Rng, ctx: &str) {
    let info = g.info();
    let chunks = g.scandump();
    assert_eq!(dump_items(&chunks), info.items, "{ctx}");
    assert_eq!(dump_occupied(&chunks), info.items, "{ctx}");
    for _ in 0..20 {
        let it = rng.next_u64().to_le_bytes();
        let _ = g.contains(it);
        let _ = g.count(it);
        if g.insert(it).is_ok() {
            assert!(g.contains(it), "{ctx}");
            assert!(g.remove(it), "{ctx}");
        }
    }
    g.compact();
    let chunks = g.scandump();
    if !chunks.is_empty() {
        RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice())))
            .unwrap_or_else(|e| panic!("{ctx}: re-dump does not load: {e:?}"));
    }
}

/// Runs a loader and checks: no panic, the largest allocation is bounded by `bound`.
fn guarded<T>(bound: usize, ctx: &str, f: impl FnOnce() -> T) -> T {
    let (r, largest) = largest_during(|| catch_unwind(AssertUnwindSafe(f)));
    let r = r.unwrap_or_else(|_| panic!("{ctx}: loader panicked"));
    assert!(
        largest <= bound,
        "{ctx}: allocated {largest} bytes at once (bound {bound})"
    );
    r
}

fn mutate_chunks(rng: &mut Rng, chunks: &mut Vec<(u64, Vec<u8>)>) {
    let k = rng.below(12);
    let n = chunks.len();
    let i = rng.below(n as u64) as usize;
    match k {
        0 => {
            chunks.remove(i);
        }
        1 => {
            let c = chunks[i].clone();
            chunks.push(c);
        }
        2 => {
            let len = chunks[i].1.len();
            let cut = rng.below(len as u64 + 1) as usize;
            chunks[i].1.truncate(cut);
        }
        3 => {
            chunks[i].0 = match rng.below(5) {
                0 => 0,
                1 => u64::MAX,
                2 => chunks[i].0.wrapping_add(1),
                3 => chunks[i].0.wrapping_sub(1),
                _ => rng.next_u64() >> rng.below(64),
            }
        }
        4 | 5 => {
            let len = chunks[i].1.len();
            if len > 0 {
                let at = rng.below(len as u64) as usize;
                chunks[i].1[at] ^= 1 << rng.below(8);
            }
        }
        6 => {
            // A header field set to a random or extreme value.
            let h = &mut chunks[0].1;
            if h.len() == 38 {
                let field = [0usize, 8, 16, 24, 32, 34, 36][rng.below(7) as usize];
                let width = if field < 32 { 8 } else { 2 };
                let v = match rng.below(4) {
                    0 => 0u64,
                    1 => u64::MAX,
                    2 => 1 << rng.below(64),
                    _ => rng.next_u64(),
                };
                h[field..field + width].copy_from_slice(&v.to_le_bytes()[..width]);
            }
        }
        7 => {
            // Split a chunk in two (still valid).
            let (it, d) = chunks[i].clone();
            if i > 0 && d.len() > 1 {
                let cut = 1 + rng.below(d.len() as u64 - 1) as usize;
                chunks[i] = (it.wrapping_sub((d.len() - cut) as u64), d[..cut].to_vec());
                chunks.push((it, d[cut..].to_vec()));
            }
        }
        8 => {
            let len = rng.below(64) as usize;
            let d: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            chunks.push((rng.next_u64() >> rng.below(64), d));
        }
        9 => {
            // Shuffle the data chunks (valid).
            for j in (2..n).rev() {
                let k = 1 + rng.below(j as u64) as usize;
                chunks.swap(j, k);
            }
        }
        10 => {
            chunks.swap(0, i);
        }
        _ => {
            chunks.truncate(i);
        }
    }
}

#[test]
fn mutated_chunk_lists_never_panic_or_overallocate() {
    let _one = one_at_a_time();
    let s = seed("mutated_chunk_lists");
    let mut rng = Rng::new(s);
    let (mut ok, mut err) = (0, 0);
    for case in 0..4000 {
        let f = random_filter(&mut rng);
        let mut chunks = f.scandump();
        for _ in 0..1 + rng.below(3) {
            if !chunks.is_empty() {
                mutate_chunks(&mut rng, &mut chunks);
            }
        }
        let ctx = format!("seed {s} case {case}");
        let input: usize = chunks.iter().map(|c| c.1.len() + 16).sum();
        let r = guarded((1 << 20).max(4 * input), &ctx, || {
            RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice())))
        });
        match r {
            Ok(g) => {
                ok += 1;
                exercise(&g, &mut rng, &ctx);
            }
            Err(e) => {
                err += 1;
                let _ = e.to_string();
            }
        }
    }
    println!("{ok} accepted, {err} refused");
    assert!(ok > 100 && err > 100, "{ok} / {err}");
}

#[test]
fn mutated_payloads_never_panic_or_overallocate() {
    let _one = one_at_a_time();
    let s = seed("mutated_payloads");
    let mut rng = Rng::new(s);
    let (mut ok, mut err) = (0, 0);
    for case in 0..4000 {
        let f = random_filter(&mut rng);
        let version = 9 + rng.below(4) as u16;
        let mut p = f.dump_payload(version);
        let sealed = rng.below(4) != 0;
        for _ in 0..1 + rng.below(3) {
            match rng.below(6) {
                0 => {
                    let cut = rng.below(p.len() as u64 + 1) as usize;
                    p.truncate(cut);
                }
                1 | 2 => {
                    if !p.is_empty() {
                        let at = rng.below(p.len() as u64) as usize;
                        p[at] ^= 1 << rng.below(8);
                    }
                }
                3 => {
                    // Overwrite a run in the first 40 bytes (type, id, header fields).
                    let at = rng.below(40.min(p.len() as u64).max(1)) as usize;
                    let len = (1 + rng.below(9) as usize).min(p.len().saturating_sub(at));
                    for b in &mut p[at..at + len] {
                        *b = rng.next_u64() as u8;
                    }
                }
                4 => {
                    let at = rng.below(p.len() as u64 + 1) as usize;
                    let extra: Vec<u8> = (0..rng.below(16)).map(|_| rng.next_u64() as u8).collect();
                    p.splice(at..at, extra);
                }
                _ => {
                    let at = rng.below(p.len() as u64 + 1) as usize;
                    let len = rng.below((p.len() - at) as u64 + 1) as usize;
                    p.drain(at..at + len);
                }
            }
        }
        if sealed {
            reseal(&mut p);
        }
        let ctx = format!("seed {s} case {case}");
        let r = guarded((1 << 20).max(100 * p.len()), &ctx, || {
            RedisCuckooFilter::from_dump_payload(&p)
        });
        match r {
            Ok(g) => {
                ok += 1;
                exercise(&g, &mut rng, &ctx);
            }
            Err(e) => {
                err += 1;
                let _ = e.to_string();
            }
        }
    }
    println!("{ok} accepted, {err} refused");
    assert!(ok > 50 && err > 100, "{ok} / {err}");
}

#[test]
fn random_bytes_never_panic() {
    let _one = one_at_a_time();
    let s = seed("random_bytes_never_panic");
    let mut rng = Rng::new(s);
    for case in 0..20_000 {
        let len = rng.below(120) as usize;
        let mut p: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if rng.below(2) == 0 && !p.is_empty() {
            p[0] = 7;
        }
        if p.len() >= 10 {
            let n = p.len();
            p[n - 10..n - 8].copy_from_slice(&(9 + rng.below(4) as u16).to_le_bytes());
        }
        reseal(&mut p);
        let ctx = format!("seed {s} case {case}");
        guarded(1 << 20, &ctx, || {
            let _ = RedisCuckooFilter::from_dump_payload(&p);
        });
        let chunks: Vec<(u64, Vec<u8>)> = (0..rng.below(4))
            .map(|i| {
                let l = if i == 0 { 38 } else { rng.below(50) as usize };
                let d: Vec<u8> = (0..l).map(|_| rng.next_u64() as u8).collect();
                (
                    if i == 0 {
                        1
                    } else {
                        rng.next_u64() >> rng.below(64)
                    },
                    d,
                )
            })
            .collect();
        guarded(1 << 20, &ctx, || {
            let _ = RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice())));
        });
    }
}

fn header(
    items: u64,
    buckets: u64,
    deletes: u64,
    filters: u64,
    bs: u16,
    mi: u16,
    exp: u16,
) -> Vec<u8> {
    let mut h = Vec::new();
    for v in [items, buckets, deletes, filters] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    for v in [bs, mi, exp] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    h
}

/// Owned SCANDUMP replies.
type Chunks = Vec<(u64, Vec<u8>)>;

fn load(chunks: &[(u64, Vec<u8>)]) -> Result<RedisCuckooFilter, LoadError> {
    RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice())))
}

#[test]
fn adversarial_headers_allocate_nothing_big() {
    let _one = one_at_a_time();
    let cases: Vec<(&str, Chunks)> = vec![
        (
            "2^40 bytes claimed, 1 byte given",
            vec![(1, header(1, 1 << 39, 0, 1, 2, 20, 1)), (2, vec![1])],
        ),
        (
            "2^40 bytes claimed, 1 byte at the very end",
            vec![
                (1, header(1, 1 << 39, 0, 1, 2, 20, 1)),
                ((1 << 40) + 1, vec![1]),
            ],
        ),
        (
            "4 GiB sub-filter, 1 byte",
            vec![(1, header(1, 1 << 32, 0, 1, 1, 20, 1)), (2, vec![1])],
        ),
        (
            "65535 huge sub-filters",
            vec![(1, header(1, 1 << 20, 0, 65535, 255, 20, 2)), (2, vec![1])],
        ),
        (
            "expansion 32768 x 3",
            vec![(1, header(1, 1 << 20, 0, 3, 255, 20, 32768)), (2, vec![1])],
        ),
        (
            "u64::MAX iterator",
            vec![(1, header(1, 4, 0, 1, 1, 20, 1)), (u64::MAX, vec![1; 4])],
        ),
        (
            "items u64::MAX",
            vec![(1, header(u64::MAX, 4, 0, 1, 1, 20, 1)), (5, vec![1; 4])],
        ),
        (
            "buckets 2^63",
            vec![(1, header(1, 1 << 63, 0, 1, 1, 20, 1)), (2, vec![1])],
        ),
        (
            "filters 2^16 + 1 (truncated to u16 by Redis)",
            vec![(1, header(4, 4, 0, 65537, 1, 20, 1)), (5, vec![1; 4])],
        ),
    ];
    for (name, chunks) in cases {
        let r = guarded(1 << 20, name, || load(&chunks));
        assert!(r.is_err(), "{name}: accepted");
    }
    // Many tiny chunks: the bookkeeping stays proportional to the input.
    let n = 200_000u64;
    let mut chunks = vec![(1, header(n, n.next_power_of_two(), 0, 1, 1, 20, 1))];
    for i in 0..n {
        chunks.push((i + 2, vec![1]));
    }
    let r = guarded(64 << 20, "many tiny chunks", || load(&chunks));
    assert!(r.is_err(), "the stream is not covered");
}

/// The payload side: string lengths and LZF lengths that claim more than the payload.
#[test]
fn adversarial_payloads_allocate_nothing_big() {
    let _one = one_at_a_time();
    fn body(fields: [u64; 7]) -> Vec<u8> {
        let mut p = vec![0x07, 0x81, 0x30, 0x16, 0xe5, 0xa2, 0x89, 0x82, 0x14, 0x04];
        for v in fields {
            p.push(0x02);
            p.push(0x81);
            p.extend_from_slice(&v.to_be_bytes());
        }
        p
    }
    fn seal(mut p: Vec<u8>) -> Vec<u8> {
        p.extend_from_slice(&10u16.to_le_bytes());
        let c = crc64(&p);
        p.extend_from_slice(&c.to_le_bytes());
        p
    }
    // nf nb items deletes bs mi exp
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut p = body([1, 1 << 32, 1, 0, 1, 20, 1]);
    p.extend_from_slice(&[0x02, 0x81]);
    p.extend_from_slice(&(1u64 << 32).to_be_bytes());
    p.extend_from_slice(&[0x05, 0x81]);
    p.extend_from_slice(&(1u64 << 32).to_be_bytes());
    p.push(1);
    cases.push(("4 GiB plain string, 1 byte", seal(p)));
    let mut p = body([1, 1 << 32, 1, 0, 1, 20, 1]);
    p.extend_from_slice(&[0x02, 0x81]);
    p.extend_from_slice(&(1u64 << 32).to_be_bytes());
    p.extend_from_slice(&[0x05, 0xc3, 0x03, 0x81]);
    p.extend_from_slice(&(1u64 << 32).to_be_bytes());
    p.extend_from_slice(&[0x00, 0x01, 0xe0]);
    cases.push(("4 GiB LZF string from 3 bytes", seal(p)));
    let mut p = body([1, 1 << 39, 1, 0, 2, 20, 1]);
    p.extend_from_slice(&[0x02, 0x81]);
    p.extend_from_slice(&(1u64 << 39).to_be_bytes());
    p.extend_from_slice(&[0x05, 0x81]);
    p.extend_from_slice(&u64::MAX.to_be_bytes());
    cases.push(("u64::MAX string length", seal(p)));
    cases.push(("u64::MAX fields", seal(body([u64::MAX; 7]))));
    cases.push((
        "65535 filters",
        seal(body([65535, 1 << 20, 1, 0, 255, 20, 2])),
    ));
    for (name, p) in cases {
        let r = guarded(1 << 20, name, || RedisCuckooFilter::from_dump_payload(&p));
        assert!(r.is_err(), "{name}: accepted");
    }
}

/// Round trips still work under the counting allocator (sanity of the harness).
#[test]
fn valid_inputs_load() {
    let _one = one_at_a_time();
    let s = seed("valid_inputs_load");
    let mut rng = Rng::new(s);
    for _ in 0..200 {
        let f = random_filter(&mut rng);
        let chunks = f.scandump();
        let g = load(&chunks).unwrap();
        assert_eq!(g.scandump(), chunks);
        let p = f.dump_payload(PORTABLE_RDB_VERSION);
        let h = RedisCuckooFilter::from_dump_payload(&p).unwrap();
        assert_eq!(h.scandump(), chunks);
    }
}
